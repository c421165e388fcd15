/* test_adaptive.c - the adaptive limit (docs/pool.md, "Adaptive limit")
 * against the real scratch server (scripts/pg-cluster run --
 * test_adaptive_pg), in about 10 s:
 *
 *   - 16 threads run SELECT pg_sleep(0.005) through a pool with
 *     tether_pool_limit=adaptive and tether_pool_max=32: the limit grows
 *     from its first value to serve them, stays within 1..32, and no call
 *     fails;
 *   - the role's CONNECTION LIMIT is 6 (ALTER ROLE): the server refuses
 *     the seventh connect with 53300, and the limit comes down to at most
 *     6 and stays there, counted in limit_full, with no call failing (a
 *     refused caller waits for a release).
 *
 * Environment (from pg-cluster run): PGC_HOST, PRIMARY_PORT, PGC_USER,
 * PGC_PASSWORD, PGC_DB, PGC_CTL, PGC_DIR. */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include "../support/clock.h"
#include "tether.h"
#include "tether_pq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 16
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

static char conninfo[1024];

/* superuser_sql runs sql through psql as the superuser over the unix
 * socket (pg-cluster psql), given on stdin. */
static void superuser_sql(const char *sql) {
    const char *ctl = getenv("PGC_CTL"), *dir = getenv("PGC_DIR");
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "bash '%s' psql '%s' primary -q -v ON_ERROR_STOP=1 >/dev/null",
             ctl, dir);
    FILE *f = popen(cmd, "w");
    if (!f || fputs(sql, f) < 0 || pclose(f) != 0)
        fail_msg("superuser SQL failed: %s", sql);
}

/* set_connection_limit sets the test role's CONNECTION LIMIT (-1: none). */
static void set_connection_limit(int limit) {
    char sql[200];
    snprintf(sql, sizeof(sql), "ALTER ROLE \"%s\" CONNECTION LIMIT %d;",
             getenv("PGC_USER"), limit);
    superuser_sql(sql);
}

static int sleep_work(void *handle, void *arg, const tether_attempt *a,
                      tether_error *err) {
    (void)arg;
    PGresult *res = NULL;
    int rc = tether_pq_exec(handle, "SELECT pg_sleep(0.005)", a->timeout_ms,
                            &res, err);
    PQclear(res);
    return rc;
}

typedef struct load {
    tether_pool *pool;
    atomic_int stop;
    atomic_long ok, failed;
    char last_error[TETHER_MSG_MAX];
    pthread_mutex_t lock;
} load;

static void *load_main(void *arg) {
    load *ld = arg;
    while (!atomic_load(&ld->stop)) {
        tether_error err = {0};
        if (tether_pool_run(ld->pool, TETHER_IDEMPOTENT, sleep_work, NULL,
                            &err) == 0) {
            atomic_fetch_add(&ld->ok, 1);
        } else {
            atomic_fetch_add(&ld->failed, 1);
            pthread_mutex_lock(&ld->lock);
            snprintf(ld->last_error, sizeof(ld->last_error), "%s", err.message);
            pthread_mutex_unlock(&ld->lock);
        }
    }
    return NULL;
}

/* Run THREADS threads over pool for secs seconds, sampling the limit
 * every 100 ms into lim[] (at most nlim); returns how many samples. */
static int run_load(tether_pool *pool, int secs, load *ld, int *lim, int nlim) {
    memset(ld, 0, sizeof(*ld));
    ld->pool = pool;
    pthread_mutex_init(&ld->lock, NULL);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, load_main, ld), 0);
    int n = 0;
    for (int64_t end = now_ms() + secs * 1000; now_ms() < end;) {
        sleep_ms(100);
        tether_pool_metrics m;
        tether_pool_metrics_get(pool, &m);
        if (n < nlim)
            lim[n++] = m.limit;
    }
    atomic_store(&ld->stop, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_destroy(&ld->lock);
    return n;
}

