/* test_retry.c - unit tests for the retry policy and executor
 * (docs/retry.md), on a virtual clock: attempts, pauses and deadlines are
 * checked to the millisecond, so a schedule that is merely "close" fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../support/clock.h"
#include "tether.h"
#include "tether_sim.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define T0 (7 * 1000 * MS) /* the virtual clock starts at 7 s, not 0 */
#define MAXREC 64

/* ---- a scripted operation ---------------------------------------------- */

typedef struct script {
    tether_vclock *vc;
    const int *codes; /* per attempt; the last one repeats; 0 = success */
    int ncodes;
    int64_t dur_ms;   /* each attempt takes this long (virtual) */
    tether_class cls; /* class the op reports (NONE: let the policy decide) */
    int not_sent;
    int64_t retry_after_ms;
    int calls;
    int number[MAXREC];
    int64_t start_ms[MAXREC]; /* relative to T0 */
    int64_t timeout_ms[MAXREC];
    int64_t deadline_ms[MAXREC]; /* relative to T0, or -1 */
} script;

static int64_t vnow_ms(tether_vclock *vc) {
    return tether_now_ms(tether_vclock_clock(vc)) - T0 / MS;
}

static void record_attempt(script *s, const tether_attempt *a) {
    int i = s->calls++;
    if (i >= MAXREC)
        return;
    s->number[i] = a->number;
    s->start_ms[i] = vnow_ms(s->vc);
    s->timeout_ms[i] = a->timeout_ms;
    s->deadline_ms[i] = a->deadline_ms < 0 ? -1 : a->deadline_ms - T0 / MS;
}

static int script_op(void *arg, const tether_attempt *a, tether_error *err) {
    script *s = arg;
    int i = s->calls;
    record_attempt(s, a);
    assert_int_equal(err->code, 0); /* each attempt starts with a clean err */
    tether_vclock_advance(s->vc, s->dur_ms * MS);
    int code = s->codes[i < s->ncodes ? i : s->ncodes - 1];
    if (code == 0)
        return 0;
    tether_error_set(err, code, s->cls, "op failure #%d", i + 1);
    err->not_sent = s->not_sent;
    err->retry_after_ms = s->retry_after_ms;
    return code;
}

static void script_init(script *s, tether_vclock *vc, const int *codes,
                        int ncodes, int64_t dur_ms) {
    memset(s, 0, sizeof(*s));
    s->vc = vc;
    s->codes = codes;
    s->ncodes = ncodes;
    s->dur_ms = dur_ms;
}

/* ---- hook and log capture ---------------------------------------------- */

typedef struct hookrec {
    int n;
    tether_retry_event ev[MAXREC];
    int64_t retry_after_ms[MAXREC]; /* as the error showed it */
    char msg[MAXREC][TETHER_MSG_MAX];
} hookrec;

static void hook(void *ctx, const tether_retry_event *ev) {
    hookrec *h = ctx;
    if (h->n >= MAXREC)
        return;
    h->ev[h->n] = *ev;
    h->retry_after_ms[h->n] = ev->error->retry_after_ms;
    snprintf(h->msg[h->n], sizeof(h->msg[0]), "%s", ev->error->message);
    h->n++;
}

typedef struct logcap {
    int by_level[4];
    int n;
    tether_log_level level[MAXREC];
    char msg[MAXREC][512];
} logcap;

static void cap_log(void *ctx, tether_log_level level, const char *msg) {
    logcap *c = ctx;
    if ((unsigned)level < 4)
        c->by_level[level]++;
    if (c->n >= MAXREC)
        return;
    c->level[c->n] = level;
    snprintf(c->msg[c->n], sizeof(c->msg[0]), "%s", msg);
    c->n++;
}

/* ---- fixtures ---------------------------------------------------------- */

typedef struct fixture {
    tether_vclock *vc;
    tether_retry_opts o;
    hookrec hooks;
    logcap logs;
} fixture;

/* fixture_init: virtual clock, fixed 100 ms pauses without jitter, 3
 * attempts, no deadline, hook and log captured. */
static void fixture_init(fixture *f) {
    memset(f, 0, sizeof(*f));
    f->vc = tether_vclock_create(T0);
    assert_non_null(f->vc);
    tether_retry_opts_init(&f->o);
    f->o.backoff.kind = TETHER_BACKOFF_FIXED;
    f->o.backoff.base_ms = 100;
    f->o.backoff.jitter = TETHER_JITTER_NONE;
    f->o.deadline_ms = 0;
    f->o.clock = tether_vclock_clock(f->vc);
    f->o.on_retry = hook;
    f->o.on_retry_ctx = &f->hooks;
    f->o.log = cap_log;
    f->o.log_ctx = &f->logs;
}

static tether_retry *make(const tether_retry_opts *o) {
    tether_retry *r = NULL;
    tether_error err = {0};
    int rc = tether_retry_create(&r, o, &err);
    if (rc)
        fail_msg("create: %s", err.message);
    assert_non_null(r);
    return r;
}

static tether_retry_stats stats(const tether_retry *r) {
    tether_retry_stats st;
    tether_retry_stats_get(r, &st);
    return st;
}

/* ---- options and classification ---------------------------------------- */

static void test_defaults(void **state) {
    (void)state;
    tether_retry_opts o;
    memset(&o, 0x5a, sizeof(o));
    tether_retry_opts_init(&o);
    assert_int_equal(o.backoff.kind, TETHER_BACKOFF_EXPONENTIAL);
    assert_int_equal(o.backoff.base_ms, 100);
    assert_int_equal(o.backoff.max_ms, 60000);
    assert_int_equal(o.backoff.jitter, TETHER_JITTER_FULL);
    assert_int_equal(o.max_attempts, 3);
    assert_int_equal(o.deadline_ms, 30000);
    assert_int_equal(o.attempt_timeout_ms, 0);
    assert_ptr_equal(o.classify, tether_classify_default);
    assert_null(o.budget);
    assert_null(o.breaker);
    assert_null(o.on_retry);
    assert_null(o.log);
    assert_null(o.clock);

    tether_retry *r = NULL;
    assert_int_equal(tether_retry_create(&r, NULL, NULL), 0); /* defaults */
    tether_retry_stats st = stats(r);
    assert_true(st.runs == 0 && st.attempts == 0 && st.delay_ms_total == 0);
    tether_retry_destroy(r);
    tether_retry_destroy(NULL);
}

