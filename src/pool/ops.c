/* ops.c - operating a pool at runtime: resize, pause and resume, evicting
 * the idle connections, a rolling reconnect; who holds the leases
 * (tether_pool_holders) and the message of an exhausted pool. Nothing here
 * runs on the fast path: a paused pool, or one above its max_size, sets
 * p->slow, whose bias in the waiter count sends acquires and releases down
 * the slow path, where the wait queue and the hand-over (waitq.c) obey it.
 * Pause, resume, evict and reconnect act on a routing pool's read side too
 * (route.h); resize on the pool given (the read side has its own size).
 * See docs/pool.md, "Operating a pool at runtime" and "When the pool is
 * exhausted". */
#include "route.h"
#include "waitq.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The read side of routing pool p, or NULL. */
static tether_pool *read_side(tether_pool *p) {
    return p->route ? p->route->read : NULL;
}

void tether__pool_slow_locked(tether_pool *p) {
    int want = atomic_load(&p->paused) || p->total > p->o.max_size;
    if (want == atomic_load(&p->slow))
        return;
    atomic_store(&p->slow, want);
    atomic_fetch_add(&p->waiters,
                     want ? TETHER__SLOW_BIAS : -TETHER__SLOW_BIAS);
}

/* Close idle connections, all of them (all) or while p holds more than its
 * max_size. Returns how many were closed. */
static int close_idle(tether_pool *p, int all) {
    int n = 0;
    for (int i = 0; i < p->nslots; i++) {
        if (!all) {
            pthread_mutex_lock(&p->lock);
            int over = p->total > p->o.max_size;
            pthread_mutex_unlock(&p->lock);
            if (!over)
                break;
        }
        tether__slot *s = &p->slots[i];
        if (slot_cas(s, SLOT_IDLE, SLOT_RESERVED)) {
            tether__pool_discard(p, s, CLOSE_IDLE);
            n++;
        }
    }
    atomic_fetch_add(&p->evicted, (uint64_t)n);
    return n;
}

int tether_pool_resize(tether_pool *p, int min_size, int max_size,
                       tether_error *err) {
    if (!p)
        return tether__null(err, "tether_pool_resize", "p");
    if (max_size < 1 || max_size > p->nslots)
        return tether_error_set(
            err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
            "pool %s: bad max_size %d: want 1..%d (the pool's capacity: "
            "tether_pool_opts.max_size_limit, else max_size at creation)",
            p->name, max_size, p->nslots);
    if (min_size < 0 || min_size > max_size)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "pool %s: bad min_size %d: want 0..max_size "
                                "(%d)",
                                p->name, min_size, max_size);
    pthread_mutex_lock(&p->lock);
    if (atomic_load(&p->closing)) {
        pthread_mutex_unlock(&p->lock);
        return tether_error_set(err, TETHER_ECLOSED, TETHER_CLASS_PERMANENT,
                                "pool %s is closed", p->name);
    }
    p->o.min_size = min_size;
    p->o.max_size = max_size;
    tether__pool_slow_locked(p);
    tether__pool_grant_locked(p); /* growing: waiters may create now */
    int over = p->total > max_size;
    pthread_mutex_unlock(&p->lock);
    atomic_fetch_add(&p->resizes, 1);
    if (over)
        close_idle(p, 0); /* leased ones close as they come back (waitq.c) */
    tether__pool_fill(p);
    return 0;
}

int tether_pool_pause(tether_pool *p, unsigned flags) {
    if (!p)
        return TETHER_EINVAL;
    pthread_mutex_lock(&p->lock);
    if (!atomic_load(&p->paused)) {
        atomic_store(&p->paused, 1);
        atomic_fetch_add(&p->pauses, 1);
    }
    tether__pool_slow_locked(p);
    pthread_mutex_unlock(&p->lock);
    if (flags & TETHER_PAUSE_CLOSE_IDLE)
        close_idle(p, 1);
    if (read_side(p))
        tether_pool_pause(read_side(p), flags);
    return 0;
}

int tether_pool_resume(tether_pool *p) {
    if (!p)
        return TETHER_EINVAL;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->paused, 0);
    tether__pool_slow_locked(p);
    pthread_mutex_unlock(&p->lock);
    /* The callers that waited take the idle connections first: each goes
     * through the hand-over as a release would. */
    for (int i = 0; i < p->nslots && tether__pool_queued(p) > 0; i++) {
        tether__slot *s = &p->slots[i];
        if (slot_take_idle(s))
            tether__pool_put_idle(p, s);
    }
    pthread_mutex_lock(&p->lock);
    if (!atomic_load(&p->closing))
        tether__pool_grant_locked(p);   /* and capacity for the rest */
    if (p->head && !p->head->no_thread) /* to poll for idle ones */
        pthread_cond_signal(&p->head->cv);
    pthread_mutex_unlock(&p->lock);
    tether__pool_fill(p);
    if (read_side(p))
        tether_pool_resume(read_side(p));
    return 0;
}

