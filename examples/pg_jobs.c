/* pg_jobs.c - a job worker, as a service runs one: 8 threads on a pool of
 * 4, each job a transaction spread over three acquires (the request's
 * handlers each take the connection, do their part and give it back), every
 * statement a declared (prepared) statement with a short deadline, and now
 * and then a statement that outlives its deadline. At the end it checks in
 * the database that every job it was told committed is there exactly once
 * and whole, and that no failed job left anything behind.
 *
 *   example_pg_jobs "host=db dbname=app user=app password=..." [SECONDS]
 *
 * What it leans on (docs/statements.md, docs/pool.md):
 * - tether_pool_acquire_key: a lease released with its transaction open
 *   stays reserved to the job's key, and the key's next acquire gets that
 *   connection back; if the connection was lost meanwhile, that acquire
 *   fails (TETHER_EBROKEN) instead of running the rest in autocommit.
 * - tether_pq_declare / tether_pq_exec_prepared: prepared once per
 *   connection, again on new connections (a backend killed, a restart).
 * - statement deadlines: a statement past its deadline returns
 *   TETHER_ETIMEDOUT within a few milliseconds, and is cancelled on the
 *   server in the background.
 * Kill its backends or restart the server while it runs: the totals still
 * add up. Exit status 0 when every check holds, 1 when one does not, 2 on
 * bad arguments. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include <tether_pq.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 8
#define STMT_MS 1000    /* each statement's deadline */
#define ACQUIRE_MS 1000 /* each acquire's */
#define SLOW_EVERY 50   /* one job in 50 runs a statement that is too slow */
#define SLOW_MS 200     /* ... with this deadline */
#define MAX_JOBS 400000 /* per thread, for the final check */
#define APP "tether-pg-jobs"

static tether_pool *pool;
static tether_pq_stmt *ins_job, *upd_job, *ins_item, *slow;
static atomic_int stop;
static atomic_llong worst_late_us; /* worst return past a deadline */
static atomic_long timeouts, failures;

/* What became of a job. */
enum { COMMITTED, FAILED, UNKNOWN };

typedef struct worker {
    int index;
    pthread_t th;
    long n;
    int64_t *id;        /* the jobs, */
    unsigned char *how; /* and what became of each */
} worker;

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* note_late records how far past its deadline a call returned. */
static void note_late(int64_t started_us, int64_t deadline_ms) {
    int64_t late = now_us() - started_us - deadline_ms * 1000;
    long long seen = atomic_load(&worst_late_us);
    while (late > seen &&
           !atomic_compare_exchange_weak(&worst_late_us, &seen, late))
        ;
}

/* exec runs the declared statement st (its one parameter the job's id;
 * st NULL: the text sql) with deadline_ms. */
static int exec(PGconn *conn, const tether_pq_stmt *st, const char *sql,
                int64_t id, int64_t deadline_ms, tether_error *err) {
    char v[24];
    const char *values[1] = {v};
    tether_pq_params params = {1, NULL, values, NULL, NULL, 0};
    snprintf(v, sizeof(v), "%" PRId64, id);
    PGresult *r = NULL;
    int64_t t0 = now_us();
    int rc =
        st ? tether_pq_exec_prepared(conn, st, &params, deadline_ms, &r, err)
           : tether_pq_exec(conn, sql, deadline_ms, &r, err);
    note_late(t0, deadline_ms);
    if (rc == TETHER_ETIMEDOUT)
        atomic_fetch_add(&timeouts, 1);
    PQclear(r);
    return rc;
}

/* Failures by error code (-code), for the summary. */
#define CODES 64
static atomic_long by_code[CODES];

/* report prints the first two failures of each kind (error code), and
 * counts them all. */
static void report(int64_t id, int part, const tether_error *err) {
    int k = err->code < 0 && err->code > -CODES ? -err->code : 0;
    atomic_fetch_add(&failures, 1);
    if (atomic_fetch_add(&by_code[k], 1) < 2)
        fprintf(stderr, "job %" PRId64 " step %d: %s: %s\n", id, part + 1,
                tether_errname(err->code), err->message);
}

/* print_failures: "failures: NAME N, ..." (every step that failed, by
 * error code; a job fails at its first). */
static void print_failures(void) {
    printf("failures: %ld", atomic_load(&failures));
    const char *sep = " (";
    for (int k = 0; k < CODES; k++) {
        long n = atomic_load(&by_code[k]);
        if (n > 0) {
            printf("%s%s %ld", sep, k ? tether_errname(-k) : "other", n);
            sep = ", ";
        }
    }
    printf("%s\n", *sep == ',' ? ")" : "");
}

/* step takes the job's connection (keyed by its id), runs its part and
 * gives the connection back: with the transaction still open after the
 * first two parts, so that it stays reserved to the job. part 2 ends
 * with COMMIT: *sent_commit says it was sent. */
