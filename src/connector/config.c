/* config.c - a connection string (libpq key=value or postgresql:// URI)
 * into the connector's configuration: the host/port list, tether's own
 * keywords (tether_*, plus libpq's target_session_attrs, connect_timeout
 * and load_balance_hosts, which tether implements itself) and the libpq
 * keywords passed on to the driver. docs/conninfo.md lists them all. */
#include "connector.h"
#include "registry/conninfo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int spec_error(tether_error *err, const char *key, const char *val,
                      const char *want) {
    return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                            "connection string: bad value \"%.40s\" for "
                            "%s: %s",
                            val, key, want);
}

static int parse_count(const char *key, const char *v, int lo, int hi, int *out,
                       tether_error *err) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < lo || n > hi) {
        char want[64];
        snprintf(want, sizeof(want), "want an integer in [%d, %d]", lo, hi);
        return spec_error(err, key, v, want);
    }
    *out = (int)n;
    return 0;
}

/* A duration with unit; "0", "inf" and "infinite" mean no limit when
 * inf_ok (stored as -1). */
static int parse_ms(const char *key, const char *v, int inf_ok, int64_t *out,
                    tether_error *err) {
    if (inf_ok &&
        (!strcmp(v, "inf") || !strcmp(v, "infinite") || !strcmp(v, "0"))) {
        *out = -1;
        return 0;
    }
    if (tether_duration_parse(v, out) == 0)
        return 0;
    return spec_error(err, key, v, "want a duration such as 500ms, 15s, 2m");
}

static const char *const target_names[] = {
    "any",     "read-write",     "primary",       "read-only",
    "standby", "prefer-standby", "prefer-primary"};

const char *tether_target_name(tether_target t) {
    if ((unsigned)t < sizeof(target_names) / sizeof(target_names[0]))
        return target_names[t];
    return "unknown";
}

static const char *const strategy_names[] = {
    "sequential", "mirroring", "streaming", "random", "round-robin", "race"};

static int lookup(const char *const *names, int n, const char *v) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], v))
            return i;
    return -1;
}

static int parse_bool(const char *key, const char *v, int *out,
                      tether_error *err) {
    if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0")) {
        *out = 0;
        return 0;
    }
    return spec_error(err, key, v, "want on or off");
}

static int set_str(char **dst, const char *v, tether_error *err) {
    free(*dst);
    *dst = strdup(v);
    return *dst ? 0
                : tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                   NULL);
}

/* Specs in a connection string: a retry, breaker or pause policy. */
static int parse_spec(tether__conncfg *cfg, const char *key, const char *v,
                      tether_error *err) {
    int rc;
    tether_error e2 = {0};
    if (!strcmp(key, "tether_retry")) {
        rc = tether_retry_opts_parse(v, &cfg->retry, &e2);
        cfg->has_retry = rc == 0;
    } else if (!strcmp(key, "tether_breaker")) {
        rc = tether_breaker_opts_parse(v, &cfg->breaker, &e2);
        cfg->has_breaker = rc == 0;
    } else {
        tether_retry_opts ro;
        rc = tether_retry_opts_parse(v, &ro, &e2);
        if (rc == 0)
            cfg->pause = ro.backoff;
    }
    if (rc)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                "connection string: %s: %s", key, e2.message);
    return 0;
}

static int tether_key(tether__conncfg *cfg, const char *k, const char *v,
                      tether_error *err) {
    int i;
    if (!strcmp(k, "tether_strategy")) {
        if ((i = lookup(strategy_names, 6, v)) < 0)
            return spec_error(err, k, v,
                              "want sequential, mirroring, streaming, "
                              "random, round-robin or race");
        cfg->strategy = (tether_connect_strategy)i;
        return 0;
    }
    if (!strcmp(k, "tether_login_timeout"))
        return parse_ms(k, v, 1, &cfg->login_timeout_ms, err);
    if (!strcmp(k, "tether_attempt_timeout"))
        return parse_ms(k, v, 0, &cfg->attempt_timeout_ms, err);
    if (!strcmp(k, "tether_recheck"))
        return parse_ms(k, v, 0, &cfg->recheck_ms, err);
    if (!strcmp(k, "tether_race_delay"))
        return parse_ms(k, v, 0, &cfg->race_delay_ms, err);
    if (!strcmp(k, "tether_acquire_timeout"))
        return parse_ms(k, v, 0, &cfg->acquire_timeout_ms, err);
    if (!strcmp(k, "tether_idle_timeout"))
        return parse_ms(k, v, 0, &cfg->idle_timeout_ms, err);
    if (!strcmp(k, "tether_max_lifetime"))
        return parse_ms(k, v, 0, &cfg->max_lifetime_ms, err);
    if (!strcmp(k, "tether_validate_idle"))
        return parse_ms(k, v, 0, &cfg->validate_idle_ms, err);
    if (!strcmp(k, "tether_leak_threshold"))
        return parse_ms(k, v, 0, &cfg->leak_threshold_ms, err);
    if (!strcmp(k, "tether_probe_idle_us"))
        return parse_count(k, v, 0, 1000000000, &cfg->probe_idle_us, err);
    if (!strcmp(k, "tether_barge_limit_us"))
        return parse_count(k, v, 0, 1000000000, &cfg->barge_limit_us, err);
    if (!strcmp(k, "tether_pool_min"))
        return parse_count(k, v, 0, 100000, &cfg->pool_min, err);
    if (!strcmp(k, "tether_pool_max"))
        return parse_count(k, v, 1, 100000, &cfg->pool_max, err);
    if (!strcmp(k, "tether_pooling"))
        return parse_bool(k, v, &cfg->pooling, err);
    if (!strcmp(k, "tether_reset_query"))
        return set_str(&cfg->reset_query, v, err);
    if (!strcmp(k, "tether_retry") || !strcmp(k, "tether_breaker") ||
        !strcmp(k, "tether_pause"))
        return parse_spec(cfg, k, v, err);
    return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                            "connection string: unknown tether keyword "
                            "\"%.40s\" (see docs/conninfo.md)",
                            k);
}

