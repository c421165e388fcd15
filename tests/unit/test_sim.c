/* test_sim.c - unit tests for the sim driver: option defaults and
 * validation, every connect outcome in its documented order (fail_next,
 * down, max_connections, refuse, auth, timeout, latency on the virtual
 * clock through tether__driver_connect), seeded reproducible fault rates,
 * break_all / fatal_all, hot-path faults, stats carried over from closed
 * connections, classification, and a 4-thread connect/use/close run whose
 * counters must add up (also run under TSan). */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include "../support/clock.h"
#include "driver.h"
#include "tether.h"
#include "tether_sim.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------- */

static tether_sim *make_sim(const tether_sim_opts *o) {
    tether_sim *sim = NULL;
    tether_error err = {0};
    int rc = tether_sim_create(&sim, o, &err);
    if (rc)
        fail_msg("create: %s", err.message);
    return sim;
}

static tether_sim *make_default(void) {
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.seed = 42;
    return make_sim(&o);
}

/* start runs connect_start once; returns its result. */
static int start(tether_sim *sim, void **conn, tether_error *err) {
    tether_wait w = {-1, 0, -1};
    tether_error_clear(err);
    return tether_driver_sim()->connect_start(sim, NULL, conn, &w, err);
}

/* open_conn connects at once or fails the test. */
static void *open_conn(tether_sim *sim) {
    void *conn = NULL;
    tether_error err;
    int rc = start(sim, &conn, &err);
    if (rc != TETHER_CONNECTED)
        fail_msg("connect: %d %s", rc, err.message);
    assert_non_null(conn);
    return conn;
}

static void close_conn(void *conn) {
    tether_driver_sim()->close(conn);
}

static void *handle(void *conn) {
    return tether_driver_sim()->handle(conn);
}

static tether_sim_stats stats(tether_sim *sim) {
    tether_sim_stats st;
    tether_sim_stats_get(sim, &st);
    return st;
}

/* ---- options ---------------------------------------------------------- */

static void test_opts_defaults(void **state) {
    (void)state;
    tether_sim_opts o;
    memset(&o, 0x5a, sizeof(o));
    tether_sim_opts_init(&o);
    assert_int_equal(o.connect_latency_ms, 0);
    assert_int_equal(o.max_connections, 0);
    assert_true(o.refuse_rate == 0.0 && o.timeout_rate == 0.0);
    assert_true(o.auth_fail_rate == 0.0 && o.validate_fail_rate == 0.0);
    assert_true(o.break_in_use_rate == 0.0 && o.break_idle_rate == 0.0);
    assert_true(o.reset_fail_rate == 0.0);
    assert_int_equal(o.seed, 0);
    assert_null(o.clock);
    tether_sim_opts_init(NULL);
    /* NULL options mean the defaults. */
    tether_sim *sim = make_sim(NULL);
    close_conn(open_conn(sim));
    tether_sim_destroy(sim);
    tether_sim_destroy(NULL);
}

static void expect_invalid(tether_sim_opts *o, const char *field) {
    tether_sim *sim = (tether_sim *)&sim;
    tether_error err = {0};
    assert_int_equal(tether_sim_create(&sim, o, &err), TETHER_EINVAL);
    assert_null(sim);
    assert_int_equal(err.code, TETHER_EINVAL);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    if (!strstr(err.message, field))
        fail_msg("message '%s' does not name %s", err.message, field);
    tether_sim_opts_init(o);
}

static void test_opts_validation(void **state) {
    (void)state;
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.refuse_rate = 1.5;
    expect_invalid(&o, "refuse_rate");
    o.timeout_rate = -0.1;
    expect_invalid(&o, "timeout_rate");
    o.auth_fail_rate = NAN;
    expect_invalid(&o, "auth_fail_rate");
    o.validate_fail_rate = 2;
    expect_invalid(&o, "validate_fail_rate");
    o.break_in_use_rate = -1;
    expect_invalid(&o, "break_in_use_rate");
    o.break_idle_rate = 1.01;
    expect_invalid(&o, "break_idle_rate");
    o.reset_fail_rate = INFINITY;
    expect_invalid(&o, "reset_fail_rate");
    o.connect_latency_ms = -1;
    expect_invalid(&o, "connect_latency_ms");
    o.max_connections = -3;
    expect_invalid(&o, "max_connections");
    tether_error err = {0};
    assert_int_equal(tether_sim_create(NULL, &o, &err), TETHER_EINVAL);
    /* The bounds themselves are fine. */
    o.refuse_rate = 1.0;
    o.break_idle_rate = 0.0;
    tether_sim_destroy(make_sim(&o));
}

