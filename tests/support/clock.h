/* clock.h - the real clock for tests: monotonic milliseconds and sleeps,
 * and the unit of the virtual clock.
 *
 * Tests that judge a deadline read the monotonic clock around the call;
 * tests on the virtual clock (tether_vclock, tether_sim.h) count in ns,
 * so MS converts. A test that must not fail for the scheduler judges
 * slept time instead (thread_time.h).
 *
 * Header only (static inline functions); unit and integration tests
 * include it as "../support/clock.h". */
#ifndef TETHER_TEST_CLOCK_H
#define TETHER_TEST_CLOCK_H

#include <stdint.h>
#include <time.h>

#define MS 1000000LL /* ns per ms: the virtual clock counts ns */

/* now_ms is CLOCK_MONOTONIC in whole milliseconds. */
static inline int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* now_ms_f is CLOCK_MONOTONIC in milliseconds with their fraction. */
static inline double now_ms_f(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* sleep_ms sleeps ms milliseconds (at least: a signal cuts it short only
 * when the caller installed a handler). */
static inline void sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif
