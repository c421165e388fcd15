/*
 * query_dedicated.c - SELECT 1 per second with one dedicated libpq
 * connection per thread: the limit a pool can approach (no pool at all).
 *
 * Each of T threads opens its own connection (PQconnectdb) and runs one
 * SELECT 1 on it before the window opens, then loops PQexec("SELECT 1")
 * until it closes.  A query that fails is counted in "errors"; if the
 * connection is gone, the thread reconnects (PQreset) before going on.
 *
 * With --impl-name pgbouncer and the conninfo pointing at a PgBouncer in
 * transaction mode, this is the PgBouncer measurement (bench/run-query):
 * each thread holds its own client connection and PgBouncer multiplexes
 * them onto its server pool; --pool then only labels the output with
 * PgBouncer's pool_size.
 *
 *   query_dedicated --conninfo C --threads T [--pool P] --seconds S [--json]
 *                   [--impl-name NAME]
 */
#include "query_common.h"

struct ded_ctx {
    const char *conninfo;
};

static void *worker(void *arg)
{
    struct q_thread *t = arg;
    const struct ded_ctx *c = t->ctx;
    char why[256];
    PGconn *conn = q_connect(c->conninfo, why, sizeof why);
    if (conn && !q_select1(t, conn))
        snprintf(why, sizeof why, "%s", t->error);
    bool ok = conn && !t->error[0];
    if (!q_start(t, ok ? NULL : why)) {
        PQfinish(conn);
        return NULL;
    }
    while (!q_should_stop()) {
        uint64_t t0 = bench_now_ns();
        if (!q_select1(t, conn)) {
            t->errors++;
            if (PQstatus(conn) == CONNECTION_BAD)
                PQreset(conn);
            q_error_pause();
            continue;
        }
        q_op_done(t, t0, 0, bench_now_ns());
    }
    PQfinish(conn);
    return NULL;
}

int main(int argc, char **argv)
{
    struct q_opts o = {.impl = "dedicated"};
    int prc = q_parse(argc, argv,
                      "SELECT 1 on one dedicated libpq connection per thread (no pool).\n"
                      "--pool only labels the output (default: T, the connections held).",
                      &o);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    struct ded_ctx ctx = {.conninfo = o.conninfo};
    struct q_result r;
    if (q_run(&o, worker, &ctx, &r) != 0)
        return 2;
    q_report(&o, o.pool ? o.pool : o.threads, &r);
    return r.ops == 0 ? 1 : 0;
}
