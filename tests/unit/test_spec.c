/* test_spec.c - unit tests for the policy specifications (docs/policy-spec.md)
 * (src/policy/spec.c): retry, breaker and budget specs, durations, every error
 * category with its message, and that the options are left unchanged on error.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <string.h>

#include "duration.h"
#include "tether.h"

#define NSUBS 3

/* A spec that must fail, and substrings its message must contain. */
typedef struct bad_case {
    const char *spec;
    const char *subs[NSUBS];
} bad_case;

/* check_err asserts rc/err are TETHER_ESPEC with a short message holding
 * every substring of subs (NULL-terminated or NSUBS long). */
static void check_err(int rc, const tether_error *e, const char *spec,
                      const char *const *subs, const char *file, int line) {
    size_t len = strnlen(e->message, sizeof(e->message));
    int ok = rc == TETHER_ESPEC && e->code == TETHER_ESPEC &&
             e->cls == TETHER_CLASS_PERMANENT && len > 0 && len < 200;
    for (int i = 0; ok && i < NSUBS && subs[i]; i++)
        if (!strstr(e->message, subs[i])) {
            print_error("%s:%d: spec \"%s\": message \"%s\" lacks \"%s\"\n",
                        file, line, spec, e->message, subs[i]);
            ok = 0;
        }
    if (!ok) {
        print_error("%s:%d: spec \"%s\": rc %d code %d message \"%s\"\n", file,
                    line, spec, rc, e->code, e->message);
        _fail(file, line);
    }
}

#define CHECK_ERR(rc, e, spec, ...)                                            \
    check_err((rc), &(e), (spec), (const char *[]){__VA_ARGS__, NULL},         \
              __FILE__, __LINE__)

/* ------------------------------------------------------------------------ */
/* Retry specs                                                              */
/* ------------------------------------------------------------------------ */

static void test_retry_all_keys(void **state) {
    (void)state;
    tether_retry_opts o;
    tether_error e = {0};
    assert_int_equal(
        tether_retry_opts_parse(
            "exponential base=250ms max=2m step=50ms multiplier=1.5 "
            "jitter=equal ratio=0.3 attempts=7 deadline=45s timeout=2s "
            "seed=42",
            &o, &e),
        0);
    assert_int_equal(o.backoff.kind, TETHER_BACKOFF_EXPONENTIAL);
    assert_int_equal(o.backoff.base_ms, 250);
    assert_int_equal(o.backoff.max_ms, 120000);
    assert_int_equal(o.backoff.step_ms, 50);
    assert_true(o.backoff.multiplier == 1.5);
    assert_int_equal(o.backoff.jitter, TETHER_JITTER_EQUAL);
    assert_true(o.backoff.jitter_ratio == 0.3);
    assert_int_equal(o.max_attempts, 7);
    assert_int_equal(o.deadline_ms, 45000);
    assert_int_equal(o.attempt_timeout_ms, 2000);
    assert_true(o.backoff.seed == 42);
}

static void test_retry_brief_example(void **state) {
    (void)state;
    tether_retry_opts o;
    assert_int_equal(tether_retry_opts_parse("exponential base=100ms max=60s "
                                             "jitter=full attempts=5 "
                                             "deadline=30s",
                                             &o, NULL),
                     0);
    assert_int_equal(o.backoff.base_ms, 100);
    assert_int_equal(o.backoff.max_ms, 60000);
    assert_int_equal(o.backoff.jitter, TETHER_JITTER_FULL);
    assert_int_equal(o.max_attempts, 5);
    assert_int_equal(o.deadline_ms, 30000);
}

static void assert_retry_equal(const tether_retry_opts *a,
                               const tether_retry_opts *b) {
    assert_int_equal(a->backoff.kind, b->backoff.kind);
    assert_int_equal(a->backoff.base_ms, b->backoff.base_ms);
    assert_int_equal(a->backoff.max_ms, b->backoff.max_ms);
    assert_int_equal(a->backoff.step_ms, b->backoff.step_ms);
    assert_true(a->backoff.multiplier == b->backoff.multiplier);
    assert_int_equal(a->backoff.jitter, b->backoff.jitter);
    assert_true(a->backoff.jitter_ratio == b->backoff.jitter_ratio);
    assert_true(a->backoff.seed == b->backoff.seed);
    assert_int_equal(a->max_attempts, b->max_attempts);
    assert_int_equal(a->deadline_ms, b->deadline_ms);
    assert_int_equal(a->attempt_timeout_ms, b->attempt_timeout_ms);
    assert_ptr_equal(a->classify, b->classify);
    assert_ptr_equal(a->clock, b->clock);
    assert_ptr_equal(a->budget, b->budget);
    assert_ptr_equal(a->breaker, b->breaker);
}

