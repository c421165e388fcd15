/* driver.c - running a driver's non-blocking connect to completion within a
 * budget: poll() on the driver's socket, or sleep on the clock for drivers
 * without one (sim). */
#include "driver.h"
#include "internal.h"

#include <errno.h>
#include <poll.h>

#ifdef TETHER_HAVE_PQ
#include "pq.h"
#include "tether_pq.h"
#endif

TETHER__TLS int64_t tether__run_deadline_ns = -1;

int tether__driver_drain(const tether_driver *d, void *conn, int64_t bound_ms) {
#ifdef TETHER_HAVE_PQ
    if (d == tether_driver_pq())
        return tether__pq_drain(conn, bound_ms);
#else
    (void)d;
    (void)conn;
    (void)bound_ms;
#endif
    return TETHER_EBROKEN; /* no other driver leaves work in flight */
}

static int64_t now_ns(const tether_clock *clock) {
    return clock->now_ns(clock->ctx);
}

/* Wait for w until at most deadline (ns on clock; -1 none). Returns 1 when
 * the deadline passed first, else 0. Deadlines are kept in nanoseconds, and
 * poll() gets the remaining time rounded up, so that a budget of N ms never
 * ends before N ms have passed. */
static int wait_once(const tether_wait *w, int64_t deadline,
                     const tether_clock *clock) {
    int64_t now = now_ns(clock);
    if (deadline >= 0 && now >= deadline)
        return 1;
    if (w->fd < 0) {
        int64_t wake = w->wake_ms < 0 ? -1 : w->wake_ms * TETHER__NS_PER_MS;
        int64_t until = wake;
        if (deadline >= 0 && (until < 0 || until > deadline))
            until = deadline;
        if (until < 0) /* no wake time, no deadline: a hang; do not spin */
            until = now + 100 * TETHER__NS_PER_MS;
        if (until > now)
            clock->sleep_ns(clock->ctx, until - now);
        return deadline >= 0 && now_ns(clock) >= deadline &&
               (wake < 0 || wake > deadline);
    }
    struct pollfd pfd = {w->fd, w->events, 0};
    int64_t left = deadline < 0 ? -1
                                : (deadline - now + TETHER__NS_PER_MS - 1) /
                                      TETHER__NS_PER_MS;
    int ms = left < 0 ? -1 : (int)TETHER__MIN(left, 1 << 30);
    int rc = poll(&pfd, 1, ms);
    if (rc == 0 && deadline >= 0)
        return now_ns(clock) >= deadline;
    return 0; /* ready, error or EINTR: let the driver look */
}

int tether__driver_connect(const tether_driver *d, void *ctx,
                           const tether_endpoint *ep, int64_t budget_ms,
                           const tether_clock *clock, void **conn,
                           tether_error *err) {
    clock = tether__clock(clock);
    int64_t deadline =
        budget_ms < 0 ? -1 : now_ns(clock) + budget_ms * TETHER__NS_PER_MS;
    tether_wait w = {-1, 0, -1};
    tether_endpoint e;
    if (ep) { /* the driver learns the attempt's budget */
        e = *ep;
        e.budget_ms = budget_ms < 0 ? -1 : budget_ms;
        ep = &e;
    }
    *conn = NULL;
    int rc = d->connect_start(ctx, ep, conn, &w, err);
    while (rc == TETHER_IN_PROGRESS) {
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