/* ---- connect outcomes ------------------------------------------------- */

static void test_connect_success(void **state) {
    (void)state;
    tether_sim *sim = make_default();
    const tether_driver *d = tether_driver_sim();
    assert_string_equal(d->name, "sim");
    void *a = open_conn(sim), *b = open_conn(sim);
    assert_ptr_equal(handle(a), a);
    uint64_t ida = tether_sim_conn_id(handle(a));
    assert_true(ida != 0);
    assert_true(tether_sim_conn_id(handle(b)) != ida);
    assert_int_equal(tether_sim_conn_id(NULL), 0);
    tether_error err = {0};
    assert_int_equal(d->alive(a, 1), 1);
    assert_int_equal(d->validate(a, 1000, &err), 0);
    assert_int_equal(tether_sim_use(handle(a), &err), 0);
    assert_int_equal(d->reset(a, "DISCARD ALL", &err), 0);
    assert_int_equal(d->reset(a, NULL, &err), 0);
    assert_int_equal(tether_sim_use(NULL, &err), TETHER_EINVAL);
    tether_sim_stats st = stats(sim);
    assert_int_equal(st.connects, 2);
    assert_int_equal(st.connected, 2);
    assert_int_equal(st.open, 2);
    assert_int_equal(st.closed, 0);
    close_conn(a);
    close_conn(b);
    close_conn(NULL);
    st = stats(sim);
    assert_int_equal(st.open, 0);
    assert_int_equal(st.closed, 2);
    tether_sim_destroy(sim);
}

typedef struct vfix {
    tether_vclock *vc;
    const tether_clock *clock;
    tether_sim *sim;
} vfix;

static void vfix_make(vfix *f, tether_sim_opts *o) {
    f->vc = tether_vclock_create(5000 * MS);
    assert_non_null(f->vc);
    f->clock = tether_vclock_clock(f->vc);
    o->clock = f->clock;
    f->sim = make_sim(o);
}

static void vfix_done(vfix *f) {
    tether_sim_destroy(f->sim);
    tether_vclock_destroy(f->vc);
}

static int drive(vfix *f, int64_t budget_ms, void **conn, tether_error *err) {
    tether_error_clear(err);
    return tether__driver_connect(tether_driver_sim(), f->sim, NULL, budget_ms,
                                  f->clock, conn, err);
}

static void test_latency_within_budget(void **state) {
    (void)state;
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.connect_latency_ms = 120;
    vfix f;
    vfix_make(&f, &o);
    void *conn = NULL;
    tether_error err;
    int64_t t0 = tether_now_ms(f.clock);
    assert_int_equal(drive(&f, 1000, &conn, &err), 0);
    assert_non_null(conn);
    assert_int_equal(tether_now_ms(f.clock) - t0, 120);
    /* Budget == latency still connects. */
    void *c2 = NULL;
    t0 = tether_now_ms(f.clock);
    assert_int_equal(drive(&f, 120, &c2, &err), 0);
    assert_int_equal(tether_now_ms(f.clock) - t0, 120);
    tether_sim_stats st = stats(f.sim);
    assert_int_equal(st.connected, 2);
    assert_int_equal(st.open, 2);
    close_conn(conn);
    close_conn(c2);
    vfix_done(&f);
}

