/* bench_query.c - `tether bench query`: acquire, SELECT 1, release against
 * PostgreSQL through a tether pool, T threads on a pool of P, for S seconds
 * (run beside its peers by bench/run-query). Every operation is timed on
 * CLOCK_MONOTONIC (a round trip costs tens of microseconds, two clock reads
 * cost tens of nanoseconds) into per-thread log-linear histograms, and so
 * is its acquire part (the wait):
 *
 *   --mode run      (default) tether_pool_run with a work function that
 *                   runs PQexec(conn, "SELECT 1"); the wait is the time
 *                   from the call to the start of the work function.
 *   --mode acquire  tether_pool_acquire, PQexec, tether_lease_release; the
 *                   wait is the acquire call alone.
 *
 * --sql TEXT and --deadline D run TEXT (default SELECT 1) with
 * tether_pq_exec instead, each call (acquire, statement, release) within
 * D: in run mode tether_pool_run_for(D) with the statement on the run's
 * deadline, in acquire mode an acquire within D and the statement within
 * what is left. A call that fails with TETHER_ETIMEDOUT is a timeout, not
 * an error; how late each call returned past D is recorded (max_late_ms),
 * and the driver's statement counters (tether_pq_stats_get, taken after
 * the pool is destroyed, so that every drain has ended) give cancels_sent,
 * reused_after_cancel and discarded_after_cancel (docs/statements.md).
 *
 * --read-only runs the work with TETHER_READONLY through a routing pool
 * (tether_route=read-write-split appended): reads go to the standbys, and
 * each node is asked for its share (bench_nodes.c).
 *
 * The peers (bench/peers/query_*.c) print the same JSON line;
 * bench/run-query runs them all side by side. */
#include "bench.h"
#include "bench_nodes.h"
#include "hist.h"
#include "tether_pq.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

#define CMD "bench query"

typedef struct query_opts {
    bench_opts b; /* --threads, --pool, --seconds, --json */
    const char *conninfo;
    int run_mode;
    int read_only;        /* --read-only: TETHER_READONLY through routing */
    const char *sql;      /* --sql, or NULL: SELECT 1 with PQexec */
    int prepared;         /* --prepared: sql as a declared statement */
    tether_pq_stmt *stmt; /* its declaration */
    int64_t deadline_ms;  /* --deadline; -1: none */
} query_opts;

typedef struct qworker {
    _Alignas(64) uint64_t ops;
    uint64_t errors;
    uint64_t timeouts;   /* --sql/--deadline: calls ended by the deadline */
    int64_t max_late_ns; /* the worst return past the deadline */
    int64_t max_late_blocked_ns; /* the same in time blocked (schedstat) */
    int sched_fd;                /* /proc/thread-self/schedstat, or -1 */
    uint64_t work_start;         /* run mode: first call of the work function */
    tether_pool *p;
    const query_opts *o;
    char first_error[TETHER_MSG_MAX + 32];
    lat_hist op, wait;
    pthread_t tid;
} qworker;

static struct {
    _Alignas(64) atomic_int stop;
    _Alignas(64) pthread_barrier_t start;
} qsync;

static uint64_t qnow(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One SELECT 1 on conn, checked for PGRES_TUPLES_OK; on failure err is
 * filled by tether_pq_error (a lost connection is TETHER_EBROKEN,
 * transient, so that tether_pool_run may retry it on another connection;
 * otherwise the class follows the SQLSTATE). */
static int select1(PGconn *conn, tether_error *err) {
    PGresult *r = PQexec(conn, "SELECT 1");
    int rc = 0;
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = tether_pq_error(conn, r, err);
        if (rc == 0) /* a success that is not a row set: not SELECT 1's */
            rc = tether_error_set(err, TETHER_EQUERY, TETHER_CLASS_PERMANENT,
                                  "SELECT 1: %s",
                                  PQresStatus(PQresultStatus(r)));
    }
    PQclear(r);
    return rc;
}

