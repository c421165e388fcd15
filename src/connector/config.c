/* config.c - a parsed connection string (conninfo.h's keyword set) into
 * the connector's configuration: the host/port list, the connector's
 * keywords (tether_strategy and the rest, plus libpq's
 * target_session_attrs, connect_timeout and load_balance_hosts, which
 * tether implements itself) and the driver's keywords passed on to it. The
 * pool's keywords are left to the pool. A keyword the string does not set
 * takes what the driver reads from the environment (libpq: its PG*
 * variable). The connector's keywords are defined here, in the tables it
 * registers (docs/conninfo.md, "Keywords"). */
#include "connector.h"
#include "conninfo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const target_names[] = {
    "any",     "read-write",     "primary",        "read-only",
    "standby", "prefer-standby", "prefer-primary", NULL};

const char *tether_target_name(tether_target t) {
    if ((unsigned)t < sizeof(target_names) / sizeof(target_names[0]) - 1)
        return target_names[t];
    return "unknown";
}

static const char *const strategy_names[] = {
    "sequential",  "mirroring", "streaming", "random",
    "round-robin", "race",      NULL};

const char *tether_strategy_name(tether_strategy s) {
    if ((unsigned)s < sizeof(strategy_names) / sizeof(strategy_names[0]) - 1)
        return strategy_names[s];
    return "unknown";
}

int tether_strategy_parse(const char *name, tether_strategy *out) {
    if (!name || !out)
        return TETHER_EINVAL;
    for (int i = 0; name && strategy_names[i]; i++)
        if (!strcmp(name, strategy_names[i])) {
            *out = (tether_strategy)i;
            return 0;
        }
    return TETHER_ESPEC;
}

/* tether_pause: the pause between passes, a retry spec's backoff. */
static int set_pause(void *base, const char *key, const char *v,
                     tether_error *err) {
    tether__conncfg *cfg = base;
    tether_retry_opts ro;
    tether_error e2 = {0};
    if (tether_retry_opts_parse(v, &ro, &e2) == 0) {
        cfg->pause = ro.backoff;
        cfg->pause_set = 1;
        return 0;
    }
    return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                            "connection string: %s: %s", key, e2.message);
}

static int set_load_balance(void *base, const char *key, const char *v,
                            tether_error *err) {
    tether__conncfg *cfg = base;
    if (strcmp(v, "random") && strcmp(v, "disable"))
        return tether__conninfo_bad_value(key, v, "want random or disable",
                                          err);
    if (!strcmp(v, "random"))
        cfg->strategy = TETHER_STRATEGY_RANDOM;
    return 0;
}

/* connect_timeout: libpq's per-host limit in whole seconds ("0": none). */
static int set_connect_timeout(void *base, const char *key, const char *v,
                               tether_error *err) {
    static const tether__keydef defs[] = {TETHER__KD_RANGE("connect_timeout",
                                                           TETHER__KD_I64, 0, 0,
                                                           86400LL * 365, NULL),
                                          TETHER__KD_END};
    int64_t n = 0;
    int rc = tether__keydefs_apply(defs, &n, key, v, err);
    if (rc == 0)
        ((tether__conncfg *)base)->attempt_timeout_ms = n * 1000;
    return rc;
}

#define CFG(f) offsetof(tether__conncfg, f)

/* The endpoint keywords: the connector's host list (endpoints()). */
static const tether__keydef endpoint_keys[] = {
    TETHER__KD_SELF("host",
                    "host names or socket directories, comma-separated"),
    TETHER__KD_SELF("hostaddr", "numeric addresses, one per host"),
    TETHER__KD_SELF("port",
                    "ports, one per host or one for all (6379|6380: several)"),
    TETHER__KD_END};

static const tether__keydef connector_keys[] = {
    TETHER__KD_NAMES("target_session_attrs", CFG(target), target_names,
                     "which server a connection must reach (its role)"),
    TETHER__KD_CALL("connect_timeout", set_connect_timeout,
                    "libpq's per-host limit in seconds, applied by tether"),
    TETHER__KD_CALL("load_balance_hosts", set_load_balance,
                    "random: the same as tether_strategy=random"),
    TETHER__KD_NAMES("tether_strategy", CFG(strategy), strategy_names,
                     "how the hosts are tried (sequential, race, ...)"),
    TETHER__KD("tether_login_timeout", TETHER__KD_MS_INF, CFG(login_timeout_ms),
               "the overall budget of one connect"),
    TETHER__KD("tether_attempt_timeout", TETHER__KD_MS, CFG(attempt_timeout_ms),
               "the cap on one attempt"),
    TETHER__KD("tether_recheck", TETHER__KD_MS, CFG(recheck_ms),
               "how long the host-state cache trusts what it learned"),
    TETHER__KD("tether_race_delay", TETHER__KD_MS, CFG(race_delay_ms),
               "race: the stagger between attempts"),
    TETHER__KD_CALL("tether_pause", set_pause,
                    "a retry spec: the pause between passes over the hosts"),
    TETHER__KD_END};

