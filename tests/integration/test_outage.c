/* test_outage.c - a job worker's short outage against a real PostgreSQL
 * primary and streaming standby (docs/breaker.md, "The probe belongs to
 * the pool"). THREADS threads on a pool of 4 run transactions of several
 * statements through tether_pool_run_for with DEADLINE_MS each, over
 * target_session_attrs=read-write; the primary is stopped for STOP_MS and
 * started again. Each trial checks:
 *
 *   - writes are back within 1 s of the later of the server's return and
 *     the end of the breaker's period in force then;
 *   - no connect attempt made while the pool's probe was connecting had
 *     a budget under 100 ms (a caller's deadline never bounds the probe);
 *   - no reported error blames a server that was up without saying what
 *     cut the attempt short.
 *
 * Run through the cluster script, which starts the servers and always
 * removes them:
 *
 *   scripts/pg-cluster run -- test_outage PG_CLUSTER_SCRIPT
 *
 * Environment: OUTAGE_TRIALS (2), OUTAGE_CONFIGS ("8:2000,16:1000":
 * threads:deadline pairs), OUTAGE_STOP_MS (6000). bench/run-outage runs
 * ten trials of each and prints the distribution. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../support/clock.h"
#include "tether.h"
#include "tether_pq.h"

#define POOL_MAX 4
#define SHORT_BUDGET_MS 100
#define BACK_WITHIN_MS 1000

static const char *cluster_script;
static char base[512];
static int primary_port, standby_port;

static void cluster(const char *verb, const char *node) {
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s %s %s %s >/dev/null 2>&1", cluster_script,
             verb, getenv("PGC_DIR"), node);
    if (system(cmd) != 0)
        fail_msg("cluster command failed: %s", cmd);
}

/* ---- one trial's shared state -------------------------------------------- */

typedef struct trial {
    tether_pool *pool;
    int threads;
    int64_t deadline_ms;
    atomic_int stop;
    _Atomic int64_t back_at;  /* when the server was back (0: not yet) */
    _Atomic int64_t first_ok; /* first success after back_at */
    atomic_ulong ok, failed;
    atomic_int short_attempts; /* budget < 100 ms, while probing */
    atomic_int attempts_open;  /* attempts while the pool probed */
    pthread_mutex_t lock;
    char last_error[TETHER_MSG_MAX + 64]; /* the last error a job returned */
    char short_line[256]; /* the first short attempt, for the log */
} trial;

static trial *current; /* for the connect event callback */

static void on_event(void *ctx, const tether_connect_event *ev) {
    (void)ctx;
    trial *t = current;
    if (!t || !t->pool || ev->phase == TETHER_PHASE_PAUSE ||
        ev->phase == TETHER_PHASE_SKIP || ev->phase == TETHER_PHASE_PROVISION)
        return;
    tether_pool_metrics m;
    tether_pool_metrics_get(t->pool, &m);
    if (!m.probing)
        return;
    atomic_fetch_add(&t->attempts_open, 1);
    if (ev->budget_ms >= 0 && ev->budget_ms < SHORT_BUDGET_MS &&
        atomic_fetch_add(&t->short_attempts, 1) == 0) {
        pthread_mutex_lock(&t->lock);
        snprintf(t->short_line, sizeof(t->short_line),
                 "%s %s:%d budget %lld ms: %s", tether_phase_name(ev->phase),
                 ev->host, ev->port, (long long)ev->budget_ms, ev->message);
        pthread_mutex_unlock(&t->lock);
    }
}

static int64_t log_t0;

/* The pool's word on its probe and breaker, with the time (the retry
 * loop's lines, one per failed job, are left out). */
static void on_log(void *ctx, tether_log_level level, const char *msg) {
    (void)ctx;
    (void)level;
    if (!strstr(msg, "probe") && !strstr(msg, "breaker "))
        return;
    if (!strncmp(msg, "retry:", 6))
        return;
    print_message("  +%lld ms: %s\n", (long long)(now_ms() - log_t0), msg);
}

/* ---- the job: a transaction of several statements ------------------------ */

typedef struct job {
    int worker;
    long n;
} job;

static int step(PGconn *c, const char *sql, tether_error *err) {
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    int rc = 0;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        rc = tether_pq_error(c, r, err);
    PQclear(r);
    return rc;
}

