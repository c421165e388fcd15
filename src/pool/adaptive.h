/* adaptive.h - the pool's adaptive limit (tether_pool_limit=adaptive): the
 * number of connections floats between a floor and a ceiling, following
 * the measured hold time of leases against its long-run baseline, and comes
 * down when the server refuses a connect as full (53300, 57P03). Samples
 * are counted on release (one atomic add); the limit is recomputed by the
 * housekeeping pass and applied as the pool's max_size. See docs/pool.md,
 * "Adaptive limit". */
#ifndef TETHER_ADAPTIVE_H
#define TETHER_ADAPTIVE_H

#include "internal.h"

#include <stdatomic.h>
#include <stdint.h>

/* Hold-time samples of the current window, packed in one word so that a
 * release adds both with one atomic step: the count above bit
 * TETHER__AD_SHIFT, the sum of microseconds below. */
#define TETHER__AD_SHIFT 40
#define TETHER__AD_SUM_MASK ((UINT64_C(1) << TETHER__AD_SHIFT) - 1)
#define TETHER__AD_SAMPLE_MAX UINT64_C(0xffffffff) /* a sample's cap, us */

typedef struct tether__adaptive {
    /* Written by every release of an adaptive pool: a line of its own. */
    _Alignas(64) _Atomic uint64_t acc; /* count << SHIFT | sum_us */
    /* Written by a connect refused as full (pool.c), read by the pass. */
    _Atomic uint64_t full_pending;
    _Atomic uint64_t full_53300; /* ... of them 53300 (the rest 57P03) */
    _Atomic int bound;           /* a caller queued at the limit (waitq.c) */

    /* The rule's state: written by the pass under the pool's lock, read
     * by metrics (under the lock too). */
    _Alignas(64) int on;     /* tether_pool_limit=adaptive */
    _Atomic int floor, ceil; /* tether_pool_min (at least 1) and
                                tether_pool_max; changed under the lock */
    double limit;            /* the estimate; o.max_size is its rounding */
    double short_us;         /* the last window's mean hold time (0: none) */
    double long_us;          /* the baseline: an exponential average of short_us
                                over about LONG_WINDOWS windows (0: none yet) */
    int full_cap;            /* no growth above this until full_until_ms (0:
                                none) */
    int64_t full_until_ms;
    int64_t full_hold_ms;    /* the next hold after a refusal (grows) */
    int64_t last_full_ms;    /* the last refusal applied */
    uint64_t up, down, full; /* changes of the applied limit, and the
                                refusals that brought it down */
} tether__adaptive;

/* tether__adaptive_init sets p's adaptive state from its options (create;
 * o.max_size is then the initial limit). */
void tether__adaptive_init(tether_pool *p);

/* tether__adaptive_hold counts one lease's hold time (release, when
 * TRACK_HOLD is set): us microseconds. */
static inline void tether__adaptive_hold(tether__adaptive *ad, uint64_t us) {
    if (us > TETHER__AD_SAMPLE_MAX)
        us = TETHER__AD_SAMPLE_MAX;
    atomic_fetch_add_explicit(&ad->acc, (UINT64_C(1) << TETHER__AD_SHIFT) | us,
                              memory_order_relaxed);
}

/* tether__adaptive_full notes a connect the server refused as full
 * (53300 too_many_connections, 57P03 cannot_connect_now): the next pass
 * brings the limit down. */
void tether__adaptive_full(tether_pool *p, const char *sqlstate);

/* tether__adaptive_bound_locked notes that a caller found the pool at its limit
 * (lock held; the wait queue). */
void tether__adaptive_bound_locked(tether_pool *p);

/* tether__adaptive_pass recomputes p's limit from the window's samples and
 * applies it (the housekeeping pass, every 100 ms; tests call it through
 * tether__pool_housekeep on a virtual clock). */
void tether__adaptive_pass(tether_pool *p, int64_t now_ms);

/* tether__adaptive_resize_locked takes tether_pool_resize's min and max as the
 * floor and ceiling of an adaptive pool (lock held) and sets o.max_size to
 * the limit within them. */
void tether__adaptive_resize_locked(tether_pool *p, int min_size, int max_size);

#endif