static const tether__kwtable endpoint_table = {
    .layer = "connector", .kind = TETHER__KW_ENDPOINT, .defs = endpoint_keys};
static const tether__kwtable connector_table = {
    .layer = "connector", .kind = TETHER__KW_CONNECTOR, .defs = connector_keys};

/* The connector's keywords are known from the start: a string is checked
 * against them wherever it is parsed (conninfo.h, "keyword tables"). */
__attribute__((constructor)) static void register_keywords(void) {
    tether__keywords_register(&endpoint_table);
    tether__keywords_register(&connector_table);
}

static int add_param(tether__conncfg *cfg, const char *k, const char *v,
                     tether_error *err) {
    char **nk =
        tether__realloc(cfg->keys, sizeof(char *) * (size_t)(cfg->nparams + 1));
    if (nk)
        cfg->keys = nk;
    char **nv =
        tether__realloc(cfg->vals, sizeof(char *) * (size_t)(cfg->nparams + 1));
    if (nv)
        cfg->vals = nv;
    if (!nk || !nv)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    cfg->keys[cfg->nparams] = tether__strdup(k);
    cfg->vals[cfg->nparams] = tether__strdup(v);
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

/* Copy item i of a comma list into *out, a new string (NULL when the item
 * is empty). Returns 0, or TETHER_ENOMEM (err says so): never an empty
 * item in disguise, which would stand for the driver's default host. */
static int item(const char *s, int i, char **out, tether_error *err) {
    while (i-- > 0)
        s = strchr(s, ',') + 1;
    size_t n = strcspn(s, ",");
    *out = n ? tether__strndup(s, n) : NULL;
    if (n && !*out)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "connection string: out of memory copying "
                                "the host list");
    return 0;
}

static int parse_port(const char *p, int *port, tether_error *err) {
    char *end;
    long v = strtol(p, &end, 10);
    if (!*p || *end || v < 1 || v > 65535)
        return tether__conninfo_bad_value("port", p,
                                          "want a number in [1, 65535]", err);
    *port = (int)v;
    return 0;
}

/* The ports of one port item: "p" or "p|p|..." (NULL or "": the default
 * port, 0). Returns the count (>= 1) stored in ports (at most max), or
 * TETHER_ESPEC naming the item. */
static int port_list(const char *it, int *ports, int max, tether_error *err) {
    static const char want[] =
        "want a port in [1, 65535], or several joined by | (6379|6380)";
    if (!it || !*it) {
        ports[0] = 0;
        return 1;
    }
    int n = 0;
    for (const char *p = it;; p++) {
        size_t len = strcspn(p, "|");
        char one[8];
        if (len == 0 || len >= sizeof(one) || n == max)
            return tether__conninfo_bad_value(
                "port", it, n == max ? "too many ports in one item" : want,
                err);
        memcpy(one, p, len);
        one[len] = '\0';
        tether_error e = {0};
        if (parse_port(one, &ports[n++], &e))
            return tether__conninfo_bad_value("port", it, want, err);
        p += len;
        if (!*p)
            return n;
    }
}

/* One server (host item i, its hostaddr and port item): one endpoint per
 * port, appended at cfg->eps[cfg->neps]. */
static int add_server(tether__conncfg *cfg, int i, const char *host,
                      const char *addr, const char *portitem, int cap,
                      tether_error *err) {
    int ports[TETHER__MAX_HOSTS];
    int np = port_list(portitem, ports, TETHER__MAX_HOSTS, err);
    if (np < 0)
        return np;
    if (cfg->neps + np > cap)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                "too many host-port pairs (host %d makes "
                                "more than %d)",
                                i + 1, cap);
    for (int k = 0; k < np; k++) {
        tether__ep *e = &cfg->eps[cfg->neps];
        e->host = host ? tether__strdup(host) : NULL;
        e->hostaddr = addr ? tether__strdup(addr) : NULL;
        e->port = ports[k];
        e->server = i;
        cfg->neps++;
        if ((host && !e->host) || (addr && !e->hostaddr))
            return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                    NULL);
    }
    return 0;
}

/* host, hostaddr and port lists into endpoints: one per host and port (a
 * port item may name several ports, "6379|6380"). */
