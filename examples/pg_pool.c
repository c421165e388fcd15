/* pg_pool.c - a PostgreSQL pool over a primary and a standby: writes go to
 * whichever server is the primary now, transient failures are retried, and
 * the application never sees a failover it can survive.
 *
 *   example_pg_pool "host=db1,db2 dbname=app user=app password=... \
 *                    target_session_attrs=read-write tether_pool_max=8"
 */
#include <tether_pq.h>

#include <stdio.h>

/* The work: one statement. tether_pq_error classifies a failure (a lost
 * connection, a serialization failure, a read-only server, ...). */
static int count_rows(void *handle, void *arg, const tether_attempt *a,
                      tether_error *err) {
    (void)a;
    PGresult *r = PQexec(handle, "SELECT count(*) FROM pg_class");
    int rc = PQresultStatus(r) == PGRES_TUPLES_OK
                 ? 0
                 : tether_pq_error(handle, r, err);
    if (rc == 0)
        snprintf(arg, 32, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

static void show(void *ctx, const tether_connect_event *ev) {
    (void)ctx;
    if (ev->code)
        fprintf(stderr, "attempt %d %s:%d %s: %s\n", ev->attempt, ev->host,
                ev->port, tether_phase_name(ev->phase), ev->message);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CONNINFO\n", argv[0]);
        return 2;
    }
    tether_pool *pool = NULL;
    tether_error err = {0};
    if (tether_pool_open(&pool, argv[1], show, NULL, &err) != 0) {
        fprintf(stderr, "%s\n", err.message); /* never holds the password */
        return 1;
    }
    char rows[32] = "";
    int rc = tether_pool_run(pool, TETHER_IDEMPOTENT, count_rows, rows, &err);
    if (rc == 0)
        printf("pg_class has %s rows\n", rows);
    else
        fprintf(stderr, "failed after %d attempts: %s\n", err.attempts,
                err.message);
    char metrics[4096];
    tether_pool_metrics_prometheus(pool, metrics, sizeof(metrics));
    fputs(metrics, stdout);
    tether_pool_destroy(pool);
    return rc == 0 ? 0 : 1;
}
