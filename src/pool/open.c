/* open.c - tether_pool_open: a PostgreSQL pool from one connection string.
 * The string names the hosts, the strategy, the role target and the pool's
 * settings (docs/conninfo.md); the pool owns the connector it builds. */
#include "pool.h"

static void opts_from_cfg(tether_pool_opts *po, const tether__conncfg *cfg,
                          tether_connector *c) {
    tether_pool_opts_init(po);
    po->connector = c;
    po->name = cfg->display; /* password masked */
    po->min_size = cfg->pool_min;
    po->max_size = cfg->pooling ? cfg->pool_max : 1;
    po->acquire_timeout_ms = cfg->acquire_timeout_ms;
    po->idle_timeout_ms = cfg->idle_timeout_ms;
    po->max_lifetime_ms = cfg->max_lifetime_ms;
    po->validate_idle_ms = cfg->validate_idle_ms;
    po->probe_idle_us = cfg->probe_idle_us;
    po->barge_limit_us = cfg->barge_limit_us;
    po->leak_threshold_ms = cfg->leak_threshold_ms;
    po->reset_query = cfg->reset_query;
    po->retry = cfg->retry;
    po->breaker = cfg->breaker;
}

int tether_pool_open(tether_pool **out, const char *conninfo,
                     tether_event_fn on_event, void *event_ctx,
                     tether_error *err) {
    *out = NULL;
    tether_connector_opts co;
    tether_connector_opts_init(&co);
    co.conninfo = conninfo;
    co.on_event = on_event;
    co.event_ctx = event_ctx;
    tether_connector *c = NULL;
    int rc = tether_connector_create(&c, &co, err);
    if (rc)
        return rc;
    tether_pool_opts po;
    opts_from_cfg(&po, &c->cfg, c);
    rc = tether_pool_create(out, &po, err);
    if (rc) {
        tether_connector_destroy(c);
        return rc;
    }
    (*out)->own_connector = c;
    return 0;
}
