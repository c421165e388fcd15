/* test_schedule.c - connection schedules (docs/schedules.md): the
 * mirroring table (docs/schedules.md, "Mirroring": budgets, pauses, the
 * remaining-time cap, fast failures, infinite login timeout), the streaming
 * reconnect ("Streaming": random start, order, doubling, provisioning
 * failures), sequential passes with backoff pauses ("Sequential"), and
 * option validation. Time is simulated: every attempt fails after
 * min(fail_after, budget), pauses take their delay, provisioning is instant.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "tether.h"

#define MAXSTEPS 4096

/* One recorded step with the simulated time it started at. */
typedef struct rec {
    tether_step s;
    int64_t at;
} rec;

/* The simulated world: how attempts and provisioning calls turn out. */
typedef struct world {
    int64_t fail_after; /* attempts fail after this; -1: they time out */
    int prov_fail;      /* the first prov_fail provisioning calls fail */
    int prov_hosts;     /* host count reported by a successful call */
    int64_t t;          /* the clock */
} world;

static int64_t attempt_time(const world *w, int64_t budget) {
    if (w->fail_after < 0)
        return budget < 0 ? 0 : budget;
    return budget < 0 ? w->fail_after
                      : (w->fail_after < budget ? w->fail_after : budget);
}

/* Runs s until DONE or max steps; returns the number recorded. */
static int run(tether_schedule *s, world *w, rec *out, int max) {
    int n = 0, provs = 0;
    while (n < max) {
        tether_step st;
        tether_schedule_next(s, w->t, &st);
        out[n].s = st;
        out[n].at = w->t;
        n++;
        if (st.kind == TETHER_STEP_DONE)
            break;
        if (st.kind == TETHER_STEP_ATTEMPT)
            w->t += attempt_time(w, st.budget_ms);
        else if (st.kind == TETHER_STEP_PAUSE)
            w->t += st.delay_ms;
        else if (st.kind == TETHER_STEP_PROVISION)
            tether_schedule_provisioned(s, provs++ >= w->prov_fail,
                                        w->prov_hosts);
    }
    return n;
}

static tether_schedule *make(const tether_schedule_opts *o) {
    tether_schedule *s = NULL;
    tether_error err = {0};
    int rc = tether_schedule_create(&s, o, 0, &err);
    if (rc)
        fail_msg("create: %s", err.message);
    return s;
}

static tether_schedule_opts mirror_opts(int64_t login_ms) {
    tether_schedule_opts o;
    tether_schedule_opts_init(&o);
    o.strategy = TETHER_STRATEGY_MIRRORING;
    o.login_timeout_ms = login_ms;
    o.nhosts = 2;
    return o;
}

static void expect_attempt(const rec *r, int num, int host, int64_t at,
                           int64_t budget) {
    assert_int_equal(r->s.kind, TETHER_STEP_ATTEMPT);
    assert_int_equal(r->s.attempt, num);
    assert_int_equal(r->s.host, host);
    assert_int_equal(r->at, at);
    assert_int_equal(r->s.budget_ms, budget);
}

static void expect_pause(const rec *r, int64_t at, int64_t delay) {
    assert_int_equal(r->s.kind, TETHER_STEP_PAUSE);
    assert_int_equal(r->at, at);
    assert_int_equal(r->s.delay_ms, delay);
}

/* ---- mirroring --------------------------------------------------------- */

static void test_mirror_seed_table_15s(void **state) {
    (void)state;
    tether_schedule_opts o = mirror_opts(15000);
    tether_schedule *s = make(&o);
    world w = {.fail_after = -1};
    rec r[64];
    int n = run(s, &w, r, 64);
    assert_int_equal(n, 9);
    expect_attempt(&r[0], 1, 0, 0, 1200);
    expect_attempt(&r[1], 2, 1, 1200, 1200);
    expect_pause(&r[2], 2400, 100);
    expect_attempt(&r[3], 3, 0, 2500, 2400);
    expect_attempt(&r[4], 4, 1, 4900, 2400);
    expect_pause(&r[5], 7300, 200);
    expect_attempt(&r[6], 5, 0, 7500, 3600);
    expect_attempt(&r[7], 6, 1, 11100, 3600);
    /* 14.7 s spent: the 400 ms pause would reach 15 s. */
    assert_int_equal(r[8].s.kind, TETHER_STEP_DONE);
    assert_int_equal(r[8].at, 14700);
    assert_int_equal(r[8].s.attempt, 6);
    assert_int_equal(r[3].s.round, 2);
    assert_int_equal(r[7].s.round, 3);
    tether_schedule_destroy(s);
}

