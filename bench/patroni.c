/* patroni.c - one client of the Patroni comparison (bench/run-patroni):
 * an idempotent write workload and a read workload, each one thread doing
 * one statement every 10 ms, against a Patroni-managed cluster, either
 * through a tether pool with read/write routing or as plain libpq.
 *
 *   bench_patroni tether CONNINFO
 *   bench_patroni libpq WRITE_CONNINFO READ_CONNINFO
 *   bench_patroni connect CONNINFO
 *   bench_patroni fleet CONNINFO
 *
 * tether: one pool (tether_pool_open; CONNINFO carries
 * tether_route=read-write-split), writes with TETHER_IDEMPOTENT and reads
 * with TETHER_READONLY | TETHER_IDEMPOTENT, each through
 * tether_pool_run_for with a 30 s deadline. libpq: one connection per
 * thread, PQconnectdb again on the next tick after any failure.
 * connect: a read only, every 50 ms, each on a connection of its own
 * (tether_connector_connect through one connector made from CONNINFO,
 * then closed): where a new connection goes, which a pool's long-lived
 * connections do not show (bench/run-patroni --add-replica). fleet: one
 * process of a fleet (bench/run-patroni --fleet): a pool from CONNINFO,
 * the write alone, every PATRONI_BENCH_PERIOD_MS (default 100) ms, and no
 * output but errors, the log's warnings ("l" lines: a REST call that
 * failed) and the final "m" line with the pool's REST counts.
 *
 * The write sets this client's row of patroni_bench (the script creates
 * it) to the write's sequence number, INSERT ... ON CONFLICT DO UPDATE:
 * applying it twice leaves the same row. The read asks the server whether
 * it is in recovery. Output, one line per event, MS being CLOCK_REALTIME
 * milliseconds (comparable with the cluster script's fault times):
 *
 *   ready MS
 *   w MS PORT           a write done, by the server on PORT
 *                       (inet_server_port(): behind HAProxy, the node's)
 *   we MS TEXT          a write failed (the error reached the workload)
 *   r MS PORT INREC     a read done; INREC 1 on a standby, 0 on the leader
 *   re MS TEXT          a read failed
 *   c MS                a connect attempt (tether: each attempt the
 *                       connectors report; libpq: each PQconnectdb)
 *   l MS TEXT           connect: a line of the connector's log
 *   ev MS PHASE HOST:PORT CODE DELAY_MS TEXT
 *                       tether, with PATRONI_BENCH_TRACE set: every step
 *                       of every connect (pauses included)
 *
 * Runs until SIGTERM or SIGINT; a tether client then prints its pool's
 * routing counts ("m reads_standby=... reads_primary=...").
 * The name of the row is the client's KEY (env PATRONI_BENCH_KEY, else
 * the mode). */
#include "tether.h"
#include "tether_pq.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PERIOD_MS 10
#define CONNECT_PERIOD_MS 50
#define DEADLINE_MS 30000

