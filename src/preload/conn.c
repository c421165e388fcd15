/* conn.c - connection strings for the preload: the arrays of
 * PQconnectdbParams and the arguments of PQsetdbLogin rendered as one
 * key=value string (libpq's rules: empty values ignored, later keywords
 * win, a dbname holding a connection string expanded in place), then the
 * form the pool opens (the environment's defaults added as tether
 * keywords the program did not set), the masked display form and a
 * libpq-only form for connects that pass through. */
#include "conninfo.h"
#include "preload.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A growing string; on allocation failure ok becomes 0. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    int ok;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (!b->ok)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->ok = 0;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) {
    sb_put(b, s, strlen(s));
}

/* sb_kv appends " key='value'" with ' and \ escaped. */
static void sb_kv(sbuf *b, const char *key, const char *val) {
    sb_str(b, b->n ? " " : "");
    sb_str(b, key);
    sb_str(b, "='");
    for (const char *p = val; *p; p++) {
        if (*p == '\'' || *p == '\\')
            sb_put(b, "\\", 1);
        sb_put(b, p, 1);
    }
    sb_str(b, "'");
}

static char *sb_done(sbuf *b) {
    if (!b->ok || !b->s) {
        free(b->s);
        return b->ok ? strdup("") : NULL;
    }
    return b->s;
}

static int is_uri(const char *s) {
    return !strncmp(s, "postgresql://", 13) || !strncmp(s, "postgres://", 11);
}

/* add_dbname appends a dbname that libpq would expand (a key=value string,
 * inlined as it is; later keywords still win), else as a plain value.
 * Returns -1 for a URI, which cannot be inlined. */
static int add_dbname(sbuf *b, const char *val, int expand) {
    if (expand && is_uri(val))
        return -1;
    if (expand && strchr(val, '=')) {
        sb_str(b, b->n ? " " : "");
        sb_str(b, val);
        return 0;
    }
    sb_kv(b, "dbname", val);
    return 0;
}

char *tp_conn_from_params(const char *const *keys, const char *const *vals,
                          int expand) {
    sbuf b = {NULL, 0, 0, 1};
    for (size_t i = 0; keys && keys[i]; i++) {
        if (!vals[i] || !*vals[i])
            continue;
        if (!strcmp(keys[i], "dbname")) {
            if (add_dbname(&b, vals[i], expand)) {
                free(b.s);
                return NULL;
            }
        } else {
            sb_kv(&b, keys[i], vals[i]);
        }
    }
    return sb_done(&b);
}

char *tp_conn_from_setdb(const char *host, const char *port,
                         const char *options, const char *dbname,
                         const char *user, const char *password) {
    sbuf b = {NULL, 0, 0, 1};
    if (dbname && *dbname && add_dbname(&b, dbname, 1)) {
        free(b.s);
        return NULL;
    }
    const char *k[] = {"host", "port", "options", "user", "password"};
    const char *v[] = {host, port, options, user, password};
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
        if (v[i] && *v[i])
            sb_kv(&b, k[i], v[i]);
    return sb_done(&b);
}

/* A replication connection is never pooled. */
static int replication(const tether__conninfo *ci) {
    const char *v = tether__conninfo_get(ci, "replication");
    return v && *v && strcasecmp(v, "false") && strcasecmp(v, "off") &&
           strcasecmp(v, "no") && strcmp(v, "0");
}

/* matches: display against TETHER_PRELOAD_MATCH's patterns ('|'). */
static int matches(const char *display, const char *patterns) {
    char pat[1024];
    const char *p = patterns;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n < sizeof(pat)) {
            memcpy(pat, p, n);
            pat[n] = '\0';
            if (fnmatch(pat, display, 0) == 0)
                return 1;
        }
        if (!bar)
            return 0;
        p = bar + 1;
    }
}

static int is_tether_kw(const char *key) {
    tether__kw_kind k = tether__conninfo_kind(key);
    return k == TETHER__KW_CONNECTOR || k == TETHER__KW_POOL;
}

/* libpq_form: ci without tether's keywords, or NULL when it has none. */
static char *libpq_form(const tether__conninfo *ci, int *failed) {
    int any = 0;
    for (size_t i = 0; i < ci->n; i++)
        any |= is_tether_kw(ci->kv[i].key);
    if (!any)
        return NULL;
    sbuf b = {NULL, 0, 0, 1};
    for (size_t i = 0; i < ci->n; i++)
        if (!is_tether_kw(ci->kv[i].key))
            sb_kv(&b, ci->kv[i].key, ci->kv[i].val);
    char *s = sb_done(&b);
    *failed = !s;
    return s;
}

/* pooled_form: ci with the environment's defaults for the pool keywords
 * the program left out. */
static char *pooled_form(const tether__conninfo *ci, const tp_config *cfg) {
    char *base = tether__conninfo_dup(ci, 0);
    if (!base)
        return NULL;
    sbuf b = {NULL, 0, 0, 1};
    sb_str(&b, base);
    free(base);
    char max[16];
    snprintf(max, sizeof(max), "%d", cfg->pool_max);
    const char *k[] = {"tether_pool_max", "tether_idle_timeout",
                       "tether_acquire_timeout", "tether_reset_query"};
    const char *v[] = {max, cfg->idle, cfg->wait, cfg->reset};
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
        if (!tether__conninfo_get(ci, k[i]))
            sb_kv(&b, k[i], v[i]);
    return sb_done(&b);
}

int tp_conn_prepare(const char *conninfo, tp_conn *c) {
    memset(c, 0, sizeof(*c));
    const tp_config *cfg = tp_config_get();
    tether__conninfo ci;
    tether_error err = {0};
    int failed = 0;
    if (tether__conninfo_parse(conninfo ? conninfo : "", &ci, &err) != 0) {
        tp_log("not pooled: %s", err.message);
        tether__conninfo_free(&ci);
        return -1;
    }
    c->display = tether__conninfo_dup(&ci, 1);
    c->libpq = libpq_form(&ci, &failed);
    if (!c->display || failed) {
        tether__conninfo_free(&ci);
        tp_conn_free(c);
        return -1;
    }
    if (cfg->off)
        tp_log("off: not pooled: %s", c->display);
    else if (replication(&ci))
        tp_log("replication connection, not pooled: %s", c->display);
    else if (!matches(c->display, cfg->match))
        tp_log("no match in TETHER_PRELOAD_MATCH, not pooled: %s", c->display);
    else
        c->pooled = pooled_form(&ci, cfg);
    tether__conninfo_free(&ci);
    return 0;
}

void tp_conn_free(tp_conn *c) {
    free(c->pooled);
    free(c->display);
    free(c->libpq);
    memset(c, 0, sizeof(*c));
}
