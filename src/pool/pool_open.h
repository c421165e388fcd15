/* pool_open.h - opening a pool from a connection string parsed already
 * (open.c): for the registry, which parses a string once for its key and
 * its pool. Internal. */
#ifndef TETHER_POOL_OPEN_H
#define TETHER_POOL_OPEN_H

#include "conninfo.h"
#include "pool.h"

/* tether__pool_open_ci is tether_pool_open on ci, which the caller keeps
 * (nothing is parsed again). */
int tether__pool_open_ci(tether_pool **out, const tether__conninfo *ci,
                         tether_event_fn on_event, void *event_ctx,
                         tether_error *err);

/* tether__pool_keys_from is tether__pool_keys_parse (pool.h) on ci. */
int tether__pool_keys_from(const tether__conninfo *ci, tether__pool_keys *k,
                           tether_error *err);

#endif
