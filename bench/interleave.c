/* interleave.c - the pool's throughput against dedicated connections, on
 * the same threads and the same server backends, in alternating phases of
 * one window (bench/run-query runs it inside a scratch cluster):
 *
 *   bench_interleave --conninfo C [--threads T] [--pool P] [--seconds S]
 *                    [--phase-ms L] [--settle-ms S] [--acquire]
 *                    [--own-conns] [--control] [--json]
 *                    [--sql TEXT [--param-max N]] [--prepared] [--gain]
 *                    [--libpq]
 *
 * A tether pool of P connections (default 8) is filled before the window.
 * The window is cut into phases of L ms (default 25), in the order
 * D P P D D P P D ... so that neither kind always comes first:
 *
 *   D (dedicated): each of the first P threads takes one pool connection
 *     for the whole phase and loops SELECT 1 on it with PQexec
 *     (query_dedicated's loop); the other T-P threads sleep until the
 *     phase ends. With --own-conns the first P threads use libpq
 *     connections of their own instead, opened before the window.
 *   P (pooled): all T threads loop SELECT 1 through tether_pool_run_for,
 *     one acquire and release per statement (with --acquire:
 *     tether_pool_acquire, PQexec, tether_lease_release).
 *
 * Both kinds run on the same client threads, against the same server
 * backends, in the same moments of the machine's noise, interleaved every
 * L ms, so what differs is the pool's work per statement (and, with T > P,
 * its waiting and hand-overs). With --own-conns the two kinds use
 * different backends, and where the scheduler placed those moved the
 * ratio by up to 10 % from one cluster to the next (bench/README.md).
 * Each pooled call's limit is the end of its phase (rounded up to the
 * ms): a caller still queued then gives up with TETHER_ETIMEDOUT, which is
 * not counted as an error, so no pooled caller spills into the next phase;
 * a call served after its phase ended does no statement. The first settle
 * ms (default 2) of each phase are not counted: they hold the switch
 * between kinds. The ratio is pooled ops / dedicated ops over the counted
 * time; its spread is shown over blocks of four phases (D P P D). Both
 * loops do the same bookkeeping per statement (two clock reads, one
 * histogram entry: the pooled one's wait), so that what differs is the
 * pool's own work. Waits
 * for a connection in pooled phases are timed like tether bench query's:
 * from the call to the start of the work, over the calls that were served.
 * With --control the P phases run exactly as the D phases do (an A/A
 * test): its ratio shows how far apart two identical kinds land, the
 * method's own error. The client CPU per statement of each kind is each
 * working thread's CPU time (CLOCK_THREAD_CPUTIME_ID, read at the start
 * and end of its phases, not per statement) over the statements its
 * phases did, settle time included; threads that only sleep through a
 * phase are not counted.
 *
 * --sql TEXT runs TEXT instead of SELECT 1, its parameters $1..$n each an
 * integer drawn per call in [1, --param-max] (default 100000: an aid at
 * pgbench's scale 1): pooled phases with tether_pq_exec_params, dedicated
 * ones with PQexecParams. --prepared (with no --sql: SELECT 1) makes it a
 * statement declared on the pool (tether_pq_declare) that pooled phases
 * run with tether_pq_exec_prepared, while dedicated phases PQprepare it
 * once per connection and run PQexecPrepared. --gain (with --sql) puts the
 * pool on both sides: D phases run the statement unprepared through the
 * pool, P phases prepared, and the ratio is the gain of preparing.
 * --libpq (with --sql or --prepared) runs the pooled statements with
 * libpq's calls instead of tether_pq's (PQexecParams, or PQexecPrepared
 * of a statement PQprepared on every pool connection before the window):
 * beside the default, it tells the pool's own cost from that of
 * tether_pq's statement calls.
 * Pooled statements have a timeout of their own (10 s), not the run's
 * deadline: a statement in flight when its phase ends completes, as a
 * dedicated one does, instead of being cancelled. */
