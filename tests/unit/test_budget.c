/* test_budget.c - unit tests for the retry budget, a token bucket
 * (docs/breaker.md, "Retry budget"). */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include "tether.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static tether_budget *make(int capacity, int retry_cost, int timeout_cost,
                           int refund) {
    tether_budget_opts o;
    tether_budget_opts_init(&o);
    o.capacity = capacity;
    o.retry_cost = retry_cost;
    o.timeout_cost = timeout_cost;
    o.success_refund = refund;
    tether_budget *b = NULL;
    assert_int_equal(tether_budget_create(&b, &o, NULL), 0);
    assert_non_null(b);
    return b;
}

static void test_defaults(void **state) {
    (void)state;
    tether_budget_opts o;
    memset(&o, 0x5a, sizeof(o));
    tether_budget_opts_init(&o);
    assert_int_equal(o.capacity, 500);
    assert_int_equal(o.retry_cost, 5);
    assert_int_equal(o.timeout_cost, 10);
    assert_int_equal(o.success_refund, 1);

    tether_budget *b = NULL;
    assert_int_equal(tether_budget_create(&b, &o, NULL), 0);
    assert_int_equal(tether_budget_tokens(b), 500); /* starts full */
    assert_int_equal(tether_budget_withdraw(b, 0), 5);
    assert_int_equal(tether_budget_withdraw(b, 1), 10);
    assert_int_equal(tether_budget_tokens(b), 485);
    tether_budget_destroy(b);

    /* NULL options mean the defaults; destroy accepts NULL. */
    assert_int_equal(tether_budget_create(&b, NULL, NULL), 0);
    assert_int_equal(tether_budget_tokens(b), 500);
    tether_budget_destroy(b);
    tether_budget_destroy(NULL);
}

static void test_exhaustion(void **state) {
    (void)state;
    tether_budget *b = make(23, 5, 10, 1);
    assert_int_equal(tether_budget_withdraw(b, 1), 10); /* 13 */
    assert_int_equal(tether_budget_withdraw(b, 1), 10); /* 3 */
    /* Too few tokens: EBUDGET, and nothing is taken. */
    assert_int_equal(tether_budget_withdraw(b, 1), TETHER_EBUDGET);
    assert_int_equal(tether_budget_withdraw(b, 0), TETHER_EBUDGET);
    assert_int_equal(tether_budget_tokens(b), 3);
    tether_budget_success(b, 0); /* 4 */
    assert_int_equal(tether_budget_withdraw(b, 0), TETHER_EBUDGET);
    tether_budget_success(b, 0); /* 5: exactly one retry's cost */
    assert_int_equal(tether_budget_withdraw(b, 0), 5);
    assert_int_equal(tether_budget_tokens(b), 0);
    assert_int_equal(tether_budget_withdraw(b, 0), TETHER_EBUDGET);
    assert_int_equal(tether_budget_tokens(b), 0);
    tether_budget_destroy(b);
}

static void test_refill_by_successes(void **state) {
    (void)state;
    tether_budget *b = make(100, 5, 10, 1);
    while (tether_budget_withdraw(b, 0) > 0) {
    }
    assert_int_equal(tether_budget_tokens(b), 0);
    /* One retry per five first-try successes: the bounded share. */
    for (int i = 0; i < 4; i++)
        tether_budget_success(b, 0);
    assert_int_equal(tether_budget_withdraw(b, 0), TETHER_EBUDGET);
    tether_budget_success(b, 0);
    assert_int_equal(tether_budget_withdraw(b, 0), 5);
    for (int i = 0; i < 10; i++)
        tether_budget_success(b, 0);
    assert_int_equal(tether_budget_withdraw(b, 1), 10);
    assert_int_equal(tether_budget_tokens(b), 0);
    tether_budget_destroy(b);
}

static void test_retry_success_refunds_cost(void **state) {
    (void)state;
    tether_budget *b = make(100, 5, 10, 1);
    int cost = tether_budget_withdraw(b, 1);
    assert_int_equal(cost, 10);
    assert_int_equal(tether_budget_tokens(b), 90);
    tether_budget_success(b, cost); /* the retry succeeded */
    assert_int_equal(tether_budget_tokens(b), 100);

    cost = tether_budget_withdraw(b, 0);
    int cost2 = tether_budget_withdraw(b, 0);
    assert_int_equal(tether_budget_tokens(b), 90);
    tether_budget_success(b, cost);
    assert_int_equal(tether_budget_tokens(b), 95);
    tether_budget_success(b, cost2);
    assert_int_equal(tether_budget_tokens(b), 100);

    /* A zero refund option: first-try successes give nothing back. */
    tether_budget *z = make(10, 5, 10, 0);
    assert_int_equal(tether_budget_withdraw(z, 0), 5);
    tether_budget_success(z, 0);
    assert_int_equal(tether_budget_tokens(z), 5);
    tether_budget_success(z, -3); /* nonsense cost: ignored */
    assert_int_equal(tether_budget_tokens(z), 5);
    tether_budget_destroy(z);
    tether_budget_destroy(b);
}