static int work_select1(void *handle, void *arg, const tether_attempt *a,
                        tether_error *err) {
    qworker *w = arg;
    if (a->number == 1)
        w->work_start = qnow();
    return select1(handle, err);
}

/* stmt runs --sql on conn with timeout_ms (TETHER_PQ_RUN_DEADLINE: the
 * run's), through tether_pq_exec, or tether_pq_exec_prepared with
 * --prepared. */
static int stmt(const query_opts *o, PGconn *conn, int64_t timeout_ms,
                tether_error *err) {
    PGresult *r = NULL;
    int rc = o->stmt ? tether_pq_exec_prepared(conn, o->stmt, NULL, timeout_ms,
                                               &r, err)
                     : tether_pq_exec(conn, o->sql, timeout_ms, &r, err);
    PQclear(r);
    return rc;
}

static int work_stmt(void *handle, void *arg, const tether_attempt *a,
                     tether_error *err) {
    qworker *w = arg;
    if (a->number == 1)
        w->work_start = qnow();
    return stmt(w->o, handle, TETHER_PQ_RUN_DEADLINE, err);
}

/* One call in acquire mode with --sql: the acquire within the deadline,
 * the statement within what is left; a lease whose connection broke is
 * discarded. *tw: when the acquire returned. */
static int acquire_stmt(qworker *w, uint64_t t0, uint64_t *tw,
                        tether_error *err) {
    int64_t d = w->o->deadline_ms;
    tether_lease *l;
    int rc = tether_pool_acquire(w->p, d, &l, err);
    *tw = qnow();
    if (rc)
        return rc;
    int64_t left = -1;
    if (d >= 0) {
        left = d - (int64_t)((*tw - t0) / 1000000u);
        left = left < 0 ? 0 : left;
    }
    rc = stmt(w->o, tether_pq_conn(l), left, err);
    if (rc == TETHER_EBROKEN)
        tether_lease_discard(l);
    else
        tether_lease_release(l); /* a timed-out one drains in the background */
    return rc;
}

/* run_ns reads the calling thread's time on a CPU plus waiting for one
 * (schedstat), or 0 when unknown: a call's wall time minus its growth is
 * the time the thread was blocked (in poll, a timed wait, a lock), which
 * the scheduler of a busy machine cannot inflate. */
static uint64_t run_ns(int fd) {
    char buf[96];
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
    unsigned long long cpu, runq;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return sscanf(buf, "%llu %llu", &cpu, &runq) == 2 ? cpu + runq : 0;
}

/* note_late records how late a call that took t0..t1 (run time r0..r1)
 * returned past the deadline. */
static void note_late(qworker *w, uint64_t t0, uint64_t t1, uint64_t r0,
                      uint64_t r1) {
    int64_t d = w->o->deadline_ms * 1000000;
    int64_t late = (int64_t)(t1 - t0) - d;
    if (late > w->max_late_ns)
        w->max_late_ns = late;
    if (!r0 || !r1)
        return;
    int64_t blocked = (int64_t)(t1 - t0) - (int64_t)(r1 - r0) - d;
    if (blocked > w->max_late_blocked_ns)
        w->max_late_blocked_ns = blocked;
}

static void note_error(qworker *w, const tether_error *err) {
    if (w->errors++ == 0)
        snprintf(w->first_error, sizeof(w->first_error), "%s: %s",
                 tether_errname(err->code), err->message);
}