static void test_retry_defaults_kept(void **state) {
    (void)state;
    tether_retry_opts def, o;
    tether_retry_opts_init(&def);
    assert_int_equal(tether_retry_opts_parse("exponential", &o, NULL), 0);
    assert_retry_equal(&o, &def);
    /* Only the keys given change. */
    assert_int_equal(tether_retry_opts_parse("attempts=9", &o, NULL), 0);
    def.max_attempts = 9;
    assert_retry_equal(&o, &def);
}

static void test_retry_no_kind_is_exponential(void **state) {
    (void)state;
    tether_retry_opts o;
    assert_int_equal(
        tether_retry_opts_parse("base=200ms jitter=none", &o, NULL), 0);
    assert_int_equal(o.backoff.kind, TETHER_BACKOFF_EXPONENTIAL);
    assert_int_equal(o.backoff.base_ms, 200);
    assert_int_equal(o.backoff.jitter, TETHER_JITTER_NONE);
}

static void test_retry_kinds(void **state) {
    (void)state;
    static const struct {
        const char *spec;
        tether_backoff_kind kind;
    } cases[] = {
        {"exponential", TETHER_BACKOFF_EXPONENTIAL},
        {"fixed base=1s", TETHER_BACKOFF_FIXED},
        {"incremental base=1s step=500ms max=10s", TETHER_BACKOFF_INCREMENTAL},
        {"immediate", TETHER_BACKOFF_IMMEDIATE}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tether_retry_opts o;
        tether_error e = {0};
        assert_int_equal(tether_retry_opts_parse(cases[i].spec, &o, &e), 0);
        assert_int_equal(o.backoff.kind, cases[i].kind);
    }
}

static void test_retry_step_follows_base(void **state) {
    (void)state;
    tether_retry_opts o;
    assert_int_equal(
        tether_retry_opts_parse("incremental base=300ms", &o, NULL), 0);
    assert_int_equal(o.backoff.step_ms, 300);
    assert_int_equal(
        tether_retry_opts_parse("incremental base=300ms step=1s", &o, NULL), 0);
    assert_int_equal(o.backoff.step_ms, 1000);
}

static void test_retry_presets(void **state) {
    (void)state;
    tether_retry_opts o, want;
    tether_retry_opts_init(&want);
    assert_int_equal(tether_backoff_preset("grpc", &want.backoff, NULL), 0);
    assert_int_equal(tether_retry_opts_parse("grpc", &o, NULL), 0);
    assert_retry_equal(&o, &want);

    assert_int_equal(
        tether_retry_opts_parse("grpc max=30s attempts=4", &o, NULL), 0);
    want.backoff.max_ms = 30000;
    want.max_attempts = 4;
    assert_retry_equal(&o, &want);

    tether_retry_opts_init(&want);
    assert_int_equal(tether_backoff_preset("reconnect", &want.backoff, NULL),
                     0);
    assert_int_equal(tether_retry_opts_parse("reconnect", &o, NULL), 0);
    assert_int_equal(o.backoff.kind, TETHER_BACKOFF_RECONNECT);
    assert_retry_equal(&o, &want);
    /* base overrides; step follows only when the preset made them equal. */
    int64_t step = want.backoff.step_ms == want.backoff.base_ms
                       ? 500
                       : want.backoff.step_ms;
    assert_int_equal(tether_retry_opts_parse("reconnect base=500ms", &o, NULL),
                     0);
    assert_int_equal(o.backoff.base_ms, 500);
    assert_int_equal(o.backoff.step_ms, step);
}

static void test_retry_jitter_names(void **state) {
    (void)state;
    static const char *const names[] = {"none", "full", "equal", "decorrelated",
                                        "proportional"};
    for (int i = 0; i < 5; i++) {
        char spec[64];
        tether_retry_opts o;
        snprintf(spec, sizeof(spec), "jitter=%s", names[i]);
        assert_int_equal(tether_retry_opts_parse(spec, &o, NULL), 0);
        assert_int_equal(o.backoff.jitter, (tether_jitter)i);
    }
}

