/* live.h - the process's live pools: every pool created and not yet
 * destroyed, in a list guarded by one mutex that the acquire and release
 * paths never touch (handle.c adds and removes). The layer above (the admin
 * socket, src/admin) walks it and hooks the creation of the first pool and
 * the opening of a pool from a connection string (docs/operations.md). */
#ifndef TETHER_POOL_LIVE_H
#define TETHER_POOL_LIVE_H

#include "conninfo.h"
#include "tether.h"

/* What the layer above asks to hear of (tether__live_hooks_set). */
typedef struct tether__live_hooks {
    /* created: a pool was created (after it is in the list). */
    void (*created)(void);
    /* opened: tether_pool_open made p from ci; an error fails the open. */
    int (*opened)(tether_pool *p, const tether__conninfo *ci,
                  tether_error *err);
} tether__live_hooks;

/* tether__live_hooks_set installs h (static storage) once, at load. */
void tether__live_hooks_set(const tether__live_hooks *h);

/* tether__live_add and tether__live_remove: handle.c, at create and at the
 * start of destroy. Once remove returns, no walk sees p. */
int tether__live_add(tether_pool *p);
void tether__live_remove(tether_pool *p);

/* tether__live_opened runs the opened hook (0 without one). */
int tether__live_opened(tether_pool *p, const tether__conninfo *ci,
                        tether_error *err);

/* tether__live_walk calls fn(p, ctx) for each live pool, in creation order,
 * with the list locked (a pool cannot be destroyed meanwhile: keep fn
 * short, and never create or destroy a pool in it). Stops at fn's first
 * non-zero return and returns it. */
int tether__live_walk(int (*fn)(tether_pool *p, void *ctx), void *ctx);

#endif
