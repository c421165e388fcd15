/* test_route.c - read/write routing (docs/routing.md) over the sim
 * driver: a primary sim behind the routing pool, a standby sim behind its
 * read side. TETHER_READONLY work goes to the standby, other work to the
 * primary; no standby (down, or hanging) sends reads to the primary within
 * the caller's deadline; a lagging standby is skipped, its verdict kept
 * for the recheck interval; a write refused as read-only (25006) is re-run
 * once on the primary; a pool that does not route ignores the flag; the
 * routing keywords' errors name the keyword. The real cluster's side is
 * tests/integration/test_routing.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../support/thread_time.h"
#include "pool_inspect.h"
#include "tether.h"
#include "tether_sim.h"

typedef struct fixture {
    tether_sim *primary, *standby;
    tether_pool *pool; /* routes; its read side is on standby */
} fixture;

static tether_pool *sim_pool(tether_sim *sim) {
    tether_pool_opts o;
    tether_pool_opts_init(&o);
    o.driver = tether_driver_sim();
    o.driver_ctx = sim;
    o.max_size = 4;
    tether_pool *p = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_create(&p, &o, &err), 0);
    return p;
}

/* A routing pool; standby_opts tunes the standby's sim (NULL: defaults). */
static void setup_route(fixture *f, const tether_sim_opts *standby_opts,
                        int64_t max_lag_ms) {
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    tether_error err = {0};
    assert_int_equal(tether_sim_create(&f->primary, &so, &err), 0);
    assert_int_equal(
        tether_sim_create(&f->standby, standby_opts ? standby_opts : &so, &err),
        0);
    f->pool = sim_pool(f->primary);
    tether__route_keys k = {1, 0, max_lag_ms, -1, 10000, 1000};
    assert_int_equal(
        tether__route_attach(f->pool, sim_pool(f->standby), &k, &err), 0);
}

static void teardown(fixture *f) {
    tether_pool_destroy(f->pool);
    tether_sim_destroy(f->primary);
    tether_sim_destroy(f->standby);
}

static uint64_t uses(tether_sim *sim) {
    tether_sim_stats st;
    tether_sim_stats_get(sim, &st);
    return st.uses;
}

/* A pretend query. */
static int query(void *handle, void *arg, const tether_attempt *a,
                 tether_error *err) {
    (void)arg;
    (void)a;
    return tether_sim_use(handle, err);
}

/* A write: refused as read-only (25006) on the standby, applied (counted)
 * on the primary. */
typedef struct write_ctx {
    fixture *f;
    int applied, refused;
} write_ctx;

static int write_work(void *handle, void *arg, const tether_attempt *a,
                      tether_error *err) {
    (void)a;
    write_ctx *w = arg;
    uint64_t before = uses(w->f->standby);
    int rc = tether_sim_use(handle, err);
    if (rc)
        return rc;
    if (uses(w->f->standby) != before) { /* it ran on the standby */
        w->refused++;
        return tether_error_set(err, TETHER_EREADONLY, TETHER_CLASS_NONE,
                                "cannot execute INSERT in a read-only "
                                "transaction");
    }
    w->applied++;
    return 0;
}

static tether_pool_metrics metrics(tether_pool *p) {
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    return m;
}