static void test_retry_numbers(void **state) {
    (void)state;
    tether_retry_opts o;
    assert_int_equal(tether_retry_opts_parse("multiplier=1.6 ratio=0.1 "
                                             "seed=18446744073709551615 "
                                             "attempts=1000000",
                                             &o, NULL),
                     0);
    assert_true(o.backoff.multiplier == 1.6);
    assert_true(o.backoff.jitter_ratio == 0.1);
    assert_true(o.backoff.seed == UINT64_MAX);
    assert_int_equal(o.max_attempts, 1000000);
    assert_int_equal(tether_retry_opts_parse("multiplier=1 ratio=0 attempts=1 "
                                             "seed=0 deadline=0 timeout=0",
                                             &o, NULL),
                     0);
    assert_true(o.backoff.multiplier == 1.0);
    assert_true(o.backoff.jitter_ratio == 0.0);
    assert_int_equal(o.max_attempts, 1);
    assert_int_equal(o.deadline_ms, 0);
    assert_int_equal(o.attempt_timeout_ms, 0);
    assert_int_equal(tether_retry_opts_parse("multiplier=0001.50000 ratio=1.0 "
                                             "multiplier=2",
                                             &o, NULL),
                     TETHER_ESPEC); /* duplicate */
    assert_int_equal(
        tether_retry_opts_parse("multiplier=0001.50000 ratio=1.0", &o, NULL),
        0);
    assert_true(o.backoff.multiplier == 1.5);
    assert_true(o.backoff.jitter_ratio == 1.0);
}

static void test_retry_whitespace(void **state) {
    (void)state;
    static const char *const specs[] = {
        "  fixed base=1s max=2s  ", "\tfixed\tbase=1s\tmax=2s\t",
        "\nfixed\r\nbase=1s\n\nmax=2s\n", "fixed \v\f base=1s   max=2s"};
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        tether_retry_opts o;
        assert_int_equal(tether_retry_opts_parse(specs[i], &o, NULL), 0);
        assert_int_equal(o.backoff.kind, TETHER_BACKOFF_FIXED);
        assert_int_equal(o.backoff.base_ms, 1000);
        assert_int_equal(o.backoff.max_ms, 2000);
    }
}

