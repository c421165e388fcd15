/* slot.c - the pool's fast path: an acquire that finds an idle connection
 * and a release that nobody waits for. No lock, no allocation: one CAS on
 * the slot's state word to take it (slot_take_lease), one atomic step to give
 * it back (slot_set), and a per-thread memory of the slot this thread used last
 * (thread affinity). When no connection is idle, or a caller waits, the path
 * continues in the wait queue (waitq.c). See docs/pool.md, "Slots and leases"
 * and "The fast path". */
#include "waitq.h"

#define TLS_WAYS 4

/* Per-thread affinity: the slot this thread last released, per pool id. */
typedef struct tls_entry {
    uint64_t pool_id;
    tether__slot *slot;
} tls_entry;

static TETHER__TLS tls_entry tls_cache[TLS_WAYS];

/* ---- thread affinity ----------------------------------------------------- */

/* Take an idle slot, the one this thread used last first; *v gets the
 * state word the take wrote. NULL when none is idle. */
TETHER__HOT static tether__slot *take_idle_slot(tether_pool *p, unsigned *v) {
    tls_entry *t = &tls_cache[p->id % TLS_WAYS];
    if (t->pool_id == p->id && (*v = slot_take_idle(t->slot)) != 0)
        return t->slot;
    /* From a place that differs per thread, wrapping without a division
     * per slot (a queued acquire's arrival scans them all). */
    int n = p->nslots;
    tether__slot *first = &p->slots[((uintptr_t)t >> 6) % (uintptr_t)n];
    tether__slot *end = p->slots + n, *s = first;
    do {
        if ((*v = slot_take_idle(s)) != 0)
            return s;
        if (++s == end)
            s = p->slots;
    } while (s != first);
    return NULL;
}

tether__slot *tether__pool_take_idle(tether_pool *p) {
    if (atomic_load_explicit(&p->paused, memory_order_relaxed))
        return NULL; /* the slow path hands nothing out (ops.c) */
    unsigned v;
    return take_idle_slot(p, &v);
}

const tether__slot *tether__slot_last_used(const tether_pool *p) {
    const tls_entry *t = &tls_cache[p->id % TLS_WAYS];
    return t->pool_id == p->id ? t->slot : NULL;
}

/* note_last_used makes s the slot this thread used last of p. */
TETHER__HOT static void note_last_used(tether_pool *p, tether__slot *s) {
    tls_entry *t = &tls_cache[p->id % TLS_WAYS];
    t->pool_id = p->id;
    t->slot = s;
}

void tether__slot_forget_pool(const tether_pool *p) {
    for (int i = 0; i < TLS_WAYS; i++)
        if (tls_cache[i].pool_id == p->id)
            tls_cache[i].pool_id = 0;
}

/* ---- acquire ------------------------------------------------------------- */

static void relaxed_inc(_Atomic uint64_t *c) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Check an owned slot before handing it out. Returns 0 when it is good,
 * 1 when it was good after a round-trip validation (its duration in
 * *validate_us), -1 when it was discarded (the caller looks for
 * another). */
TETHER__HOT static inline __attribute__((always_inline)) int
checkout(tether_pool *p, tether__slot *s, const char *file, int line,
         int64_t *validate_us) {
    int64_t now = tether__pool_now(p);
    int validated = 0;
    if (s->gen != atomic_load_explicit(&p->gen, memory_order_relaxed)) {
        tether__pool_discard(
            p, s, atomic_load(&p->closing) ? CLOSE_SHUTDOWN : CLOSE_CLEARED);
        return -1;
    }
    if (tether__pool_retire_due(p, s, now)) {
        tether__pool_discard(p, s, CLOSE_LIFETIME);
        return -1;
    }
    if (!tether__pool_still_up(p, s, now - s->released_ms >= p->probe_idle_ms))
        return -1;
    if (now - s->checked_ms > p->validate_idle_ms) {
        int64_t t0 = tether__mono_ns();
        int bad = p->drv->validate(s->conn, p->o.validate_timeout_ms, NULL);
        if (validate_us)
            *validate_us = (tether__mono_ns() - t0) / 1000;
        if (bad) {
            tether__pool_discard(p, s, CLOSE_VALIDATION);
            return -1;
        }
        if (!tether__pool_still_up(p, s, 0)) /* a role change it reported */
            return -1;
        s->checked_ms = now;
        validated = 1;
    }
    if (p->track) /* leak detection, the adaptive limit (pool.c) */
        tether__pool_lease_begin(p, s, file, line, now);
    return validated;
}

