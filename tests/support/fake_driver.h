/* fake_driver.h - the operations a test's fake driver (a tether_driver
 * whose connect_start, close and role the test writes) shares with the
 * others: a connect that did not complete at once never completes by
 * polling, every connection is alive, validates and resets, an error not
 * yet classed is transient, the handle is the connection. Header only:
 *
 *   static const tether_driver fake = {.name = "fake",
 *       .connect_start = f_start, .close = f_close, .role = f_role,
 *       FAKE_DRIVER_OPS};
 */
#ifndef TETHER_TEST_FAKE_DRIVER_H
#define TETHER_TEST_FAKE_DRIVER_H

#include "tether.h"
#include "tether_driver.h"

static inline int fake_poll_never(void *conn, tether_wait *w,
                                  tether_error *err) {
    (void)conn, (void)err;
    *w = (tether_wait){-1, 0, -1};
    return TETHER_IN_PROGRESS;
}

static inline int fake_alive(void *conn, int probe) {
    (void)probe;
    return conn != NULL;
}

static inline int fake_validate(void *conn, int64_t t, tether_error *err) {
    (void)conn, (void)t, (void)err;
    return 0;
}

static inline int fake_reset(void *conn, const char *q, tether_error *err) {
    (void)conn, (void)q, (void)err;
    return 0;
}

static inline void fake_classify(void *conn, tether_error *err) {
    (void)conn;
    if (err->cls == TETHER_CLASS_NONE)
        err->cls = TETHER_CLASS_TRANSIENT;
}

static inline void *fake_handle(void *conn) {
    return conn;
}

#define FAKE_DRIVER_OPS                                                        \
    .connect_poll = fake_poll_never, .alive = fake_alive,                      \
    .validate = fake_validate, .reset = fake_reset, .classify = fake_classify, \
    .handle = fake_handle

#endif
