/* uv.c - libtether-uv: a cq's eventfd watched by a uv_poll_t; each
 * completion goes to the user's callback (docs/evloop.md). The loop's own
 * thread posts without waking the eventfd (tether_cq_loop_thread): a
 * uv_check_t takes what the turn's I/O callbacks posted (a release handing
 * its connection to the next queued acquire) in the same turn, and a
 * uv_prepare_t what was posted elsewhere on the thread (a timer's
 * callback, between two uv_run calls) before the loop waits, with an idle
 * handle then keeping that wait from blocking, as a callback ran. With
 * tether_uv_ticks, a uv_timer_t runs the library's ticks (tether_tick) in
 * place of its thread. Uses only the public headers. */
#include "tether_uv.h"

#include <stdlib.h>

/* At most this many completions per wake-up, so that a flood of them does
 * not starve the loop's other handles (the descriptor stays readable while
 * more wait: the poll fires again on the next turn; after the prepare
 * handle's batch, an idle handle keeps the loop from waiting). */
#define BATCH 256
#define TICK_MS 10 /* tether_tick's period (tether.h) */

struct tether_uv {
    uv_poll_t poll;       /* first: the handle's memory is the watcher's */
    uv_check_t check;     /* after the turn's I/O callbacks */
    uv_prepare_t prepare; /* before the loop waits */
    uv_idle_t idle;       /* started: the next wait does not block */
    uv_timer_t timer;     /* tether_uv_ticks: runs tether_tick */
    tether_cq *cq;
    tether_uv_fn fn;
    void *arg;
    int bound;   /* tether_cq_loop_thread called, on the loop's thread */
    int ticking; /* tether_uv_ticks on: one count of tether_ticks_external */
    int closing; /* handles whose close callback has not come */
};

/* take calls fn for up to BATCH completions; returns how many. */
static int take(tether_uv *w) {
    tether_completion c;
    int n = 0;
    while (n < BATCH && tether_cq_next(w->cq, &c) == 0) {
        w->fn(&c, w->arg);
        n++;
    }
    return n;
}

static void on_ready(uv_poll_t *h, int status, int events) {
    (void)events;
    if (status < 0)
        return; /* an eventfd does not fail; nothing to report it to */
    take((tether_uv *)h);
}

static void on_idle(uv_idle_t *h) {
    (void)h; /* its being active makes the loop poll without waiting */
}

static void on_check(uv_check_t *h) {
    tether_uv *w = h->data;
    if (take(w) == BATCH) /* more left: the next turn must not wait */
        uv_idle_start(&w->idle, on_idle);
}

static void on_prepare(uv_prepare_t *h) {
    tether_uv *w = h->data;
    if (!w->bound) {
        tether_cq_loop_thread(w->cq, 1);
        w->bound = 1;
    }
    if (take(w) > 0) /* callbacks ran: this turn's wait must not block */
        uv_idle_start(&w->idle, on_idle);
    else
        uv_idle_stop(&w->idle);
}

static void on_timer(uv_timer_t *h) {
    (void)h;
    tether_tick();
}

static void on_closed(uv_handle_t *h) {
    tether_uv *w = h->data;
    if (--w->closing == 0)
        tether_free(w);
}

static int uv_failed(tether_error *err, int rc) {
    return tether_error_set(err, TETHER_EIO, TETHER_CLASS_PERMANENT,
                            "tether_uv_create: %s", uv_strerror(rc));
}

/* close_all closes the watcher's handles; the last close callback frees
 * w. */
static void close_all(tether_uv *w) {
    uv_handle_t *hs[] = {(uv_handle_t *)&w->poll, (uv_handle_t *)&w->check,
                         (uv_handle_t *)&w->prepare, (uv_handle_t *)&w->idle,
                         (uv_handle_t *)&w->timer};
    int n = (int)(sizeof(hs) / sizeof(hs[0]));
    w->closing = n;
    for (int i = 0; i < n; i++)
        uv_close(hs[i], on_closed);
}

int tether_uv_create(tether_uv **out, uv_loop_t *loop, tether_cq *cq,
                     tether_uv_fn fn, void *arg, tether_error *err) {
    if (!out || !loop || !cq || !fn)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "tether_uv_create: out, loop, cq and fn are "
                                "required");
    *out = NULL;
    tether_uv *w = tether_calloc(1, sizeof(*w));
    if (!w)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    w->cq = cq;
    w->fn = fn;
    w->arg = arg;
    int rc = uv_poll_init(loop, &w->poll, tether_cq_fd(cq));
    if (rc != 0) {
        tether_free(w); /* no handle yet: no close callback to wait for */
        return uv_failed(err, rc);
    }
    uv_check_init(loop, &w->check); /* these cannot fail */
    uv_prepare_init(loop, &w->prepare);
    uv_idle_init(loop, &w->idle);
    uv_timer_init(loop, &w->timer);
    w->poll.data = w->check.data = w->prepare.data = w->idle.data = w;
    w->timer.data = w;
    /* Only the poll handle keeps the loop alive (tether_uv_handle). */
    uv_unref((uv_handle_t *)&w->check);
    uv_unref((uv_handle_t *)&w->prepare);
    uv_unref((uv_handle_t *)&w->idle);
    uv_unref((uv_handle_t *)&w->timer);
    rc = uv_poll_start(&w->poll, UV_READABLE, on_ready);
    if (rc == 0)
        rc = uv_check_start(&w->check, on_check);
    if (rc == 0)
        rc = uv_prepare_start(&w->prepare, on_prepare);
    if (rc != 0) {
        close_all(w);
        return uv_failed(err, rc);
    }
    *out = w;
    return 0;
}

uv_handle_t *tether_uv_handle(tether_uv *w) {
    return w ? (uv_handle_t *)&w->poll : NULL;
}

int tether_uv_ticks(tether_uv *w, int on) {
    if (!w)
        return TETHER_EINVAL;
    on = on ? 1 : 0;
    if (on == w->ticking)
        return 0;
    if (on) {
        int rc = uv_timer_start(&w->timer, on_timer, TICK_MS, TICK_MS);
        if (rc != 0)
            return TETHER_EIO;
    } else {
        uv_timer_stop(&w->timer);
    }
    tether_ticks_external(on);
    w->ticking = on;
    return 0;
}

void tether_uv_destroy(tether_uv *w) {
    if (!w)
        return;
    tether_uv_ticks(w, 0);
    if (w->bound)
        tether_cq_loop_thread(w->cq, 0);
    close_all(w); /* closing a handle stops it */
}