static void test_mirror_30s(void **state) {
    (void)state;
    tether_schedule_opts o = mirror_opts(30000);
    tether_schedule *s = make(&o);
    world w = {.fail_after = -1};
    rec r[64];
    int n = run(s, &w, r, 64);
    assert_int_equal(n, 11);
    expect_attempt(&r[0], 1, 0, 0, 2400);
    expect_attempt(&r[1], 2, 1, 2400, 2400);
    expect_pause(&r[2], 4800, 100);
    expect_attempt(&r[3], 3, 0, 4900, 4800);
    expect_attempt(&r[4], 4, 1, 9700, 4800);
    expect_pause(&r[5], 14500, 200);
    expect_attempt(&r[6], 5, 0, 14700, 7200);
    expect_attempt(&r[7], 6, 1, 21900, 7200);
    expect_pause(&r[8], 29100, 400);
    /* The fourth round is cut to what remains: one short try. */
    expect_attempt(&r[9], 7, 0, 29500, 500);
    assert_int_equal(r[10].s.kind, TETHER_STEP_DONE);
    assert_int_equal(r[10].at, 30000);
    tether_schedule_destroy(s);
}

static void test_mirror_remaining_cap(void **state) {
    (void)state;
    tether_schedule_opts o = mirror_opts(5000); /* unit 400 ms */
    tether_schedule *s = make(&o);
    world w = {.fail_after = -1};
    rec r[64];
    int n = run(s, &w, r, 64);
    assert_int_equal(n, 9);
    expect_attempt(&r[6], 5, 0, 2700, 1200);
    /* 1200 ms due, 1100 ms left. */
    expect_attempt(&r[7], 6, 1, 3900, 1100);
    assert_int_equal(r[8].s.kind, TETHER_STEP_DONE);
    assert_int_equal(r[8].at, 5000);
    tether_schedule_destroy(s);
}

static void test_mirror_cap_10s_late_caller(void **state) {
    (void)state;
    /* 10 s, unit 800: a caller running late gets what is left. */
    tether_schedule_opts o = mirror_opts(10000);
    tether_schedule *s = make(&o);
    tether_step st;
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.budget_ms, 800);
    tether_schedule_next(s, 800, &st);
    assert_int_equal(st.budget_ms, 800);
    tether_schedule_next(s, 1600, &st);
    assert_int_equal(st.kind, TETHER_STEP_PAUSE);
    tether_schedule_next(s, 9000, &st);
    assert_int_equal(st.kind, TETHER_STEP_ATTEMPT);
    assert_int_equal(st.budget_ms, 1000); /* 1600 due, 1000 left */
    tether_schedule_next(s, 10000, &st);
    assert_int_equal(st.kind, TETHER_STEP_DONE);
    tether_schedule_destroy(s);
}