#include "query_common.h"
#include "query_sql.h"

#include <tether.h>
#include <tether_pq.h>

#include "pool_fill.h"

#define MAX_PHASES 65536
#define MAX_READY 1024     /* connections the D loop prepared on */
#define STATEMENT_MS 10000 /* a pooled --sql statement's own timeout */

enum { KIND_D = 0, KIND_P = 1 };

struct inter {
    const char *conninfo;
    int conns;          /* P */
    uint64_t phase_ns;  /* L */
    uint64_t settle_ns; /* not counted at the start of each phase */
    tether_pool *pool;
    _Atomic uint64_t t0;         /* the first phase's start */
    _Atomic uint64_t *phase_ops; /* counted ops per phase */
    int nphases;
    int control;   /* 1: pooled phases run as dedicated ones (A/A) */
    int acquire;   /* 1: pooled phases acquire and release, not run() */
    int own_conns; /* 1: dedicated phases on libpq connections of their own */
    pthread_mutex_t lock;
    lat_hist wait[2];       /* pooled phases: wait; dedicated: unused */
    uint64_t cpu_ns[2];     /* per kind: working threads' CPU time */
    uint64_t statements[2]; /* per kind: statements done in that time */
    uint64_t errors;
    _Atomic uint64_t gave_up; /* pooled calls still waiting at phase end */
    struct q_sql sql;         /* --sql; text NULL: SELECT 1 */
    int prepared;             /* --prepared */
    int gain;                 /* --gain: D phases pooled, unprepared */
    int libpq;                /* --libpq: pooled statements through libpq */
    tether_pq_stmt *stmt;     /* the declared statement (--prepared) */
    PGconn *ready[MAX_READY]; /* held connections prepared on (lock) */
    int nready;
};

struct op_ctx {
    struct inter *c;
    struct q_thread *t;
    uint64_t t0, k; /* start and phase of the call */
    int skipped;    /* the phase was over when the connection came */
    int prepared;   /* --sql: run the declared statement */
    uint64_t *rng;  /* --sql: the thread's parameter generator */
};

static int kind_of(uint64_t k) {
    return (int)((k & 1) ^ ((k >> 1) & 1)); /* D P P D D P P D */
}

static uint64_t phase_of(const struct inter *c, uint64_t now) {
    return (now - c->t0) / c->phase_ns;
}

static void count(struct inter *c, uint64_t k, uint64_t start) {
    if (start - c->t0 - k * c->phase_ns >= c->settle_ns &&
        k < (uint64_t)c->nphases)
        atomic_fetch_add_explicit(&c->phase_ops[k], 1, memory_order_relaxed);
}

/* The --sql statement through tether's calls: declared, or with its
 * parameters. */
static int pooled_sql(struct op_ctx *o, PGconn *conn, tether_error *err) {
    struct q_sql_args a;
    q_sql_draw(&o->c->sql, o->rng, &a);
    if (o->c->libpq)
        return q_sql_exec(o->t, conn, &o->c->sql, o->prepared, &a)
                   ? 0
                   : tether_error_set(err, TETHER_EQUERY,
                                      TETHER_CLASS_PERMANENT,
                                      "statement failed");
    tether_pq_params pp = {o->c->sql.nparams, NULL, a.values, NULL, NULL, 0};
    PGresult *r = NULL;
    int rc = o->prepared ? tether_pq_exec_prepared(conn, o->c->stmt, &pp,
                                                   STATEMENT_MS, &r, err)
                         : tether_pq_exec_params(conn, o->c->sql.text, &pp,
                                                 STATEMENT_MS, &r, err);
    if (rc != 0)
        q_error(o->t, "statement", err->message);
    PQclear(r);
    return rc;
}

