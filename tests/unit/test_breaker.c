/* test_breaker.c - unit tests for the circuit breaker (docs/breaker.md), on
 * the virtual clock: consecutive and ratio modes, the blocking-period
 * timeline, the single half-open probe under concurrency, callbacks,
 * isolate/reset. */
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
#include "tether_sim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

typedef struct fixture {
    tether_vclock *vc;
    tether_breaker *b;
} fixture;

static void advance_ms(fixture *f, int64_t ms) {
    tether_vclock_advance(f->vc, ms * MS);
}

static void make(fixture *f, tether_breaker_opts *o) {
    f->vc = tether_vclock_create(1000 * MS);
    assert_non_null(f->vc);
    o->clock = tether_vclock_clock(f->vc);
    tether_error err = {0};
    int rc = tether_breaker_create(&f->b, o, &err);
    if (rc)
        fail_msg("create: %s", err.message);
}

static void make_consecutive(fixture *f, int failures) {
    tether_breaker_opts o;
    tether_breaker_opts_init(&o);
    o.failures = failures;
    o.open_ms = 1000;
    o.max_open_ms = 8000;
    make(f, &o);
}

static void done(fixture *f) {
    tether_breaker_destroy(f->b);
    tether_vclock_destroy(f->vc);
}

static tether_error conn_error(const char *msg) {
    tether_error e = {0};
    tether_error_set(&e, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT, "%s", msg);
    snprintf(e.sqlstate, sizeof(e.sqlstate), "08006");
    return e;
}

/* fail records a failed normal call. */
static void record_fail(tether_breaker *b, const char *msg) {
    tether_error e = conn_error(msg);
    tether_breaker_record(b, TETHER_PERMIT_CALL, 0, &e);
}

static void record_ok(tether_breaker *b) {
    tether_breaker_record(b, TETHER_PERMIT_CALL, 1, NULL);
}

/* expect_refused: the call is refused with TETHER_EOPEN, whose message
 * ends with the last failure's, msg. */
static void expect_refused(tether_breaker *b, const char *msg) {
    tether_error err;
    memset(&err, 0x7f, sizeof(err));
    assert_int_equal(tether_breaker_allow(b, &err), TETHER_EOPEN);
    assert_int_equal(err.code, TETHER_EOPEN);
    size_t n = strlen(err.message), m = strlen(msg);
    if (n < m || strcmp(err.message + n - m, msg) != 0)
        fail_msg("\"%s\" does not end with \"%s\"", err.message, msg);
    assert_int_equal(err.not_sent, 1);
}

static void test_defaults(void **state) {
    (void)state;
    tether_breaker_opts o;
    memset(&o, 0x5a, sizeof(o));
    tether_breaker_opts_init(&o);
    assert_int_equal(o.mode, TETHER_BREAKER_CONSECUTIVE);
    assert_int_equal(o.failures, 5);
    assert_true(o.ratio == 0.5);
    assert_int_equal(o.window_ms, 30000);
    assert_int_equal(o.min_calls, 20);
    assert_int_equal(o.open_ms, 5000);
    assert_true(o.growth == 2.0);
    assert_int_equal(o.max_open_ms, 60000);
    assert_null(o.clock);
    assert_null(o.on_state);
    assert_null(o.on_state_ctx);
    assert_string_equal(tether_breaker_state_name(TETHER_BREAKER_CLOSED),
                        "closed");
    assert_string_equal(tether_breaker_state_name(TETHER_BREAKER_OPEN), "open");
    assert_string_equal(tether_breaker_state_name(TETHER_BREAKER_HALF_OPEN),
                        "half-open");
    assert_string_equal(tether_breaker_state_name(TETHER_BREAKER_ISOLATED),
                        "isolated");

    tether_breaker *b = NULL;
    assert_int_equal(tether_breaker_create(&b, NULL, NULL), 0);
    assert_int_equal(tether_breaker_state_get(b), TETHER_BREAKER_CLOSED);
    assert_int_equal(tether_breaker_open_ms(b), 0);
    assert_int_equal(tether_breaker_allow(b, NULL), TETHER_PERMIT_CALL);
    tether_breaker_destroy(b);
    tether_breaker_destroy(NULL);
}