static void test_reads_to_standby_writes_to_primary(void **state) {
    (void)state;
    fixture f;
    setup_route(&f, NULL, -1);
    tether_error err = {0};
    for (int i = 0; i < 10; i++)
        assert_int_equal(
            tether_pool_run(f.pool, TETHER_READONLY, query, NULL, &err), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(tether_pool_run(f.pool, 0, query, NULL, &err), 0);
    assert_int_equal(uses(f.standby), 10);
    assert_int_equal(uses(f.primary), 5);
    tether_pool_metrics m = metrics(f.pool);
    assert_int_equal(m.reads_standby, 10);
    assert_int_equal(m.reads_primary, 0);
    tether_pool *r = tether_pool_read_side(f.pool);
    assert_non_null(r);
    tether_pool_metrics rm = metrics(r);
    assert_int_equal(rm.acquires, 10); /* the read side's own metrics */
    char text[32768];
    tether_pool_metrics_prometheus(f.pool, text, sizeof(text));
    assert_non_null(strstr(text, "tether_pool_reads_standby_total{"));
    teardown(&f);
}

static void test_standby_down_reads_on_primary(void **state) {
    (void)state;
    fixture f;
    setup_route(&f, NULL, -1);
    tether_error err = {0};
    /* A standby connection exists, then the standby goes away. */
    assert_int_equal(
        tether_pool_run(f.pool, TETHER_READONLY, query, NULL, &err), 0);
    tether_sim_break_all(f.standby);
    tether_sim_set_down(f.standby, 1);
    for (int i = 0; i < 3; i++) {
        thread_time t0 = thread_time_start();
        assert_int_equal(tether_pool_run_for(f.pool, TETHER_READONLY, 300,
                                             query, NULL, &err),
                         0);
        thread_time t1 = thread_time_stop();
        /* Not the whole deadline: the read side has at most half of it
         * (thread_time.h: what the thread slept, not how soon it ran). */
        double slept = thread_time_slept_ms(&t0, &t1);
        if (slept > 150 + THREAD_TIME_SLACK_MS)
            fail_msg("read %d slept %.1f ms of its 300", i, slept);
        assert_true(thread_time_elapsed_ms(&t0, &t1) < 5000);
    }
    assert_int_equal(uses(f.standby), 1);
    assert_int_equal(uses(f.primary), 3);
    assert_int_equal(metrics(f.pool).reads_primary, 3);
    /* The standby is back: once its read side's blocking period is over
     * (5 s by default), reads go there again. */
    tether_sim_set_down(f.standby, 0);
    tether_pool_clear(tether_pool_read_side(f.pool));
    teardown(&f);
}

/* A standby whose connects hang must not take the caller's whole
 * deadline: the read side gets at most half of it. */
static void test_hanging_standby_within_deadline(void **state) {
    (void)state;
    fixture f;
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    so.timeout_rate = 1.0; /* every connect hangs until its budget ends */
    setup_route(&f, &so, -1);
    tether_error err = {0};
    thread_time t0 = thread_time_start();
    assert_int_equal(
        tether_pool_run_for(f.pool, TETHER_READONLY, 400, query, NULL, &err),
        0);
    thread_time t1 = thread_time_stop();
    double took = thread_time_elapsed_ms(&t0, &t1);
    assert_true(took >= 150); /* it did wait for the standby, half */
    /* ... and no more than half (200 ms): what the thread slept, not how
     * soon it then ran (thread_time.h). */
    double slept = thread_time_slept_ms(&t0, &t1);
    if (slept > 200 + THREAD_TIME_SLACK_MS)
        fail_msg("slept %.1f ms of its 400: more than the read side's half",
                 slept);
    assert_true(took < 5000);
    assert_int_equal(uses(f.primary), 1);
    /* The read side's breaker is open now: the next read does not wait. */
    t0 = thread_time_start();
    assert_int_equal(
        tether_pool_run_for(f.pool, TETHER_READONLY, 400, query, NULL, &err),
        0);
    t1 = thread_time_stop();
    slept = thread_time_slept_ms(&t0, &t1);
    if (slept > THREAD_TIME_SLACK_MS)
        fail_msg("the read after the breaker opened slept %.1f ms", slept);
    assert_true(thread_time_elapsed_ms(&t0, &t1) < 5000);
    teardown(&f);
}

static void test_readonly_error_rerouted_once(void **state) {
    (void)state;
    fixture f;
    setup_route(&f, NULL, -1);
    tether_error err = {0};
    write_ctx w = {&f, 0, 0};
    assert_int_equal(
        tether_pool_run(f.pool, TETHER_READONLY, write_work, &w, &err), 0);
    assert_int_equal(w.refused, 1);
    assert_int_equal(w.applied, 1); /* once, on the primary */
    tether_pool_metrics m = metrics(f.pool);
    assert_int_equal(m.readonly_reroutes, 1);
    assert_int_equal(m.reads_standby, 0);
    assert_int_equal(m.retries, 0); /* re-routed, not retried */
    /* The standby's connection was kept: a read-only refusal is no fault. */
    assert_int_equal(metrics(tether_pool_read_side(f.pool)).closed_broken, 0);
    teardown(&f);
}

static int64_t fake_lag_ms;
static int fake_lag_calls;

static int fake_lag(void *conn, int64_t timeout_ms, int64_t *ms, int64_t *bytes,
                    tether_error *err) {
    (void)conn;
    (void)timeout_ms;
    (void)err;
    fake_lag_calls++;
    *ms = fake_lag_ms;
    *bytes = 0;
    return 0;
}

static void test_lagging_standby_skipped(void **state) {
    (void)state;
    fixture f;
    setup_route(&f, NULL, 100);
    assert_int_equal(tether__pool_inspect_route_lag(f.pool, fake_lag, -1), 0);
    fake_lag_calls = 0;
    fake_lag_ms = 50; /* within the bound */
    tether_error err = {0};
    assert_int_equal(
        tether_pool_run(f.pool, TETHER_READONLY, query, NULL, &err), 0);
    assert_int_equal(uses(f.standby), 1);
    assert_int_equal(fake_lag_calls, 1);
    /* Within the recheck interval (10 s) the verdict holds: no query. */
    fake_lag_ms = 5000;
    assert_int_equal(
        tether_pool_run(f.pool, TETHER_READONLY, query, NULL, &err), 0);
    assert_int_equal(uses(f.standby), 2);
    assert_int_equal(fake_lag_calls, 1);
    /* Recheck due: lagging, reads go to the primary. */
    assert_int_equal(tether__pool_inspect_route_lag(f.pool, NULL, 0), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            tether_pool_run(f.pool, TETHER_READONLY, query, NULL, &err), 0);
    assert_int_equal(uses(f.standby), 2);
    assert_int_equal(uses(f.primary), 3);
    tether_pool_metrics m = metrics(f.pool);
    assert_int_equal(m.reads_lagging, 3);
    assert_int_equal(m.reads_primary, 3);
    assert_int_equal(m.lag_checks, 4);
    /* Caught up: the standby again. */
    fake_lag_ms = 0;
    assert_int_equal(
        tether_pool_run(f.pool, TETHER_READONLY, query, NULL, &err), 0);
    assert_int_equal(uses(f.standby), 3);
    teardown(&f);
}

/* A lag check due with too little time left is not started (a query cut
 * short would break the connection): the read goes to the primary. */
static void test_no_time_for_lag_check(void **state) {
    (void)state;
    fixture f;
    setup_route(&f, NULL, 100);
    assert_int_equal(tether__pool_inspect_route_lag(f.pool, fake_lag, -1), 0);
    fake_lag_calls = 0;
    fake_lag_ms = 0;
    tether_error err = {0};
    assert_int_equal(
        tether_pool_run(f.pool, TETHER_READONLY, query, NULL, &err), 0);
    assert_int_equal(uses(f.standby), 1);
    /* due on every read */
    assert_int_equal(tether__pool_inspect_route_lag(f.pool, NULL, 0), 0);
    assert_int_equal(
        tether_pool_run_for(f.pool, TETHER_READONLY, 8, query, NULL, &err), 0);
    assert_int_equal(uses(f.standby), 1);
    assert_int_equal(uses(f.primary), 1);
    assert_int_equal(fake_lag_calls, 1);
    tether_pool_metrics rm = metrics(tether_pool_read_side(f.pool));
    assert_int_equal(rm.total, 1); /* the standby connection was kept */
    assert_int_equal(metrics(f.pool).reads_lagging, 0);
    teardown(&f);
}

/* Closing a routing pool closes both sides within the one wait_ms. */
static void test_close_both_sides_in_one_wait(void **state) {
    (void)state;
    fixture f;
    setup_route(&f, NULL, -1);
    tether_error err = {0};
    tether_lease *w = NULL, *r = NULL;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &w, &err), 0);
    assert_int_equal(
        tether_pool_acquire(tether_pool_read_side(f.pool), 1000, &r, &err), 0);
    thread_time t0 = thread_time_start();
    assert_int_equal(tether_pool_close(f.pool, 200, &err), TETHER_ETIMEDOUT);
    thread_time t1 = thread_time_stop();
    assert_true(thread_time_elapsed_ms(&t0, &t1) >= 190);
    /* Not 200 for each side: the thread slept the one wait (thread_time.h). */
    double slept = thread_time_slept_ms(&t0, &t1);
    if (slept > 200 + THREAD_TIME_SLACK_MS)
        fail_msg("close slept %.1f ms of its 200", slept);
    assert_true(thread_time_elapsed_ms(&t0, &t1) < 5000);
    assert_int_equal(
        tether_pool_run(f.pool, TETHER_READONLY, query, NULL, &err),
        TETHER_ECLOSED);
    tether_lease_release(w);
    tether_lease_release(r);
    teardown(&f);
}