static int work(void *handle, void *arg, const tether_attempt *a,
                tether_error *err) {
    struct op_ctx *o = arg;
    (void)a;
    uint64_t now = bench_now_ns();
    lat_hist_add(&o->t->wait, now - o->t0);
    if (phase_of(o->c, now) != o->k) {
        o->skipped = 1; /* no statement, not counted */
        return 0;
    }
    if (o->c->sql.text)
        return pooled_sql(o, handle, err);
    return q_select1(o->t, handle)
               ? 0
               : tether_error_set(err, TETHER_EQUERY, TETHER_CLASS_PERMANENT,
                                  "SELECT 1 failed");
}

/* The ms left until phase k ends, rounded up: a pooled call's limit, so
 * that no caller still waits for a connection in the next phase. */
static int64_t left_ms(const struct inter *c, uint64_t k, uint64_t now) {
    uint64_t end = c->t0 + (k + 1) * c->phase_ns;
    return now >= end ? 0 : (int64_t)((end - now + 999999) / 1000000);
}

/* --prepared: whether the D loop's statement is prepared on conn, a
 * connection held from the pool; if not, PQprepare it once, as a program
 * that keeps its connections does. */
static bool ready_on(struct inter *c, struct q_thread *t, PGconn *conn) {
    bool seen = false;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->nready && !seen; i++)
        seen = c->ready[i] == conn;
    pthread_mutex_unlock(&c->lock);
    if (seen)
        return true;
    if (!q_sql_prepare(t, conn, &c->sql))
        return false;
    pthread_mutex_lock(&c->lock);
    if (c->nready < MAX_READY)
        c->ready[c->nready++] = conn;
    pthread_mutex_unlock(&c->lock);
    return true;
}

/* One dedicated statement: SELECT 1, or --sql through libpq. */
static bool dedicated_once(struct inter *c, struct q_thread *t, PGconn *conn,
                           uint64_t *rng) {
    if (!c->sql.text)
        return q_select1(t, conn);
    struct q_sql_args a;
    q_sql_draw(&c->sql, rng, &a);
    return q_sql_exec(t, conn, &c->sql, c->prepared, &a);
}

/* A dedicated phase k: loop PQexec on one connection for the whole
 * phase: this thread's own (--own-conns), or by default one held from the
 * pool from the phase's start to its end, so that both kinds of phase
 * use the same server backends. */
static uint64_t dedicated_phase(struct inter *c, struct q_thread *t,
                                PGconn *own, uint64_t k, uint64_t *rng) {
    uint64_t done = 0;
    tether_lease *l = NULL;
    PGconn *conn = own;
    if (!conn) {
        tether_error err;
        int rc = tether_pool_acquire(c->pool, left_ms(c, k, bench_now_ns()), &l,
                                     &err);
        if (rc != 0) {
            if (rc != TETHER_ETIMEDOUT)
                t->errors++;
            bench_sleep_until(c->t0 + (k + 1) * c->phase_ns);
            return 0;
        }
        conn = tether_lease_handle(l);
        if (c->sql.text && c->prepared && !ready_on(c, t, conn))
            t->errors++;
    }
    for (;;) {
        uint64_t now = bench_now_ns();
        if (q_should_stop() || phase_of(c, now) != k)
            break;
        /* The pooled loop's bookkeeping, without the pool: work() times
         * the wait with a second clock read into a histogram. */
        lat_hist_add(&t->op, bench_now_ns() - now);
        if (dedicated_once(c, t, conn, rng)) {
            count(c, k, now);
            done++;
        } else {
            t->errors++;
        }
    }
    if (l)
        tether_lease_release(l);
    return done;
}

/* One pooled statement in acquire mode: acquire, SELECT 1, release. */
static int acquire_once(struct op_ctx *o, tether_error *err) {
    tether_lease *l = NULL;
    int rc =
        tether_pool_acquire(o->c->pool, left_ms(o->c, o->k, o->t0), &l, err);
    if (rc != 0)
        return rc;
    rc = work(tether_lease_handle(l), o, NULL, err);
    tether_lease_release(l);
    return rc;
}