static void test_mirror_fast_failures(void **state) {
    (void)state;
    tether_schedule_opts o = mirror_opts(15000);
    tether_schedule *s = make(&o);
    world w = {.fail_after = 10};
    static rec r[MAXSTEPS];
    int n = run(s, &w, r, MAXSTEPS);
    const int64_t want[] = {100, 200, 400, 800, 1000, 1000, 1000};
    int pauses = 0, attempts = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].s.kind == TETHER_STEP_PAUSE) {
            int64_t exp = pauses < 7 ? want[pauses] : 1000;
            assert_int_equal(r[i].s.delay_ms, exp);
            pauses++;
        } else if (r[i].s.kind == TETHER_STEP_ATTEMPT) {
            int k = attempts++;
            assert_int_equal(r[i].s.host, k % 2);
            int64_t due = 1200LL * (k / 2 + 1), left = 15000 - r[i].at;
            assert_int_equal(r[i].s.budget_ms, due < left ? due : left);
        }
    }
    assert_int_equal(r[n - 1].s.kind, TETHER_STEP_DONE);
    assert_true(r[n - 1].at <= 15000);
    assert_true(pauses >= 10); /* far more than the 2 of the slow case */
    assert_true(attempts >= 20);
    tether_schedule_destroy(s);
}

static void test_mirror_infinite(void **state) {
    (void)state;
    tether_schedule_opts o = mirror_opts(-1);
    tether_schedule *s = make(&o);
    world w = {.fail_after = -1};
    rec r[40];
    int n = run(s, &w, r, 40);
    assert_int_equal(n, 40);
    int attempts = 0;
    int64_t last = 0;
    for (int i = 0; i < n; i++) {
        assert_int_not_equal(r[i].s.kind, TETHER_STEP_DONE);
        if (r[i].s.kind != TETHER_STEP_ATTEMPT)
            continue;
        int k = attempts++;
        assert_int_equal(r[i].s.host, k % 2);
        assert_int_equal(r[i].s.budget_ms, 1200LL * (k / 2 + 1));
        if (k % 2 == 0 && k > 0)
            assert_int_equal(r[i].s.budget_ms - last, 1200);
        last = r[i].s.budget_ms;
    }
    assert_int_equal(attempts, 27); /* 40 steps: 13 pairs + pauses + 1 */
    tether_schedule_destroy(s);
}

static void test_mirror_one_host(void **state) {
    (void)state;
    tether_schedule_opts o = mirror_opts(15000);
    o.nhosts = 1;
    tether_schedule *s = make(&o);
    world w = {.fail_after = -1};
    rec r[64];
    int n = run(s, &w, r, 64);
    assert_int_equal(n, 9);
    for (int i = 0; i < n; i++)
        if (r[i].s.kind == TETHER_STEP_ATTEMPT)
            assert_int_equal(r[i].s.host, 0);
    expect_pause(&r[2], 2400, 100);
    tether_schedule_destroy(s);
}

/* ---- streaming --------------------------------------------------------- */

static tether_schedule_opts stream_opts(uint64_t seed) {
    tether_schedule_opts o;
    tether_schedule_opts_init(&o);
    o.strategy = TETHER_STRATEGY_STREAMING;
    o.login_timeout_ms = -1;
    o.nhosts = 2;
    o.nports = 3;
    o.seed = seed;
    return o;
}

static void test_stream_order(void **state) {
    (void)state;
    tether_schedule_opts o = stream_opts(42);
    tether_schedule *s = make(&o);
    world w = {.fail_after = 5, .prov_hosts = 2};
    rec r[64];
    int n = run(s, &w, r, 20);
    assert_int_equal(n, 20);
    assert_int_equal(r[0].s.kind, TETHER_STEP_PAUSE);
    int64_t d = r[0].s.delay_ms;
    assert_true(d >= 1000 && d <= 5000);
    assert_int_equal(r[1].s.kind, TETHER_STEP_PROVISION);
    assert_int_equal(r[1].at, d);
    for (int i = 0; i < 6; i++) {
        const tether_step *a = &r[2 + i].s;
        assert_int_equal(a->kind, TETHER_STEP_ATTEMPT);
        assert_int_equal(a->attempt, i + 1);
        assert_int_equal(a->host, i / 3);
        assert_int_equal(a->port, i % 3);
        assert_int_equal(a->budget_ms, -1);
        assert_int_equal(a->round, 1);
    }
    expect_pause(&r[8], d + 30, 2 * d);
    assert_int_equal(r[9].s.kind, TETHER_STEP_PROVISION);
    assert_int_equal(r[9].s.round, 2);
    assert_int_equal(r[10].s.host, 0);
    assert_int_equal(r[10].s.port, 0);
    assert_int_equal(r[10].s.attempt, 7);
    expect_pause(&r[16], r[16].at, 4 * d);
    tether_schedule_destroy(s);
}