static int run_job(void *handle, void *arg, const tether_attempt *a,
                   tether_error *err) {
    (void)a;
    PGconn *c = handle;
    job *j = arg;
    char ins[160], upd[160];
    snprintf(ins, sizeof(ins),
             "INSERT INTO outage_jobs(worker, n) VALUES (%d, %ld)", j->worker,
             j->n);
    snprintf(upd, sizeof(upd),
             "UPDATE outage_workers SET done = done + 1 WHERE worker = %d",
             j->worker);
    int rc = step(c, "BEGIN", err);
    if (rc == 0)
        rc = step(c, ins, err);
    if (rc == 0)
        rc = step(c, upd, err);
    if (rc == 0)
        rc = step(c, "SELECT sum(done) FROM outage_workers", err);
    if (rc == 0)
        rc = step(c, "COMMIT", err);
    return rc;
}

typedef struct worker_arg {
    trial *t;
    int id;
} worker_arg;

static void *worker(void *arg) {
    worker_arg *w = arg;
    trial *t = w->t;
    job j = {w->id, 0};
    while (!atomic_load(&t->stop)) {
        tether_error err = {0};
        j.n++;
        int rc =
            tether_pool_run_for(t->pool, 0, t->deadline_ms, run_job, &j, &err);
        if (rc == 0) {
            atomic_fetch_add(&t->ok, 1);
            int64_t back = atomic_load(&t->back_at), zero = 0;
            if (back)
                atomic_compare_exchange_strong(&t->first_ok, &zero, now_ms());
            continue;
        }
        atomic_fetch_add(&t->failed, 1);
        pthread_mutex_lock(&t->lock);
        snprintf(t->last_error, sizeof(t->last_error), "%s: %s",
                 tether_errname(rc), err.message);
        pthread_mutex_unlock(&t->lock);
        usleep(20 * 1000); /* a job worker's pause before its next job */
    }
    return NULL;
}

/* ---- setup ----------------------------------------------------------------
 */

