/* pq_prep.c - declared statements (docs/statements.md, "Declared
 * statements"): declared once, executed on any of tether's pq
 * connections, prepared on each connection when needed in the same round
 * trip as the execute (pipeline mode: [Prepare] Execute Sync).
 *
 * Each connection keeps the ids of the declared statements prepared on it
 * (TETHER__PQ_PREP_MAX, least recently used deallocated, in a pipeline
 * segment of its own before the prepare). A new connection (reconnect,
 * failover, clear) starts with none; a reset query empties the list (it
 * may have been DISCARD ALL). What the server says corrects the list:
 * 26000 (the statement is gone: DEALLOCATE ALL, DISCARD) empties it and
 * 42P05 (it exists already) marks it prepared; either way the statement
 * did not run, and outside a transaction block it is run again at once.
 * Server-side names are "__tether_<id>": the prefix is tether's. */
#include "pq.h"
#include "tether_pq.h"

#include <libpq-fe.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define NAME_MAX_ 32

struct tether_pq_stmt {
    uint64_t id;
    int n;
    Oid *types;
    char *sql;
    char server[NAME_MAX_]; /* "__tether_<id>" */
    char name[64];          /* for messages */
};

static _Atomic uint64_t next_id = 1;

static void server_name(uint64_t id, char *buf, size_t cap) {
    snprintf(buf, cap, "__tether_%llu", (unsigned long long)id);
}

int tether_pq_declare(const char *name, const char *sql, int nparams,
                      const Oid *types, tether_pq_stmt **out,
                      tether_error *err) {
    if (out)
        *out = NULL;
    if (!sql || !out)
        return tether__null(err, "tether_pq_declare", !sql ? "sql" : "out");
    if (nparams < 0 || nparams > 65535)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "tether_pq_declare: nparams %d is not in "
                                "[0, 65535]",
                                nparams);
    tether_pq_stmt *st = tether__calloc(1, sizeof(*st));
    size_t len = strlen(sql) + 1;
    if (st)
        st->sql = tether__malloc(len);
    if (st && nparams > 0 && types)
        st->types = tether__calloc((size_t)nparams, sizeof(Oid));
    if (!st || !st->sql || (nparams > 0 && types && !st->types)) {
        tether_pq_stmt_destroy(st);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "tether_pq_declare: out of memory");
    }
    memcpy(st->sql, sql, len);
    if (st->types)
        memcpy(st->types, types, (size_t)nparams * sizeof(Oid));
    st->n = nparams;
    st->id = atomic_fetch_add(&next_id, 1);
    server_name(st->id, st->server, sizeof(st->server));
    if (name)
        snprintf(st->name, sizeof(st->name), "%s", name);
    else
        snprintf(st->name, sizeof(st->name), "stmt-%llu",
                 (unsigned long long)st->id);
    *out = st;
    return 0;
}

void tether_pq_stmt_destroy(tether_pq_stmt *st) {
    if (!st)
        return;
    tether__free(st->types);
    tether__free(st->sql);
    tether__free(st);
}

/* ---- the list of a connection ----------------------------------------- */

static int prep_find(const tether__pq_conn *c, uint64_t id) {
    for (int i = 0; i < c->nprep; i++)
        if (c->prep[i].id == id)
            return i;
    return -1;
}

static void prep_drop(tether__pq_conn *c, int i) {
    c->prep[i] = c->prep[--c->nprep];
}

static void prep_touch(tether__pq_conn *c, uint64_t id) {
    int i = prep_find(c, id);
    if (i < 0 && c->nprep < TETHER__PQ_PREP_MAX)
        c->prep[i = c->nprep++].id = id;
    if (i >= 0)
        c->prep[i].used = ++c->prep_tick;
}

static int prep_victim(const tether__pq_conn *c) {
    int v = 0;
    for (int i = 1; i < c->nprep; i++)
        if (c->prep[i].used < c->prep[v].used)
            v = i;
    return v;
}

/* ---- one round trip ----------------------------------------------------- */

/* A round: what was sent and what came back. */
typedef struct round {
    const tether_pq_stmt *st;
    const char *name; /* st->server, or "" (unnamed: not kept) */
    int evict;        /* a DEALLOCATE segment first */
    int prepare;      /* a Prepare before the Execute */
    int plain;        /* sent outside pipeline mode (prepared already) */
    int cmd;          /* the command whose results come now */
    int syncs;        /* syncs not yet read */
    char prep_state[6];
    PGresult *prep_err; /* the Prepare's failure */
    PGresult *keep;     /* the execute's result */
} round;

/* send_round queues the round's commands: in pipeline mode when there is
 * more than the Execute, else the Execute alone (a statement prepared here
 * already: the common case, without pipeline mode's extra steps). */