static void test_consecutive_opens(void **state) {
    (void)state;
    fixture f;
    make_consecutive(&f, 3);
    record_fail(f.b, "first");
    record_fail(f.b, "second");
    record_ok(f.b); /* breaks the run */
    record_fail(f.b, "a");
    record_fail(f.b, "b");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_CALL);
    record_fail(f.b, "connection refused");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);
    assert_int_equal(tether_breaker_open_ms(f.b), 1000);

    /* Refused callers see TETHER_EOPEN (the code and the return value
     * agree), when the next probe goes, and the last failure itself. */
    tether_error err = {0};
    assert_int_equal(tether_breaker_allow(f.b, &err), TETHER_EOPEN);
    assert_int_equal(err.code, TETHER_EOPEN);
    assert_int_equal(err.cause, TETHER_ECONNECT);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_string_equal(err.sqlstate, "08006");
    assert_string_equal(err.message,
                        "circuit breaker is open, next probe in 1000 ms; "
                        "last failure: TETHER_ECONNECT: connection refused");
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_EOPEN);
    done(&f);
}

static void test_consecutive_probe(void **state) {
    (void)state;
    fixture f;
    make_consecutive(&f, 3);
    for (int i = 0; i < 3; i++)
        record_fail(f.b, "connection refused");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);

    /* Still OPEN after the period until somebody asks. */
    advance_ms(&f, 999);
    expect_refused(f.b, "connection refused");
    advance_ms(&f, 1);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_HALF_OPEN);
    expect_refused(f.b, "connection refused");

    /* A failed probe reopens with a grown period. */
    tether_error e = conn_error("still refused");
    tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 0, &e);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);
    assert_int_equal(tether_breaker_open_ms(f.b), 2000);
    expect_refused(f.b, "still refused");
    advance_ms(&f, 2000);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 1, NULL);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    /* After closing, it takes `failures` failures again. */
    record_fail(f.b, "x");
    record_fail(f.b, "y");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    done(&f);
}

static void test_late_call_outcomes(void **state) {
    (void)state;
    fixture f;
    make_consecutive(&f, 1);
    /* Two calls permitted while closed; the first fails and opens. */
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_CALL);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_CALL);
    record_fail(f.b, "boom");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);
    record_ok(f.b); /* the late success does not close it */
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);

    advance_ms(&f, 1000);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    record_ok(f.b); /* a normal call's success: not the probe */
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_HALF_OPEN);
    record_fail(f.b, "late failure"); /* cached, but no state change */
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_HALF_OPEN);
    assert_int_equal(tether_breaker_open_ms(f.b), 1000);
    expect_refused(f.b, "late failure");
    tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 1, NULL);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    done(&f);
}

static void test_lost_probe_is_replaced(void **state) {
    (void)state;
    fixture f;
    make_consecutive(&f, 1);
    record_fail(f.b, "down");
    advance_ms(&f, 1000);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    /* The probe never reports; a whole open period later, a new one. */
    advance_ms(&f, 999);
    expect_refused(f.b, "down");
    advance_ms(&f, 1);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    expect_refused(f.b, "down");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_HALF_OPEN);
    done(&f);
}

static void make_ratio(fixture *f, int64_t window_ms, int min_calls) {
    tether_breaker_opts o;
    tether_breaker_opts_init(&o);
    o.mode = TETHER_BREAKER_RATIO;
    o.ratio = 0.5;
    o.window_ms = window_ms;
    o.min_calls = min_calls;
    o.failures = 1; /* must not matter in ratio mode */
    make(f, &o);
}

