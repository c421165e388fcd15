/*
 * peer_common.h - shared harness for the peer "cycle" benchmarks
 * (apr_cycle.c, zdb_cycle.c).
 *
 * Everything here is header-only and static so that each peer program is a
 * single translation unit.  The hot loop itself lives in each program (no
 * function pointer on the acquire/release path); this header only provides:
 *
 *   - option parsing:   --threads T --pool P --seconds S [--json]
 *                       [--wait | --no-wait]
 *   - a run driver:     start barrier, timed window, stop flag, join
 *   - per-thread state: cache-line aligned, written only by its owner
 *   - a wait histogram: log-linear, fixed size, O(1) insert, no allocation
 *                       (bench/support/hist.h, the one `tether bench cycle` uses)
 *   - reporting:        one JSON line, or one human-readable line
 */
#ifndef TETHER_BENCH_PEER_COMMON_H
#define TETHER_BENCH_PEER_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_base.h"
#include "hist.h" /* the histogram of `tether bench cycle` */
#include <string.h>
#include <time.h>

#define PEER_CACHELINE 64

/* 1 in PEER_SAMPLE_EVERY acquires is timed with two clock_gettime calls. */
#define PEER_SAMPLE_EVERY 64u

struct peer_opts {
    int threads;
    int pool;
    double seconds;
    bool json;
    /*
     * Sample 1 in 64 acquire waits.  Default: only when threads > pool,
     * where acquires can actually wait; for threads <= pool the two
     * clock_gettime calls would cost ~2% of an apr_reslist cycle for
     * nothing.  --wait / --no-wait force it on / off.
     */
    bool wait_sample;
};

/*
 * Per-thread state.  The owner thread keeps its counters in locals in the
 * hot loop and stores them here once at the end; the struct is aligned (and
 * therefore sized) to a whole number of cache lines so no two threads ever
 * share a line.
 */
struct peer_thread {
    alignas(PEER_CACHELINE) uint64_t ops;
    uint64_t failures;
    unsigned index;
    void *ctx;
    pthread_t tid;
    lat_hist waits; /* the sampled acquire waits, ns */
};

/* Stop flag and start barrier, each on its own cache line. */
static struct {
    alignas(PEER_CACHELINE) atomic_int stop;
    alignas(PEER_CACHELINE) pthread_barrier_t start;
} peer_sync;

static inline bool peer_should_stop(void)
{
    return atomic_load_explicit(&peer_sync.stop, memory_order_relaxed) != 0;
}

static inline void peer_record_wait(struct peer_thread *t, uint64_t ns)
{
    lat_hist_add(&t->waits, ns);
}

/* Called by each worker before its loop: waits for all workers + main. */
static inline void peer_wait_start(void)
{
    int rc = pthread_barrier_wait(&peer_sync.start);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD) {
        fprintf(stderr, "pthread_barrier_wait: %s\n", strerror(rc));
        exit(2);
    }
}

static void peer_usage(const char *prog, FILE *out)
{
    fprintf(out,
            "usage: %s --threads T --pool P --seconds S [--json] [--wait|--no-wait]\n"
            "  --threads T  worker threads (>= 1)\n"
            "  --pool P     pool size: min = max = P (>= 1)\n"
            "  --seconds S  measurement window in seconds (> 0)\n"
            "  --json       print one JSON line instead of a human line\n"
            "  --wait       sample 1 in 64 acquire waits (p50/p99/max_wait_ns);\n"
            "               default: on only when T > P\n"
            "  --no-wait    never sample acquire waits\n",
            prog);
}

