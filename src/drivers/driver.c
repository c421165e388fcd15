/* driver.c - running a driver's non-blocking connect to completion within a
 * budget: poll() on the driver's socket, or sleep on the clock for drivers
 * without one (sim). */
#include "driver.h"
#include "internal.h"

#include <errno.h>
#include <poll.h>

/* Wait for w until at most deadline (ms on clock; -1 none). Returns 1 when
 * the deadline passed first, else 0. */
static int wait_once(const tether__wait *w, int64_t deadline,
                     const tether_clock *clock) {
    int64_t now = tether__now_ms(clock);
    if (deadline >= 0 && now >= deadline)
        return 1;
    if (w->fd < 0) {
        int64_t until = w->wake_ms;
        if (deadline >= 0 && (until < 0 || until > deadline))
            until = deadline;
        if (until < 0) /* no wake time, no deadline: a hang; do not spin */
            until = now + 100;
        if (until > now)
            clock->sleep_ns(clock->ctx, (until - now) * TETHER__NS_PER_MS);
        return deadline >= 0 && tether__now_ms(clock) >= deadline &&
               (w->wake_ms < 0 || w->wake_ms > deadline);
    }
    struct pollfd pfd = {w->fd, w->events, 0};
    int ms = deadline < 0 ? -1 : (int)TETHER__MIN(deadline - now, 1 << 30);
    int rc = poll(&pfd, 1, ms);
    if (rc == 0 && deadline >= 0)
        return tether__now_ms(clock) >= deadline;
    return 0; /* ready, error or EINTR: let the driver look */
}

int tether__driver_connect(const tether_driver *d, void *ctx,
                           const tether__endpoint *ep, int64_t budget_ms,
                           const tether_clock *clock, void **conn,
                           tether_error *err) {
    clock = tether__clock(clock);
    int64_t deadline = budget_ms < 0 ? -1 : tether__now_ms(clock) + budget_ms;
    tether__wait w = {-1, 0, -1};
    *conn = NULL;
    int rc = d->connect_start(ctx, ep, conn, &w, err);
    while (rc == TETHER__IN_PROGRESS) {
        if (wait_once(&w, deadline, clock)) {
            d->close(*conn);
            *conn = NULL;
            return tether_error_set(
                err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
                "connect timed out after %lld ms", (long long)budget_ms);
        }
        rc = d->connect_poll(*conn, &w, err);
    }
    if (rc < 0) {
        d->close(*conn);
        *conn = NULL;
        if (err && err->cls == TETHER_CLASS_NONE)
            d->classify(NULL, err);
    }
    return rc < 0 ? rc : 0;
}