static void test_stream_host_count_from_provisioning(void **state) {
    (void)state;
    tether_schedule_opts o = stream_opts(7);
    o.nports = 1;
    tether_schedule *s = make(&o);
    world w = {.fail_after = 0, .prov_hosts = 4};
    rec r[16];
    run(s, &w, r, 8);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(r[2 + i].s.kind, TETHER_STEP_ATTEMPT);
        assert_int_equal(r[2 + i].s.host, i);
    }
    assert_int_equal(r[6].s.kind, TETHER_STEP_PAUSE);
    tether_schedule_destroy(s);
}

static void test_stream_initial_delay_spread(void **state) {
    (void)state;
    int64_t lo = 1 << 30, hi = 0;
    int below_3s = 0;
    for (uint64_t seed = 1; seed <= 500; seed++) {
        tether_schedule_opts o = stream_opts(seed);
        tether_schedule *s = make(&o);
        tether_step st;
        tether_schedule_next(s, 0, &st);
        assert_int_equal(st.kind, TETHER_STEP_PAUSE);
        assert_true(st.delay_ms >= 1000 && st.delay_ms <= 5000);
        lo = st.delay_ms < lo ? st.delay_ms : lo;
        hi = st.delay_ms > hi ? st.delay_ms : hi;
        below_3s += st.delay_ms < 3000;
        tether_schedule_destroy(s);
    }
    assert_true(lo < 1200 && hi > 4800);           /* covers the whole range */
    assert_true(below_3s > 150 && below_3s < 350); /* roughly uniform */
}

static void test_stream_same_seed_same_delay(void **state) {
    (void)state;
    tether_step a, b;
    tether_schedule_opts o = stream_opts(99);
    tether_schedule *s1 = make(&o), *s2 = make(&o);
    tether_schedule_next(s1, 0, &a);
    tether_schedule_next(s2, 0, &b);
    assert_int_equal(a.delay_ms, b.delay_ms);
    tether_schedule_destroy(s1);
    tether_schedule_destroy(s2);
}

static void test_stream_doubles_to_cap(void **state) {
    (void)state;
    tether_schedule_opts o = stream_opts(3);
    o.nhosts = 1;
    o.nports = 1;
    tether_schedule *s = make(&o);
    world w = {.fail_after = 0, .prov_hosts = 1};
    rec r[64];
    int n = run(s, &w, r, 40);
    int64_t d = r[0].s.delay_ms, prev = d;
    int pauses = 0;
    for (int i = 1; i < n; i++) {
        if (r[i].s.kind != TETHER_STEP_PAUSE)
            continue;
        int64_t want = prev * 2 > 60000 ? 60000 : prev * 2;
        assert_int_equal(r[i].s.delay_ms, want);
        prev = want;
        pauses++;
    }
    assert_true(pauses >= 9);
    assert_int_equal(prev, 60000);
    tether_schedule_destroy(s);
}

static void test_stream_provisioning_failure_doubles(void **state) {
    (void)state;
    tether_schedule_opts o = stream_opts(11);
    tether_schedule *s = make(&o);
    world w = {.fail_after = 0, .prov_fail = 2, .prov_hosts = 2};
    rec r[16];
    run(s, &w, r, 8);
    int64_t d = r[0].s.delay_ms;
    assert_int_equal(r[1].s.kind, TETHER_STEP_PROVISION);
    expect_pause(&r[2], d, 2 * d);
    assert_int_equal(r[3].s.kind, TETHER_STEP_PROVISION);
    expect_pause(&r[4], 3 * d, 4 * d);
    assert_int_equal(r[5].s.kind, TETHER_STEP_PROVISION);
    assert_int_equal(r[5].s.round, 1);
    assert_int_equal(r[6].s.kind, TETHER_STEP_ATTEMPT);
    assert_int_equal(r[6].s.attempt, 1);
    tether_schedule_destroy(s);
}

