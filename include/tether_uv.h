/*
 * tether_uv.h - the non-blocking acquire on a libuv loop (docs/evloop.md).
 * Link with -ltether-uv (built when libuv is found: CMake option
 * TETHER_ADAPTERS, Debian libuv1-dev).
 */
#ifndef TETHER_UV_H
#define TETHER_UV_H

#include "tether.h"

#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called on the loop's thread for each completion of the watched cq. The
 * completion is the callee's: a lease in it (c->rc == 0) must be released
 * once, now or later. */
typedef void (*tether_uv_fn)(tether_completion *c, void *arg);

/* A cq watched on a libuv loop. */
typedef struct tether_uv tether_uv;

/* tether_uv_create watches cq's descriptor with a uv_poll_t on loop and
 * calls fn(completion, arg) for each completion, on the loop's thread.
 * The watcher keeps the loop alive (uv_unref it through
 * tether_uv_handle to let the loop end while it is idle). Returns 0, or
 * TETHER_EINVAL / TETHER_ENOMEM / TETHER_EIO (libuv's error in err). */
TETHER_API int tether_uv_create(tether_uv **out, uv_loop_t *loop, tether_cq *cq,
                                tether_uv_fn fn, void *arg, tether_error *err);

/* tether_uv_handle returns the watcher's uv_poll_t (to uv_ref/uv_unref). */
TETHER_API uv_handle_t *tether_uv_handle(tether_uv *w);

/* tether_uv_ticks with on = 1 makes the loop run the library's periodic
 * work: a timer every 10 ms calls tether_tick, and the library's own
 * thread stops (tether_ticks_external). For a program whose loop runs all
 * the time and that wants no thread of ours: that work, for every pool of
 * the process, then waits for the loop while it does not run. on = 0, or
 * tether_uv_destroy, gives the work back to the thread. The timer does not
 * keep the loop alive. Returns 0, TETHER_EINVAL (w is NULL) or TETHER_EIO
 * (the timer could not start). */
TETHER_API int tether_uv_ticks(tether_uv *w, int on);

/* tether_uv_destroy stops watching and closes the handle; its memory is
 * freed by the close callback, on the loop's next turn (NULL is accepted).
 * The cq is not touched: destroy it afterwards. */
TETHER_API void tether_uv_destroy(tether_uv *w);

#ifdef __cplusplus
}
#endif
#endif
