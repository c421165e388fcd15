/*
 * tether_driver.h - the driver interface, and the TCP driver built on it.
 *
 * A driver teaches tether to talk to one kind of server: it starts a
 * connect without blocking, finishes it when its socket is ready, says
 * cheaply whether a connection is still alive, validates one with a round
 * trip, resets one on release, closes it and classifies its failures. The
 * pool and the connector drive it: a driver does no retry, no pooling and
 * no waiting beyond what one call is given. docs/drivers.md tells how to
 * write one.
 *
 * The TCP driver (tether_driver_tcp) pools plain TCP connections to any
 * service: the caller supplies the protocol (a setup, a validation and a
 * reset hook). Include this header after (or instead of) tether.h.
 */
#ifndef TETHER_DRIVER_H
#define TETHER_DRIVER_H

#include "tether.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* The interface                                                            */
/* ------------------------------------------------------------------------ */

/* What a connect in progress waits for: readiness of fd for events
 * (POLLIN/POLLOUT of poll.h), or, with fd < 0, the clock reaching wake_ms
 * (milliseconds on the caller's clock; -1: no wake time). */
typedef struct tether_wait {
    int fd;
    short events;
    int64_t wake_ms;
} tether_wait;

/* One endpoint to connect to. The connector fills one per attempt; NULL
 * means the driver's own default target (a pool without a connector). */
typedef struct tether_endpoint {
    const char *host;     /* name or address as the user wrote it; a path
                             for a Unix socket; NULL: the default host */
    const char *hostaddr; /* the numeric address to connect to (resolved by
                             the connector when the driver asks for it with
                             resolve_names), or NULL */
    int port;             /* 0: the driver's default */
    int64_t budget_ms;    /* the time this attempt may take from
                             connect_start on; -1: unbounded. A driver that
                             does blocking work once its socket is
                             connected (a handshake) bounds it with this. */
} tether_endpoint;

/* What connect_start and connect_poll return, besides a negative error. */
#define TETHER_CONNECTED 0
#define TETHER_IN_PROGRESS 1

/* reset's return: clean, but the server reported a fatal event (shutdown,
 * failover, role change): the pool is cleared. */
#define TETHER_FATAL 1
/* alive's return: the connection saw a fatal server event; see above. */
#define TETHER_FATAL_SEEN 2
/* reset's return: clean, after rolling back a transaction that was open
 * (or failed) when the lease was released. Optional: a driver that never
 * returns it is fine; the pool then cannot warn about a transaction left
 * open by a release without a key (docs/pool.md, "Transactions across
 * acquires"). */
#define TETHER_ROLLED_BACK 3

/* A driver: a table of operations. Define one as a static const object
 * with designated initializers; leave unused optional members and the
 * reserved ones zero. Every operation may be called from any thread, but
 * never two at once on one connection. conn is the driver's own
 * connection object; the user sees handle(conn). */
