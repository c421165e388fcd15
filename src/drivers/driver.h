/* driver.h - what the library adds to the public driver interface
 * (tether_driver.h, whose names the pool and the connector use as they
 * are): the loop that runs a driver's connect within a budget, the drain
 * of a connection left with work in flight, and the default driver. */
#ifndef TETHER__DRIVER_INTERNAL_H
#define TETHER__DRIVER_INTERNAL_H

#include "tether.h"
#include "internal.h"
#include "tether_driver.h"

/* tether_driver_pq is the connector's default driver (tether_pq.h, which
 * includes libpq-fe.h: declared here too, so that the layers above the
 * drivers compile without libpq). Its keywords reach them through
 * conninfo's keyword tables (pq.c registers libpq's). */
TETHER_API const tether_driver *tether_driver_pq(void);

/* tether__driver_connect runs connect_start/connect_poll to completion
 * within budget_ms (-1 = unbounded), waiting with poll() (or sleeping on
 * clock for fd < 0); ep's budget_ms is set to budget_ms. Returns 0 with
 * *conn set, or a negative error (budget exhaustion is TETHER_ETIMEDOUT,
 * transient). */
int tether__driver_connect(const tether_driver *d, void *ctx,
                           const tether_endpoint *ep, int64_t budget_ms,
                           const tether_clock *clock, void **conn,
                           tether_error *err);

/* TETHER__EDRAIN: a driver's reset says the connection still runs a
 * statement that outran its deadline (docs/statements.md): the pool hands
 * it to a drain thread instead of closing it (never returned to an
 * application). Negative, so that a caller unaware of it closes the
 * connection. */
#define TETHER__EDRAIN (-1001)

/* tether__driver_drain brings conn of driver d back after TETHER__EDRAIN:
 * the statement cancelled and its results read within bound_ms. Blocks (a
 * background thread's call). 0: reset it and reuse it; else close it. */
int tether__driver_drain(const tether_driver *d, void *conn, int64_t bound_ms);

/* tether__run_deadline_ns is the deadline (mono ns, -1 none) of the
 * tether_pool_run attempt running on this thread: statements default to
 * it (docs/statements.md). */
extern TETHER__TLS int64_t tether__run_deadline_ns;

#endif