static int send_round(tether__pq_conn *c, round *rd,
                      const tether_pq_params *pp) {
    PGconn *pg = c->pg;
    if (PQsetnonblocking(pg, 1) != 0)
        return -1;
    if (!rd->evict && !rd->prepare) {
        rd->plain = 1;
        return PQsendQueryPrepared(pg, rd->name, pp->n, pp->values, pp->lengths,
                                   pp->formats, pp->result_format)
                   ? 0
                   : -1;
    }
    if (!PQenterPipelineMode(pg))
        return -1;
    if (rd->evict) {
        char sql[NAME_MAX_ + 16], victim[NAME_MAX_];
        int v = prep_victim(c);
        server_name(c->prep[v].id, victim, sizeof(victim));
        prep_drop(c, v);
        snprintf(sql, sizeof(sql), "DEALLOCATE %s", victim);
        if (!PQsendQueryParams(pg, sql, 0, NULL, NULL, NULL, NULL, 0) ||
            !PQpipelineSync(pg))
            return -1;
        rd->syncs++;
    }
    if (rd->prepare &&
        !PQsendPrepare(pg, rd->name, rd->st->sql, rd->st->n, rd->st->types))
        return -1;
    if (rd->prepare)
        tether__pq_count_prepare(0);
    if (!PQsendQueryPrepared(pg, rd->name, pp->n, pp->values, pp->lengths,
                             pp->formats, pp->result_format) ||
        !PQpipelineSync(pg))
        return -1;
    rd->syncs++;
    c->pipe_syncs = rd->syncs;
    return 0;
}

/* take attributes result r to the command it answers. */
static void take(round *rd, PGresult *r) {
    int first = rd->evict ? 1 : 0; /* index of the Prepare or Execute */
    ExecStatusType st = PQresultStatus(r);
    if (rd->cmd == first && rd->prepare) {
        const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (st != PGRES_COMMAND_OK) {
            snprintf(rd->prep_state, sizeof(rd->prep_state), "%s", s ? s : "?");
            PQclear(rd->prep_err);
            rd->prep_err = r;
            return;
        }
        PQclear(r);
    } else if (rd->cmd >= first) {
        PGresult *k = rd->keep;
        if (k && (PQresultStatus(k) == PGRES_FATAL_ERROR ||
                  PQresultStatus(k) == PGRES_PIPELINE_ABORTED)) {
            PQclear(r);
            return;
        }
        if (k)
            PQclear(k);
        rd->keep = r;
    } else {
        PQclear(r); /* the DEALLOCATE's: whatever it says */
    }
}

/* collect reads what is ready: 1 when every sync came back (outside
 * pipeline mode: the statement's last result), 0 for more. */
static int collect_round(tether__pq_conn *c, round *rd) {
    int nulls = 0;
    if (rd->plain) {
        while (!PQisBusy(c->pg)) {
            PGresult *r = PQgetResult(c->pg);
            if (!r)
                return 1;
            take(rd, r);
        }
        return 0;
    }
    while (!PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        if (!r) {
            if (++nulls > 1)
                return 0; /* nothing more parsed yet */
            rd->cmd++;
            continue;
        }
        nulls = 0;
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            c->pipe_syncs--;
            if (--rd->syncs == 0)
                return 1;
            rd->cmd++; /* no NULL follows a sync */
            continue;
        }
        take(rd, r);
    }
    return 0;
}

/* await_round waits for rd's results until deadline (-1: none); now: the
 * clock read just before the round was sent, or -1. */
static int await_round(tether__pq_conn *c, round *rd, int64_t start,
                       int64_t now, int64_t deadline, int in_txn,
                       tether_error *err) {
    for (;;) {
        int pending = PQflush(c->pg);
        if (pending < 0)
            return tether__pq_lost(c, "declared statement", err);
        if (!pending && collect_round(c, rd))
            return 0;
        int rc = tether__pq_wait(c, pending ? POLLIN | POLLOUT : POLLIN,
                                 deadline, now);
        now = -1;
        if (rc == 0)
            return tether__pq_timed_out(c, start, in_txn, err);
        if (rc == -1)
            return tether__pq_lost(c, "declared statement", err);
        if (rc > 0 && !PQconsumeInput(c->pg))
            return tether__pq_lost(c, "declared statement", err);
    }
}

/* is_state says whether the SQLSTATE s (NULL, or 5 characters) is want. */
static int is_state(const char *s, const char *want) {
    return s && s[0] == want[0] && !strcmp(s, want);
}

/* settle updates c's list after a round: 1 to run the round again (the
 * statement did not run, and may run now), else 0. */