/* Returns 0 on success, 1 if --help was printed, -1 on error. */
static int peer_parse(int argc, char **argv, struct peer_opts *o)
{
    const char *prog = argv[0];
    o->threads = 1;
    o->pool = 8;
    o->seconds = 3.0;
    o->json = false;
    int wait = -1; /* -1: auto (T > P) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--no-wait") == 0) {
            wait = 0;
        } else if (strcmp(a, "--wait") == 0) {
            wait = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            peer_usage(prog, stdout);
            return 1;
        } else if (strcmp(a, "--threads") == 0 && v) {
            if (bench_parse_int(prog, "--threads", v, 1000000, &o->threads))
                return -1;
            i++;
        } else if (strcmp(a, "--pool") == 0 && v) {
            if (bench_parse_int(prog, "--pool", v, 1000000, &o->pool))
                return -1;
            i++;
        } else if (strcmp(a, "--seconds") == 0 && v) {
            if (bench_parse_seconds(prog, v, &o->seconds))
                return -1;
            i++;
        } else {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n", prog, a);
            peer_usage(prog, stderr);
            return -1;
        }
    }
    o->wait_sample = wait < 0 ? o->threads > o->pool : wait != 0;
    return 0;
}

struct peer_result {
    double elapsed_s;
    uint64_t ops;
    uint64_t failures;
    uint64_t samples;
    uint64_t p50_ns, p99_ns, max_ns;
};

/*
 * Start o->threads workers running fn(&threads[i]), release them together
 * through the barrier, let them run for o->seconds, raise the stop flag and
 * join.  The window is measured by the main thread from barrier release to
 * the moment the stop flag is raised.
 */
static int peer_run(const struct peer_opts *o, void *(*fn)(void *), void *ctx,
                    struct peer_result *r)
{
    size_t n = (size_t)o->threads;
    struct peer_thread *th = aligned_alloc(PEER_CACHELINE, n * sizeof *th);
    if (!th) {
        fprintf(stderr, "out of memory\n");
        return -1;
    }
    memset(th, 0, n * sizeof *th);
    atomic_store(&peer_sync.stop, 0);
    for (size_t i = 0; i < n; i++) {
        th[i].index = (unsigned)i;
        th[i].ctx = ctx;
    }
    if (bench_spawn(&peer_sync.start, n, fn, th, sizeof *th,
                    offsetof(struct peer_thread, tid))) {
        free(th);
        return -1;
    }
    peer_wait_start();
    uint64_t t0 = bench_now_ns();
    bench_sleep_for(o->seconds);
    uint64_t t1 = bench_now_ns();
    atomic_store_explicit(&peer_sync.stop, 1, memory_order_relaxed);
    for (size_t i = 0; i < n; i++)
        pthread_join(th[i].tid, NULL);
    pthread_barrier_destroy(&peer_sync.start);

    memset(r, 0, sizeof *r);
    r->elapsed_s = (double)(t1 - t0) / 1e9;
    static lat_hist waits; /* ~8 KB: not on the stack */
    memset(&waits, 0, sizeof waits);
    for (size_t i = 0; i < n; i++) {
        r->ops += th[i].ops;
        r->failures += th[i].failures;
        lat_hist_merge(&waits, &th[i].waits);
    }
    r->samples = waits.n;
    r->p50_ns = lat_hist_pct(&waits, 50);
    r->p99_ns = lat_hist_pct(&waits, 99);
    r->max_ns = waits.max;
    free(th);
    return 0;
}

static void peer_report(const char *impl, const struct peer_opts *o,
                        const struct peer_result *r)
{
    double ops_per_sec = r->elapsed_s > 0 ? (double)r->ops / r->elapsed_s : 0.0;
    if (o->json) {
        printf("{\"bench\":\"cycle\",\"impl\":\"%s\",\"threads\":%d,\"pool\":%d,"
               "\"seconds\":%g,\"ops_per_sec\":%.0f,\"failures\":%llu",
               impl, o->threads, o->pool, o->seconds, ops_per_sec,
               (unsigned long long)r->failures);
        if (r->samples > 0)
            printf(",\"p50_wait_ns\":%llu,\"p99_wait_ns\":%llu,\"max_wait_ns\":%llu",
                   (unsigned long long)r->p50_ns, (unsigned long long)r->p99_ns,
                   (unsigned long long)r->max_ns);
        printf("}\n");
    } else {
        printf("cycle %-12s threads=%-3d pool=%-3d seconds=%g  %12.0f cycles/s"
               "  (%.2f M/s, %llu cycles in %.3f s)  failures=%llu",
               impl, o->threads, o->pool, o->seconds, ops_per_sec, ops_per_sec / 1e6,
               (unsigned long long)r->ops, r->elapsed_s,
               (unsigned long long)r->failures);
        if (r->samples > 0)
            printf("  wait p50=%lluns p99=%lluns max=%lluns (%llu samples)",
                   (unsigned long long)r->p50_ns, (unsigned long long)r->p99_ns,
                   (unsigned long long)r->max_ns, (unsigned long long)r->samples);
        printf("\n");
    }
    fflush(stdout);
}

#endif /* TETHER_BENCH_PEER_COMMON_H */
