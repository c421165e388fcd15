/* registry.c - pools keyed by normalized connection string.
 *
 * Each distinct normalized conninfo (conninfo.c: keyword order, whitespace
 * and quoting do not matter; user, password and every other value do) gets
 * its own pool, created on first use from the template options. Entries
 * live in an array sorted by key, searched by bisection under one mutex
 * (pools are few). The mutex is never held while waiting for a
 * connection: an acquire pins its entry (busy++), drops the lock, acquires
 * from the pool, then unpins.
 *
 * Eviction is lazy, with no thread of its own: acquire and count calls scan
 * the entries at most every evict_idle_ms / 4. An entry is evicted when it
 * is not pinned and has no lease out and no waiter at a scan and at
 * an earlier one at least evict_idle_ms before, with no acquire or lease
 * seen in between. Evicted pools are unlinked
 * under the lock, then closed and destroyed outside it; with busy == 0 and
 * the entry unlinked, nobody can reach the pool any more. */
#include "conninfo.h"
#include "internal.h"
#include "pool_open.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char *key;  /* canonical conninfo: the lookup key */
    char *name; /* masked display form, for the registry's log */
    tether_pool *pool;
    int busy;           /* acquires and clears in progress: never evicted */
    int64_t idle_since; /* first scan that saw it idle since its last use;
                           -1: not seen idle yet */
    struct entry *next; /* on an eviction list */
} entry;

struct tether_registry {
    pthread_mutex_t lock;
    tether_pool_opts tmpl; /* strings point at the copies below */
    char *tmpl_name, *tmpl_reset;
    int64_t evict_ms;
    int64_t next_scan_ms;
    entry **v; /* sorted by key */
    int n, cap;
};

/* registry_defaults fills a whole tether_registry_opts with the defaults. */
static void registry_defaults(tether_registry_opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    tether_pool_opts_init(&o->pool);
    o->pool.name = NULL; /* each pool: named from its conninfo */
    o->evict_idle_ms = 600000;
}

void tether_registry_opts_init_sized(tether_registry_opts *o, size_t size) {
    tether_registry_opts d;
    registry_defaults(&d);
    tether__sized_out(o, size, &d, sizeof(d));
}

/* dup_opt copies an optional string into *out. Returns 0 or -1 (ENOMEM). */
static int dup_opt(const char *s, char **out) {
    *out = NULL;
    if (!s)
        return 0;
    *out = tether__strdup(s);
    return *out ? 0 : -1;
}

static int check_opts(const tether_registry_opts *o, tether_error *err) {
    if (!o)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "registry: options are required");
    if (o->pool.connector)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "registry: pool.connector must be NULL (one "
                                "connector would serve every conninfo)");
    if (o->evict_idle_ms < 0)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "registry: evict_idle_ms must be >= 0");
    return 0;
}

static void registry_free(tether_registry *r) {
    tether__free(r->tmpl_name);
    tether__free(r->tmpl_reset);
    tether__free(r->v);
    tether__free(r);
}

int tether_registry_create(tether_registry **out, const tether_registry_opts *o,
                           tether_error *err) {
    if (!out)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "registry: out is NULL");
    *out = NULL;
    tether_registry_opts full;
    registry_defaults(&full);
    int rc = TETHER__SIZED_IN(full, o, "tether_registry_opts", err);
    if (rc == 0 && o)
        rc = tether__sized_in(&full.pool, sizeof(full.pool), &o->pool,
                              sizeof(full.pool), "tether_registry_opts.pool",
                              err);
    if (rc == 0)
        rc = check_opts(o ? &full : NULL, err);
    if (rc != 0)
        return rc;
    o = &full;
    tether_registry *r = tether__calloc(1, sizeof(*r));
    if (!r || dup_opt(o->pool.name, &r->tmpl_name) ||
        dup_opt(o->pool.reset_query, &r->tmpl_reset) ||
        pthread_mutex_init(&r->lock, NULL) != 0) {
        if (r)
            registry_free(r);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "registry: out of memory");
    }
    r->tmpl = o->pool;
    r->tmpl.conninfo = NULL;
    r->tmpl.name = r->tmpl_name;
    r->tmpl.reset_query = r->tmpl_reset;
    r->evict_ms = o->evict_idle_ms;
    *out = r;
    return 0;
}

static void entry_free(entry *e) {
    tether__free(e->key);
    tether__free(e->name);
    tether__free(e);
}

/* entry_destroy closes and destroys e's pool, then frees e. */
static void entry_destroy(entry *e) {
    tether_pool_destroy(e->pool);
    entry_free(e);
}

