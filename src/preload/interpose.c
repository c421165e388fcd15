/* interpose.c - the libpq functions libtether-preload replaces (the only
 * symbols it exports). A connect whose string is pooled takes a PGconn
 * from the pool: a real, connected one, so every other libpq call is
 * libpq's own; anything the pool cannot serve (the preload off, a string
 * not matched or not parsable by tether, a failed pool connect) goes to
 * libpq as it was asked, so errors are libpq's own. PQfinish gives a
 * pooled PGconn back; PQreset on one makes it the program's own (closed,
 * not reused, at PQfinish). Calls made from inside libpq itself (its
 * PQconnectdb calls PQconnectStart) pass straight through. */
#include "preload.h"

#include <stdlib.h>
#include <string.h>

/* pass_str connects through libpq: fn is the real PQconnectdb or
 * PQconnectStart, given the string without tether's keywords when the
 * program's had some. */
static PGconn *pass_str(PGconn *(*fn)(const char *), const char *conninfo,
                        const tether__preload_conn *c) {
    tether__preload_passing++;
    PGconn *pg = fn(c && c->libpq ? c->libpq : conninfo);
    tether__preload_passing--;
    return pg;
}

static PGconn *connect_str(PGconn *(*fn)(const char *), const char *conninfo) {
    tether__preload_conn own;
    const tether__preload_conn *c = tether__preload_conn_get(conninfo, &own);
    PGconn *pg = c ? tether__preload_pool_connect(c) : NULL;
    if (!pg)
        pg = pass_str(fn, conninfo, c);
    tether__preload_conn_free(&own);
    return pg;
}

TETHER__PRELOAD_EXPORT PGconn *PQconnectdb(const char *conninfo) {
    if (tether__preload_real_resolve())
        return NULL;
    if (tether__preload_passing)
        return tether__preload_real.connectdb(conninfo);
    return connect_str(tether__preload_real.connectdb, conninfo);
}

TETHER__PRELOAD_EXPORT PGconn *PQconnectStart(const char *conninfo) {
    if (tether__preload_real_resolve())
        return NULL;
    if (tether__preload_passing)
        return tether__preload_real.connect_start(conninfo);
    return connect_str(tether__preload_real.connect_start, conninfo);
}

/* pooled_made tries the pool with a string rendered from the program's
 * arguments (NULL: not poolable). */
static PGconn *pooled_made(char *conninfo) {
    if (!conninfo)
        return NULL;
    tether__preload_conn own;
    const tether__preload_conn *c = tether__preload_conn_get(conninfo, &own);
    PGconn *pg = c ? tether__preload_pool_connect(c) : NULL;
    tether__preload_conn_free(&own);
    free(conninfo);
    return pg;
}

typedef PGconn *(*params_fn)(const char *const *, const char *const *, int);

static PGconn *connect_params(params_fn fn, const char *const *keys,
                              const char *const *vals, int expand) {
    PGconn *pg =
        tether__preload_passing
            ? NULL
            : pooled_made(tether__preload_conn_from_params(keys, vals, expand));
    if (!pg) {
        tether__preload_passing++;
        pg = fn(keys, vals, expand);
        tether__preload_passing--;
    }
    return pg;
}

TETHER__PRELOAD_EXPORT PGconn *PQconnectdbParams(const char *const *keywords,
                                                 const char *const *values,
                                                 int expand_dbname) {
    if (tether__preload_real_resolve())
        return NULL;
    return connect_params(tether__preload_real.connectdb_params, keywords,
                          values, expand_dbname);
}

TETHER__PRELOAD_EXPORT PGconn *PQconnectStartParams(const char *const *keywords,
                                                    const char *const *values,
                                                    int expand_dbname) {
    if (tether__preload_real_resolve())
        return NULL;
    return connect_params(tether__preload_real.connect_start_params, keywords,
                          values, expand_dbname);
}