static void test_classify_default(void **state) {
    (void)state;
    static const struct {
        int code;
        tether_class want;
    } table[] = {
        {TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT},
        {TETHER_ECONNECT, TETHER_CLASS_TRANSIENT},
        {TETHER_EBROKEN, TETHER_CLASS_TRANSIENT},
        {TETHER_EIO, TETHER_CLASS_TRANSIENT},
        {TETHER_ERESOLVE, TETHER_CLASS_TRANSIENT},
        {TETHER_ECONFLICT, TETHER_CLASS_TRANSIENT},
        {TETHER_ETHROTTLED, TETHER_CLASS_THROTTLED},
        {TETHER_EAUTH, TETHER_CLASS_PERMANENT},
        {TETHER_EQUERY, TETHER_CLASS_PERMANENT},
        {TETHER_EINVAL, TETHER_CLASS_PERMANENT},
        {TETHER_EREADONLY, TETHER_CLASS_PERMANENT},
        {-999, TETHER_CLASS_PERMANENT},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        tether_error e = {0};
        e.code = table[i].code;
        int64_t ra = 0;
        assert_int_equal(tether_classify_default(NULL, &e, &ra), table[i].want);
        assert_int_equal(ra, 0);
    }
    /* err->cls wins over the code. */
    tether_error e = {0};
    e.code = TETHER_EQUERY;
    e.cls = TETHER_CLASS_TRANSIENT;
    assert_int_equal(tether_classify_default(NULL, &e, NULL),
                     TETHER_CLASS_TRANSIENT);
    e.code = TETHER_ECONNECT;
    e.cls = TETHER_CLASS_PERMANENT;
    assert_int_equal(tether_classify_default(NULL, &e, NULL),
                     TETHER_CLASS_PERMANENT);
    /* Throttled: the server's suggested pause is passed on. */
    e.code = TETHER_ETHROTTLED;
    e.cls = TETHER_CLASS_NONE;
    e.retry_after_ms = 1500;
    int64_t ra = 0;
    assert_int_equal(tether_classify_default(NULL, &e, &ra),
                     TETHER_CLASS_THROTTLED);
    assert_int_equal(ra, 1500);
    assert_int_equal(tether_classify_default(NULL, NULL, &ra),
                     TETHER_CLASS_PERMANENT);
}

static void expect_bad(const tether_retry_opts *o, const char *field) {
    tether_retry *r = (tether_retry *)&r; /* garbage: must be reset */
    tether_error err = {0};
    assert_int_equal(tether_retry_create(&r, o, &err), TETHER_EINVAL);
    assert_null(r);
    assert_int_equal(err.code, TETHER_EINVAL);
    if (!strstr(err.message, field))
        fail_msg("error \"%s\" does not name %s", err.message, field);
}

static void test_bad_options(void **state) {
    (void)state;
    tether_retry_opts o;
    tether_retry_opts_init(&o);
    o.max_attempts = 0;
    expect_bad(&o, "max_attempts");
    tether_retry_opts_init(&o);
    o.deadline_ms = -1;
    expect_bad(&o, "deadline_ms");
    tether_retry_opts_init(&o);
    o.attempt_timeout_ms = -5;
    expect_bad(&o, "attempt_timeout_ms");
    tether_retry_opts_init(&o);
    o.backoff.max_ms = 10; /* < base 100 */
    expect_bad(&o, "max_ms");
    tether_retry_opts_init(&o);
    o.backoff.multiplier = 0.5;
    expect_bad(&o, "multiplier");
    tether_retry_opts_init(&o);
    tether_clock broken = {0};
    o.clock = &broken;
    expect_bad(&o, "clock");

    tether_error err = {0};
    assert_int_equal(tether_retry_create(NULL, NULL, &err), TETHER_EINVAL);
    assert_non_null(strstr(err.message, "out"));

    tether_retry *r = make(NULL);
    assert_int_equal(tether_retry_run(r, 0, NULL, NULL, &err), TETHER_EINVAL);
    assert_non_null(strstr(err.message, "fn"));
    assert_int_equal(tether_retry_run(NULL, 0, script_op, NULL, &err),
                     TETHER_EINVAL);
    assert_non_null(strstr(err.message, "policy"));
    assert_true(stats(r).runs == 0);
    tether_retry_destroy(r);
}

/* ---- basic runs -------------------------------------------------------- */

static void test_success_first_try(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    tether_retry *r = make(&f.o);
    static const int codes[] = {0};
    script s;
    script_init(&s, f.vc, codes, 1, 25);
    tether_error err;
    memset(&err, 0x7f, sizeof(err)); /* stale junk must not survive */
    assert_int_equal(tether_retry_run(r, 0, script_op, &s, &err), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.number[0], 1);
    assert_int_equal(err.code, 0);
    assert_int_equal(err.stop, TETHER_STOP_NONE);
    assert_int_equal(err.attempts, 1);
    assert_int_equal(err.elapsed_ms, 25);
    assert_string_equal(err.message, "");
    assert_int_equal(f.hooks.n, 0);
    assert_int_equal(f.logs.n, 0); /* a first-try success is silent */
    tether_retry_stats st = stats(r);
    assert_true(st.runs == 1 && st.attempts == 1 && st.successes == 1);
    assert_true(st.retries == 0 && st.failures == 0 && st.transient == 0);
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

static void test_transient_then_success(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.backoff.kind = TETHER_BACKOFF_EXPONENTIAL; /* 100, 200, 400 */
    f.o.backoff.multiplier = 2.0;
    f.o.max_attempts = 5;
    tether_retry *r = make(&f.o);
    static const int codes[] = {TETHER_ECONNECT, TETHER_EIO, TETHER_ETIMEDOUT,
                                0};
    script s;
    script_init(&s, f.vc, codes, 4, 10);
    tether_error err = {0};
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err), 0);
    assert_int_equal(s.calls, 4);
    static const int64_t starts[] = {0, 110, 320, 730};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s.number[i], i + 1);
        assert_int_equal(s.start_ms[i], starts[i]);
        assert_int_equal(s.timeout_ms[i], -1);
        assert_int_equal(s.deadline_ms[i], -1);
    }
    assert_int_equal(err.code, 0);
    assert_int_equal(err.attempts, 4);
    assert_int_equal(err.elapsed_ms, 740);
    assert_int_equal(err.stop, TETHER_STOP_NONE);

    static const int64_t delays[] = {100, 200, 400};
    static const int64_t elapsed[] = {10, 120, 330};
    assert_int_equal(f.hooks.n, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(f.hooks.ev[i].attempt, i + 1);
        assert_int_equal(f.hooks.ev[i].delay_ms, delays[i]);
        assert_int_equal(f.hooks.ev[i].elapsed_ms, elapsed[i]);
        assert_int_equal(f.hooks.ev[i].cls, TETHER_CLASS_TRANSIENT);
        char want[32];
        snprintf(want, sizeof(want), "op failure #%d", i + 1);
        assert_string_equal(f.hooks.msg[i], want);
    }
    tether_retry_stats st = stats(r);
    assert_true(st.runs == 1);
    assert_true(st.attempts == 4);
    assert_true(st.retries == 3);
    assert_true(st.successes == 1);
    assert_true(st.failures == 0);
    assert_true(st.transient == 3);
    assert_true(st.throttled == 0 && st.permanent == 0);
    assert_true(st.delay_ms_total == 700);
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