void tether_registry_destroy(tether_registry *r) {
    if (!r)
        return;
    for (int i = 0; i < r->n; i++) /* stop every pool first, then wait */
        tether_pool_close(r->v[i]->pool, 0, NULL);
    for (int i = 0; i < r->n; i++)
        entry_destroy(r->v[i]);
    pthread_mutex_destroy(&r->lock);
    registry_free(r);
}

/* ------------------------------------------------------------------------ */
/* The sorted array (lock held)                                             */
/* ------------------------------------------------------------------------ */

/* find returns the entry for key, or NULL with *at its insertion index. */
static entry *find(const tether_registry *r, const char *key, int *at) {
    int lo = 0, hi = r->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(r->v[mid]->key, key);
        if (c == 0)
            return r->v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    return NULL;
}

static int insert_at(tether_registry *r, int at, entry *e) {
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 8;
        entry **v = tether__realloc(r->v, (size_t)cap * sizeof(*v));
        if (!v)
            return -1;
        r->v = v;
        r->cap = cap;
    }
    memmove(r->v + at + 1, r->v + at, (size_t)(r->n - at) * sizeof(*r->v));
    r->v[at] = e;
    r->n++;
    return 0;
}

/* evictable tells whether e may go now: idle (not pinned, no lease out)
 * at this scan and at one at least evict_ms earlier, with no use between.
 * Idleness is only ever observed by scans, so it starts at the first scan
 * that sees it: a lease released just before a scan (its release maybe
 * still running) never lets that scan evict the pool. */
static int evictable(const tether_registry *r, entry *e, int64_t now) {
    if (e->busy > 0) {
        e->idle_since = -1;
        return 0;
    }
    tether_pool_metrics m;
    tether_pool_metrics_get(e->pool, &m);
    if (m.in_use > 0 || m.waiters > 0) {
        e->idle_since = -1;
        return 0;
    }
    if (e->idle_since < 0)
        e->idle_since = now;
    return now - e->idle_since >= r->evict_ms;
}

/* scan unlinks the entries to evict, when a scan is due, and returns them
 * as a list for the caller to destroy after unlocking. */
static entry *scan(tether_registry *r, int64_t now) {
    if (r->evict_ms <= 0 || now < r->next_scan_ms)
        return NULL;
    r->next_scan_ms = now + TETHER__MAX(r->evict_ms / 4, 1);
    entry *victims = NULL;
    int out = 0;
    for (int i = 0; i < r->n; i++) {
        entry *e = r->v[i];
        if (evictable(r, e, now)) {
            e->next = victims;
            victims = e;
        } else {
            r->v[out++] = e;
        }
    }
    r->n = out;
    return victims;
}

/* evict destroys a list of unlinked entries (lock not held). */
static void evict(const tether_registry *r, entry *victims) {
    while (victims) {
        entry *e = victims;
        victims = e->next;
        tether__log(r->tmpl.log, r->tmpl.log_ctx, TETHER_LOG_INFO,
                    "registry: closing idle pool %s", e->name);
        entry_destroy(e);
    }
}

/* ------------------------------------------------------------------------ */
/* Acquire                                                                  */
/* ------------------------------------------------------------------------ */

/* A parsed conninfo and its canonical key (on the stack when short: the
 * hit path allocates only inside the parser). */
typedef struct conn_key {
    tether__conninfo ci;
    char *key;
    char buf[256];
} conn_key;

static int key_make(conn_key *k, const char *conninfo, tether_error *err) {
    int rc = tether__conninfo_parse(conninfo, &k->ci, err);
    k->key = k->buf;
    if (rc != 0)
        return rc;
    size_t n = tether__conninfo_format(&k->ci, 0, k->buf, sizeof(k->buf));
    if (n >= sizeof(k->buf) && !(k->key = tether__conninfo_dup(&k->ci, 0)))
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "registry: out of memory");
    return 0;
}

static void key_free(conn_key *k) {
    if (k->key && k->key != k->buf)
        tether__free(k->key);
    tether__conninfo_wipe(&k->ci); /* it holds the password */
}

