/* demo.c - `tether demo`: a scratch primary and streaming standby, one
 * pool under a live workload, and the database failing on a schedule
 * (faults.h). Live progress on stderr; the closing report (text, or with
 * --json one JSON object) on stdout; --svg FILE draws the timeline.
 *
 * The workload: T threads (default 16) on a pool of P (default 8), each
 * statement through tether_pool_run: reads and value-setting updates of a
 * small table (idempotent: retried across faults), and inserts of unique
 * ids (not idempotent: retried only when they surely never reached the
 * server). At the end the inserts are counted in the database: an id
 * there twice is a duplicate, an acknowledged id not there is missing.
 *
 * Beside it, a job worker with a pool of its own, as a real service runs
 * one (docs/failures.md, "A real service's mix"): JOB_THREADS threads on
 * JOB_POOL connections, each job a transaction of several statements on
 * one lease (not idempotent) within a deadline of 1-3 s
 * (tether_pool_run_for), counted in the database at the end like the
 * inserts; and after each fault, writes must be back in both pools within
 * check_writes_back_ms() of the later of the server's return and the end of
 * the breaker's period in force then (demo_check.c). */
#include "cli.h"
#include "demo.h"
#include "lab.h"
#include "tether_pq.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define CMD "demo"
#define MAX_SECONDS 3600
#define STMT_TIMEOUT_MS 3000    /* a statement's own bound within its attempt */
#define CONNECT_TIMEOUT_MS 2000 /* the pools' connect_timeout (open_pool) */
/* Each call's limit (tether_pool_run_for): the pool's default run()
 * deadline, its acquire timeout; a return later, less the time the thread
 * waited for a CPU meanwhile, is an overrun (check_took). */
#define RUN_LIMIT_MS 15000
#define APP "tether-demo" /* the pool's application_name */
#define JOBS_APP "tether-demo-jobs"
#define JOB_THREADS 8   /* the job worker's threads ... */
#define JOB_POOL 4      /* ... on a pool of its own */
#define JOB_MIN_MS 1000 /* each job's deadline: 1-3 s */
#define JOB_MAX_MS 3000
#define SERVER_SLOTS 17 /* pg-cluster: max_connections less the reserved */
/* How long after the server's return the fault thread waits for writes to
 * be back in both pools before it judges them and goes on. */
#define WRITES_BACK_WAIT_MS 30000

typedef struct demo_opts {
    int threads, pool;
    int64_t seconds_ms;
    int json, faults, chaos;
    uint64_t seed;
    const char *svg;
    const char *retry; /* tether_retry spec; NULL: the pool's default */
    const char *admin; /* --admin-socket: tether_admin_start's path */
} demo_opts;

static struct demo {
    demo_opts o;
    fault_cluster cl;
    tether_pool *pool;
    tether_pool *jobs; /* the job worker's pool */
    pool_watch watch[DEMO_POOLS];
    int64_t t0_ns;
    atomic_int stop;
    pthread_mutex_t lock; /* secs */
    sec_stats *secs;
    int nsecs;
    fault_rec faults[FAULT_MAX_EVENTS];
    int nfaults;
    atomic_int cur_fault;  /* index of the last fault begun, -1: none */
    atomic_int late_fault; /* the last one whose writes were not back when
                              the next began, -1: none */
    atomic_uint_fast64_t ops, app_errors, write_failures, writes_acked;
    atomic_uint_fast64_t jobs_ok, jobs_failed, jobs_unsent;
    char first_error[TETHER_MSG_MAX];
    char first_overrun[TETHER_MSG_MAX + 80]; /* the first call over its
                                                limit: which, and why */
    int tty;
    char settings[300]; /* the pool's connection-string settings */
    char jobs_settings[300];
    atomic_int fault_busy; /* a fault is being done, held or recovered */
    atomic_int_fast64_t calm_since; /* when the last one was over */
    check_report chk;
    uint64_t accounting_checks;
} D;

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
    interrupted = sig;
    atomic_store(&D.stop, 1);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec - D.t0_ns) / 1000000;
}

