/* open.c - tether_pool_open: a PostgreSQL pool from one connection string,
 * parsed once into a keyword set (conninfo.h) that the pool's keywords,
 * the connector and a routing pool's sides all read. The connector takes
 * the hosts, the strategy and the role target; the pool's own keywords
 * (tether_pool_max and the rest, docs/conninfo.md) are defined in the table
 * here and mapped onto tether_pool_opts. The pool owns the connector. */
#include "pool_open.h"
#include "connector.h"
#include "conninfo.h"
#include "duration.h"
#include "live.h"
#include "pool.h"
#include "route.h"

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

/* A size of WAL: digits and a unit B, kB, MB or GB (1024-based, as
 * PostgreSQL's memory units). Returns 0 with *bytes set, or -1. */
static int parse_size(const char *v, int64_t *bytes) {
    static const struct {
        const char *unit;
        int64_t mult;
    } units[] = {{"B", 1},
                 {"kB", 1024},
                 {"MB", 1024 * 1024},
                 {"GB", 1024LL * 1024 * 1024}};
    char *end;
    if (*v < '0' || *v > '9')
        return -1;
    long long n = strtoll(v, &end, 10);
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (!strcmp(end, units[i].unit) && n <= INT64_MAX / units[i].mult) {
            *bytes = n * units[i].mult;
            return 0;
        }
    return -1;
}

/* tether_max_standby_lag: a duration (replay delay), a size of WAL
 * (received, not replayed), or off. */
static int set_lag(void *base, const char *key, const char *v,
                   tether_error *err) {
    tether__route_keys *r = &((pool_keys *)base)->route;
    int64_t n;
    r->max_lag_ms = r->max_lag_bytes = -1;
    if (!strcmp(v, "off"))
        return 0;
    if (parse_size(v, &n) == 0) {
        r->max_lag_bytes = n;
        return 0;
    }
    if (tether__duration_parse(v, &n) == 0) {
        r->max_lag_ms = n;
        return 0;
    }
    return tether__conninfo_bad_value(key, v,
                                      "want a duration (500ms, 5s), a size "
                                      "of WAL (64kB, 16MB, 1GB) or off",
                                      err);
}

static const char *const route_names[] = {"none", "read-write-split", NULL};

/* tether_pool_limit: the index is tether_pool_opts.limit's value. */
static const char *const limit_names[] = {"fixed", "adaptive", NULL};

#define PK(f) offsetof(pool_keys, f)
#define OPT(f) offsetof(pool_keys, o.f)

static const tether__keydef pool_keys_defs[] = {
    TETHER__KD_CALL("tether_pool_name", check_name,
                    "the pool's name in metric labels, errors and logs"),
    TETHER__KD_RANGE("tether_pool_min", TETHER__KD_INT, OPT(min_size), 0,
                     100000, "connections kept open"),
    TETHER__KD_RANGE("tether_pool_max", TETHER__KD_INT, OPT(max_size), 1,
                     100000, "the most connections"),
    TETHER__KD_RANGE("tether_pool_max_limit", TETHER__KD_INT,
                     OPT(max_size_limit), 0, 100000,
                     "the most tether_pool_resize may raise the maximum to"),
    TETHER__KD_NAMES("tether_pool_limit", OPT(limit), limit_names,
                     "fixed: tether_pool_max; adaptive: a limit up to it that "
                     "follows the server"),
    TETHER__KD("tether_pooling", TETHER__KD_BOOL, PK(pooling),
               "off: a pool of one connection"),
    TETHER__KD("tether_acquire_timeout", TETHER__KD_MS, OPT(acquire_timeout_ms),
               "how long an acquire may wait"),
    TETHER__KD("tether_idle_timeout", TETHER__KD_MS, OPT(idle_timeout_ms),
               "idle connections above the minimum close after this"),
    TETHER__KD("tether_max_lifetime", TETHER__KD_MS, OPT(max_lifetime_ms),
               "connections retire after about this long"),
    TETHER__KD("tether_validate_idle", TETHER__KD_MS, OPT(validate_idle_ms),
               "a round-trip check only after this much idleness"),
    TETHER__KD("tether_probe_idle", TETHER__KD_MS, OPT(probe_idle_ms),
               "the socket liveness check from this much idleness"),
    TETHER__KD_RANGE("tether_barge_limit_us", TETHER__KD_I64,
                     OPT(barge_limit_us), 0, 1000000000,
                     "how long a newcomer may go ahead of the first waiter"),
    TETHER__KD_RANGE("tether_max_waiters", TETHER__KD_INT, OPT(max_waiters), 0,
                     100000000, "callers that may wait at once"),
    TETHER__KD("tether_leak_threshold", TETHER__KD_MS, OPT(leak_threshold_ms),
               "report leases held longer"),
    TETHER__KD("tether_txn_reserve_timeout", TETHER__KD_MS,
               OPT(txn_reserve_timeout_ms),
               "how long a keyed transaction may hold its connection between "
               "acquires"),
    TETHER__KD("tether_reset_query", TETHER__KD_STR, PK(reset_query),
               "SQL run on release, e.g. DISCARD ALL"),
    TETHER__KD("tether_drain_timeout", TETHER__KD_MS, PK(drain_ms),
               "how long a timed-out statement's connection may drain"),
    TETHER__KD_CALL("tether_retry", set_policy,
                    "a retry spec: tether_pool_run's policy"),
    TETHER__KD_CALL("tether_breaker", set_policy,
                    "a breaker spec: the connect-error breaker"),
    TETHER__KD_NAMES("tether_route", PK(route.on), route_names,
                     "read-write-split: read-only work to the standbys"),
    TETHER__KD_RANGE("tether_read_pool_max", TETHER__KD_INT, PK(route.read_max),
                     1, 100000, "routing: the read side's most connections"),
    TETHER__KD_CALL("tether_max_standby_lag", set_lag,
                    "routing: a standby lagging more is skipped"),
    TETHER__KD("tether_lag_recheck", TETHER__KD_MS, PK(route.lag_recheck_ms),
               "routing: how long a connection's lag verdict holds"),
    TETHER__KD("tether_read_wait", TETHER__KD_MS, PK(route.read_wait_ms),
               "routing: the most a read waits for the read side"),
    TETHER__KD_END};