static void test_cap_at_capacity(void **state) {
    (void)state;
    tether_budget *b = make(50, 5, 10, 3);
    tether_budget_success(b, 0);
    assert_int_equal(tether_budget_tokens(b), 50);
    tether_budget_success(b, 10);
    assert_int_equal(tether_budget_tokens(b), 50);
    assert_int_equal(tether_budget_withdraw(b, 0), 5);
    tether_budget_success(b, 0); /* 48 */
    tether_budget_success(b, 0); /* 50, not 51 */
    assert_int_equal(tether_budget_tokens(b), 50);
    assert_int_equal(tether_budget_withdraw(b, 1), 10);
    tether_budget_success(b, 1000000); /* huge refund: capped */
    assert_int_equal(tether_budget_tokens(b), 50);
    tether_budget_destroy(b);
}

static void expect_bad(int capacity, int retry_cost, int timeout_cost,
                       int refund, const char *needle) {
    tether_budget_opts o = {sizeof o, capacity, retry_cost, timeout_cost,
                            refund};
    tether_error err;
    memset(&err, 0, sizeof(err));
    tether_budget *b = (tether_budget *)&err; /* must be reset to NULL */
    assert_int_equal(tether_budget_create(&b, &o, &err), TETHER_EINVAL);
    assert_null(b);
    assert_int_equal(err.code, TETHER_EINVAL);
    if (!strstr(err.message, needle))
        fail_msg("message \"%s\" lacks \"%s\"", err.message, needle);
}

static void test_bad_options(void **state) {
    (void)state;
    expect_bad(0, 5, 10, 1, "capacity = 0");
    expect_bad(-7, 5, 10, 1, "capacity = -7");
    expect_bad(500, 0, 10, 1, "retry_cost = 0");
    expect_bad(500, -1, 10, 1, "retry_cost = -1");
    expect_bad(500, 501, 10, 1, "retry_cost = 501");
    expect_bad(500, 5, 0, 1, "timeout_cost = 0");
    expect_bad(500, 5, 600, 1, "timeout_cost = 600");
    expect_bad(500, 5, 10, -1, "success_refund = -1");
    /* Boundaries that are fine: costs equal to capacity, refund 0. */
    tether_budget_opts ok = {sizeof ok, 10, 10, 10, 0};
    tether_budget *b = NULL;
    assert_int_equal(tether_budget_create(&b, &ok, NULL), 0);
    assert_int_equal(tether_budget_withdraw(b, 1), 10);
    assert_int_equal(tether_budget_withdraw(b, 0), TETHER_EBUDGET);
    tether_budget_destroy(b);
    assert_int_equal(tether_budget_create(NULL, &ok, NULL), TETHER_EINVAL);
}

/* ---- concurrency ---------------------------------------------------- */

#define NTHREADS 4
#define NOPS 100000
#define HOLD 8 /* withdrawals a worker keeps outstanding at most */

typedef struct worker {
    tether_budget *b;
    int capacity;
    unsigned seed;
    long taken;    /* tokens withdrawn */
    long refunded; /* tokens given back (paired refunds) */
    long denied;   /* EBUDGET answers */
    int bad;       /* a withdraw returned something impossible */
} worker;

static _Atomic int stop_sampler;
static _Atomic long sampler_bad;

static unsigned next_rand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return *s >> 16;
}

static void refund_one(worker *w, int *held, int *n) {
    int cost = held[--(*n)];
    tether_budget_success(w->b, cost);
    w->refunded += cost;
}

/* Each op withdraws (keeping up to HOLD outstanding) or refunds one held
 * withdrawal; every withdrawal is paid back before the worker ends. */