static void *qworker_main(void *arg) {
    qworker *w = arg;
    tether_error err;
    tether_error_clear(&err);
    w->sched_fd = w->o->deadline_ms >= 0 ? open("/proc/thread-self/schedstat",
                                                O_RDONLY | O_CLOEXEC)
                                         : -1;
    int rc = pthread_barrier_wait(&qsync.start);
    (void)rc;
    while (!atomic_load_explicit(&qsync.stop, memory_order_relaxed)) {
        uint64_t r0 = run_ns(w->sched_fd);
        uint64_t t0 = qnow(), tw;
        if (w->o->run_mode) {
            w->work_start = 0;
            rc = tether_pool_run_for(
                w->p,
                TETHER_IDEMPOTENT | (w->o->read_only ? TETHER_READONLY : 0),
                w->o->deadline_ms, w->o->sql ? work_stmt : work_select1, w,
                &err);
            tw = w->work_start; /* 0: the work never started */
        } else if (w->o->sql) {
            rc = acquire_stmt(w, t0, &tw, &err);
        } else {
            tether_lease *l;
            rc = tether_pool_acquire(w->p, -1, &l, &err);
            tw = qnow();
            if (rc == 0) {
                rc = select1(tether_lease_handle(l), &err);
                if (rc == TETHER_EBROKEN)
                    tether_lease_discard(l);
                else
                    tether_lease_release(l);
            }
        }
        uint64_t t1 = qnow();
        if (tw)
            lat_hist_add(&w->wait, tw - t0);
        if (w->o->deadline_ms >= 0)
            note_late(w, t0, t1, r0, run_ns(w->sched_fd));
        if (rc == TETHER_ETIMEDOUT && w->o->sql) {
            w->timeouts++;
            continue;
        }
        if (rc) { /* pause, so that a down server is not spun against */
            note_error(w, &err);
            nanosleep(&(struct timespec){0, 1000000L}, NULL);
            continue;
        }
        lat_hist_add(&w->op, t1 - t0);
        w->ops++;
    }
    if (w->sched_fd >= 0)
        close(w->sched_fd);
    return NULL;
}

/* The application_name of the bench's connections with --read-only, by
 * which the nodes count them. */
#define BENCH_APP "tether-bench-query"

/* conninfo plus tether_pool_min=P tether_pool_max=P (and, read_only, the
 * routing keyword unless the string has it, and the application name), in
 * the string's own form (key=value pairs or a postgresql:// URI). */
static char *pool_conninfo(const char *ci, int pool, int read_only) {
    size_t n = strlen(ci) + 200;
    char *s = malloc(n);
    if (!s)
        return NULL;
    int uri =
        !strncmp(ci, "postgresql://", 13) || !strncmp(ci, "postgres://", 11);
    char sep = uri ? '&' : ' ';
    char route[128] = "";
    if (read_only)
        snprintf(route, sizeof(route), "%capplication_name=" BENCH_APP "%s",
                 sep,
                 strstr(ci, "tether_route")
                     ? ""
                     : (uri ? "&tether_route=read-write-split"
                            : " tether_route=read-write-split"));
    if (uri)
        snprintf(s, n, "%s%ctether_pool_min=%d&tether_pool_max=%d%s", ci,
                 strchr(ci, '?') ? '&' : '?', pool, pool, route);
    else
        snprintf(s, n, "%s tether_pool_min=%d tether_pool_max=%d%s", ci, pool,
                 pool, route);
    return s;
}

/* Acquire all P connections (each checked with a SELECT 1), then release
 * them, so that the window starts with a full, idle pool. */
static int warm_up(tether_pool *p, int pool, tether_error *err) {
    tether_lease **l = calloc((size_t)pool, sizeof(*l));
    int n = 0, rc = l ? 0
                      : tether_error_set(err, TETHER_ENOMEM,
                                         TETHER_CLASS_PERMANENT, NULL);
    while (rc == 0 && n < pool &&
           (rc = tether_pool_acquire(p, 30000, &l[n], err)) == 0) {
        n++;
        rc = select1(tether_lease_handle(l[n - 1]), err);
    }
    for (int i = 0; i < n; i++)
        tether_lease_release(l[i]);
    free(l);
    return rc;
}

