/* bench.c - `tether bench cycle`: acquire+release per second through a
 * tether pool over the sim driver (no I/O), T threads on a pool of P.
 * With more threads than connections it also samples acquire waits (1 in
 * 64 acquires) to show that no waiter starves. */
#include "bench.h"
#include "hist.h"
#include "lab.h"
#include "tether_sim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SAMPLE_MASK 63
#define CMD "bench cycle"

typedef struct worker {
    _Alignas(64) uint64_t ops;
    uint64_t errors;
    tether_pool *p;
    int sample;
    lat_hist waits; /* sampled acquire waits, ns */
} worker;

static _Atomic int stop;
/* The start: every worker and the main thread meet here. A barrier, not a
 * spin: thousands of spinning workers kept the main thread from creating
 * the rest (--threads 4096 never started). */
static pthread_barrier_t start;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void cycle_sampled(worker *w, uint64_t i) {
    tether_lease *l;
    int64_t t0 = (i & SAMPLE_MASK) == 0 ? now_ns() : 0;
    if (tether_pool_acquire(w->p, -1, &l, NULL) != 0) {
        w->errors++;
        return;
    }
    if (t0)
        lat_hist_add(&w->waits, (uint64_t)(now_ns() - t0));
    if (tether_lease_release(l) != 0) /* refused: a pool bug */
        w->errors++;
    w->ops++;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(&start);
    uint64_t ops = 0, errors = 0;
    if (w->sample) {
        for (uint64_t i = 0; !atomic_load_explicit(&stop, memory_order_relaxed);
             i++)
            cycle_sampled(w, i);
        return NULL;
    }
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        tether_lease *l;
        if (tether_pool_acquire(w->p, -1, &l, NULL) != 0) {
            errors++;
            continue;
        }
        errors += tether_lease_release(l) != 0; /* refused: a pool bug */
        ops++;
    }
    w->ops = ops;
    w->errors = errors;
    return NULL;
}

static int make_pool(const bench_opts *b, tether_sim **sim, tether_pool **p) {
    tether_error err = {0};
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    int rc = tether_sim_create(sim, &so, &err);
    po.driver = tether_driver_sim();
    po.driver_ctx = *sim;
    po.name = "bench";
    po.min_size = po.max_size = b->pool;
    po.max_creating = b->pool;
    po.max_waiters = b->threads + 1;
    po.acquire_timeout_ms = 60000;
    if (rc == 0)
        rc = tether_pool_create(p, &po, &err);
    tether_lease *warm[4096];
    int n = 0;
    while (rc == 0 && n < b->pool && n < 4096 &&
           tether_pool_acquire(*p, 5000, &warm[n], &err) == 0)
        n++;
    for (int i = 0; i < n; i++)
        tether_lease_release(warm[i]);
    if (rc)
        fprintf(stderr, "tether bench: %s\n", err.message);
    return rc;
}

typedef struct bench_result {
    double ops_per_sec;
    uint64_t errors;
    lat_summary wait; /* ns */
    int sampled;
} bench_result;

static void summarize(worker *ws, int n, double secs, bench_result *r) {
    uint64_t ops = 0;
    lat_hist waits = {0};
    memset(r, 0, sizeof(*r));
    for (int i = 0; i < n; i++) {
        ops += ws[i].ops;
        r->errors += ws[i].errors;
        lat_hist_merge(&waits, &ws[i].waits);
    }
    r->ops_per_sec = (double)ops / secs;
    r->sampled = waits.n > 0;
    r->wait = lat_hist_summary(&waits, 1.0);
}

/* Starts the workers, lets them run for the window and joins them;
 * returns the window's length in seconds. */