static void test_stream_no_initial_wait(void **state) {
    (void)state;
    tether_schedule_opts o = stream_opts(5);
    o.initial_wait = 0;
    tether_schedule *s = make(&o);
    tether_step st;
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.kind, TETHER_STEP_PROVISION);
    /* No report at all counts as a failure: doubled pause. */
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.kind, TETHER_STEP_PAUSE);
    assert_true(st.delay_ms >= 2000 && st.delay_ms <= 10000);
    tether_schedule_destroy(s);
}

static void test_stream_login_timeout(void **state) {
    (void)state;
    tether_schedule_opts o = stream_opts(8);
    o.login_timeout_ms = 20000;
    tether_schedule *s = make(&o);
    world w = {.fail_after = -1, .prov_hosts = 2};
    rec r[64];
    int n = run(s, &w, r, 64);
    assert_int_equal(r[n - 1].s.kind, TETHER_STEP_DONE);
    assert_true(r[n - 1].at <= 20000);
    /* Timing-out attempts: the first one takes all that remains. */
    assert_int_equal(r[2].s.kind, TETHER_STEP_ATTEMPT);
    assert_int_equal(r[2].s.budget_ms, 20000 - r[2].at);
    tether_schedule_destroy(s);
}

/* ---- sequential -------------------------------------------------------- */

static tether_schedule_opts seq_opts(void) {
    tether_schedule_opts o;
    tether_schedule_opts_init(&o);
    o.nhosts = 2;
    o.nports = 2;
    o.login_timeout_ms = 10000;
    o.attempt_timeout_ms = 1000;
    o.backoff.kind = TETHER_BACKOFF_FIXED;
    o.backoff.base_ms = 500;
    o.backoff.jitter = TETHER_JITTER_NONE;
    return o;
}

static void test_seq_passes_and_deadline(void **state) {
    (void)state;
    tether_schedule_opts o = seq_opts();
    tether_schedule *s = make(&o);
    world w = {.fail_after = -1};
    rec r[64];
    int n = run(s, &w, r, 64);
    assert_int_equal(n, 12);
    for (int i = 0; i < 4; i++) {
        expect_attempt(&r[i], i + 1, i / 2, i * 1000, 1000);
        assert_int_equal(r[i].s.port, i % 2);
        assert_int_equal(r[i].s.round, 1);
    }
    expect_pause(&r[4], 4000, 500);
    assert_int_equal(r[4].s.round, 1);
    expect_attempt(&r[5], 5, 0, 4500, 1000);
    assert_int_equal(r[5].s.round, 2);
    expect_pause(&r[9], 8500, 500);
    expect_attempt(&r[10], 9, 0, 9000, 1000); /* exactly what is left */
    assert_int_equal(r[10].s.round, 3);
    assert_int_equal(r[11].s.kind, TETHER_STEP_DONE);
    assert_int_equal(r[11].at, 10000);
    tether_schedule_destroy(s);
}

static void test_seq_pause_would_reach_deadline(void **state) {
    (void)state;
    tether_schedule_opts o = seq_opts();
    o.nhosts = 1;
    o.nports = 1;
    o.login_timeout_ms = 1400; /* 1000 attempt, then 400 left < 500 */
    tether_schedule *s = make(&o);
    world w = {.fail_after = -1};
    rec r[8];
    int n = run(s, &w, r, 8);
    assert_int_equal(n, 2);
    assert_int_equal(r[1].s.kind, TETHER_STEP_DONE);
    assert_int_equal(r[1].at, 1000);
    tether_schedule_destroy(s);
}