/* A pooled phase k: one tether_pool_run_for (or, with --acquire, one
 * acquire and release) per statement; a wait still unserved when the
 * phase ends gives up (TETHER_ETIMEDOUT, not an error). */
static uint64_t pooled_phase(struct inter *c, struct q_thread *t, uint64_t k,
                             int prepared, uint64_t *rng) {
    uint64_t done = 0;
    for (;;) {
        struct op_ctx o = {c, t, bench_now_ns(), k, 0, prepared, rng};
        if (q_should_stop() || phase_of(c, o.t0) != k)
            break;
        tether_error err;
        int rc = c->acquire
                     ? acquire_once(&o, &err)
                     : tether_pool_run_for(c->pool, TETHER_IDEMPOTENT,
                                           left_ms(c, k, o.t0), work, &o, &err);
        if (rc == TETHER_ETIMEDOUT) {
            atomic_fetch_add_explicit(&c->gave_up, 1, memory_order_relaxed);
            continue;
        }
        if (rc != 0) {
            t->errors++;
        } else if (!o.skipped) {
            count(c, k, o.t0);
            done++;
        }
    }
    return done;
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker(void *arg) {
    struct q_thread *t = arg;
    struct inter *c = t->ctx;
    char why[256] = "";
    PGconn *conn = NULL;
    int holder = (int)t->index < c->conns; /* runs the dedicated phases */
    if (holder && c->own_conns)
        conn = q_connect(c->conninfo, why, sizeof why);
    if (conn && c->sql.text && c->prepared && !q_sql_prepare(t, conn, &c->sql))
        snprintf(why, sizeof why, "%s", t->error);
    if (!q_start(t, why[0] ? why : NULL)) {
        PQfinish(conn);
        return NULL;
    }
    uint64_t zero = 0, cpu[2] = {0, 0}, done[2] = {0, 0};
    uint64_t rng = q_sql_seed(t->index);
    atomic_compare_exchange_strong(&c->t0, &zero, bench_now_ns());
    while (!q_should_stop()) {
        uint64_t k = phase_of(c, bench_now_ns()), c0 = thread_cpu_ns();
        int kind = kind_of(k);
        if (kind == KIND_P && !c->control) {
            done[kind] += pooled_phase(c, t, k, c->prepared, &rng);
        } else if (kind == KIND_D && c->gain) {
            done[kind] += pooled_phase(c, t, k, 0, &rng);
        } else if (holder) {
            done[kind] += dedicated_phase(c, t, conn, k, &rng);
        } else {
            bench_sleep_until(c->t0 + (k + 1) * c->phase_ns);
            continue;
        }
        cpu[kind] += thread_cpu_ns() - c0;
    }
    PQfinish(conn);
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < 2; i++) {
        c->cpu_ns[i] += cpu[i];
        c->statements[i] += done[i];
    }
    lat_hist_merge(&c->wait[KIND_P], &t->wait);
    c->errors += t->errors;
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The client CPU per statement of one kind, in us. */
static double cpu_us(const struct inter *c, int kind) {
    return c->statements[kind]
               ? (double)c->cpu_ns[kind] / 1e3 / (double)c->statements[kind]
               : 0;
}

/* Ends the report's line; with --sql, what ran in each kind of phase. */
static void report_sql(const struct q_opts *o, const struct inter *c) {
    if (!c->sql.text) {
        printf(o->json ? "}\n" : "\n");
        return;
    }
    const char *d = c->gain       ? "pooled-unprepared"
                    : c->prepared ? "dedicated-prepared"
                                  : "dedicated-unprepared";
    const char *p = c->control    ? d
                    : c->prepared ? "pooled-prepared"
                                  : "pooled-unprepared";
    printf(o->json ? ",\"sql\":1,\"prepared\":%d,\"gain\":%d,\"libpq\":%d,"
                     "\"nparams\":%d,\"d_phases\":\"%s%s\","
                     "\"p_phases\":\"%s%s\"}\n"
                   : "; sql prepared=%d gain=%d libpq=%d nparams=%d, D phases "
                     "%s%s, P phases %s%s\n",
           c->prepared, c->gain, c->libpq, c->sql.nparams, d,
           c->gain && c->libpq ? "-libpq" : "", p,
           c->libpq && !c->control ? "-libpq" : "");
}

/* Sums the complete phases; per block of four (D P P D) a ratio. */
static void report(const struct q_opts *o, struct inter *c, int phases) {
    uint64_t sum[2] = {0, 0};
    int nblocks = phases / 4;
    double *ratio = calloc((size_t)(nblocks ? nblocks : 1), sizeof *ratio);
    int nr = 0;
    for (int b = 0; b < nblocks; b++) {
        uint64_t s[2] = {0, 0};
        for (int k = 4 * b; k < 4 * b + 4; k++)
            s[kind_of((uint64_t)k)] += atomic_load(&c->phase_ops[k]);
        sum[KIND_D] += s[KIND_D];
        sum[KIND_P] += s[KIND_P];
        if (s[KIND_D] && ratio)
            ratio[nr++] = 100.0 * (double)s[KIND_P] / (double)s[KIND_D];
    }
    if (ratio && nr)
        qsort(ratio, (size_t)nr, sizeof *ratio, cmp_double);
    double total = sum[KIND_D] ? 100.0 * (double)sum[KIND_P] / sum[KIND_D] : 0;
    double q1 = nr ? ratio[nr / 4] : 0, med = nr ? ratio[nr / 2] : 0,
           q3 = nr ? ratio[(3 * nr) / 4] : 0;
    double counted_s =
        (double)nblocks * 2 * (double)(c->phase_ns - c->settle_ns) / 1e9;
    const char *fmt =
        o->json
            ? "{\"bench\":\"interleave\",\"mode\":\"%s\",\"dedicated\":\"%s\","
              "\"control\":%d,\"threads\":%d,\"pool\":%d,\"phase_ms\":%.1f,"
              "\"blocks\":%d,\"dedicated_ops_per_sec\":%.0f,"
              "\"pooled_ops_per_sec\":%.0f,\"ratio_pct\":%.2f,"
              "\"block_ratio_q1_pct\":%.2f,\"block_ratio_median_pct\":%.2f,"
              "\"block_ratio_q3_pct\":%.2f,\"wait_p99_us\":%.1f,"
              "\"wait_max_us\":%.1f,\"dedicated_cpu_us\":%.3f,"
              "\"pooled_cpu_us\":%.3f,\"gave_up_at_phase_end\":%llu,"
              "\"errors\":%llu"
            : "interleave mode=%s dedicated=%s control=%d threads=%d pool=%d "
              "phase %.1f ms, %d blocks: dedicated %.0f ops/s, pooled %.0f "
              "ops/s, ratio %.2f %% "
              "(blocks: q1 %.1f, median %.1f, q3 %.1f); pooled wait p99 "
              "%.1f us, max %.1f us; client CPU per statement dedicated %.3f "
              "us, "
              "pooled %.3f us; gave up at phase end %llu; errors %llu";
    printf(fmt, c->acquire ? "acquire" : "run", c->own_conns ? "own" : "held",
           c->control, o->threads, c->conns, (double)c->phase_ns / 1e6, nblocks,
           counted_s > 0 ? (double)sum[KIND_D] / counted_s : 0,
           counted_s > 0 ? (double)sum[KIND_P] / counted_s : 0, total, q1, med,
           q3, lat_hist_us(lat_hist_pct(&c->wait[KIND_P], 99)),
           lat_hist_us(lat_hist_pct(&c->wait[KIND_P], 100)), cpu_us(c, KIND_D),
           cpu_us(c, KIND_P), (unsigned long long)atomic_load(&c->gave_up),
           (unsigned long long)c->errors);
    report_sql(o, c);
    free(ratio);
}

/* The --sql options: parses the statement and, with --prepared, declares
 * it; 0, or -1 with the reason on stderr. */
static int sql_setup(struct inter *c, const char *sql, const char *pmax) {
    char why[128], *end = NULL;
    long max = strtol(pmax, &end, 10);
    if (c->prepared && !sql)
        sql = "SELECT 1";
    if (!sql && (c->gain || c->libpq || strcmp(pmax, "100000") != 0)) {
        fprintf(stderr, "bench_interleave: --gain, --libpq and --param-max "
                        "want --sql\n");
        return -1;
    }
    if (!sql)
        return 0;
    if (end == pmax || *end || q_sql_init(&c->sql, sql, max, why, sizeof why)) {
        fprintf(stderr, "bench_interleave: --sql/--param-max: %s\n",
                end == pmax || *end ? "--param-max wants a number" : why);
        return -1;
    }
    if (c->gain && (c->control || c->own_conns)) {
        fprintf(stderr, "bench_interleave: --gain excludes --control and "
                        "--own-conns\n");
        return -1;
    }
    c->prepared |= c->gain;
    if (c->libpq)
        return 0; /* prepared on the connections: prepare_all */
    tether_error err;
    if (c->prepared && tether_pq_declare("bench", sql, c->sql.nparams, NULL,
                                         &c->stmt, &err) != 0) {
        fprintf(stderr, "bench_interleave: declare: %s\n", err.message);
        return -1;
    }
    return 0;
}

/* --libpq --prepared: PQprepare the statement on every connection of the
 * pool (filled: bench_pool_open) before the window; 0 or -1. */
static int prepare_all(struct inter *c) {
    static struct q_thread t;
    tether_lease *l[256];
    tether_error err;
    int n = 0, rc = 0;
    while (n < c->conns && n < 256 &&
           tether_pool_acquire(c->pool, 10000, &l[n], &err) == 0)
        n++;
    for (int i = 0; i < n; i++) {
        if (rc == 0 && !ready_on(c, &t, tether_lease_handle(l[i])))
            rc = -1;
        tether_lease_release(l[i]);
    }
    if (rc != 0 || n != c->conns)
        fprintf(stderr, "bench_interleave: --libpq: %s\n",
                t.error[0] ? t.error : "the pool's connections");
    return rc != 0 || n != c->conns ? -1 : 0;
}

/* Takes "--name V" out of argv as a number of ms (q_parse knows the
 * common options only). */
static int take_ms(int *argc, char **argv, const char *name, double *ms) {
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], name) != 0)
            continue;
        char *end = NULL;
        double v = i + 1 < *argc ? strtod(argv[i + 1], &end) : 0;
        if (i + 1 >= *argc || end == argv[i + 1] || *end || !(v >= 0) ||
            v > 60000) {
            fprintf(stderr, "bench_interleave: %s wants ms in 0..60000\n",
                    name);
            return -1;
        }
        *ms = v;
        bench_argv_drop(argc, argv, i--, 1);
    }
    return 0;
}

