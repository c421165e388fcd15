/* test_fuzz_found.c - inputs the fuzz targets (tests/fuzz) found to break
 * an invariant, each kept here as a plain unit test that fails without its
 * fix. The inputs are also seeds of the target's committed corpus. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connector.h"
#include "tether.h"

/* set_hosts gives list to a configuration holding "before:1" and returns
 * the code; on failure it checks that the old list is still there. */
static int set_hosts(const char *list, tether__conncfg *c) {
    memset(c, 0, sizeof(*c));
    assert_int_equal(tether__conncfg_set_hosts(c, "before:1", NULL), 0);
    tether_error e = {0};
    int rc = tether__conncfg_set_hosts(c, list, &e);
    if (rc) {
        assert_int_equal(rc, TETHER_ESPEC);
        assert_int_equal(e.code, TETHER_ESPEC);
        assert_true(strlen(e.message) > 0);
        assert_int_equal(c->neps, 1);
        assert_string_equal(c->eps[0].host, "before");
        assert_int_equal(c->eps[0].port, 1);
    }
    return rc;
}

/* fuzz_keywords: a provisioning callback's "[" (or "[]", ":5432", "[]:1")
 * became an endpoint with an empty host, which the driver takes as its
 * default host (libpq: PGHOST or the local socket): a host the callback
 * never named. Now refused like an empty item. */
static void test_provision_empty_host(void **state) {
    (void)state;
    static const char *const bad[] = {"[",      "[]",       ":5432",
                                      "[]:1",   "db1,[",    "[::1",
                                      "[::1]x", "[::1]x:5", "[a]]:1"};
    tether__conncfg c;
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        if (set_hosts(bad[i], &c) == 0)
            fail_msg("provisioning list \"%s\" accepted: host \"%s\"", bad[i],
                     c.eps[c.neps - 1].host);
        tether__conncfg_free(&c);
    }
    /* What stays accepted. */
    assert_int_equal(set_hosts("db1:5432,[::1]:6432,[fe80::1%eth0],db2", &c),
                     0);
    assert_int_equal(c.neps, 4);
    assert_string_equal(c.eps[0].host, "db1");
    assert_int_equal(c.eps[0].port, 5432);
    assert_string_equal(c.eps[1].host, "::1");
    assert_int_equal(c.eps[1].port, 6432);
    assert_string_equal(c.eps[2].host, "fe80::1%eth0");
    assert_int_equal(c.eps[2].port, 0);
    assert_string_equal(c.eps[3].host, "db2");
    tether__conncfg_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_provision_empty_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