static const bad_case retry_bad[] = {
    {"bsae=100ms", {"retry spec: unknown key \"bsae\" (value \"100ms\")"}},
    {"base=100",
     {"retry spec: bad duration \"100\" for key \"base\": missing unit (ms, "
      "s, m, h)"}},
    {"base=1s base=2s", {"retry spec: duplicate key \"base\""}},
    {"", {"retry spec: empty specification"}},
    {" \t\r\n ", {"retry spec: empty specification"}},
    {"expo base=1s", {"retry spec: unknown kind \"expo\"", "exponential"}},
    {"Exponential", {"unknown kind \"Exponential\""}},
    {"base=", {"retry spec: key \"base\" has no value"}},
    {"base= 100ms", {"key \"base\" has no value", "no spaces"}},
    {"base = 100ms", {"no spaces allowed around \"=\"", "\"base\""}},
    {"fixed base =1s", {"no spaces allowed around \"=\"", "\"base\""}},
    {"=100ms", {"empty key in \"=100ms\""}},
    {"attempts=abc",
     {"retry spec: bad value \"abc\" for key \"attempts\": want an integer "
      "in [1, 1000000]"}},
    {"attempts=0", {"bad value \"0\" for key \"attempts\"", "[1, 1000000]"}},
    {"attempts=1000001", {"\"1000001\"", "\"attempts\""}},
    {"attempts=-1", {"\"-1\"", "\"attempts\""}},
    {"attempts=+5", {"\"+5\"", "\"attempts\""}},
    {"attempts=5.0", {"\"5.0\"", "\"attempts\""}},
    {"attempts=0x10", {"\"0x10\"", "\"attempts\""}},
    {"attempts=99999999999999999999999", {"\"attempts\"", "want an integer"}},
    {"seed=18446744073709551616", {"\"seed\"", "18446744073709551615"}},
    {"seed=-1", {"\"-1\"", "\"seed\""}},
    {"multiplier=0.5",
     {"bad value \"0.5\" for key \"multiplier\": want a number >= 1"}},
    {"multiplier=nan", {"\"nan\"", "\"multiplier\""}},
    {"multiplier=inf", {"\"inf\"", "\"multiplier\""}},
    {"multiplier=infinity", {"\"infinity\"", "\"multiplier\""}},
    {"multiplier=0x1p1", {"\"0x1p1\"", "\"multiplier\""}},
    {"multiplier=2e0", {"\"2e0\"", "\"multiplier\""}},
    {"multiplier=2.", {"\"2.\"", "\"multiplier\""}},
    {"multiplier=.5", {"\"multiplier\""}},
    {"multiplier=+2", {"\"+2\"", "\"multiplier\""}},
    {"multiplier=2x", {"\"2x\"", "\"multiplier\""}},
    {"multiplier=1,5", {"\"1,5\"", "\"multiplier\""}},
    {"multiplier=1.2345678901234567", {"too many significant digits"}},
    {"ratio=1.5", {"bad value \"1.5\" for key \"ratio\"", "[0, 1]"}},
    {"ratio=-0.1", {"\"-0.1\"", "\"ratio\""}},
    {"jitter=random", {"\"random\"", "\"jitter\"", "decorrelated"}},
    {"jitter=FULL", {"\"FULL\"", "\"jitter\""}},
    {"base=-1s", {"bad duration \"-1s\"", "negative"}},
    {"base=5S", {"bad duration \"5S\" for key \"base\"", "unknown unit"}},
    {"base=ms", {"bad duration \"ms\"", "not a number"}},
    {"base=0.5ms", {"\"0.5ms\"", "whole number of milliseconds"}},
    {"deadline=9999999999999999999999h", {"\"deadline\"", "too large"}},
    {"deadline=1000001h", {"bad value \"1000001h\"", "1000000h"}},
    {"timeout=1.5", {"\"timeout\"", "missing unit"}},
    {"exponential fixed", {"expected key=value, got \"fixed\"", "first"}},
    {"exponential base=1s junk", {"expected key=value, got \"junk\""}},
    {"base=2m", {"\"max\" (60s by default) is shorter than \"base\" (120s)"}},
    {"base=10s max=5s", {"\"max\" (5s) is shorter than \"base\" (10s)"}},
    {"base=1500ms max=1250ms",
     {"\"max\" (1250ms) is shorter than \"base\" (1500ms)"}},
    {"max=0 base=1ms", {"\"max\" (0) is shorter than \"base\" (1ms)"}},
    {"multiplier=100000000000000000000000",
     {"\"multiplier\"", "want a number >= 1"}},
    {"ratio=0.00000000000000000000001", {"\"ratio\"", "[0, 1]"}},
    {"Base=1s", {"unknown key \"Base\""}},
    {"factor=2", {"unknown key \"factor\" (value \"2\")"}},
    {"base=1s=2s", {"\"1s=2s\"", "\"base\""}},
};

static void test_retry_errors(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(retry_bad) / sizeof(retry_bad[0]); i++) {
        tether_retry_opts o, copy;
        tether_error e = {0};
        memset(&o, 0xA5, sizeof(o));
        copy = o;
        int rc = tether_retry_opts_parse(retry_bad[i].spec, &o, &e);
        check_err(rc, &e, retry_bad[i].spec, retry_bad[i].subs, __FILE__,
                  __LINE__);
        assert_memory_equal(&o, &copy, sizeof(o));
    }
}

