/* driver.h - the driver interface inside the library: the public one
 * (tether_driver.h) under the internal names the pool and the connector
 * use, and the loop that runs a driver's connect within a budget. */
#ifndef TETHER__DRIVER_INTERNAL_H
#define TETHER__DRIVER_INTERNAL_H

#include "tether.h"
#include "tether_driver.h"

typedef tether_wait tether__wait;
typedef tether_endpoint tether__endpoint;

#define TETHER__CONNECTED TETHER_CONNECTED
#define TETHER__IN_PROGRESS TETHER_IN_PROGRESS
#define TETHER__FATAL TETHER_FATAL
#define TETHER__FATAL_SEEN TETHER_FATAL_SEEN

/* tether__driver_connect runs connect_start/connect_poll to completion
 * within budget_ms (-1 = unbounded), waiting with poll() (or sleeping on
 * clock for fd < 0); ep's budget_ms is set to budget_ms. Returns 0 with
 * *conn set, or a negative error (budget exhaustion is TETHER_ETIMEDOUT,
 * transient). */
int tether__driver_connect(const tether_driver *d, void *ctx,
                           const tether__endpoint *ep, int64_t budget_ms,
                           const tether_clock *clock, void **conn,
                           tether_error *err);

#endif