static int step(int64_t id, int part, int slow_job, int *sent_commit) {
    tether_lease *l;
    tether_error err;
    int rc = tether_pool_acquire_key(pool, (uint64_t)id, ACQUIRE_MS, &l, &err);
    if (rc != 0) { /* e.g. EBROKEN: the transaction's connection was lost */
        report(id, part, &err);
        return rc;
    }
    PGconn *c = tether_pq_conn(l);
    if (part == 0) {
        rc = exec(c, NULL, "BEGIN", id, STMT_MS, &err);
        if (rc == 0)
            rc = exec(c, ins_job, NULL, id, STMT_MS, &err);
    } else if (part == 1) {
        rc = exec(c, upd_job, NULL, id, STMT_MS, &err);
        if (rc == 0 && slow_job) /* too slow: cancelled, rolled back */
            rc = exec(c, slow, NULL, id, SLOW_MS, &err);
    } else {
        rc = exec(c, ins_item, NULL, id, STMT_MS, &err);
        if (rc == 0) {
            *sent_commit = 1;
            rc = exec(c, NULL, "COMMIT", id, STMT_MS, &err);
        }
    }
    if (rc != 0) {
        report(id, part, &err);
        /* The job is abandoned: a released lease whose transaction is
         * still open (or aborted) would stay reserved to the key until
         * tether_txn_reserve_timeout, so roll it back first. After a
         * timeout the connection takes no statement (it is drained when
         * released) and a broken one is closed: either way the
         * transaction is gone with it. */
        if (rc != TETHER_ETIMEDOUT && rc != TETHER_EBROKEN) {
            tether_error ignored;
            exec(c, NULL, "ROLLBACK", id, STMT_MS, &ignored);
        }
    }
    tether_lease_release(l);
    return rc;
}

/* run_job runs one job and says what became of it. */
static int run_job(int64_t id, int slow_job) {
    int sent_commit = 0, rc = 0;
    for (int part = 0; rc == 0 && part < 3; part++)
        rc = step(id, part, slow_job, &sent_commit);
    if (rc == 0)
        return COMMITTED;
    /* A COMMIT that was sent and then lost its answer (the connection
     * broke, the deadline came) may have committed; before it, nothing
     * can have. */
    return sent_commit && (rc == TETHER_EBROKEN || rc == TETHER_ETIMEDOUT)
               ? UNKNOWN
               : FAILED;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    while (!atomic_load(&stop) && w->n < MAX_JOBS) {
        int64_t id = ((int64_t)(w->index + 1) << 32) | (w->n + 1);
        w->id[w->n] = id;
        w->how[w->n] = (unsigned char)run_job(id, (w->n + 1) % SLOW_EVERY == 0);
        w->n++;
    }
    return NULL;
}

/* setup makes the tables (anew) and declares the statements. */
static int setup(tether_error *err) {
    tether_lease *l;
    int rc = tether_pool_acquire(pool, 15000, &l, err);
    if (rc)
        return rc;
    PGresult *r = NULL;
    rc = tether_pq_exec(
        tether_pq_conn(l),
        "DROP TABLE IF EXISTS pg_jobs_job, pg_jobs_item; "
        "CREATE TABLE pg_jobs_job (job_id bigint PRIMARY KEY, steps int); "
        "CREATE TABLE pg_jobs_item (job_id bigint)",
        15000, &r, err);
    PQclear(r);
    tether_lease_release(l);
    const struct {
        tether_pq_stmt **st;
        const char *name, *sql;
    } decl[] = {
        {&ins_job, "ins_job",
         "INSERT INTO pg_jobs_job (job_id, steps) VALUES ($1, 1)"},
        {&upd_job, "upd_job",
         "UPDATE pg_jobs_job SET steps = steps + 1 WHERE job_id = $1"},
        {&ins_item, "ins_item",
         "INSERT INTO pg_jobs_item (job_id) VALUES ($1)"},
        {&slow, "slow", "SELECT pg_sleep(5), $1::bigint"},
    };
    for (size_t i = 0; rc == 0 && i < sizeof(decl) / sizeof(*decl); i++)
        rc = tether_pq_declare(decl[i].name, decl[i].sql, 1, NULL, decl[i].st,
                               err);
    return rc;
}

/* A job as the database has it: steps and items, -1 when absent. */
typedef struct found {
    int64_t id;
    int steps, items;
} found;

static int by_id(const void *a, const void *b) {
    int64_t x = ((const found *)a)->id, y = ((const found *)b)->id;
    return (x > y) - (x < y);
}