static void test_retry_null_args(void **state) {
    (void)state;
    tether_retry_opts o;
    tether_error e = {0};
    assert_int_equal(tether_retry_opts_parse(NULL, &o, &e), TETHER_EINVAL);
    assert_int_equal(e.code, TETHER_EINVAL);
    assert_non_null(strstr(e.message, "retry spec"));
    assert_int_equal(tether_retry_opts_parse("fixed", NULL, &e), TETHER_EINVAL);
    /* A NULL err is allowed on both paths. */
    assert_int_equal(tether_retry_opts_parse("bogus", &o, NULL), TETHER_ESPEC);
    assert_int_equal(tether_retry_opts_parse(NULL, &o, NULL), TETHER_EINVAL);
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                 */
/* ------------------------------------------------------------------------ */

static void test_message_truncates_values(void **state) {
    (void)state;
    char spec[600];
    tether_error e = {0};
    tether_retry_opts o;
    memset(spec, 'k', 250);
    spec[250] = '=';
    memset(spec + 251, 'v', 300);
    spec[551] = '\0';
    int rc = tether_retry_opts_parse(spec, &o, &e);
    CHECK_ERR(rc, e, "long", "unknown key \"kkkkkkkkkk", "...\"", "vvvv...\"");
    assert_true(strlen(e.message) < 200);
    /* Non-printable bytes are shown as '?'. */
    rc = tether_retry_opts_parse("base=\x01\x7f"
                                 "1s",
                                 &o, &e);
    CHECK_ERR(rc, e, "ctl", "bad duration \"??1s\"");
}

static void test_message_long_everything(void **state) {
    (void)state;
    static const char *const fmts[] = {"%s",          "%s=1s",      "base=%s",
                                       "jitter=%s",   "base=1s %s", "ratio=%s",
                                       "attempts=%s", "seed=%s"};
    char big[300], spec[400];
    memset(big, '9', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
        tether_error e = {0};
        tether_retry_opts r;
        tether_breaker_opts b;
        tether_budget_opts g;
        snprintf(spec, sizeof(spec), fmts[i], big);
        assert_int_equal(tether_retry_opts_parse(spec, &r, &e), TETHER_ESPEC);
        assert_true(strlen(e.message) < 200);
        assert_int_equal(tether_breaker_opts_parse(spec, &b, &e), TETHER_ESPEC);
        assert_true(strlen(e.message) < 200);
        assert_int_equal(tether_budget_opts_parse(spec, &g, &e), TETHER_ESPEC);
        assert_true(strlen(e.message) < 200);
    }
}

/* ------------------------------------------------------------------------ */
/* Breaker specs                                                            */
/* ------------------------------------------------------------------------ */

static void test_breaker_ratio_mode(void **state) {
    (void)state;
    tether_breaker_opts o;
    tether_error e = {0};
    assert_int_equal(tether_breaker_opts_parse("breaker ratio=0.5 window=30s "
                                               "min=20 open=5s max-open=60s",
                                               &o, &e),
                     0);
    assert_int_equal(o.mode, TETHER_BREAKER_RATIO);
    assert_true(o.ratio == 0.5);
    assert_int_equal(o.window_ms, 30000);
    assert_int_equal(o.min_calls, 20);
    assert_int_equal(o.open_ms, 5000);
    assert_int_equal(o.max_open_ms, 60000);
    assert_int_equal(tether_breaker_opts_parse(
                         "breaker ratio=0.25 window=10ms min=1 open=1ms "
                         "max-open=1ms growth=1.5",
                         &o, &e),
                     0);
    assert_true(o.ratio == 0.25);
    assert_int_equal(o.window_ms, 10);
    assert_int_equal(o.min_calls, 1);
    assert_int_equal(o.open_ms, 1);
    assert_int_equal(o.max_open_ms, 1);
    assert_true(o.growth == 1.5);
    /* Any one ratio key selects ratio mode; the kind is optional. */
    assert_int_equal(tether_breaker_opts_parse("window=1m", &o, &e), 0);
    assert_int_equal(o.mode, TETHER_BREAKER_RATIO);
    assert_int_equal(tether_breaker_opts_parse("min=3", &o, &e), 0);
    assert_int_equal(o.mode, TETHER_BREAKER_RATIO);
    assert_int_equal(tether_breaker_opts_parse("ratio=1", &o, &e), 0);
    assert_int_equal(o.mode, TETHER_BREAKER_RATIO);
    assert_true(o.ratio == 1.0);
}

static void test_breaker_consecutive_and_defaults(void **state) {
    (void)state;
    tether_breaker_opts def, o;
    tether_breaker_opts_init(&def);
    assert_int_equal(tether_breaker_opts_parse("breaker", &o, NULL), 0);
    assert_int_equal(o.mode, def.mode);
    assert_int_equal(o.failures, def.failures);
    assert_true(o.ratio == def.ratio);
    assert_int_equal(o.window_ms, def.window_ms);
    assert_int_equal(o.min_calls, def.min_calls);
    assert_int_equal(o.open_ms, def.open_ms);
    assert_int_equal(o.max_open_ms, def.max_open_ms);
    assert_true(o.growth == def.growth);
    assert_null(o.clock);
    assert_null(o.on_state);
    assert_int_equal(
        tether_breaker_opts_parse("failures=3 open=2s growth=3", &o, NULL), 0);
    assert_int_equal(o.mode, TETHER_BREAKER_CONSECUTIVE);
    assert_int_equal(o.failures, 3);
    assert_int_equal(o.open_ms, 2000);
    assert_true(o.growth == 3.0);
    assert_int_equal(o.max_open_ms, def.max_open_ms);
}

static void test_breaker_preset(void **state) {
    (void)state;
    tether_breaker_opts want, o;
    tether_breaker_opts_init(&want);
    assert_int_equal(tether_breaker_preset("blocking-period", &want, NULL), 0);
    assert_int_equal(tether_breaker_opts_parse("blocking-period", &o, NULL), 0);
    assert_int_equal(o.mode, want.mode);
    assert_int_equal(o.failures, want.failures);
    assert_int_equal(o.open_ms, want.open_ms);
    assert_int_equal(o.max_open_ms, want.max_open_ms);
    assert_true(o.growth == want.growth);
    assert_int_equal(tether_breaker_opts_parse(
                         "  blocking-period open=10s max-open=2m ", &o, NULL),
                     0);
    assert_int_equal(o.failures, want.failures);
    assert_int_equal(o.open_ms, 10000);
    assert_int_equal(o.max_open_ms, 120000);
}

static const bad_case breaker_bad[] = {
    {"breaker open=20s max-open=10s",
     {"breaker spec: \"max-open\" (10s) is shorter than \"open\" (20s)"}},
    {"open=2m",
     {"\"max-open\" (60s by default) is shorter than \"open\" "
      "(120s)"}},
    {"failures=3 ratio=0.5",
     {"\"failures\" (consecutive mode) cannot be combined with \"ratio\""}},
    {"window=10s failures=3", {"\"failures\"", "\"window\""}},
    {"min=5 failures=3", {"\"failures\"", "\"min\""}},
    {"breaker failures=0",
     {"bad value \"0\" for key \"failures\": want an integer in [1, "
      "1000000]"}},
    {"ratio=0", {"bad value \"0\" for key \"ratio\": want a number in (0, 1]"}},
    {"ratio=0.0", {"\"0.0\"", "(0, 1]"}},
    {"ratio=1.01", {"\"1.01\"", "\"ratio\""}},
    {"window=9ms", {"bad value \"9ms\" for key \"window\"", "10ms"}},
    {"window=5", {"bad duration \"5\" for key \"window\"", "missing unit"}},
    {"min=0", {"\"0\"", "\"min\""}},
    {"open=0", {"bad value \"0\" for key \"open\""}},
    {"max-open=0", {"bad value \"0\" for key \"max-open\""}},
    {"growth=0.9", {"\"0.9\"", "\"growth\"", ">= 1"}},
    {"breaker breaker", {"expected key=value, got \"breaker\""}},
    {"circuit ratio=0.5", {"breaker spec: unknown kind \"circuit\""}},
    {"", {"breaker spec: empty specification"}},
    {"open=1s open=2s", {"duplicate key \"open\""}},
    {"maxopen=1s", {"unknown key \"maxopen\" (value \"1s\")"}},
    {"open=", {"key \"open\" has no value"}},
    {"exponential", {"unknown kind \"exponential\""}},
};

static void test_breaker_errors(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(breaker_bad) / sizeof(breaker_bad[0]); i++) {
        tether_breaker_opts o, copy;
        tether_error e = {0};
        memset(&o, 0x5A, sizeof(o));
        copy = o;
        int rc = tether_breaker_opts_parse(breaker_bad[i].spec, &o, &e);
        check_err(rc, &e, breaker_bad[i].spec, breaker_bad[i].subs, __FILE__,
                  __LINE__);
        assert_memory_equal(&o, &copy, sizeof(o));
    }
    tether_breaker_opts o;
    assert_int_equal(tether_breaker_opts_parse(NULL, &o, NULL), TETHER_EINVAL);
    assert_int_equal(tether_breaker_opts_parse("breaker", NULL, NULL),
                     TETHER_EINVAL);
}

