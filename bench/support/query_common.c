/*
 * query_common.c - the shared harness of the "query" benchmarks
 * (query_common.h): compiled once into the tether_benchsupport library.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "query_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

struct q_sync_state q_sync;

void q_error(struct q_thread *t, const char *what, const char *msg) {
    if (t->error[0])
        return;
    if (!msg)
        msg = "";
    snprintf(t->error, sizeof t->error, "%s: %.*s", what,
             (int)strcspn(msg, "\n"), msg);
}

bool q_start(struct q_thread *t, const char *setup_error) {
    if (setup_error) {
        q_error(t, "setup", setup_error);
        atomic_store(&q_sync.setup_failed, 1);
    }
    int rc = pthread_barrier_wait(&q_sync.start);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD) {
        fprintf(stderr, "pthread_barrier_wait: %s\n", strerror(rc));
        exit(2);
    }
    return atomic_load(&q_sync.setup_failed) == 0;
}

PGconn *q_connect(const char *conninfo, char *why, size_t cap) {
    PGconn *c = PQconnectdb(conninfo);
    if (c && PQstatus(c) == CONNECTION_OK)
        return c;
    snprintf(why, cap, "%s", c ? PQerrorMessage(c) : "out of memory");
    PQfinish(c);
    return NULL;
}

static void q_usage(const char *prog, const char *what, FILE *out) {
    fprintf(out,
            "usage: %s --conninfo C [--threads T] [--pool P] [--seconds S] "
            "[--json]\n"
            "          [--impl-name NAME]\n"
            "%s\n"
            "  --conninfo C    libpq connection string (key=value or URI)\n"
            "  --threads T     worker threads (default 8)\n"
            "  --pool P        pool size (see above)\n"
            "  --seconds S     measurement window in seconds (default 5)\n"
            "  --json          print one JSON line instead of a human line\n"
            "  --impl-name N   name to print as \"impl\" (e.g. pgbouncer)\n",
            prog, what);
}

/* Returns 0 on success, 1 if --help was printed, -1 on error (printed).
 * o->impl must hold the default name; o->pool stays 0 unless given. */
int q_parse(int argc, char **argv, const char *what, struct q_opts *o) {
    o->prog = argv[0];
    o->conninfo = NULL;
    o->threads = 8;
    o->pool = 0;
    o->seconds = 5.0;
    o->json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            q_usage(o->prog, what, stdout);
            return 1;
        }
        if (!v) {
            fprintf(stderr, "%s: unknown option or missing value: '%s'\n",
                    o->prog, a);
            q_usage(o->prog, what, stderr);
            return -1;
        }
        i++;
        if (strcmp(a, "--conninfo") == 0) {
            o->conninfo = v;
        } else if (strcmp(a, "--impl-name") == 0) {
            if (!*v || strpbrk(v, "\"\\")) {
                fprintf(stderr, "%s: invalid --impl-name '%s'\n", o->prog, v);
                return -1;
            }
            o->impl = v;
        } else if (strcmp(a, "--threads") == 0) {
            if (bench_parse_int(o->prog, a, v, 100000, &o->threads))
                return -1;
        } else if (strcmp(a, "--pool") == 0) {
            if (bench_parse_int(o->prog, a, v, 100000, &o->pool))
                return -1;
        } else if (strcmp(a, "--seconds") == 0) {
            if (bench_parse_seconds(o->prog, v, &o->seconds))
                return -1;
        } else {
            fprintf(stderr, "%s: unknown option '%s'\n", o->prog, a);
            q_usage(o->prog, what, stderr);
            return -1;
        }
    }
    if (!o->conninfo || !*o->conninfo) {
        fprintf(stderr, "%s: --conninfo is required\n", o->prog);
        return -1;
    }
    return 0;
}