TETHER__PRELOAD_EXPORT PGconn *
PQsetdbLogin(const char *pghost, const char *pgport, const char *pgoptions,
             const char *pgtty, const char *dbName, const char *login,
             const char *pwd) {
    if (tether__preload_real_resolve())
        return NULL;
    PGconn *pg = tether__preload_passing
                     ? NULL
                     : pooled_made(tether__preload_conn_from_setdb(
                           pghost, pgport, pgoptions, dbName, login, pwd));
    if (!pg) {
        tether__preload_passing++;
        pg = tether__preload_real.setdb_login(pghost, pgport, pgoptions, pgtty,
                                              dbName, login, pwd);
        tether__preload_passing--;
    }
    return pg;
}

/* A pooled PGconn is handed out connected: its poll says so at once. */
TETHER__PRELOAD_EXPORT PostgresPollingStatusType PQconnectPoll(PGconn *conn) {
    if (tether__preload_real_resolve())
        return PGRES_POLLING_FAILED;
    if (!tether__preload_passing && conn &&
        tether__preload_table_state(conn) == TETHER__PRELOAD_LEASED &&
        PQstatus(conn) == CONNECTION_OK)
        return PGRES_POLLING_OK;
    return tether__preload_real.connect_poll(conn);
}

TETHER__PRELOAD_EXPORT void PQfinish(PGconn *conn) {
    if (tether__preload_real_resolve() || !conn)
        return;
    if (!tether__preload_passing && tether__preload_pool_finish(conn))
        return;
    tether__preload_passing++;
    tether__preload_real.finish(conn);
    tether__preload_passing--;
}

/* PQreset and PQresetStart on a pooled PGconn: libpq reconnects it (same
 * pointer, as the program expects); it is closed, not reused, at PQfinish. */
TETHER__PRELOAD_EXPORT void PQreset(PGconn *conn) {
    if (tether__preload_real_resolve())
        return;
    if (!tether__preload_passing && conn)
        tether__preload_table_taint(conn, "the program reset it (PQreset)");
    tether__preload_passing++;
    tether__preload_real.reset(conn);
    tether__preload_passing--;
}

TETHER__PRELOAD_EXPORT int PQresetStart(PGconn *conn) {
    if (tether__preload_real_resolve())
        return 0;
    if (!tether__preload_passing && conn)
        tether__preload_table_taint(conn, "the program reset it (PQreset)");
    tether__preload_passing++;
    int ok = tether__preload_real.reset_start(conn);
    tether__preload_passing--;
    return ok;
}

TETHER__PRELOAD_EXPORT PostgresPollingStatusType PQresetPoll(PGconn *conn) {
    if (tether__preload_real_resolve())
        return PGRES_POLLING_FAILED;
    tether__preload_passing++;
    PostgresPollingStatusType st = tether__preload_real.reset_poll(conn);
    tether__preload_passing--;
    return st;
}

/* PQping and PQpingParams connect through PQconnectStart(Params) inside
 * libpq: they pass through, so that a ping asks the server, never the
 * pool. */
TETHER__PRELOAD_EXPORT PGPing PQping(const char *conninfo) {
    if (tether__preload_real_resolve())
        return PQPING_NO_ATTEMPT;
    tether__preload_passing++;
    PGPing r = tether__preload_real.ping(conninfo);
    tether__preload_passing--;
    return r;
}

TETHER__PRELOAD_EXPORT PGPing PQpingParams(const char *const *keywords,
                                           const char *const *values,
                                           int expand_dbname) {
    if (tether__preload_real_resolve())
        return PQPING_NO_ATTEMPT;
    tether__preload_passing++;
    PGPing r =
        tether__preload_real.ping_params(keywords, values, expand_dbname);
    tether__preload_passing--;
    return r;
}

/* PQconninfo on a pooled PGconn tells what the program asked for (its
 * string and what libpq took from the environment), not the single host
 * the pool's connector reached: a program that reconnects from it (psql's
 * \c) keeps its host list. Keywords the program left out show the pooled
 * connection's values, but for hostaddr, which it never gave. */
