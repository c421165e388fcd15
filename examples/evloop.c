/* evloop.c - one thread, one event loop (libuv, or libevent with
 * --libevent), thousands of concurrent queries over a pool of 8 PostgreSQL
 * connections, nothing blocking (docs/evloop.md).
 *
 *   example_evloop CONNINFO [REQUESTS [CONNECTIONS]] [--at-once N]
 *                  [--dedicated] [--ticker-thread] [--libevent]
 *
 * CONNINFO is a plain libpq connection string. Every request starts a
 * non-blocking acquire (tether_pool_acquire_start): all REQUESTS at once,
 * or with --at-once N the first N, and each one done starts the next, so
 * that N wait all along; when its connection
 * comes (the adapter's callback), it sends "SELECT <its number>" with
 * PQsendQuery and reads the result when the socket is readable
 * (PQconsumeInput, PQisBusy, PQgetResult, driven by the loop), checks the
 * number and releases the connection. With --dedicated the same loop
 * drives CONNECTIONS connections of its own, no pool: the baseline that
 * bench/run-evloop sets beside it. The loop runs the pool's ticks
 * (tether_uv_ticks), so the process has one thread once its connections
 * are made; with --ticker-thread the library's own thread runs them. The
 * pool keeps CONNECTIONS open (tether_pool_min) and the batch starts once
 * they are, as the dedicated side connects before it starts: opening them
 * in the batch would time a few connects (authentication, a server
 * process each) against none. A warm-up batch (two requests per
 * connection) runs first and is not counted. Prints one line (T: the
 * process's threads after the batch):
 *
 *   mode M requests N completed C errors E max_connections K seconds S
 *   qps Q cpu_us_per_query U threads T
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, getrusage */

#include <event2/event.h>
#include <tether.h>
#include <tether_event.h>
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
    uv_poll_t poll;   /* with libuv */
    struct event *ev; /* with libevent */
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
    struct event_base *base; /* --libevent */
    int dedicated, ticker_thread, libevent;
    int at_once; /* acquires outstanding (--at-once; 0: all) */
    tether_pool *pool;
    tether_cq *cq;
    tether_uv *watch;      /* libuv */
    tether_levent *lwatch; /* libevent */
    conn_io *ios[MAX_CONNS];
    int nios;
    req *reqs;
    int n, next, started, done, errors, in_use, max_in_use;
} A;

static void req_done(req *r, int ok);
static void on_socket_uv(uv_poll_t *h, int status, int events);
static void on_socket_ev(evutil_socket_t fd, short what, void *arg);

/* The conn_io of pg: one per connection, made when first seen. */
static conn_io *io_for(PGconn *pg) {
    for (int i = 0; i < A.nios; i++)
        if (A.ios[i]->pg == pg)
            return A.ios[i];
    if (A.nios == MAX_CONNS)
        return NULL;
    conn_io *io = calloc(1, sizeof(*io));
    int ok =
        io && (A.libevent ? (io->ev = event_new(A.base, PQsocket(pg), EV_READ,
                                                on_socket_ev, io)) != NULL
                          : uv_poll_init(A.loop, &io->poll, PQsocket(pg)) == 0);
    if (!ok) {
        free(io);
        return NULL;
    }
    io->pg = pg;
    io->poll.data = io;
    A.ios[A.nios++] = io;
    return io;
}

/* Wait for io's socket to turn readable (and writable: more to send). */
static void watch(conn_io *io, int writable) {
    if (!A.libevent) {
        uv_poll_start(&io->poll, UV_READABLE | (writable ? UV_WRITABLE : 0),
                      on_socket_uv);
        return;
    }
    event_del(io->ev);
    event_assign(io->ev, A.base, PQsocket(io->pg),
                 EV_READ | EV_PERSIST | (writable ? EV_WRITE : 0), on_socket_ev,
                 io);
    event_add(io->ev, NULL);
}

static void unwatch(conn_io *io) {
    if (A.libevent)
        event_del(io->ev);
    else
        uv_poll_stop(&io->poll);
}

static void fail(req *r, const char *what, const char *detail) {
    if (A.errors++ < 5)
        fprintf(stderr, "request %d: %s: %s\n", r->id, what, detail);
    req_done(r, 0);
}

