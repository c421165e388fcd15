/*
 * bench_base.h - the pieces every benchmark program shares, whichever
 * harness it uses (peer_common.h for the cycle peers, query_common.h for
 * the query peers, bench_corun and bench_interleave): number parsing, the
 * timed window's sleep, starting the worker threads, and taking
 * program-specific options out of argv before the common parser sees it.
 * Header-only, static inline (a program that does not use a piece gets no
 * warning).
 */
#ifndef TETHER_BENCH_BASE_H
#define TETHER_BENCH_BASE_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A whole number in [1, max]; prints "prog: invalid name 's'" otherwise. */
static inline int bench_parse_int(const char *prog, const char *name,
                                  const char *s, long max, int *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > max) {
        fprintf(stderr, "%s: invalid %s '%s'\n", prog, name, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A number of seconds in (0, 86400]. */
static inline int bench_parse_seconds(const char *prog, const char *s,
                                      double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v > 0) || v > 86400) {
        fprintf(stderr, "%s: invalid --seconds '%s'\n", prog, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* CLOCK_MONOTONIC in ns: every benchmark's clock (a read costs ~25 ns). */
static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleep until the CLOCK_MONOTONIC time ns (absolute, so an interrupted
 * sleep does not drift). */
static inline void bench_sleep_until(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* Sleep for seconds on CLOCK_MONOTONIC: the measured window. */
static inline void bench_sleep_for(double seconds) {
    bench_sleep_until(bench_now_ns() + (uint64_t)(seconds * 1e9));
}

/* Sets up start (a barrier for the n threads and the caller) and starts
 * n threads, one per element of arr (stride bytes apart, filled by the
 * caller), each running fn on its element and keeping its pthread_t at
 * tid_off in it. Returns -1 (printed) if the barrier cannot be made. Exits
 * the program if a thread cannot be created: a half-filled barrier cannot
 * be unwound. */
static inline int bench_spawn(pthread_barrier_t *start, size_t n,
                              void *(*fn)(void *), void *arr, size_t stride,
                              size_t tid_off) {
    int rc = pthread_barrier_init(start, NULL, (unsigned)n + 1);
    if (rc != 0) {
        fprintf(stderr, "pthread_barrier_init: %s\n", strerror(rc));
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char *e = (char *)arr + i * stride;
        rc = pthread_create((pthread_t *)(void *)(e + tid_off), NULL, fn, e);
        if (rc != 0) {
            fprintf(stderr, "pthread_create: %s\n", strerror(rc));
            exit(2);
        }
    }
    return 0;
}

/* Removes argv[i] and the n arguments after it. */
static inline void bench_argv_drop(int *argc, char **argv, int i, int n) {
    for (int j = i; j + n + 1 <= *argc; j++)
        argv[j] = argv[j + n + 1];
    *argc -= n + 1;
}

#endif
