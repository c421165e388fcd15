/* open.c - tether_pool_open: a PostgreSQL pool from one connection string.
 * The connector takes the hosts, the strategy and the role target; the
 * pool's own keywords (tether_pool_max and the rest, docs/conninfo.md) are
 * mapped here onto tether_pool_opts. The pool owns the connector. */
#include "conninfo.h"
#include "pool.h"

#include <stdlib.h>
#include <string.h>

typedef tether__pool_keys pool_keys;

/* tether_retry and tether_breaker: policy specs (docs/policy-spec.md). */
static int set_policy(void *base, const char *key, const char *v,
                      tether_error *err) {
    tether_pool_opts *o = &((pool_keys *)base)->o;
    tether_error e2 = {0};
    int rc = !strcmp(key, "tether_retry")
                 ? tether_retry_opts_parse(v, &o->retry, &e2)
                 : tether_breaker_opts_parse(v, &o->breaker, &e2);
    if (rc == 0)
        return 0;
    return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                            "connection string: %s: %s", key, e2.message);
}

/* tether_pool_name: checked here, stored by tether__conninfo_pool_name. */
static int check_name(void *base, const char *key, const char *v,
                      tether_error *err) {
    (void)base;
    return tether__conninfo_name_check(key, v, err);
}

#define PK(f) offsetof(pool_keys, f)
#define OPT(f) offsetof(pool_keys, o.f)

static const tether__keydef pool_keys_defs[] = {
    TETHER__KD_CALL("tether_pool_name", check_name),
    TETHER__KD_RANGE("tether_pool_min", TETHER__KD_INT, OPT(min_size), 0,
                     100000),
    TETHER__KD_RANGE("tether_pool_max", TETHER__KD_INT, OPT(max_size), 1,
                     100000),
    TETHER__KD("tether_pooling", TETHER__KD_BOOL, PK(pooling)),
    TETHER__KD("tether_acquire_timeout", TETHER__KD_MS,
               OPT(acquire_timeout_ms)),
    TETHER__KD("tether_idle_timeout", TETHER__KD_MS, OPT(idle_timeout_ms)),
    TETHER__KD("tether_max_lifetime", TETHER__KD_MS, OPT(max_lifetime_ms)),
    TETHER__KD("tether_validate_idle", TETHER__KD_MS, OPT(validate_idle_ms)),
    TETHER__KD("tether_probe_idle", TETHER__KD_MS, OPT(probe_idle_ms)),
    TETHER__KD_RANGE("tether_barge_limit_us", TETHER__KD_I64,
                     OPT(barge_limit_us), 0, 1000000000),
    TETHER__KD_RANGE("tether_max_waiters", TETHER__KD_INT, OPT(max_waiters), 0,
                     100000000),
    TETHER__KD("tether_leak_threshold", TETHER__KD_MS, OPT(leak_threshold_ms)),
    TETHER__KD("tether_reset_query", TETHER__KD_STR, PK(reset_query)),
    TETHER__KD_CALL("tether_retry", set_policy),
    TETHER__KD_CALL("tether_breaker", set_policy),
    TETHER__KD_END};

int tether__pool_keys_parse(const char *conninfo, pool_keys *k,
                            tether_error *err) {
    memset(k, 0, sizeof(*k));
    tether_pool_opts_init(&k->o);
    k->pooling = 1;
    tether__conninfo ci;
    int rc = tether__conninfo_parse(conninfo, &ci, err);
    for (size_t i = 0; rc == 0 && i < ci.n; i++)
        if (tether__conninfo_kind(ci.kv[i].key) == TETHER__KW_POOL)
            rc = tether__keydefs_apply(pool_keys_defs, k, ci.kv[i].key,
                                       ci.kv[i].val, err);
    if (rc == 0)
        rc = tether__conninfo_pool_name(&ci, &k->name, err);
    tether__conninfo_free(&ci);
    if (rc == 0 && k->o.min_size > k->o.max_size)
        rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                              "connection string: tether_pool_min (%d) is "
                              "above tether_pool_max (%d)",
                              k->o.min_size, k->o.max_size);
    if (rc == 0 && !k->pooling && k->o.min_size > 1)
        rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                              "connection string: tether_pool_min (%d) with "
                              "tether_pooling=off (a pool of one)",
                              k->o.min_size);
    if (!k->pooling)
        k->o.max_size = 1;
    k->o.reset_query = k->reset_query;
    k->o.name = k->name;
    return rc;
}

void tether__pool_keys_free(pool_keys *k) {
    tether__free(k->reset_query);
    tether__free(k->name);
}

/* open_connector makes the pool's connector from the same string. */
static int open_connector(const char *conninfo, tether_event_fn on_event,
                          void *event_ctx, tether_connector **c,
                          tether_error *err) {
    tether_connector_opts co;
    tether_connector_opts_init(&co);
    co.conninfo = conninfo;
    co.on_event = on_event;
    co.event_ctx = event_ctx;
    return tether_connector_create(c, &co, err);
}

int tether_pool_open(tether_pool **out, const char *conninfo,
                     tether_event_fn on_event, void *event_ctx,
                     tether_error *err) {
    if (!out)
        return tether__null(err, "tether_pool_open", "out");
    *out = NULL;
    if (!conninfo)
        return tether__null(err, "tether_pool_open", "conninfo");
    pool_keys k;
    tether_connector *c = NULL;
    int rc = tether__pool_keys_parse(conninfo, &k, err);
    if (rc == 0)
        rc = open_connector(conninfo, on_event, event_ctx, &c, err);
    if (rc == 0) {
        k.o.connector = c;
        rc = tether_pool_create(out, &k.o, err);
    }
    tether__pool_keys_free(&k);
    if (rc) {
        tether_connector_destroy(c);
        return rc;
    }
    (*out)->own_connector = c;
    return 0;
}