struct tether_driver {
    const char *name; /* short name for logs ("pq", "tcp") */
    /* Optional. Build the driver's parameters (its ctx) from the connection
     * string's driver keywords: n pairs, never host, hostaddr or port (those
     * come with each endpoint). Called by a connector whose driver_ctx is
     * NULL. An error names the keyword, never a value that may be a
     * secret. */
    int (*params_create)(const char *const *keys, const char *const *vals,
                         int n, void **ctx, tether_error *err);
    /* Optional. Free what params_create made (NULL accepted). */
    void (*params_destroy)(void *ctx);
    /* Start connecting to endpoint ep (NULL: ctx's default) with ctx's
     * parameters, without blocking. Returns TETHER_CONNECTED with *conn
     * set; TETHER_IN_PROGRESS with *conn set and w saying what to wait
     * for; or a negative error with err filled (its class set when
     * known), *conn then NULL or a connection the caller closes. */
    int (*connect_start)(void *ctx, const tether_endpoint *ep, void **conn,
                         tether_wait *w, tether_error *err);
    /* Continue a connect after w was satisfied (or spuriously: check).
     * Same returns as connect_start; on error the caller closes conn. When
     * the attempt's budget ends first, the caller closes conn without a
     * further call. */
    int (*connect_poll)(void *conn, tether_wait *w, tether_error *err);
    /* Cheap liveness check, no round trip: 1 alive, 0 broken,
     * TETHER_FATAL_SEEN when the connection saw a fatal server event (it
     * must not be handed out, and its pool should be cleared). The state
     * the driver holds is always looked at; with probe set, also the
     * socket (input or a hang-up that came while idle: one system call).
     * Without probe, nothing has used conn since the driver last judged it
     * (connect, reset, validate), so it may answer from its own flags. */
    int (*alive)(void *conn, int probe);
    /* Round-trip validation within timeout_ms: 0 or a negative error. */
    int (*validate)(void *conn, int64_t timeout_ms, tether_error *err);
    /* Reset on release (roll back; reset_query, which may be NULL, is the
     * pool's tether_pool_opts.reset_query): 0 clean; TETHER_ROLLED_BACK
     * clean after rolling back an open transaction; TETHER_FATAL; or a
     * negative error when the session state is unknown (the pool discards
     * the connection). One call, as it runs on every release: keep it
     * cheap. */
    int (*reset)(void *conn, const char *reset_query, tether_error *err);
    /* Close and free conn (NULL accepted). */
    void (*close)(void *conn);
    /* Fill err->cls (and retry_after_ms) for a failure on conn (NULL for
     * connect failures) when the operation that failed left it
     * TETHER_CLASS_NONE. */
    void (*classify)(void *conn, tether_error *err);
    /* The user-visible handle of conn (tether_lease_handle): PGconn * for
     * pq, tether_tcp_conn * for tcp. */
    void *(*handle)(void *conn);
    /* Optional. The server's role as last reported (no round trip), or
     * TETHER_ROLE_UNKNOWN. NULL when the driver has no roles. */
    tether_role (*role)(void *conn);
    /* Optional. Ask the server its role with a round trip within
     * timeout_ms: a tether_role (> 0) or < 0. The answer is the
     * connection's role from then on: the connector also asks it of
     * standbys it keeps while it waits for a promotion (docs/conninfo.md,
     * "The role watch"), and hands one out once it answers primary. */
    int (*query_role)(void *conn, int64_t timeout_ms, tether_error *err);
    /* 1 when the connector should resolve host names itself (within the
     * attempt's budget) and pass numeric addresses in hostaddr. */
    int resolve_names;
    /* Optional. The replication lag of the server conn is on, with a round
     * trip within timeout_ms: 0 with *lag_ms (replay delay) and *lag_bytes
     * (received but not replayed) set, both 0 on a primary; or a negative
     * error. Read/write routing skips standbys lagging beyond its bound. */
    int (*lag)(void *conn, int64_t timeout_ms, int64_t *lag_ms,
               int64_t *lag_bytes, tether_error *err);
    /* Optional. Whether conn is inside a transaction block, without a
     * round trip: 1 open (or failed and not yet rolled back), 0 idle, < 0
     * unknown. Transaction affinity needs it: with it NULL, a key given to
     * tether_pool_acquire_key has no effect (docs/pool.md, "Transactions
     * across acquires"). */
    int (*in_transaction)(void *conn);
    /* Room for later operations: leave zero. */
    void (*reserved_[4])(void);
};

/* ------------------------------------------------------------------------ */
/* The TCP driver                                                           */
/* ------------------------------------------------------------------------ */

/* One TCP connection of the TCP driver: tether_lease_handle and
 * tether_connector_connect give a tether_tcp_conn *. Use it from one
 * thread at a time (the lease's holder). */
typedef struct tether_tcp_conn tether_tcp_conn;

/* The TCP driver's hooks: the protocol the caller speaks over the socket.
 * Each gets the opts' ctx and the connection; a failing hook returns a
 * negative TETHER_E* code with err filled (tether_error_set). */
typedef int (*tether_tcp_setup_fn)(void *ctx, tether_tcp_conn *c,
                                   int64_t timeout_ms, tether_error *err);