typedef struct query_result {
    double secs, ops_per_sec;
    double cpu_us_per_op; /* this process's CPU time (user + system) per op */
    int pool;             /* the pool's max_size as opened */
    uint64_t ops, errors, retries;
    uint64_t timeouts;           /* --sql/--deadline */
    int64_t max_late_ns;         /* the worst return past the deadline */
    int64_t max_late_blocked_ns; /* the same, blocked time only */
    tether_pq_stats stmt;        /* the statement counters over the run */
    uint64_t reads_standby, reads_primary; /* --read-only: routing */
    bench_nodes nodes;                     /* --read-only: per node */
    lat_hist op, wait;
    char first_error[TETHER_MSG_MAX + 32];
} query_result;

static double cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Fills the read side of a routing pool, when its standbys answer (else
 * reads go to the primary: said, not fatal). */
static void warm_read_side(tether_pool *p) {
    tether_pool *r = tether_pool_read_side(p);
    tether_error err;
    tether_error_clear(&err);
    tether_pool_metrics m;
    tether_pool_metrics_get(r, &m); /* NULL: zeros */
    if (r && warm_up(r, m.max_size, &err) != 0)
        fprintf(stderr,
                "tether " CMD ": no standby connection (%s): reads go to "
                "the primary\n",
                err.message[0] ? err.message : tether_strerror(err.code));
}

/* Opens the pool of o->b.pool connections and fills it (its size, which
 * the connection string may cap, in *size); NULL, with the reason printed,
 * when it cannot. */
static tether_pool *open_pool(const query_opts *o, int *size) {
    tether_error err;
    tether_error_clear(&err);
    char *ci = pool_conninfo(o->conninfo, o->b.pool, o->read_only);
    tether_pool *p = NULL;
    int rc = ci ? tether_pool_open(&p, ci, NULL, NULL, &err) : TETHER_ENOMEM;
    free(ci);
    if (rc == 0) {
        tether_pool_metrics m;
        tether_pool_metrics_get(p, &m);
        *size = m.max_size;
        if (*size != o->b.pool) /* tether_pooling=off in the string */
            fprintf(stderr,
                    "tether " CMD ": the pool holds at most %d, not %d\n",
                    *size, o->b.pool);
        rc = warm_up(p, *size, &err);
    }
    if (rc == 0 && o->read_only)
        warm_read_side(p);
    if (rc == 0)
        return p;
    fprintf(stderr, "tether " CMD ": %s\n",
            err.message[0] ? err.message : tether_strerror(rc));
    tether_pool_destroy(p);
    return NULL;
}

/* Starts o->b.threads workers on p; they wait at qsync.start. NULL when out
 * of memory. */
static qworker *start_workers(tether_pool *p, const query_opts *o) {
    size_t n = (size_t)o->b.threads;
    qworker *ws = aligned_alloc(64, sizeof(qworker) * n);
    if (!ws)
        return NULL;
    memset(ws, 0, sizeof(qworker) * n);
    atomic_store(&qsync.stop, 0);
    pthread_barrier_init(&qsync.start, NULL, (unsigned)n + 1);
    for (size_t i = 0; i < n; i++) {
        ws[i].p = p;
        ws[i].o = o;
        if (pthread_create(&ws[i].tid, NULL, qworker_main, &ws[i])) {
            fprintf(stderr, "tether " CMD ": cannot start thread %zu\n", i);
            exit(CLI_FAIL); /* a half-filled barrier cannot be unwound */
        }
    }
    return ws;
}

/* Sleeps ms on CLOCK_MONOTONIC to an absolute end, which a signal does
 * not move. */
static void sleep_ms(int64_t ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL))
        ;
}

/* The timed window: releases the workers, sleeps, stops and joins them.
 * Sets r->secs; returns this process's CPU time in it, in us. */
static double run_window(qworker *ws, const query_opts *o, query_result *r) {
    pthread_barrier_wait(&qsync.start);
    uint64_t t0 = qnow();
    double cpu0 = cpu_us();
    sleep_ms(o->b.seconds_ms);
    uint64_t t1 = qnow();
    atomic_store(&qsync.stop, 1);
    for (size_t i = 0; i < (size_t)o->b.threads; i++)
        pthread_join(ws[i].tid, NULL);
    pthread_barrier_destroy(&qsync.start);
    r->secs = (double)(t1 - t0) / 1e9;
    return cpu_us() - cpu0;
}

