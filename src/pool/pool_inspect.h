/* pool_inspect.h - for tests only: what a unit test may see and nudge of a
 * pool's insides, without struct tether_pool. Every function takes the
 * pool's lock where the state it reads is guarded by it. The entry points
 * of the layers above the rooms (housekeeper.h, route.h) are the tests'
 * too; the slot's steps are not (a test takes a slot by its index). */
#ifndef TETHER_POOL_INSPECT_H
#define TETHER_POOL_INSPECT_H

#include "housekeeper.h"
#include "route.h"

/* tether__pool_inspect_waiters returns how many callers wait in p's
 * queue (blocking and non-blocking alike). */
int tether__pool_inspect_waiters(tether_pool *p);

/* tether__pool_inspect_age_head makes p's first waiter look ms longer
 * first (its barging clock, on CLOCK_MONOTONIC, moves back ms). Returns 0,
 * or -1 when nobody waits. */
int tether__pool_inspect_age_head(tether_pool *p, int64_t ms);

/* tether__pool_inspect_head_unarmed says whether p's first waiter marked
 * itself asleep (or became first by a hand-over and was not woken). */
int tether__pool_inspect_head_unarmed(tether_pool *p);

/* tether__pool_inspect_sync takes and lets go p's lock: returns once
 * whoever held it let it go (a waiter that marked itself asleep holds it
 * until its timed wait). */
void tether__pool_inspect_sync(tether_pool *p);

/* tether__pool_inspect_poke_head clears the first waiter's asleep mark
 * and wakes it as a spurious wake-up would. Returns 0, or -1 when nobody
 * waits or the first waiter is a non-blocking acquire (no thread sleeps). */
int tether__pool_inspect_poke_head(tether_pool *p);

/* tether__pool_inspect_slot_index returns the index in its pool of the
 * slot lease l names. */
int tether__pool_inspect_slot_index(const tether_lease *l);

/* tether__pool_inspect_lifetime_ms returns the lifetime drawn for the
 * connection lease l names: when it retires, less when it was made. */
int64_t tether__pool_inspect_lifetime_ms(const tether_lease *l);

/* tether__pool_inspect_reserve_idle takes slot idx of p from idle to
 * reserved, as a housekeeping pass does before it works on a connection.
 * Returns 1, or 0 when the slot was not idle. */
int tether__pool_inspect_reserve_idle(tether_pool *p, int idx);

/* tether__pool_inspect_put_idle gives slot idx of p, reserved, back as a
 * pass does when it is done (to the first waiter, else idle). */
void tether__pool_inspect_put_idle(tether_pool *p, int idx);

/* tether__pool_inspect_route_lag replaces routing pool p's lag query by
 * lag (NULL: keep it) and its recheck interval by recheck_ms (-1: keep
 * it). Returns 0, or -1 when p does not route. */
int tether__pool_inspect_route_lag(tether_pool *p, tether__lag_fn lag,
                                   int64_t recheck_ms);

#endif
