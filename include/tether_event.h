/*
 * tether_event.h - the non-blocking acquire on a libevent event_base
 * (docs/evloop.md). Link with -ltether-event (built when libevent is
 * found: CMake option TETHER_ADAPTERS, Debian libevent-dev).
 */
#ifndef TETHER_EVENT_H
#define TETHER_EVENT_H

#include "tether.h"

#include <event2/event.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called on the base's thread for each completion of the watched cq. The
 * completion is the callee's: a lease in it (c->rc == 0) must be released
 * once, now or later. */
typedef void (*tether_levent_fn)(tether_completion *c, void *arg);

/* A cq watched on a libevent base. */
typedef struct tether_levent tether_levent;

/* tether_levent_create watches cq's descriptor with a persistent EV_READ
 * event on base and calls fn(completion, arg) for each completion, on the
 * base's thread. From the event's first run on, a completion posted on
 * that thread activates the event (tether_cq_loop_notify) instead of
 * waking the descriptor. Returns 0, or TETHER_EINVAL / TETHER_ENOMEM /
 * TETHER_EIO. */
TETHER_API int tether_levent_create(tether_levent **out,
                                    struct event_base *base, tether_cq *cq,
                                    tether_levent_fn fn, void *arg,
                                    tether_error *err);

/* tether_levent_ticks with on = 1 makes the base run the library's
 * periodic work: a persistent timer event every 10 ms calls tether_tick,
 * and the library's own thread stops (tether_ticks_external). For a
 * program whose loop runs all the time and that wants no thread of ours:
 * that work, for every pool of the process, then waits for the loop while
 * it does not run. on = 0, or tether_levent_destroy, gives the work back
 * to the thread. Returns 0, TETHER_EINVAL (w is NULL) or TETHER_EIO (the
 * timer event could not be added). */
TETHER_API int tether_levent_ticks(tether_levent *w, int on);

/* tether_levent_destroy removes the event and frees the watcher (NULL is
 * accepted). The cq is not touched: destroy it afterwards. */
TETHER_API void tether_levent_destroy(tether_levent *w);

#ifdef __cplusplus
}
#endif
#endif