int tether__pool_checkout(tether_pool *p, tether__slot *s, const char *file,
                          int line) {
    return checkout(p, s, file, line, NULL);
}

/* acquire_slot is tether_pool_acquire_at giving the slot itself; inlined
 * in both callers, so that neither pays a call more than before. With no
 * idle connection, or a waiter overdue, the wait queue takes over
 * (tether__waitq_acquire, waitq.c). */
TETHER__HOT static inline __attribute__((always_inline)) int
acquire_slot(tether_pool *p, int64_t timeout_ms, tether__slot **out,
             unsigned *v, tether_error *err, const char *file, int line) {
    *out = NULL;
    *v = 0;
    /* No closed check here: close bumps the generation, so checkout
     * discards whatever the fast path finds; the slow path reports it, and
     * a timeout below -1. */
    if (!tether__waitq_overdue(p) && __builtin_expect(timeout_ms >= -1, 1)) {
        tether__slot *s;
        int64_t us = 0;
        while ((s = take_idle_slot(p, v)) != NULL) {
            int rc = checkout(p, s, file, line, &us);
            if (rc == 0)
                relaxed_inc(&s->quick);
            else if (rc > 0) /* timed by its validation round trip */
                tether__pool_hist_add(p, us);
            if (rc >= 0) {
                *out = s;
                return 0;
            }
        }
    }
    return tether__waitq_acquire(p, timeout_ms, out, err, file, line);
}

TETHER__HOT int tether__pool_take(tether_pool *p, int64_t timeout_ms,
                                  tether__slot **out, tether_error *err,
                                  const char *file, int line) {
    unsigned v;
    return acquire_slot(p, timeout_ms, out, &v, err, file, line);
}

TETHER__HOT int tether_pool_acquire_at(tether_pool *p, int64_t timeout_ms,
                                       tether_lease **out, tether_error *err,
                                       const char *file, int line) {
    if (__builtin_expect(!p || !out, 0)) {
        if (out)
            *out = NULL;
        return tether__null(err, "tether_pool_acquire", p ? "out" : "p");
    }
    tether__slot *s;
    unsigned v; /* the state word the fast path's take wrote, else 0 */
    int rc = acquire_slot(p, timeout_ms, &s, &v, err, file, line);
    if (rc == 0 && v == 0) /* the slow path: the slot is ours, read it */
        v = atomic_load_explicit(&s->state, memory_order_relaxed);
    *out = rc == 0 ? lease_token(s, v) : NULL;
    return rc;
}

/* ---- release ------------------------------------------------------------- */

/* What a release does after publishing s idle, h being what its hand-over
 * gave before (0: nobody waited, -1: the first waiter wants its own last
 * connection). The slot may be taken, even closed, at any moment here. */
TETHER__HOT static void after_publish(tether_pool *p, tether__slot *s, int h) {
    for (;;) {
        /* A close that began after our first check may have swept the idle
         * slots already and now waits for this one: take it back and close
         * it (a full barrier on both sides; the CAS decides who closes). */
        if (atomic_load(&p->closing)) {
            if (slot_cas(s, SLOT_IDLE, SLOT_RESERVED))
                tether__pool_discard(p, s, CLOSE_SHUTDOWN);
            return;
        }
        if (atomic_load(&p->waiters) == 0)
            return;
        if (h != 0 || !tether__waitq_overdue(p))
            break;
        if (!slot_take_lease(s, SLOT_IDLE))
            return; /* someone took it */
        if ((h = tether__waitq_handoff(p, s)) > 0)
            return;
        slot_set(s, SLOT_IDLE, 0); /* and look at closing again */
    }
    if (atomic_load(&p->head_unarmed)) /* seq_cst: see waitq.c, sleep_turn */
        tether__waitq_wake_unarmed_head(p, s);
}

TETHER__HOT void tether__pool_put_idle(tether_pool *p, tether__slot *s) {
    if (atomic_load_explicit(&p->closing, memory_order_relaxed)) {
        tether__pool_discard(p, s, CLOSE_SHUTDOWN); /* never idle again */
        return;
    }
    int h = tether__waitq_overdue(p) ? tether__waitq_handoff(p, s) : 0;
    if (h > 0)
        return;
    /* Publishing s and reading the waiter count after it are seq_cst, and a
     * waiter fences between queuing and its rescan (waitq.c, wait_turn): either
     * a waiter that queued before it is seen, or that waiter's own rescan sees
     * this slot idle. In barging mode the first waiter also polls every 2 x
     * barge_limit_us; one made first by a hand-over is woken when no other
     * connection is out, else the housekeeper's tick serves it
     * (tether__pool_serve_head). From the publication on, s counts as
     * returned, so the pool could be destroyed under us: the in-flight
     * count in s's state word, added in the same step, holds
     * tether_pool_destroy back until our last touch of the pool. */
    slot_set(s, SLOT_IDLE, SLOT_INFLIGHT);
    after_publish(p, s, h);
    atomic_fetch_sub(&s->state, SLOT_INFLIGHT);
}