/* ------------------------------------------------------------------------ */
/* Budget specs                                                             */
/* ------------------------------------------------------------------------ */

static void test_budget_all_keys(void **state) {
    (void)state;
    tether_budget_opts o, def;
    tether_budget_opts_init(&def);
    assert_int_equal(tether_budget_opts_parse("budget tokens=500 cost=5 "
                                              "timeout-cost=10 refund=1",
                                              &o, NULL),
                     0);
    assert_int_equal(o.capacity, 500);
    assert_int_equal(o.retry_cost, 5);
    assert_int_equal(o.timeout_cost, 10);
    assert_int_equal(o.success_refund, 1);
    assert_int_equal(tether_budget_opts_parse("tokens=100 cost=100 "
                                              "timeout-cost=100 refund=0",
                                              &o, NULL),
                     0);
    assert_int_equal(o.capacity, 100);
    assert_int_equal(o.retry_cost, 100);
    assert_int_equal(o.timeout_cost, 100);
    assert_int_equal(o.success_refund, 0);
    assert_int_equal(tether_budget_opts_parse("budget", &o, NULL), 0);
    assert_memory_equal(&o, &def, sizeof(o));
    assert_int_equal(tether_budget_opts_parse("\tbudget refund=3\n", &o, NULL),
                     0);
    def.success_refund = 3;
    assert_memory_equal(&o, &def, sizeof(o));
}