static void test_unrouted_pool_ignores_readonly(void **state) {
    (void)state;
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    tether_sim *sim = NULL;
    tether_error err = {0};
    assert_int_equal(tether_sim_create(&sim, &so, &err), 0);
    tether_pool *p = sim_pool(sim);
    assert_null(tether_pool_read_side(p));
    assert_int_equal(tether_pool_run(p, TETHER_READONLY, query, NULL, &err), 0);
    assert_int_equal(tether_pool_run(p, 0, query, NULL, &err), 0);
    assert_int_equal(uses(sim), 2);
    tether_pool_metrics m = metrics(p);
    assert_int_equal(m.reads_standby + m.reads_primary, 0);
    char text[32768];
    tether_pool_metrics_prometheus(p, text, sizeof(text));
    assert_null(strstr(text, "reads_standby"));
    tether_pool_destroy(p);
    tether_sim_destroy(sim);
}

/* parse returns tether__pool_keys_parse's code, its message in msg. */
static int parse(const char *ci, tether__pool_keys *k, char *msg) {
    tether_error err = {0};
    int rc = tether__pool_keys_parse(ci, k, &err);
    snprintf(msg, 256, "%s", err.message);
    return rc;
}

static void test_keywords(void **state) {
    (void)state;
    tether__pool_keys k;
    char msg[256];
    assert_int_equal(parse("host=a,b", &k, msg), 0);
    assert_int_equal(k.route.on, 0);
    tether__pool_keys_free(&k);
    assert_int_equal(parse("host=a,b tether_route=read-write-split "
                           "tether_read_pool_max=3 tether_max_standby_lag=16MB "
                           "tether_lag_recheck=2s tether_read_wait=250ms",
                           &k, msg),
                     0);
    assert_int_equal(k.route.on, 1);
    assert_int_equal(k.route.read_max, 3);
    assert_int_equal(k.route.max_lag_bytes, 16 * 1024 * 1024);
    assert_int_equal(k.route.max_lag_ms, -1);
    assert_int_equal(k.route.lag_recheck_ms, 2000);
    assert_int_equal(k.route.read_wait_ms, 250);
    tether__pool_keys_free(&k);
    assert_int_equal(
        parse("tether_route=read-write-split tether_max_standby_lag=500ms", &k,
              msg),
        0);
    assert_int_equal(k.route.max_lag_ms, 500);
    assert_int_equal(k.route.max_lag_bytes, -1);
    tether__pool_keys_free(&k);
    static const struct {
        const char *ci, *key;
    } bad[] = {
        {"tether_route=split", "tether_route"},
        {"tether_route=read-write-split tether_max_standby_lag=5",
         "tether_max_standby_lag"},
        {"tether_route=read-write-split tether_max_standby_lag=16mb",
         "tether_max_standby_lag"},
        {"tether_route=read-write-split tether_max_standby_lag=-1s",
         "tether_max_standby_lag"},
        {"tether_route=read-write-split tether_read_pool_max=0",
         "tether_read_pool_max"},
        {"tether_route=read-write-split tether_read_wait=fast",
         "tether_read_wait"},
        {"tether_max_standby_lag=1s", "tether_max_standby_lag"},
        {"tether_read_pool_max=2", "tether_read_pool_max"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse(bad[i].ci, &k, msg), TETHER_ESPEC);
        if (!strstr(msg, bad[i].key))
            fail_msg("%s: %s does not name %s", bad[i].ci, msg, bad[i].key);
        tether__pool_keys_free(&k);
    }
    assert_int_equal(parse("tether_max_standby_lag=1s", &k, msg), TETHER_ESPEC);
    assert_non_null(strstr(msg, "tether_route=read-write-split"));
    tether__pool_keys_free(&k);
}