/* entry_new makes the entry and pool for conninfo (lock held). */
static int entry_new(tether_registry *r, const char *conninfo,
                     const conn_key *k, entry **out, tether_error *err) {
    entry *e = tether__calloc(1, sizeof(*e));
    if (e) {
        e->key = tether__strdup(k->key);
        e->name = tether__conninfo_dup(&k->ci, 1);
    }
    if (!e || !e->key || !e->name) {
        if (e)
            entry_free(e);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "registry: out of memory");
    }
    tether_pool_opts po = r->tmpl;
    po.conninfo = conninfo;
    char *name = NULL; /* named as tether_pool_open names a pool */
    int rc = po.name || !po.driver
                 ? 0
                 : tether__conninfo_pool_name(&k->ci, &name, err);
    if (name)
        po.name = name;
    /* No driver in the template: PostgreSQL, everything (hosts, strategy,
     * credentials, pool settings) from this connection string, as parsed
     * for the key (not parsed again). */
    if (rc == 0)
        rc = po.driver
                 ? tether_pool_create(&e->pool, &po, err)
                 : tether__pool_open_ci(&e->pool, &k->ci, NULL, NULL, err);
    tether__free(name);
    if (rc != 0) {
        entry_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

/* pin_locked finds or creates the entry for k and pins it (busy++). */
static int pin_locked(tether_registry *r, const char *conninfo,
                      const conn_key *k, entry **out, tether_error *err) {
    int at = 0, rc = 0;
    entry *e = find(r, k->key, &at);
    if (!e && (rc = entry_new(r, conninfo, k, &e, err)) == 0 &&
        insert_at(r, at, e) != 0) {
        entry_destroy(e); /* a new pool: nothing out, quick to close */
        rc = tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                              "registry: out of memory");
    }
    if (rc == 0) {
        e->busy++;
        e->idle_since = -1;
        *out = e;
    }
    return rc;
}

/* pin parses conninfo (no lock), then under the lock unlinks the pools due
 * for eviction into *victims and pins the entry for conninfo. */
static int pin(tether_registry *r, const char *conninfo, entry **out,
               entry **victims, tether_error *err) {
    conn_key k;
    int rc = key_make(&k, conninfo, err);
    if (rc == 0) {
        int64_t now = tether__now_ms(r->tmpl.clock);
        pthread_mutex_lock(&r->lock);
        *victims = scan(r, now);
        rc = pin_locked(r, conninfo, &k, out, err);
        pthread_mutex_unlock(&r->lock);
    }
    key_free(&k);
    return rc;
}

static void unpin(tether_registry *r, entry *e) {
    pthread_mutex_lock(&r->lock);
    e->busy--;
    e->idle_since = -1; /* used just now */
    pthread_mutex_unlock(&r->lock);
}

int tether_registry_acquire_at(tether_registry *r, const char *conninfo,
                               int64_t timeout_ms, tether_lease **out,
                               tether_error *err, const char *file, int line) {
    if (out)
        *out = NULL;
    if (!r || !conninfo || !out)
        return tether__null(err, "tether_registry_acquire",
                            !r          ? "r"
                            : !conninfo ? "conninfo"
                                        : "out");
    entry *e = NULL, *victims = NULL;
    int rc = pin(r, conninfo, &e, &victims, err);
    evict(r, victims);
    if (rc != 0)
        return rc;
    rc = tether_pool_acquire_at(e->pool, timeout_ms, out, err, file, line);
    unpin(r, e);
    return rc;
}

void tether_registry_clear_all(tether_registry *r) {
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    int n = r->n;
    entry **pinned = tether__malloc((size_t)(n > 0 ? n : 1) * sizeof(*pinned));
    if (!pinned) { /* no memory: clear under the lock instead */
        for (int i = 0; i < n; i++)
            tether_pool_clear(r->v[i]->pool);
        pthread_mutex_unlock(&r->lock);
        return;
    }
    for (int i = 0; i < n; i++) {
        pinned[i] = r->v[i];
        pinned[i]->busy++;
    }
    pthread_mutex_unlock(&r->lock);
    for (int i = 0; i < n; i++) /* closing idle connections: no lock */
        tether_pool_clear(pinned[i]->pool);
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < n; i++)
        pinned[i]->busy--;
    pthread_mutex_unlock(&r->lock);
    tether__free(pinned);
}

int tether_registry_count(tether_registry *r) {
    if (!r)
        return 0;
    int64_t now = tether__now_ms(r->tmpl.clock);
    pthread_mutex_lock(&r->lock);
    entry *victims = scan(r, now);
    int n = r->n;
    pthread_mutex_unlock(&r->lock);
    evict(r, victims);
    return n;
}
int tether_registry_normalize(const char *conninfo, char *buf, size_t cap,
                              tether_error *err) {
    tether__conninfo ci;
    if (!conninfo || (!buf && cap > 0))
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "conninfo and buf must not be NULL");
    if (cap > 0)
        buf[0] = '\0';
    int rc = tether__conninfo_parse(conninfo, &ci, err);
    if (rc == 0) {
        size_t n = tether__conninfo_format(&ci, 0, buf, cap);
        rc = n > INT_MAX
                 ? tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                    "connection string: key too long")
                 : (int)n;
    }
    tether__conninfo_free(&ci);
    return rc;
}