static void *paired_worker(void *arg) {
    worker *w = arg;
    int held[HOLD];
    int n = 0;
    for (int i = 0; i < NOPS; i++) {
        unsigned r = next_rand(&w->seed);
        if (n == HOLD || (n > 0 && (r & 3) == 0)) {
            refund_one(w, held, &n);
            continue;
        }
        int after_timeout = (r >> 3) & 1;
        int got = tether_budget_withdraw(w->b, after_timeout);
        if (got == TETHER_EBUDGET)
            w->denied++;
        else if (got != (after_timeout ? 10 : 5))
            w->bad++;
        else {
            held[n++] = got;
            w->taken += got;
        }
    }
    while (n > 0)
        refund_one(w, held, &n);
    return NULL;
}

static void *refund_worker(void *arg) {
    worker *w = arg;
    for (int i = 0; i < NOPS; i++)
        tether_budget_success(w->b, 0);
    return NULL;
}

static void *drain_worker(void *arg) {
    worker *w = arg;
    for (;;) {
        int got = tether_budget_withdraw(w->b, next_rand(&w->seed) & 1);
        if (got > 0) {
            w->taken += got;
            continue;
        }
        /* Both costs must fail before this worker stops. */
        got = tether_budget_withdraw(w->b, 0);
        if (got < 0)
            return NULL;
        w->taken += got;
    }
}

static void *sampler(void *arg) {
    worker *w = arg;
    while (!atomic_load(&stop_sampler)) {
        int t = tether_budget_tokens(w->b);
        if (t < 0 || t > w->capacity)
            atomic_fetch_add(&sampler_bad, 1);
    }
    return NULL;
}

static void run_threads(void *(*fn)(void *), worker *ws, tether_budget *b,
                        int capacity) {
    pthread_t th[NTHREADS], samp;
    worker probe = {.b = b, .capacity = capacity};
    atomic_store(&stop_sampler, 0);
    atomic_store(&sampler_bad, 0);
    assert_int_equal(pthread_create(&samp, NULL, sampler, &probe), 0);
    for (int i = 0; i < NTHREADS; i++) {
        memset(&ws[i], 0, sizeof(ws[i]));
        ws[i].b = b;
        ws[i].capacity = capacity;
        ws[i].seed = 0x9e37u * (unsigned)(i + 1);
        assert_int_equal(pthread_create(&th[i], NULL, fn, &ws[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stop_sampler, 1);
    pthread_join(samp, NULL);
    assert_int_equal(atomic_load(&sampler_bad), 0);
}

static void test_threads_paired(void **state) {
    (void)state;
    /* Small bucket: workers want up to 4 * 8 * 10 tokens, so it runs dry
     * often and withdrawals race at zero. */
    tether_budget *b = make(100, 5, 10, 1);
    worker ws[NTHREADS];
    run_threads(paired_worker, ws, b, 100);
    long taken = 0, refunded = 0, denied = 0;
    for (int i = 0; i < NTHREADS; i++) {
        assert_int_equal(ws[i].bad, 0);
        taken += ws[i].taken;
        refunded += ws[i].refunded;
        denied += ws[i].denied;
    }
    /* Every withdrawal was paid back, and paired refunds never overflow. */
    assert_true(taken == refunded);
    assert_true(taken > 0);
    /* Whether withdrawals met an empty bucket depends on scheduling, so
     * denials are reported, not required. */
    print_message("paired: taken %ld, denied %ld\n", taken, denied);
    assert_int_equal(tether_budget_tokens(b), 100);
    tether_budget_destroy(b);
}

static void test_threads_drain_and_refill(void **state) {
    (void)state;
    /* Drain concurrently: what was taken is exactly what is missing. */
    tether_budget *b = make(100003, 5, 10, 1);
    worker ws[NTHREADS];
    run_threads(drain_worker, ws, b, 100003);
    long taken = 0;
    for (int i = 0; i < NTHREADS; i++)
        taken += ws[i].taken;
    assert_int_equal(tether_budget_tokens(b), 3);
    assert_true(taken == 100000);

    /* Refill concurrently with first-try refunds: capped at capacity. */
    run_threads(refund_worker, ws, b, 100003);
    assert_int_equal(tether_budget_tokens(b), 100003);

    tether_budget *c = make(1000000, 5, 10, 1);
    while (tether_budget_withdraw(c, 1) > 0) {
    }
    run_threads(refund_worker, ws, c, 1000000);
    assert_int_equal(tether_budget_tokens(c), NTHREADS * NOPS);
    tether_budget_destroy(c);
    tether_budget_destroy(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_exhaustion),
        cmocka_unit_test(test_refill_by_successes),
        cmocka_unit_test(test_retry_success_refunds_cost),
        cmocka_unit_test(test_cap_at_capacity),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_threads_paired),
        cmocka_unit_test(test_threads_drain_and_refill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