static int build_endpoints(tether__conncfg *cfg, const char *hosts,
                           const char *ports, const char *addrs,
                           tether_error *err) {
    int nh = count_items(hosts), np = count_items(ports);
    int na = count_items(addrs), n = nh > na ? nh : na;
    if (n == 0)
        n = 1; /* the driver's default host */
    if (n > TETHER__MAX_HOSTS)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                "connection string: %d hosts; at most %d", n,
                                TETHER__MAX_HOSTS);
    if ((np > 1 && np != n) || (nh && na && na != nh))
        return tether_error_set(
            err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
            "connection string: mismatched host and port counts (%d hosts, "
            "%d hostaddrs, %d ports)",
            nh, na, np);
    cfg->eps = tether__calloc(TETHER__MAX_HOSTS, sizeof(tether__ep));
    if (!cfg->eps)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char *h = NULL, *a = NULL, *p = NULL;
        rc = nh ? item(hosts, i, &h, err) : 0;
        if (rc == 0 && na)
            rc = item(addrs, i, &a, err);
        if (rc == 0 && np)
            rc = item(ports, np == 1 ? 0 : i, &p, err);
        if (rc == 0)
            rc = add_server(cfg, i, h, a, p, TETHER__MAX_HOSTS, err);
        tether__free(h);
        tether__free(a);
        tether__free(p);
    }
    return rc;
}

static void defaults(tether__conncfg *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->login_timeout_ms = 15000;
    cfg->recheck_ms = 10000;
    cfg->race_delay_ms = 250;
    /* Without tether_pause, a pass that reached no server (each refused,
     * reset or timed out) ends the connect: the pool's breaker paces the
     * next (a fleet-safe whole, docs/backoff.md); after one that reached a
     * server (of the wrong role: a failover under way) the next pass comes
     * after this pause: short, so that the server's return is seen within
     * half a second by the one connect that waits for it (the pool's
     * probe, docs/breaker.md). */
    tether_backoff_opts_init(&cfg->pause);
    tether__disc_cfg_init(&cfg->patroni);
    cfg->pause.base_ms = 100;
    cfg->pause.max_ms = 500;
}

static int one_key(tether__conncfg *cfg, const char *k, const char *v,
                   tether_error *err) {
    int rc;
    switch (tether__conninfo_kind(k)) {
    case TETHER__KW_CONNECTOR: /* 1: another table's, not for this one */
        rc = tether__keydefs_apply(connector_keys, cfg, k, v, err);
        if (rc > 0) /* discovery's (src/discovery) */
            rc = tether__disc_cfg_apply(&cfg->patroni, k, v, err);
        return rc > 0 ? 0 : rc;
    case TETHER__KW_LIBPQ:
        return add_param(cfg, k, v, err);
    case TETHER__KW_ENDPOINT: /* the endpoint list */
    case TETHER__KW_POOL:     /* the pool's (tether_pool_open) */
        return 0;
    default:
        break;
    }
    const char *near = tether__keyword_near(k);
    if (!strncmp(k, "tether_", 7) && near)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                "connection string: unknown tether keyword "
                                "\"%.40s\" (did you mean %s? see "
                                "docs/conninfo.md)",
                                k, near);
    if (!strncmp(k, "tether_", 7))
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                "connection string: unknown tether keyword "
                                "\"%.40s\" (see docs/conninfo.md)",
                                k);
    /* Not quoted: it may be the tail of an unquoted password with a space. */
    return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                            "connection string: a keyword is neither "
                            "libpq's nor tether's (unknown keyword; its name "
                            "is not shown in case it is part of a password)");
}

/* The connector's keywords the string leaves out, from the environment. */
static int env_keys(tether__conncfg *cfg, const tether__conninfo *ci,
                    const tether__conninfo *env, tether_error *err) {
    const char *k, *v;
    int rc = 0;
    for (size_t i = 0;
         rc == 0 && (k = tether__conninfo_keyword(TETHER__KW_CONNECTOR, i));
         i++)
        if (!tether__conninfo_get(ci, k) && (v = tether__conninfo_get(env, k)))
            rc = one_key(cfg, k, v, err);
    return rc;
}

/* host, port, hostaddr: from the string, else the environment. */
static int endpoints(tether__conncfg *cfg, const tether__conninfo *ci,
                     const tether__conninfo *env, tether_error *err) {
    static const char *const kw[3] = {"host", "port", "hostaddr"};
    const char *v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = tether__conninfo_get(ci, kw[i]);
        if (!v[i])
            v[i] = tether__conninfo_get(env, kw[i]);
    }
    return build_endpoints(cfg, v[0], v[1], v[2], err);
}

