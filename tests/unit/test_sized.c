/* test_sized.c - the sized-struct rules of the public API
 * (docs/api-stability.md): every options and metrics struct starts with
 * size_t size; the library writes no more than the caller's size and reads
 * no more than the struct's own size field; an uninitialized struct (size
 * 0) or one from a newer header is refused with TETHER_EINVAL naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "tether.h"
#include "tether_sim.h"

#define CANARY 0xab

static void expect_untouched(const unsigned char *buf, size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        if (buf[i] != CANARY)
            fail_msg("byte %zu was written (size ends at %zu)", i, from);
}

/* An init, a preset, a parse and a metrics read with a smaller size write
 * that many bytes and set size to it. */
static void test_writes_stop_at_size(void **state) {
    (void)state;
    unsigned char buf[sizeof(tether_pool_opts) + 64];
    memset(buf, CANARY, sizeof(buf));
    tether_pool_opts_init_sized((tether_pool_opts *)(void *)buf, 24);
    expect_untouched(buf, 24, sizeof(buf));
    assert_int_equal(((tether_pool_opts *)(void *)buf)->size, 24);
    memset(buf, CANARY, sizeof(buf));
    assert_int_equal(
        tether_retry_opts_parse_sized(
            "fixed base=10ms", (tether_retry_opts *)(void *)buf, 40, NULL),
        0);
    expect_untouched(buf, 40, sizeof(buf));
    memset(buf, CANARY, sizeof(buf));
    assert_int_equal(
        tether_breaker_preset_sized(
            "blocking-period", (tether_breaker_opts *)(void *)buf, 16, NULL),
        0);
    expect_untouched(buf, 16, sizeof(buf));
}

/* The macros take the size from the struct's type, not from the pointer:
 * a caller holding a void * still gets the whole struct filled. */
static void test_size_from_type(void **state) {
    (void)state;
    tether_retry_opts o;
    memset(&o, 0, sizeof(o));
    void *vp = &o;
    assert_int_equal(
        tether_retry_opts_parse("fixed base=10ms attempts=4", vp, NULL), 0);
    assert_int_equal(o.size, sizeof(o));
    assert_int_equal(o.max_attempts, 4);
    assert_int_equal(o.backoff.kind, TETHER_BACKOFF_FIXED);
    tether_pool_opts_init(NULL); /* accepted: nothing is written */
}

static void test_metrics_stop_at_size(void **state) {
    (void)state;
    tether_sim *sim = NULL;
    assert_int_equal(tether_sim_create(&sim, NULL, NULL), 0);
    tether_pool_opts o;
    tether_pool_opts_init(&o);
    o.driver = tether_driver_sim();
    o.driver_ctx = sim;
    o.max_size = 3;
    tether_pool *p = NULL;
    assert_int_equal(tether_pool_create(&p, &o, NULL), 0);
    tether_lease *l = NULL;
    assert_int_equal(tether_pool_acquire(p, 1000, &l, NULL), 0);
    unsigned char buf[sizeof(tether_pool_metrics) + 64];
    memset(buf, CANARY, sizeof(buf));
    size_t part = offsetof(tether_pool_metrics, in_use) + sizeof(int);
    tether_pool_metrics_get_sized(p, (tether_pool_metrics *)(void *)buf, part);
    expect_untouched(buf, part, sizeof(buf));
    tether_pool_metrics *m = (tether_pool_metrics *)(void *)buf;
    assert_int_equal(m->size, part);
    assert_int_equal(m->total, 1);
    assert_int_equal(m->in_use, 1);
    /* A full read tells the same, and its size is the whole struct. */
    tether_pool_metrics full;
    tether_pool_metrics_get(p, &full);
    assert_int_equal(full.size, sizeof(full));
    assert_int_equal(full.max_size, 3);
    tether_lease_release(l);
    tether_pool_destroy(p);
    tether_sim_destroy(sim);
}

/* expect_refused: creating from options whose size is bad is EINVAL naming
 * the struct and why. */
static void expect_refused(int rc, const tether_error *err, const char *name,
                           const char *why) {
    assert_int_equal(rc, TETHER_EINVAL);
    assert_int_equal(err->code, TETHER_EINVAL);
    if (!strstr(err->message, name) || !strstr(err->message, why))
        fail_msg("\"%s\" lacks \"%s\" or \"%s\"", err->message, name, why);
}

static void test_uninitialized_refused(void **state) {
    (void)state;
    tether_error err = {0};
    tether_breaker_opts bo;
    memset(&bo, 0, sizeof(bo));
    tether_breaker *b = NULL;
    expect_refused(tether_breaker_create(&b, &bo, &err), &err,
                   "tether_breaker_opts", "initialize");
    assert_null(b);
    tether_backoff_opts ko;
    memset(&ko, 0, sizeof(ko));
    expect_refused(tether_backoff_validate(&ko, &err), &err,
                   "tether_backoff_opts", "initialize");
    tether_retry_opts ro;
    tether_retry_opts_init(&ro);
    ro.backoff.size = 0; /* an embedded struct is checked too */
    tether_retry *r = NULL;
    expect_refused(tether_retry_create(&r, &ro, &err), &err,
                   "tether_backoff_opts", "initialize");
    tether_connector_opts co;
    memset(&co, 0, sizeof(co));
    co.conninfo = "host=h";
    tether_connector *c = NULL;
    expect_refused(tether_connector_create(&c, &co, &err), &err,
                   "tether_connector_opts", "initialize");
}

static void test_newer_header_refused(void **state) {
    (void)state;
    tether_error err = {0};
    tether_budget_opts o;
    tether_budget_opts_init(&o);
    o.size += 8; /* as if built against a header with one more field */
    tether_budget *b = NULL;
    expect_refused(tether_budget_create(&b, &o, &err), &err,
                   "tether_budget_opts", "built against another tether.h");
    tether_registry_opts ro;
    tether_registry_opts_init(&ro);
    ro.pool.size = 1;
    tether_registry *r = NULL;
    expect_refused(tether_registry_create(&r, &ro, &err), &err,
                   "tether_registry_opts.pool", "not one this library");
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    assert_int_equal(po.size, sizeof(po));
    assert_int_equal(po.retry.size, sizeof(po.retry));
    assert_int_equal(po.breaker.size, sizeof(po.breaker));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes_stop_at_size),
        cmocka_unit_test(test_size_from_type),
        cmocka_unit_test(test_metrics_stop_at_size),
        cmocka_unit_test(test_uninitialized_refused),
        cmocka_unit_test(test_newer_header_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