static tether_class query_is_transient(void *ctx, const tether_error *err,
                                       int64_t *retry_after_ms) {
    (void)retry_after_ms;
    (*(int *)ctx)++;
    return err->code == TETHER_EQUERY
               ? TETHER_CLASS_TRANSIENT
               : tether_classify_default(NULL, err, retry_after_ms);
}

static void test_permanent_stops(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.max_attempts = 5;
    tether_retry *r = make(&f.o);
    static const int codes[] = {TETHER_EAUTH};
    script s;
    script_init(&s, f.vc, codes, 1, 10);
    tether_error err = {0};
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_EAUTH);
    assert_int_equal(s.calls, 1);
    assert_int_equal(err.code, TETHER_EAUTH);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    assert_int_equal(err.stop, TETHER_STOP_PERMANENT);
    assert_int_equal(err.attempts, 1);
    assert_int_equal(err.elapsed_ms, 10);
    assert_string_equal(err.message, "op failure #1");
    assert_int_equal(vnow_ms(f.vc), 10); /* no pause was taken */
    tether_retry_stats st = stats(r);
    assert_true(st.permanent == 1 && st.failures == 1 && st.retries == 0);

    /* The op's own class overrides its code. */
    static const int transient_code[] = {TETHER_ECONNECT};
    script_init(&s, f.vc, transient_code, 1, 10);
    s.cls = TETHER_CLASS_PERMANENT;
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_ECONNECT);
    assert_int_equal(s.calls, 1);
    assert_int_equal(err.stop, TETHER_STOP_PERMANENT);
    tether_retry_destroy(r);

    /* A custom classifier decides: EQUERY made transient is retried. */
    int calls = 0;
    f.o.classify = query_is_transient;
    f.o.classify_ctx = &calls;
    r = make(&f.o);
    static const int query[] = {TETHER_EQUERY, 0};
    script_init(&s, f.vc, query, 2, 10);
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err), 0);
    assert_int_equal(s.calls, 2);
    assert_int_equal(calls, 1);
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

static void test_max_attempts(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.max_attempts = 4;
    f.o.backoff.base_ms = 10;
    tether_retry *r = make(&f.o);
    static const int codes[] = {TETHER_ETIMEDOUT};
    script s;
    script_init(&s, f.vc, codes, 1, 5);
    tether_error err = {0};
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_ETIMEDOUT);
    assert_int_equal(s.calls, 4);
    assert_int_equal(err.code, TETHER_ETIMEDOUT);
    assert_int_equal(err.stop, TETHER_STOP_ATTEMPTS);
    assert_int_equal(err.attempts, 4);
    assert_int_equal(err.elapsed_ms, 4 * 5 + 3 * 10);
    assert_string_equal(err.message, "op failure #4");
    tether_retry_stats st = stats(r);
    assert_true(st.attempts == 4 && st.retries == 3 && st.transient == 4);
    assert_true(st.stopped_attempts == 1 && st.failures == 1);
    tether_retry_destroy(r);

    f.o.max_attempts = 1;
    r = make(&f.o);
    script_init(&s, f.vc, codes, 1, 5);
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_ETIMEDOUT);
    assert_int_equal(s.calls, 1);
    assert_int_equal(err.stop, TETHER_STOP_ATTEMPTS);
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

/* ---- deadline and per-attempt timeout ----------------------------------- */

static void test_deadline_fixed(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.max_attempts = 100;
    f.o.deadline_ms = 1000;
    f.o.backoff.base_ms = 300;
    tether_retry *r = make(&f.o);
    static const int codes[] = {TETHER_ECONNECT};
    script s;
    script_init(&s, f.vc, codes, 1, 100);
    tether_error err = {0};
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_ECONNECT);
    /* 0-100, pause to 400, 400-500, pause to 800, 800-900; a 300 ms pause
     * from 900 would end past 1000: stop without starting it. */
    assert_int_equal(s.calls, 3);
    assert_int_equal(s.start_ms[0], 0);
    assert_int_equal(s.start_ms[1], 400);
    assert_int_equal(s.start_ms[2], 800);
    assert_int_equal(s.timeout_ms[0], 1000);
    assert_int_equal(s.timeout_ms[1], 600);
    assert_int_equal(s.timeout_ms[2], 200);
    for (int i = 0; i < 3; i++)
        assert_int_equal(s.deadline_ms[i], 1000);
    assert_int_equal(err.stop, TETHER_STOP_DEADLINE);
    assert_int_equal(err.attempts, 3);
    assert_int_equal(err.elapsed_ms, 900);
    assert_int_equal(vnow_ms(f.vc), 900);
    assert_true(stats(r).stopped_deadline == 1);
    assert_int_equal(f.hooks.n, 2);
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

static void late_wakeup(void *ctx, const tether_retry_event *ev) {
    (void)ev;
    tether_vclock_advance(ctx, 2000 * MS); /* the pause oversleeps */
}

static void test_deadline_edges(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.max_attempts = 100;
    f.o.deadline_ms = 1000;
    f.o.backoff.base_ms = 400;
    tether_retry *r = make(&f.o);
    static const int codes[] = {TETHER_ECONNECT};
    script s;
    script_init(&s, f.vc, codes, 1, 100);
    tether_error err = {0};
    /* 0-100, pause to 500, 500-600; a pause ending exactly at 1000 would
     * leave no time for an attempt: not started. */
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_ECONNECT);
    assert_int_equal(s.calls, 2);
    assert_int_equal(err.stop, TETHER_STOP_DEADLINE);
    assert_int_equal(err.elapsed_ms, 600);
    assert_int_equal(vnow_ms(f.vc), 600);
    tether_retry_destroy(r);

    /* 1 ms left after the pause is enough for one more (1 ms) attempt. */
    f.o.backoff.base_ms = 399;
    f.o.deadline_ms = 999;
    r = make(&f.o);
    script_init(&s, f.vc, codes, 1, 100);
    int64_t t0 = vnow_ms(f.vc);
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    assert_int_equal(s.calls, 3);
    assert_int_equal(s.start_ms[2] - t0, 998);
    assert_int_equal(s.timeout_ms[2], 1);
    tether_retry_destroy(r);

    /* A pause that oversleeps past the deadline: no attempt after it. */
    f.o.backoff.base_ms = 100;
    f.o.on_retry = late_wakeup;
    f.o.on_retry_ctx = f.vc;
    r = make(&f.o);
    script_init(&s, f.vc, codes, 1, 10);
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_ECONNECT);
    assert_int_equal(s.calls, 1);
    assert_int_equal(err.stop, TETHER_STOP_DEADLINE);
    assert_int_equal(err.attempts, 1);
    assert_string_equal(err.message, "op failure #1");
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

