/* test_backoff.c - backoff schedules (docs/backoff.md): every kind, every
 * jitter mode, presets, bounds and spread over many seeds, validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "tether.h"

static tether_backoff *make(const tether_backoff_opts *o) {
    tether_backoff *b = NULL;
    tether_error err = {0};
    assert_int_equal(tether_backoff_create(&b, o, &err), 0);
    assert_non_null(b);
    return b;
}

static int64_t next(tether_backoff *b, tether_class cause) {
    int64_t d = -1;
    assert_int_equal(tether_backoff_next(b, cause, &d), 0);
    return d;
}

static tether_backoff_opts nojitter(tether_backoff_kind kind) {
    tether_backoff_opts o;
    tether_backoff_opts_init(&o);
    o.kind = kind;
    o.jitter = TETHER_JITTER_NONE;
    o.seed = 7;
    return o;
}

static void test_defaults(void **state) {
    (void)state;
    tether_backoff_opts o;
    tether_backoff_opts_init(&o);
    assert_int_equal(o.kind, TETHER_BACKOFF_EXPONENTIAL);
    assert_int_equal(o.base_ms, 100);
    assert_int_equal(o.max_ms, 60000);
    assert_true(o.multiplier == 2.0);
    assert_int_equal(o.jitter, TETHER_JITTER_FULL);
}

static void test_exponential_sequence_and_cap(void **state) {
    (void)state;
    tether_backoff_opts o = nojitter(TETHER_BACKOFF_EXPONENTIAL);
    o.max_ms = 1000;
    tether_backoff *b = make(&o);
    const int64_t want[] = {100, 200, 400, 800, 1000, 1000, 1000};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_int_equal(next(b, TETHER_CLASS_TRANSIENT), want[i]);
    assert_int_equal(tether_backoff_count(b), 7);
    tether_backoff_reset(b);
    assert_int_equal(next(b, TETHER_CLASS_TRANSIENT), 100);
    /* Thousands of steps neither overflow nor leave the cap. */
    for (int i = 0; i < 5000; i++)
        assert_int_equal(next(b, TETHER_CLASS_TRANSIENT) <= 1000, 1);
    assert_int_equal(next(b, TETHER_CLASS_TRANSIENT), 1000);
    tether_backoff_destroy(b);
}

/* A zero base past ~1000 failures: 0 x inf was NaN, converted to an
 * integer (undefined; UBSan stops the sanitizer build here). */
static void test_zero_base_long_run(void **state) {
    (void)state;
    const tether_jitter modes[] = {TETHER_JITTER_NONE, TETHER_JITTER_FULL,
                                   TETHER_JITTER_EQUAL,
                                   TETHER_JITTER_PROPORTIONAL};
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        tether_backoff_opts o = nojitter(TETHER_BACKOFF_EXPONENTIAL);
        o.base_ms = 0;
        o.max_ms = 60000;
        o.jitter = modes[m];
        tether_backoff *b = make(&o);
        for (int i = 0; i < 3000; i++)
            assert_int_equal(next(b, TETHER_CLASS_TRANSIENT), 0);
        tether_backoff_destroy(b);
    }
}

static void test_fixed_incremental_immediate(void **state) {
    (void)state;
    tether_backoff_opts o = nojitter(TETHER_BACKOFF_FIXED);
    o.base_ms = 250;
    tether_backoff *b = make(&o);
    for (int i = 0; i < 5; i++)
        assert_int_equal(next(b, TETHER_CLASS_TRANSIENT), 250);
    tether_backoff_destroy(b);

    o = nojitter(TETHER_BACKOFF_INCREMENTAL);
    o.base_ms = 100;
    o.step_ms = 150;
    o.max_ms = 500;
    b = make(&o);
    const int64_t inc[] = {100, 250, 400, 500, 500};
    for (int i = 0; i < 5; i++)
        assert_int_equal(next(b, TETHER_CLASS_TRANSIENT), inc[i]);
    tether_backoff_destroy(b);

    o = nojitter(TETHER_BACKOFF_IMMEDIATE);
    b = make(&o);
    int64_t d = -1;
    assert_int_equal(tether_backoff_next(b, TETHER_CLASS_TRANSIENT, &d), 0);
    assert_int_equal(d, 0);
    assert_int_equal(tether_backoff_next(b, TETHER_CLASS_TRANSIENT, &d),
                     TETHER_EEXHAUSTED);
    tether_backoff_reset(b);
    assert_int_equal(tether_backoff_next(b, TETHER_CLASS_TRANSIENT, &d), 0);
    tether_backoff_destroy(b);
}