/* Pause, resume, evict and reconnect of a routing pool act on its read
 * side too (docs/pool.md, "Operating a pool at runtime"). */
static void test_runtime_control_reaches_read_side(void **state) {
    (void)state;
    fixture f;
    setup_route(&f, NULL, -1);
    tether_pool *r = tether_pool_read_side(f.pool);
    assert_non_null(r);
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire(r, 1000, &l, &err), 0);
    tether_lease_release(l); /* one idle standby connection */
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &l, &err), 0);
    tether_lease_release(l); /* one idle primary connection */
    assert_int_equal(tether_pool_pause(f.pool, 0), 0);
    assert_int_equal(tether_pool_paused(r), 1);
    assert_int_equal(tether_pool_acquire(r, 20, &l, &err), TETHER_ETIMEDOUT);
    assert_non_null(strstr(err.message, "paused"));
    assert_int_equal(tether_pool_resume(f.pool), 0);
    assert_int_equal(tether_pool_paused(r), 0);
    assert_int_equal(tether_pool_evict_idle(f.pool), 2); /* one on each */
    assert_int_equal(tether_pool_acquire(r, 1000, &l, &err), 0);
    tether_lease_release(l);
    assert_int_equal(tether_pool_reconnect(f.pool), 0);
    tether_pool_metrics m;
    tether_pool_metrics_get(r, &m);
    assert_int_equal(m.reconnects, 1);
    assert_int_equal(m.idle, 0);
    teardown(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_to_standby_writes_to_primary),
        cmocka_unit_test(test_standby_down_reads_on_primary),
        cmocka_unit_test(test_hanging_standby_within_deadline),
        cmocka_unit_test(test_readonly_error_rerouted_once),
        cmocka_unit_test(test_lagging_standby_skipped),
        cmocka_unit_test(test_no_time_for_lag_check),
        cmocka_unit_test(test_close_both_sides_in_one_wait),
        cmocka_unit_test(test_unrouted_pool_ignores_readonly),
        cmocka_unit_test(test_keywords),
        cmocka_unit_test(test_runtime_control_reaches_read_side),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