/* libpq keywords tether implements itself. */
static int libpq_own(tether__conncfg *cfg, const char *k, const char *v,
                     tether_error *err) {
    int i;
    if (!strcmp(k, "target_session_attrs")) {
        if ((i = lookup(target_names, 7, v)) < 0)
            return spec_error(err, k, v,
                              "want any, read-write, primary, read-only, "
                              "standby, prefer-standby or prefer-primary");
        cfg->target = (tether_target)i;
        return 0;
    }
    if (!strcmp(k, "load_balance_hosts")) {
        if (strcmp(v, "random") && strcmp(v, "disable"))
            return spec_error(err, k, v, "want random or disable");
        if (!strcmp(v, "random"))
            cfg->strategy = TETHER_CONNECT_RANDOM;
        return 0;
    }
    /* connect_timeout: libpq's per-host limit in seconds ("0": none). */
    int secs = 0;
    int rc = parse_count(k, v, 0, 86400 * 365, &secs, err);
    if (rc == 0)
        cfg->attempt_timeout_ms = (int64_t)secs * 1000;
    return rc;
}

static int add_param(tether__conncfg *cfg, const char *k, const char *v,
                     tether_error *err) {
    char **nk = realloc(cfg->keys, sizeof(char *) * (size_t)(cfg->nparams + 1));
    if (nk)
        cfg->keys = nk;
    char **nv = realloc(cfg->vals, sizeof(char *) * (size_t)(cfg->nparams + 1));
    if (nv)
        cfg->vals = nv;
    if (!nk || !nv)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    cfg->keys[cfg->nparams] = strdup(k);
    cfg->vals[cfg->nparams] = strdup(v);
    cfg->nparams++;
    if (!cfg->keys[cfg->nparams - 1] || !cfg->vals[cfg->nparams - 1])
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    return 0;
}

/* Count comma-separated items (an empty string has none). */
static int count_items(const char *s) {
    if (!s || !*s)
        return 0;
    int n = 1;
    for (; *s; s++)
        n += *s == ',';
    return n;
}

/* Copy item i of a comma list into a new string (NULL when empty). */
static char *item(const char *s, int i) {
    while (i-- > 0)
        s = strchr(s, ',') + 1;
    size_t n = strcspn(s, ",");
    return n ? strndup(s, n) : NULL;
}

static int parse_port(const char *p, int *port, tether_error *err) {
    char *end;
    long v = strtol(p, &end, 10);
    if (!*p || *end || v < 1 || v > 65535)
        return spec_error(err, "port", p, "want a number in [1, 65535]");
    *port = (int)v;
    return 0;
}

static int build_endpoints(tether__conncfg *cfg, const char *hosts,
                           const char *ports, const char *addrs,
                           tether_error *err) {
    int nh = count_items(hosts), np = count_items(ports);
    int na = count_items(addrs), n = nh > na ? nh : na;
    if (n == 0)
        n = 1; /* the driver's default host */
    if ((np > 1 && np != n) || (nh && na && na != nh))
        return tether_error_set(
            err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
            "connection string: mismatched host and port counts (%d hosts, "
            "%d hostaddrs, %d ports)",
            nh, na, np);
    cfg->eps = calloc((size_t)n, sizeof(tether__ep));
    if (!cfg->eps)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    cfg->neps = n;
    for (int i = 0; i < n; i++) {
        tether__ep *e = &cfg->eps[i];
        e->host = nh ? item(hosts, i) : NULL;
        e->hostaddr = na ? item(addrs, i) : NULL;
        char *p = np ? item(ports, np == 1 ? 0 : i) : NULL;
        int rc = p ? parse_port(p, &e->port, err) : 0;
        free(p);
        if (rc)
            return rc;
    }
    return 0;
}