static double run_window(const bench_opts *b, worker *ws, pthread_t *th) {
    atomic_store(&stop, 0);
    pthread_barrier_init(&start, NULL, (unsigned)b->threads + 1);
    for (int i = 0; i < b->threads; i++)
        if (pthread_create(&th[i], NULL, worker_main, &ws[i])) {
            fprintf(stderr, "tether " CMD ": cannot start thread %d\n", i);
            exit(CLI_FAIL); /* the others wait at the barrier: no unwinding */
        }
    pthread_barrier_wait(&start);
    int64_t t0 = now_ns();
    struct timespec ts = {(time_t)(b->seconds_ms / 1000),
                          (long)(b->seconds_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < b->threads; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    return (double)(now_ns() - t0) / 1e9;
}

static int run_cycle(const bench_opts *b, bench_result *r) {
    tether_sim *sim = NULL;
    tether_pool *p = NULL;
    size_t n = (size_t)b->threads;
    worker *ws = aligned_alloc(64, sizeof(worker) * n);
    pthread_t *th = calloc(n, sizeof(pthread_t));
    int rc = ws && th ? make_pool(b, &sim, &p) : -1;
    if (rc == 0) {
        memset(ws, 0, sizeof(worker) * n);
        for (size_t i = 0; i < n; i++) {
            ws[i].p = p;
            ws[i].sample = b->threads > b->pool;
        }
        summarize(ws, b->threads, run_window(b, ws, th), r);
    } else if (!ws || !th) {
        fprintf(stderr, "tether " CMD ": out of memory\n");
    }
    free(ws);
    free(th);
    tether_pool_destroy(p);
    tether_sim_destroy(sim);
    return rc;
}

static void print_cycle(const bench_opts *b, const bench_result *r) {
    if (b->json) {
        printf("{\"bench\":\"cycle\",\"impl\":\"tether\",\"threads\":%d,"
               "\"pool\":%d,\"seconds\":%.3f,\"ops_per_sec\":%.0f,"
               "\"errors\":%llu",
               b->threads, b->pool, (double)b->seconds_ms / 1000.0,
               r->ops_per_sec, (unsigned long long)r->errors);
        if (r->sampled)
            printf(",\"p50_wait_ns\":%.0f,\"p99_wait_ns\":%.0f,"
                   "\"max_wait_ns\":%.0f",
                   r->wait.p50, r->wait.p99, r->wait.max);
        printf(",\"bytes_per_conn\":%zu}\n", tether_pool_bytes_per_conn());
        return;
    }
    printf("cycle: %d threads, pool %d: %.2f M acquire+release/s, %llu "
           "errors, %zu bytes of bookkeeping per connection\n",
           b->threads, b->pool, r->ops_per_sec / 1e6,
           (unsigned long long)r->errors, tether_pool_bytes_per_conn());
    if (r->sampled)
        printf("  acquire wait (1 in 64 sampled): p50 %.0f ns, p99 %.0f ns, "
               "max %.0f ns\n",
               r->wait.p50, r->wait.p99, r->wait.max);
}

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: tether bench cycle [--threads T] [--pool P] [--seconds "
            "S] [--json]\n\n"
            "Acquire+release through a tether pool over the sim driver (no "
            "I/O):\nT threads (default 1) on a pool of P connections "
            "(default 8) for S\nseconds (default 3). With T > P, acquire "
            "waits are sampled (1 in 64).\n"
            "Compare with the peers in one run: bench/run-cycle.\n\n"
            "       tether bench query --conninfo C [--threads T] [--pool P] "
            "[--seconds S]\n"
            "                          [--mode run|acquire] [--json]\n"
            "SELECT 1 through a PostgreSQL pool (tether bench query --help);"
            " peers:\nbench/run-query.\n");
}

int tether__bench_take_opt(const char *cmd, bench_opts *b, int opt,
                           const char *v) {
    switch (opt) {
    case BENCH_OPT_THREADS:
        return cli_parse_count(cmd, "--threads", v, 1, 4096, &b->threads);
    case BENCH_OPT_POOL:
        return cli_parse_count(cmd, "--pool", v, 1, 100000, &b->pool);
    case BENCH_OPT_SECONDS:
        return cli_parse_seconds(cmd, v, &b->seconds_ms) ? CLI_USAGE : 0;
    case BENCH_OPT_JSON:
        b->json = 1;
        return 0;
    default:
        /* not echoed: it may be a piece of an unquoted connection string */
        (void)v;
        return cli_usage_error(cmd, "unexpected argument (not shown: it may "
                                    "hold a password; quote a connection "
                                    "string whole)");
    }
}

static const struct option cycle_opts[] = {BENCH_OPTIONS, {NULL, 0, NULL, 0}};

/* cli_opt_fn of bench cycle: the shared options only. */
static int take_opt(void *ctx, int opt, const char *v) {
    return tether__bench_take_opt(CMD, ctx, opt, v);
}

int tether__lab_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        bench_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    if (!strcmp(argv[1], "query"))
        return tether__lab_bench_query(argc - 1, argv + 1);
    if (strcmp(argv[1], "cycle"))
        return cli_usage_error(
            "bench", "unknown benchmark '%s' (want cycle or query)", argv[1]);
    if (cli_want_help(argc - 1, argv + 1)) {
        bench_usage(stdout);
        return CLI_OK;
    }
    bench_opts b = {1, 8, 3000, 0};
    if (cli_parse_opts(CMD, argc - 1, argv + 1, cycle_opts, take_opt, &b))
        return CLI_USAGE;
    bench_result r;
    if (run_cycle(&b, &r))
        return CLI_FAIL;
    print_cycle(&b, &r);
    return CLI_OK;
}