/* check compares what each job was told with what the database holds. */
static int check(worker *w, tether_error *err) {
    tether_lease *l;
    int rc = tether_pool_acquire(pool, 15000, &l, err);
    if (rc)
        return rc;
    PGresult *r = NULL;
    rc = tether_pq_exec(
        tether_pq_conn(l),
        "SELECT coalesce(j.job_id, i.job_id), coalesce(j.steps, -1), "
        "coalesce(i.n, 0) FROM pg_jobs_job j FULL JOIN (SELECT job_id, "
        "count(*) AS n FROM pg_jobs_item GROUP BY job_id) i USING (job_id)",
        60000, &r, err);
    tether_lease_release(l);
    if (rc)
        return rc;
    int n = PQntuples(r);
    found *db = calloc((size_t)n + 1, sizeof(*db));
    for (int i = 0; db && i < n; i++) {
        db[i].id = strtoll(PQgetvalue(r, i, 0), NULL, 10);
        db[i].steps = atoi(PQgetvalue(r, i, 1));
        db[i].items = atoi(PQgetvalue(r, i, 2));
    }
    PQclear(r);
    if (!db)
        return TETHER_ENOMEM;
    qsort(db, (size_t)n, sizeof(*db), by_id);
    long count[3] = {0}, missing = 0, half = 0, leftover = 0, twice = 0;
    for (int t = 0; t < THREADS; t++)
        for (long k = 0; k < w[t].n; k++) {
            found key = {w[t].id[k], 0, 0};
            found *f = bsearch(&key, db, (size_t)n, sizeof(*db), by_id);
            int how = w[t].how[k];
            count[how]++;
            int whole = f && f->steps == 2 && f->items == 1;
            if (f && f->items > 1)
                twice++;
            if (how == COMMITTED && !f)
                missing++;
            else if (f && !whole)
                half++; /* part of a job: never allowed */
            else if (how == FAILED && f)
                leftover++;
        }
    free(db);
    printf("jobs: %ld committed, %ld failed, %ld with a lost COMMIT answer\n",
           count[COMMITTED], count[FAILED], count[UNKNOWN]);
    print_failures();
    printf("check: %ld committed and missing, %ld half applied, %ld applied "
           "twice, %ld failed and present\n",
           missing, half, twice, leftover);
    return missing || half || twice || leftover ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s CONNINFO [SECONDS]\n", argv[0]);
        return 2;
    }
    int secs = argc == 3 ? atoi(argv[2]) : 10;
    if (secs < 1 || secs > 3600) {
        fprintf(stderr, "bad SECONDS: %s (1 to 3600)\n", argv[2]);
        return 2;
    }
    char ci[2048];
    snprintf(ci, sizeof(ci), "%s application_name=" APP " tether_pool_max=4",
             argv[1]);
    tether_error err;
    if (tether_pool_open(&pool, ci, NULL, NULL, &err) != 0) {
        fprintf(stderr, "bad connection string: %s\n", err.message);
        return 2;
    }
    int rc = setup(&err);
    if (rc != 0) {
        fprintf(stderr, "setup: %s\n", err.message);
        tether_pool_destroy(pool);
        return 1;
    }
    worker w[THREADS];
    memset(w, 0, sizeof(w));
    for (int t = 0; t < THREADS; t++) {
        w[t].index = t;
        w[t].id = calloc(MAX_JOBS, sizeof(*w[t].id));
        w[t].how = calloc(MAX_JOBS, 1);
        if (!w[t].id || !w[t].how) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        pthread_create(&w[t].th, NULL, worker_main, &w[t]);
    }
    struct timespec pause = {secs, 0};
    nanosleep(&pause, NULL);
    atomic_store(&stop, 1);
    for (int t = 0; t < THREADS; t++)
        pthread_join(w[t].th, NULL);

    tether_pq_stats st;
    tether_pq_stats_get(&st);
    tether_pool_metrics m;
    tether_pool_metrics_get(pool, &m);
    int bad = check(w, &err);
    if (bad < 0)
        fprintf(stderr, "check: %s\n", err.message);
    printf("statements: %" PRIu64 " run, %ld past their deadline, the worst "
           "returned %lld ms after it\n",
           st.statements, atomic_load(&timeouts),
           (long long)(atomic_load(&worst_late_us) / 1000));
    printf("cancels: %" PRIu64 " sent, connections reused after one %" PRIu64
           ", closed %" PRIu64 "\n",
           st.cancels_sent, st.reused_after_cancel, st.discarded_after_cancel);
    printf("prepared: %" PRIu64 " prepares on %" PRIu64 " connections opened\n",
           st.prepares, m.created);
    printf("reservations: %" PRIu64 " kept across acquires, %" PRIu64
           " ended without their job (a statement cancelled, a connection "
           "lost)\n",
           m.txn_reservations, m.txn_lost);
    for (int t = 0; t < THREADS; t++) {
        free(w[t].id);
        free(w[t].how);
    }
    tether_pool_destroy(pool);
    for (tether_pq_stmt *s[] = {ins_job, upd_job, ins_item, slow}, **p = s;
         p < s + 4; p++)
        tether_pq_stmt_destroy(*p);
    return bad != 0;
}
