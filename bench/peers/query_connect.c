/*
 * query_connect.c - SELECT 1 per second with a new connection per query:
 * PQconnectdb + SELECT 1 + PQfinish per operation (what an application
 * without any pool does).  The "wait" is the connect (TCP, startup,
 * SCRAM-SHA-256 authentication, backend fork on the server).
 *
 * Each of T threads checks once, before the window, that it can connect.
 * A failed connect or query is counted in "errors" (the thread then pauses
 * 1 ms, as every peer does after a failure).
 *
 *   query_connect --conninfo C --threads T --seconds S [--json]
 */
#include "query_common.h"

struct conn_ctx {
    const char *conninfo;
};

static void *worker(void *arg)
{
    struct q_thread *t = arg;
    const struct conn_ctx *c = t->ctx;
    char why[256];
    PGconn *conn = q_connect(c->conninfo, why, sizeof why);
    PQfinish(conn);
    if (!q_start(t, conn ? NULL : why))
        return NULL;
    while (!q_should_stop()) {
        uint64_t t0 = bench_now_ns();
        conn = q_connect(c->conninfo, why, sizeof why);
        uint64_t tw = bench_now_ns();
        if (!conn) {
            q_error(t, "connect", why);
            t->errors++;
            q_error_pause();
            continue;
        }
        bool ok = q_select1(t, conn);
        PQfinish(conn);
        if (!ok) {
            t->errors++;
            q_error_pause();
            continue;
        }
        q_op_done(t, t0, tw, bench_now_ns());
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct q_opts o = {.impl = "connect-per-query"};
    int prc = q_parse(argc, argv,
                      "PQconnectdb + SELECT 1 + PQfinish per operation (no pool).\n"
                      "--pool only labels the output (default: T, the most connections "
                      "open at once).",
                      &o);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    struct conn_ctx ctx = {.conninfo = o.conninfo};
    struct q_result r;
    if (q_run(&o, worker, &ctx, &r) != 0)
        return 2;
    q_report(&o, o.pool ? o.pool : o.threads, &r);
    return r.ops == 0 ? 1 : 0;
}