static int settle(tether__pq_conn *c, round *rd, int in_txn) {
    const char *st = rd->keep && PQresultStatus(rd->keep) == PGRES_FATAL_ERROR
                         ? PQresultErrorField(rd->keep, PG_DIAG_SQLSTATE)
                         : NULL;
    int named = rd->name[0] != '\0', gone = is_state(st, "26000"),
        there = is_state(rd->prep_state, "42P05");
    if (rd->prepare && !rd->prep_state[0] && named)
        prep_touch(c, rd->st->id);
    else if (there && named)
        prep_touch(c, rd->st->id); /* it was there: ours, from before */
    else if (!rd->prepare && named && !gone)
        prep_touch(c, rd->st->id);
    if (gone) { /* DEALLOCATE ALL, DISCARD */
        c->nprep = 0;
        tether__pq_count_prepare(1);
    }
    return (there || gone) && !in_txn;
}

static void round_free(round *rd) {
    if (rd->keep)
        PQclear(rd->keep);
    if (rd->prep_err)
        PQclear(rd->prep_err);
    rd->keep = rd->prep_err = NULL;
}

/* outcome turns the last round's results into the call's. A statement gone
 * from the server inside a transaction block (26000), or found there
 * already when it was prepared (42P05), aborted the transaction but did
 * not run: transient, for tether_pool_run to run the work again. */
static int outcome(PGconn *conn, round *rd, PGresult **res, tether_error *err) {
    PGresult *r = rd->keep;
    if (rd->prep_err && (!r || PQresultStatus(r) == PGRES_PIPELINE_ABORTED))
        r = rd->prep_err;
    int rc = tether_pq_error(conn, r, err);
    if (rc < 0) {
        const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (err && (is_state(st, "26000") || is_state(st, "42P05")))
            err->cls = TETHER_CLASS_TRANSIENT; /* it did not run */
        round_free(rd);
        return rc;
    }
    *res = rd->keep;
    rd->keep = NULL;
    round_free(rd);
    return 0;
}

static int exec_round(tether__pq_conn *c, const tether_pq_stmt *stmt,
                      const tether_pq_params *pp, int in_txn, int64_t start,
                      int64_t now, int64_t deadline, round *rd,
                      tether_error *err) {
    memset(rd, 0, sizeof(*rd));
    rd->st = stmt;
    rd->name = stmt->server;
    rd->prepare = prep_find(c, stmt->id) < 0;
    if (rd->prepare && c->nprep == TETHER__PQ_PREP_MAX) {
        if (in_txn)
            rd->name = ""; /* an error there would abort the transaction */
        else
            rd->evict = 1;
    }
    if (send_round(c, rd, pp) != 0)
        return tether__pq_lost(c, "declared statement", err);
    int rc = await_round(c, rd, start, now, deadline, in_txn, err);
    if (rc < 0) {
        /* Timed out: the Prepare went before the Execute, and most likely
         * ran (a prepared statement outlives the transaction it was made
         * in). Counted as prepared: if it did not run, the next Execute
         * gets 26000 and prepares again; counted as absent, a Prepare
         * would get 42P05, which inside a transaction block aborts it. */
        if (rc == TETHER_ETIMEDOUT && rd->prepare && rd->name[0])
            prep_touch(c, stmt->id);
        round_free(rd);
        return rc;
    }
    if (!rd->plain)
        PQexitPipelineMode(c->pg); /* every result read: it succeeds */
    return settle(c, rd, in_txn);
}

int tether_pq_exec_prepared(PGconn *conn, const tether_pq_stmt *stmt,
                            const tether_pq_params *params, int64_t timeout_ms,
                            PGresult **res, tether_error *err) {
    if (res)
        *res = NULL;
    if (!conn || !stmt || !res)
        return tether__null(err, "tether_pq_exec_prepared",
                            !conn   ? "conn"
                            : !stmt ? "stmt"
                                    : "res");
    static const tether_pq_params none = {0, NULL, NULL, NULL, NULL, 0};
    const tether_pq_params *pp = params ? params : &none;
    if (pp->n != stmt->n || (pp->n > 0 && !pp->values))
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "tether_pq_exec_prepared: %s takes %d "
                                "parameters, params gives %d",
                                stmt->name, stmt->n, pp->values ? pp->n : 0);
    tether__pq_conn *c = tether__pq_find(conn);
    if (!c)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "declared statement: conn is not a "
                                "connection of tether's pq driver");
    int in_txn = 0, rc = tether__pq_ready(c, &in_txn, err);
    if (rc)
        return rc;
    int64_t start = tether__pq_now_ns(),
            deadline = tether__pq_deadline(start, timeout_ms);
    if (deadline >= 0 && start >= deadline)
        return tether_error_set_not_sent(
            err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
            "%s on %s not sent: its deadline had passed", stmt->name, c->label);
    tether__pq_count_statement();
    round rd;
    for (int i = 0;; i++) {
        rc = exec_round(c, stmt, pp, in_txn, start, i ? -1 : start, deadline,
                        &rd, err);
        if (rc <= 0 || i == 1)
            break;
        round_free(&rd); /* it did not run: once more */
    }
    if (rc < 0)
        return rc;
    PQsetnonblocking(conn, 0); /* nothing left to flush */
    return outcome(conn, &rd, res, err);
}