/* The caller's own deadline (tether_retry_run_for) on the full loop: the
 * sooner of it and the policy's wins. */
static void test_run_for_deadline(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.max_attempts = 100;
    f.o.backoff.base_ms = 300;
    static const int codes[] = {TETHER_ECONNECT};
    script s;
    tether_error err = {0};
    /* limit, policy deadline (0: none), calls, timeout of each call */
    static const struct {
        int64_t limit, policy;
        int calls;
        int64_t timeout[3];
    } cases[] = {
        {500, 1000, 2, {500, 100}},        /* caller sooner */
        {500, 0, 2, {500, 100}},           /* the policy has none */
        {5000, 1000, 3, {1000, 600, 200}}, /* policy sooner */
        {-1, 1000, 3, {1000, 600, 200}},   /* the policy's alone */
        {0, 1000, 1, {0}},                 /* one attempt, no time */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        f.o.deadline_ms = cases[k].policy;
        tether_retry *r = make(&f.o);
        script_init(&s, f.vc, codes, 1, 100);
        int64_t t0 = vnow_ms(f.vc);
        assert_int_equal(tether_retry_run_for(r, TETHER_IDEMPOTENT,
                                              cases[k].limit, script_op, &s,
                                              &err),
                         TETHER_ECONNECT);
        assert_int_equal(s.calls, cases[k].calls);
        assert_int_equal(err.stop, TETHER_STOP_DEADLINE);
        for (int i = 0; i < s.calls; i++) {
            assert_int_equal(s.timeout_ms[i], cases[k].timeout[i]);
            assert_int_equal(s.start_ms[i] - t0, 400 * i);
        }
        int64_t lim = cases[k].limit >= 0 && cases[k].limit < 1000
                          ? cases[k].limit
                          : cases[k].policy;
        assert_int_equal(s.deadline_ms[0] - t0, lim);
        tether_retry_destroy(r);
    }
    tether_retry *r = make(&f.o);
    assert_int_equal(tether_retry_run_for(r, 0, -2, script_op, &s, &err),
                     TETHER_EINVAL);
    assert_non_null(strstr(err.message, "timeout_ms"));
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

static int record_op(void *arg, const tether_attempt *a, tether_error *err) {
    (void)err;
    *(tether_attempt *)arg = *a;
    return 0;
}

/* The same limit on the fast path (real clock, no breaker): the first
 * attempt's timeout is the sooner of the two. */
static void test_run_for_fast_path(void **state) {
    (void)state;
    tether_retry_opts o;
    tether_retry_opts_init(&o); /* deadline 30 s, real clock */
    tether_retry *r = make(&o);
    tether_attempt a;
    tether_error err = {0};
    int64_t before = tether_now_ms(NULL);
    assert_int_equal(tether_retry_run_for(r, 0, 250, record_op, &a, &err), 0);
    assert_int_equal(a.timeout_ms, 250);
    assert_in_range(a.deadline_ms, before + 250, tether_now_ms(NULL) + 250);
    assert_int_equal(tether_retry_run_for(r, 0, 60000, record_op, &a, &err), 0);
    assert_int_equal(a.timeout_ms, 30000);
    assert_int_equal(tether_retry_run(r, 0, record_op, &a, &err), 0);
    assert_int_equal(a.timeout_ms, 30000);
    tether_retry_destroy(r);
}

/* A randomized op that honours its timeout, for the deadline sweep. */
typedef struct sweep {
    tether_vclock *vc;
    uint64_t rng;
    int64_t run_start_ns;
    int64_t deadline_ns; /* absolute */
    int64_t attempt_timeout_ms;
    int attempts;
    int pauses;
    int64_t last_end_ns;
} sweep;

static uint64_t lcg(uint64_t *x) {
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

static int64_t vnow_ns(tether_vclock *vc) {
    const tether_clock *c = tether_vclock_clock(vc);
    return c->now_ns(c->ctx);
}

static int sweep_op(void *arg, const tether_attempt *a, tether_error *err) {
    sweep *w = arg;
    int64_t now = vnow_ns(w->vc);
    w->attempts++;
    /* No attempt starts at or after the deadline, and each gets >= 1 ms. */
    assert_true(now < w->deadline_ns);
    assert_true(a->timeout_ms >= 1);
    int64_t left_ms = (w->deadline_ns - now) / MS;
    int64_t want = left_ms;
    if (w->attempt_timeout_ms > 0 && w->attempt_timeout_ms < left_ms)
        want = w->attempt_timeout_ms;
    assert_int_equal(a->timeout_ms, want);
    assert_int_equal(a->deadline_ms, w->deadline_ns / MS);
    int64_t dur = (int64_t)(lcg(&w->rng) % (400 * MS));
    if (dur > a->timeout_ms * MS)
        dur = a->timeout_ms * MS; /* the op honours its timeout */
    tether_vclock_advance(w->vc, dur);
    w->last_end_ns = vnow_ns(w->vc);
    return tether_error_set(err, TETHER_ECONNECT, TETHER_CLASS_NONE, "refused");
}

static void sweep_hook(void *ctx, const tether_retry_event *ev) {
    sweep *w = ctx;
    w->pauses++;
    /* The pause must end with at least 1 ms left for an attempt. */
    assert_true(vnow_ns(w->vc) + ev->delay_ms * MS <= w->deadline_ns - MS);
}

static void test_deadline_never_overrun(void **state) {
    (void)state;
    int total_attempts = 0, total_pauses = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        tether_vclock *vc = tether_vclock_create(T0 + (int64_t)seed * 12345);
        sweep w = {0};
        w.vc = vc;
        w.rng = seed * 0x9e3779b97f4a7c15ULL;
        tether_retry_opts o;
        tether_retry_opts_init(&o);
        o.backoff.kind = TETHER_BACKOFF_EXPONENTIAL;
        o.backoff.base_ms = 50;
        o.backoff.max_ms = 2000;
        o.backoff.jitter = TETHER_JITTER_FULL;
        o.backoff.seed = seed;
        o.max_attempts = 1000;
        o.deadline_ms = 200 + (int64_t)(lcg(&w.rng) % 2800);
        o.attempt_timeout_ms =
            (seed % 2) ? 0 : 20 + (int64_t)(lcg(&w.rng) % 300);
        o.clock = tether_vclock_clock(vc);
        o.on_retry = sweep_hook;
        o.on_retry_ctx = &w;
        w.attempt_timeout_ms = o.attempt_timeout_ms;
        w.run_start_ns = vnow_ns(vc);
        w.deadline_ns = w.run_start_ns + o.deadline_ms * MS;
        tether_retry *r = make(&o);
        tether_error err = {0};
        assert_int_equal(
            tether_retry_run(r, TETHER_IDEMPOTENT, sweep_op, &w, &err),
            TETHER_ECONNECT);
        int64_t end = vnow_ns(vc);
        assert_true(end <= w.deadline_ns);
        assert_true(end == w.last_end_ns); /* no pause after the last try */
        assert_true(err.elapsed_ms <= o.deadline_ms);
        assert_int_equal(err.stop, TETHER_STOP_DEADLINE);
        assert_int_equal(err.attempts, w.attempts);
        assert_int_equal(w.pauses, w.attempts - 1);
        total_attempts += w.attempts;
        total_pauses += w.pauses;
        tether_retry_destroy(r);
        tether_vclock_destroy(vc);
    }
    /* The sweep really retried (it cannot pass with one try per run). */
    assert_true(total_attempts > 200 * 3);
    assert_true(total_pauses > 200 * 2);
}

static void test_attempt_timeout(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.max_attempts = 10;
    f.o.deadline_ms = 500;
    f.o.attempt_timeout_ms = 250;
    tether_retry *r = make(&f.o);
    static const int codes[] = {TETHER_ECONNECT};
    script s;
    script_init(&s, f.vc, codes, 1, 250); /* uses all of its timeout */
    tether_error err = {0};
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_ECONNECT);
    /* 0-250, pause to 350, then only 150 ms remain: min(250, 150). */
    assert_int_equal(s.calls, 2);
    assert_int_equal(s.timeout_ms[0], 250);
    assert_int_equal(s.timeout_ms[1], 150);
    assert_int_equal(s.deadline_ms[0], 500);
    assert_int_equal(s.deadline_ms[1], 500);
    assert_int_equal(err.stop, TETHER_STOP_DEADLINE);
    tether_retry_destroy(r);

    /* Per-attempt timeout without a deadline. */
    f.o.deadline_ms = 0;
    f.o.max_attempts = 2;
    r = make(&f.o);
    script_init(&s, f.vc, codes, 1, 10);
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    assert_int_equal(s.calls, 2);
    assert_int_equal(s.timeout_ms[0], 250);
    assert_int_equal(s.timeout_ms[1], 250);
    assert_int_equal(s.deadline_ms[1], -1);
    tether_retry_destroy(r);

    /* Neither: unbounded. */
    f.o.attempt_timeout_ms = 0;
    r = make(&f.o);
    script_init(&s, f.vc, codes, 1, 10);
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    assert_int_equal(s.timeout_ms[0], -1);
    assert_int_equal(s.deadline_ms[0], -1);
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

/* ---- idempotency, throttling, immediate ------------------------------- */

static void test_idempotency_gate(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    tether_retry *r = make(&f.o); /* 3 attempts */
    static const int codes[] = {TETHER_EBROKEN};
    script s;
    tether_error err = {0};

    /* Not idempotent and maybe sent: one attempt. */
    script_init(&s, f.vc, codes, 1, 10);
    assert_int_equal(tether_retry_run(r, 0, script_op, &s, &err),
                     TETHER_EBROKEN);
    assert_int_equal(s.calls, 1);
    assert_int_equal(err.stop, TETHER_STOP_NOT_IDEMPOTENT);
    assert_int_equal(err.attempts, 1);
    assert_true(stats(r).stopped_idempotency == 1);

    /* Not idempotent but surely not sent: retried. */
    script_init(&s, f.vc, codes, 1, 10);
    s.not_sent = 1;
    assert_int_equal(tether_retry_run(r, 0, script_op, &s, &err),
                     TETHER_EBROKEN);
    assert_int_equal(s.calls, 3);
    assert_int_equal(err.stop, TETHER_STOP_ATTEMPTS);

    /* Idempotent: retried even if sent. */
    script_init(&s, f.vc, codes, 1, 10);
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_EBROKEN);
    assert_int_equal(s.calls, 3);
    assert_int_equal(err.stop, TETHER_STOP_ATTEMPTS);
    assert_true(stats(r).stopped_idempotency == 1);
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

static tether_class throttle_query(void *ctx, const tether_error *err,
                                   int64_t *retry_after_ms) {
    (void)ctx;
    if (err->code != TETHER_EQUERY)
        return TETHER_CLASS_NONE; /* falls back to the default */
    *retry_after_ms = 900;
    return TETHER_CLASS_THROTTLED;
}

static tether_class always_throttled(void *ctx, const tether_error *err,
                                     int64_t *retry_after_ms) {
    (void)ctx;
    (void)err;
    (void)retry_after_ms; /* leaves the suggestion to the op */
    return TETHER_CLASS_THROTTLED;
}

static void test_throttled_retry_after(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.max_attempts = 2;
    tether_retry *r = make(&f.o); /* fixed 100 ms */
    static const int codes[] = {TETHER_ETHROTTLED, 0};
    script s;
    tether_error err = {0};

    script_init(&s, f.vc, codes, 2, 10);
    s.retry_after_ms = 700;
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err), 0);
    assert_int_equal(f.hooks.n, 1);
    assert_int_equal(f.hooks.ev[0].cls, TETHER_CLASS_THROTTLED);
    assert_int_equal(f.hooks.ev[0].delay_ms, 700);
    assert_int_equal(s.start_ms[1] - s.start_ms[0], 10 + 700);
    assert_true(stats(r).throttled == 1);

    /* A suggestion shorter than the backoff does not shorten it. */
    script_init(&s, f.vc, codes, 2, 10);
    s.retry_after_ms = 30;
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    assert_int_equal(f.hooks.ev[1].delay_ms, 100);
    tether_retry_destroy(r);

    /* The classifier may suggest the pause; NONE falls back to default. */
    f.o.classify = throttle_query;
    r = make(&f.o);
    static const int query[] = {TETHER_EQUERY, 0};
    script_init(&s, f.vc, query, 2, 10);
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err), 0);
    assert_int_equal(f.hooks.ev[2].delay_ms, 900);
    assert_int_equal(f.hooks.retry_after_ms[2], 900); /* err shows it */
    assert_int_equal(f.hooks.ev[2].cls, TETHER_CLASS_THROTTLED);
    static const int refused[] = {TETHER_ECONNECT, 0};
    script_init(&s, f.vc, refused, 2, 10);
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    assert_int_equal(f.hooks.ev[3].cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(f.hooks.ev[3].delay_ms, 100);
    tether_retry_destroy(r);

    /* The op's own err->retry_after_ms counts even when the classifier
     * suggests nothing. */
    f.o.classify = always_throttled;
    r = make(&f.o);
    script_init(&s, f.vc, codes, 2, 10);
    s.retry_after_ms = 800;
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    assert_int_equal(f.hooks.ev[4].delay_ms, 800);
    tether_retry_destroy(r);

    /* A suggestion past the deadline stops the run without waiting. */
    f.o.classify = NULL;
    f.o.deadline_ms = 500;
    r = make(&f.o);
    script_init(&s, f.vc, codes, 2, 10);
    s.retry_after_ms = 5000;
    int64_t before = vnow_ms(f.vc);
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_ETHROTTLED);
    assert_int_equal(s.calls, 1);
    assert_int_equal(err.stop, TETHER_STOP_DEADLINE);
    assert_int_equal(err.retry_after_ms, 5000);
    assert_int_equal(vnow_ms(f.vc) - before, 10);
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