static void test_latency_over_budget(void **state) {
    (void)state;
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.connect_latency_ms = 500;
    vfix f;
    vfix_make(&f, &o);
    void *conn = (void *)&f;
    tether_error err;
    int64_t t0 = tether_now_ms(f.clock);
    assert_int_equal(drive(&f, 200, &conn, &err), TETHER_ETIMEDOUT);
    assert_null(conn);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(tether_now_ms(f.clock) - t0, 200);
    tether_sim_stats st = stats(f.sim);
    assert_int_equal(st.connects, 1);
    assert_int_equal(st.connected, 0);
    assert_int_equal(st.open, 0);
    assert_int_equal(st.closed, 0);
    vfix_done(&f);
}

static void test_latency_poll_by_hand(void **state) {
    (void)state;
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.connect_latency_ms = 50;
    vfix f;
    vfix_make(&f, &o);
    const tether_driver *d = tether_driver_sim();
    void *conn = NULL;
    tether_wait w;
    tether_error err = {0};
    int64_t t0 = tether_now_ms(f.clock);
    assert_int_equal(d->connect_start(f.sim, NULL, &conn, &w, &err),
                     TETHER_IN_PROGRESS);
    assert_int_equal(w.fd, -1);
    assert_int_equal(w.wake_ms, t0 + 50);
    assert_int_equal(stats(f.sim).open, 0);
    tether_vclock_advance(f.vc, 49 * MS);
    assert_int_equal(d->connect_poll(conn, &w, &err), TETHER_IN_PROGRESS);
    tether_vclock_advance(f.vc, 1 * MS);
    assert_int_equal(d->connect_poll(conn, &w, &err), TETHER_CONNECTED);
    assert_int_equal(stats(f.sim).open, 1);
    /* Broken while connecting: the connect fails. */
    void *c2 = NULL;
    assert_int_equal(d->connect_start(f.sim, NULL, &c2, &w, &err),
                     TETHER_IN_PROGRESS);
    tether_sim_break_all(f.sim);
    tether_vclock_advance(f.vc, 50 * MS);
    assert_int_equal(d->connect_poll(c2, &w, &err), TETHER_ECONNECT);
    assert_int_equal(err.not_sent, 1);
    close_conn(c2);
    close_conn(conn);
    tether_sim_stats st = stats(f.sim);
    assert_int_equal(st.connected, 1);
    assert_int_equal(st.closed, 1);
    vfix_done(&f);
}

static void test_down(void **state) {
    (void)state;
    tether_sim *sim = make_default();
    tether_sim_set_down(sim, 1);
    void *conn = (void *)sim;
    tether_error err;
    assert_int_equal(start(sim, &conn, &err), TETHER_ECONNECT);
    assert_null(conn);
    assert_int_equal(err.code, TETHER_ECONNECT);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(err.not_sent, 1);
    assert_non_null(strstr(err.message, "connection refused (sim down)"));
    tether_sim_set_down(sim, 0);
    close_conn(open_conn(sim));
    tether_sim_stats st = stats(sim);
    assert_int_equal(st.connects, 2);
    assert_int_equal(st.connected, 1);
    tether_sim_destroy(sim);
}

static void test_fail_next(void **state) {
    (void)state;
    tether_sim *sim = make_default();
    tether_sim_set_down(sim, 1);
    tether_sim_fail_next(sim, 2, TETHER_EAUTH, TETHER_CLASS_PERMANENT);
    tether_sim_fail_next(sim, 1, TETHER_ETHROTTLED, TETHER_CLASS_NONE);
    tether_sim_fail_next(sim, 0, TETHER_EIO, TETHER_CLASS_PERMANENT);
    void *conn = NULL;
    tether_error err;
    /* The queue comes before down. */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(start(sim, &conn, &err), TETHER_EAUTH);
        assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
        assert_int_equal(err.not_sent, 1);
    }
    assert_int_equal(start(sim, &conn, &err), TETHER_ETHROTTLED);
    assert_int_equal(err.cls, TETHER_CLASS_THROTTLED);          /* classified */
    assert_int_equal(start(sim, &conn, &err), TETHER_ECONNECT); /* down */
    tether_sim_set_down(sim, 0);
    tether_sim_fail_next(sim, 1, TETHER_EIO, TETHER_CLASS_TRANSIENT);
    assert_int_equal(start(sim, &conn, &err), TETHER_EIO);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    /* Many requests: the queue grows and drains in order. */
    for (int i = 0; i < 20; i++)
        tether_sim_fail_next(sim, 1, -100 - i, TETHER_CLASS_PERMANENT);
    for (int i = 0; i < 20; i++)
        assert_int_equal(start(sim, &conn, &err), -100 - i);
    close_conn(open_conn(sim));
    assert_int_equal(stats(sim).connects, 26);
    tether_sim_destroy(sim);
}