/* Adds the n workers' counts and histograms up into r. */
static void collect(const qworker *ws, size_t n, double cpu, query_result *r) {
    for (size_t i = 0; i < n; i++) {
        r->ops += ws[i].ops;
        r->errors += ws[i].errors;
        r->timeouts += ws[i].timeouts;
        if (ws[i].max_late_ns > r->max_late_ns)
            r->max_late_ns = ws[i].max_late_ns;
        if (ws[i].max_late_blocked_ns > r->max_late_blocked_ns)
            r->max_late_blocked_ns = ws[i].max_late_blocked_ns;
        lat_hist_merge(&r->op, &ws[i].op);
        lat_hist_merge(&r->wait, &ws[i].wait);
        if (ws[i].errors && !r->first_error[0])
            memcpy(r->first_error, ws[i].first_error, sizeof(r->first_error));
    }
    r->ops_per_sec = (double)r->ops / r->secs;
    r->cpu_us_per_op = r->ops ? cpu / (double)r->ops : 0;
}

static int run_query(const query_opts *o, query_result *r) {
    memset(r, 0, sizeof(*r));
    tether_pool *p = open_pool(o, &r->pool);
    if (!p)
        return -1;
    tether_pool_metrics m0, m1;
    tether_pq_stats s0, s1;
    tether_pq_stats_get(&s0);
    if (o->read_only && bench_nodes_find(o->conninfo, &r->nodes) == 0)
        bench_nodes_snapshot(&r->nodes, BENCH_APP, 0);
    tether_pool_metrics_get(p, &m0);
    qworker *ws = start_workers(p, o);
    if (!ws) {
        fprintf(stderr, "tether " CMD ": out of memory\n");
        tether_pool_destroy(p);
        return -1;
    }
    double cpu = run_window(ws, o, r);
    tether_pool_metrics_get(p, &m1);
    if (r->nodes.n) /* the bench's backends, still connected */
        bench_nodes_snapshot(&r->nodes, BENCH_APP, 1);
    tether_pool_destroy(p); /* waits for the drains */
    tether_pq_stats_get(&s1);
    r->stmt.timeouts = s1.timeouts - s0.timeouts;
    r->stmt.cancels_sent = s1.cancels_sent - s0.cancels_sent;
    r->stmt.cancels_failed = s1.cancels_failed - s0.cancels_failed;
    r->stmt.reused_after_cancel =
        s1.reused_after_cancel - s0.reused_after_cancel;
    r->stmt.discarded_after_cancel =
        s1.discarded_after_cancel - s0.discarded_after_cancel;
    if (r->nodes.n) { /* the backends are gone: their counts are in */
        sleep_ms(300);
        bench_nodes_snapshot(&r->nodes, BENCH_APP, 2);
    }
    collect(ws, (size_t)o->b.threads, cpu, r);
    r->retries = m1.retries - m0.retries;
    r->reads_standby = m1.reads_standby - m0.reads_standby;
    r->reads_primary = m1.reads_primary - m0.reads_primary;
    free(ws);
    return 0;
}

