/*
 * tether_pq.h - tether's PostgreSQL specifics: the libpq driver and the
 * mapping of libpq failures to tether errors. Include it after (or instead
 * of) tether.h in programs that use libpq; link with libtether and libpq
 * (pkg-config --libs libtether gives both).
 */
#ifndef TETHER_PQ_H
#define TETHER_PQ_H

#include <libpq-fe.h>

#include "tether.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tether_driver_pq returns the PostgreSQL driver (libpq; connects without
 * blocking). tether_lease_handle and tether_connector_connect give the
 * PGconn *, in libpq's usual blocking mode. */
TETHER_API const tether_driver *tether_driver_pq(void);

/* tether_pq_error fills err from a failed libpq call in a work function:
 * from pgresult (its SQLSTATE and primary message) when it carries an
 * SQLSTATE, else from the state of pgconn (may be NULL; a lost
 * connection is TETHER_EBROKEN, transient, not_sent 0). Classes follow the
 * SQLSTATE (docs/pq-driver.md): 40001/40P01 TETHER_ECONFLICT and 53300
 * TETHER_ETHROTTLED are transient or throttled, class 28 is permanent;
 * 25006 is TETHER_EREADONLY, on which tether_pool_run clears the pool and
 * retries (the work was refused, so it never ran): the retry connects
 * through the connector again, which finds the new primary when the
 * target is read-write or primary. Returns the code
 * (negative), or 0 when pgresult is a successful result. */
TETHER_API int tether_pq_error(const PGconn *pgconn, const PGresult *pgresult,
                               tether_error *err);

/* tether_pq_conn returns the PGconn of a lease from a PostgreSQL pool (the
 * same pointer as tether_lease_handle). */
TETHER_API PGconn *tether_pq_conn(const tether_lease *l);

/* ---- statements with deadlines (docs/statements.md) --------------------- */

/* TETHER_PQ_RUN_DEADLINE as a statement's timeout_ms: the time left to the
 * tether_pool_run attempt the calling thread is in (no deadline outside
 * one). */
#define TETHER_PQ_RUN_DEADLINE (-1)

/* A statement's parameters, as PQexecParams takes them. */
typedef struct tether_pq_params {
    int n;                     /* how many */
    const Oid *types;          /* NULL, or 0 entries: the server infers */
    const char *const *values; /* a NULL entry is SQL NULL */
    const int *lengths;        /* of binary values; NULL when all are text */
    const int *formats;        /* 1 = binary, per value; NULL: all text */
    int result_format;         /* 0 text, 1 binary */
} tether_pq_params;

/* tether_pq_exec runs sql (one or more statements, as PQexec) on conn, a
 * connection of tether's pq driver (tether_pq_conn, or the handle a
 * tether_pool_run work function gets), and never waits past timeout_ms
 * (TETHER_PQ_RUN_DEADLINE: the run attempt's remaining time). On success it
 * returns 0 with *res the last result (the caller PQclears it). A failed
 * statement returns its code (tether_pq_error's table) with *res NULL. At
 * the deadline it returns TETHER_ETIMEDOUT (transient, not_sent 0: the
 * statement may have been applied) within a few milliseconds: when the
 * lease is released, the statement is cancelled and the connection drained
 * in the background, then reused or closed; until then conn takes no
 * other statement (TETHER_ESTATE). */
TETHER_API int tether_pq_exec(PGconn *conn, const char *sql, int64_t timeout_ms,
                              PGresult **res, tether_error *err);

/* tether_pq_exec_params is tether_pq_exec of one statement with
 * parameters (params NULL: none), as PQexecParams. */
TETHER_API int tether_pq_exec_params(PGconn *conn, const char *sql,
                                     const tether_pq_params *params,
                                     int64_t timeout_ms, PGresult **res,
                                     tether_error *err);

/* A declared statement (docs/statements.md, "Declared statements"). */
typedef struct tether_pq_stmt tether_pq_stmt;

/* tether_pq_declare declares sql, one statement with nparams parameters
 * ($1...), once for every connection of tether's pq driver, whichever pool
 * (or side of a read/write router) it belongs to: types gives their types
 * (NULL, or 0 entries: the server infers them); name names it in messages
 * (NULL: "stmt-N"). Nothing is sent: each connection prepares it the first
 * time it runs it, in the same round trip. Free with
 * tether_pq_stmt_destroy once no call uses it. */
TETHER_API int tether_pq_declare(const char *name, const char *sql, int nparams,
                                 const Oid *types, tether_pq_stmt **out,
                                 tether_error *err);

/* tether_pq_stmt_destroy frees st (NULL: nothing). The connections that
 * prepared it keep it until they close or deallocate it as least recently
 * used. */
TETHER_API void tether_pq_stmt_destroy(tether_pq_stmt *st);

/* tether_pq_exec_prepared runs the declared statement st on conn with
 * params (their n must be st's nparams; NULL: none), as
 * tether_pq_exec_params does: the same deadline, outcomes and drain
 * after a timeout. conn prepares st when it has not yet (Prepare and
 * Execute in one pipeline: one round trip), again after a reset query,
 * and when the server lost it (26000: DEALLOCATE ALL, DISCARD): outside
 * a transaction block the statement then runs at once, in the same call;
 * inside one it fails with the server's error, transient (the
 * transaction is aborted; the work may run again from its start). */
TETHER_API int tether_pq_exec_prepared(PGconn *conn, const tether_pq_stmt *st,
                                       const tether_pq_params *params,
                                       int64_t timeout_ms, PGresult **res,
                                       tether_error *err);

/* Process-wide counts of statements run through tether_pq_exec and
 * tether_pq_exec_params and what their deadlines cost (docs/metrics.md). */
typedef struct tether_pq_stats {
    uint64_t statements;             /* started */
    uint64_t timeouts;               /* ended by their deadline */
    uint64_t cancels_sent;           /* cancel requests delivered */
    uint64_t cancels_failed;         /* could not be delivered in time */
    uint64_t reused_after_cancel;    /* drained and back in the pool */
    uint64_t discarded_after_cancel; /* closed instead */
    uint64_t prepares;               /* declared statements prepared */
    uint64_t reprepares; /* of those, after the server lost one (26000) */
} tether_pq_stats;

/* tether_pq_stats_get copies the counts into out (NULL: nothing). */
TETHER_API void tether_pq_stats_get(tether_pq_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_PQ_H */
