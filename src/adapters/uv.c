/* uv.c - libtether-uv: a cq's eventfd watched by a uv_poll_t; each
 * completion goes to the user's callback (docs/evloop.md). Uses only the
 * public headers. */
#include "tether_uv.h"

#include <stdlib.h>

/* At most this many completions per wake-up, so that a flood of them does
 * not starve the loop's other handles (the descriptor stays readable while
 * more wait: the poll fires again on the next turn). */
#define BATCH 256

struct tether_uv {
    uv_poll_t poll; /* first: the handle's memory is the watcher's */
    tether_cq *cq;
    tether_uv_fn fn;
    void *arg;
};

static void on_ready(uv_poll_t *h, int status, int events) {
    tether_uv *w = (tether_uv *)h;
    (void)events;
    if (status < 0)
        return; /* an eventfd does not fail; nothing to report it to */
    tether_completion c;
    for (int i = 0; i < BATCH && tether_cq_next(w->cq, &c) == 0; i++)
        w->fn(&c, w->arg);
}

static void on_closed(uv_handle_t *h) {
    tether_free(h);
}

static int uv_failed(tether_error *err, int rc) {
    return tether_error_set(err, TETHER_EIO, TETHER_CLASS_PERMANENT,
                            "tether_uv_create: %s", uv_strerror(rc));
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
    rc = uv_poll_start(&w->poll, UV_READABLE, on_ready);
    if (rc != 0) {
        uv_close((uv_handle_t *)&w->poll, on_closed);
        return uv_failed(err, rc);
    }
    *out = w;
    return 0;
}

uv_handle_t *tether_uv_handle(tether_uv *w) {
    return w ? (uv_handle_t *)&w->poll : NULL;
}

void tether_uv_destroy(tether_uv *w) {
    if (!w)
        return;
    uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, on_closed);
}