static void test_immediate_once(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.backoff.kind = TETHER_BACKOFF_IMMEDIATE;
    f.o.max_attempts = 5;
    tether_retry *r = make(&f.o);
    static const int codes[] = {TETHER_ECONNECT};
    script s;
    script_init(&s, f.vc, codes, 1, 10);
    tether_error err = {0};
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_ECONNECT);
    assert_int_equal(s.calls, 2); /* never more than one immediate retry */
    assert_int_equal(f.hooks.n, 1);
    assert_int_equal(f.hooks.ev[0].delay_ms, 0);
    assert_int_equal(s.start_ms[1] - s.start_ms[0], 10);
    assert_int_equal(err.stop, TETHER_STOP_ATTEMPTS);
    assert_true(stats(r).stopped_attempts == 1);
    /* Each run gets a fresh schedule: the next run retries once again. */
    script_init(&s, f.vc, codes, 1, 10);
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    assert_int_equal(s.calls, 2);
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

/* ---- nesting ----------------------------------------------------------- */

typedef struct nest {
    tether_retry *inner;
    script inner_script;
    int outer_calls;
    int inner_stop[MAXREC];
    int inner_attempts[MAXREC];
} nest;

static int outer_op(void *arg, const tether_attempt *a, tether_error *err) {
    (void)a;
    nest *n = arg;
    int i = n->outer_calls++;
    int rc = tether_retry_run(n->inner, TETHER_IDEMPOTENT, script_op,
                              &n->inner_script, err);
    n->inner_stop[i] = err->stop;
    n->inner_attempts[i] = err->attempts;
    return rc;
}

