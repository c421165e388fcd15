/* adaptive.c - the adaptive limit (tether_pool_limit=adaptive): a layer
 * above the rooms, run by the housekeeping pass. Releases count their
 * lease's hold time into one word (tether__adaptive_hold, pool.c); every
 * pass turns the window's mean into a new limit by the rule of
 * docs/pool.md, "Adaptive limit", and applies it as o.max_size: growing
 * grants waiters room to create, shrinking closes idle connections above
 * it at once and leased ones as they are released (the slow mode of
 * ops.c, tether__pool_slow_locked). A connect the server refused as full
 * (53300, 57P03) brings it down at the next pass. */
#include "waitq.h"

#include <math.h>
#include <string.h>

/* The rule's constants (docs/pool.md, "Adaptive limit"). */
#define TOLERANCE 1.5     /* hold time may reach this x the baseline */
#define GRADIENT_MIN 0.5  /* the most one window takes off, before smoothing */
#define SMOOTHING 0.5     /* the estimate moves this far to the target */
#define FULL_BACKOFF 0.75 /* a refusal: the limit to this x what was open */
#define FULL_HOLD_MS 5000 /* then no growth above it for this long, */
#define FULL_HOLD_MAX_MS 60000 /* doubled on each refusal up to this, */
#define FULL_QUIET_MS 300000   /* back to FULL_HOLD_MS after this quiet */
#define START_LIMIT 4          /* the first limit, within floor..ceil */
#define LONG_WINDOWS 50        /* the baseline's average: about 5 s of passes */
#define LONG_DRIFT 0.95 /* its pull down while above twice the window's */

static int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

static double clamp_d(double v, double lo, double hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

void tether__adaptive_init(tether_pool *p) {
    tether__adaptive *ad = &p->ad;
    memset(ad, 0, sizeof(*ad));
    ad->on = p->o.limit == TETHER_POOL_LIMIT_ADAPTIVE;
    atomic_init(&ad->floor, TETHER__MAX(p->o.min_size, 1));
    atomic_init(&ad->ceil, p->o.max_size);
    ad->full_hold_ms = FULL_HOLD_MS;
    if (!ad->on)
        return;
    int first = clamp_int(START_LIMIT, atomic_load(&ad->floor), p->o.max_size);
    ad->limit = first;
    p->o.max_size = first;
}

void tether__adaptive_full(tether_pool *p, const char *sqlstate) {
    if (!strcmp(sqlstate, "53300"))
        atomic_fetch_add(&p->ad.full_53300, 1);
    atomic_fetch_add(&p->ad.full_pending, 1);
}

void tether__adaptive_bound_locked(tether_pool *p) {
    atomic_store_explicit(&p->ad.bound, 1, memory_order_relaxed);
}

/* Close idle connections while p holds more than its limit. */
static void close_excess(tether_pool *p) {
    for (int i = 0; i < p->nslots; i++) {
        pthread_mutex_lock(&p->lock);
        int over = p->total > p->o.max_size;
        pthread_mutex_unlock(&p->lock);
        if (!over)
            return;
        tether__slot *s = &p->slots[i];
        if (slot_cas(s, SLOT_IDLE, SLOT_RESERVED)) {
            atomic_fetch_add(&p->evicted, 1);
            tether__pool_discard(p, s, CLOSE_IDLE);
        }
    }
}

/* The window's mean hold time into short_us, and the baseline. Returns 0
 * when the window had no release (nothing learnt: no update). */
static int measure(tether__adaptive *ad) {
    uint64_t acc = atomic_exchange_explicit(&ad->acc, 0, memory_order_relaxed);
    uint64_t n = acc >> TETHER__AD_SHIFT;
    if (n == 0)
        return 0;
    ad->short_us = (double)(acc & TETHER__AD_SUM_MASK) / (double)n;
    if (ad->short_us < 1)
        ad->short_us = 1; /* a microsecond: the clock's unit */
    if (ad->long_us == 0) /* the first window */
        ad->long_us = ad->short_us;
    ad->long_us += (ad->short_us - ad->long_us) / LONG_WINDOWS;
    if (ad->long_us > 2 * ad->short_us) /* latency fell back: follow it */
        ad->long_us *= LONG_DRIFT;
    return 1;
}

/* The rule (lock held): the estimate's target from this window. */
static double target(tether__adaptive *ad, int bound, int in_use) {
    double l = ad->limit;
    double g =
        clamp_d(TOLERANCE * ad->long_us / ad->short_us, GRADIENT_MIN, 1.0);
    if (bound) /* room for sqrt(limit) more while latency holds */
        return l * g + (g >= 1.0 ? sqrt(l) : 0.0);
    if (in_use * 2 < l) /* far from the limit: nothing learnt of it */
        return l;
    return l * g; /* no growth while the pool is not at its limit */
}

/* A refusal of a connect as full (lock held): the limit comes down to
 * FULL_BACKOFF x what the pool holds (or its limit, if less); for a 53300
 * (full53300: the server is at its limit) it does not grow above that for
 * a hold that doubles with each such refusal. 57P03 alone (starting up or
 * shutting down: a transition, not a size) sets no hold. */
static void refused_locked(tether_pool *p, int64_t now_ms, int full53300) {
    tether__adaptive *ad = &p->ad;
    double held = TETHER__MIN((double)p->total, ad->limit);
    ad->limit = TETHER__MAX(held * FULL_BACKOFF, 1.0);
    ad->full++;
    if (!full53300)
        return;
    if (ad->last_full_ms && now_ms - ad->last_full_ms > FULL_QUIET_MS)
        ad->full_hold_ms = FULL_HOLD_MS;
    else if (ad->last_full_ms)
        ad->full_hold_ms = TETHER__MIN(ad->full_hold_ms * 2, FULL_HOLD_MAX_MS);
    ad->last_full_ms = now_ms;
    ad->full_until_ms = now_ms + ad->full_hold_ms;
    ad->full_cap = TETHER__MAX((int)ad->limit, 1);
}

/* Set o.max_size to the estimate's rounding (lock held). Returns the old
 * value. */
static int apply_locked(tether_pool *p, int64_t now_ms) {
    tether__adaptive *ad = &p->ad;
    int lo = atomic_load(&ad->floor), hi = atomic_load(&ad->ceil);
    if (ad->full_cap && now_ms < ad->full_until_ms)
        hi = TETHER__MAX(lo, TETHER__MIN(hi, ad->full_cap));
    ad->limit = clamp_d(ad->limit, lo, hi);
    int old = p->o.max_size;
    int now = (int)floor(ad->limit + 0.5);
    if (now == old)
        return old;
    p->o.max_size = now;
    if (now > old)
        ad->up++;
    else
        ad->down++;
    tether__pool_slow_locked(p);  /* above it: releases close (waitq.c) */
    tether__pool_grant_locked(p); /* below it: waiters may create now */
    return old;
}

/* One log line per pass at most: a refusal at info level, other changes
 * at debug level. */
static void log_change(tether_pool *p, int old, int now, int full,
                       const char *sqlstate_seen) {
    tether__adaptive *ad = &p->ad;
    if (full && !strcmp(sqlstate_seen, "53300"))
        tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_INFO,
                    "pool %s: adaptive limit %d -> %d: the server refused a "
                    "connect as full (53300); no growth above %d for %lld ms",
                    p->name, old, now, ad->full_cap,
                    (long long)ad->full_hold_ms);
    else if (full)
        tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_INFO,
                    "pool %s: adaptive limit %d -> %d: the server refused a "
                    "connect (%s: starting up or shutting down)",
                    p->name, old, now, sqlstate_seen);
    else
        tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_DEBUG,
                    "pool %s: adaptive limit %d -> %d (hold %.2f ms, "
                    "baseline %.2f ms)",
                    p->name, old, now, ad->short_us / 1000.0,
                    ad->long_us / 1000.0);
}

