/* evloop.c - one thread, one libuv loop, thousands of concurrent queries
 * over a pool of 8 PostgreSQL connections, nothing blocking
 * (docs/evloop.md).
 *
 *   example_evloop CONNINFO [REQUESTS [CONNECTIONS]] [--dedicated]
 *                  [--ticker-thread]
 *
 * CONNINFO is a plain libpq connection string. Every request starts a
 * non-blocking acquire (tether_pool_acquire_start); when its connection
 * comes (tether_uv's callback), it sends "SELECT <its number>" with
 * PQsendQuery and reads the result when the socket is readable
 * (PQconsumeInput, PQisBusy, PQgetResult, driven by the loop), checks the
 * number and releases the connection. With --dedicated the same loop
 * drives CONNECTIONS connections of its own, no pool: the baseline that
 * bench/run-evloop sets beside it. The loop runs the pool's ticks
 * (tether_uv_ticks), so the process has one thread once its connections
 * are made; with --ticker-thread the library's own thread runs them. A
 * warm-up batch (two requests per connection) runs first and is not
 * counted. Prints one line (T: the process's threads after the batch):
 *
 *   mode M requests N completed C errors E max_connections K seconds S
 *   qps Q cpu_us_per_query U threads T
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, getrusage */

#include <tether.h>
#include <tether_pq.h>
#include <tether_uv.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <time.h>

#define MAX_CONNS 64

typedef struct req req;

/* One connection's socket, watched while a query is on it. */
typedef struct conn_io {
    uv_poll_t poll;
    PGconn *pg;
    req *req; /* the request on it, or NULL */
} conn_io;

struct req {
    int id;
    tether_lease *lease; /* pool mode */
    conn_io *io;
};

static struct {
    uv_loop_t *loop;
    int dedicated, ticker_thread;
    tether_pool *pool;
    tether_cq *cq;
    tether_uv *watch;
    conn_io *ios[MAX_CONNS];
    int nios;
    req *reqs;
    int n, next, done, errors, in_use, max_in_use;
} A;

static void req_done(req *r, int ok);

/* The conn_io of pg: one per connection, made when first seen. */
static conn_io *io_for(PGconn *pg) {
    for (int i = 0; i < A.nios; i++)
        if (A.ios[i]->pg == pg)
            return A.ios[i];
    if (A.nios == MAX_CONNS)
        return NULL;
    conn_io *io = calloc(1, sizeof(*io));
    if (!io || uv_poll_init(A.loop, &io->poll, PQsocket(pg)) != 0) {
        free(io);
        return NULL;
    }
    io->pg = pg;
    io->poll.data = io;
    A.ios[A.nios++] = io;
    return io;
}

static void fail(req *r, const char *what, const char *detail) {
    if (A.errors++ < 5)
        fprintf(stderr, "request %d: %s: %s\n", r->id, what, detail);
    req_done(r, 0);
}

/* Read what the server sent; the request is done when its result is in. */
static void on_socket(uv_poll_t *h, int status, int events) {
    conn_io *io = h->data;
    req *r = io->req;
    if (status < 0 || !PQconsumeInput(io->pg)) {
        uv_poll_stop(&io->poll);
        fail(r, "read", PQerrorMessage(io->pg));
        return;
    }
    if ((events & UV_WRITABLE) && PQflush(io->pg) == 0)
        uv_poll_start(&io->poll, UV_READABLE, on_socket);
    char bad[128] = "";
    while (!PQisBusy(io->pg)) {
        PGresult *res = PQgetResult(io->pg);
        if (!res) { /* the query's results are all in */
            uv_poll_stop(&io->poll);
            if (bad[0])
                fail(r, "result", bad);
            else
                req_done(r, 1);
            return;
        }
        if (!bad[0] && PQresultStatus(res) != PGRES_TUPLES_OK)
            snprintf(bad, sizeof(bad), "%s", PQresultErrorMessage(res));
        else if (!bad[0] && atoi(PQgetvalue(res, 0, 0)) != r->id)
            snprintf(bad, sizeof(bad), "got %s, want %d", PQgetvalue(res, 0, 0),
                     r->id);
        PQclear(res);
    }
}

/* Send r's query on io's connection and watch the socket. */
static void send_query(req *r, conn_io *io) {
    char q[32];
    snprintf(q, sizeof(q), "SELECT %d", r->id);
    r->io = io;
    io->req = r;
    if (!PQsendQuery(io->pg, q)) {
        fail(r, "send", PQerrorMessage(io->pg));
        return;
    }
    int more = PQflush(io->pg) == 1;
    uv_poll_start(&io->poll, UV_READABLE | (more ? UV_WRITABLE : 0), on_socket);
}

/* tether_uv calls this for each completed acquire. */
static void on_lease(tether_completion *c, void *arg) {
    (void)arg;
    req *r = c->user;
    if (c->rc != 0) { /* err.message never holds the password */
        fail(r, tether_errname(c->rc), c->err.message);
        return;
    }
    r->lease = c->lease;
    conn_io *io = io_for(tether_pq_conn(c->lease));
    if (!io) {
        fail(r, "watch", "cannot watch the connection's socket");
        return;
    }
    if (++A.in_use > A.max_in_use)
        A.max_in_use = A.in_use;
    send_query(r, io);
}