static void defaults(tether__conncfg *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->login_timeout_ms = 15000;
    cfg->recheck_ms = 10000;
    cfg->race_delay_ms = 250;
    tether_backoff_opts_init(&cfg->pause);
    cfg->pause.base_ms = 100;
    cfg->pause.max_ms = 2000;
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    cfg->pool_min = po.min_size;
    cfg->pool_max = po.max_size;
    cfg->acquire_timeout_ms = po.acquire_timeout_ms;
    cfg->idle_timeout_ms = po.idle_timeout_ms;
    cfg->max_lifetime_ms = po.max_lifetime_ms;
    cfg->validate_idle_ms = po.validate_idle_ms;
    cfg->probe_idle_us = (int)po.probe_idle_us;
    cfg->barge_limit_us = (int)po.barge_limit_us;
    cfg->leak_threshold_ms = po.leak_threshold_ms;
    cfg->retry = po.retry;
    cfg->breaker = po.breaker;
    cfg->pooling = 1;
}

static int one_key(tether__conncfg *cfg, const char *k, const char *v,
                   tether_error *err) {
    if (!strncmp(k, "tether_", 7))
        return tether_key(cfg, k, v, err);
    if (!strcmp(k, "target_session_attrs") ||
        !strcmp(k, "load_balance_hosts") || !strcmp(k, "connect_timeout"))
        return libpq_own(cfg, k, v, err);
    if (!strcmp(k, "host") || !strcmp(k, "port") || !strcmp(k, "hostaddr"))
        return 0;                   /* the endpoint list */
    if (!tether__conninfo_known(k)) /* not quoted: it may be the tail of
                                       an unquoted password with a space */
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                "connection string: a keyword is neither "
                                "libpq's nor tether's (unknown keyword; "
                                "its name is not shown in case it is part "
                                "of a password)");
    return add_param(cfg, k, v, err);
}

int tether__conncfg_parse(const char *conninfo, tether__conncfg *cfg,
                          tether_error *err) {
    defaults(cfg);
    tether__conninfo ci;
    memset(&ci, 0, sizeof(ci));
    int rc = tether__conninfo_parse(conninfo, &ci, err);
    for (size_t i = 0; rc == 0 && i < ci.n; i++)
        rc = one_key(cfg, ci.kv[i].key, ci.kv[i].val, err);
    if (rc == 0)
        rc = build_endpoints(cfg, tether__conninfo_get(&ci, "host"),
                             tether__conninfo_get(&ci, "port"),
                             tether__conninfo_get(&ci, "hostaddr"), err);
    if (rc == 0 && cfg->pool_min > cfg->pool_max)
        rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                              "connection string: tether_pool_min (%d) is "
                              "above tether_pool_max (%d)",
                              cfg->pool_min, cfg->pool_max);
    if (rc == 0 && !(cfg->display = tether__conninfo_dup(&ci, 1)))
        rc = tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT, NULL);
    tether__conninfo_free(&ci);
    return rc;
}

static void free_eps(tether__conncfg *cfg) {
    for (int i = 0; i < cfg->neps; i++) {
        free(cfg->eps[i].host);
        free(cfg->eps[i].hostaddr);
    }
    free(cfg->eps);
    cfg->eps = NULL;
    cfg->neps = 0;
}

void tether__conncfg_free(tether__conncfg *cfg) {
    free_eps(cfg);
    for (int i = 0; i < cfg->nparams; i++) {
        free(cfg->keys[i]);
        free(cfg->vals[i]);
    }
    free(cfg->keys);
    free(cfg->vals);
    free(cfg->reset_query);
    free(cfg->display);
    memset(cfg, 0, sizeof(*cfg));
}

/* "h:p,h:p" (a port may be left out; [v6]:p for IPv6). */
int tether__conncfg_set_hosts(tether__conncfg *cfg, const char *list,
                              tether_error *err) {
    int n = count_items(list);
    if (n == 0)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                "provisioning returned no hosts");
    tether__ep *eps = calloc((size_t)n, sizeof(*eps));
    if (!eps)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char *it = item(list, i);
        char *colon = it ? strrchr(it, ':') : NULL;
        if (colon && (it[0] != '[' || colon[-1] == ']')) {
            *colon = '\0';
            rc = parse_port(colon + 1, &eps[i].port, err);
        }
        if (it && it[0] == '[') { /* strip the brackets of [v6] */
            memmove(it, it + 1, strlen(it));
            it[strcspn(it, "]")] = '\0';
        }
        eps[i].host = it;
        if (!it)
            rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                  "provisioning returned an empty host");
    }
    tether__conncfg tmp = {.eps = eps, .neps = n};
    if (rc) {
        free_eps(&tmp);
        return rc;
    }
    free_eps(cfg);
    cfg->eps = eps;
    cfg->neps = n;
    return 0;
}
