/* event.c - libtether-event: a cq's eventfd watched by a persistent
 * libevent EV_READ event; each completion goes to the user's callback
 * (docs/evloop.md). Once the event has run on the loop's thread, a
 * completion posted on that thread (a release in a socket's callback
 * handing its connection to a queued acquire) activates the event with
 * event_active instead of waking the eventfd (tether_cq_loop_notify): it
 * is taken in the same turn of the loop, without a write, a read and a
 * wait. With tether_levent_ticks, a persistent timer event runs the
 * library's ticks (tether_tick) in place of its thread. Uses only the
 * public headers. */
#include "tether_event.h"

#include <stdlib.h>

/* At most this many completions per wake-up (see uv.c). */
#define BATCH 256
#define TICK_US 10000 /* tether_tick's period (tether.h) */

struct tether_levent {
    struct event *ev;
    struct event *timer; /* tether_levent_ticks on: runs tether_tick */
    tether_cq *cq;
    tether_levent_fn fn;
    void *arg;
    int bound; /* tether_cq_loop_notify called, on the loop's thread */
};

/* The cq's notify function: take the completions in this turn. */
static void activate(void *arg) {
    tether_levent *w = arg;
    event_active(w->ev, EV_READ, 1);
}

static void on_ready(evutil_socket_t fd, short what, void *arg) {
    tether_levent *w = arg;
    (void)fd;
    (void)what;
    if (!w->bound) {
        tether_cq_loop_notify(w->cq, activate, w);
        w->bound = 1;
    }
    tether_completion c;
    int i = 0;
    while (i < BATCH && tether_cq_next(w->cq, &c) == 0) {
        w->fn(&c, w->arg);
        i++;
    }
    if (i == BATCH) /* more may wait, told already: the next turn takes */
        event_active(w->ev, EV_READ, 1);
}

static void on_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    (void)arg;
    tether_tick();
}

int tether_levent_create(tether_levent **out, struct event_base *base,
                         tether_cq *cq, tether_levent_fn fn, void *arg,
                         tether_error *err) {
    if (!out || !base || !cq || !fn)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "tether_levent_create: out, base, cq and fn "
                                "are required");
    *out = NULL;
    tether_levent *w = tether_calloc(1, sizeof(*w));
    if (!w)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    w->cq = cq;
    w->fn = fn;
    w->arg = arg;
    w->ev =
        event_new(base, tether_cq_fd(cq), EV_READ | EV_PERSIST, on_ready, w);
    if (!w->ev || event_add(w->ev, NULL) != 0) {
        if (w->ev)
            event_free(w->ev);
        tether_free(w);
        return tether_error_set(err, TETHER_EIO, TETHER_CLASS_PERMANENT,
                                "tether_levent_create: cannot add the event");
    }
    *out = w;
    return 0;
}

int tether_levent_ticks(tether_levent *w, int on) {
    if (!w)
        return TETHER_EINVAL;
    if (!on) {
        if (w->timer) {
            event_free(w->timer);
            w->timer = NULL;
            tether_ticks_external(0);
        }
        return 0;
    }
    if (w->timer)
        return 0;
    struct timeval every = {0, TICK_US};
    w->timer = event_new(event_get_base(w->ev), -1, EV_PERSIST, on_tick, NULL);
    if (!w->timer || event_add(w->timer, &every) != 0) {
        if (w->timer)
            event_free(w->timer);
        w->timer = NULL;
        return TETHER_EIO;
    }
    tether_ticks_external(1);
    return 0;
}

void tether_levent_destroy(tether_levent *w) {
    if (!w)
        return;
    tether_levent_ticks(w, 0);
    if (w->bound)
        tether_cq_loop_thread(w->cq, 0);
    event_free(w->ev); /* deletes it first */
    tether_free(w);
}