static const bad_case budget_bad[] = {
    {"tokens=0",
     {"budget spec: bad value \"0\" for key \"tokens\": want an integer in "
      "[1, 1000000]"}},
    {"tokens=1000001", {"\"1000001\"", "\"tokens\""}},
    {"cost=0", {"\"0\"", "\"cost\""}},
    {"timeout-cost=0", {"\"0\"", "\"timeout-cost\""}},
    {"refund=-1", {"bad value \"-1\" for key \"refund\"", "[0, 1000000]"}},
    {"tokens=5",
     {"\"timeout-cost\" (10 by default) is larger than "
      "\"tokens\" (5)"}},
    {"tokens=50 cost=60", {"\"cost\" (60) is larger than \"tokens\" (50)"}},
    {"cost=501",
     {"\"cost\" (501) is larger than \"tokens\" (500 by "
      "default)"}},
    {"budget tokens=10 tokens=20", {"duplicate key \"tokens\""}},
    {"budget capacity=10", {"unknown key \"capacity\" (value \"10\")"}},
    {"bucket tokens=10", {"budget spec: unknown kind \"bucket\"", "budget"}},
    {"   ", {"budget spec: empty specification"}},
    {"cost=", {"key \"cost\" has no value"}},
    {"tokens=1e3", {"\"1e3\"", "\"tokens\""}},
};

static void test_budget_errors(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(budget_bad) / sizeof(budget_bad[0]); i++) {
        tether_budget_opts o, copy;
        tether_error e = {0};
        memset(&o, 0x3C, sizeof(o));
        copy = o;
        int rc = tether_budget_opts_parse(budget_bad[i].spec, &o, &e);
        check_err(rc, &e, budget_bad[i].spec, budget_bad[i].subs, __FILE__,
                  __LINE__);
        assert_memory_equal(&o, &copy, sizeof(o));
    }
    tether_budget_opts o;
    assert_int_equal(tether_budget_opts_parse(NULL, &o, NULL), TETHER_EINVAL);
    assert_int_equal(tether_budget_opts_parse("budget", NULL, NULL),
                     TETHER_EINVAL);
}

/* ------------------------------------------------------------------------ */
/* Durations                                                                */
/* ------------------------------------------------------------------------ */