static void req_done(req *r, int ok) {
    A.done++;
    conn_io *io = r->io;
    r->io = NULL;
    if (io)
        io->req = NULL;
    if (!A.dedicated) {
        if (r->lease) {
            A.in_use--;
            if (ok)
                tether_lease_release(r->lease);
            else
                tether_lease_discard(r->lease); /* state unknown */
            r->lease = NULL;
        }
        if (A.done == A.n)
            uv_unref(tether_uv_handle(A.watch)); /* let uv_run return */
    } else if (io && ok && A.next < A.n) {
        send_query(&A.reqs[A.next++], io); /* the next one in line */
    }
}

/* Run n requests numbered from first; returns the seconds they took. */
static double run_batch(int first, int n) {
    A.n = n;
    A.done = A.next = 0;
    for (int i = 0; i < n; i++)
        A.reqs[i] = (req){first + i, NULL, NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!A.dedicated) {
        uv_ref(tether_uv_handle(A.watch));
        for (int i = 0; i < n; i++) {
            tether_error err;
            if (tether_pool_acquire_start(A.pool, A.cq, -1, &A.reqs[i], NULL,
                                          &err) != 0)
                fail(&A.reqs[i], "start", err.message);
        }
    } else {
        for (int i = 0; i < A.nios && A.next < n; i++)
            send_query(&A.reqs[A.next++], A.ios[i]);
    }
    if (A.done < n)
        uv_run(A.loop, UV_RUN_DEFAULT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
}

static int open_pool(const char *conninfo, int conns, int n) {
    char *ci = malloc(strlen(conninfo) + 128);
    if (!ci)
        return -1;
    sprintf(ci, "%s tether_pool_max=%d tether_max_waiters=%d", conninfo, conns,
            n + 16);
    tether_error err;
    int rc = tether_pool_open(&A.pool, ci, NULL, NULL, &err);
    free(ci);
    if (rc == 0 && !(A.cq = tether_cq_create(&err)))
        rc = err.code;
    if (rc == 0)
        rc = tether_uv_create(&A.watch, A.loop, A.cq, on_lease, NULL, &err);
    if (rc == 0 && !A.ticker_thread && (rc = tether_uv_ticks(A.watch, 1)))
        tether_error_set(&err, rc, TETHER_CLASS_PERMANENT, "no loop timer");
    if (rc != 0)
        fprintf(stderr, "pool: %s\n", err.message);
    return rc;
}

static int open_dedicated(const char *conninfo, int conns) {
    for (int i = 0; i < conns; i++) {
        PGconn *pg = PQconnectdb(conninfo);
        if (PQstatus(pg) != CONNECTION_OK || !io_for(pg)) {
            fprintf(stderr, "connect: %s", PQerrorMessage(pg));
            PQfinish(pg);
            return -1;
        }
    }
    return 0;
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The process's threads: the entries of /proc/self/task. */
static int count_threads(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void on_closed(uv_handle_t *h) {
    free(h->data);
}

static void close_all(void) {
    tether_uv_destroy(A.watch);
    for (int i = 0; i < A.nios; i++) {
        if (A.dedicated)
            PQfinish(A.ios[i]->pg);
        uv_close((uv_handle_t *)&A.ios[i]->poll, on_closed);
    }
    uv_run(A.loop, UV_RUN_DEFAULT); /* the close callbacks */
    tether_cq_destroy(A.cq);
    tether_pool_destroy(A.pool);
}

int main(int argc, char **argv) {
    const char *pos[3] = {NULL, "5000", "8"};
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dedicated"))
            A.dedicated = 1;
        else if (!strcmp(argv[i], "--ticker-thread"))
            A.ticker_thread = 1;
        else if (np < 3)
            pos[np++] = argv[i];
    }
    int n = atoi(pos[1]), conns = atoi(pos[2]);
    if (!pos[0] || n < 1 || conns < 1 || conns > MAX_CONNS) {
        fprintf(stderr,
                "usage: %s CONNINFO [REQUESTS [CONNECTIONS]] "
                "[--dedicated] [--ticker-thread]\n",
                argv[0]);
        return 2;
    }
    A.loop = uv_default_loop();
    A.reqs = calloc((size_t)n + 2 * (size_t)conns, sizeof(req));
    int rc = A.dedicated ? open_dedicated(pos[0], conns)
                         : open_pool(pos[0], conns, n);
    if (rc != 0 || !A.reqs)
        return 1;
    run_batch(1000000, 2 * conns); /* warm-up: connect, caches */
    int warm_errors = A.errors;
    A.errors = 0;
    A.max_in_use = A.in_use;
    double cpu0 = cpu_seconds();
    double secs = run_batch(1, n);
    double cpu = cpu_seconds() - cpu0;
    int maxc = A.dedicated ? A.nios : A.max_in_use;
    if (!A.dedicated) {
        tether_pool_metrics m;
        tether_pool_metrics_get(A.pool, &m);
        if (m.total > maxc)
            maxc = m.total;
    }
    printf("mode %s requests %d completed %d errors %d max_connections %d "
           "seconds %.3f qps %.0f cpu_us_per_query %.2f threads %d\n",
           A.dedicated ? "dedicated" : "pool", n, A.done - A.errors,
           A.errors + warm_errors, maxc, secs, A.done / secs,
           cpu * 1e6 / A.done, count_threads());
    close_all();
    free(A.reqs);
    return A.errors + warm_errors ? 1 : 0;
}