/* Draw n-th pauses over many seeds; check bounds and that they spread. */
static void check_jitter(tether_jitter j, int step, int64_t lo, int64_t hi) {
    int64_t min = INT64_MAX, max = -1;
    double sum = 0;
    for (uint64_t seed = 1; seed <= 2000; seed++) {
        tether_backoff_opts o;
        tether_backoff_opts_init(&o);
        o.base_ms = 100;
        o.max_ms = 10000;
        o.jitter = j;
        o.seed = seed;
        tether_backoff *b = make(&o);
        int64_t d = 0;
        for (int i = 0; i <= step; i++)
            d = next(b, TETHER_CLASS_TRANSIENT);
        tether_backoff_destroy(b);
        assert_true(d >= lo && d <= hi);
        min = d < min ? d : min;
        max = d > max ? d : max;
        sum += (double)d;
    }
    /* Spread: the draws cover most of the allowed range. */
    assert_true(min <= lo + (hi - lo) / 10);
    assert_true(max >= hi - (hi - lo) / 10);
    double mean = sum / 2000.0;
    assert_true(mean > lo + (hi - lo) * 0.4 && mean < lo + (hi - lo) * 0.6);
}

static void test_jitter_full_equal(void **state) {
    (void)state;
    check_jitter(TETHER_JITTER_FULL, 3, 0, 800);        /* [0, d] */
    check_jitter(TETHER_JITTER_EQUAL, 3, 400, 800);     /* [d/2, d] */
    check_jitter(TETHER_JITTER_FULL, 20, 0, 10000);     /* at the cap */
    check_jitter(TETHER_JITTER_EQUAL, 20, 5000, 10000); /* at the cap */
}

static void test_jitter_proportional(void **state) {
    (void)state;
    check_jitter(TETHER_JITTER_PROPORTIONAL, 2, 320, 480); /* 400 +-20 % */
}

static void test_decorrelated_does_not_pin_at_cap(void **state) {
    (void)state;
    /* After many steps every draw is in [base, max] and almost none equal
     * the cap exactly (the AWS formula min(cap, U(base, 3 prev)) returns
     * exactly the cap most of the time once 3 prev is far above it). */
    int at_cap = 0, total = 0;
    for (uint64_t seed = 1; seed <= 500; seed++) {
        tether_backoff_opts o;
        tether_backoff_opts_init(&o);
        o.base_ms = 100;
        o.max_ms = 5000;
        o.jitter = TETHER_JITTER_DECORRELATED;
        o.seed = seed;
        tether_backoff *b = make(&o);
        for (int i = 0; i < 60; i++) {
            int64_t d = next(b, TETHER_CLASS_TRANSIENT);
            assert_true(d >= 100 && d <= 5000);
            if (i >= 20) {
                total++;
                at_cap += d == 5000;
            }
        }
        tether_backoff_destroy(b);
    }
    assert_true(at_cap * 100 < total); /* under 1 % exactly at the cap */
}

static void test_grpc_preset(void **state) {
    (void)state;
    tether_backoff_opts o;
    assert_int_equal(tether_backoff_preset("grpc", &o, NULL), 0);
    assert_int_equal(o.base_ms, 1000);
    assert_true(o.multiplier == 1.6);
    assert_int_equal(o.max_ms, 120000);
    assert_int_equal(o.jitter, TETHER_JITTER_PROPORTIONAL);
    assert_true(o.jitter_ratio == 0.2);
    /* Un-jittered: 1000, 1600, 2560, 4096, ... capped at 120000, and each
     * draw within +-20 % of it. */
    for (uint64_t seed = 1; seed <= 200; seed++) {
        o.seed = seed;
        tether_backoff *b = make(&o);
        double expect = 1000;
        for (int i = 0; i < 15; i++) {
            int64_t d = next(b, TETHER_CLASS_TRANSIENT);
            double c = expect > 120000 ? 120000 : expect;
            assert_true(d >= (int64_t)(c * 0.8) - 1 &&
                        d <= (int64_t)(c * 1.2) + 1);
            expect *= 1.6;
        }
        tether_backoff_destroy(b);
    }
}

static void test_other_presets(void **state) {
    (void)state;
    tether_backoff_opts o;
    tether_error err = {0};
    assert_int_equal(tether_backoff_preset("blocking-period", &o, NULL), 0);
    tether_backoff *b = make(&o);
    const int64_t bp[] = {5000, 10000, 20000, 40000, 60000, 60000};
    for (int i = 0; i < 6; i++)
        assert_int_equal(next(b, TETHER_CLASS_TRANSIENT), bp[i]);
    tether_backoff_destroy(b);
    assert_int_equal(tether_backoff_preset("nope", &o, &err), TETHER_ESPEC);
    assert_non_null(strstr(err.message, "\"nope\""));
}

