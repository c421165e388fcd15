/* pg_pool.c - a PostgreSQL pool over a primary and a standby, from one
 * connection string. With target_session_attrs=read-write the pool
 * connects only to the server that is the primary now, in whatever order
 * the hosts are listed; the work runs through tether_pool_run, which
 * retries its transient failures (a lost connection, a failover) under the
 * pool's policy. At the end it prints the pool's metrics in the Prometheus
 * text format.
 *
 *   example_pg_pool "host=db1,db2 dbname=app user=app password=... \
 *                    target_session_attrs=read-write tether_pool_max=8"
 */
#include <tether_pq.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the work found out. */
typedef struct answer {
    char rows[32];
    int standby; /* 1: the server that answered is a standby */
    char port[8];
} answer;

/* The work: one statement. tether_pq_error classifies a failure (a lost
 * connection, a serialization failure, a read-only server, ...). */
static int count_rows(void *handle, void *arg, const tether_attempt *a,
                      tether_error *err) {
    (void)a;
    answer *ans = arg;
    PGresult *r = PQexec(handle, "SELECT count(*), pg_is_in_recovery(), "
                                 "inet_server_port() FROM pg_class");
    int rc = PQresultStatus(r) == PGRES_TUPLES_OK
                 ? 0
                 : tether_pq_error(handle, r, err);
    if (rc == 0) {
        snprintf(ans->rows, sizeof(ans->rows), "%s", PQgetvalue(r, 0, 0));
        ans->standby = !strcmp(PQgetvalue(r, 0, 1), "t");
        snprintf(ans->port, sizeof(ans->port), "%s", /* "" over a socket */
                 PQgetvalue(r, 0, 2));
    }
    PQclear(r);
    return rc;
}

/* Connection attempts that failed or were passed over (a standby when the
 * primary is wanted), on stderr. */
static void show(void *ctx, const tether_connect_event *ev) {
    (void)ctx;
    if (ev->code)
        fprintf(stderr, "attempt %d %s:%d %s: %s\n", ev->attempt, ev->host,
                ev->port, tether_phase_name(ev->phase), ev->message);
}

/* The metrics text, in a buffer the caller frees (NULL when out of
 * memory). Like snprintf, the call returns the length of the whole text,
 * and with no buffer it only tells that length; the text can grow a little
 * before the next call (counters gain digits), so ask again until it
 * fits. */
static char *metrics_text(tether_pool *pool) {
    size_t need = tether_pool_metrics_prometheus(pool, NULL, 0);
    for (;;) {
        size_t cap = need + 64;
        char *buf = malloc(cap);
        if (!buf)
            return NULL;
        need = tether_pool_metrics_prometheus(pool, buf, cap);
        if (need < cap)
            return buf;
        free(buf);
    }
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
    answer ans = {"", 0, ""};
    int rc = tether_pool_run(pool, TETHER_IDEMPOTENT, count_rows, &ans, &err);
    if (rc == 0)
        printf("pg_class has %s rows, counted on the %s (port %s)\n", ans.rows,
               ans.standby ? "standby" : "primary",
               ans.port[0] ? ans.port : "unix socket");
    else
        fprintf(stderr, "failed after %d attempts: %s\n", err.attempts,
                err.message);
    char *metrics = metrics_text(pool);
    if (metrics)
        fputs(metrics, stdout);
    else
        fprintf(stderr, "out of memory for the metrics\n");
    int ok = rc == 0 && metrics;
    free(metrics);
    tether_pool_destroy(pool);
    return ok ? 0 : 1;
}