static void test_seq_pauses_follow_backoff(void **state) {
    (void)state;
    tether_schedule_opts o = seq_opts();
    o.login_timeout_ms = -1;
    o.nhosts = 1;
    o.nports = 1;
    tether_backoff_opts_init(&o.backoff); /* exponential, full jitter */
    o.backoff.seed = 7;
    tether_backoff *b = NULL;
    assert_int_equal(tether_backoff_create(&b, &o.backoff, NULL), 0);
    tether_schedule *s = make(&o);
    world w = {.fail_after = -1};
    rec r[64];
    int n = run(s, &w, r, 40);
    for (int i = 0; i < n; i++) {
        if (r[i].s.kind != TETHER_STEP_PAUSE)
            continue;
        int64_t d;
        assert_int_equal(tether_backoff_next(b, TETHER_CLASS_TRANSIENT, &d), 0);
        assert_int_equal(r[i].s.delay_ms, d);
    }
    assert_int_equal(tether_backoff_count(b), 20);
    tether_backoff_destroy(b);
    tether_schedule_destroy(s);
}

/* Sequential timing takes a new host count between passes (after the
 * PAUSE step: the connector's provisioning callback refreshed the list),
 * and ignores one reported in the middle of a pass. */
static void test_seq_host_count_between_passes(void **state) {
    (void)state;
    tether_schedule_opts o;
    tether_schedule_opts_init(&o);
    o.login_timeout_ms = -1;
    o.nhosts = 2;
    tether_schedule *s = make(&o);
    tether_step st;
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.host, 0);
    tether_schedule_provisioned(s, 1, 5); /* mid-pass: ignored */
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.host, 1);
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.kind, TETHER_STEP_PAUSE);
    tether_schedule_provisioned(s, 0, 7); /* failed: ignored */
    tether_schedule_provisioned(s, 1, 3);
    for (int i = 0; i < 3; i++) {
        tether_schedule_next(s, 0, &st);
        assert_int_equal(st.kind, TETHER_STEP_ATTEMPT);
        assert_int_equal(st.host, i);
        assert_int_equal(st.round, 2);
    }
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.kind, TETHER_STEP_PAUSE);
    tether_schedule_destroy(s);
}

static void test_seq_unbounded_budget(void **state) {
    (void)state;
    tether_schedule_opts o;
    tether_schedule_opts_init(&o);
    o.login_timeout_ms = -1;
    tether_schedule *s = make(&o);
    tether_step st;
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.kind, TETHER_STEP_ATTEMPT);
    assert_int_equal(st.budget_ms, -1);
    tether_schedule_destroy(s);
}

static void test_seq_login_timeout_only(void **state) {
    (void)state;
    tether_schedule_opts o;
    tether_schedule_opts_init(&o); /* 15 s, no attempt timeout */
    tether_schedule *s = make(&o);
    tether_step st;
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.budget_ms, 15000);
    tether_schedule_destroy(s);
}

static void test_seq_immediate_once(void **state) {
    (void)state;
    tether_schedule_opts o = seq_opts();
    o.login_timeout_ms = -1;
    o.nhosts = 1;
    o.nports = 1;
    o.backoff.kind = TETHER_BACKOFF_IMMEDIATE;
    tether_schedule *s = make(&o);
    world w = {.fail_after = -1};
    rec r[8];
    int n = run(s, &w, r, 8);
    assert_int_equal(n, 4);
    assert_int_equal(r[0].s.kind, TETHER_STEP_ATTEMPT);
    expect_pause(&r[1], 1000, 0);
    assert_int_equal(r[2].s.kind, TETHER_STEP_ATTEMPT);
    assert_int_equal(r[3].s.kind, TETHER_STEP_DONE);
    tether_schedule_destroy(s);
}

static void test_done_is_sticky(void **state) {
    (void)state;
    tether_schedule_opts o = mirror_opts(15000);
    tether_schedule *s = make(&o);
    tether_step st;
    tether_schedule_next(s, 15000, &st);
    assert_int_equal(st.kind, TETHER_STEP_DONE);
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.kind, TETHER_STEP_DONE);
    tether_schedule_destroy(s);
}

/* ---- options ----------------------------------------------------------- */

