/* backoff.h - internal backoff state, shared by the iterator, the retry
 * executor (which keeps it on its stack: no allocation per run) and the
 * connection schedules. */
#ifndef TETHER_BACKOFF_H
#define TETHER_BACKOFF_H

#include "internal.h"

typedef struct tether__backoff_state {
    tether__rng rng;
    int n;           /* pauses produced so far */
    int throttles;   /* reconnect: consecutive throttled failures */
    int64_t prev_ms; /* decorrelated: the previous pause */
} tether__backoff_state;

/* tether__backoff_init seeds st for options o (o->seed, 0 = system). */
void tether__backoff_init(tether__backoff_state *st,
                          const tether_backoff_opts *o);

/* tether__backoff_restart starts the sequence over, keeping the RNG. */
void tether__backoff_restart(tether__backoff_state *st,
                             const tether_backoff_opts *o);

/* tether__backoff_next computes the next pause; see tether_backoff_next. */
int tether__backoff_next(const tether_backoff_opts *o,
                         tether__backoff_state *st, tether_class cause,
                         int64_t *delay_ms);

#endif
