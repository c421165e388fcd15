/* test_error.c - the error struct helpers (src/core/error.c):
 * tether_error_set starts from a cleared struct, tether_error_set_not_sent
 * marks a failure that never reached the server, and a retry loop repeats
 * work that is not idempotent only after such a failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "tether.h"

/* tether_error_set resets what was set before it: a not_sent = 1 from an
 * earlier failure must not make the next one look unsent. */
static void test_set_clears_earlier_fields(void **state) {
    (void)state;
    tether_error err = {0};
    err.not_sent = 1;
    err.retry_after_ms = 250;
    memcpy(err.sqlstate, "57P01", 6);
    int rc = tether_error_set(&err, TETHER_EQUERY, TETHER_CLASS_TRANSIENT,
                              "lost after %d bytes", 12);
    assert_int_equal(rc, TETHER_EQUERY);
    assert_int_equal(err.code, TETHER_EQUERY);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(err.not_sent, 0);
    assert_int_equal(err.retry_after_ms, 0);
    assert_string_equal(err.sqlstate, "");
    assert_string_equal(err.message, "lost after 12 bytes");
}

static void test_set_not_sent(void **state) {
    (void)state;
    tether_error err = {0};
    err.retry_after_ms = 250; /* stale: cleared like tether_error_set does */
    int rc =
        tether_error_set_not_sent(&err, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT,
                                  "refused (attempt %d)", 3);
    assert_int_equal(rc, TETHER_ECONNECT);
    assert_int_equal(err.code, TETHER_ECONNECT);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(err.not_sent, 1);
    assert_int_equal(err.retry_after_ms, 0);
    assert_string_equal(err.message, "refused (attempt 3)");
    /* NULL err: the code comes back all the same */
    assert_int_equal(tether_error_set_not_sent(NULL, TETHER_ECONNECT,
                                               TETHER_CLASS_TRANSIENT, "x"),
                     TETHER_ECONNECT);
    /* NULL format: the code's own message, as with tether_error_set */
    tether_error_set_not_sent(&err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
                              NULL);
    assert_string_equal(err.message, tether_strerror(TETHER_ETIMEDOUT));
    assert_int_equal(err.not_sent, 1);
}

/* The operations of the retry tests: fail twice, then succeed. */
typedef struct flaky {
    int calls;
    int unsent; /* fail with tether_error_set_not_sent */
} flaky;

static int flaky_op(void *arg, const tether_attempt *a, tether_error *err) {
    flaky *f = arg;
    (void)a;
    if (++f->calls > 2)
        return 0;
    if (f->unsent)
        return tether_error_set_not_sent(err, TETHER_ECONNECT,
                                         TETHER_CLASS_TRANSIENT, "refused");
    return tether_error_set(err, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT,
                            "reset after the request went out");
}

static int run_flaky(flaky *f, tether_error *err) {
    tether_retry_opts o;
    tether_retry *policy = NULL;
    assert_int_equal(tether_retry_opts_parse("fixed base=1ms jitter=none "
                                             "attempts=5 deadline=10s",
                                             &o, err),
                     0);
    assert_int_equal(tether_retry_create(&policy, &o, err), 0);
    int rc = tether_retry_run(policy, 0, flaky_op, f, err); /* not idempotent */
    tether_retry_destroy(policy);
    return rc;
}

/* Work that is not idempotent and failed with tether_error_set_not_sent is
 * retried (examples/retry.c's case: it stopped "not-idempotent" after one
 * attempt when not_sent was set before tether_error_set). */
static void test_not_sent_is_retried(void **state) {
    (void)state;
    flaky f = {0, 1};
    tether_error err = {0};
    assert_int_equal(run_flaky(&f, &err), 0);
    assert_int_equal(f.calls, 3);
    assert_int_equal(err.attempts, 3);
}

/* ... and without it, the run stops after the first attempt. */
static void test_maybe_sent_is_not_retried(void **state) {
    (void)state;
    flaky f = {0, 0};
    tether_error err = {0};
    assert_int_equal(run_flaky(&f, &err), TETHER_ECONNECT);
    assert_int_equal(f.calls, 1);
    assert_int_equal(err.stop, TETHER_STOP_NOT_IDEMPOTENT);
    assert_int_equal(err.not_sent, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_clears_earlier_fields),
        cmocka_unit_test(test_set_not_sent),
        cmocka_unit_test(test_not_sent_is_retried),
        cmocka_unit_test(test_maybe_sent_is_not_retried),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
