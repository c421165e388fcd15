/* thread_time.h - how long the calling thread slept during a call, for
 * tests that judge a deadline without racing the scheduler.
 *
 * A call that waits for a deadline returns "late" by however long its
 * thread then waited for a CPU; on a busy 2-core box or under a sanitizer
 * that is tens of ms now and then (measured: up to 130 ms with four
 * CPU-bound processes running beside the test), the same for a bare
 * pthread_cond_timedwait as for the pool. Linux counts that time for
 * each thread apart from the time it ran (/proc/thread-self/schedstat:
 * ns on a CPU, ns runnable but waiting for one), so
 *
 *     slept = wall time - time on a CPU - time waiting for a CPU
 *
 * is the time the thread was blocked: in timed waits, poll(), on a lock.
 * A deadline kept by the code under test shows as slept <= the wait (plus
 * the kernel's timer slack); one that the code itself overshoots shows as
 * slept > the wait whatever the load. The two readings bracket the wall
 * clock reading, so time on a CPU or in the run queue outside the call only
 * lowers slept: an upper bound on slept never fails for the scheduler.
 *
 * Header only (static functions); unit and integration tests include it
 * as "../support/thread_time.h". */
#ifndef TETHER_TEST_THREAD_TIME_H
#define TETHER_TEST_THREAD_TIME_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* What a deadline may be overshot by in slept time: timer slack (50 us by
 * default), and the CPU time of the current stint that schedstat has not
 * yet added (up to a scheduler tick). Measured on this VM under heavy
 * load: 2.3 ms at most in 6000 timed waits. */
#define THREAD_TIME_SLACK_MS 10.0

typedef struct thread_time {
    double wall_ms; /* CLOCK_MONOTONIC */
    double cpu_ms;  /* on a CPU */
    double runq_ms; /* runnable, waiting for a CPU */
    int ok;         /* schedstat was readable */
} thread_time;

static inline double thread_time_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline void thread_time_sched(thread_time *t) {
    unsigned long long cpu = 0, runq = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    t->ok = f && fscanf(f, "%llu %llu", &cpu, &runq) == 2;
    if (f)
        fclose(f);
    t->cpu_ms = (double)cpu / 1e6;
    t->runq_ms = (double)runq / 1e6;
}

/* thread_time_start reads the thread's counters, then the wall clock. */
static inline thread_time thread_time_start(void) {
    thread_time t;
    thread_time_sched(&t);
    t.wall_ms = thread_time_mono_ms();
    return t;
}

/* thread_time_stop reads the wall clock, then the thread's counters. */
static inline thread_time thread_time_stop(void) {
    thread_time t;
    t.wall_ms = thread_time_mono_ms();
    thread_time_sched(&t);
    return t;
}

/* thread_time_elapsed_ms is the wall time between a and b. */
static inline double thread_time_elapsed_ms(const thread_time *a,
                                            const thread_time *b) {
    return b->wall_ms - a->wall_ms;
}

/* thread_time_slept_ms is the time the thread spent blocked between a and
 * b (a from thread_time_start, b from thread_time_stop on the same
 * thread), or -1 when the kernel does not say (no schedstat). */
static inline double thread_time_slept_ms(const thread_time *a,
                                          const thread_time *b) {
    if (!a->ok || !b->ok)
        return -1;
    return (b->wall_ms - a->wall_ms) - (b->cpu_ms - a->cpu_ms) -
           (b->runq_ms - a->runq_ms);
}

#endif
