/* storm_client.c - one client of the real reconnect-storm fleet
 * (bench/run-storm): an application doing an idempotent SELECT 1 every
 * 200 ms, either through a tether pool (tether_pool_open on CONNINFO,
 * tether_pool_run) or as a plain libpq program that reconnects on the next
 * tick when its connection fails (what applications do today).
 *
 *   bench_storm_client tether|libpq CONNINFO
 *
 * Prints "up MS" when a SELECT 1 succeeds for the first time after a
 * failure (or at all), "down MS" at the first failure after a success,
 * MS being CLOCK_REALTIME milliseconds (comparable across processes).
 * With STORM_TRACE set in the environment, a tether client also prints
 * each step of every connect ("ev MS PHASE CODE DELAY_MS MESSAGE").
 * Runs until SIGTERM or SIGINT. */
#include "tether.h"
#include "tether_pq.h"

#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PERIOD_MS 200

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static long long wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long long ms) {
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Report a change of state: ok = 1 after a success, 0 after a failure. */
static void report(int *state, int ok) {
    if (*state == ok)
        return;
    *state = ok;
    printf("%s %lld\n", ok ? "up" : "down", wall_ms());
    fflush(stdout);
}

static int select1(void *handle, void *arg, const tether_attempt *a,
                   tether_error *err) {
    (void)arg;
    (void)a;
    PGresult *r = PQexec(handle, "SELECT 1");
    int rc = tether_pq_error(handle, r, err);
    PQclear(r);
    return rc;
}

/* With STORM_TRACE set: every connect step, as "ev MS PHASE CODE TEXT". */
static void trace(void *ctx, const tether_connect_event *ev) {
    (void)ctx;
    printf("ev %lld %s %d %lld %s\n", wall_ms(), tether_phase_name(ev->phase),
           ev->code, (long long)ev->delay_ms, ev->message);
    fflush(stdout);
}

static int run_tether(const char *conninfo) {
    tether_pool *p = NULL;
    tether_error err = {0};
    tether_event_fn on_event = getenv("STORM_TRACE") ? trace : NULL;
    if (tether_pool_open(&p, conninfo, on_event, NULL, &err)) {
        fprintf(stderr, "bench_storm_client: %s\n", err.message);
        return 1;
    }
    int state = -1;
    long long next = wall_ms();
    while (!stop) {
        int ok =
            tether_pool_run(p, TETHER_IDEMPOTENT, select1, NULL, &err) == 0;
        report(&state, ok);
        next += PERIOD_MS;
        long long now = wall_ms();
        if (next < now)
            next = now; /* a call that took long: the next one at once */
        sleep_ms(next - now);
    }
    tether_pool_destroy(p);
    return 0;
}

static int run_libpq(const char *conninfo) {
    PGconn *c = NULL;
    int state = -1;
    long long next = wall_ms();
    while (!stop) {
        if (!c)
            c = PQconnectdb(conninfo);
        int ok = 0;
        if (PQstatus(c) == CONNECTION_OK) {
            PGresult *r = PQexec(c, "SELECT 1");
            ok = PQresultStatus(r) == PGRES_TUPLES_OK;
            PQclear(r);
        }
        if (!ok) { /* reconnect on the next tick */
            PQfinish(c);
            c = NULL;
        }
        report(&state, ok);
        next += PERIOD_MS;
        long long now = wall_ms();
        if (next < now)
            next = now;
        sleep_ms(next - now);
    }
    PQfinish(c);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "tether") && strcmp(argv[1], "libpq"))) {
        fprintf(stderr, "usage: bench_storm_client tether|libpq CONNINFO\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    return !strcmp(argv[1], "tether") ? run_tether(argv[2])
                                      : run_libpq(argv[2]);
}