typedef struct thread_run {
    tether_retry *r;
    script *s;
    int rc;
} thread_run;

static void *thread_run_main(void *arg) {
    thread_run *t = arg;
    tether_error err = {0};
    t->rc = tether_retry_run(t->r, TETHER_IDEMPOTENT, script_op, t->s, &err);
    return NULL;
}

static void test_nesting(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.max_attempts = 3;
    f.o.backoff.base_ms = 10;
    tether_retry *outer = make(&f.o);
    tether_retry_opts io = f.o;
    io.max_attempts = 5;
    io.on_retry = NULL;
    nest n;
    memset(&n, 0, sizeof(n));
    n.inner = make(&io);
    static const int codes[] = {TETHER_ECONNECT, TETHER_ECONNECT, 0};
    script_init(&n.inner_script, f.vc, codes, 3, 10);
    tether_error err = {0};
    assert_int_equal(
        tether_retry_run(outer, TETHER_IDEMPOTENT, outer_op, &n, &err), 0);
    /* Inner made exactly one attempt per outer attempt; outer retried. */
    assert_int_equal(n.outer_calls, 3);
    assert_int_equal(n.inner_script.calls, 3);
    assert_int_equal(n.inner_stop[0], TETHER_STOP_NESTED);
    assert_int_equal(n.inner_stop[1], TETHER_STOP_NESTED);
    assert_int_equal(n.inner_stop[2], TETHER_STOP_NONE);
    assert_int_equal(n.inner_attempts[0], 1);
    assert_int_equal(err.attempts, 3);
    tether_retry_stats si = stats(n.inner), so = stats(outer);
    assert_true(si.runs == 3 && si.nested == 3 && si.attempts == 3);
    assert_true(si.retries == 0 && si.failures == 2 && si.successes == 1);
    assert_true(so.runs == 1 && so.nested == 0 && so.retries == 2);

    /* Depth is restored: at top level the inner policy retries again. */
    static const int down[] = {TETHER_ECONNECT};
    script s;
    script_init(&s, f.vc, down, 1, 10);
    assert_int_equal(
        tether_retry_run(n.inner, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_ECONNECT);
    assert_int_equal(s.calls, 5);
    assert_int_equal(err.stop, TETHER_STOP_ATTEMPTS);

    /* Another thread is not inside this thread's run. */
    script_init(&s, f.vc, down, 1, 10);
    thread_run t = {n.inner, &s, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, thread_run_main, &t), 0);
    pthread_join(th, NULL);
    assert_int_equal(t.rc, TETHER_ECONNECT);
    assert_int_equal(s.calls, 5);
    tether_retry_destroy(n.inner);
    tether_retry_destroy(outer);
    tether_vclock_destroy(f.vc);
}

/* ---- budget and breaker ------------------------------------------------ */

static tether_budget *make_budget(int capacity, int cost, int timeout_cost) {
    tether_budget_opts bo;
    tether_budget_opts_init(&bo);
    bo.capacity = capacity;
    bo.retry_cost = cost;
    bo.timeout_cost = timeout_cost;
    bo.success_refund = 1;
    tether_budget *b = NULL;
    assert_int_equal(tether_budget_create(&b, &bo, NULL), 0);
    return b;
}

static int budget_probe_op(void *arg, const tether_attempt *a,
                           tether_error *err) {
    tether_budget *b = arg;
    if (a->number == 1)
        return tether_error_set(err, TETHER_ECONNECT, TETHER_CLASS_NONE, "x");
    assert_int_equal(tether_budget_tokens(b), 95); /* the retry paid 5 */
    return 0;
}