static void test_opts_defaults(void **state) {
    (void)state;
    tether_schedule_opts o;
    memset(&o, 0x5a, sizeof(o));
    tether_schedule_opts_init(&o);
    assert_int_equal(o.strategy, TETHER_STRATEGY_SEQUENTIAL);
    assert_int_equal(o.login_timeout_ms, 15000);
    assert_int_equal(o.nhosts, 1);
    assert_int_equal(o.nports, 1);
    assert_int_equal(o.attempt_timeout_ms, 0);
    assert_int_equal(o.initial_wait, 1);
    assert_int_equal(o.seed, 0);
    assert_int_equal(o.backoff.base_ms, 100);
    assert_int_equal(o.backoff.kind, TETHER_BACKOFF_EXPONENTIAL);
}

static void expect_invalid(const tether_schedule_opts *o, const char *field) {
    tether_schedule *s = (tether_schedule *)1;
    tether_error err = {0};
    assert_int_equal(tether_schedule_create(&s, o, 0, &err), TETHER_EINVAL);
    assert_null(s);
    assert_int_equal(err.code, TETHER_EINVAL);
    if (!strstr(err.message, field))
        fail_msg("message '%s' does not name %s", err.message, field);
}

static void test_opts_validation(void **state) {
    (void)state;
    tether_schedule_opts o;
    tether_schedule_opts_init(&o);
    o.nhosts = 0;
    expect_invalid(&o, "nhosts");
    tether_schedule_opts_init(&o);
    o.nports = 0;
    expect_invalid(&o, "nports");
    tether_schedule_opts_init(&o);
    o.login_timeout_ms = 0;
    expect_invalid(&o, "login_timeout_ms");
    o.login_timeout_ms = -2;
    expect_invalid(&o, "login_timeout_ms");
    tether_schedule_opts_init(&o);
    o.attempt_timeout_ms = -1;
    expect_invalid(&o, "attempt_timeout_ms");
    tether_schedule_opts_init(&o);
    o.backoff.max_ms = 10; /* below base */
    expect_invalid(&o, "max_ms");
    tether_schedule_opts_init(&o);
    o.strategy = (tether_strategy)9;
    expect_invalid(&o, "strategy");
    expect_invalid(NULL, "NULL");
    tether_schedule_opts_init(&o);
    o.login_timeout_ms = -1;
    tether_schedule *s = NULL;
    assert_int_equal(tether_schedule_create(&s, &o, 0, NULL), 0);
    tether_schedule_destroy(s);
    tether_schedule_destroy(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mirror_seed_table_15s),
        cmocka_unit_test(test_mirror_30s),
        cmocka_unit_test(test_mirror_remaining_cap),
        cmocka_unit_test(test_mirror_cap_10s_late_caller),
        cmocka_unit_test(test_mirror_fast_failures),
        cmocka_unit_test(test_mirror_infinite),
        cmocka_unit_test(test_mirror_one_host),
        cmocka_unit_test(test_stream_order),
        cmocka_unit_test(test_stream_host_count_from_provisioning),
        cmocka_unit_test(test_stream_initial_delay_spread),
        cmocka_unit_test(test_stream_same_seed_same_delay),
        cmocka_unit_test(test_stream_doubles_to_cap),
        cmocka_unit_test(test_stream_provisioning_failure_doubles),
        cmocka_unit_test(test_stream_no_initial_wait),
        cmocka_unit_test(test_stream_login_timeout),
        cmocka_unit_test(test_seq_passes_and_deadline),
        cmocka_unit_test(test_seq_pause_would_reach_deadline),
        cmocka_unit_test(test_seq_pauses_follow_backoff),
        cmocka_unit_test(test_seq_host_count_between_passes),
        cmocka_unit_test(test_seq_unbounded_budget),
        cmocka_unit_test(test_seq_login_timeout_only),
        cmocka_unit_test(test_seq_immediate_once),
        cmocka_unit_test(test_done_is_sticky),
        cmocka_unit_test(test_opts_defaults),
        cmocka_unit_test(test_opts_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