TETHER__HOT static close_reason release_verdict(tether_pool *p,
                                                tether__slot *s) {
    if (atomic_load_explicit(&p->closing, memory_order_relaxed))
        return CLOSE_SHUTDOWN;
    int rc = p->drv->reset(s->conn, p->reset_query, NULL);
    if (__builtin_expect(rc != 0, 0)) {
        if (rc < 0) /* a statement that outran its deadline: drain.c */
            return rc == TETHER__EDRAIN ? KEEP_DRAINING : CLOSE_RESET;
        if (rc == TETHER_FATAL) { /* shutdown, failover: all are suspect */
            tether__pool_fatal(p);
            return CLOSE_CLEARED;
        }
        /* TETHER_ROLLED_BACK: a transaction left open (affinity.c) */
        tether__txn_rolled_back(p, s);
    }
    if (__builtin_expect(
            s->gen != atomic_load_explicit(&p->gen, memory_order_relaxed), 0))
        return atomic_load(&p->closing) ? CLOSE_SHUTDOWN : CLOSE_CLEARED;
    return CLOSE_NREASONS; /* keep it */
}

/* give_back is tether_lease_release of an owned slot (inlined, as
 * acquire_slot). */
TETHER__HOT static inline __attribute__((always_inline)) void
give_back(tether_pool *p, tether__slot *s) {
    close_reason why = release_verdict(p, s);
    if (why != CLOSE_NREASONS) {
        tether__pool_discard(p, s, why); /* KEEP_DRAINING: drains */
        return;
    }
    s->released_ms = s->checked_ms = tether__pool_now(p);
    if (p->track) /* leak detection, the adaptive limit (pool.c) */
        tether__pool_lease_done(p, s, s->released_ms);
    note_last_used(p, s);
    tether__pool_put_idle(p, s);
}

TETHER__HOT void tether__pool_give_back(tether_pool *p, tether__slot *s) {
    give_back(p, s);
}

/* A release or discard of a lease that is not current: refused, counted,
 * logged (the slot and its connection are left alone). */
__attribute__((noinline)) static int stale_lease(const tether_lease *l,
                                                 const char *what) {
    tether_pool *p = lease_slot(l)->pool;
    atomic_fetch_add(&p->stale_releases, 1);
    tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_ERROR,
                "pool %s: %s of a lease already released or discarded: "
                "refused (the connection is not touched)",
                p->name, what);
    return TETHER_EINVAL;
}

/* The release of a lease that is stale, or was acquired with a key (its
 * transaction may stay reserved to it: affinity.c). */
__attribute__((noinline)) static int release_unusual(tether_lease *l,
                                                     unsigned v) {
    if (!lease_current(l, v))
        return stale_lease(l, "release");
    tether__slot *s = lease_slot(l);
    tether__txn_release(s->pool, s);
    return 0;
}

TETHER__HOT int tether_lease_release(tether_lease *l) {
    if (!l)
        return 0; /* as free(NULL) */
    tether__slot *s = lease_slot(l);
    unsigned v = atomic_load_explicit(&s->state, memory_order_relaxed);
    if (__builtin_expect(!lease_plain(l, v), 0)) /* one test for both */
        return release_unusual(l, v);
    give_back(s->pool, s);
    return 0;
}

int tether_lease_discard(tether_lease *l) {
    if (!l)
        return 0; /* as free(NULL) */
    tether__slot *s = lease_held(l);
    if (!s)
        return stale_lease(l, "discard");
    tether__pool_discard(s->pool, s, CLOSE_DISCARDED);
    return 0;
}

/* The slot of a current lease l, else NULL. */
static const tether__slot *lease_peek(const tether_lease *l) {
    const tether__slot *s = l ? lease_slot(l) : NULL;
    return s && lease_current(
                    l, atomic_load_explicit(&s->state, memory_order_relaxed))
               ? s
               : NULL;
}

TETHER__HOT void *tether_lease_handle(const tether_lease *l) {
    const tether__slot *s = lease_peek(l);
    return s ? s->handle : NULL;
}