static void test_reconnect_down_and_throttled(void **state) {
    (void)state;
    tether_backoff_opts o;
    assert_int_equal(tether_backoff_preset("reconnect", &o, NULL), 0);
    assert_int_equal(o.kind, TETHER_BACKOFF_RECONNECT);
    for (uint64_t seed = 1; seed <= 300; seed++) {
        o.seed = seed;
        tether_backoff *b = make(&o);
        /* First pause within [0, base]; then base * 3^(n-1) +-50 %. */
        assert_true(next(b, TETHER_CLASS_TRANSIENT) <= o.base_ms);
        double raw = (double)o.base_ms;
        for (int i = 0; i < 6; i++) {
            double c = raw > (double)o.max_ms ? (double)o.max_ms : raw;
            int64_t d = next(b, TETHER_CLASS_TRANSIENT);
            assert_true(d >= (int64_t)(c * 0.5) && d <= (int64_t)(c * 1.5));
            raw *= o.multiplier;
        }
        /* Throttled: window step, doubling per throttle, draw [w/2, w]. */
        int64_t w = o.step_ms;
        for (int i = 0; i < 8; i++) {
            int64_t d = next(b, TETHER_CLASS_THROTTLED);
            int64_t cw = w > 4 * o.max_ms ? 4 * o.max_ms : w;
            assert_true(d >= cw / 2 && d <= cw);
            w *= 2;
        }
        /* A down failure resets the throttle window. */
        next(b, TETHER_CLASS_TRANSIENT);
        assert_true(next(b, TETHER_CLASS_THROTTLED) <= o.step_ms);
        tether_backoff_destroy(b);
    }
}

static void test_same_seed_same_sequence(void **state) {
    (void)state;
    tether_backoff_opts o;
    tether_backoff_opts_init(&o);
    o.seed = 42;
    tether_backoff *a = make(&o), *b = make(&o);
    int differ = 0;
    for (int i = 0; i < 20; i++)
        assert_int_equal(next(a, TETHER_CLASS_TRANSIENT),
                         next(b, TETHER_CLASS_TRANSIENT));
    tether_backoff_destroy(b);
    o.seed = 43;
    b = make(&o);
    tether_backoff_reset(a);
    for (int i = 0; i < 20; i++)
        differ +=
            next(a, TETHER_CLASS_TRANSIENT) != next(b, TETHER_CLASS_TRANSIENT);
    assert_true(differ > 10);
    tether_backoff_destroy(a);
    tether_backoff_destroy(b);
}

static void expect_invalid(tether_backoff_opts o, const char *field) {
    tether_backoff *b = (tether_backoff *)1;
    tether_error err = {0};
    assert_int_equal(tether_backoff_create(&b, &o, &err), TETHER_EINVAL);
    assert_null(b);
    assert_non_null(strstr(err.message, field));
}

static void test_validation(void **state) {
    (void)state;
    tether_backoff_opts o;
    tether_backoff_opts_init(&o);
    o.base_ms = -1;
    expect_invalid(o, "base_ms");
    tether_backoff_opts_init(&o);
    o.max_ms = 10;
    expect_invalid(o, "max_ms");
    tether_backoff_opts_init(&o);
    o.multiplier = 0.5;
    expect_invalid(o, "multiplier");
    tether_backoff_opts_init(&o);
    o.jitter_ratio = 1.5;
    expect_invalid(o, "jitter_ratio");
    tether_backoff_opts_init(&o);
    o.kind = (tether_backoff_kind)99;
    expect_invalid(o, "kind");
    tether_backoff_opts_init(&o);
    o.step_ms = -5;
    expect_invalid(o, "step_ms");
    tether_backoff_destroy(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_exponential_sequence_and_cap),
        cmocka_unit_test(test_zero_base_long_run),
        cmocka_unit_test(test_fixed_incremental_immediate),
        cmocka_unit_test(test_jitter_full_equal),
        cmocka_unit_test(test_jitter_proportional),
        cmocka_unit_test(test_decorrelated_does_not_pin_at_cap),
        cmocka_unit_test(test_grpc_preset),
        cmocka_unit_test(test_other_presets),
        cmocka_unit_test(test_reconnect_down_and_throttled),
        cmocka_unit_test(test_same_seed_same_sequence),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests_name("backoff", tests, NULL, NULL);
}