static void test_ratio_min_throughput(void **state) {
    (void)state;
    fixture f;
    make_ratio(&f, 10000, 10);
    for (int i = 0; i < 9; i++)
        record_fail(f.b, "below min");
    /* 9 calls, all failed: still too few to judge. */
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    record_fail(f.b, "tenth");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);
    done(&f);

    make_ratio(&f, 10000, 10);
    for (int i = 0; i < 11; i++)
        record_ok(f.b);
    for (int i = 0; i < 10; i++)
        record_fail(f.b, "f"); /* 10/21 < 0.5 */
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    record_fail(f.b, "f"); /* 11/22 = 0.5 */
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);
    /* The probe's success closes it and empties the window. */
    advance_ms(&f, 5000);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 1, NULL);
    record_fail(f.b, "fresh");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    done(&f);
}

static void test_ratio_window_slides(void **state) {
    (void)state;
    fixture f;
    /* Window 1 s in 100 ms buckets, at least 4 calls. */
    make_ratio(&f, 1000, 4);
    for (int i = 0; i < 3; i++)
        record_fail(f.b, "old");
    advance_ms(&f, 850); /* still inside the window */
    record_fail(f.b, "recent");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);
    done(&f);

    make_ratio(&f, 1000, 4);
    for (int i = 0; i < 3; i++)
        record_fail(f.b, "old");
    advance_ms(&f, 1000); /* the old failures age out */
    record_fail(f.b, "new 1");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    record_ok(f.b);
    record_ok(f.b);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    advance_ms(&f, 500);
    record_fail(f.b, "new 2"); /* 2 of 4 in the window */
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);
    done(&f);

    /* Sparse traffic: failures spread wider than the window never add up. */
    make_ratio(&f, 1000, 4);
    for (int i = 0; i < 50; i++) {
        record_fail(f.b, "sparse");
        advance_ms(&f, 400);
    }
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    done(&f);
}

static void test_blocking_period_timeline(void **state) {
    (void)state;
    tether_breaker_opts o;
    memset(&o, 0, sizeof(o));
    assert_int_equal(tether_breaker_preset("blocking-period", &o, NULL), 0);
    assert_int_equal(o.mode, TETHER_BREAKER_CONSECUTIVE);
    assert_int_equal(o.failures, 1);
    assert_int_equal(o.open_ms, 1000);
    assert_true(o.growth == 15.0);
    assert_int_equal(o.max_open_ms, 15000);
    assert_true(o.jitter == 0.5);
    o.jitter = 0; /* the nominal timeline; test_jitter_spreads_holds */
    fixture f;
    make(&f, &o);
    int64_t t0 = tether_now_ms(o.clock);
    record_fail(f.b, "login failed");
    static const int64_t periods[] = {1, 15, 15, 15, 15, 15, 15};
    static const int64_t probes_at[] = {1, 16, 31, 46, 61, 76, 91};
    for (size_t i = 0; i < sizeof(periods) / sizeof(periods[0]); i++) {
        assert_int_equal(tether_breaker_open_ms(f.b), periods[i] * 1000);
        advance_ms(&f, periods[i] * 1000 - 1);
        expect_refused(f.b, "login failed");
        advance_ms(&f, 1);
        assert_int_equal(tether_now_ms(o.clock) - t0, probes_at[i] * 1000);
        assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
        tether_error e = conn_error("login failed");
        tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 0, &e);
    }
    done(&f);
}

/* The jitter: each open lasts a uniform draw from [(1 - j) P, P], so
 * breakers that opened together probe apart; a seed repeats its draws. */
static int64_t first_hold(tether_breaker_opts o, uint64_t seed) {
    fixture f;
    o.seed = seed;
    make(&f, &o);
    int64_t t0 = tether_now_ms(o.clock);
    record_fail(f.b, "down");
    while (tether_breaker_allow(f.b, NULL) == TETHER_EOPEN)
        advance_ms(&f, 1);
    int64_t hold = tether_now_ms(o.clock) - t0;
    done(&f);
    return hold;
}