int tether_pool_paused(tether_pool *p) {
    return p ? atomic_load(&p->paused) : 0;
}

int tether_pool_evict_idle(tether_pool *p) {
    if (!p)
        return 0;
    int n = close_idle(p, 1);
    return read_side(p) ? n + tether_pool_evict_idle(read_side(p)) : n;
}

int tether_pool_reconnect(tether_pool *p) {
    if (!p)
        return TETHER_EINVAL;
    atomic_fetch_add(&p->reconnects, 1);
    /* A new generation: checkout closes idle connections of the old one,
     * and releases close the leased ones (as tether_pool_clear, without
     * the router's callback). */
    atomic_fetch_add(&p->gen, 1);
    for (int i = 0; i < p->nslots; i++) {
        tether__slot *s = &p->slots[i];
        if (slot_cas(s, SLOT_IDLE, SLOT_RESERVED))
            tether__pool_discard(p, s, CLOSE_CLEARED);
    }
    tether__txn_sweep(p, CLOSE_CLEARED);
    if (p->o.connector)
        tether_connector_invalidate(p->o.connector);
    tether__pool_fill(p);
    if (read_side(p))
        tether_pool_reconnect(read_side(p));
    return 0;
}

/* ---- held leases ---------------------------------------------------------
 */

/* One acquire site and what it holds. */
typedef struct held_site {
    const char *file;
    int line;
    int count;
    int64_t oldest_at; /* acquired_ms of its oldest lease */
} held_site;

/* What the leases held now look like: ages sorted, sites by count. */
typedef struct held_view {
    held_site *sites;
    int nsites;
    int64_t *ages; /* ms, ascending */
    int nages;
} held_view;

static int by_age(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int by_count(const void *a, const void *b) {
    const held_site *x = a, *y = b;
    if (x->count != y->count)
        return y->count - x->count;
    return (x->oldest_at > y->oldest_at) - (x->oldest_at < y->oldest_at);
}

static void view_free(held_view *v) {
    tether__free(v->sites);
    tether__free(v->ages);
}

/* Scan p's slots for the leases held at now (p's clock). Returns 0, or -1
 * out of memory. */
static int view_held(tether_pool *p, int64_t now, held_view *v) {
    memset(v, 0, sizeof(*v));
    v->sites = tether__malloc(sizeof(held_site) * (size_t)p->nslots);
    v->ages = tether__malloc(sizeof(int64_t) * (size_t)p->nslots);
    if (!v->sites || !v->ages) {
        view_free(v);
        return -1;
    }
    for (int i = 0; i < p->nslots; i++) {
        tether__slot *s = &p->slots[i];
        if (slot_state(s) != SLOT_USED)
            continue;
        int64_t at =
            atomic_load_explicit(&s->acquired_ms, memory_order_acquire);
        if (at == NOT_HELD)
            continue; /* in transit: being handed over or checked */
        const char *file = atomic_load_explicit(&s->file, memory_order_relaxed);
        int line = atomic_load_explicit(&s->line, memory_order_relaxed);
        v->ages[v->nages++] = now - at < 0 ? 0 : now - at;
        int j = 0;
        while (j < v->nsites &&
               (v->sites[j].file != file || v->sites[j].line != line))
            j++;
        if (j == v->nsites)
            v->sites[v->nsites++] = (held_site){file, line, 0, at};
        v->sites[j].count++;
        if (at < v->sites[j].oldest_at)
            v->sites[j].oldest_at = at;
    }
    qsort(v->ages, (size_t)v->nages, sizeof(int64_t), by_age);
    qsort(v->sites, (size_t)v->nsites, sizeof(held_site), by_count);
    return 0;
}

/* The site's name: the file's base name and the line ("" unknown). */
static void site_name(const held_site *h, char *dst, size_t cap) {
    const char *f = h->file ? h->file : "";
    const char *slash = strrchr(f, '/');
    if (slash)
        f = slash + 1;
    if (!*f)
        snprintf(dst, cap, "%s", "");
    else if (h->line > 0)
        snprintf(dst, cap, "%s:%d", f, h->line);
    else
        snprintf(dst, cap, "%s", f);
}

int tether_pool_holders(tether_pool *p, tether_pool_holder *out, int cap) {
    if (!p || !out || cap <= 0)
        return 0;
    int64_t now = tether__pool_now(p);
    held_view v;
    if (view_held(p, now, &v))
        return 0;
    int n = TETHER__MIN(cap, v.nsites);
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        site_name(&v.sites[i], out[i].site, sizeof(out[i].site));
        out[i].count = v.sites[i].count;
        out[i].oldest_ms = now - v.sites[i].oldest_at;
    }
    view_free(&v);
    return n;
}