static void test_budget_exhausted(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.max_attempts = 10;
    f.o.budget = make_budget(10, 5, 10);
    tether_retry *r = make(&f.o);
    static const int codes[] = {TETHER_ECONNECT};
    script s;
    script_init(&s, f.vc, codes, 1, 10);
    tether_error err = {0};
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_EBUDGET);
    /* Two retries paid 5 each; the third finds the bucket empty. */
    assert_int_equal(s.calls, 3);
    assert_int_equal(err.code, TETHER_EBUDGET);
    assert_int_equal(err.stop, TETHER_STOP_BUDGET);
    assert_int_equal(err.attempts, 3);
    assert_non_null(strstr(err.message, "op failure #3"));
    assert_non_null(strstr(err.message, "budget"));
    assert_int_equal(err.elapsed_ms, 3 * 10 + 2 * 100); /* no third pause */
    assert_int_equal(tether_budget_tokens(f.o.budget), 0);
    assert_true(stats(r).stopped_budget == 1);

    /* Still empty: the next run stops right after its first failure. */
    script_init(&s, f.vc, codes, 1, 10);
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_EBUDGET);
    assert_int_equal(s.calls, 1);
    tether_retry_destroy(r);
    tether_budget_destroy(f.o.budget);

    /* A retry after a timeout costs the timeout cost. */
    f.o.budget = make_budget(15, 5, 10);
    r = make(&f.o);
    static const int timeouts[] = {TETHER_ETIMEDOUT};
    script_init(&s, f.vc, timeouts, 1, 10);
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_EBUDGET);
    assert_int_equal(s.calls, 2);
    assert_int_equal(tether_budget_tokens(f.o.budget), 5);
    tether_retry_destroy(r);
    tether_budget_destroy(f.o.budget);

    /* A retry that succeeds refunds its cost; a first try refunds 1. */
    f.o.budget = make_budget(100, 5, 10);
    r = make(&f.o);
    assert_int_equal(tether_retry_run(r, TETHER_IDEMPOTENT, budget_probe_op,
                                      f.o.budget, &err),
                     0);
    assert_int_equal(tether_budget_tokens(f.o.budget), 100);
    assert_int_equal(tether_budget_withdraw(f.o.budget, 0), 5);
    static const int ok[] = {0};
    script_init(&s, f.vc, ok, 1, 10);
    assert_int_equal(tether_retry_run(r, 0, script_op, &s, &err), 0);
    assert_int_equal(tether_budget_tokens(f.o.budget), 96);
    tether_retry_destroy(r);
    tether_budget_destroy(f.o.budget);
    tether_vclock_destroy(f.vc);
}

static void test_breaker_open(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.max_attempts = 5;
    f.o.backoff.base_ms = 10;
    tether_breaker_opts bo;
    tether_breaker_opts_init(&bo);
    bo.failures = 2;
    bo.open_ms = 5000;
    bo.clock = f.o.clock;
    assert_int_equal(tether_breaker_create(&f.o.breaker, &bo, NULL), 0);
    tether_retry *r = make(&f.o);
    static const int codes[] = {TETHER_ECONNECT};
    script s;
    script_init(&s, f.vc, codes, 1, 10);
    tether_error err = {0};
    /* Two failures open the breaker; the third attempt is refused. */
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_EOPEN);
    assert_int_equal(s.calls, 2);
    assert_int_equal(err.stop, TETHER_STOP_BREAKER);
    assert_int_equal(err.attempts, 2);
    assert_int_equal(err.code, TETHER_EOPEN); /* as returned */
    assert_int_equal(err.cause, TETHER_ECONNECT);
    assert_non_null(strstr(err.message, "last failure: TETHER_ECONNECT: "
                                        "op failure #2")); /* cached, kept */
    assert_true(stats(r).stopped_breaker == 1);

    /* While open: no attempt at all. */
    script_init(&s, f.vc, codes, 1, 10);
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err),
        TETHER_EOPEN);
    assert_int_equal(s.calls, 0);
    assert_int_equal(err.attempts, 0);
    assert_int_equal(err.stop, TETHER_STOP_BREAKER);
    assert_int_equal(err.code, TETHER_EOPEN);
    assert_non_null(strstr(err.message, "last failure: TETHER_ECONNECT: "
                                        "op failure #2"));

    /* After the open period the probe goes through and closes it. */
    tether_vclock_advance(f.vc, 5000 * MS);
    static const int ok[] = {0};
    script_init(&s, f.vc, ok, 1, 10);
    assert_int_equal(tether_retry_run(r, 0, script_op, &s, &err), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(tether_breaker_state_get(f.o.breaker),
                     TETHER_BREAKER_CLOSED);

    /* Isolated with no failure cached: EOPEN and its own message. */
    tether_breaker_reset(f.o.breaker);
    tether_breaker_isolate(f.o.breaker);
    script_init(&s, f.vc, ok, 1, 10);
    assert_int_equal(tether_retry_run(r, 0, script_op, &s, &err), TETHER_EOPEN);
    assert_int_equal(s.calls, 0);
    assert_int_equal(err.code, TETHER_EOPEN);
    assert_true(err.message[0] != '\0');
    assert_true(stats(r).stopped_breaker == 3);
    tether_retry_destroy(r);
    tether_breaker_destroy(f.o.breaker);
    tether_vclock_destroy(f.vc);
}

/* ---- logging ----------------------------------------------------------- */

static int count_with(const logcap *c, tether_log_level lvl,
                      const char *needle) {
    int n = 0;
    for (int i = 0; i < c->n; i++)
        n += c->level[i] == lvl && strstr(c->msg[i], needle) != NULL;
    return n;
}

static void test_logging_levels(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    tether_retry *r = make(&f.o); /* 3 attempts, fixed 100 ms */
    static const int codes[] = {TETHER_ECONNECT, TETHER_ETHROTTLED, 0};
    script s;
    script_init(&s, f.vc, codes, 3, 10);
    tether_error err = {0};
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err), 0);
    /* Each transient fault: one warning naming attempt, class, pause and
     * message; nothing at ERROR. */
    assert_int_equal(f.logs.by_level[TETHER_LOG_WARN], 2);
    assert_int_equal(f.logs.by_level[TETHER_LOG_ERROR], 0);
    assert_int_equal(f.logs.level[0], TETHER_LOG_WARN);
    assert_non_null(strstr(f.logs.msg[0], "attempt 1"));
    assert_non_null(strstr(f.logs.msg[0], "transient"));
    assert_non_null(strstr(f.logs.msg[0], "100 ms"));
    assert_non_null(strstr(f.logs.msg[0], "op failure #1"));
    assert_non_null(strstr(f.logs.msg[1], "attempt 2"));
    assert_non_null(strstr(f.logs.msg[1], "throttled"));
    assert_int_equal(count_with(&f.logs, TETHER_LOG_INFO, "succeeded"), 1);

    /* Giving up on transient faults: still warnings. */
    memset(&f.logs, 0, sizeof(f.logs));
    static const int down[] = {TETHER_ECONNECT};
    script_init(&s, f.vc, down, 1, 10);
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    assert_int_equal(f.logs.by_level[TETHER_LOG_ERROR], 0);
    assert_int_equal(count_with(&f.logs, TETHER_LOG_WARN, "giving up"), 1);
    assert_int_equal(count_with(&f.logs, TETHER_LOG_WARN, "attempts"), 1);

    /* A permanent failure: one error. */
    memset(&f.logs, 0, sizeof(f.logs));
    static const int auth[] = {TETHER_EAUTH};
    script_init(&s, f.vc, auth, 1, 10);
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    assert_int_equal(f.logs.by_level[TETHER_LOG_ERROR], 1);
    assert_int_equal(f.logs.by_level[TETHER_LOG_WARN], 0);
    assert_int_equal(count_with(&f.logs, TETHER_LOG_ERROR, "op failure #1"), 1);
    tether_retry_destroy(r);

    /* No log in the options: the process sink receives them. */
    logcap proc;
    memset(&proc, 0, sizeof(proc));
    tether_set_log(cap_log, &proc, TETHER_LOG_WARN);
    f.o.log = NULL;
    r = make(&f.o);
    static const int once[] = {TETHER_ECONNECT, 0};
    script_init(&s, f.vc, once, 2, 10);
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    tether_set_log(NULL, NULL, TETHER_LOG_WARN);
    assert_int_equal(proc.by_level[TETHER_LOG_WARN], 1);
    assert_int_equal(proc.by_level[TETHER_LOG_INFO], 0); /* below threshold */
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