static void test_jitter_spreads_holds(void **state) {
    (void)state;
    tether_breaker_opts o;
    assert_int_equal(tether_breaker_preset("blocking-period", &o, NULL), 0);
    o.open_ms = 200;
    int64_t lo = INT64_MAX, hi = 0, sum = 0;
    int distinct = 0, seen[201] = {0};
    for (uint64_t seed = 1; seed <= 200; seed++) {
        int64_t h = first_hold(o, seed);
        assert_true(h >= 100 && h <= 200);
        lo = h < lo ? h : lo;
        hi = h > hi ? h : hi;
        sum += h;
        distinct += !seen[h]++;
    }
    assert_true(lo <= 110 && hi >= 190); /* the whole range is used */
    assert_true(distinct > 60);
    assert_true(sum / 200 > 135 && sum / 200 < 165);
    assert_int_equal(first_hold(o, 7), first_hold(o, 7));
    o.jitter = 0;
    assert_int_equal(first_hold(o, 7), 200);
    o.jitter = 1.5;
    tether_breaker *b = NULL;
    tether_error err = {0};
    assert_int_equal(tether_breaker_create(&b, &o, &err), TETHER_EINVAL);
    assert_non_null(strstr(err.message, "jitter"));
}

/* A probe refused as busy (throttled: the server is up) at most doubles
 * the period; a probe that found the server down grows it by growth. */
static void test_throttled_probe_grows_gently(void **state) {
    (void)state;
    tether_breaker_opts o;
    assert_int_equal(tether_breaker_preset("blocking-period", &o, NULL), 0);
    o.jitter = 0;
    fixture f;
    make(&f, &o);
    tether_error busy = {0};
    tether_error_set(&busy, TETHER_ETHROTTLED, TETHER_CLASS_THROTTLED,
                     "sorry, too many clients already");
    tether_breaker_record(f.b, TETHER_PERMIT_CALL, 0, &busy);
    assert_int_equal(tether_breaker_open_ms(f.b), 1000);
    const int64_t want[] = {2000, 4000, 8000, 15000, 15000};
    for (int i = 0; i < 5; i++) {
        advance_ms(&f, tether_breaker_open_ms(f.b));
        assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
        tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 0, &busy);
        assert_int_equal(tether_breaker_open_ms(f.b), want[i]);
    }
    /* The same from closed with the server down: 1 s, then 15 s. */
    tether_breaker_reset(f.b);
    record_fail(f.b, "refused");
    advance_ms(&f, 1000);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    tether_error down = conn_error("refused");
    tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 0, &down);
    assert_int_equal(tether_breaker_open_ms(f.b), 15000);
    done(&f);
}

static void test_probe_success_resets_period(void **state) {
    (void)state;
    tether_breaker_opts o;
    assert_int_equal(tether_breaker_preset("blocking-period", &o, NULL), 0);
    o.jitter = 0;
    o.growth = 2.0;
    o.open_ms = 5000;
    o.max_open_ms = 60000;
    fixture f;
    make(&f, &o);
    record_fail(f.b, "down");
    for (int i = 0; i < 3; i++) {
        advance_ms(&f, tether_breaker_open_ms(f.b));
        assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
        record_fail(f.b, "late call"); /* a normal call: no growth */
        tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 0, NULL);
    }
    assert_int_equal(tether_breaker_open_ms(f.b), 40000);
    /* A probe failure without details: the generic message. */
    expect_refused(f.b, "circuit breaker is open, next probe in 40000 ms");
    advance_ms(&f, 40000);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 1, NULL);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    assert_int_equal(tether_breaker_open_ms(f.b), 5000);
    record_fail(f.b, "down again");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);
    assert_int_equal(tether_breaker_open_ms(f.b), 5000);
    advance_ms(&f, 4999);
    expect_refused(f.b, "down again");
    advance_ms(&f, 1);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    done(&f);
}

/* ---- exactly one probe under concurrency ----------------------------- */

#define NHAMMER 8
#define NROUNDS 200

typedef struct hammer {
    tether_breaker *b;
    pthread_barrier_t start, end;
    _Atomic int probes, refused, other, wrong_msg;
} hammer;

