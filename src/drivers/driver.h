/* driver.h - the driver interface: a small vtable the pool and the
 * connector drive. A driver talks to one kind of server; it does no retry,
 * no pooling and no waiting beyond what one call is given. */
#ifndef TETHER_DRIVER_H
#define TETHER_DRIVER_H

#include "tether.h"

/* What a connect in progress waits for: readiness of fd for events
 * (POLLIN/POLLOUT), or, with fd < 0, the clock reaching wake_ms. */
typedef struct tether__wait {
    int fd;
    short events;
    int64_t wake_ms;
} tether__wait;

/* One endpoint to connect to (the connector fills it per attempt; NULL
 * means the driver's own default target, as for the sim). */
typedef struct tether__endpoint {
    const char *host;     /* name or address; a path for a Unix socket */
    const char *hostaddr; /* resolved numeric address, or NULL */
    int port;             /* 0: the driver's default */
} tether__endpoint;

/* Return values of connect_start / connect_poll (besides < 0 errors). */
#define TETHER__CONNECTED 0
#define TETHER__IN_PROGRESS 1

/* reset: clean, but the server reported a fatal event. */
#define TETHER__FATAL 1
#define TETHER__FATAL_SEEN 2 /* alive()'s answer: see TETHER__FATAL */

struct tether_driver {
    const char *name;
    /* Build the driver's parameters (its ctx) from the connection string's
     * driver keywords: n pairs, never host, hostaddr or port (those come
     * with each endpoint). NULL when the driver takes its ctx from the
     * user only (driver_ctx). */
    int (*params_create)(const char *const *keys, const char *const *vals,
                         int n, void **ctx, tether_error *err);
    /* Free what params_create made (NULL accepted). */
    void (*params_destroy)(void *ctx);
    /* Start connecting to endpoint ep (NULL: ctx's default) with ctx's
     * parameters. On TETHER__IN_PROGRESS, *conn is set and w says what to
     * wait for. On a negative error, *conn is NULL and err is filled (class
     * set). */
    int (*connect_start)(void *ctx, const tether__endpoint *ep, void **conn,
                         tether__wait *w, tether_error *err);
    /* Continue a connect after w was satisfied (or timed out: the caller
     * then closes conn). Same returns as connect_start; on error conn must
     * still be closed by the caller. */
    int (*connect_poll)(void *conn, tether__wait *w, tether_error *err);
    /* Cheap liveness check, no round trip: 1 alive, 0 broken,
     * TETHER__FATAL_SEEN when the connection saw a fatal server event (a
     * role change reported while idle, a shutdown notice), up or not: it
     * must not be handed out, and its pool should be cleared. The state the
     * driver holds is always looked at; with probe set, also the socket
     * (for input or a hang-up that came while idle: one system call).
     * Without probe, nothing has used conn since the driver last judged it
     * (connect, reset, validate), so it may answer from its own flags
     * without asking the client library again. */
    int (*alive)(void *conn, int probe);
    /* Round-trip validation within timeout_ms: 0 or a negative error. */
    int (*validate)(void *conn, int64_t timeout_ms, tether_error *err);
    /* Reset on release (roll back, reset_query may be NULL): 0 clean;
     * TETHER__FATAL when the connection saw a fatal server event
     * (shutdown, failover, role change) that should clear its pool; or a
     * negative error when the session state is unknown (discard it). One
     * call, as it runs on every release. */
    int (*reset)(void *conn, const char *reset_query, tether_error *err);
    /* Close and free conn (NULL accepted). */
    void (*close)(void *conn);
    /* Fill err->cls (and retry_after_ms) for a failure on conn (may be
     * NULL for connect failures). */
    void (*classify)(void *conn, tether_error *err);
    /* The user-visible handle (PGconn *, sim handle). */
    void *(*handle)(void *conn);
    /* The server's role as last reported (no round trip), or
     * TETHER_ROLE_UNKNOWN; NULL when the driver has no roles. */
    tether_role (*role)(void *conn);
    /* Ask the server its role with a round trip within timeout_ms, for
     * servers that do not report it: a tether_role (> 0) or < 0. NULL when
     * the driver has no roles. */
    int (*query_role)(void *conn, int64_t timeout_ms, tether_error *err);
    /* 1 when the connector should resolve host names itself (within the
     * attempt's budget) and pass numeric addresses. */
    int resolve_names;
};

/* tether__driver_connect runs connect_start/connect_poll to completion
 * within budget_ms (-1 = unbounded), waiting with poll() (or sleeping on
 * clock for fd < 0). Returns 0 with *conn set, or a negative error (budget
 * exhaustion is TETHER_ETIMEDOUT, transient). */
int tether__driver_connect(const tether_driver *d, void *ctx,
                           const tether__endpoint *ep, int64_t budget_ms,
                           const tether_clock *clock, void **conn,
                           tether_error *err);

#endif
