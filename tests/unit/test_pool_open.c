/* test_pool_open.c - the pool's connection-string keywords (src/pool/open.c):
 * tether_pool_open maps tether_pool_max and the rest onto the pool's
 * options; bad values are errors naming the keyword; the connector's and
 * libpq's keywords are left to them. No server is contacted: min 0 opens
 * no connection. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "pool.h"
#include "tether.h"

static void test_maps_pool_keys(void **state) {
    (void)state;
    tether__pool_keys k;
    tether_error err = {0};
    assert_int_equal(
        tether__pool_keys_parse(
            "host=h1,h2 password=s3cret tether_pool_min=2 tether_pool_max=16 "
            "tether_acquire_timeout=3s tether_idle_timeout=1m "
            "tether_max_lifetime=10m tether_validate_idle=250ms "
            "tether_probe_idle=0 tether_barge_limit_us=2500 "
            "tether_leak_threshold=30s tether_reset_query='DISCARD ALL' "
            "tether_retry='fixed base=10ms attempts=7' "
            "tether_breaker='breaker failures=9' tether_strategy=race "
            "sslmode=disable",
            &k, &err),
        0);
    assert_int_equal(k.o.min_size, 2);
    assert_int_equal(k.o.max_size, 16);
    assert_int_equal(k.o.acquire_timeout_ms, 3000);
    assert_int_equal(k.o.idle_timeout_ms, 60000);
    assert_int_equal(k.o.max_lifetime_ms, 600000);
    assert_int_equal(k.o.validate_idle_ms, 250);
    assert_int_equal(k.o.probe_idle_ms, 0);
    assert_int_equal(k.o.barge_limit_us, 2500);
    assert_int_equal(k.o.leak_threshold_ms, 30000);
    assert_string_equal(k.o.reset_query, "DISCARD ALL");
    assert_int_equal(k.o.retry.max_attempts, 7);
    assert_int_equal(k.o.retry.backoff.kind, TETHER_BACKOFF_FIXED);
    assert_int_equal(k.o.breaker.failures, 9);
    assert_non_null(strstr(k.o.name, "host='h1,h2'"));
    assert_null(strstr(k.o.name, "s3cret"));
    tether__pool_keys_free(&k);
}

static void test_defaults_and_pooling_off(void **state) {
    (void)state;
    tether_pool_opts def;
    tether_pool_opts_init(&def);
    tether__pool_keys k;
    assert_int_equal(tether__pool_keys_parse("host=h", &k, NULL), 0);
    assert_int_equal(k.o.max_size, def.max_size);
    assert_int_equal(k.o.acquire_timeout_ms, def.acquire_timeout_ms);
    assert_int_equal(k.o.barge_limit_us, def.barge_limit_us);
    assert_null(k.o.reset_query);
    tether__pool_keys_free(&k);
    assert_int_equal(
        tether__pool_keys_parse("host=h tether_pool_max=8 tether_pooling=off",
                                &k, NULL),
        0);
    assert_int_equal(k.o.max_size, 1);
    tether__pool_keys_free(&k);
}

static void expect_open_error(const char *ci, const char *needle) {
    tether_pool *p = (tether_pool *)1;
    tether_error err = {0};
    assert_int_equal(tether_pool_open(&p, ci, NULL, NULL, &err), TETHER_ESPEC);
    assert_null(p);
    assert_int_equal(err.code, TETHER_ESPEC);
    if (!strstr(err.message, needle))
        fail_msg("message \"%s\" lacks \"%s\"", err.message, needle);
    assert_null(strstr(err.message, "s3cret"));
}

static void test_bad_values(void **state) {
    (void)state;
    expect_open_error("host=a tether_probe_idle=-1ms password=s3cret",
                      "tether_probe_idle");
    expect_open_error("host=a tether_barge_limit_us=1ms",
                      "tether_barge_limit_us");
    expect_open_error("host=a tether_probe_idle=10", "tether_probe_idle");
    expect_open_error("host=a tether_pool_min=9 tether_pool_max=2",
                      "tether_pool_min (9) is above tether_pool_max (2)");
    expect_open_error("host=a tether_pool_max=0", "tether_pool_max");
    expect_open_error("host=a tether_pooling=maybe", "tether_pooling");
    expect_open_error("host=a tether_retry='exponential attempts=0'",
                      "tether_retry");
    expect_open_error("host=a tether_breaker=sometimes", "tether_breaker");
    expect_open_error("host=a tether_retry='expo base=1s'", "tether_retry");
    /* The connector's keywords are still checked, by the connector. */
    expect_open_error("host=a tether_strategy=zigzag password=s3cret",
                      "tether_strategy");
    expect_open_error("host=a tether_bogus=1 password=s3cret",
                      "unknown tether keyword \"tether_bogus\"");
}

/* The pool opened from a string has the string's size and no connection
 * yet (min 0): nothing is contacted until the first acquire. */
static void test_open_sizes(void **state) {
    (void)state;
    tether_pool *p = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_open(&p,
                                      "host=127.0.0.1 port=1 "
                                      "tether_pool_max=5",
                                      NULL, NULL, &err),
                     0);
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    assert_int_equal(m.max_size, 5);
    assert_int_equal(m.total, 0);
    tether_pool_destroy(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps_pool_keys),
        cmocka_unit_test(test_defaults_and_pooling_off),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_open_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