/* Read what the server sent; the request is done when its result is in. */
static void socket_ready(conn_io *io, int failed, int writable) {
    req *r = io->req;
    if (failed || !PQconsumeInput(io->pg)) {
        unwatch(io);
        fail(r, "read", PQerrorMessage(io->pg));
        return;
    }
    if (writable && PQflush(io->pg) == 0)
        watch(io, 0);
    char bad[128] = "";
    while (!PQisBusy(io->pg)) {
        PGresult *res = PQgetResult(io->pg);
        if (!res) { /* the query's results are all in */
            unwatch(io);
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

static void on_socket_uv(uv_poll_t *h, int status, int events) {
    socket_ready(h->data, status < 0, events & UV_WRITABLE);
}

static void on_socket_ev(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    socket_ready(arg, 0, what & EV_WRITE);
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
    watch(io, PQflush(io->pg) == 1);
}

/* The adapter calls this for each completed acquire. */
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

/* Start the next request's acquire (its completion comes to on_lease);
 * one that cannot start is counted as failed and the one after it tried. */
static void start_next(void) {
    while (A.started < A.n) {
        req *r = &A.reqs[A.started++];
        tether_error err;
        if (tether_pool_acquire_start(A.pool, A.cq, -1, r, NULL, &err) == 0)
            return;
        if (A.errors++ < 5)
            fprintf(stderr, "request %d: start: %s\n", r->id, err.message);
        A.done++;
    }
}

/* Once all are done, let the loop return. */
static void check_finished(void) {
    if (A.done < A.n)
        return;
    if (A.libevent)
        event_base_loopbreak(A.base); /* the watcher's event persists */
    else
        uv_unref(tether_uv_handle(A.watch));
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
        start_next(); /* keep at_once outstanding */
        check_finished();
    } else if (io && ok && A.next < A.n) {
        send_query(&A.reqs[A.next++], io); /* the next one in line */
    }
}

/* Run n requests numbered from first; returns the seconds they took. */
static double run_batch(int first, int n) {
    A.n = n;
    A.done = A.next = A.started = 0;
    for (int i = 0; i < n; i++)
        A.reqs[i] = (req){first + i, NULL, NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!A.dedicated) {
        if (!A.libevent)
            uv_ref(tether_uv_handle(A.watch));
        int head = A.at_once > 0 && A.at_once < n ? A.at_once : n;
        while (A.started < head)
            start_next();
        check_finished();
    } else {
        for (int i = 0; i < A.nios && A.next < n; i++)
            send_query(&A.reqs[A.next++], A.ios[i]);
    }
    if (A.done < n && A.libevent)
        event_base_loop(A.base, 0);
    else if (A.done < n)
        uv_run(A.loop, UV_RUN_DEFAULT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
}

static int open_pool(const char *conninfo, int conns, int n) {
    char *ci = malloc(strlen(conninfo) + 128);
    if (!ci)
        return -1;
    sprintf(ci,
            "%s tether_pool_min=%d tether_pool_max=%d tether_max_waiters=%d",
            conninfo, conns, conns, n + 16);
    tether_error err;
    int rc = tether_pool_open(&A.pool, ci, NULL, NULL, &err);
    free(ci);
    if (rc == 0 && !(A.cq = tether_cq_create(&err)))
        rc = err.code;
    if (rc == 0 && A.libevent)
        rc =
            tether_levent_create(&A.lwatch, A.base, A.cq, on_lease, NULL, &err);
    else if (rc == 0)
        rc = tether_uv_create(&A.watch, A.loop, A.cq, on_lease, NULL, &err);
    if (rc == 0 && !A.ticker_thread &&
        (rc = A.libevent ? tether_levent_ticks(A.lwatch, 1)
                         : tether_uv_ticks(A.watch, 1)))
        tether_error_set(&err, rc, TETHER_CLASS_PERMANENT, "no loop timer");
    if (rc != 0)
        fprintf(stderr, "pool: %s\n", err.message);
    return rc;
}

/* Wait up to 10 s for the pool's conns connections to be open (they are
 * made in the background from tether_pool_open on), running the loop's
 * ticks meanwhile. */
static int await_connections(int conns) {
    for (int ms = 0; ms < 10000; ms++) {
        tether_pool_metrics m;
        tether_pool_metrics_get(A.pool, &m);
        if (m.total - m.creating >= conns)
            return 0;
        if (A.libevent)
            event_base_loop(A.base, EVLOOP_NONBLOCK);
        else
            uv_run(A.loop, UV_RUN_NOWAIT);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    fprintf(stderr, "pool: %d connections not open after 10 s\n", conns);
    return -1;
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
    tether_levent_destroy(A.lwatch);
    for (int i = 0; i < A.nios; i++) {
        if (A.dedicated)
            PQfinish(A.ios[i]->pg);
        if (A.libevent) {
            event_free(A.ios[i]->ev);
            free(A.ios[i]);
        } else {
            uv_close((uv_handle_t *)&A.ios[i]->poll, on_closed);
        }
    }
    uv_run(A.loop, UV_RUN_DEFAULT); /* the close callbacks */
    if (A.base)
        event_base_free(A.base);
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
        else if (!strcmp(argv[i], "--libevent"))
            A.libevent = 1;
        else if (!strcmp(argv[i], "--at-once"))
            A.at_once =
                i + 1 < argc && atoi(argv[++i]) > 0 ? atoi(argv[i]) : -1;
        else if (np < 3)
            pos[np++] = argv[i];
    }
    int n = atoi(pos[1]), conns = atoi(pos[2]);
    if (!pos[0] || n < 1 || conns < 1 || conns > MAX_CONNS || A.at_once < 0) {
        fprintf(stderr,
                "usage: %s CONNINFO [REQUESTS [CONNECTIONS]] [--at-once N] "
                "[--dedicated] [--ticker-thread] [--libevent]\n",
                argv[0]);
        return 2;
    }
    A.loop = uv_default_loop();
    if (A.libevent && !(A.base = event_base_new())) {
        fprintf(stderr, "event_base_new failed\n");
        return 1;
    }
    A.reqs = calloc((size_t)n + 2 * (size_t)conns, sizeof(req));
    int rc = A.dedicated ? open_dedicated(pos[0], conns)
                         : open_pool(pos[0], conns, n);
    if (rc == 0 && !A.dedicated)
        rc = await_connections(conns);
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