/* --read-only: where the reads went, by the pool and by each node. */
static void print_nodes(const query_opts *o, const query_result *r) {
    if (o->b.json) {
        printf(",\"read_only\":true,\"reads_standby\":%llu,"
               "\"reads_primary\":%llu,\"nodes\":[",
               (unsigned long long)r->reads_standby,
               (unsigned long long)r->reads_primary);
        for (int i = 0; i < r->nodes.n; i++) {
            const bench_node *n = &r->nodes.node[i];
            printf("%s{\"host\":\"%s\",\"port\":\"%s\",\"up\":%s,"
                   "\"role\":\"%s\",\"xact_commit\":%lld,"
                   "\"backends\":%lld}",
                   i ? "," : "", n->host[0] ? n->host : n->addr, n->port,
                   n->up ? "true" : "false",
                   n->up ? (n->standby ? "standby" : "primary") : "unknown",
                   n->xacts, n->backends);
        }
        printf("]");
        return;
    }
    printf("  routing: %llu reads on a standby, %llu on the primary\n",
           (unsigned long long)r->reads_standby,
           (unsigned long long)r->reads_primary);
    for (int i = 0; i < r->nodes.n; i++) {
        const bench_node *n = &r->nodes.node[i];
        if (!n->up) {
            printf("  node %s:%s: not reached\n",
                   n->host[0] ? n->host : n->addr, n->port);
            continue;
        }
        printf("  node %s:%s (%s): %lld transactions committed "
               "(pg_stat_database), %lld bench backends (pg_stat_activity)\n",
               n->host[0] ? n->host : n->addr, n->port,
               n->standby ? "standby" : "primary", n->xacts, n->backends);
    }
}

/* max_late_ms: the worst return past the deadline (0: none late, or no
 * deadline). */
static double late_ms(const query_opts *o, int64_t late_ns) {
    if (o->deadline_ms < 0 || late_ns <= 0)
        return 0;
    return (double)late_ns / 1e6;
}

static void print_query(const query_opts *o, const query_result *r) {
    const char *mode = o->run_mode ? "run" : "acquire";
    lat_summary op = lat_hist_summary(&r->op, 1000.0);
    lat_summary wait = lat_hist_summary(&r->wait, 1000.0);
    if (o->b.json) {
        printf("{\"bench\":\"query\",\"impl\":\"tether\",\"mode\":\"%s\","
               "\"threads\":%d,\"pool\":%d,\"seconds\":%g,"
               "\"ops\":%llu,\"ops_per_sec\":%.0f,\"p50_us\":%.1f,"
               "\"p99_us\":%.1f,"
               "\"max_us\":%.1f,\"errors\":%llu,\"retries\":%llu,"
               "\"p50_wait_us\":%.1f,\"p99_wait_us\":%.1f,"
               "\"max_wait_us\":%.1f,\"cpu_us_per_op\":%.2f",
               mode, o->b.threads, r->pool, (double)o->b.seconds_ms / 1000.0,
               (unsigned long long)r->ops, r->ops_per_sec, op.p50, op.p99,
               op.max, (unsigned long long)r->errors,
               (unsigned long long)r->retries, wait.p50, wait.p99, wait.max,
               r->cpu_us_per_op);
        printf(",\"timeouts\":%llu,\"cancels_sent\":%llu,"
               "\"cancels_failed\":%llu,\"reused_after_cancel\":%llu,"
               "\"discarded_after_cancel\":%llu,\"max_late_ms\":%.1f,"
               "\"max_late_blocked_ms\":%.1f",
               (unsigned long long)r->timeouts,
               (unsigned long long)r->stmt.cancels_sent,
               (unsigned long long)r->stmt.cancels_failed,
               (unsigned long long)r->stmt.reused_after_cancel,
               (unsigned long long)r->stmt.discarded_after_cancel,
               late_ms(o, r->max_late_ns), late_ms(o, r->max_late_blocked_ns));
        if (o->read_only)
            print_nodes(o, r);
        printf("}\n");
    } else {
        printf("query (tether, mode %s): %d threads, pool %d, %.1f s: "
               "%.0f %s/s (%llu ops)\n",
               mode, o->b.threads, r->pool, r->secs, r->ops_per_sec,
               o->sql ? "statements" : "SELECT 1", (unsigned long long)r->ops);
        printf("  latency (%s): p50 %.1f us, p99 %.1f us, max %.1f us\n",
               o->run_mode ? "tether_pool_run" : "acquire+query+release",
               op.p50, op.p99, op.max);
        printf("  acquire wait: p50 %.1f us, p99 %.1f us, max %.1f us\n",
               wait.p50, wait.p99, wait.max);
        printf("  %llu errors, %llu retries; client CPU %.2f us per op\n",
               (unsigned long long)r->errors, (unsigned long long)r->retries,
               r->cpu_us_per_op);
        if (o->sql)
            printf("  %llu timeouts (worst return %.1f ms past the "
                   "deadline, %.1f ms blocked); %llu cancels sent (%llu "
                   "failed); after a cancel %llu connections reused, %llu "
                   "closed\n",
                   (unsigned long long)r->timeouts, late_ms(o, r->max_late_ns),
                   late_ms(o, r->max_late_blocked_ns),
                   (unsigned long long)r->stmt.cancels_sent,
                   (unsigned long long)r->stmt.cancels_failed,
                   (unsigned long long)r->stmt.reused_after_cancel,
                   (unsigned long long)r->stmt.discarded_after_cancel);
        if (o->read_only)
            print_nodes(o, r);
    }
    if (r->errors)
        fprintf(stderr, "tether " CMD ": first error: %s\n", r->first_error);
    fflush(stdout);
}