static void test_max_connections(void **state) {
    (void)state;
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.max_connections = 3;
    tether_sim *sim = make_sim(&o);
    void *c[3];
    for (int i = 0; i < 3; i++)
        c[i] = open_conn(sim);
    void *conn = NULL;
    tether_error err;
    assert_int_equal(start(sim, &conn, &err), TETHER_ETHROTTLED);
    assert_int_equal(err.cls, TETHER_CLASS_THROTTLED);
    assert_int_equal(err.not_sent, 1);
    assert_non_null(strstr(err.message, "too many clients"));
    assert_string_equal(err.sqlstate, "53300");
    close_conn(c[1]);
    c[1] = open_conn(sim);
    assert_int_equal(stats(sim).open, 3);
    for (int i = 0; i < 3; i++)
        close_conn(c[i]);
    tether_sim_destroy(sim);
}

static void test_auth_failure(void **state) {
    (void)state;
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.auth_fail_rate = 1.0;
    tether_sim *sim = make_sim(&o);
    void *conn = NULL;
    tether_wait w;
    tether_error err = {0};
    tether_endpoint ep = {"db", NULL, 5432, -1};
    int rc = tether_driver_sim()->connect_start(sim, &ep, &conn, &w, &err);
    assert_int_equal(rc, TETHER_EAUTH);
    assert_null(conn);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    assert_int_equal(err.not_sent, 1);
    assert_non_null(strstr(err.message, "for user \"sim\""));
    assert_null(strstr(err.message, "hunter2"));
    assert_null(strstr(err.message, "password="));
    tether_sim_destroy(sim);
}

static void test_timeout_rate(void **state) {
    (void)state;
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.timeout_rate = 1.0;
    vfix f;
    vfix_make(&f, &o);
    void *conn = NULL;
    tether_wait w;
    tether_error err = {0};
    assert_int_equal(
        tether_driver_sim()->connect_start(f.sim, NULL, &conn, &w, &err),
        TETHER_IN_PROGRESS);
    assert_int_equal(w.fd, -1);
    assert_int_equal(w.wake_ms, -1);
    tether_vclock_advance(f.vc, 3600 * 1000 * MS);
    assert_int_equal(tether_driver_sim()->connect_poll(conn, &w, &err),
                     TETHER_IN_PROGRESS);
    close_conn(conn);
    int64_t t0 = tether_now_ms(f.clock);
    assert_int_equal(drive(&f, 300, &conn, &err), TETHER_ETIMEDOUT);
    assert_null(conn);
    assert_int_equal(tether_now_ms(f.clock) - t0, 300);
    tether_sim_stats st = stats(f.sim);
    assert_int_equal(st.connects, 2);
    assert_int_equal(st.connected, 0);
    assert_int_equal(st.open, 0);
    vfix_done(&f);
}

/* ---- fault rates ------------------------------------------------------ */

/* run_refusals connects n times; outcome[i] = 1 when refused. */
static int run_refusals(uint64_t seed, double rate, int n, char *outcome) {
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.refuse_rate = rate;
    o.seed = seed;
    tether_sim *sim = make_sim(&o);
    int refused = 0;
    for (int i = 0; i < n; i++) {
        void *conn = NULL;
        tether_error err;
        int rc = start(sim, &conn, &err);
        outcome[i] = rc == TETHER_ECONNECT;
        refused += outcome[i];
        if (rc == TETHER_CONNECTED)
            close_conn(conn);
        else
            assert_int_equal(rc, TETHER_ECONNECT);
    }
    tether_sim_destroy(sim);
    return refused;
}

