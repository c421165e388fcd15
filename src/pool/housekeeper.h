/* housekeeper.h - the pool's one background duty, above the pool: idle
 * timeouts, lifetimes, keepalives, leak reports and refill, on the core
 * ticker (docs/pool.md, "The housekeeper"). Started by whoever creates the
 * pool (tether_pool_create). */
#ifndef TETHER_HOUSEKEEPER_H
#define TETHER_HOUSEKEEPER_H

#include "pool.h"

/* tether__housekeeper_start starts p's housekeeping on the core ticker (pools
 * on the real clock only); tether__housekeeper_stop stops it: once it
 * returns, no housekeeping of p runs. */
void tether__housekeeper_start(tether_pool *p);
void tether__housekeeper_stop(tether_pool *p);

/* tether__pool_housekeep runs one housekeeping pass over p now: idle
 * timeout, lifetime, keepalive, leak reports, refill to min. Tests call it
 * directly with a virtual clock. */
void tether__pool_housekeep(tether_pool *p);

#endif