void tether__adaptive_pass(tether_pool *p, int64_t now_ms) {
    tether__adaptive *ad = &p->ad;
    if (!ad->on)
        return;
    int in_use = 0;
    for (int i = 0; i < p->nslots; i++) {
        int st = slot_state(&p->slots[i]);
        in_use += st == SLOT_USED || st == SLOT_TXN;
    }
    int bound = atomic_exchange_explicit(&ad->bound, 0, memory_order_relaxed);
    uint64_t full = atomic_exchange(&ad->full_pending, 0);
    uint64_t full53300 = atomic_exchange(&ad->full_53300, 0);
    pthread_mutex_lock(&p->lock);
    int sampled = measure(ad);
    /* at the limit: a caller queued there, or every connection in use */
    bound = bound || in_use >= p->o.max_size ||
            (p->nqueued > 0 && p->total >= p->o.max_size);
    if (full)
        refused_locked(p, now_ms, full53300 > 0);
    else if (sampled && ad->long_us > 0)
        ad->limit += SMOOTHING * (target(ad, bound, in_use) - ad->limit);
    int old = apply_locked(p, now_ms);
    int now = p->o.max_size, over = p->total > now;
    pthread_mutex_unlock(&p->lock);
    if (old != now)
        log_change(p, old, now, full != 0, full53300 ? "53300" : "57P03");
    if (over)
        close_excess(p);
}

void tether__adaptive_resize_locked(tether_pool *p, int min_size,
                                    int max_size) {
    tether__adaptive *ad = &p->ad;
    atomic_store(&ad->floor, TETHER__MAX(min_size, 1));
    atomic_store(&ad->ceil, max_size);
    apply_locked(p, tether__pool_now(p));
}