static void *hammer_thread(void *arg) {
    hammer *h = arg;
    for (int r = 0; r < NROUNDS; r++) {
        pthread_barrier_wait(&h->start);
        tether_error err = {0};
        int rc = tether_breaker_allow(h->b, &err);
        if (rc == TETHER_PERMIT_PROBE) {
            atomic_fetch_add(&h->probes, 1);
        } else if (rc == TETHER_EOPEN) {
            atomic_fetch_add(&h->refused, 1);
            if (!strstr(err.message, "server closed the connection") ||
                err.code != TETHER_EOPEN || err.cause != TETHER_ECONNECT)
                atomic_fetch_add(&h->wrong_msg, 1);
        } else {
            atomic_fetch_add(&h->other, 1);
        }
        pthread_barrier_wait(&h->end);
    }
    return NULL;
}

static void test_exactly_one_probe(void **state) {
    (void)state;
    tether_breaker_opts o;
    assert_int_equal(tether_breaker_preset("blocking-period", &o, NULL), 0);
    fixture f;
    make(&f, &o);
    hammer h = {.b = f.b};
    pthread_barrier_init(&h.start, NULL, NHAMMER + 1);
    pthread_barrier_init(&h.end, NULL, NHAMMER + 1);
    pthread_t th[NHAMMER];
    for (int i = 0; i < NHAMMER; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer_thread, &h), 0);
    for (int r = 0; r < NROUNDS; r++) {
        record_fail(f.b, "server closed the connection");
        advance_ms(&f, tether_breaker_open_ms(f.b)); /* the period ends */
        pthread_barrier_wait(&h.start);
        pthread_barrier_wait(&h.end);
        assert_int_equal(atomic_load(&h.probes), r + 1);
        assert_int_equal(tether_breaker_state_get(f.b),
                         TETHER_BREAKER_HALF_OPEN);
        tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 1, NULL);
    }
    for (int i = 0; i < NHAMMER; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&h.probes), NROUNDS);
    assert_int_equal(atomic_load(&h.refused), NROUNDS * (NHAMMER - 1));
    assert_int_equal(atomic_load(&h.other), 0);
    assert_int_equal(atomic_load(&h.wrong_msg), 0);
    pthread_barrier_destroy(&h.start);
    pthread_barrier_destroy(&h.end);
    done(&f);
}

/* ---- callbacks --------------------------------------------------------- */

typedef struct seen {
    tether_breaker *b;
    int n;
    tether_breaker_state from[16], to[16], inside[16];
    int isolate_on_open;
} seen;

static void on_state(void *ctx, tether_breaker_state from,
                     tether_breaker_state to) {
    seen *s = ctx;
    /* Not under the breaker's lock: calling back in must not deadlock. */
    s->inside[s->n] = tether_breaker_state_get(s->b);
    (void)tether_breaker_open_ms(s->b);
    (void)tether_breaker_allow(s->b, NULL);
    s->from[s->n] = from;
    s->to[s->n] = to;
    s->n++;
    if (s->isolate_on_open && to == TETHER_BREAKER_OPEN)
        tether_breaker_isolate(s->b); /* a state change from a callback */
}

static void make_watched(fixture *f, seen *s) {
    tether_breaker_opts o;
    tether_breaker_opts_init(&o);
    o.failures = 2;
    o.on_state = on_state;
    o.on_state_ctx = s;
    memset(s, 0, sizeof(*s));
    make(f, &o);
    s->b = f->b;
}

#define C TETHER_BREAKER_CLOSED
#define O TETHER_BREAKER_OPEN
#define H TETHER_BREAKER_HALF_OPEN
#define I TETHER_BREAKER_ISOLATED

static void expect_seen(const seen *s, int n, const tether_breaker_state *ft) {
    assert_int_equal(s->n, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(s->from[i], ft[2 * i]);
        assert_int_equal(s->to[i], ft[2 * i + 1]);
    }
}

static void test_callback_order(void **state) {
    (void)state;
    fixture f;
    seen s;
    make_watched(&f, &s);
    record_fail(f.b, "a");
    assert_int_equal(s.n, 0);
    record_fail(f.b, "b"); /* C -> O */
    advance_ms(&f, 5000);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 0, NULL); /* H -> O */
    advance_ms(&f, 10000);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 1, NULL); /* H -> C */
    tether_breaker_isolate(f.b);                              /* C -> I */
    tether_breaker_isolate(f.b);                              /* no change */
    tether_breaker_reset(f.b);                                /* I -> C */
    tether_breaker_reset(f.b);                                /* no change */
    static const tether_breaker_state want[] = {C, O, O, H, H, O, O,
                                                H, H, C, C, I, I, C};
    expect_seen(&s, 7, want);
    /* Each callback saw the state it announces. */
    for (int i = 0; i < s.n; i++)
        assert_int_equal(s.inside[i], s.to[i]);
    done(&f);
}