/* ---- seeding, odds and ends, threads ------------------------------------ */

static void jitter_delays(tether_retry *r, fixture *f, int64_t *out, int n) {
    static const int codes[] = {TETHER_ECONNECT};
    script s;
    script_init(&s, f->vc, codes, 1, 0);
    f->hooks.n = 0;
    tether_error err = {0};
    tether_retry_run(r, TETHER_IDEMPOTENT, script_op, &s, &err);
    assert_int_equal(f->hooks.n, n);
    for (int i = 0; i < n; i++)
        out[i] = f->hooks.ev[i].delay_ms;
}

static void test_seeded_reproducible(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.backoff.kind = TETHER_BACKOFF_EXPONENTIAL;
    f.o.backoff.base_ms = 1000;
    f.o.backoff.jitter = TETHER_JITTER_FULL;
    f.o.backoff.seed = 42;
    f.o.max_attempts = 7;
    tether_retry *a = make(&f.o), *b = make(&f.o);
    int64_t a1[6], a2[6], b1[6], b2[6];
    jitter_delays(a, &f, a1, 6);
    jitter_delays(a, &f, a2, 6);
    jitter_delays(b, &f, b1, 6);
    jitter_delays(b, &f, b2, 6);
    assert_memory_equal(a1, b1, sizeof(a1)); /* same seed, same runs */
    assert_memory_equal(a2, b2, sizeof(a2));
    assert_memory_not_equal(a1, a2, sizeof(a1)); /* runs differ */
    int64_t sum = 0;
    for (int i = 0; i < 6; i++) {
        assert_true(a1[i] >= 0 && a1[i] <= (1000LL << i));
        sum += a1[i];
    }
    assert_true(sum > 0);
    tether_retry_destroy(a);
    tether_retry_destroy(b);
    tether_vclock_destroy(f.vc);
}

static int bare_op(void *arg, const tether_attempt *a, tether_error *err) {
    (void)err;
    (*(int *)arg)++;
    return a->number < 2 ? TETHER_EIO : 0; /* err left empty on purpose */
}

static int silent_fail_op(void *arg, const tether_attempt *a,
                          tether_error *err) {
    (void)arg;
    (void)a;
    (void)err;
    return TETHER_ECONNECT;
}

static void test_null_err_and_bare_codes(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    tether_retry *r = make(&f.o);
    int calls = 0;
    /* err may be NULL: the run still classifies and retries. */
    assert_int_equal(
        tether_retry_run(r, TETHER_IDEMPOTENT, bare_op, &calls, NULL), 0);
    assert_int_equal(calls, 2);
    /* An op that returns a code without filling err: code and message are
     * filled in for it. */
    tether_error err = {0};
    assert_int_equal(tether_retry_run(r, 0, silent_fail_op, NULL, &err),
                     TETHER_ECONNECT);
    assert_int_equal(err.code, TETHER_ECONNECT);
    assert_string_equal(err.message, tether_strerror(TETHER_ECONNECT));
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(err.stop, TETHER_STOP_NOT_IDEMPOTENT);
    tether_retry_destroy(r);
    tether_vclock_destroy(f.vc);
}

#define NTHREADS 4
#define NRUNS 500

typedef struct worker {
    tether_retry *r;
    int failed;
} worker;

static int flaky_op(void *arg, const tether_attempt *a, tether_error *err) {
    (void)arg;
    if (a->number == 1)
        return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_NONE,
                                "flaky");
    return 0;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    for (int i = 0; i < NRUNS; i++) {
        tether_error err = {0};
        if (tether_retry_run(w->r, TETHER_IDEMPOTENT, flaky_op, NULL, &err))
            w->failed++;
    }
    return NULL;
}

static void test_threads_share_policy(void **state) {
    (void)state;
    fixture f;
    fixture_init(&f);
    f.o.backoff.base_ms = 1;
    f.o.on_retry = NULL;
    f.o.log = NULL; /* process sink: none installed */
    f.o.budget = make_budget(1000000, 5, 10);
    tether_retry *r = make(&f.o);
    pthread_t th[NTHREADS];
    worker w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){r, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failed, 0);
    }
    tether_retry_stats st = stats(r);
    assert_true(st.runs == NTHREADS * NRUNS);
    assert_true(st.attempts == 2 * NTHREADS * NRUNS);
    assert_true(st.retries == NTHREADS * NRUNS);
    assert_true(st.successes == NTHREADS * NRUNS);
    assert_true(st.transient == NTHREADS * NRUNS);
    assert_true(st.delay_ms_total == NTHREADS * NRUNS);
    assert_true(st.nested == 0 && st.failures == 0);
    /* Every retry paid 5 and got it back on success. */
    assert_int_equal(tether_budget_tokens(f.o.budget), 1000000);
    tether_retry_destroy(r);
    tether_budget_destroy(f.o.budget);
    tether_vclock_destroy(f.vc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_classify_default),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_success_first_try),
        cmocka_unit_test(test_transient_then_success),
        cmocka_unit_test(test_permanent_stops),
        cmocka_unit_test(test_max_attempts),
        cmocka_unit_test(test_deadline_fixed),
        cmocka_unit_test(test_deadline_edges),
        cmocka_unit_test(test_run_for_deadline),
        cmocka_unit_test(test_run_for_fast_path),
        cmocka_unit_test(test_deadline_never_overrun),
        cmocka_unit_test(test_attempt_timeout),
        cmocka_unit_test(test_idempotency_gate),
        cmocka_unit_test(test_throttled_retry_after),
        cmocka_unit_test(test_immediate_once),
        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_budget_exhausted),
        cmocka_unit_test(test_breaker_open),
        cmocka_unit_test(test_logging_levels),
        cmocka_unit_test(test_seeded_reproducible),
        cmocka_unit_test(test_null_err_and_bare_codes),
        cmocka_unit_test(test_threads_share_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