/* Ages of the leases held: the oldest, the median, their number. */
void tether__pool_held_ages(tether_pool *p, int *n, int64_t *oldest,
                            int64_t *median) {
    held_view v;
    *n = 0;
    *oldest = *median = 0;
    if (view_held(p, tether__pool_now(p), &v))
        return;
    *n = v.nages;
    if (v.nages) {
        *oldest = v.ages[v.nages - 1];
        *median = v.ages[v.nages / 2];
    }
    view_free(&v);
}

/* ---- the exhausted pool's message ---------------------------------------
 */

/* Append to buf (cap bytes, NUL-terminated) like snprintf; returns 0, or
 * -1 (buf unchanged) when it would not fit. */
static int add(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int add(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - len) {
        buf[len] = '\0';
        return -1;
    }
    return 0;
}

/* Why no connection could be created for the caller: paused, the breaker,
 * connects failing in the window, max size, or none of these. */
static void why_blocked(tether_pool *p, int64_t waited_ms, int paused,
                        int total, int max, int creating, char *dst,
                        size_t cap) {
    int64_t blocked =
        p->breaker ? tether__breaker_blocked_ms(p->breaker, NULL) : 0;
    int64_t fail = atomic_load(&p->last_fail_ns);
    int failing =
        fail != 0 && tether__mono_ns() - fail <= (waited_ms + 1) * 1000000;
    if (paused)
        snprintf(dst, cap, "the pool is paused (tether_pool_resume ends it)");
    else if (blocked > 0)
        snprintf(dst, cap,
                 "creation blocked by the breaker (%lld ms more); connects "
                 "failing",
                 (long long)blocked);
    else if (failing)
        snprintf(dst, cap, "creation blocked: connects failing (%llu so far)",
                 (unsigned long long)atomic_load(&p->connect_failures));
    else if (total >= max)
        snprintf(dst, cap, "creation blocked: max size %d reached", max);
    else if (creating > 0)
        snprintf(dst, cap, "%d connects in progress", creating);
    else
        snprintf(dst, cap, "creation not blocked");
}

int tether__pool_exhausted(tether_pool *p, int64_t waited_ms, tether_error *err,
                           int locked) {
    int64_t now = tether__pool_now(p);
    if (!locked)
        pthread_mutex_lock(&p->lock);
    int total = p->total, max = p->o.max_size, creating = p->creating;
    int queued = p->nqueued, paused = atomic_load(&p->paused);
    if (!locked)
        pthread_mutex_unlock(&p->lock);
    char why[96];
    why_blocked(p, waited_ms, paused, total, max, creating, why, sizeof(why));
    char msg[TETHER_MSG_MAX] = "";
    add(msg, sizeof(msg),
        "pool %.48s: no connection within %lld ms; %d waiting; %s", p->name,
        (long long)waited_ms, queued, why);
    int txn = atomic_load(&p->txn_reserved);
    if (txn > 0) /* docs/pool.md, "Transactions across acquires" */
        add(msg, sizeof(msg),
            "; %d of %d connections are reserved by open transactions", txn,
            max);
    held_view v;
    if (view_held(p, now, &v) == 0) {
        if (v.nages == 0) {
            add(msg, sizeof(msg), "; none held");
        } else if (add(msg, sizeof(msg),
                       "; %d of %d held (oldest %lld ms, median %lld ms) by",
                       v.nages, max, (long long)v.ages[v.nages - 1],
                       (long long)v.ages[v.nages / 2]) == 0) {
            for (int i = 0; i < v.nsites; i++) {
                char site[64];
                site_name(&v.sites[i], site, sizeof(site));
                /* leave room for the ", ..." of the sites left out */
                if (add(msg, sizeof(msg) - 5, "%s %s x%d (%lld ms)",
                        i ? "," : "", *site ? site : "?", v.sites[i].count,
                        (long long)(now - v.sites[i].oldest_at))) {
                    add(msg, sizeof(msg), ", ...");
                    break;
                }
            }
        }
        view_free(&v);
    }
    return tether_error_set_not_sent(err, TETHER_ETIMEDOUT,
                                     TETHER_CLASS_THROTTLED, "%s", msg);
}
