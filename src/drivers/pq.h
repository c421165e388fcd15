/* pq.h - the PostgreSQL driver's internals (libpq, non-blocking): the
 * parameters object that is the driver's ctx, the classification tables
 * (testable without a server) and a role query for the connector.
 * The public part (tether_driver_pq, tether_pq_error) is in tether.h. */
#ifndef TETHER__PQ_INTERNAL_H
#define TETHER__PQ_INTERNAL_H

#include "driver.h"
#include "tether.h"

#include <stddef.h>

struct pg_conn;
struct pg_result;
struct pollfd;
#include <stdint.h>

/* ---- parameters (the driver's ctx) -------------------------------------- */

/* libpq connection keywords and values, copied; host, hostaddr and port come
 * from each endpoint instead. Immutable after create: share it between
 * threads freely. It must outlive the connections made with it. */

/* ---- a connection (pq.c; statements in pq_stmt.c) ------------------------
 */

#define TETHER__PQ_LABEL_MAX 128
#define TETHER__PQ_STATUS_MAX 8 /* "on", "off" */
#define TETHER__PQ_PREP_MAX 32  /* declared statements kept per connection */

typedef struct tether__pq_params tether__pq_params;

/* One connection of the driver (its conn). Written by the thread that holds
 * it: the caller while leased, the pool's drain thread while draining. */
typedef struct tether__pq_conn {
    /* Read on every acquire and release (pq_alive, pq_reset): first. */
    struct pg_conn *pg;
    int sock;        /* PQsocket once connected (it never changes then) */
    int fatal;       /* role change, shutdown or crash: clear the pool */
    int dying;       /* the server sent a FATAL: it is closing the connection */
    int broken;      /* our I/O failed, or a query overran its budget */
    int64_t role_ms; /* tick of the last role check (check_role_tick) */
    char hot_standby[TETHER__PQ_STATUS_MAX]; /* in_hot_standby at connect */
    char read_only[TETHER__PQ_STATUS_MAX];   /* default_transaction_read_only */

    /* Statements (pq_stmt.c, docs/statements.md): a statement outran its
     * deadline and is still on the server (draining: reset answers
     * TETHER__EDRAIN), or a drain brought the connection back (drained:
     * the next reset decides whether it is reused). */
    int draining;
    int drained;
    int64_t drain_from_ns; /* when the statement timed out (mono) */

    int pipe_syncs; /* pipeline syncs sent whose results are not yet read */

    /* Waits with a deadline (tether__pq_wait): an epoll set holding the
     * socket and a timerfd, made at the first such wait (0: not yet, -1:
     * could not, else the set's fd + 1); the timer's expiry (mono ns, 0:
     * disarmed or fired) and the socket's events in the set. */
    int waitset;
    int timerfd;
    int64_t armed_ns;
    unsigned wait_events;

    /* Declared statements prepared here (pq_prep.c): ids, least recently
     * used first out. */
    struct {
        uint64_t id;
        uint64_t used;
    } prep[TETHER__PQ_PREP_MAX];
    int nprep;
    uint64_t prep_tick;

    const tether__pq_params *params; /* while connecting only */
    void (*next_rx)(void *, const struct pg_result *); /* libpq's receiver */
    int queried_role; /* from tether__pq_query_role */
    char label[TETHER__PQ_LABEL_MAX];
} tether__pq_conn;

/* tether__pq_stmt_register makes c findable by its PGconn (a table by
 * socket number) once connected; tether__pq_stmt_unregister undoes it
 * before c is closed. */
void tether__pq_stmt_register(tether__pq_conn *c);
void tether__pq_stmt_unregister(tether__pq_conn *c);

/* tether__pq_stmt_released counts what became of a connection a drain
 * brought back: reset is the result of its reset on release (0: reused). */
void tether__pq_stmt_released(tether__pq_conn *c, int reset);

/* tether__pq_stmt_closed counts a connection closed while draining or
 * before its reset after a drain (discarded after a cancel). */
void tether__pq_stmt_closed(tether__pq_conn *c);

/* tether__pq_wait waits until c's socket is ready for events (POLLIN,
 * POLLOUT) or until deadline_ns (mono, -1: none): 1 ready, 0 the deadline
 * passed, -1 an error (errno), -2 interrupted (go round). now_ns: the
 * clock read a moment ago (before the statement's send), or -1. */
int tether__pq_wait(tether__pq_conn *c, short events, int64_t deadline_ns,
                    int64_t now_ns);

