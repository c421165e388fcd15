/*
 * query_common.h - the shared harness of the "query" benchmarks: the peers
 * (bench/peers/query_dedicated.c, query_connect.c, query_apr.c,
 * query_zdb.c), the counterparts of `tether bench query`, and bench_corun
 * and bench_interleave (bench/corun.c, bench/interleave.c). Compiled once,
 * in the tether_benchsupport library (query_common.c), which each of them
 * links. It provides:
 *
 *   - option parsing:  --conninfo C --threads T --pool P --seconds S
 *                      [--json] [--impl-name NAME]
 *   - a run driver:    per-thread setup (connections are opened before the
 *                      window), start barrier, timed window, stop flag, join
 *   - per-operation timing: every operation is bracketed by
 *                      clock_gettime(CLOCK_MONOTONIC) (a SELECT 1 round trip
 *                      costs tens of microseconds, a clock read ~25 ns), and
 *                      so is the part that gets a connection (the "wait"),
 *                      into per-thread log-linear histograms (percentiles
 *                      within ~3 %, max exact; hist.h, the one
 *                      `tether bench query` uses), merged at the end
 *   - reporting:       one JSON line with the shape of `tether bench query
 *                      --json`, or one human-readable line
 *
 * What runs once per operation (q_should_stop, q_op_done, q_select1) is
 * static inline here, so that it inlines into each program's loop.
 */
#ifndef TETHER_BENCH_QUERY_COMMON_H
#define TETHER_BENCH_QUERY_COMMON_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "bench_base.h"
#include "hist.h" /* the histogram of `tether bench query` */

#define Q_CACHELINE 64

struct q_opts {
    const char *prog;
    const char *conninfo;
    const char *impl; /* "impl" in the output; --impl-name overrides */
    int threads;
    int pool; /* 0 until given: each peer picks its default */
    double seconds;
    bool json;
};

/*
 * Per-thread state, written only by its owner (counters are kept in the
 * struct directly: one op costs tens of microseconds, so a store per op to
 * an owned cache line is noise).  Aligned to whole cache lines.
 */
struct q_thread {
    alignas(Q_CACHELINE) uint64_t ops;
    uint64_t errors;  /* operations that failed */
    uint64_t retries; /* libzdb: getConnection() returned NULL, tried again */
    unsigned index;
    void *ctx;
    pthread_t tid;
    char error[256]; /* the first error, for stderr */
    lat_hist op;     /* whole operation */
    lat_hist wait;   /* getting the connection (acquire / connect) */
};

/* The run's shared flags and its start barrier (query_common.c). */
struct q_sync_state {
    alignas(Q_CACHELINE) atomic_int stop;
    alignas(Q_CACHELINE) atomic_int setup_failed;
    pthread_barrier_t start;
};
extern struct q_sync_state q_sync;

static inline bool q_should_stop(void) {
    return atomic_load_explicit(&q_sync.stop, memory_order_relaxed) != 0;
}

/* Record the first error of a thread (message up to its first newline). */
void q_error(struct q_thread *t, const char *what, const char *msg);

/*
 * Called by each worker after its setup (setup_error NULL: it succeeded) and
 * before its loop: meets the other workers and the main thread at the start
 * barrier.  Returns false when any worker's setup failed: the worker must
 * then clean up and return without running.
 */
bool q_start(struct q_thread *t, const char *setup_error);

/* After a failed operation: pause 1 ms, so that a refusing or down server
 * is not hammered in a tight loop (and errors do not pile up by millions). */
static inline void q_error_pause(void) {
    struct timespec ts = {0, 1000000L};
    nanosleep(&ts, NULL);
}

/* Record one operation: t0 start, tw connection in hand (0: no such step),
 * t1 end. */
static inline void q_op_done(struct q_thread *t, uint64_t t0, uint64_t tw,
                             uint64_t t1) {
    if (tw)
        lat_hist_add(&t->wait, tw - t0);
    lat_hist_add(&t->op, t1 - t0);
    t->ops++;
}

/* The operation: SELECT 1, checked for PGRES_TUPLES_OK. */
static inline bool q_select1(struct q_thread *t, PGconn *c) {
    PGresult *r = PQexec(c, "SELECT 1");
    bool ok = r && PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        q_error(t, "SELECT 1",
                r && *PQresultErrorMessage(r) ? PQresultErrorMessage(r)
                                              : PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* PQconnectdb + status check; NULL with the reason in *why (static text or
 * the connection's message, valid until the next call on this thread). */
PGconn *q_connect(const char *conninfo, char *why, size_t cap);

/* Returns 0 on success, 1 if --help was printed, -1 on error (printed).
 * o->impl must hold the default name; o->pool stays 0 unless given. */
int q_parse(int argc, char **argv, const char *what, struct q_opts *o);

struct q_result {
    double elapsed_s;
    double cpu_us; /* this process's CPU time (user + system) in the window */
    uint64_t ops, errors, retries;
    lat_hist op, wait;
    char error[256]; /* the first error of any thread */
};

/*
 * Start o->threads workers running fn(&threads[i]); each does its setup and
 * calls q_start().  The window opens when the main thread leaves the
 * barrier and closes S seconds later (absolute clock_nanosleep on
 * CLOCK_MONOTONIC), when the stop flag rises; an operation in flight then
 * still completes and counts (at most T extra operations).
 * Returns 0, or -1 when a worker's setup failed (reported on stderr).
 */
int q_run(const struct q_opts *o, void *(*fn)(void *), void *ctx,
          struct q_result *r);

/* One JSON line (the shape of `tether bench query --json`); the *_wait_us
 * fields only when the implementation gets a connection per operation. */
void q_report(const struct q_opts *o, int pool, const struct q_result *r);

#endif /* TETHER_BENCH_QUERY_COMMON_H */