/* This process's CPU time (user + system), in microseconds. */
static double q_cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int q_run(const struct q_opts *o, void *(*fn)(void *), void *ctx,
          struct q_result *r) {
    size_t n = (size_t)o->threads;
    struct q_thread *th = aligned_alloc(Q_CACHELINE, n * sizeof *th);
    memset(r, 0, sizeof *r);
    if (!th) {
        fprintf(stderr, "%s: out of memory\n", o->prog);
        return -1;
    }
    memset(th, 0, n * sizeof *th);
    atomic_store(&q_sync.stop, 0);
    atomic_store(&q_sync.setup_failed, 0);
    for (size_t i = 0; i < n; i++) {
        th[i].index = (unsigned)i;
        th[i].ctx = ctx;
    }
    if (bench_spawn(&q_sync.start, n, fn, th, sizeof *th,
                    offsetof(struct q_thread, tid))) {
        free(th);
        return -1;
    }
    pthread_barrier_wait(&q_sync.start);
    bool failed = atomic_load(&q_sync.setup_failed) != 0;
    uint64_t t0 = bench_now_ns(), t1 = t0;
    double cpu0 = q_cpu_us();
    if (!failed) {
        bench_sleep_for(o->seconds);
        t1 = bench_now_ns();
    }
    atomic_store(&q_sync.stop, 1);
    for (size_t i = 0; i < n; i++)
        pthread_join(th[i].tid, NULL);
    pthread_barrier_destroy(&q_sync.start);

    r->cpu_us = q_cpu_us() - cpu0;
    r->elapsed_s = (double)(t1 - t0) / 1e9;
    for (size_t i = 0; i < n; i++) {
        r->ops += th[i].ops;
        r->errors += th[i].errors;
        r->retries += th[i].retries;
        lat_hist_merge(&r->op, &th[i].op);
        lat_hist_merge(&r->wait, &th[i].wait);
        if (th[i].error[0] && !r->error[0])
            memcpy(r->error, th[i].error, sizeof r->error);
    }
    free(th);
    if (r->error[0])
        fprintf(stderr, "%s: first error: %s\n", o->prog, r->error);
    return failed ? -1 : 0;
}

void q_report(const struct q_opts *o, int pool, const struct q_result *r) {
    double ops_per_sec = r->elapsed_s > 0 ? (double)r->ops / r->elapsed_s : 0.0;
    lat_summary op = lat_hist_summary(&r->op, 1000.0);
    lat_summary wait = lat_hist_summary(&r->wait, 1000.0);
    if (o->json) {
        printf(
            "{\"bench\":\"query\",\"impl\":\"%s\",\"threads\":%d,\"pool\":%d,"
            "\"seconds\":%g,\"ops_per_sec\":%.0f,\"p50_us\":%.1f,\"p99_us\":%."
            "1f,"
            "\"max_us\":%.1f,\"errors\":%llu,\"retries\":%llu",
            o->impl, o->threads, pool, o->seconds, ops_per_sec, op.p50, op.p99,
            op.max, (unsigned long long)r->errors,
            (unsigned long long)r->retries);
        if (r->wait.n)
            printf(",\"p50_wait_us\":%.1f,\"p99_wait_us\":%.1f,\"max_wait_us\":"
                   "%.1f",
                   wait.p50, wait.p99, wait.max);
        printf(",\"cpu_us_per_op\":%.2f}\n",
               r->ops ? r->cpu_us / (double)r->ops : 0.0);
    } else {
        printf(
            "query %-17s threads=%-3d pool=%-3d %8.0f ops/s (%llu in %.3f s)  "
            "latency p50=%.1fus p99=%.1fus max=%.1fus  errors=%llu "
            "retries=%llu",
            o->impl, o->threads, pool, ops_per_sec, (unsigned long long)r->ops,
            r->elapsed_s, op.p50, op.p99, op.max, (unsigned long long)r->errors,
            (unsigned long long)r->retries);
        if (r->wait.n)
            printf("  wait p50=%.1fus p99=%.1fus max=%.1fus", wait.p50,
                   wait.p99, wait.max);
        printf("  cpu/op=%.2fus\n", r->ops ? r->cpu_us / (double)r->ops : 0.0);
    }
    fflush(stdout);
}