static const tether__kwtable pool_table = {
    .layer = "pool", .kind = TETHER__KW_POOL, .defs = pool_keys_defs};

/* The pool's keywords are known from the start: a string is checked
 * against them wherever it is parsed (conninfo.h, "keyword tables"). */
__attribute__((constructor)) static void register_keywords(void) {
    tether__keywords_register(&pool_table);
}

/* route_check refuses routing keywords without tether_route. */
static int route_check(const tether__conninfo *ci, const pool_keys *k,
                       tether_error *err) {
    static const char *const keys[] = {
        "tether_read_pool_max", "tether_max_standby_lag", "tether_lag_recheck",
        "tether_read_wait"};
    for (size_t i = 0; !k->route.on && i < sizeof(keys) / sizeof(keys[0]); i++)
        if (tether__conninfo_get(ci, keys[i]))
            return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                    "connection string: %s needs "
                                    "tether_route=read-write-split",
                                    keys[i]);
    return 0;
}

static void keys_defaults(pool_keys *k) {
    memset(k, 0, sizeof(*k));
    tether_pool_opts_init(&k->o);
    k->pooling = 1;
    k->route.max_lag_ms = k->route.max_lag_bytes = -1;
    k->route.lag_recheck_ms = 1000;
    k->route.read_wait_ms = 1000;
    k->drain_ms = TETHER__DRAIN_MS;
}

/* keys_check checks what no one keyword can: the keywords together. */
static int keys_check(const tether__conninfo *ci, pool_keys *k,
                      tether_error *err) {
    int rc = route_check(ci, k, err);
    if (rc == 0)
        rc = tether__conninfo_pool_name(ci, &k->name, err);
    if (rc == 0 && k->o.min_size > k->o.max_size)
        rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                              "connection string: tether_pool_min (%d) is "
                              "above tether_pool_max (%d)",
                              k->o.min_size, k->o.max_size);
    if (rc == 0 && k->o.max_size_limit && k->o.max_size_limit < k->o.max_size)
        rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                              "connection string: tether_pool_max_limit (%d) "
                              "is below tether_pool_max (%d)",
                              k->o.max_size_limit, k->o.max_size);
    if (rc == 0 && !k->pooling && k->o.min_size > 1)
        rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                              "connection string: tether_pool_min (%d) with "
                              "tether_pooling=off (a pool of one)",
                              k->o.min_size);
    return rc;
}

int tether__pool_keys_from(const tether__conninfo *ci, pool_keys *k,
                           tether_error *err) {
    keys_defaults(k);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < ci->n; i++)
        if (tether__conninfo_kind(ci->kv[i].key) == TETHER__KW_POOL &&
            (rc = tether__keydefs_apply(pool_keys_defs, k, ci->kv[i].key,
                                        ci->kv[i].val, err)) > 0)
            rc = 0; /* another table's keyword, not for this one */
    if (rc == 0)
        rc = keys_check(ci, k, err);
    if (!k->pooling)
        k->o.max_size = k->o.max_size_limit = 1;
    k->o.reset_query = k->reset_query;
    k->o.name = k->name;
    return rc;
}

int tether__pool_keys_parse(const char *conninfo, pool_keys *k,
                            tether_error *err) {
    tether__conninfo ci;
    int rc = tether__conninfo_parse(conninfo, &ci, err);
    if (rc == 0)
        rc = tether__pool_keys_from(&ci, k, err);
    else
        keys_defaults(k);
    tether__conninfo_wipe(&ci);
    return rc;
}

void tether__pool_keys_free(pool_keys *k) {
    tether__free(k->reset_query);
    tether__free(k->name);
}

/* open_connector makes the pool's connector from the same keyword set. */
static int open_connector(const tether__conninfo *ci, tether_event_fn on_event,
                          void *event_ctx, tether_connector **c,
                          tether_error *err) {
    tether_connector_opts co;
    tether_connector_opts_init(&co);
    co.on_event = on_event;
    co.event_ctx = event_ctx;
    return tether__connector_create_ci(c, &co, ci, err);
}