static void test_rates_seeded(void **state) {
    (void)state;
    enum { N = 10000 };
    static char a[N], b[N], c[N];
    int ra = run_refusals(7, 0.3, N, a);
    int rb = run_refusals(7, 0.3, N, b);
    int rc = run_refusals(8, 0.3, N, c);
    assert_int_equal(ra, rb);
    assert_memory_equal(a, b, N);
    assert_true(memcmp(a, c, N) != 0);
    if (ra < 2700 || ra > 3300)
        fail_msg("refused %d of %d at rate 0.3", ra, N);
    if (rc < 2700 || rc > 3300)
        fail_msg("refused %d of %d at rate 0.3 (seed 8)", rc, N);
    assert_int_equal(run_refusals(9, 0.0, 1000, c), 0);
    assert_int_equal(run_refusals(9, 1.0, 1000, c), 1000);
}

static void test_hot_rates(void **state) {
    (void)state;
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.break_in_use_rate = 0.1;
    o.seed = 3;
    tether_sim *sim = make_sim(&o);
    int broke = 0;
    for (int i = 0; i < 10000; i++) {
        void *conn = open_conn(sim);
        tether_error err;
        if (tether_sim_use(handle(conn), &err) != 0) {
            assert_int_equal(err.code, TETHER_EBROKEN);
            assert_int_equal(tether_driver_sim()->alive(conn, 1), 0);
            broke++;
        }
        close_conn(conn);
    }
    if (broke < 900 || broke > 1100)
        fail_msg("broke %d of 10000 at rate 0.1", broke);
    tether_sim_destroy(sim);
}

/* ---- break, fatal, reset ---------------------------------------------- */

static void test_break_all(void **state) {
    (void)state;
    tether_sim *sim = make_default();
    const tether_driver *d = tether_driver_sim();
    void *a = open_conn(sim), *b = open_conn(sim);
    tether_sim_break_all(sim);
    void *c = open_conn(sim);
    assert_int_equal(d->alive(a, 1), 0);
    assert_int_equal(d->alive(b, 1), 0);
    assert_int_equal(d->alive(c, 1), 1);
    tether_error err = {0};
    err.not_sent = 1;
    assert_int_equal(tether_sim_use(handle(a), &err), TETHER_EBROKEN);
    assert_int_equal(err.code, TETHER_EBROKEN);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(err.not_sent, 0); /* it may have reached the server */
    assert_int_equal(d->validate(b, 100, &err), TETHER_EBROKEN);
    assert_int_equal(d->reset(b, NULL, &err), TETHER_EBROKEN);
    assert_int_equal(tether_sim_use(handle(c), &err), 0);
    assert_int_equal(d->reset(c, NULL, &err), 0); /* broken is not fatal */
    close_conn(a);
    close_conn(b);
    close_conn(c);
    tether_sim_break_all(sim); /* no connections: nothing to do */
    tether_sim_destroy(sim);
}

static void test_fatal_all(void **state) {
    (void)state;
    tether_sim *sim = make_default();
    const tether_driver *d = tether_driver_sim();
    void *a = open_conn(sim), *b = open_conn(sim);
    tether_sim_fatal_all(sim);
    void *c = open_conn(sim);
    assert_int_equal(d->reset(a, NULL, NULL), TETHER_FATAL);
    assert_int_equal(d->reset(b, NULL, NULL), TETHER_FATAL);
    assert_int_equal(d->reset(c, NULL, NULL), 0);
    /* up (not broken), but not to be handed out */
    assert_int_equal(d->alive(a, 1), TETHER_FATAL_SEEN);
    assert_int_equal(d->alive(c, 1), 1);
    close_conn(a);
    close_conn(b);
    close_conn(c);
    tether_sim_destroy(sim);
}

