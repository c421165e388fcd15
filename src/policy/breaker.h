/* breaker.h - what the pool asks of a breaker beyond the public API. */
#ifndef TETHER_BREAKER_H
#define TETHER_BREAKER_H

#include "internal.h"

/* tether__breaker_blocks tells, without changing anything, whether a call
 * made now would be refused: open within its period, half-open with its
 * probe out within the period, or isolated. A closed breaker answers from
 * one atomic load. */
int tether__breaker_blocks(tether_breaker *b);

#endif