/* side_conninfo makes *side a copy of ci with the keyword-value pairs of
 * extra (NULL-terminated) set: a routing side's target and strategy. The
 * caller wipes *side (it holds the password), on failure too. */
static int side_conninfo(const tether__conninfo *ci, const char *const *extra,
                         tether__conninfo *side, tether_error *err) {
    int rc = tether__conninfo_copy(side, ci, err);
    for (; rc == 0 && extra[0]; extra += 2)
        rc = tether__conninfo_set(side, extra[0], extra[1], err);
    return rc;
}

/* open_side makes one side of a routing pool (or a plain pool, extra
 * NULL): its connector from ci with extra's pairs set, then the pool. */
static int open_side(tether_pool **out, const tether__conninfo *ci,
                     const char *const *extra, tether_pool_opts *o,
                     int64_t drain_ms, tether_event_fn on_event,
                     void *event_ctx, tether_error *err) {
    tether__conninfo side = {0};
    tether_connector *c = NULL;
    int rc = extra ? side_conninfo(ci, extra, &side, err) : 0;
    if (rc == 0)
        rc = open_connector(extra ? &side : ci, on_event, event_ctx, &c, err);
    tether__conninfo_wipe(&side);
    if (rc == 0) {
        o->connector = c;
        rc = tether_pool_create(out, o, err);
    }
    if (rc) {
        tether_connector_destroy(c);
        return rc;
    }
    (*out)->own_connector = c;
    if (o->limit == TETHER_POOL_LIMIT_ADAPTIVE) /* a refusal as full ends */
        tether__connector_busy_fast(c); /* the connect: the limit reacts */
    (*out)->drain_ms = drain_ms > 0 ? drain_ms : -1; /* -1: no drain */
    return 0;
}

/* The read side's name: the pool's with ":read" (cut to the limit). */
static void read_name(const tether_pool *w, char *buf, size_t cap) {
    size_t n = strlen(w->name);
    if (n > cap - 6)
        n = cap - 6;
    memcpy(buf, w->name, n);
    memcpy(buf + n, ":read", 6);
}

/* open_read_side gives routing pool w its read side: standbys only,
 * spread at random, at most tether_read_pool_max connections. */
static int open_read_side(tether_pool *w, const tether__conninfo *ci,
                          pool_keys *k, tether_event_fn on_event,
                          void *event_ctx, tether_error *err) {
    tether_pool_opts o = k->o;
    char name[TETHER_POOL_NAME_MAX + 1];
    read_name(w, name, sizeof(name));
    o.name = name;
    if (k->route.read_max)
        o.max_size = k->route.read_max;
    o.min_size = TETHER__MIN(o.min_size, o.max_size);
    if (o.max_size_limit) /* tether_pool_max_limit bounds both sides */
        o.max_size_limit = TETHER__MAX(o.max_size_limit, o.max_size);
    tether_pool *r = NULL;
    static const char *const extra[] = {"target_session_attrs", "standby",
                                        "tether_strategy", "random", NULL};
    int rc =
        open_side(&r, ci, extra, &o, k->drain_ms, on_event, event_ctx, err);
    if (rc == 0) /* Patroni's list: replicas within the bound only */
        tether__connector_set_lag_bytes(r->own_connector,
                                        k->route.max_lag_bytes);
    return rc ? rc : tether__route_attach(w, r, &k->route, err);
}

int tether__pool_open_ci(tether_pool **out, const tether__conninfo *ci,
                         tether_event_fn on_event, void *event_ctx,
                         tether_error *err) {
    static const char *const write_side[] = {"target_session_attrs",
                                             "read-write", NULL};
    pool_keys k;
    *out = NULL;
    int rc = tether__pool_keys_from(ci, &k, err);
    if (rc == 0) /* routing: the write side reaches the primary only */
        rc = open_side(out, ci, k.route.on ? write_side : NULL, &k.o,
                       k.drain_ms, on_event, event_ctx, err);
    if (rc == 0) {
        if (k.route.on)
            rc = open_read_side(*out, ci, &k, on_event, event_ctx, err);
        if (rc == 0) /* tether_admin_socket (src/admin, docs/operations.md) */
            rc = tether__live_opened(*out, ci, err);
        if (rc) {
            tether_pool_destroy(*out);
            *out = NULL;
        }
    }
    tether__pool_keys_free(&k);
    return rc;
}

int tether_pool_open(tether_pool **out, const char *conninfo,
                     tether_event_fn on_event, void *event_ctx,
                     tether_error *err) {
    if (!out)
        return tether__null(err, "tether_pool_open", "out");
    *out = NULL;
    if (!conninfo)
        return tether__null(err, "tether_pool_open", "conninfo");
    tether__conninfo ci; /* parsed once: the pool, its sides, connectors */
    int rc = tether__conninfo_parse(conninfo, &ci, err);
    if (rc == 0)
        rc = tether__pool_open_ci(out, &ci, on_event, event_ctx, err);
    tether__conninfo_wipe(&ci);
    return rc;
}