static void test_reset_failures(void **state) {
    (void)state;
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.reset_fail_rate = 1.0;
    tether_sim *sim = make_sim(&o);
    const tether_driver *d = tether_driver_sim();
    void *conn = open_conn(sim);
    tether_error err = {0};
    assert_int_equal(d->reset(conn, "DISCARD ALL", &err), TETHER_EBROKEN);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(stats(sim).resets, 1);
    close_conn(conn);
    tether_sim_destroy(sim);

    o.reset_fail_rate = 0.25;
    o.seed = 11;
    sim = make_sim(&o);
    conn = open_conn(sim);
    int failed = 0;
    for (int i = 0; i < 10000; i++)
        failed += d->reset(conn, NULL, &err) != 0;
    if (failed < 2250 || failed > 2750)
        fail_msg("%d of 10000 resets failed at rate 0.25", failed);
    assert_int_equal(d->alive(conn, 1), 1); /* state unknown, not broken */
    close_conn(conn);
    tether_sim_destroy(sim);
}

static void test_validate_and_idle_faults(void **state) {
    (void)state;
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.validate_fail_rate = 1.0;
    tether_sim *sim = make_sim(&o);
    const tether_driver *d = tether_driver_sim();
    void *conn = open_conn(sim);
    tether_error err = {0};
    assert_int_equal(d->alive(conn, 1), 1);
    assert_int_equal(d->validate(conn, 1000, &err), TETHER_EBROKEN);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(d->alive(conn, 1), 0); /* marked broken */
    close_conn(conn);
    tether_sim_destroy(sim);

    tether_sim_opts_init(&o);
    o.break_idle_rate = 1.0;
    sim = make_sim(&o);
    conn = open_conn(sim);
    assert_int_equal(d->alive(conn, 1), 0);
    assert_int_equal(tether_sim_use(handle(conn), &err), TETHER_EBROKEN);
    close_conn(conn);
    tether_sim_destroy(sim);
}

/* ---- stats and classification ----------------------------------------- */

static void test_stats(void **state) {
    (void)state;
    tether_sim *sim = make_default();
    const tether_driver *d = tether_driver_sim();
    tether_error err = {0};
    void *a = open_conn(sim), *b = open_conn(sim);
    for (int i = 0; i < 5; i++)
        tether_sim_use(handle(a), &err);
    for (int i = 0; i < 3; i++)
        d->reset(a, NULL, &err);
    d->validate(b, 10, &err);
    d->validate(b, 10, &err);
    tether_sim_use(handle(b), &err);
    tether_sim_stats st = stats(sim);
    assert_int_equal(st.uses, 6);
    assert_int_equal(st.resets, 3);
    assert_int_equal(st.validations, 2);
    close_conn(a); /* its counters carry over */
    st = stats(sim);
    assert_int_equal(st.uses, 6);
    assert_int_equal(st.resets, 3);
    assert_int_equal(st.open, 1);
    assert_int_equal(st.closed, 1);
    tether_sim_set_down(sim, 1);
    void *x = NULL;
    start(sim, &x, &err);
    close_conn(b);
    st = stats(sim);
    assert_int_equal(st.connects, 3);
    assert_int_equal(st.connected, 2);
    assert_int_equal(st.open, 0);
    assert_int_equal(st.closed, 2);
    assert_int_equal(st.validations, 2);
    assert_int_equal(st.uses, 6);
    tether_sim_stats_get(sim, NULL);
    tether_sim_stats_get(NULL, &st);
    assert_int_equal(st.connects, 0);
    tether_sim_destroy(sim);
}

static void test_classify(void **state) {
    (void)state;
    const tether_driver *d = tether_driver_sim();
    static const struct {
        int code;
        tether_class cls;
    } cases[] = {
        {TETHER_ECONNECT, TETHER_CLASS_TRANSIENT},
        {TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT},
        {TETHER_EBROKEN, TETHER_CLASS_TRANSIENT},
        {TETHER_ETHROTTLED, TETHER_CLASS_THROTTLED},
        {TETHER_EAUTH, TETHER_CLASS_PERMANENT},
        {TETHER_EQUERY, TETHER_CLASS_PERMANENT},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tether_error err = {0};
        err.code = cases[i].code;
        d->classify(NULL, &err);
        assert_int_equal(err.cls, cases[i].cls);
    }
    tether_error err = {0};
    err.code = TETHER_EAUTH;
    err.cls = TETHER_CLASS_TRANSIENT;
    d->classify(NULL, &err);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT); /* left alone */
    d->classify(NULL, NULL);
}