static void query_usage(FILE *f) {
    fprintf(f,
            "usage: tether bench query --conninfo C [--threads T] [--pool P] "
            "[--seconds S]\n"
            "                          [--mode run|acquire] [--read-only] "
            "[--json]\n\n"
            "SELECT 1 through a tether pool against PostgreSQL: T threads "
            "(default 8)\nloop acquire, SELECT 1, release on a pool of P "
            "connections (default 8)\nfor S seconds (default 5). The pool "
            "size is appended to C as\ntether_pool_min=P tether_pool_max=P; "
            "the pool is filled before timing.\n\n"
            "  --mode run      tether_pool_run with a SELECT 1 work function "
            "(default);\n"
            "                  wait = call to start of the work function\n"
            "  --mode acquire  tether_pool_acquire + PQexec + "
            "tether_lease_release;\n"
            "                  wait = the acquire call\n"
            "  --read-only     run the work as TETHER_READONLY through "
            "read/write routing\n"
            "                  (tether_route=read-write-split appended): "
            "reads go to the\n"
            "                  standbys; prints the reads per side and, per "
            "node of C,\n"
            "                  its role, transactions committed "
            "(pg_stat_database) and\n"
            "                  the bench's backends (pg_stat_activity)\n"
            "  --sql TEXT      run TEXT instead of SELECT 1, with "
            "tether_pq_exec\n"
            "  --deadline D    each call (acquire, statement, release) within "
            "D (500ms,\n"
            "                  2s); a statement past it is cancelled in the "
            "background\n"
            "                  (implies --sql 'SELECT 1' when --sql is not "
            "given)\n"
            "  --prepared      run the statement as a declared one "
            "(tether_pq_declare,\n"
            "                  tether_pq_exec_prepared): each connection "
            "prepares it once,\n"
            "                  in the round trip of its first execute\n\n"
            "Prints ops/s, per-operation latency p50/p99/max and acquire "
            "wait in\nmicroseconds, errors, retries (tether_pool_run's) and "
            "this process's CPU time\nper operation. Side by side with the "
            "peers: bench/run-query.\nAlso timeouts (calls the deadline "
            "ended; not errors), max_late_ms (the\nworst return past the "
            "deadline), max_late_blocked_ms (the same counting only time the "
            "thread\nwas blocked, not time it waited for a CPU: "
            "/proc/thread-self/schedstat),\ncancels_sent, cancels_failed, "
            "reused_after_cancel and discarded_after_cancel\n"
            "(docs/statements.md).\n");
}

enum {
    OPT_CONNINFO = BENCH_OPT_OWN,
    OPT_MODE,
    OPT_READ_ONLY,
    OPT_SQL,
    OPT_DEADLINE,
    OPT_PREPARED
};