TETHER__PRELOAD_EXPORT PQconninfoOption *PQconninfo(PGconn *conn) {
    if (tether__preload_real_resolve())
        return NULL;
    PQconninfoOption *real = tether__preload_real.conninfo(conn);
    PQconninfoOption *asked = conn ? tether__preload_table_asked(conn) : NULL;
    if (!asked || !real) {
        PQconninfoFree(asked);
        return real;
    }
    for (PQconninfoOption *a = asked; a->keyword; a++) {
        PQconninfoOption *r = real;
        while (r->keyword && strcmp(r->keyword, a->keyword))
            r++;
        if (!a->val && r->keyword && r->val && strcmp(a->keyword, "hostaddr"))
            a->val = strdup(r->val);
    }
    PQconninfoFree(real);
    return asked;
}

/* An event procedure on a pooled PGconn would outlive the program's
 * PQfinish (PGEVT_CONNDESTROY would never come): such a connection is
 * closed at PQfinish, which fires it. */
TETHER__PRELOAD_EXPORT int PQregisterEventProc(PGconn *conn, PGEventProc proc,
                                               const char *name,
                                               void *passThrough) {
    if (tether__preload_real_resolve())
        return 0;
    if (conn)
        tether__preload_table_taint(conn,
                                    "an event procedure was registered on it");
    return tether__preload_real.register_event(conn, proc, name, passThrough);
}

static int may_answer(PGconn *conn);

/* drop_stale deallocates the kept statements the program has not prepared
 * in this lease, before SQL of its that prepares or deallocates: a fresh
 * session has none of them, so its SQL PREPARE of such a name must not
 * fail with 42P05 (outside a transaction block only: inside one a failure
 * would abort the program's transaction). */
static void drop_stale(PGconn *conn) {
    if (PQtransactionStatus(conn) != PQTRANS_IDLE || !may_answer(conn))
        return;
    char *sql = tether__preload_table_prep_stale(conn);
    if (!sql)
        return;
    tether__preload_passing++; /* libpq's PQexec calls PQsendQuery */
    PQclear(tether__preload_real.exec(conn, sql));
    tether__preload_passing--;
    free(sql);
}

/* watch: a statement that may make a custom setting marks its pooled
 * PGconn to be closed at PQfinish; any that may change the session, to be
 * reset at its give-back (scan.c). */
static void watch(PGconn *conn, const char *sql) {
    if (!conn || tether__preload_sql_clean(sql))
        return; /* neither a setting nor a prepare: nothing else to see */
    tether__preload_table_dirty(conn);
    if (tether__preload_sql_sets_custom(sql))
        tether__preload_table_taint(
            conn, "a custom setting (SET a.b, set_config) was "
                  "made on it");
    if (tether__preload_sql_touches_prepared(sql)) {
        drop_stale(conn);
        tether__preload_table_prep_unknown(conn); /* prep.c */
    }
}

/* may_answer: conn can take a statement of the preload's own now (no
 * query running, no pipeline, no failed transaction). */
static int may_answer(PGconn *conn) {
    PGTransactionStatusType ts = PQtransactionStatus(conn);
    return (ts == PQTRANS_IDLE || ts == PQTRANS_INTRANS) &&
           PQpipelineStatus(conn) == PQ_PIPELINE_OFF;
}

/* deallocate drops the statement name from conn (its text changed, or
 * the program prepares it again where the preload cannot answer for it). */
static void deallocate(PGconn *conn, const char *name) {
    char *id = PQescapeIdentifier(conn, name, strlen(name));
    size_t len = id ? strlen(id) + 12 : 0;
    char *sql = id ? malloc(len) : NULL;
    if (sql) {
        snprintf(sql, len, "DEALLOCATE %s", id);
        tether__preload_passing++; /* libpq's PQexec calls PQsendQuery */
        PQclear(tether__preload_real.exec(conn, sql));
        tether__preload_passing--;
    }
    free(sql);
    PQfreemem(id);
}

TETHER__PRELOAD_EXPORT PGresult *PQexec(PGconn *conn, const char *query) {
    if (tether__preload_real_resolve())
        return NULL;
    watch(conn, query);
    return tether__preload_real.exec(conn, query);
}