static tether_pool *open_adaptive(void) {
    char ci[1200];
    snprintf(ci, sizeof(ci),
             "%s tether_pool_limit=adaptive tether_pool_max=32 "
             "tether_pool_name=adaptive",
             conninfo);
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, NULL, NULL, &err) != 0)
        fail_msg("tether_pool_open: %s", err.message);
    return p;
}

/* One run of the load for 5 s against a new adaptive pool, and what the
 * tests read of it: the pool's metrics at the end, and the limit's first
 * sample and its least and most in the second half of the run. The test
 * destroys the pool. */
typedef struct outcome {
    tether_pool *pool;
    load ld;
    tether_pool_metrics m;
    int first, lo, hi;
} outcome;

static void run_adaptive(outcome *o) {
    o->pool = open_adaptive();
    int lim[100];
    int n = run_load(o->pool, 5, &o->ld, lim, 100);
    tether_pool_metrics_get(o->pool, &o->m);
    o->first = lim[0];
    o->lo = 1000;
    o->hi = 0;
    for (int i = n / 2; i < n; i++) { /* the second half */
        o->lo = MIN(o->lo, lim[i]);
        o->hi = MAX(o->hi, lim[i]);
    }
}

/* check_none_failed fails the test, with the last error, if any call of
 * the run failed. */
static void check_none_failed(load *ld) {
    if (atomic_load(&ld->failed))
        fail_msg("%ld calls failed, the last: %s", atomic_load(&ld->failed),
                 ld->last_error);
}

static void test_settles(void **state) {
    (void)state;
    outcome o;
    run_adaptive(&o);
    printf("settles: %ld calls, %ld failed; limit first %d, second half "
           "%d..%d, now %d; hold %.2f ms, baseline %.2f ms; up %llu down "
           "%llu\n",
           atomic_load(&o.ld.ok), atomic_load(&o.ld.failed), o.first, o.lo,
           o.hi, o.m.limit, (double)o.m.hold_short_us / 1e3,
           (double)o.m.hold_long_us / 1e3, (unsigned long long)o.m.limit_up,
           (unsigned long long)o.m.limit_down);
    check_none_failed(&o.ld);
    assert_int_equal(o.m.limit_adaptive, 1);
    assert_true(o.m.limit_up > 0); /* it grew from its first value, 4 */
    assert_true(o.hi >= 8 && o.hi <= 32 && o.lo >= 1);
    assert_true(o.m.hold_short_us >= 5000 && o.m.hold_long_us >= 5000);
    tether_pool_destroy(o.pool);
}

static void test_53300_brings_it_down(void **state) {
    (void)state;
    set_connection_limit(6);
    outcome o;
    run_adaptive(&o);
    printf("53300: %ld calls, %ld failed; limit now %d, second half at most "
           "%d; refusals %llu, connect failures %llu, down %llu\n",
           atomic_load(&o.ld.ok), atomic_load(&o.ld.failed), o.m.limit, o.hi,
           (unsigned long long)o.m.limit_full,
           (unsigned long long)o.m.connect_failures,
           (unsigned long long)o.m.limit_down);
    set_connection_limit(-1); /* none */
    check_none_failed(&o.ld);
    assert_true(o.m.limit_full >= 1);
    assert_true(o.m.connect_failures >= 1);
    assert_true(o.hi <= 6); /* it came down and stayed down */
    assert_true(o.m.total <= 6);
    tether_pool_destroy(o.pool);
}

int main(void) {
    const char *host = getenv("PGC_HOST"), *port = getenv("PRIMARY_PORT");
    const char *user = getenv("PGC_USER"), *pw = getenv("PGC_PASSWORD");
    const char *db = getenv("PGC_DB");
    if (!host || !port || !user || !pw || !db || !getenv("PGC_CTL") ||
        !getenv("PGC_DIR")) {
        fprintf(stderr, "test_adaptive: run under scripts/pg-cluster run\n");
        return 2;
    }
    snprintf(conninfo, sizeof(conninfo),
             "host=%s port=%s user=%s password=%s dbname=%s", host, port, user,
             pw, db);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settles),
        cmocka_unit_test(test_53300_brings_it_down),
    };
    return cmocka_run_group_tests_name("adaptive_pg", tests, NULL, NULL);
}