static const struct option query_opts_table[] = {
    BENCH_OPTIONS,
    {"conninfo", required_argument, NULL, OPT_CONNINFO},
    {"mode", required_argument, NULL, OPT_MODE},
    {"read-only", no_argument, NULL, OPT_READ_ONLY},
    {"sql", required_argument, NULL, OPT_SQL},
    {"deadline", required_argument, NULL, OPT_DEADLINE},
    {"prepared", no_argument, NULL, OPT_PREPARED},
    {NULL, 0, NULL, 0}};

/* The options with a word for a value: --conninfo, --mode, --sql,
 * --deadline. */
static int take_text(query_opts *o, int opt, const char *v) {
    if (opt == OPT_CONNINFO) {
        if (!*v)
            return cli_usage_error(CMD, "--conninfo must not be empty");
        o->conninfo = v;
    } else if (opt == OPT_SQL) {
        if (!*v)
            return cli_usage_error(CMD, "--sql must not be empty");
        o->sql = v;
    } else if (opt == OPT_DEADLINE) {
        if (tether_duration_parse(v, &o->deadline_ms) != 0 ||
            o->deadline_ms <= 0)
            return cli_usage_error(CMD,
                                   "bad value '%s' for --deadline: want a "
                                   "duration such as 200ms or 2s",
                                   v);
        if (!o->sql)
            o->sql = "SELECT 1";
    } else if (!strcmp(v, "run") || !strcmp(v, "acquire")) {
        o->run_mode = !strcmp(v, "run");
    } else {
        return cli_usage_error(CMD,
                               "bad value '%s' for --mode: want run or "
                               "acquire",
                               v);
    }
    return 0;
}

/* cli_opt_fn of bench query: its own options and the shared ones. */
static int take_opt(void *ctx, int opt, const char *v) {
    query_opts *o = ctx;
    if (opt == OPT_CONNINFO || opt == OPT_MODE || opt == OPT_SQL ||
        opt == OPT_DEADLINE)
        return take_text(o, opt, v);
    if (opt == OPT_READ_ONLY || opt == OPT_PREPARED) {
        *(opt == OPT_READ_ONLY ? &o->read_only : &o->prepared) = 1;
        return 0;
    }
    return tether__bench_take_opt(CMD, &o->b, opt, v);
}

/* declare makes --sql (SELECT 1 without it) a declared statement. */
static int declare(query_opts *o) {
    tether_error err;
    if (!o->sql)
        o->sql = "SELECT 1";
    if (tether_pq_declare("bench", o->sql, 0, NULL, &o->stmt, &err) == 0)
        return 0;
    fprintf(stderr, "tether " CMD ": --prepared: %s\n", err.message);
    return -1;
}

/* argv[0] is "query"; the options follow. */
int tether__lab_bench_query(int argc, char **argv) {
    if (cli_want_help(argc, argv)) {
        query_usage(stdout);
        return CLI_OK;
    }
    query_opts o = {{8, 8, 5000, 0}, NULL, 1, 0, NULL, 0, NULL, -1};
    if (cli_parse_opts(CMD, argc, argv, query_opts_table, take_opt, &o))
        return CLI_USAGE;
    if (!o.conninfo)
        return cli_usage_error(CMD, "--conninfo is required");
    if (o.read_only && !o.run_mode)
        return cli_usage_error(CMD, "--read-only needs --mode run (routing "
                                    "is tether_pool_run's)");
    if (o.prepared && declare(&o) != 0)
        return CLI_FAIL;
    query_result *r = malloc(sizeof(*r));
    if (!r || run_query(&o, r)) {
        tether_pq_stmt_destroy(o.stmt);
        if (r)
            bench_nodes_free(&r->nodes);
        free(r);
        return CLI_FAIL;
    }
    print_query(&o, r);
    int rc = r->ops == 0 && r->timeouts == 0 ? CLI_FAIL : CLI_OK;
    tether_pq_stmt_destroy(o.stmt);
    bench_nodes_free(&r->nodes);
    free(r);
    return rc;
}
