/* housekeeper.h - the pool's one background duty, above the pool: idle
 * timeouts, lifetimes, keepalives, leak reports and refill, on the core
 * ticker (docs/pool.md, "Housekeeping"). Started by whoever creates the
 * pool (tether_pool_create). */
#ifndef TETHER_HOUSEKEEPER_H
#define TETHER_HOUSEKEEPER_H

#include "pool.h"

/* tether__hk_register starts p's housekeeping on the core ticker (pools
 * on the real clock only); tether__hk_unregister stops it: once it
 * returns, no housekeeping of p runs. */
void tether__hk_register(tether_pool *p);
void tether__hk_unregister(tether_pool *p);

/* tether__pool_housekeep runs one housekeeping pass over p now: idle
 * timeout, lifetime, keepalive, leak reports, refill to min. Tests call it
 * directly with a virtual clock. */
void tether__pool_housekeep(tether_pool *p);

#endif
