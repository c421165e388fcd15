/* keys.c - which layer reads each keyword of a connection string, and the
 * typed setters the connector and the pool map their keywords with.
 *
 * libpq's keywords are the linked libpq's own (PQconndefaults(), read once
 * per process), so a keyword is accepted exactly when the libpq that will
 * receive it knows it. tether's keywords are listed here with the layer
 * that reads them: the connector (how to connect) or the pool (how to
 * pool). libpq's target_session_attrs, connect_timeout and
 * load_balance_hosts are the connector's: tether implements them. */
#include "conninfo.h"
#include "duration.h"

#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kw_kind {
    const char *name;
    tether__kw_kind kind;
} kw_kind;

static const kw_kind tether_keywords[] = {
    {"host", TETHER__KW_ENDPOINT},
    {"hostaddr", TETHER__KW_ENDPOINT},
    {"port", TETHER__KW_ENDPOINT},
    {"target_session_attrs", TETHER__KW_CONNECTOR},
    {"connect_timeout", TETHER__KW_CONNECTOR},
    {"load_balance_hosts", TETHER__KW_CONNECTOR},
    {"tether_strategy", TETHER__KW_CONNECTOR},
    {"tether_login_timeout", TETHER__KW_CONNECTOR},
    {"tether_attempt_timeout", TETHER__KW_CONNECTOR},
    {"tether_recheck", TETHER__KW_CONNECTOR},
    {"tether_race_delay", TETHER__KW_CONNECTOR},
    {"tether_pause", TETHER__KW_CONNECTOR},
    {"tether_pool_name", TETHER__KW_POOL},
    {"tether_pool_min", TETHER__KW_POOL},
    {"tether_pool_max", TETHER__KW_POOL},
    {"tether_pooling", TETHER__KW_POOL},
    {"tether_acquire_timeout", TETHER__KW_POOL},
    {"tether_idle_timeout", TETHER__KW_POOL},
    {"tether_max_lifetime", TETHER__KW_POOL},
    {"tether_validate_idle", TETHER__KW_POOL},
    {"tether_probe_idle", TETHER__KW_POOL},
    {"tether_barge_limit_us", TETHER__KW_POOL},
    {"tether_max_waiters", TETHER__KW_POOL},
    {"tether_leak_threshold", TETHER__KW_POOL},
    {"tether_reset_query", TETHER__KW_POOL},
    {"tether_drain_timeout", TETHER__KW_POOL},
    {"tether_retry", TETHER__KW_POOL},
    {"tether_breaker", TETHER__KW_POOL},
    {"tether_route", TETHER__KW_POOL},
    {"tether_read_pool_max", TETHER__KW_POOL},
    {"tether_max_standby_lag", TETHER__KW_POOL},
    {"tether_lag_recheck", TETHER__KW_POOL},
    {"tether_read_wait", TETHER__KW_POOL},
};

#define NTETHER (sizeof(tether_keywords) / sizeof(tether_keywords[0]))

/* ---- libpq's keywords, from the linked libpq ----------------------------- */

/* libpq's own PQconndefaults list, kept for the life of the process: no
 * copy, so no allocation of tether's can fail here. When libpq is out of
 * memory (NULL), only tether's keywords are known for this call and the
 * next call asks again, instead of a one-time load that failed once
 * leaving the list empty or cut short for good. */
static pthread_mutex_t libpq_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(PQconninfoOption *) libpq_opts;

static PQconninfoOption *libpq_list(void) {
    PQconninfoOption *opts =
        atomic_load_explicit(&libpq_opts, memory_order_acquire);
    if (opts)
        return opts;
    pthread_mutex_lock(&libpq_lock);
    opts = atomic_load_explicit(&libpq_opts, memory_order_relaxed);
    if (!opts) {
        opts = PQconndefaults();
        atomic_store_explicit(&libpq_opts, opts, memory_order_release);
    }
    pthread_mutex_unlock(&libpq_lock);
    return opts;
}

/* libpq_find returns libpq's entry for kw, or NULL. */
static const PQconninfoOption *libpq_find(const char *kw) {
    for (const PQconninfoOption *o = libpq_list(); o && o->keyword; o++)
        if (strcmp(kw, o->keyword) == 0)
            return o;
    return NULL;
}

int tether__conninfo_known(const char *kw) {
    return kw && libpq_find(kw);
}