static void test_callback_changes_state(void **state) {
    (void)state;
    fixture f;
    seen s;
    make_watched(&f, &s);
    s.isolate_on_open = 1;
    record_fail(f.b, "a");
    record_fail(f.b, "b");
    /* Delivered after the first callback returned, in order. */
    static const tether_breaker_state want[] = {C, O, O, I};
    expect_seen(&s, 2, want);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_ISOLATED);
    expect_refused(f.b, "b");
    done(&f);
}

/* Many threads drive the breaker through its states; the callbacks must
 * form one unbroken chain that ends in the final state. */
typedef struct chain {
    tether_breaker *b;
    tether_vclock *vc;
    tether_breaker_state last;
    long n;
    int broken;
} chain;

static void on_chain(void *ctx, tether_breaker_state from,
                     tether_breaker_state to) {
    chain *c = ctx;
    if (from != c->last || from == to)
        c->broken++;
    c->last = to;
    c->n++;
}

static void *chain_thread(void *arg) {
    chain *c = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    for (int i = 0; i < 20000; i++) {
        seed = seed * 1103515245u + 12345u;
        int permit = tether_breaker_allow(c->b, NULL);
        if (permit < 0) {
            tether_vclock_advance(c->vc, MS);
            continue;
        }
        tether_error e = conn_error("flaky");
        tether_breaker_record(c->b, permit, (seed >> 16) % 3 == 0, &e);
    }
    return NULL;
}

static void test_callbacks_concurrent_chain(void **state) {
    (void)state;
    tether_breaker_opts o;
    tether_breaker_opts_init(&o);
    o.failures = 3;
    o.open_ms = 2;
    o.max_open_ms = 16;
    chain c = {.last = TETHER_BREAKER_CLOSED};
    o.on_state = on_chain;
    o.on_state_ctx = &c;
    fixture f;
    make(&f, &o);
    c.b = f.b;
    c.vc = f.vc;
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, chain_thread, &c), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(c.broken, 0);
    assert_true(c.n > 10);
    assert_int_equal(c.last, tether_breaker_state_get(f.b));
    done(&f);
}

/* ---- isolate / reset ---------------------------------------------------- */

static void test_isolate(void **state) {
    (void)state;
    fixture f;
    make_consecutive(&f, 3);
    tether_breaker_isolate(f.b);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_ISOLATED);
    tether_error err = {0};
    assert_int_equal(tether_breaker_allow(f.b, &err), TETHER_EOPEN);
    assert_int_equal(err.code, TETHER_EOPEN);
    assert_string_equal(err.message,
                        "circuit breaker is isolated (open until reset)");
    advance_ms(&f, 3600 * 1000); /* time does not end isolation */
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_EOPEN);
    record_ok(f.b);
    tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 1, NULL);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_ISOLATED);
    record_fail(f.b, "while isolated");
    expect_refused(f.b, "while isolated");

    tether_breaker_reset(f.b);
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_CALL);
    tether_breaker_isolate(f.b); /* the cached failure was forgotten */
    expect_refused(f.b, "circuit breaker is isolated (open until reset)");
    done(&f);
}

