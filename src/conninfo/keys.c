/* keys.c - which layer reads each keyword of a connection string, from the
 * tables the layers register (conninfo.h), and the typed setters the
 * connector and the pool map their keywords with.
 *
 * tether's keywords are in their layers' tables: the connector's (the
 * endpoint list, how to connect) and the pool's (how to pool). libpq's are
 * the pq driver's: the linked libpq's own list, so a keyword is accepted
 * exactly when the libpq that will receive it knows it. libpq's
 * target_session_attrs, connect_timeout and load_balance_hosts are in the
 * connector's table: tether implements them, and tether's tables are asked
 * first. */
#include "conninfo.h"
#include "duration.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the registered tables ----------------------------------------------- */

/* Written only under reg_lock; a table is in place before the count that
 * shows it (release), so readers take no lock. Tables are never removed. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static const tether__kwtable *reg_tables[TETHER__KWTABLES_MAX];
static atomic_size_t reg_n;

int tether__keywords_register(const tether__kwtable *t) {
    int rc = 0;
    pthread_mutex_lock(&reg_lock);
    size_t n = atomic_load_explicit(&reg_n, memory_order_relaxed), i = 0;
    while (i < n && reg_tables[i] != t)
        i++;
    if (i == n && n == TETHER__KWTABLES_MAX)
        rc = -1;
    else if (i == n) {
        reg_tables[n] = t;
        atomic_store_explicit(&reg_n, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

/* table returns the i-th registered table, or NULL. */
static const tether__kwtable *table(size_t i) {
    return i < atomic_load_explicit(&reg_n, memory_order_acquire)
               ? reg_tables[i]
               : NULL;
}

/* def_find returns kw's entry in the fixed table t, or NULL. */
static const tether__keydef *def_find(const tether__kwtable *t,
                                      const char *kw) {
    for (const tether__keydef *d = t->defs; d && d->name; d++)
        if (strcmp(kw, d->name) == 0)
            return d;
    return NULL;
}

/* driver_find returns 1 when a driver's list holds kw; *secret says
 * whether the driver marks it as one. */
static int driver_find(const char *kw, int *secret) {
    const tether__kwtable *t;
    for (size_t i = 0; (t = table(i)); i++)
        if (t->find && t->find(kw, secret))
            return 1;
    return 0;
}

int tether__conninfo_known(const char *kw) {
    int secret = 0;
    return kw && driver_find(kw, &secret);
}

int tether__conninfo_libpq_secret(const char *kw) {
    int secret = 0;
    return kw && driver_find(kw, &secret) && secret;
}

tether__kw_kind tether__conninfo_kind(const char *kw) {
    const tether__kwtable *t;
    if (!kw)
        return TETHER__KW_UNKNOWN;
    for (size_t i = 0; (t = table(i)); i++)
        if (def_find(t, kw))
            return t->kind;
    return tether__conninfo_known(kw) ? TETHER__KW_LIBPQ : TETHER__KW_UNKNOWN;
}

const char *tether__conninfo_keyword(tether__kw_kind kind, size_t i) {
    const tether__kwtable *t;
    for (size_t j = 0; (t = table(j)); j++)
        for (const tether__keydef *d = t->defs; t->kind == kind && d && d->name;
             d++)
            if (i-- == 0)
                return d->name;
    return NULL;
}

/* The order tether__keyword_at lists the kinds in. */
static const tether__kw_kind kw_order[] = {TETHER__KW_ENDPOINT,
                                           TETHER__KW_CONNECTOR,
                                           TETHER__KW_POOL, TETHER__KW_LIBPQ};

/* nth_of_table stores the i-th keyword of t in *out and returns 1, or
 * returns 0 and takes t's count off *i. A driver's keyword that a tether
 * table claims (host, connect_timeout, ...) is left out: listed there. */
static int nth_of_table(const tether__kwtable *t, size_t *i,
                        tether__kwinfo *out) {
    const char *name, *desc = NULL;
    for (const tether__keydef *d = t->defs; d && d->name; d++)
        if ((*i)-- == 0) {
            *out = (tether__kwinfo){d->name, t->layer, d->desc, t->kind};
            return 1;
        }
    for (size_t j = 0; t->at && (name = t->at(j, &desc)); j++) {
        if (tether__conninfo_kind(name) != t->kind)
            continue;
        if ((*i)-- == 0) {
            *out = (tether__kwinfo){name, t->layer, desc ? desc : "", t->kind};
            return 1;
        }
    }
    return 0;
}

int tether__keyword_at(size_t i, tether__kwinfo *out) {
    const tether__kwtable *t;
    for (size_t k = 0; k < sizeof(kw_order) / sizeof(kw_order[0]); k++)
        for (size_t j = 0; (t = table(j)); j++)
            if (t->kind == kw_order[k] && nth_of_table(t, &i, out))
                return 0;
    return -1;
}

int tether_conninfo_keyword(size_t i, tether_keyword *out) {
    tether__kwinfo k;
    if (!out || tether__keyword_at(i, &k) != 0)
        return TETHER_EINVAL;
    *out = (tether_keyword){k.name, k.layer, k.desc};
    return 0;
}

/* The longest keyword tether__keyword_near compares. */
#define NEAR_MAX 64

/* edits returns the edit distance of a and b (insert, delete, replace),
 * or a value above 2 as soon as it is sure to be. */
static size_t edits(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b), row[NEAR_MAX + 1];
    if (na > NEAR_MAX || nb > NEAR_MAX || (na > nb ? na - nb : nb - na) > 2)
        return 3;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0], best = row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t v = diag + (a[i - 1] != b[j - 1]);
            v = TETHER__MIN(v, up + 1);
            row[j] = TETHER__MIN(v, row[j - 1] + 1);
            best = TETHER__MIN(best, row[j]);
            diag = up;
        }
        if (best > 2)
            return 3;
    }
    return row[nb];
}

const char *tether__keyword_near(const char *kw) {
    const tether__kwtable *t;
    const char *near = NULL;
    size_t best = 3;
    for (size_t i = 0; kw && (t = table(i)); i++)
        for (const tether__keydef *d = t->defs;
             t->kind != TETHER__KW_LIBPQ && d && d->name; d++) {
            size_t e = edits(kw, d->name);
            if (e < best) {
                best = e;
                near = d->name;
            }
        }
    return near;
}

int tether__conninfo_env(tether__conninfo *env, tether_error *err) {
    const tether__kwtable *t;
    int rc = 0;
    memset(env, 0, sizeof(*env));
    for (size_t i = 0; rc == 0 && (t = table(i)); i++)
        if (t->env)
            rc = t->env(env, err);
    return rc;
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
    case TETHER__KD_FN:
        return d->fn(base, key, val, err);
    default:
        return 1; /* TETHER__KD_OWN: the layer reads it itself */
    }
}
