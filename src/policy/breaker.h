/* breaker.h - what the pool asks of a breaker beyond the public API. */
#ifndef TETHER_BREAKER_H
#define TETHER_BREAKER_H

#include "internal.h"

/* tether__breaker_blocked_ms tells how long calls stay refused from now:
 * 0 when a call made now would be let through (closed, or the period
 * over: the next caller probes), the rest of the open period, or of the
 * half-open probe's period, or INT64_MAX when isolated. *last (when not
 * NULL) gets the class of the last failure recorded, TETHER_CLASS_NONE
 * when none. */
int64_t tether__breaker_blocked_ms(tether_breaker *b, tether_class *last);

/* tether__breaker_last copies the last failure recorded into *out: 1, or
 * 0 when none is (out untouched). */
int tether__breaker_last(tether_breaker *b, tether_error *out);

/* tether__breaker_probe_void takes back a probe that decided nothing (its
 * caller's deadline cut it short): the next call may probe at once, and
 * neither the state nor the last failure changes. */
void tether__breaker_probe_void(tether_breaker *b);

#endif