static volatile sig_atomic_t stop;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *key;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static long long wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long long ms) {
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One output line; an error's text is cut at its first line break. */
static void emit(const char *tag, const char *rest) {
    char line[256];
    snprintf(line, sizeof(line), "%s", rest ? rest : "");
    line[strcspn(line, "\r\n")] = '\0';
    pthread_mutex_lock(&out_mu);
    printf("%s %lld%s%s\n", tag, wall_ms(), rest ? " " : "", line);
    fflush(stdout);
    pthread_mutex_unlock(&out_mu);
}

/* The next tick of a paced loop. */
static long long period_ms = PERIOD_MS;
static void pace(long long *next) {
    *next += period_ms;
    long long now = wall_ms();
    if (*next < now)
        *next = now;
    sleep_ms(*next - now);
}

static const char write_sql[] =
    "INSERT INTO patroni_bench(worker, n) VALUES ($1, $2) "
    "ON CONFLICT (worker) DO UPDATE SET n = EXCLUDED.n "
    "RETURNING inet_server_port()";
static const char read_sql[] =
    "SELECT inet_server_port(), pg_is_in_recovery()::int";

/* What one statement gives back: the server's port, and for a read
 * whether it was in recovery. */
typedef struct result {
    long long seq;
    int port, inrec;
} result;

/* Runs the write (seq != 0) or the read on c; 0 and r filled, or -1 with
 * res (to clear) left for the caller's error text. */
static int exec_one(PGconn *c, result *r, PGresult **res) {
    char seq[32];
    const char *params[2] = {key, seq};
    snprintf(seq, sizeof(seq), "%lld", r->seq);
    *res = r->seq ? PQexecParams(c, write_sql, 2, NULL, params, NULL, NULL, 0)
                  : PQexec(c, read_sql);
    if (PQresultStatus(*res) != PGRES_TUPLES_OK || PQntuples(*res) != 1)
        return -1;
    r->port = atoi(PQgetvalue(*res, 0, 0));
    r->inrec = r->seq ? 0 : atoi(PQgetvalue(*res, 0, 1));
    return 0;
}

static void report_ok(const result *r) {
    char rest[64];
    if (r->seq) {
        snprintf(rest, sizeof(rest), "%d", r->port);
        emit("w", rest);
    } else {
        snprintf(rest, sizeof(rest), "%d %d", r->port, r->inrec);
        emit("r", rest);
    }
}

/* ---- tether ------------------------------------------------------------ */

static tether_pool *pool;

static int tether_work(void *handle, void *arg, const tether_attempt *a,
                       tether_error *err) {
    (void)a;
    PGresult *res = NULL;
    int rc = exec_one(handle, arg, &res);
    if (rc)
        rc = tether_pq_error(handle, res, err);
    PQclear(res);
    return rc;
}

static void *tether_loop(void *arg) {
    int is_write = arg != NULL;
    long long seq = 0, next = wall_ms();
    while (!stop) {
        result r = {is_write ? ++seq : 0, 0, 0};
        tether_error err = {0};
        unsigned flags = TETHER_IDEMPOTENT | (is_write ? 0 : TETHER_READONLY);
        if (tether_pool_run_for(pool, flags, DEADLINE_MS, tether_work, &r,
                                &err) == 0)
            report_ok(&r);
        else
            emit(is_write ? "we" : "re", err.message);
        pace(&next);
    }
    return NULL;
}

static void on_connect_event(void *ctx, const tether_connect_event *ev) {
    (void)ctx;
    char rest[200];
    if (getenv("PATRONI_BENCH_TRACE")) {
        snprintf(rest, sizeof(rest), "%s %s:%d %d %lld %s",
                 tether_phase_name(ev->phase), ev->host ? ev->host : "-",
                 ev->port, ev->code, (long long)ev->delay_ms, ev->message);
        emit("ev", rest);
    }
    if (ev->phase == TETHER_PHASE_FAIL || ev->phase == TETHER_PHASE_OK ||
        ev->phase == TETHER_PHASE_ROLE)
        emit("c", NULL);
}

static int run_tether(const char *conninfo) {
    tether_error err = {0};
    if (tether_pool_open(&pool, conninfo, on_connect_event, NULL, &err)) {
        fprintf(stderr, "bench_patroni: %s\n", err.message);
        return 1;
    }
    emit("ready", NULL);
    pthread_t w, r;
    pthread_create(&w, NULL, tether_loop, (void *)1);
    pthread_create(&r, NULL, tether_loop, NULL);
    while (!stop)
        sleep_ms(50);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    tether_pool_metrics m;
    tether_pool_metrics_get(pool, &m);
    printf("m reads_standby=%llu reads_primary=%llu reads_lagging=%llu "
           "retries=%llu connect_failures=%llu\n",
           (unsigned long long)m.reads_standby,
           (unsigned long long)m.reads_primary,
           (unsigned long long)m.reads_lagging, (unsigned long long)m.retries,
           (unsigned long long)m.connect_failures);
    tether_pool_destroy(pool);
    return 0;
}

/* ---- libpq ------------------------------------------------------------- */

typedef struct pq_side {
    const char *conninfo;
    int is_write;
} pq_side;

static void *libpq_loop(void *arg) {
    pq_side *s = arg;
    PGconn *c = NULL;
    long long seq = 0, next = wall_ms();
    while (!stop) {
        if (!c) {
            emit("c", NULL);
            c = PQconnectdb(s->conninfo);
        }
        result r = {s->is_write ? ++seq : 0, 0, 0};
        PGresult *res = NULL;
        if (PQstatus(c) != CONNECTION_OK) {
            emit(s->is_write ? "we" : "re", PQerrorMessage(c));
            PQfinish(c);
            c = NULL;
        } else if (exec_one(c, &r, &res) == 0) {
            report_ok(&r);
        } else {
            const char *m = res ? PQresultErrorMessage(res) : "";
            emit(s->is_write ? "we" : "re", *m ? m : PQerrorMessage(c));
            PQfinish(c); /* reconnect on the next tick */
            c = NULL;
        }
        PQclear(res);
        pace(&next);
    }
    PQfinish(c);
    return NULL;
}

static int run_libpq(const char *write_ci, const char *read_ci) {
    pq_side ws = {write_ci, 1}, rs = {read_ci, 0};
    emit("ready", NULL);
    pthread_t w, r;
    pthread_create(&w, NULL, libpq_loop, &ws);
    pthread_create(&r, NULL, libpq_loop, &rs);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    return 0;
}

/* ---- a connection per read ---------------------------------------------- */

/* The connector's log: "l MS TEXT" (its discovery says when its list
 * changed: "patroni: standby hosts now ..."). */
static void on_log(void *ctx, tether_log_level level, const char *msg) {
    (void)ctx;
    (void)level;
    emit("l", msg);
}

static int run_connect(const char *conninfo) {
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = conninfo;
    o.on_event = on_connect_event;
    o.log = on_log;
    tether_connector *c;
    tether_error err = {0};
    if (tether_connector_create(&c, &o, &err)) {
        fprintf(stderr, "bench_patroni: %s\n", err.message);
        return 1;
    }
    emit("ready", NULL);
    period_ms = CONNECT_PERIOD_MS;
    long long next = wall_ms();
    while (!stop) {
        void *h = NULL;
        tether_error e = {0};
        if (tether_connector_connect(c, &h, &e)) {
            emit("re", e.message);
        } else {
            result r = {0, 0, 0};
            PGresult *res = NULL;
            if (exec_one(h, &r, &res) == 0)
                report_ok(&r);
            else
                emit("re", PQerrorMessage(h));
            PQclear(res);
            tether_connector_close(c, h);
        }
        pace(&next);
    }
    tether_connector_destroy(c);
    return 0;
}

/* ---- one process of a fleet ---------------------------------------------- */

static int run_fleet(const char *conninfo) {
    tether_error err = {0};
    tether_set_log(on_log, NULL, TETHER_LOG_WARN); /* REST failures */
    if (tether_pool_open(&pool, conninfo, NULL, NULL, &err)) {
        fprintf(stderr, "bench_patroni: %s\n", err.message);
        return 1;
    }
    const char *pe = getenv("PATRONI_BENCH_PERIOD_MS");
    period_ms = pe && atoll(pe) > 0 ? atoll(pe) : 100;
    long long seq = 0, done = 0, failed = 0, next = wall_ms();
    while (!stop) {
        result r = {++seq, 0, 0};
        tether_error e = {0};
        if (tether_pool_run_for(pool, TETHER_IDEMPOTENT, DEADLINE_MS,
                                tether_work, &r, &e) == 0)
            done++;
        else {
            failed++;
            emit("we", e.message);
        }
        pace(&next);
    }
    tether_pool_metrics m;
    tether_pool_metrics_get(pool, &m);
    printf("m writes=%lld write_errors=%lld patroni_requests=%llu "
           "patroni_failures=%llu patroni_kicks=%llu\n",
           done, failed, (unsigned long long)m.patroni_requests,
           (unsigned long long)m.patroni_failures,
           (unsigned long long)m.patroni_kicks);
    tether_pool_destroy(pool);
    return 0;
}

int main(int argc, char **argv) {
    int tether = argc == 3 && !strcmp(argv[1], "tether");
    int libpq = argc == 4 && !strcmp(argv[1], "libpq");
    int connect = argc == 3 && !strcmp(argv[1], "connect");
    int fleet = argc == 3 && !strcmp(argv[1], "fleet");
    if (!tether && !libpq && !connect && !fleet) {
        fprintf(stderr, "usage: bench_patroni tether CONNINFO\n"
                        "       bench_patroni libpq WRITE_CONNINFO "
                        "READ_CONNINFO\n"
                        "       bench_patroni connect CONNINFO\n"
                        "       bench_patroni fleet CONNINFO\n");
        return 2;
    }
    key = getenv("PATRONI_BENCH_KEY");
    if (!key || !*key)
        key = argv[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (connect)
        return run_connect(argv[2]);
    if (fleet)
        return run_fleet(argv[2]);
    return tether ? run_tether(argv[2]) : run_libpq(argv[2], argv[3]);
}