int tether__conncfg_parse(const char *conninfo, tether__conncfg *cfg,
                          tether_error *err) {
    return tether__conncfg_parse_env(conninfo, 1, cfg, err);
}

int tether__conncfg_parse_env(const char *conninfo, int use_env,
                              tether__conncfg *cfg, tether_error *err) {
    tether__conninfo ci;
    int rc = tether__conninfo_parse(conninfo, &ci, err);
    if (rc == 0)
        rc = tether__conncfg_from(&ci, use_env, cfg, err);
    else
        defaults(cfg);
    tether__conninfo_free(&ci);
    return rc;
}

int tether__conncfg_from(const tether__conninfo *ci, int use_env,
                         tether__conncfg *cfg, tether_error *err) {
    defaults(cfg);
    tether__conninfo env = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < ci->n; i++)
        rc = one_key(cfg, ci->kv[i].key, ci->kv[i].val, err);
    if (rc == 0 && use_env) /* the driver's environment (libpq: PG*) */
        rc = tether__conninfo_env(&env, err);
    if (rc == 0)
        rc = env_keys(cfg, ci, &env, err);
    if (rc == 0)
        rc = endpoints(cfg, ci, &env, err);
    tether__conninfo_wipe(&env); /* PGPASSWORD may be in it */
    if (rc == 0 && !(cfg->display = tether__conninfo_dup(ci, 1)))
        rc = tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT, NULL);
    return rc;
}

static void free_eps(tether__conncfg *cfg) {
    for (int i = 0; i < cfg->neps; i++) {
        tether__free(cfg->eps[i].host);
        tether__free(cfg->eps[i].hostaddr);
    }
    tether__free(cfg->eps);
    cfg->eps = NULL;
    cfg->neps = 0;
}

void tether__conncfg_free(tether__conncfg *cfg) {
    free_eps(cfg);
    for (int i = 0; i < cfg->nparams; i++) {
        tether__free(cfg->keys[i]);
        tether__free(cfg->vals[i]);
    }
    tether__free(cfg->keys);
    tether__free(cfg->vals);
    tether__free(cfg->display);
    tether__disc_cfg_free(&cfg->patroni);
    memset(cfg, 0, sizeof(*cfg));
}

/* host_item splits a provisioned item "h", "h:p", "[v6]" or "[v6]:p",
 * where p may list several ports ("h:6379|6380"), into endpoints appended
 * to tmp (it is malloc'd, NULL when empty, and freed): the host is never
 * empty. */
static int host_item(char *it, int i, tether__conncfg *tmp, tether_error *err) {
    char *host = it, *port = NULL;
    if (it && it[0] == '[') { /* [v6], [v6]:p */
        char *close = strchr(it, ']');
        if (!close || (close[1] && close[1] != ':')) {
            tether__free(it);
            return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                    "provisioning returned host %d with a "
                                    "bad [address] (want [v6] or [v6]:port)",
                                    i + 1);
        }
        *close = '\0';
        port = close[1] ? close + 2 : NULL;
        memmove(it, it + 1, strlen(it)); /* strip the '[' */
    } else if (it && (port = strrchr(it, ':')) != NULL) {
        *port++ = '\0';
    }
    if (!host || !*host) {
        tether__free(it);
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                "provisioning returned an empty host");
    }
    int rc = port && !*port
                 ? tether__conninfo_bad_value("port", port, "want a port", err)
                 : add_server(tmp, i, host, NULL, port, TETHER__MAX_HOSTS, err);
    tether__free(it);
    if (rc && err) /* a bad answer: provisioning may do better next time */
        err->cls = TETHER_CLASS_TRANSIENT;
    return rc;
}

/* "h:p,h:p" (a port may be left out; [v6]:p for IPv6; h:p|p for several
 * ports). */
int tether__conncfg_set_hosts(tether__conncfg *cfg, const char *list,
                              tether_error *err) {
    int n = count_items(list);
    if (n == 0)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                "provisioning returned no hosts");
    if (n > TETHER__MAX_HOSTS)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                "provisioning returned %d hosts; at most %d", n,
                                TETHER__MAX_HOSTS);
    tether__conncfg tmp = {
        .eps = tether__calloc(TETHER__MAX_HOSTS, sizeof(tether__ep))};
    if (!tmp.eps)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char *it;
        rc = item(list, i, &it, err);
        if (rc == 0)
            rc = host_item(it, i, &tmp, err);
    }
    if (rc) {
        free_eps(&tmp);
        return rc;
    }
    free_eps(cfg);
    cfg->eps = tmp.eps;
    cfg->neps = tmp.neps;
    return 0;
}
