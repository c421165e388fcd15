/* ops.c - operating a pool at runtime: resize, pause and resume, evicting
 * the idle connections, a rolling reconnect. A layer above the rooms.
 * Nothing here runs on the fast path: a paused pool, or one above its
 * max_size, sets p->slow (tether__pool_slow_locked, pool.c), whose bias in
 * the waiter count sends acquires and releases down the slow path, where
 * the wait queue and the hand-over (waitq.c) obey it.
 * Pause, resume, evict and reconnect act on a routing pool's read side too
 * (route.h); resize on the pool given (the read side has its own size).
 * See docs/pool.md, "Operating a pool at runtime" and "When the pool is
 * exhausted". */
#include "route.h"
#include "waitq.h"

/* The read side of routing pool p, or NULL. */
static tether_pool *read_side(tether_pool *p) {
    return p->route ? p->route->read : NULL;
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
    if (p->ad.on) /* floor and ceiling of the adaptive limit (adaptive.c) */
        tether__adaptive_resize_locked(p, min_size, max_size);
    else
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
        pthread_cond_signal(p->head->cv);
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
