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

#include "../support/needs_pq.h"

#include <stdio.h>
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
            "tether_max_waiters=6000 tether_pool_max_limit=32 "
            "tether_leak_threshold=30s tether_reset_query='DISCARD ALL' "
            "tether_drain_timeout=250ms "
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
    assert_int_equal(k.o.max_waiters, 6000);
    assert_int_equal(k.o.max_size_limit, 32);
    assert_int_equal(k.o.leak_threshold_ms, 30000);
    assert_string_equal(k.o.reset_query, "DISCARD ALL");
    assert_int_equal(k.drain_ms, 250);
    assert_int_equal(k.o.retry.max_attempts, 7);
    assert_int_equal(k.o.retry.backoff.kind, TETHER_BACKOFF_FIXED);
    assert_int_equal(k.o.breaker.failures, 9);
    assert_string_equal(k.o.name, "h1"); /* the first host */
    tether__pool_keys_free(&k);
}

/* parse_name returns the pool name conninfo gives (NULL: the pool's
 * "pool-N"), in a static buffer. */
static const char *parse_name(const char *conninfo) {
    static char name[TETHER_POOL_NAME_MAX + 1];
    tether__pool_keys k;
    tether_error err = {0};
    if (tether__pool_keys_parse(conninfo, &k, &err) != 0)
        fail_msg("%s: %s", conninfo, err.message);
    const char *r = NULL;
    if (k.o.name) {
        assert_true(strlen(k.o.name) <= TETHER_POOL_NAME_MAX);
        snprintf(name, sizeof(name), "%s", k.o.name);
        r = name;
    }
    tether__pool_keys_free(&k);
    return r;
}

/* A pool's name: tether_pool_name, else user@host:port/dbname of the first
 * host, never a password. */
static void test_pool_name(void **state) {
    (void)state;
    assert_string_equal(
        parse_name("host=db1,db2 port=6432,6433 user=app dbname=orders "
                   "password=s3cret tether_pool_name=orders-rw"),
        "orders-rw");
    assert_string_equal(parse_name("host=db1,db2 port=6432,6433 user=app "
                                   "dbname=orders password=s3cret"),
                        "app@db1:6432/orders");
    assert_string_equal(
        parse_name("postgresql://app:s3cret@db1:5433,db2/orders?sslmode=off"),
        "app@db1:5433/orders");
    assert_string_equal(parse_name("host=::1 port=5432"), "[::1]:5432");
    assert_string_equal(parse_name("hostaddr=10.0.0.7 user=u"), "u@10.0.0.7");
    assert_string_equal(parse_name("host=/run/postgresql dbname=d"),
                        "/run/postgresql/d");
    /* a dbname holding a connection string (a password, maybe) is left out */
    assert_string_equal(
        parse_name("host=h dbname='host=x password=s3cret' user=u"), "u@h");
    assert_null(parse_name("user=u dbname=d")); /* no host: "pool-N" */
    assert_null(parse_name(""));
    /* long values are cut to the longest name */
    char ci[400], host[300];
    memset(host, 'h', 299);
    host[299] = '\0';
    snprintf(ci, sizeof(ci), "host=%s", host);
    assert_int_equal(strlen(parse_name(ci)), TETHER_POOL_NAME_MAX);
    /* found by fuzz_keywords: a host of one letter and then bytes that are
     * all UTF-8 continuations was cut to an empty name */
    memset(host, 0xac, 299);
    host[0] = 'a';
    snprintf(ci, sizeof(ci), "host=%s", host);
    assert_int_equal(strlen(parse_name(ci)), TETHER_POOL_NAME_MAX);
    /* spaces are allowed (quoted), and the longest name */
    assert_string_equal(parse_name("host=h tether_pool_name='eu orders'"),
                        "eu orders");
    char longest[TETHER_POOL_NAME_MAX + 1];
    memset(longest, 'n', TETHER_POOL_NAME_MAX);
    longest[TETHER_POOL_NAME_MAX] = '\0';
    snprintf(ci, sizeof(ci), "host=h tether_pool_name=%s", longest);
    assert_string_equal(parse_name(ci), longest);
}

/* tether_pool_open names the pool so: its metrics carry the short name,
 * never the connection string or its password. */
static void test_open_names_pool(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
    tether_pool *p = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_open(&p,
                                      "host=127.0.0.1 port=1 user=app "
                                      "dbname=app password=s3cret",
                                      NULL, NULL, &err),
                     0);
    assert_string_equal(tether_pool_name(p), "app@127.0.0.1:1/app");
    char buf[32768];
    size_t n = tether_pool_metrics_prometheus(p, buf, sizeof(buf));
    assert_true(n < sizeof(buf));
    assert_non_null(
        strstr(buf, "tether_pool_waiters{pool=\"app@127.0.0.1:1/app\"} 0"));
    assert_null(strstr(buf, "s3cret"));
    assert_null(strstr(buf, "dbname"));
    tether_pool_destroy(p);
    assert_int_equal(
        tether_pool_open(&p, "port=1 tether_pool_name=api", NULL, NULL, &err),
        0);
    assert_string_equal(tether_pool_name(p), "api");
    tether_pool_destroy(p);
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
    NEEDS_PQ_KEYWORDS();
    expect_open_error("host=a tether_probe_idle=-1ms password=s3cret",
                      "tether_probe_idle");
    expect_open_error("host=a tether_barge_limit_us=1ms",
                      "tether_barge_limit_us");
    expect_open_error("host=a tether_probe_idle=10", "tether_probe_idle");
    expect_open_error("host=a tether_pool_min=9 tether_pool_max=2",
                      "tether_pool_min (9) is above tether_pool_max (2)");
    expect_open_error("host=a tether_pool_max=0", "tether_pool_max");
    expect_open_error("host=a tether_pool_max=8 tether_pool_max_limit=4",
                      "tether_pool_max_limit (4) is below tether_pool_max (8)");
    expect_open_error("host=a tether_pool_max_limit=100001",
                      "tether_pool_max_limit");
    expect_open_error("host=a tether_pooling=maybe", "tether_pooling");
    expect_open_error("host=a tether_drain_timeout=fast",
                      "bad value \"fast\" for tether_drain_timeout");
    /* found by fuzz_keywords: a pool of one cannot keep two open */
    expect_open_error("host=a tether_pool_min=2 tether_pooling=off",
                      "tether_pooling=off");
    expect_open_error("host=a tether_retry='exponential attempts=0'",
                      "tether_retry");
    expect_open_error("host=a tether_breaker=sometimes", "tether_breaker");
    expect_open_error("host=a tether_retry='expo base=1s'", "tether_retry");
    /* The connector's keywords are still checked, by the connector. */
    expect_open_error("host=a tether_strategy=zigzag password=s3cret",
                      "tether_strategy");
    expect_open_error("host=a tether_bogus=1 password=s3cret",
                      "unknown tether keyword \"tether_bogus\"");
    expect_open_error("host=a tether_pool_name='' password=s3cret",
                      "bad value \"\" for tether_pool_name: want 1 to 128 "
                      "bytes");
    char ci[300];
    snprintf(ci, sizeof(ci), "host=a tether_pool_name=%0129d", 0);
    expect_open_error(ci, "for tether_pool_name: want 1 to 128 bytes");
    expect_open_error("host=a tether_pool_name='a\tb'",
                      "tether_pool_name: want 1 to 128 bytes, no control");
}

/* The pool opened from a string has the string's size and no connection
 * yet (min 0): nothing is contacted until the first acquire. */
static void test_open_sizes(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
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
        cmocka_unit_test(test_pool_name),
        cmocka_unit_test(test_open_names_pool),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_open_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