static void test_reset(void **state) {
    (void)state;
    fixture f;
    make_consecutive(&f, 3);
    /* Reset clears the failure count and the grown period. */
    record_fail(f.b, "1");
    record_fail(f.b, "2");
    tether_breaker_reset(f.b);
    record_fail(f.b, "3");
    record_fail(f.b, "4");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_CLOSED);
    record_fail(f.b, "5");
    assert_int_equal(tether_breaker_state_get(f.b), TETHER_BREAKER_OPEN);
    advance_ms(&f, 1000);
    assert_int_equal(tether_breaker_allow(f.b, NULL), TETHER_PERMIT_PROBE);
    tether_breaker_record(f.b, TETHER_PERMIT_PROBE, 0, NULL);
    assert_int_equal(tether_breaker_open_ms(f.b), 2000);
    tether_breaker_isolate(f.b);
    tether_breaker_reset(f.b);
    assert_int_equal(tether_breaker_open_ms(f.b), 1000);
    record_fail(f.b, "a");
    record_fail(f.b, "b");
    record_fail(f.b, "c");
    assert_int_equal(tether_breaker_open_ms(f.b), 1000);
    expect_refused(f.b, "c");
    done(&f);
}

/* ---- bad options ----------------------------------------------------------
 */

static void expect_bad(const tether_breaker_opts *o, const char *needle) {
    tether_error err = {0};
    tether_breaker *b = (tether_breaker *)&err; /* must be reset to NULL */
    assert_int_equal(tether_breaker_create(&b, o, &err), TETHER_EINVAL);
    assert_null(b);
    assert_int_equal(err.code, TETHER_EINVAL);
    if (!strstr(err.message, needle))
        fail_msg("message \"%s\" lacks \"%s\"", err.message, needle);
}

#define BAD(field, value, needle)                                              \
    do {                                                                       \
        tether_breaker_opts o_;                                                \
        tether_breaker_opts_init(&o_);                                         \
        o_.field = value;                                                      \
        expect_bad(&o_, needle);                                               \
    } while (0)

static void test_bad_options(void **state) {
    (void)state;
    BAD(mode, (tether_breaker_mode)7, "mode = 7");
    BAD(failures, 0, "failures = 0");
    BAD(ratio, 0.0, "ratio = 0");
    BAD(ratio, 1.5, "ratio = 1.5");
    BAD(ratio, -0.25, "ratio = -0.25");
    BAD(window_ms, 9, "window_ms = 9");
    BAD(min_calls, 0, "min_calls = 0");
    BAD(open_ms, 0, "open_ms = 0");
    BAD(open_ms, -5, "open_ms = -5");
    BAD(max_open_ms, 4999, "max_open_ms = 4999");
    BAD(growth, 0.5, "growth = 0.5");
    assert_int_equal(tether_breaker_create(NULL, NULL, NULL), TETHER_EINVAL);

    tether_breaker_opts o;
    tether_error err = {0};
    assert_int_equal(tether_breaker_preset("blocking-periode", &o, &err),
                     TETHER_ESPEC);
    assert_non_null(strstr(err.message, "\"blocking-periode\""));
    /* a NULL name is a NULL argument (the NULL-handle rule), not a bad spec */
    assert_int_equal(tether_breaker_preset(NULL, &o, &err), TETHER_EINVAL);
    /* Boundaries that are fine. */
    tether_breaker_opts_init(&o);
    o.ratio = 1.0;
    o.window_ms = 10;
    o.growth = 1.0;
    o.max_open_ms = o.open_ms;
    tether_breaker *b = NULL;
    assert_int_equal(tether_breaker_create(&b, &o, NULL), 0);
    tether_breaker_destroy(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_consecutive_opens),
        cmocka_unit_test(test_consecutive_probe),
        cmocka_unit_test(test_late_call_outcomes),
        cmocka_unit_test(test_lost_probe_is_replaced),
        cmocka_unit_test(test_ratio_min_throughput),
        cmocka_unit_test(test_ratio_window_slides),
        cmocka_unit_test(test_blocking_period_timeline),
        cmocka_unit_test(test_jitter_spreads_holds),
        cmocka_unit_test(test_throttled_probe_grows_gently),
        cmocka_unit_test(test_probe_success_resets_period),
        cmocka_unit_test(test_exactly_one_probe),
        cmocka_unit_test(test_callback_order),
        cmocka_unit_test(test_callback_changes_state),
        cmocka_unit_test(test_callbacks_concurrent_chain),
        cmocka_unit_test(test_isolate),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