/* The caller's side of a statement (pq_stmt.c), shared with pq_prep.c:
 * find c by its PGconn; check it can take a statement (and whether a
 * transaction block is open); a deadline (mono ns, -1 none) from a
 * timeout_ms counted from now; fill err for a lost connection or for a
 * statement past its deadline (c then drains: docs/statements.md). */
tether__pq_conn *tether__pq_find(const struct pg_conn *pg);
int tether__pq_ready(tether__pq_conn *c, int *in_txn, tether_error *err);
int64_t tether__pq_deadline(int64_t now_ns, int64_t timeout_ms);
int tether__pq_lost(tether__pq_conn *c, const char *what, tether_error *err);
int tether__pq_timed_out(tether__pq_conn *c, int64_t start_ns, int in_txn,
                         tether_error *err);
int64_t tether__pq_now_ns(void);
void tether__pq_count_statement(void);
void tether__pq_count_prepare(int again); /* again: after a 26000 */

/* tether__pq_stmt_cancel_counted counts a cancel request the drain
 * needed: done, the server processed it; else it failed or ran late. */
void tether__pq_stmt_cancel_counted(int done);

/* tether__pq_drain is the driver's side of tether__driver_drain: cancel
 * the statement that timed out on conn and read its results, within
 * bound_ms of the timeout. 0: conn is back to a known state (no query in
 * flight, the cancel request processed or never sent); else negative and
 * conn must be closed. */
int tether__pq_drain(void *conn, int64_t bound_ms);

/* tether__pq_params_create copies n keyword/value pairs (values may be NULL:
 * the pair is then skipped, as libpq does). host, hostaddr and port are
 * rejected with TETHER_EINVAL naming the key. */
int tether__pq_params_create(tether__pq_params **out, const char *const *keys,
                             const char *const *vals, int n, tether_error *err);

/* tether__pq_params_destroy frees p (NULL is accepted). */
void tether__pq_params_destroy(tether__pq_params *p);

/* tether__pq_params_get returns the value of key in p, or NULL. */
const char *tether__pq_params_get(const tether__pq_params *p, const char *key);

/* ---- classification -------------------------------------------------------
 */

/* tether__pq_classify_sqlstate maps a server SQLSTATE to a tether code and
 * class (see docs/pq-driver.md for the table) and returns the code. NULL or
 * a malformed state gives TETHER_EQUERY, permanent. */
int tether__pq_classify_sqlstate(const char *sqlstate, int *code,
                                 tether_class *cls);

/* tether__pq_classify_connect maps a failed connect's libpq message (the
 * server's FATAL text, possibly with its SQLSTATE in verbose form, or a
 * client-side failure) to a code, a class and an SQLSTATE (sqlstate gets 6
 * bytes, "" when none fits). Returns the code. *line and *line_len (both may
 * be NULL) receive the message line that decided (the first line when none
 * matched). */
int tether__pq_classify_connect(const char *msg, int *code, tether_class *cls,
                                char sqlstate[6], const char **line,
                                size_t *line_len);

/* tether__pq_connect_error fills err for a failed connect to label
 * ("host:port") from libpq's message: "connect to LABEL failed: LINE", with
 * libpq's "connection to server ... failed: " prefix and a verbose
 * SQLSTATE dropped, password scrubbed (password, when not NULL, is also
 * scrubbed literally). not_sent is 1. Returns the code. */
int tether__pq_connect_error(const char *label, const char *libpq_msg,
                             const char *password, tether_error *err);

/* tether__pq_scrub replaces, in place, what follows "password=" (up to a
 * blank, or the closing quote of a quoted value), the password of a URI's
 * user info ("://user:SECRET@"), a SQL "PASSWORD 'SECRET'" literal and, when
 * password is not NULL and at least 3 bytes long, every literal occurrence of
 * password, with "***". Returns how many secrets it replaced. */
int tether__pq_scrub(char *msg, size_t cap, const char *password);

/* ---- connections ----------------------------------------------------------
 */

/* tether__pq_query_role asks the server of conn (a pq driver connection, as
 * from connect_start) for its role with "SELECT pg_is_in_recovery()",
 * waiting at most timeout_ms (-1: unbounded). Returns TETHER_ROLE_PRIMARY
 * or TETHER_ROLE_STANDBY (and role() reports it from then on when the
 * server sends no in_hot_standby), or a negative error (TETHER_ETIMEDOUT:
 * the connection is left broken). */
int tether__pq_query_role(void *conn, int64_t timeout_ms, tether_error *err);

/* tether__pq_label returns conn's "host:port" label for messages. */
const char *tether__pq_label(const void *conn);

#endif