TETHER__PRELOAD_EXPORT int PQsendQuery(PGconn *conn, const char *query) {
    if (tether__preload_real_resolve())
        return 0;
    if (!tether__preload_passing) /* not the preload's own statement */
        watch(conn, query);
    return tether__preload_real.send_query(conn, query);
}

TETHER__PRELOAD_EXPORT PGresult *
PQexecParams(PGconn *conn, const char *command, int n, const Oid *types,
             const char *const *values, const int *lengths, const int *formats,
             int result_format) {
    if (tether__preload_real_resolve())
        return NULL;
    watch(conn, command);
    return tether__preload_real.exec_params(conn, command, n, types, values,
                                            lengths, formats, result_format);
}

TETHER__PRELOAD_EXPORT int
PQsendQueryParams(PGconn *conn, const char *command, int n, const Oid *types,
                  const char *const *values, const int *lengths,
                  const int *formats, int result_format) {
    if (tether__preload_real_resolve())
        return 0;
    watch(conn, command);
    return tether__preload_real.send_query_params(
        conn, command, n, types, values, lengths, formats, result_format);
}

/* PQprepare of a statement the connection has with the same text and
 * types is answered without a round trip; with another text, it is
 * deallocated first (prep.c, docs/preload.md). */
TETHER__PRELOAD_EXPORT PGresult *PQprepare(PGconn *conn, const char *name,
                                           const char *query, int n,
                                           const Oid *types) {
    if (tether__preload_real_resolve())
        return NULL;
    watch(conn, query);
    int known = conn && name && *name && query && n >= 0 && may_answer(conn)
                    ? tether__preload_table_prep(conn, name, query, n, types)
                    : -1;
    if (known == TETHER__PRELOAD_PREP_SAME)
        return PQmakeEmptyPGresult(conn, PGRES_COMMAND_OK);
    if (known == TETHER__PRELOAD_PREP_OTHER)
        deallocate(conn, name);
    tether__preload_passing++; /* libpq's PQprepare calls PQsendPrepare */
    PGresult *r = tether__preload_real.prepare(conn, name, query, n, types);
    tether__preload_passing--;
    if (known >= 0 && PQresultStatus(r) == PGRES_COMMAND_OK)
        tether__preload_table_prep_set(conn, name, query, n, types);
    else if (conn)
        tether__preload_table_dirty(conn); /* a statement the reset drops */
    return r;
}

TETHER__PRELOAD_EXPORT int PQsendPrepare(PGconn *conn, const char *name,
                                         const char *query, int n,
                                         const Oid *types) {
    if (tether__preload_real_resolve())
        return 0;
    if (tether__preload_passing) /* inside PQprepare, above */
        return tether__preload_real.send_prepare(conn, name, query, n, types);
    watch(conn, query);
    /* Its outcome comes later, out of sight: a name kept here is dropped
     * first (the program prepares it again), and the list is no longer
     * known (the give-back deallocates everything). */
    if (conn && name && *name && query && n >= 0 && may_answer(conn) &&
        tether__preload_table_prep(conn, name, query, n, types) > 0)
        deallocate(conn, name);
    if (conn && name && *name)
        tether__preload_table_prep_unknown(conn);
    if (conn)
        tether__preload_table_dirty(conn);
    return tether__preload_real.send_prepare(conn, name, query, n, types);
}

/* PQfn calls a server function by its OID (libpq's large-object calls use
 * it): whatever it does, the give-back resets the session. */
TETHER__PRELOAD_EXPORT PGresult *PQfn(PGconn *conn, int fnid, int *result_buf,
                                      int *result_len, int result_is_int,
                                      const PQArgBlock *args, int nargs) {
    if (tether__preload_real_resolve())
        return NULL;
    if (conn)
        tether__preload_table_dirty(conn);
    return tether__preload_real.fn(conn, fnid, result_buf, result_len,
                                   result_is_int, args, nargs);
}