static void test_duration_table(void **state) {
    (void)state;
    static const struct {
        const char *text;
        int rc;
        int64_t ms;
    } cases[] = {
        {"250ms", 0, 250},
        {"15s", 0, 15000},
        {"2m", 0, 120000},
        {"1h", 0, 3600000},
        {"0", 0, 0},
        {"00", 0, 0},
        {"0.0", 0, 0},
        {"0ms", 0, 0},
        {"0h", 0, 0},
        {"1.5s", 0, 1500},
        {"1.50s", 0, 1500},
        {"1.5000000000000000000000000s", 0, 1500},
        {"0.001s", 0, 1},
        {"1.25m", 0, 75000},
        {"0.0001h", 0, 360},
        {"007s", 0, 7000},
        /* one range everywhere: up to TETHER_DURATION_MAX_MS, 1000000h */
        {"1000000h", 0, TETHER_DURATION_MAX_MS},
        {"3600000000000ms", 0, TETHER_DURATION_MAX_MS},
        {"3600000000001ms", TETHER_ESPEC, 0},
        {"1000000.0000001h", TETHER_ESPEC, 0},
        {"9223372036854775807ms", TETHER_ESPEC, 0},
        {"9223372036854775s", TETHER_ESPEC, 0},
        {"9223372036854775.807s", TETHER_ESPEC, 0},
        {"9223372036854775.808s", TETHER_ESPEC, 0},
        {"2562047788015h", TETHER_ESPEC, 0},
        {"9223372036854775808ms", TETHER_ESPEC, 0},
        {"9223372036854776s", TETHER_ESPEC, 0},
        {"2562047788016h", TETHER_ESPEC, 0},
        {"99999999999999999999999h", TETHER_ESPEC, 0},
        {"0.5ms", TETHER_ESPEC, 0},
        {"1.0005s", TETHER_ESPEC, 0},
        {"0.00000001h", TETHER_ESPEC, 0},
        {"-1s", TETHER_ESPEC, 0},
        {"-0", TETHER_ESPEC, 0},
        {"+1s", TETHER_ESPEC, 0},
        {"5", TETHER_ESPEC, 0},
        {"1.5", TETHER_ESPEC, 0},
        {"5 s", TETHER_ESPEC, 0},
        {" 5s", TETHER_ESPEC, 0},
        {"5s ", TETHER_ESPEC, 0},
        {"5S", TETHER_ESPEC, 0},
        {"5MS", TETHER_ESPEC, 0},
        {"5sec", TETHER_ESPEC, 0},
        {"5d", TETHER_ESPEC, 0},
        {"5us", TETHER_ESPEC, 0},
        {"ms", TETHER_ESPEC, 0},
        {"", TETHER_ESPEC, 0},
        {"1.s", TETHER_ESPEC, 0},
        {".5s", TETHER_ESPEC, 0},
        {"1..5s", TETHER_ESPEC, 0},
        {"1.5.5s", TETHER_ESPEC, 0},
        {"1,5s", TETHER_ESPEC, 0},
        {"1e3ms", TETHER_ESPEC, 0},
        {"0x10s", TETHER_ESPEC, 0},
        {"1s1s", TETHER_ESPEC, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t ms = -42, low = -42;
        int rc = tether_duration_parse(cases[i].text, &ms);
        if (rc != cases[i].rc || ms != (cases[i].rc ? -42 : cases[i].ms)) {
            print_error("duration \"%s\": rc %d ms %lld\n", cases[i].text, rc,
                        (long long)ms);
            fail();
        }
        /* the public call is core's (core/duration.c), which conninfo's
         * keywords use: the same answer */
        assert_int_equal(tether__duration_parse(cases[i].text, &low), rc);
        assert_int_equal(low, ms);
    }
}

static void test_duration_null(void **state) {
    (void)state;
    int64_t ms = 7;
    assert_int_equal(tether_duration_parse(NULL, &ms), TETHER_EINVAL);
    assert_int_equal(ms, 7);
    assert_int_equal(tether_duration_parse("1s", NULL), TETHER_EINVAL);
}

/* The same durations are accepted inside specs. */
static void test_duration_in_specs(void **state) {
    (void)state;
    tether_retry_opts o;
    assert_int_equal(tether_retry_opts_parse("fixed base=1.5s max=0.25h "
                                             "deadline=2m timeout=0",
                                             &o, NULL),
                     0);
    assert_int_equal(o.backoff.base_ms, 1500);
    assert_int_equal(o.backoff.max_ms, 900000);
    assert_int_equal(o.deadline_ms, 120000);
    assert_int_equal(o.attempt_timeout_ms, 0);
    assert_int_equal(
        tether_retry_opts_parse("deadline=1000000h max=1000000h", &o, NULL), 0);
    assert_int_equal(o.deadline_ms, 1000000LL * 3600000LL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_all_keys),
        cmocka_unit_test(test_retry_brief_example),
        cmocka_unit_test(test_retry_defaults_kept),
        cmocka_unit_test(test_retry_no_kind_is_exponential),
        cmocka_unit_test(test_retry_kinds),
        cmocka_unit_test(test_retry_step_follows_base),
        cmocka_unit_test(test_retry_presets),
        cmocka_unit_test(test_retry_jitter_names),
        cmocka_unit_test(test_retry_numbers),
        cmocka_unit_test(test_retry_whitespace),
        cmocka_unit_test(test_retry_errors),
        cmocka_unit_test(test_retry_null_args),
        cmocka_unit_test(test_message_truncates_values),
        cmocka_unit_test(test_message_long_everything),
        cmocka_unit_test(test_breaker_ratio_mode),
        cmocka_unit_test(test_breaker_consecutive_and_defaults),
        cmocka_unit_test(test_breaker_preset),
        cmocka_unit_test(test_breaker_errors),
        cmocka_unit_test(test_budget_all_keys),
        cmocka_unit_test(test_budget_errors),
        cmocka_unit_test(test_duration_table),
        cmocka_unit_test(test_duration_null),
        cmocka_unit_test(test_duration_in_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