/* ---- concurrency ------------------------------------------------------ */

enum { THREADS = 4, ROUNDS = 4000 };

typedef struct worker {
    pthread_t t;
    tether_sim *sim;
    uint64_t connected, refused, uses, resets;
} worker;

static _Atomic int workers_done;

static void worker_round(worker *w) {
    const tether_driver *d = tether_driver_sim();
    void *conn = NULL;
    tether_error err;
    if (start(w->sim, &conn, &err) != TETHER_CONNECTED) {
        w->refused++;
        return;
    }
    w->connected++;
    for (int j = 0; j < 3; j++) {
        w->uses++;
        if (tether_sim_use(handle(conn), &err) != 0)
            break;
        if (!d->alive(conn, 1))
            break;
        w->resets++;
        if (d->reset(conn, NULL, &err) != 0)
            break;
    }
    close_conn(conn);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    for (int i = 0; i < ROUNDS; i++)
        worker_round(w);
    atomic_fetch_add(&workers_done, 1);
    return NULL;
}

static tether_sim *threads_sim(void) {
    tether_sim_opts o;
    tether_sim_opts_init(&o);
    o.refuse_rate = 0.1;
    o.break_in_use_rate = 0.05;
    o.break_idle_rate = 0.01;
    o.reset_fail_rate = 0.02;
    o.max_connections = THREADS; /* each worker holds at most one */
    o.seed = 99;
    return make_sim(&o);
}

/* watch takes snapshots and breaks everything until the workers are done. */
static void watch(tether_sim *sim) {
    while (atomic_load(&workers_done) < THREADS) {
        tether_sim_stats st = stats(sim);
        assert_true(st.open <= THREADS);
        assert_true(st.connected == st.open + st.closed);
        tether_sim_break_all(sim);
        tether_sim_fatal_all(sim);
    }
}

static void test_threads(void **state) {
    (void)state;
    tether_sim *sim = threads_sim();
    worker w[THREADS] = {{0}};
    atomic_store(&workers_done, 0);
    for (int i = 0; i < THREADS; i++) {
        w[i].sim = sim;
        assert_int_equal(pthread_create(&w[i].t, NULL, worker_main, &w[i]), 0);
    }
    watch(sim);
    worker sum = {0};
    for (int i = 0; i < THREADS; i++) {
        pthread_join(w[i].t, NULL);
        sum.connected += w[i].connected;
        sum.refused += w[i].refused;
        sum.uses += w[i].uses;
        sum.resets += w[i].resets;
    }
    tether_sim_stats st = stats(sim);
    assert_int_equal(st.connects, THREADS * ROUNDS);
    assert_int_equal(sum.connected + sum.refused, THREADS * ROUNDS);
    assert_int_equal(st.connected, sum.connected);
    assert_int_equal(st.open, 0);
    assert_int_equal(st.closed, sum.connected);
    assert_int_equal(st.uses, sum.uses);
    assert_int_equal(st.resets, sum.resets);
    assert_true(sum.refused > 0 && sum.connected > 0);
    tether_sim_destroy(sim);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opts_defaults),
        cmocka_unit_test(test_opts_validation),
        cmocka_unit_test(test_connect_success),
        cmocka_unit_test(test_latency_within_budget),
        cmocka_unit_test(test_latency_over_budget),
        cmocka_unit_test(test_latency_poll_by_hand),
        cmocka_unit_test(test_down),
        cmocka_unit_test(test_fail_next),
        cmocka_unit_test(test_max_connections),
        cmocka_unit_test(test_auth_failure),
        cmocka_unit_test(test_timeout_rate),
        cmocka_unit_test(test_rates_seeded),
        cmocka_unit_test(test_hot_rates),
        cmocka_unit_test(test_break_all),
        cmocka_unit_test(test_fatal_all),
        cmocka_unit_test(test_reset_failures),
        cmocka_unit_test(test_validate_and_idle_faults),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