/* 1 where libpq's dispchar is "*" (a password field). */
int tether__conninfo_libpq_secret(const char *kw) {
    const PQconninfoOption *o = kw ? libpq_find(kw) : NULL;
    return o && o->dispchar && o->dispchar[0] == '*';
}

tether__kw_kind tether__conninfo_kind(const char *kw) {
    if (!kw)
        return TETHER__KW_UNKNOWN;
    for (size_t i = 0; i < NTETHER; i++)
        if (strcmp(kw, tether_keywords[i].name) == 0)
            return tether_keywords[i].kind;
    return tether__conninfo_known(kw) ? TETHER__KW_LIBPQ : TETHER__KW_UNKNOWN;
}

const char *tether__conninfo_keyword(tether__kw_kind kind, size_t i) {
    for (size_t j = 0; j < NTETHER; j++)
        if (tether_keywords[j].kind == kind && i-- == 0)
            return tether_keywords[j].name;
    return NULL;
}

/* ---- typed values -------------------------------------------------------- */

int tether__conninfo_bad_value(const char *key, const char *val,
                               const char *want, tether_error *err) {
    return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                            "connection string: bad value \"%.40s\" for %s: "
                            "%s",
                            val, key, want);
}

static int set_int(const tether__keydef *d, void *field, const char *v,
                   tether_error *err) {
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < d->lo || n > d->hi) {
        char want[80];
        snprintf(want, sizeof(want), "want an integer in [%lld, %lld]",
                 (long long)d->lo, (long long)d->hi);
        return tether__conninfo_bad_value(d->name, v, want, err);
    }
    if (d->type == TETHER__KD_I64)
        *(int64_t *)field = n;
    else
        *(int *)field = (int)n;
    return 0;
}

/* A duration with a unit; with TETHER__KD_MS_INF, "0", "inf" and
 * "infinite" mean no limit (stored as -1). */
static int set_ms(const tether__keydef *d, void *field, const char *v,
                  tether_error *err) {
    if (d->type == TETHER__KD_MS_INF &&
        (!strcmp(v, "inf") || !strcmp(v, "infinite") || !strcmp(v, "0"))) {
        *(int64_t *)field = -1;
        return 0;
    }
    if (tether__duration_parse(v, (int64_t *)field) == 0)
        return 0;
    return tether__conninfo_bad_value(
        d->name, v, "want a duration such as 500ms, 15s, 2m", err);
}

static int set_bool(const tether__keydef *d, void *field, const char *v,
                    tether_error *err) {
    int on = !strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1");
    int off = !strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0");
    if (!on && !off)
        return tether__conninfo_bad_value(d->name, v, "want on or off", err);
    *(int *)field = on;
    return 0;
}

static int set_enum(const tether__keydef *d, void *field, const char *v,
                    tether_error *err) {
    for (int i = 0; d->names[i]; i++)
        if (!strcmp(d->names[i], v)) {
            *(int *)field = i;
            return 0;
        }
    char want[200] = "want one of:";
    for (int i = 0; d->names[i]; i++)
        snprintf(want + strlen(want), sizeof(want) - strlen(want), " %s",
                 d->names[i]);
    return tether__conninfo_bad_value(d->name, v, want, err);
}

static int set_str(void *field, const char *v, tether_error *err) {
    char *s = tether__strdup(v);
    if (!s)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "out of memory");
    tether__free(*(char **)field);
    *(char **)field = s;
    return 0;
}

int tether__keydefs_apply(const tether__keydef *defs, void *base,
                          const char *key, const char *val, tether_error *err) {
    const tether__keydef *d = defs;
    while (d->name && strcmp(d->name, key))
        d++;
    if (!d->name)
        return 1;
    void *field = (char *)base + d->off;
    switch (d->type) {
    case TETHER__KD_INT:
    case TETHER__KD_I64:
        return set_int(d, field, val, err);
    case TETHER__KD_MS:
    case TETHER__KD_MS_INF:
        return set_ms(d, field, val, err);
    case TETHER__KD_BOOL:
        return set_bool(d, field, val, err);
    case TETHER__KD_ENUM:
        return set_enum(d, field, val, err);
    case TETHER__KD_STR:
        return set_str(field, val, err);
    default:
        return d->fn(base, key, val, err);
    }
}