typedef int (*tether_tcp_validate_fn)(void *ctx, tether_tcp_conn *c,
                                      int64_t timeout_ms, tether_error *err);
typedef int (*tether_tcp_reset_fn)(void *ctx, tether_tcp_conn *c,
                                   tether_error *err);
/* Returns 1 when it closed the socket itself (hiredis's redisFree does),
 * else 0: the driver then closes it. */
typedef int (*tether_tcp_teardown_fn)(void *ctx, tether_tcp_conn *c);

/* TCP driver options. Defaults (tether_tcp_opts_init): no hooks (a
 * connection is valid when its socket is open, and needs no reset),
 * TCP_NODELAY on, SO_KEEPALIVE on, the socket handed out in blocking mode.
 * Hooks: setup runs once the socket is connected, within what is left of
 * the attempt's budget (timeout_ms, -1 unbounded), for a handshake (AUTH,
 * a protocol greeting) and to attach the caller's object
 * (tether_tcp_set_user); validate is the pool's round-trip check, after
 * the driver's own peek found the socket open; reset runs on every
 * release; teardown before the socket is closed. */
typedef struct tether_tcp_opts {
    size_t size; /* sizeof, set by tether_tcp_opts_init */
    tether_tcp_setup_fn setup;
    tether_tcp_validate_fn validate;
    tether_tcp_reset_fn reset;
    tether_tcp_teardown_fn teardown;
    void *ctx;             /* passed to every hook */
    int nodelay;           /* 1: TCP_NODELAY */
    int keepalive;         /* 1: SO_KEEPALIVE */
    int nonblocking;       /* 1: leave the socket non-blocking (for an event
                              loop); 0: blocking, as most client libraries want */
    uint64_t reserved_[4]; /* room to grow; 0 */
} tether_tcp_opts;

/* tether_tcp_opts_init fills o with the documented defaults and sets
 * o->size (a macro: it passes the struct's sizeof as the caller was
 * compiled). */
TETHER_API void tether_tcp_opts_init_sized(tether_tcp_opts *o, size_t size);
#define tether_tcp_opts_init(o)                                                \
    tether_tcp_opts_init_sized((o), sizeof(tether_tcp_opts))

/* The TCP driver's parameters: its driver_ctx. Immutable; share it. */
typedef struct tether_tcp tether_tcp;

/* tether_tcp_create makes the TCP driver's parameters from o (copied; NULL:
 * the defaults). Pass the result as the connector's (or pool's)
 * driver_ctx with tether_driver_tcp(); it must outlive them. */
TETHER_API int tether_tcp_create(tether_tcp **out, const tether_tcp_opts *o,
                                 tether_error *err);

/* tether_tcp_destroy frees t (NULL is accepted). */
TETHER_API void tether_tcp_destroy(tether_tcp *t);

/* tether_driver_tcp returns the TCP driver: a non-blocking connect to each
 * endpoint within its attempt's budget (the connector resolves names; a
 * host starting with / is a Unix-domain socket path), liveness by a
 * non-blocking peek (end of stream or a socket error: dead), validation
 * and reset by the caller's hooks. Every endpoint needs a port (or a
 * socket path). A connector with this driver and no driver_ctx uses the
 * defaults and refuses driver keywords (dbname=...) naming the keyword. */
TETHER_API const tether_driver *tether_driver_tcp(void);

/* tether_tcp_fd returns c's socket. */
TETHER_API int tether_tcp_fd(const tether_tcp_conn *c);

/* tether_tcp_user returns what the setup hook attached (NULL when none). */
TETHER_API void *tether_tcp_user(const tether_tcp_conn *c);

/* tether_tcp_set_user attaches the caller's object to c (a client library
 * context over the socket); teardown frees it. */
TETHER_API void tether_tcp_set_user(tether_tcp_conn *c, void *user);

/* tether_tcp_peer writes "host:port" (or the socket path) of c's endpoint
 * into buf like snprintf and returns c's port (0 for a Unix socket). */
TETHER_API int tether_tcp_peer(const tether_tcp_conn *c, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_DRIVER_H */