/* Sleep until ms on the run's clock, or the stop flag; returns 0 then. */
static int sleep_until(int64_t ms) {
    while (!atomic_load(&D.stop)) {
        int64_t left = ms - now_ms();
        if (left <= 0)
            return 1;
        struct timespec ts = {0, (left > 100 ? 100 : left) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* ---- the work ------------------------------------------------------------ */

typedef struct stmt {
    const char *sql;
    int nparams;
    char p[2][24];
} stmt;

/* The attempt's end: its time, at most STMT_TIMEOUT_MS, from now. */
static int64_t attempt_until(const tether_attempt *a) {
    int64_t limit = a->timeout_ms >= 0 && a->timeout_ms < STMT_TIMEOUT_MS
                        ? a->timeout_ms
                        : STMT_TIMEOUT_MS;
    return now_ms() + limit;
}

/* Run s on conn until the run clock reads until: sent without blocking,
 * its result awaited with poll. A statement that runs out of time leaves
 * the session busy: the pool discards the connection (its reset finds a
 * query in flight). */
static int run_stmt(PGconn *conn, const stmt *s, int64_t until,
                    tether_error *err) {
    const char *vals[2] = {s->p[0], s->p[1]};
    if (!PQsendQueryParams(conn, s->sql, s->nparams, NULL, vals, NULL, NULL, 0))
        return tether_pq_error(conn, NULL, err);
    while (PQisBusy(conn)) {
        int64_t left = until - now_ms();
        struct pollfd pfd = {PQsocket(conn), POLLIN, 0};
        if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
            return tether_error_set(err, TETHER_ETIMEDOUT,
                                    TETHER_CLASS_TRANSIENT,
                                    "statement ran past its bound");
        if (!PQconsumeInput(conn))
            return tether_pq_error(conn, NULL, err);
    }
    int rc = 0;
    PGresult *r;
    while ((r = PQgetResult(conn)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        if (rc == 0 && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
            rc = tether_pq_error(conn, r, err);
        PQclear(r);
    }
    return rc;
}

static int work(void *conn, void *arg, const tether_attempt *a,
                tether_error *err) {
    check_hold(conn);
    int rc = run_stmt(conn, arg, attempt_until(a), err);
    check_unhold(conn);
    return rc;
}

/* ---- the job worker's transactions --------------------------------------- */

/* One job: a transaction of several statements on one lease, within the
 * caller's deadline. Its rows: one in demo_job (steps 2 once committed)
 * and one in demo_job_item; count_jobs finds a job half applied, twice,
 * or acknowledged and missing. */
typedef struct job {
    uint64_t id;
    unsigned kv;      /* a demo_kv row it reads */
    int64_t until_ms; /* the caller's deadline on the run clock */
} job;

/* The job's statements, each with its one parameter: 'i' the job's id,
 * 'k' the demo_kv row, 0 none. */
static const struct {
    const char *sql;
    char param;
} job_steps[] = {
    {"BEGIN", 0},
    {"INSERT INTO demo_job (job_id, steps) VALUES ($1, 1)", 'i'},
    {"SELECT v FROM demo_kv WHERE id = $1", 'k'},
    {"UPDATE demo_job SET steps = steps + 1 WHERE job_id = $1", 'i'},
    {"INSERT INTO demo_job_item (job_id) VALUES ($1)", 'i'},
    {"COMMIT", 0},
};

static int job_work(void *conn, void *arg, const tether_attempt *a,
                    tether_error *err) {
    const job *j = arg;
    int64_t until = attempt_until(a);
    if (j->until_ms < until)
        until = j->until_ms;
    check_hold(conn);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(job_steps) / sizeof(*job_steps);
         i++) {
        stmt s = {job_steps[i].sql, job_steps[i].param != 0, {"", ""}};
        if (job_steps[i].param == 'i')
            snprintf(s.p[0], sizeof(s.p[0]), "%llu", (unsigned long long)j->id);
        else if (job_steps[i].param == 'k')
            snprintf(s.p[0], sizeof(s.p[0]), "%u", j->kv);
        rc = run_stmt(conn, &s, until, err);
    }
    check_unhold(conn);
    return rc;
}

/* ---- the workers --------------------------------------------------------- */

typedef struct worker {
    int index;
    int job; /* one of the job worker's threads */
    uint64_t seed, seq;
    FILE *acked; /* ids of acknowledged inserts (a temporary file) */
    size_t nacked;
    pthread_t th;
} worker;

static uint64_t rnd(worker *w) {
    w->seed ^= w->seed << 13;
    w->seed ^= w->seed >> 7;
    w->seed ^= w->seed << 17;
    return w->seed;
}

/* Keep the id of an acknowledged insert: in a temporary file, so that the
 * demo's own bookkeeping does not grow the memory the soak measures. */
static void note_ack(worker *w, uint64_t id) {
    if (w->acked && fwrite(&id, sizeof(id), 1, w->acked) == 1)
        w->nacked++;
}

/* Note a write (an insert, an update, a job) of pool k done at t_end: the
 * first at or after the current fault's server came back. */
static void note_write_after(int f, int k, int64_t t_end) {
    if (f < 0)
        return;
    fault_rec *fr = &D.faults[f];
    int64_t back = atomic_load(&fr->back_ms);
    if (!back || t_end < back || atomic_load(&fr->wb[k].first_write_ms))
        return;
    int_fast64_t zero = 0;
    atomic_compare_exchange_strong(&fr->wb[k].first_write_ms, &zero, t_end);
}

static void note_write(int k, int64_t t_end) {
    note_write_after(atomic_load(&D.cur_fault), k, t_end);
    note_write_after(atomic_load(&D.late_fault), k, t_end);
}

/* Account one finished statement started at t_start. */
static void account(int64_t t_start, int64_t t_end, int ok, int idempotent,
                    const tether_error *err) {
    int f = atomic_load(&D.cur_fault);
    fault_rec *fr = f >= 0 ? &D.faults[f] : NULL;
    int64_t inforce = fr ? atomic_load(&fr->inforce_ms) : 0;
    if (ok && inforce && t_start >= inforce) {
        int_fast64_t zero = 0;
        atomic_compare_exchange_strong(&fr->first_ok_ms, &zero, t_end);
    }
    if (!ok && fr) {
        if (idempotent)
            atomic_fetch_add(&fr->app_errors, 1);
        else
            atomic_fetch_add(&fr->write_failures, 1);
    }
    if (ok)
        atomic_fetch_add(&D.ops, 1);
    else if (idempotent)
        atomic_fetch_add(&D.app_errors, 1);
    else
        atomic_fetch_add(&D.write_failures, 1);
    int s = (int)(t_end / 1000);
    pthread_mutex_lock(&D.lock);
    if (s < D.nsecs) {
        sec_stats *ss = &D.secs[s];
        if (ok) {
            ss->ops++;
            lat_hist_add(&ss->lat, (uint64_t)(t_end - t_start) * 1000000u);
        } else if (idempotent) {
            ss->app_errors++;
        } else {
            ss->write_failures++;
        }
    }
    if (!ok && idempotent && !D.first_error[0])
        snprintf(D.first_error, sizeof(D.first_error), "%s", err->message);
    pthread_mutex_unlock(&D.lock);
}

/* Note the first call (a job or not) that the library kept past its limit
 * by more than the slack (over: check_took's): what it returned. */
static void note_overrun(int is_job, int64_t over, int64_t took, int64_t limit,
                         int rc, const tether_error *err) {
    if (over <= check_overrun_slack_ms())
        return;
    pthread_mutex_lock(&D.lock);
    if (!D.first_overrun[0])
        snprintf(D.first_overrun, sizeof(D.first_overrun),
                 "%s of %lld ms took %lld ms: %s%s%s",
                 is_job ? "a job" : "a call", (long long)limit, (long long)took,
                 rc ? tether_errname(rc) : "ok", rc ? ": " : "",
                 rc ? err->message : "");
    pthread_mutex_unlock(&D.lock);
}

/* One job of the job worker: returns 0, or -1 once the pool is closed. */
static int run_job(worker *w) {
    int64_t limit =
        JOB_MIN_MS + (int64_t)(rnd(w) % (JOB_MAX_MS - JOB_MIN_MS + 1));
    int64_t t = now_ms(), q = check_cpu_wait_ms();
    job j = {((uint64_t)(w->index + 1) << 32) | ++w->seq,
             (unsigned)(rnd(w) % 1000) + 1, t + limit};
    tether_error err;
    int rc = tether_pool_run_for(D.jobs, 0, limit, job_work, &j, &err);
    int64_t end = now_ms();
    if (atomic_load(&D.stop) && rc == TETHER_ECLOSED)
        return -1;
    int64_t over = check_took(end - t, check_cpu_wait_ms() - q, limit);
    note_overrun(1, over, end - t, limit, rc, &err);
    if (rc == 0) {
        note_ack(w, j.id);
        atomic_fetch_add(&D.jobs_ok, 1);
        note_write(POOL_JOBS, end);
        return 0;
    }
    atomic_fetch_add(err.not_sent ? &D.jobs_unsent : &D.jobs_failed, 1);
    int f = atomic_load(&D.cur_fault);
    if (f >= 0)
        atomic_fetch_add(&D.faults[f].job_failures, 1);
    return 0;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    while (w->job && !atomic_load(&D.stop))
        if (run_job(w) != 0)
            return NULL;
    while (!w->job && !atomic_load(&D.stop)) {
        stmt s = {0};
        unsigned pick = (unsigned)(rnd(w) % 100);
        unsigned flags = TETHER_IDEMPOTENT;
        uint64_t id = 0;
        snprintf(s.p[0], sizeof(s.p[0]), "%u", (unsigned)(rnd(w) % 1000) + 1);
        if (pick < 60) {
            s.sql = "SELECT v FROM demo_kv WHERE id = $1";
            s.nparams = 1;
        } else if (pick < 85) {
            s.sql = "UPDATE demo_kv SET v = $2 WHERE id = $1";
            s.nparams = 2;
            snprintf(s.p[1], sizeof(s.p[1]), "%u", (unsigned)rnd(w) % 100000);
        } else {
            id = ((uint64_t)(w->index + 1) << 32) | ++w->seq;
            s.sql = "INSERT INTO demo_once (op_id) VALUES ($1)";
            s.nparams = 1;
            snprintf(s.p[0], sizeof(s.p[0]), "%llu", (unsigned long long)id);
            flags = 0; /* not idempotent */
        }
        tether_error err;
        int64_t t = now_ms(), q = check_cpu_wait_ms();
        int rc =
            tether_pool_run_for(D.pool, flags, RUN_LIMIT_MS, work, &s, &err);
        int64_t end = now_ms();
        if (rc == 0 && id) {
            note_ack(w, id);
            atomic_fetch_add(&D.writes_acked, 1);
        }
        if (atomic_load(&D.stop) && rc == TETHER_ECLOSED)
            break;
        if (rc == 0 && pick >= 60)
            note_write(POOL_APP, end);
        int64_t over =
            check_took(end - t, check_cpu_wait_ms() - q, RUN_LIMIT_MS);
        note_overrun(0, over, end - t, RUN_LIMIT_MS, rc, &err);
        if (rc != 0 && flags)
            check_failed(t, end, RUN_LIMIT_MS);
        account(t, end, rc == 0, flags != 0, &err);
    }
    return NULL;
}

/* ---- schema and the final count ------------------------------------------ */

static int setup_schema(char *why, size_t n) {
    static stmt ddl[] = {
        {"DROP TABLE IF EXISTS demo_kv, demo_once, demo_job, demo_job_item",
         0,
         {"", ""}},
        {"CREATE TABLE demo_kv (id int PRIMARY KEY, v bigint NOT NULL)",
         0,
         {"", ""}},
        {"INSERT INTO demo_kv SELECT g, 0 FROM generate_series(1, 1000) g",
         0,
         {"", ""}},
        /* no unique key: a duplicate must be countable */
        {"CREATE TABLE demo_once (op_id bigint NOT NULL)", 0, {"", ""}},
        {"CREATE TABLE demo_job (job_id bigint NOT NULL, steps int NOT NULL)",
         0,
         {"", ""}},
        {"CREATE INDEX ON demo_job (job_id)", 0, {"", ""}},
        {"CREATE TABLE demo_job_item (job_id bigint NOT NULL)", 0, {"", ""}},
    };
    for (size_t i = 0; i < sizeof(ddl) / sizeof(ddl[0]); i++) {
        tether_error err;
        if (tether_pool_run(D.pool, TETHER_IDEMPOTENT, work, &ddl[i], &err)) {
            snprintf(why, n, "creating the schema: %s", err.message);
            return -1;
        }
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct once_count {
    int64_t rows, duplicates, missing, checked;
    int64_t partial; /* jobs: half applied */
} once_count;

/* The check's own connection to the writable node. */
static PGconn *check_connect(void) {
    char ci[1024];
    fault_cluster_conninfo(&D.cl, 0, "tether-demo-check",
                           "target_session_attrs=read-write connect_timeout=10",
                           ci, sizeof(ci));
    return PQconnectdb(ci);
}

/* The acknowledged ids of the workers whose job flag is jobs, sorted, in
 * *k; NULL when out of memory. */
static uint64_t *load_acked(worker *ws, int nw, int jobs, size_t *k) {
    size_t total = 0;
    for (int i = 0; i < nw; i++)
        total += ws[i].job == jobs ? ws[i].nacked : 0;
    uint64_t *acked = malloc((total + 1) * sizeof(*acked));
    *k = 0;
    for (int i = 0; acked && i < nw; i++) {
        if (ws[i].job != jobs)
            continue;
        rewind(ws[i].acked);
        *k += fread(acked + *k, sizeof(*acked), ws[i].nacked, ws[i].acked);
    }
    if (acked)
        qsort(acked, *k, sizeof(*acked), cmp_u64);
    return acked;
}

/* Run a counting query q on the check connection; NULL with why filled. */
static PGresult *count_query(PGconn *c, const char *q, char *why, size_t n) {
    PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, q) : NULL;
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK)
        return r;
    snprintf(why, n, "counting the writes: %s", PQerrorMessage(c));
    PQclear(r);
    return NULL;
}

/* Walk the rows of r (id first, sorted) against the acknowledged ids:
 * an acknowledged id absent, or present with present(row) 0, is missing. */
static void match_acked(PGresult *r, const uint64_t *acked, size_t k,
                        once_count *oc, int (*present)(PGresult *, int)) {
    size_t a = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        uint64_t id = strtoull(PQgetvalue(r, i, 0), NULL, 10);
        while (a < k && acked[a] < id)
            oc->missing++, a++; /* acknowledged, not in the table */
        if (a < k && acked[a] == id)
            oc->missing += !present(r, i), a++;
    }
    oc->missing += (int64_t)(k - a);
    oc->checked = (int64_t)k;
}

static int once_present(PGresult *r, int i) {
    (void)r, (void)i;
    return 1;
}

/* Count the inserts in the database against the acknowledged ids. */
static int count_once(PGconn *c, worker *ws, int nw, once_count *oc, char *why,
                      size_t n) {
    memset(oc, 0, sizeof(*oc));
    PGresult *r = count_query(c,
                              "SELECT op_id, count(*) FROM demo_once GROUP BY "
                              "op_id ORDER BY op_id",
                              why, n);
    if (!r)
        return -1;
    for (int i = 0; i < PQntuples(r); i++) {
        int64_t cnt = strtoll(PQgetvalue(r, i, 1), NULL, 10);
        oc->rows += cnt;
        oc->duplicates += cnt > 1 ? cnt - 1 : 0;
    }
    size_t k;
    uint64_t *acked = load_acked(ws, nw, 0, &k);
    if (acked)
        match_acked(r, acked, k, oc, once_present);
    free(acked);
    PQclear(r);
    return acked ? 0 : (snprintf(why, n, "out of memory"), -1);
}

/* A job's row: job_id, its demo_job rows, their least and most steps, its
 * demo_job_item rows. Applied: one of each, steps 2. */
static int64_t col(PGresult *r, int i, int j) {
    return strtoll(PQgetvalue(r, i, j), NULL, 10);
}

static int job_present(PGresult *r, int i) {
    return col(r, i, 1) > 0;
}

/* Count the jobs in the database: duplicates (a job's rows twice), half
 * applied (its rows not all there, or its update lost), missing (an
 * acknowledged job not there). */
static int count_jobs(PGconn *c, worker *ws, int nw, once_count *oc, char *why,
                      size_t n) {
    memset(oc, 0, sizeof(*oc));
    /* One aggregate over both tables, not a join of two: after a failover
     * the new primary has no statistics, and a 10-minute soak's full join
     * was planned at two billion rows and ran for minutes. */
    PGresult *r = count_query(
        c,
        "SELECT job_id, sum(jn), coalesce(min(steps), 0), "
        "coalesce(max(steps), 0), sum(itn) FROM (SELECT job_id, 1 AS jn, "
        "steps, 0 AS itn FROM demo_job UNION ALL SELECT job_id, 0, NULL, 1 "
        "FROM demo_job_item) x GROUP BY job_id ORDER BY job_id",
        why, n);
    if (!r)
        return -1;
    for (int i = 0; i < PQntuples(r); i++) {
        int64_t jobs = col(r, i, 1), items = col(r, i, 4);
        oc->rows += jobs > items ? jobs : items;
        oc->duplicates +=
            (jobs > 1 ? jobs - 1 : 0) + (items > 1 ? items - 1 : 0);
        oc->partial += jobs != items || col(r, i, 2) != 2 || col(r, i, 3) != 2;
    }
    size_t k;
    uint64_t *acked = load_acked(ws, nw, 1, &k);
    if (acked)
        match_acked(r, acked, k, oc, job_present);
    free(acked);
    PQclear(r);
    return acked ? 0 : (snprintf(why, n, "out of memory"), -1);
}

/* ---- the fault thread ---------------------------------------------------- */

static void announce(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void announce(const char *fmt, ...) {
    char line[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    int64_t t = now_ms();
    fprintf(stderr, "%s[%3lld.%01llds] %s\n", D.tty ? "\r\033[K" : "",
            (long long)(t / 1000), (long long)(t % 1000 / 100), line);
}

/* Wait until the fault fr has seen its first success (each fault's
 * recovery is its own: the next waits for it), at most RECOVERY_WAIT_MS. */
#define RECOVERY_WAIT_MS 15000
static int wait_recovered(const fault_rec *fr) {
    int64_t until = now_ms() + RECOVERY_WAIT_MS;
    while (!atomic_load(&fr->first_ok_ms) && now_ms() < until)
        if (!sleep_until(now_ms() + 20))
            return 0;
    return 1;
}

/* The server is back for fr now: the breakers' state then, and the start
 * of the writes-back clock. */
static void start_back(fault_rec *fr) {
    int64_t t = now_ms();
    for (int k = 0; k < DEMO_POOLS; k++)
        check_back_start(&fr->wb[k], &D.watch[k], t);
    atomic_store(&fr->back_ms, t);
}

/* A blackhole's connections stay silent for good: the server is back for
 * them only at the end of the bound of the statements it caught, and of
 * the connects it caught (a connect begun just before it lifted ends at its
 * connect_timeout), so its writes-back clock starts then if later
 * (docs/failures.md, "Writes back after a fault"). */
static int64_t back_not_before(const fault_rec *fr) {
    if (fr->e.kind != FAULT_BLACKHOLE)
        return 0;
    int64_t stmts = fr->inforce_ms + STMT_TIMEOUT_MS;
    int64_t lifted = atomic_load(&fr->lifted_ms);
    /* and a moment for the failure of a connect caught to be recorded */
    int64_t connects = lifted ? lifted + CONNECT_TIMEOUT_MS + 200 : stmts;
    return stmts > connects ? stmts : connects;
}

/* fault_end's call the moment the server is back. */
static void on_server_back(void *ctx) {
    (void)ctx;
    int f = atomic_load(&D.cur_fault);
    if (f < 0)
        return;
    atomic_store(&D.faults[f].lifted_ms, now_ms());
    if (now_ms() >= back_not_before(&D.faults[f]))
        start_back(&D.faults[f]);
}

static int writes_all_back(const fault_rec *fr) {
    for (int k = 0; k < DEMO_POOLS; k++)
        if (!atomic_load(&fr->wb[k].first_write_ms))
            return 0;
    return 1;
}

/* Judge whether writes came back in time after fr (at now_ms). */
static void judge_back(fault_rec *fr, int64_t now) {
    int64_t back = atomic_load(&fr->back_ms);
    if (!back || fr->back_judged)
        return;
    fr->back_judged = 1;
    for (int k = 0; k < DEMO_POOLS; k++) {
        fault_back *b = &fr->wb[k];
        check_back_judge(b, back, now);
        int64_t w = atomic_load(&b->first_write_ms);
        if (b->breach)
            announce("check: %s: writes of the %s pool %s %lld ms after the "
                     "server's return, allowed %lld (breaker %s then)",
                     fault_kind_name(fr->e.kind), D.watch[k].name,
                     w ? "back" : "not back", (long long)((w ? w : now) - back),
                     (long long)check_back_allowance_ms(b, back),
                     tether_breaker_state_name(b->state));
    }
}

/* Whether every pool's writes after fr are back, or late already. */
static int writes_back_due(fault_rec *fr, int64_t now) {
    int64_t back = atomic_load(&fr->back_ms);
    int due = 1;
    for (int k = 0; k < DEMO_POOLS; k++) {
        check_back_caught(&fr->wb[k], &D.watch[k], now);
        due &= check_back_due(&fr->wb[k], back, now);
    }
    return due;
}

/* Wait until writes are back in every pool after fr's server returned,
 * or late, then judge them. The soak waits up to WRITES_BACK_WAIT_MS; the
 * demo keeps its schedule and waits until the next fault is due (until_ms):
 * what is not decided by then is not judged (a fault in force would move
 * the figure). Writes still not back are looked for during the faults
 * that follow (late_fault). Returns 0 on stop. */
static int wait_writes_back(fault_rec *fr, int64_t until_ms) {
    if (fr->e.kind == FAULT_BLACKHOLE && !atomic_load(&fr->back_ms)) {
        if (!sleep_until(back_not_before(fr)))
            return 0;
        start_back(fr);
    }
    int64_t back = atomic_load(&fr->back_ms);
    if (!back)
        return 1; /* the server was not brought back: nothing to judge */
    if (D.o.chaos || !until_ms || until_ms > back + WRITES_BACK_WAIT_MS)
        until_ms = back + WRITES_BACK_WAIT_MS;
    if (until_ms < back + 2 * check_writes_back_ms()) /* the quick ones */
        until_ms = back + 2 * check_writes_back_ms();
    while (!writes_back_due(fr, now_ms()) && now_ms() < until_ms)
        if (!sleep_until(now_ms() + 10))
            return 0;
    judge_back(fr, now_ms());
    if (!writes_all_back(fr))
        atomic_store(&D.late_fault, (int)(fr - D.faults));
    return 1;
}

static void *fault_main(void *arg) {
    (void)arg;
    int64_t not_before = 0, prev_end = 0;
    for (int i = 0; i < D.nfaults; i++) {
        fault_rec *fr = &D.faults[i];
        int64_t at = fr->e.at_ms > not_before ? fr->e.at_ms : not_before;
        if (D.o.chaos && i > 0) /* the schedule's gap after the last one */
            at = not_before + (fr->e.at_ms - prev_end);
        prev_end = fr->e.at_ms + fr->e.hold_ms;
        if (at + 2000 > D.o.seconds_ms) {
            if (!D.o.chaos)
                announce("fault: %s: no time left in the run: skipped",
                         fault_kind_name(fr->e.kind));
            continue;
        }
        if (!sleep_until(at))
            return NULL;
        atomic_store(&D.fault_busy, 1);
        fr->start_ms = now_ms();
        atomic_store(&D.cur_fault, i);
        announce("fault: %s", fault_kind_name(fr->e.kind));
        fr->applied =
            fault_begin(&D.cl, &fr->e, fr->detail, sizeof(fr->detail)) == 0;
        atomic_store(&fr->inforce_ms, now_ms());
        announce("fault: %s in force after %lld ms: %s%s",
                 fault_kind_name(fr->e.kind),
                 (long long)(fr->inforce_ms - fr->start_ms),
                 fr->applied ? "" : "not done: ", fr->detail);
        if (!fr->applied) {
            atomic_store(&D.calm_since, now_ms());
            atomic_store(&D.fault_busy, 0);
            continue;
        }
        if (fr->e.hold_ms)
            sleep_until(fr->inforce_ms + fr->e.hold_ms);
        char detail[200];
        int ended = fault_end(&D.cl, &fr->e, detail, sizeof(detail)) == 0;
        if (!ended)
            announce("fault: %s: ending it failed: %s",
                     fault_kind_name(fr->e.kind), detail);
        else if (fr->e.kind != FAULT_TERMINATE)
            announce("fault: %s ends%s", fault_kind_name(fr->e.kind),
                     fr->e.kind == FAULT_FAILOVER ? ": standby promoted" : "");
        int64_t next = i + 1 < D.nfaults ? D.faults[i + 1].e.at_ms : 0;
        if (!wait_recovered(fr) || (ended && !wait_writes_back(fr, next)))
            return NULL;
        atomic_store(&D.calm_since, now_ms());
        atomic_store(&D.fault_busy, 0);
        not_before = now_ms() + (D.o.chaos ? 0 : 500);
    }
    return NULL;
}

/* ---- progress ------------------------------------------------------------ */

/* Compare the pool's count with the server's once no fault has been in
 * the air for 1 s: the server must not hold more of the pool's sessions
 * than the pool has open or opening. An excess is looked at again 300 ms
 * later (a terminated backend may linger in pg_stat_activity for a
 * moment) and counted when it is still there. */
static int over_count(tether_pool *p, const char *app, int *server,
                      tether_pool_metrics *m) {
    *server = fault_count_app(&D.cl, app);
    tether_pool_metrics_get(p, m);
    return *server >= 0 && *server > m->total + m->creating;
}

/* Memory is compared between two calm moments with the pool full (as
 * many connections open, each with its libpq buffers): the first after
 * the warm-up and the last of the run. */
static void sample_memory(int64_t t, int64_t warm,
                          const tether_pool_metrics *m) {
    if (t < warm || m->total != D.o.pool || m->creating)
        return;
    long rss = check_rss_kb(), heap = check_heap_kb();
    if (!D.chk.rss_warm_kb) {
        D.chk.rss_warm_kb = rss;
        D.chk.heap_warm_kb = heap;
    }
    D.chk.rss_end_kb = rss;
    D.chk.heap_end_kb = heap;
}

static void check_accounting(int64_t t, int64_t warm) {
    if (atomic_load(&D.fault_busy) || t - atomic_load(&D.calm_since) < 1000)
        return;
    int server, jobs;
    tether_pool_metrics m, mj;
    int over = over_count(D.pool, APP, &server, &m);
    over |= over_count(D.jobs, JOBS_APP, &jobs, &mj);
    if (!over) {
        D.accounting_checks += server >= 0;
        sample_memory(t, warm, &m);
        return;
    }
    D.accounting_checks++;
    struct timespec ts = {0, 300000000}; /* a terminated backend lingers */
    nanosleep(&ts, NULL);
    if (atomic_load(&D.fault_busy))
        return;
    if (over_count(D.pool, APP, &server, &m) ||
        over_count(D.jobs, JOBS_APP, &jobs, &mj)) {
        D.chk.accounting_mismatches++;
        char who[1024];
        fault_sessions_app(&D.cl,
                           server > m.total + m.creating ? APP : JOBS_APP, who,
                           sizeof(who));
        announce("check: the server holds %d and %d sessions of the pools, "
                 "they count %d+%d and %d+%d open+opening: %s",
                 server, jobs, m.total, m.creating, mj.total, mj.creating, who);
    }
}

static uint64_t p99_ms_x10(const lat_hist *h) {
    return lat_hist_pct(h, 99) / 100000u;
}

static void progress(int64_t t, uint64_t last_ops, int64_t dt_ms) {
    tether_pool_metrics m;
    tether_pool_metrics_get(D.pool, &m);
    uint64_t ops = atomic_load(&D.ops);
    int s = (int)(t / 1000) - 1;
    uint64_t p99 = 0;
    pthread_mutex_lock(&D.lock);
    if (s >= 0 && s < D.nsecs)
        p99 = p99_ms_x10(&D.secs[s].lat);
    pthread_mutex_unlock(&D.lock);
    int w = D.cl.writable;
    char line[300];
    snprintf(line, sizeof(line),
             "%3llds %6.0f ops/s  p99 %5.1f ms  retries %llu  errors %llu  "
             "writes failed %llu  breaker %s  primary %s:%d  rss %ld MB",
             (long long)(t / 1000),
             dt_ms > 0 ? (double)(ops - last_ops) * 1000.0 / (double)dt_ms
                       : 0.0,
             (double)p99 / 10.0, (unsigned long long)m.retries,
             (unsigned long long)atomic_load(&D.app_errors),
             (unsigned long long)atomic_load(&D.write_failures),
             tether_breaker_state_name(m.breaker_state), D.cl.host,
             D.cl.port[w], check_rss_kb() / 1024);
    struct winsize ws;
    if (D.tty && ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 &&
        ws.ws_col <= sizeof(line))
        line[ws.ws_col - 1] = '\0'; /* one row, or \r cannot redraw it */
    if (D.tty)
        fprintf(stderr, "\r\033[K%s", line);
    else
        fprintf(stderr, "%s\n", line);
}

static void sample_second(int s) {
    tether_pool_metrics m;
    tether_pool_metrics_get(D.pool, &m);
    pthread_mutex_lock(&D.lock);
    if (s >= 0 && s < D.nsecs)
        D.secs[s].retries = m.retries;
    pthread_mutex_unlock(&D.lock);
}

/* ---- the report ---------------------------------------------------------- */

static int64_t recovery_ms(const fault_rec *fr) {
    int64_t ok = atomic_load(&fr->first_ok_ms);
    return fr->applied && ok ? ok - fr->inforce_ms : -1;
}

/* How long after fr's server came back pool k's writes were: -1 when
 * they were not (or the server never came back). */
static int64_t writes_back_ms(const fault_rec *fr, int k) {
    int64_t back = atomic_load(&fr->back_ms);
    int64_t w = atomic_load(&fr->wb[k].first_write_ms);
    return back && w ? w - back : -1;
}

/* The pool to show for fr: one that was late, else the slower one. */
static int worst_pool(const fault_rec *fr) {
    int worst = 0;
    for (int k = 1; k < DEMO_POOLS; k++) {
        int64_t a = writes_back_ms(fr, worst), b = writes_back_ms(fr, k);
        if (fr->wb[k].breach > fr->wb[worst].breach ||
            (fr->wb[k].breach == fr->wb[worst].breach && a >= 0 &&
             (b < 0 || b > a)))
            worst = k;
    }
    return worst;
}

/* The faults after which a pool's writes came back late. */
static uint64_t writes_back_late(void) {
    uint64_t n = 0;
    for (int i = 0; i < D.nfaults; i++) {
        const fault_rec *fr = &D.faults[i];
        n += fr->back_judged && fr->wb[worst_pool(fr)].breach;
    }
    return n;
}

/* Judge the faults the fault thread left (the run ended first). */
static void judge_left(int64_t now) {
    for (int i = 0; i < D.nfaults; i++)
        judge_back(&D.faults[i], now);
}

/* Whether memory was measured: not under a sanitizer, and two samples. */
static int memory_checked(void) {
    return check_memory_measured() && D.chk.rss_warm_kb > 0;
}

static double rss_growth_pct(void) {
    const check_report *c = &D.chk;
    return c->rss_warm_kb > 0
               ? 100.0 * (double)(c->rss_end_kb - c->rss_warm_kb) /
                     (double)c->rss_warm_kb
               : 0.0;
}

/* The "back" column for fr. */
static const char *back_mark(const fault_back *b) {
    return b->breach ? "!" : b->judged ? "" : "?";
}

static void back_text(const fault_rec *fr, char *buf, size_t n) {
    int k = worst_pool(fr);
    int64_t w = writes_back_ms(fr, k);
    if (!atomic_load(&fr->back_ms))
        snprintf(buf, n, "-");
    else if (w < 0)
        snprintf(buf, n, "none%s", back_mark(&fr->wb[k]));
    else
        snprintf(buf, n, "%lld ms%s", (long long)w, back_mark(&fr->wb[k]));
}

/* A line for each pool whose writes came back late after fr. */
static void late_text(const fault_rec *fr) {
    int64_t back = atomic_load(&fr->back_ms);
    for (int k = 0; back && k < DEMO_POOLS; k++) {
        const fault_back *b = &fr->wb[k];
        if (!b->breach)
            continue;
        int64_t w = writes_back_ms(fr, k);
        printf(" ! %s at %.1fs: the %s pool's writes %s %lld ms after the "
               "server's return;\n   its breaker was %s then, the period "
               "ending %lld ms after the return (%s),\n   a connect's pause "
               "%lld ms after it: allowed %lld ms\n",
               fault_kind_name(fr->e.kind), (double)fr->start_ms / 1000.0,
               D.watch[k].name, w < 0 ? "were not back" : "came back",
               (long long)(w < 0 ? D.o.seconds_ms - back : w),
               tether_breaker_state_name(b->state),
               (long long)(b->period_end_ms - back),
               b->state != TETHER_BREAKER_OPEN ? "none in force"
                                               : "the pool's metrics",
               (long long)b->pause_left_ms,
               (long long)check_back_allowance_ms(b, back));
        printf(
            "   until the writes:\n   %u connect attempts (%u failed, %u to a "
            "server of the wrong role,\n   budgets %lld-%lld ms), %u "
            "hosts skipped, %lld ms of pauses between passes\n",
            atomic_load(&b->attempts), atomic_load(&b->failed),
            atomic_load(&b->wrong_role), (long long)atomic_load(&b->min_budget),
            (long long)atomic_load(&b->max_budget), atomic_load(&b->skipped),
            (long long)atomic_load(&b->pause_ms));
    }
}

static void report_text(const once_count *oc, const once_count *jc,
                        const tether_pool_metrics *m, int64_t ran_ms) {
    printf("\ntether demo: %d threads on a pool of %d, %.1f s, primary and "
           "streaming standby on %s\npool settings: %s\njob worker: %d "
           "threads on a pool of %d, jobs of %d statements in one "
           "transaction,\n            deadlines %d-%d s; settings: %s\n\n",
           D.o.threads, D.o.pool, (double)ran_ms / 1000.0, D.cl.host,
           D.settings, JOB_THREADS, JOB_POOL,
           (int)(sizeof(job_steps) / sizeof(*job_steps)), JOB_MIN_MS / 1000,
           JOB_MAX_MS / 1000, D.jobs_settings);
    printf("%-10s %7s %10s %7s %7s %10s  %s\n", "fault", "at", "recovered",
           "errors", "writes", "back", "what was done");
    for (int i = 0; i < D.nfaults; i++) {
        const fault_rec *fr = &D.faults[i];
        if (!fr->start_ms)
            continue;
        int64_t rec = recovery_ms(fr);
        char recs[32];
        if (rec >= 0)
            snprintf(recs, sizeof(recs), "%lld ms", (long long)rec);
        else
            snprintf(recs, sizeof(recs), fr->applied ? "not in run" : "-");
        char back[32];
        back_text(fr, back, sizeof(back));
        printf("%-10s %6.1fs %10s %7llu %7llu %10s  %s\n",
               fault_kind_name(fr->e.kind), (double)fr->start_ms / 1000.0, recs,
               (unsigned long long)atomic_load(&fr->app_errors),
               (unsigned long long)atomic_load(&fr->write_failures), back,
               fr->detail);
    }
    printf("\n(recovered: from the fault in force to the first success of a "
           "statement begun after;\n errors: failures idempotent work saw; "
           "writes: non-idempotent inserts that failed;\n back: from the "
           "server's return to the first write done in both pools, ! when "
           "later\n than %d ms after the end of the pacing then (the breaker's "
           "period, a connect's\n pause), ? not judged: the next fault was "
           "due first)\n",
           check_writes_back_ms());
    for (int i = 0; i < D.nfaults; i++)
        late_text(&D.faults[i]);
    printf("\n");
    printf("statements       %llu succeeded (%.0f/s)\n",
           (unsigned long long)atomic_load(&D.ops),
           ran_ms ? (double)atomic_load(&D.ops) * 1000.0 / (double)ran_ms : 0);
    printf("app errors       %llu  (idempotent work; retried by run() "
           "within its deadline)\n",
           (unsigned long long)atomic_load(&D.app_errors));
    if (D.first_error[0])
        printf("  first error    %s\n", D.first_error);
    printf("retries          %llu\n", (unsigned long long)m->retries);
    printf("connections      %llu opened; %llu connects gave up (a connect "
           "tries the hosts\n                 again and again until its "
           "login timeout, 15 s)\n",
           (unsigned long long)m->created,
           (unsigned long long)m->connect_failures);
    printf("at most once     %lld inserts acknowledged; in the database: "
           "%lld rows, %lld duplicates, %lld missing\n",
           (long long)oc->checked, (long long)oc->rows,
           (long long)oc->duplicates, (long long)oc->missing);
    printf("                 %llu inserts failed (may or may not have "
           "reached the server: not retried)\n",
           (unsigned long long)atomic_load(&D.write_failures));
    printf("jobs             %llu committed (%.0f/s), %llu failed after they "
           "may have reached the server,\n                 %llu failed before "
           "(not retried after their deadline)\n",
           (unsigned long long)atomic_load(&D.jobs_ok),
           ran_ms ? (double)atomic_load(&D.jobs_ok) * 1000.0 / (double)ran_ms
                  : 0,
           (unsigned long long)atomic_load(&D.jobs_failed),
           (unsigned long long)atomic_load(&D.jobs_unsent));
    printf("jobs at most once %lld acknowledged; in the database: %lld, %lld "
           "duplicates, %lld missing,\n                 %lld half applied\n",
           (long long)jc->checked, (long long)jc->rows,
           (long long)jc->duplicates, (long long)jc->missing,
           (long long)jc->partial);
    const check_report *c = &D.chk;
    printf(
        "invariants       %llu double leases, %llu accounting mismatches "
        "(%llu checks),\n                 %llu calls kept over their limit "
        "(%d s, jobs 1-3 s) by > %d ms\n                 (the worst: %lld ms; "
        "time waiting for a CPU not counted),\n                 %llu "
        "idempotent failures while the database served again\n"
        "                 before their deadline; memory %+.1f %% since "
        "warm-up;\n                 %llu faults after which writes were "
        "back late\n",
        (unsigned long long)c->double_leases,
        (unsigned long long)c->accounting_mismatches,
        (unsigned long long)D.accounting_checks,
        (unsigned long long)c->deadline_overruns, RUN_LIMIT_MS / 1000,
        check_overrun_slack_ms(), (long long)c->worst_overrun_ms,
        (unsigned long long)c->covered_errors, rss_growth_pct(),
        (unsigned long long)writes_back_late());
    if (D.first_overrun[0])
        printf("  first overrun  %s\n", D.first_overrun);
}

/* How many faults of kind k were done. */
static int faults_done(int k) {
    int n = 0;
    for (int i = 0; i < D.nfaults; i++)
        n += D.faults[i].start_ms && D.faults[i].applied &&
             (int)D.faults[i].e.kind == k;
    return n;
}

/* The name of a failed connect's code: "" for none, "?" when the event
 * carried no code. */
static const char *fail_name(int code) {
    return code == 0 ? "" : code == -1 ? "?" : tether_errname(code);
}

/* fr's writes-back fields, after its recovery_ms. */
static void back_json(const fault_rec *fr) {
    int64_t back = atomic_load(&fr->back_ms);
    int k = worst_pool(fr);
    printf(",\"back_at_ms\":%lld,\"writes_back_ms\":%lld,"
           "\"writes_back_allowed_ms\":%lld,\"writes_back_late\":%s,"
           "\"writes_back\":{",
           (long long)(back ? back : -1), (long long)writes_back_ms(fr, k),
           (long long)(back ? check_back_allowance_ms(&fr->wb[k], back) : -1),
           fr->wb[k].breach ? "true" : "false");
    for (int j = 0; j < DEMO_POOLS; j++) {
        const fault_back *b = &fr->wb[j];
        printf("%s\"%s\":{\"writes_back_ms\":%lld,\"breaker\":\"%s\","
               "\"period_end_ms\":%lld,\"period_from\":\"%s\","
               "\"allowed_ms\":%lld,\"judged\":%s,\"late\":%s,"
               "\"pause_left_ms\":%lld,"
               "\"connects\":{\"attempts\":%u,\"failed\":%u,"
               "\"wrong_role\":%u,\"skipped\":%u,\"pause_ms\":%lld,"
               "\"min_budget_ms\":%lld,\"max_budget_ms\":%lld,"
               "\"first_failure\":\"%s\",\"first_failure_ms\":%lld}}",
               j ? "," : "", D.watch[j].name, (long long)writes_back_ms(fr, j),
               back ? tether_breaker_state_name(b->state) : "",
               (long long)(back ? b->period_end_ms - back : -1),
               !back                             ? ""
               : b->caught_opened                ? "caught"
               : b->state != TETHER_BREAKER_OPEN ? "none"
                                                 : "metrics",
               (long long)(back ? check_back_allowance_ms(b, back) : -1),
               b->judged ? "true" : "false", b->breach ? "true" : "false",
               (long long)b->pause_left_ms, atomic_load(&b->attempts),
               atomic_load(&b->failed), atomic_load(&b->wrong_role),
               atomic_load(&b->skipped), (long long)atomic_load(&b->pause_ms),
               (long long)atomic_load(&b->min_budget),
               (long long)atomic_load(&b->max_budget),
               fail_name(atomic_load(&b->first_fail_code)),
               (long long)(atomic_load(&b->first_fail_code)
                               ? atomic_load(&b->first_fail_ms)
                               : -1));
    }
    printf("},\"job_failures\":%llu",
           (unsigned long long)atomic_load(&fr->job_failures));
}

static void report_json(const once_count *oc, const once_count *jc,
                        const tether_pool_metrics *m, int64_t ran_ms) {
    int64_t failover = -1;
    printf("{\"seconds\":%.1f,\"threads\":%d,\"pool\":%d,\"ops\":%llu,"
           "\"app_errors\":%llu,\"write_failures\":%llu,\"retries\":%llu,"
           "\"connections_opened\":%llu,\"writes_acked\":%lld,"
           "\"rows\":%lld,\"duplicates\":%lld,\"missing\":%lld,",
           (double)ran_ms / 1000.0, D.o.threads, D.o.pool,
           (unsigned long long)atomic_load(&D.ops),
           (unsigned long long)atomic_load(&D.app_errors),
           (unsigned long long)atomic_load(&D.write_failures),
           (unsigned long long)m->retries, (unsigned long long)m->created,
           (long long)oc->checked, (long long)oc->rows,
           (long long)oc->duplicates, (long long)oc->missing);
    const check_report *c = &D.chk;
    printf("\"double_leases\":%llu,\"accounting_mismatches\":%llu,"
           "\"accounting_checks\":%llu,\"deadline_overruns\":%llu,"
           "\"worst_overrun_ms\":%lld,\"overrun_slack_ms\":%d,"
           "\"errors_within_deadline\":%llu,"
           "\"rss_growth_pct\":%.1f,\"rss_warm_kb\":%ld,\"rss_end_kb\":%ld,"
           "\"heap_warm_kb\":%ld,\"heap_end_kb\":%ld,\"memory_checked\":%s,"
           "\"seed\":%llu,\"settings\":",
           (unsigned long long)c->double_leases,
           (unsigned long long)c->accounting_mismatches,
           (unsigned long long)D.accounting_checks,
           (unsigned long long)c->deadline_overruns,
           (long long)c->worst_overrun_ms, check_overrun_slack_ms(),
           (unsigned long long)c->covered_errors, rss_growth_pct(),
           c->rss_warm_kb, c->rss_end_kb, c->heap_warm_kb, c->heap_end_kb,
           memory_checked() ? "true" : "false", (unsigned long long)D.o.seed);
    cli_json_str(D.settings);
    printf(",\"jobs_threads\":%d,\"jobs_pool\":%d,\"jobs_ok\":%llu,"
           "\"jobs_failed\":%llu,\"jobs_unsent\":%llu,\"jobs_acked\":%lld,"
           "\"jobs_rows\":%lld,\"jobs_duplicates\":%lld,\"jobs_missing\":%lld,"
           "\"jobs_partial\":%lld,\"writes_back_late\":%llu,"
           "\"jobs_settings\":",
           JOB_THREADS, JOB_POOL, (unsigned long long)atomic_load(&D.jobs_ok),
           (unsigned long long)atomic_load(&D.jobs_failed),
           (unsigned long long)atomic_load(&D.jobs_unsent),
           (long long)jc->checked, (long long)jc->rows,
           (long long)jc->duplicates, (long long)jc->missing,
           (long long)jc->partial, (unsigned long long)writes_back_late());
    cli_json_str(D.jobs_settings);
    if (D.o.chaos) { /* how many of each kind; the list would be long */
        printf(",\"faults\":{");
        for (int k = 0; k < FAULT_NKINDS; k++)
            printf("%s\"%s\":%d", k ? "," : "", fault_kind_name(k),
                   faults_done(k));
        printf("}");
    }
    printf(",\"%s\":[", D.o.chaos ? "fault_log" : "faults");
    int first = 1;
    for (int i = 0; i < D.nfaults; i++) {
        const fault_rec *fr = &D.faults[i];
        if (!fr->start_ms)
            continue;
        int64_t rec = recovery_ms(fr);
        if (fr->e.kind == FAULT_FAILOVER)
            failover = rec;
        printf("%s{\"kind\":\"%s\",\"at_ms\":%lld,\"applied\":%s,"
               "\"recovery_ms\":%lld,\"app_errors\":%llu,"
               "\"write_failures\":%llu,\"detail\":",
               first ? "" : ",", fault_kind_name(fr->e.kind),
               (long long)fr->start_ms, fr->applied ? "true" : "false",
               (long long)rec, (unsigned long long)atomic_load(&fr->app_errors),
               (unsigned long long)atomic_load(&fr->write_failures));
        cli_json_str(fr->detail);
        back_json(fr);
        printf("}");
        first = 0;
    }
    printf("],\"failover_ms\":%lld,\"first_error\":", (long long)failover);
    cli_json_str(D.first_error);
    printf(",\"first_overrun\":");
    cli_json_str(D.first_overrun);
    printf("}\n");
}

/* ---- options ------------------------------------------------------------- */

enum {
    OPT_THREADS = 256,
    OPT_POOL,
    OPT_SECONDS,
    OPT_JSON,
    OPT_SVG,
    OPT_NO_FAULTS,
    OPT_RETRY,
    OPT_CHAOS,
    OPT_SEED,
    OPT_ADMIN
};

static const struct option demo_options[] = {
    {"threads", required_argument, NULL, OPT_THREADS},
    {"pool", required_argument, NULL, OPT_POOL},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"json", no_argument, NULL, OPT_JSON},
    {"svg", required_argument, NULL, OPT_SVG},
    {"no-faults", no_argument, NULL, OPT_NO_FAULTS},
    {"retry", required_argument, NULL, OPT_RETRY},
    {"chaos", no_argument, NULL, OPT_CHAOS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"admin-socket", required_argument, NULL, OPT_ADMIN},
    {NULL, 0, NULL, 0}};

static int take_opt(void *ctx, int opt, const char *v) {
    demo_opts *o = ctx;
    switch (opt) {
    case OPT_THREADS:
        return cli_parse_count(CMD, "--threads", v, 1, 256, &o->threads);
    case OPT_POOL:
        return cli_parse_count(CMD, "--pool", v, 1, SERVER_SLOTS - JOB_POOL,
                               &o->pool);
    case OPT_SECONDS:
        if (cli_parse_seconds(CMD, v, &o->seconds_ms))
            return CLI_USAGE;
        if (o->seconds_ms < 10000 || o->seconds_ms > MAX_SECONDS * 1000LL)
            return cli_usage_error(CMD,
                                   "bad value '%s' for --seconds: want 10 s "
                                   "to %d s (the faults need room)",
                                   v, MAX_SECONDS);
        return 0;
    case OPT_JSON:
        o->json = 1;
        return 0;
    case OPT_SVG:
        o->svg = v;
        return 0;
    case OPT_RETRY: {
        tether_retry_opts ro;
        tether_error e;
        if (strchr(v, '\'') || strchr(v, '\\'))
            return cli_usage_error(CMD, "bad value for --retry: no quotes");
        if (tether_retry_opts_parse(v, &ro, &e) != 0)
            return cli_usage_error(CMD, "bad value for --retry: %s", e.message);
        o->retry = v;
        return 0;
    }
    case OPT_NO_FAULTS:
        o->faults = 0;
        return 0;
    case OPT_CHAOS:
        o->chaos = 1;
        return 0;
    case OPT_ADMIN:
        o->admin = v;
        return 0;
    case OPT_SEED: {
        long long seed;
        if (cli_parse_int(CMD, "--seed", v, 0, INT64_MAX, &seed))
            return CLI_USAGE;
        o->seed = (uint64_t)seed;
        return 0;
    }
    default:
        return cli_usage_error(CMD, "unexpected argument '%s'", v);
    }
}

static void help(void) {
    printf(
        "usage: tether demo [--seconds N] [--threads T] [--pool P] [--json]\n"
        "                   [--svg FILE] [--retry SPEC] [--no-faults]\n"
        "                   [--admin-socket PATH]\n"
        "       tether demo --chaos [--seconds N] [--seed S] [--json] ...\n"
        "       tether demo --patroni [--seconds N] [--json] ... (a Patroni "
        "cluster:\n"
        "                   tether demo --patroni --help)\n\n"
        "Starts a scratch PostgreSQL primary and streaming standby on "
        "127.0.0.1\n(scripts/pg-cluster; as root the servers run as the "
        "system user tetherpg),\nruns a workload through one tether pool, "
        "and beside it a job worker (8\nthreads on a pool of 4 of its own, "
        "each job a transaction of 6 statements\nwithin a deadline of 1-3 "
        "s), and breaks the database on a schedule: backend\nterminations, "
        "a fast restart, a hang (SIGSTOP), too many connections, a\n"
        "blackhole (fault proxy) and a failover to the standby.\n"
        "Everything it started is stopped and removed at the end, on "
        "Ctrl-C and on\nfailure.\n\n"
        "  --seconds N   how long the workload runs (default 60, at least "
        "10)\n"
        "  --threads T   application threads (default 16)\n"
        "  --pool P      pool size (default 8, at most 13: the servers "
        "allow 17,\n"
        "                the job worker's pool takes 4)\n"
        "  --json        the report as one JSON object on stdout\n"
        "  --svg FILE    write a timeline of throughput, p99 latency, "
        "retries,\n"
        "                errors and the faults to FILE\n"
        "  --retry SPEC  both pools' run() policy (tether_retry, "
        "docs/policy-spec.md);\n"
        "                default: the pool's own (exponential base=50ms "
        "max=1s\n"
        "                attempts=3, within the acquire timeout)\n"
        "  --no-faults   the workload alone\n"
        "  --chaos       the reliability soak: 64 threads on a pool of 12 "
        "(unless\n"
        "                set), a random fault 1-3 s after the last one is "
        "over\n                (the kinds above, some\n"
        "                terminations and a stop of the primary for 2-6 s),\n"
        "                each failover followed by a new standby rebuilt "
        "from the\n                new primary (scripts/chaos)\n"
        "  --seed S      the --chaos schedule's seed (default: the time; "
        "printed)\n"
        "  --admin-socket PATH  serve the pools on an admin socket at PATH "
        "for\n"
        "                tether top and tether ctl (docs/operations.md); "
        "the\n"
        "                variable TETHER_ADMIN_SOCKET does the same\n\n"
        "Checked all along: no connection held by two callers; the "
        "server never\nholds more of a pool's sessions than the pool has "
        "open or opening (once\nno fault has been in the air for 1 s); no "
        "call returns later than its\nlimit (15 s, a job's 1-3 s) plus 20 "
        "ms; no idempotent call fails while the\ndatabase served others "
        "again before its deadline; after each fault, writes\nare back in "
        "both pools within 1 s of the later of the server's return and\n"
        "the end of the pool's breaker period in force then; and, with "
        "--chaos,\nresident memory grows at most 10 %% between the first "
        "calm moment with the\npool full after the first third of the run "
        "and the last one (not judged in\na sanitizer build).\n\n"
        "Progress goes to stderr: one redrawn line on a terminal, a line a "
        "second\notherwise. Exit status: 0, or 1 when a check failed, an "
        "insert or a job was\napplied twice or half, an acknowledged one is "
        "missing, or (without --chaos)\nidempotent work saw an error.\n\n"
        "--json fields: ops, app_errors (idempotent work), write_failures\n"
        "(inserts that failed after they may have reached the server), "
        "retries,\nwrites_acked, rows, duplicates, missing, settings, "
        "faults (kind, at_ms,\napplied, recovery_ms: from the fault in "
        "force to the first success of a\nstatement begun after, -1 when "
        "none came before the end; app_errors,\nwrite_failures, detail, "
        "job_failures, back_at_ms: the server's return,\nwrites_back_ms: "
        "from it to the first write in the slower pool (-1: none),\n"
        "writes_back_allowed_ms, writes_back_late, writes_back: per pool "
        "(app, jobs)\nwrites_back_ms, breaker, period_end_ms, period_from, "
        "allowed_ms, judged,\nlate, pause_left_ms, connects: the pool's "
        "connect attempts from the\nreturn to its first write, the first "
        "failure's code and its time after\nthe return), failover_ms (the "
        "failover's "
        "recovery_ms); double_leases,\naccounting_mismatches, "
        "accounting_checks, deadline_overruns,\nworst_overrun_ms, "
        "overrun_slack_ms, errors_within_deadline, rss_growth_pct, seed; "
        "jobs_threads,\n"
        "jobs_pool, jobs_ok, jobs_failed (may have reached the server), "
        "jobs_unsent,\njobs_acked, jobs_rows, jobs_duplicates, jobs_missing, "
        "jobs_partial,\njobs_settings, writes_back_late (faults). With "
        "--chaos, faults counts each\nkind and fault_log lists them.\n");
}

static int finish(worker *ws, int nw, int64_t ran_ms) {
    once_count oc = {0}, jc = {0};
    char why[300] = "";
    int rc = CLI_OK;
    judge_left(ran_ms);
    PGconn *conn = check_connect();
    if (count_once(conn, ws, nw, &oc, why, sizeof(why)) != 0 ||
        count_jobs(conn, ws, nw, &jc, why, sizeof(why)) != 0) {
        fprintf(stderr, "tether demo: %s\n", why);
        rc = CLI_FAIL;
    }
    PQfinish(conn);
    tether_pool_metrics m;
    tether_pool_metrics_get(D.pool, &m);
    if (D.o.json)
        report_json(&oc, &jc, &m, ran_ms);
    else
        report_text(&oc, &jc, &m, ran_ms);
    if (D.o.svg && demo_svg(D.o.svg, D.secs, (int)(ran_ms / 1000), D.faults,
                            D.nfaults, why, sizeof(why)) != 0) {
        fprintf(stderr, "tether demo: --svg: %s\n", why);
        rc = CLI_FAIL;
    }
    const check_report *c = &D.chk;
    if ((!D.o.chaos && atomic_load(&D.app_errors)) || oc.duplicates ||
        oc.missing || jc.duplicates || jc.missing || jc.partial ||
        writes_back_late() || c->double_leases || c->accounting_mismatches ||
        c->deadline_overruns || c->covered_errors ||
        (D.o.chaos && memory_checked() && rss_growth_pct() > 10.0))
        rc = CLI_FAIL;
    return rc;
}

static int run_workload(void) {
    int nw = D.o.threads + JOB_THREADS; /* the job worker's last */
    worker *ws = calloc((size_t)nw, sizeof(*ws));
    if (!ws)
        return CLI_FAIL;
    for (int i = 0; i < nw; i++) {
        ws[i].acked = tmpfile();
        if (!ws[i].acked) {
            fprintf(stderr,
                    "tether demo: no temporary file for the "
                    "acknowledged ids: %s\n",
                    strerror(errno));
            for (int j = 0; j < i; j++)
                fclose(ws[j].acked);
            free(ws);
            return CLI_FAIL;
        }
    }
    for (int i = 0; i < nw; i++) {
        ws[i].index = i;
        ws[i].job = i >= D.o.threads;
        ws[i].seed = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
    }
    pthread_t ft;
    int have_ft =
        D.o.faults && pthread_create(&ft, NULL, fault_main, NULL) == 0;
    int64_t end = D.o.seconds_ms, last_t = 0, next_line = 1000;
    uint64_t last_ops = 0;
    /* warm-up: the first third of the run (the allocator reaches its
     * steady state through the first reconnects and failovers) */
    int64_t warm = end / 3 > 10000 ? end / 3 : 10000;
    while (sleep_until(next_line < end ? next_line : end) && now_ms() < end) {
        int64_t t = now_ms();
        sample_second((int)(t / 1000) - 1);
        check_accounting(t, warm);
        progress(t, last_ops, t - last_t);
        last_ops = atomic_load(&D.ops);
        last_t = t;
        next_line += 1000;
    }
    int64_t ran = now_ms();
    sample_second((int)(ran / 1000) - 1);
    atomic_store(&D.stop, 1);
    /* Waiting callers and retries end now (TETHER_ECLOSED, not counted);
     * a statement in flight ends within STMT_TIMEOUT_MS. */
    tether_pool_close(D.pool, 0, NULL);
    tether_pool_close(D.jobs, 0, NULL);
    if (D.tty)
        fprintf(stderr, "\n");
    if (have_ft)
        pthread_join(ft, NULL);
    for (int i = 0; i < nw; i++)
        pthread_join(ws[i].th, NULL);
    check_totals(&D.chk, D.secs, D.nsecs);
    int rc = interrupted ? CLI_FAIL : finish(ws, nw, ran);
    for (int i = 0; i < nw; i++)
        if (ws[i].acked)
            fclose(ws[i].acked);
    free(ws);
    return rc;
}

/* Make a block resident now, so that filling it later (the timeline, a
 * second at a time) is not counted as growth by the memory check. Through
 * a volatile pointer: an optimizing compiler drops a memset of zeros that
 * follows calloc, and the pages were then touched one second at a time
 * (resident memory grew 18 % over a 10-minute soak in the RelWithDebInfo
 * build, and 2 % in the debug build, which kept the memset). */
static void touch_pages(void *block, size_t n) {
    volatile char *v = block;
    for (size_t i = 0; block && i < n; i += 4096)
        v[i] = 0;
}

/* A connect step of pool k (ctx): counted for the current fault from its
 * server's return until the pool's first write. */
static void on_connect_event(void *ctx, const tether_connect_event *ev) {
    int k = (int)((pool_watch *)ctx - D.watch);
    check_watch_event(&D.watch[k], now_ms(), ev);
    int f = atomic_load(&D.cur_fault);
    if (f < 0 || !atomic_load(&D.faults[f].back_ms) ||
        atomic_load(&D.faults[f].wb[k].first_write_ms))
        return;
    check_back_event(&D.faults[f].wb[k], ev, now_ms(),
                     atomic_load(&D.faults[f].back_ms));
}

/* Open a pool of size max for application_name app, its settings shown
 * in settings (D.settings or D.jobs_settings), watched as watch k. */
static int open_pool(tether_pool **p, const char *app, int max, char *settings,
                     const char *name, int k) {
    char ci[1024], extra[400];
    snprintf(settings, sizeof(D.settings),
             "target_session_attrs=read-write connect_timeout=%d "
             "tether_pool_max=%d%s%s%s",
             CONNECT_TIMEOUT_MS / 1000, max, D.o.retry ? " tether_retry='" : "",
             D.o.retry ? D.o.retry : "", D.o.retry ? "'" : "");
    snprintf(
        extra, sizeof(extra),
        "options='-c client_min_messages=warning' tether_pool_name=demo-%s "
        "%s",
        name, settings);
    fault_cluster_conninfo(&D.cl, 1, app, extra, ci, sizeof(ci));
    tether_error err;
    if (tether_pool_open(p, ci, on_connect_event, &D.watch[k], &err) != 0) {
        fprintf(stderr, "tether demo: opening the %s pool: %s\n", name,
                err.message);
        return -1;
    }
    check_watch_init(&D.watch[k], name, *p);
    return 0;
}

static void catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int tether__lab_demo(int argc, char **argv) {
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--patroni")) /* demo_patroni.c */
            return tether__lab_demo_patroni(argc, argv);
    if (cli_want_help(argc, argv)) {
        help();
        return CLI_OK;
    }
    D.o = (demo_opts){0, 0, 60000, 0, 1, 0, 0, NULL, NULL, NULL};
    D.o.seed = (uint64_t)time(NULL);
    int rc = cli_parse_opts(CMD, argc, argv, demo_options, take_opt, &D.o);
    if (rc)
        return rc;
    if (!D.o.threads) /* the soak: 64 threads on a pool of 12 */
        D.o.threads = D.o.chaos ? 64 : 16;
    if (!D.o.pool) /* the job worker's pool takes JOB_POOL of the slots */
        D.o.pool = D.o.chaos ? SERVER_SLOTS - 1 - JOB_POOL : 8;
    if (D.o.admin) { /* before the cluster: a bad path fails at once */
        tether_error e;
        if (tether_admin_start(D.o.admin, &e) != 0) {
            fprintf(stderr, "tether demo: --admin-socket: %s\n", e.message);
            return CLI_FAIL;
        }
        fprintf(stderr, "tether demo: admin socket %s\n", D.o.admin);
    }
    catch_signals();
    D.tty = isatty(2);
    D.nsecs = (int)(D.o.seconds_ms / 1000) + 2;
    D.secs = calloc((size_t)D.nsecs, sizeof(*D.secs));
    touch_pages(D.secs, (size_t)D.nsecs * sizeof(*D.secs));
    pthread_mutex_init(&D.lock, NULL);
    atomic_store(&D.cur_fault, -1);
    atomic_store(&D.late_fault, -1);
    char why[400] = "";
    fprintf(stderr, "tether demo: starting a scratch primary and standby\n");
    if (!D.secs || fault_cluster_start(&D.cl, 1, why, sizeof(why)) != 0) {
        fprintf(stderr, "tether demo: %s\n", why);
        fault_cluster_stop(&D.cl);
        free(D.secs);
        return interrupted ? 128 + interrupted : CLI_FAIL;
    }
    fprintf(stderr, "tether demo: cluster in %s (removed at the end)\n",
            D.cl.dir);
    D.cl.rebuild = D.o.chaos; /* failovers can then come again */
    D.cl.on_back = on_server_back;
    rc = CLI_FAIL;
    if (open_pool(&D.pool, APP, D.o.pool, D.settings, "app", POOL_APP) ||
        open_pool(&D.jobs, JOBS_APP, JOB_POOL, D.jobs_settings, "jobs",
                  POOL_JOBS)) {
        /* said */
    } else if (setup_schema(why, sizeof(why)) != 0) {
        fprintf(stderr, "tether demo: %s\n", why);
    } else if (!interrupted) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        D.t0_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        fault_event ev[FAULT_MAX_EVENTS];
        D.nfaults = !D.o.faults ? 0
                    : D.o.chaos
                        ? fault_schedule_random(ev, FAULT_MAX_EVENTS,
                                                D.o.seconds_ms, D.o.seed)
                        : fault_schedule_demo(ev, D.o.seconds_ms, 1);
        for (int i = 0; i < D.nfaults; i++)
            D.faults[i].e = ev[i];
        fprintf(stderr,
                "tether demo: %d threads on a pool of %d for %lld s; %s\n",
                D.o.threads, D.o.pool, (long long)(D.o.seconds_ms / 1000),
                D.o.chaos ? "random faults (--chaos)" : "faults on a schedule");
        if (D.o.chaos)
            fprintf(stderr, "tether demo: --seed %llu\n",
                    (unsigned long long)D.o.seed);
        rc = run_workload();
    }
    if (D.pool)
        tether_pool_destroy(D.pool);
    if (D.jobs)
        tether_pool_destroy(D.jobs);
    fault_cluster_stop(&D.cl);
    free(D.secs);
    tether_admin_stop(); /* the socket's file removed (if any) */
    if (interrupted) {
        fprintf(stderr, "tether demo: interrupted; cluster removed\n");
        return 128 + interrupted;
    }
    return rc;
}
