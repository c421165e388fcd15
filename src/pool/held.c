/* held.c - the leases held now: their acquire sites and ages, for
 * tether_pool_holders, the metrics (held, oldest, median) and the message
 * of an acquire that timed out (tether__pool_exhausted, called by the wait
 * queue). Reads the slots only. Checkout records a lease's site and time
 * with leak detection on (tether_leak_threshold, slot.c): recording them
 * always cost the fast path measurably; without it, only the number of
 * leases is known. See docs/pool.md, "When the pool is exhausted". */
#include "waitq.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    int nused; /* slots in use, recorded or not (in transit too) */
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
        v->nused++;
        int64_t at =
            atomic_load_explicit(&s->acquired_ms, memory_order_acquire);
        if (at == NOT_HELD)
            continue; /* not recorded, or in transit */
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
    if (!(p->track &
          TRACK_SITES)) { /* sites not recorded: one row of them all */
        int n = v.nused > 0;
        if (n) {
            memset(&out[0], 0, sizeof(out[0]));
            out[0].count = v.nused;
        }
        view_free(&v);
        return n;
    }
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
    *n = (p->track & TRACK_SITES) ? v.nages : v.nused;
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

/* Why no connection could be created for the caller: paused, the
 * breaker's probe connecting, the breaker blocking, connects failing in
 * the window, max size, or none of these. */
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
    else if (atomic_load(&p->probing))
        snprintf(
            dst, cap,
            "creation blocked: the breaker's probe has been "
            "connecting for %lld ms",
            (long long)((tether__mono_ns() - p->probe_start_ns) / 1000000));
    else if (blocked > 0)
        snprintf(dst, cap,
                 "creation blocked by the breaker (%lld ms more); connects "
                 "failing",
                 (long long)blocked);
    else if (failing)
        snprintf(dst, cap, "creation blocked: connects failing (%llu so far)",
                 (unsigned long long)atomic_load(&p->connect_failures));
    else if (total >= max && p->ad.on)
        snprintf(dst, cap,
                 "creation blocked: adaptive limit %d reached (max %d)", max,
                 p->ad.ceil);
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
        if (!(p->track & TRACK_SITES)) {
            add(msg, sizeof(msg),
                "; %d of %d in use (their sites and ages are recorded with "
                "tether_leak_threshold only)",
                v.nused, max);
        } else if (v.nages == 0) {
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