static void make_tables(int threads) {
    char ci[1024];
    snprintf(ci, sizeof(ci), "%s host=127.0.0.1 port=%d", base, primary_port);
    PGconn *c = PQconnectdb(ci);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("setup: %s", PQerrorMessage(c));
    char sql[512];
    snprintf(sql, sizeof(sql),
             "DROP TABLE IF EXISTS outage_jobs, outage_workers;"
             "CREATE TABLE outage_jobs(id bigserial PRIMARY KEY, worker int, "
             "n bigint);"
             "CREATE TABLE outage_workers(worker int PRIMARY KEY, done bigint);"
             "INSERT INTO outage_workers SELECT g, 0 FROM "
             "generate_series(1, %d) g",
             threads);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fail_msg("setup: %s", PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

static void wait_for(atomic_ulong *counter, unsigned long above,
                     int64_t within_ms) {
    int64_t end = now_ms() + within_ms;
    while (atomic_load(counter) <= above && now_ms() < end)
        usleep(10 * 1000);
}

/* ---- one trial ----------------------------------------------------------- */

typedef struct outcome {
    int64_t back_ms;     /* first write after the later of the two */
    int64_t period_left; /* the breaker's period left at the return */
    int short_attempts;
} outcome;

static outcome one_trial(int threads, int64_t deadline_ms, int64_t stop_ms,
                         int n) {
    trial t;
    memset(&t, 0, sizeof(t));
    pthread_mutex_init(&t.lock, NULL);
    t.threads = threads;
    t.deadline_ms = deadline_ms;
    make_tables(threads);
    char ci[1024];
    snprintf(ci, sizeof(ci),
             "%s host=127.0.0.1,127.0.0.1 port=%d,%d "
             "target_session_attrs=read-write tether_pool_max=%d "
             "connect_timeout=2",
             base, primary_port, standby_port, POOL_MAX);
    tether_error err = {0};
    current = &t;
    if (tether_pool_open(&t.pool, ci, on_event, NULL, &err))
        fail_msg("pool: %s", err.message);
    pthread_t tid[64];
    worker_arg args[64];
    for (int i = 0; i < threads; i++) {
        args[i] = (worker_arg){&t, i + 1};
        pthread_create(&tid[i], NULL, worker, &args[i]);
    }
    wait_for(&t.ok, 100, 10000);
    unsigned long before = atomic_load(&t.ok);
    assert_true(before > 100);
    int64_t stop_at = log_t0 = now_ms();
    cluster("stop-node", "primary");
    usleep((useconds_t)(stop_ms * 1000));
    cluster("start-node", "primary");
    int64_t back = now_ms();
    tether_pool_metrics m;
    tether_pool_metrics_get(t.pool, &m);
    int64_t period_left =
        m.breaker_state == TETHER_BREAKER_CLOSED ? 0 : m.breaker_blocked_ms;
    atomic_store(&t.back_at, back);
    /* Wait for the first write after the return: at most the longest
     * period (15 s) and the bound, and a little. */
    int64_t give_up = back + period_left + 20000;
    while (!atomic_load(&t.first_ok) && now_ms() < give_up)
        usleep(10 * 1000);
    int64_t first = atomic_load(&t.first_ok);
    atomic_store(&t.stop, 1);
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    current = NULL;
    outcome o;
    o.period_left = period_left;
    o.back_ms = first ? first - (back + period_left) : -1;
    o.short_attempts = atomic_load(&t.short_attempts);
    print_message(
        "trial %d, %d threads, %lld ms deadlines: primary stopped at +0, "
        "back at +%lld ms with %lld ms of the breaker's period left; first "
        "write %lld ms after the later of the two; %lu jobs ok, %lu failed; "
        "%d attempts while the pool's probe connected, %d of them with a "
        "budget under %d ms%s%s\n  last error: %s\n",
        n, threads, (long long)deadline_ms, (long long)(back - stop_at),
        (long long)period_left, (long long)o.back_ms, atomic_load(&t.ok),
        atomic_load(&t.failed), atomic_load(&t.attempts_open), o.short_attempts,
        SHORT_BUDGET_MS, o.short_attempts ? ", first: " : "", t.short_line,
        t.last_error);
    /* An error must never blame the standby alone for a read-write miss
     * with a budget its caller's deadline cut, without saying so. */
    if (strstr(t.last_error, "timed out after") &&
        !strstr(t.last_error, "deadline"))
        fail_msg("an error says \"timed out\" for an attempt a deadline cut: "
                 "%s",
                 t.last_error);
    tether_pool_destroy(t.pool);
    pthread_mutex_destroy(&t.lock);
    return o;
}

/* ---- the tests ----------------------------------------------------------- */

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static void test_short_outage_stays_short(void **state) {
    (void)state;
    int trials = env_int("OUTAGE_TRIALS", 2);
    int64_t stop_ms = env_int("OUTAGE_STOP_MS", 6000);
    const char *configs = getenv("OUTAGE_CONFIGS");
    char list[256];
    snprintf(list, sizeof(list), "%s",
             configs && *configs ? configs : "8:2000,16:1000");
    int failures = 0;
    char *save = NULL;
    for (char *c = strtok_r(list, ",", &save); c;
         c = strtok_r(NULL, ",", &save)) {
        int threads = 0, deadline = 0;
        if (sscanf(c, "%d:%d", &threads, &deadline) != 2 || threads < 1 ||
            threads > 64 || deadline < 1)
            fail_msg("OUTAGE_CONFIGS: bad pair \"%s\" (want threads:ms)", c);
        for (int i = 1; i <= trials; i++) {
            outcome o = one_trial(threads, deadline, stop_ms, i);
            print_message("RESULT threads=%d deadline_ms=%d trial=%d "
                          "back_ms=%lld period_left_ms=%lld short=%d\n",
                          threads, deadline, i, (long long)o.back_ms,
                          (long long)o.period_left, o.short_attempts);
            if (o.back_ms < 0 || o.back_ms > BACK_WITHIN_MS ||
                o.short_attempts > 0)
                failures++;
        }
    }
    assert_int_equal(failures, 0);
}

int main(int argc, char **argv) {
    if (argc < 2 || !getenv("PRIMARY_PORT")) {
        fprintf(stderr, "usage: scripts/pg-cluster run -- test_outage "
                        "PG_CLUSTER_SCRIPT\n");
        return 2;
    }
    cluster_script = argv[1];
    tether_set_log(on_log, NULL, TETHER_LOG_WARN);
    primary_port = atoi(getenv("PRIMARY_PORT"));
    standby_port = atoi(getenv("STANDBY_PORT"));
    snprintf(base, sizeof(base), "user=%s password=%s dbname=%s",
             getenv("PGC_USER"), getenv("PGC_PASSWORD"), getenv("PGC_DB"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_outage_stays_short),
    };
    return cmocka_run_group_tests_name("outage", tests, NULL, NULL);
}