/* Takes "--name V" out of argv into *v (left alone when absent); -1 when
 * the value is missing. */
static int take_str(int *argc, char **argv, const char *name, const char **v) {
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], name) != 0)
            continue;
        if (i + 1 >= *argc) {
            fprintf(stderr, "bench_interleave: %s wants a value\n", name);
            return -1;
        }
        *v = argv[i + 1];
        bench_argv_drop(argc, argv, i--, 1);
    }
    return 0;
}

/* Takes the flag name out of argv; returns whether it was there. */
static int take_flag(int *argc, char **argv, const char *name) {
    int seen = 0;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], name) != 0)
            continue;
        seen = 1;
        bench_argv_drop(argc, argv, i--, 0);
    }
    return seen;
}

int main(int argc, char **argv) {
    static struct inter c;
    struct q_opts o = {.impl = "interleave"};
    double phase_ms = 25, settle_ms = 2;
    c.control = take_flag(&argc, argv, "--control");
    c.acquire = take_flag(&argc, argv, "--acquire");
    c.own_conns = take_flag(&argc, argv, "--own-conns");
    c.prepared = take_flag(&argc, argv, "--prepared");
    c.gain = take_flag(&argc, argv, "--gain");
    c.libpq = take_flag(&argc, argv, "--libpq");
    const char *sql = NULL, *pmax = "100000";
    if (take_ms(&argc, argv, "--phase-ms", &phase_ms) != 0 ||
        take_ms(&argc, argv, "--settle-ms", &settle_ms) != 0 ||
        take_str(&argc, argv, "--sql", &sql) != 0 ||
        take_str(&argc, argv, "--param-max", &pmax) != 0 ||
        sql_setup(&c, sql, pmax) != 0)
        return 2;
    int prc = q_parse(
        argc, argv,
        "SELECT 1 on a tether pool of P connections, in alternating phases\n"
        "of --phase-ms (25): P threads each holding one connection (the\n"
        "dedicated baseline), then all T threads through tether_pool_run.\n"
        "--settle-ms (2) at the start of each phase are not counted.\n"
        "--acquire: pooled phases acquire and release instead of run().\n"
        "--own-conns: dedicated phases on P libpq connections of their own\n"
        "(default: P connections held from the pool for the whole phase).\n"
        "--control: both kinds of phase dedicated (the method's A/A test).\n"
        "--sql TEXT: TEXT instead of SELECT 1 (tether_pq_exec_params /\n"
        "PQexecParams); its $1..$n each an integer drawn per call in\n"
        "[1, --param-max] (100000).\n"
        "--prepared: declared on the pool (tether_pq_exec_prepared) and,\n"
        "in dedicated phases, PQprepare once per connection and\n"
        "PQexecPrepared (no --sql: SELECT 1).\n"
        "--gain (with --sql): D phases run it unprepared through the pool,\n"
        "P phases prepared: the ratio is the gain of preparing.\n"
        "--libpq: pooled statements through libpq's calls, not tether_pq's\n"
        "(prepared on every pool connection before the window).",
        &o);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    c.conns = o.pool > 0 ? o.pool : 8;
    if (c.conns > o.threads || phase_ms < 1 || settle_ms >= phase_ms) {
        fprintf(stderr, "bench_interleave: want --pool <= --threads and "
                        "0 <= --settle-ms < --phase-ms >= 1\n");
        return 2;
    }
    c.conninfo = o.conninfo;
    c.phase_ns = (uint64_t)(phase_ms * 1e6);
    c.settle_ns = (uint64_t)(settle_ms * 1e6);
    double n = o.seconds * 1e9 / (double)c.phase_ns + 2;
    c.nphases = n > MAX_PHASES ? MAX_PHASES : (int)n;
    c.phase_ops = calloc((size_t)c.nphases, sizeof *c.phase_ops);
    pthread_mutex_init(&c.lock, NULL);
    if (!c.phase_ops ||
        bench_pool_open(&c.pool, c.conninfo, c.conns, "bench_interleave") != 0)
        return 2;
    if (c.libpq && c.prepared && prepare_all(&c) != 0) {
        tether_pool_destroy(c.pool);
        return 2;
    }
    struct q_result r;
    int rc = q_run(&o, worker, &c, &r);
    if (rc == 0) {
        uint64_t done = (uint64_t)(r.elapsed_s * 1e9 - 1e6) / c.phase_ns;
        report(&o, &c, done < (uint64_t)c.nphases ? (int)done : c.nphases);
    }
    tether_pool_destroy(c.pool);
    tether_pq_stmt_destroy(c.stmt);
    free(c.phase_ops);
    return rc != 0 || c.errors ? 1 : 0;
}
