/* test_preload_table.c - unit tests for the preload's table of handed-out
 * PGconns (src/preload/table.c): lease, give back (then a second PQfinish
 * is seen as such), the driver's close forgetting a slot (so an address
 * libpq reuses is not the pool's), PQreset's taint, and fork: leased slots
 * become the child's own, idle ones are forgotten. The PGconn pointers are
 * only compared, never used. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "preload.h"

static char conns[4]; /* distinct addresses */
#define PG(i) ((PGconn *)(void *)&conns[i])
#define LEASE(i) ((tether_lease *)(void *)&conns[i])

static void test_lease_and_finish(void **state) {
    (void)state;
    tether__preload_slot s;
    assert_int_equal(tether__preload_table_state(PG(0)), TETHER__PRELOAD_NONE);
    tether__preload_table_lease(PG(0), LEASE(0), NULL, NULL, NULL);
    assert_int_equal(tether__preload_table_state(PG(0)),
                     TETHER__PRELOAD_LEASED);
    assert_int_equal(tether__preload_table_finish(PG(0), &s),
                     TETHER__PRELOAD_LEASED);
    assert_ptr_equal(s.lease, LEASE(0));
    assert_null(s.tainted);
    assert_int_equal(tether__preload_table_finish(PG(0), &s),
                     TETHER__PRELOAD_IDLE); /* twice */
    tether__preload_table_lease(PG(0), LEASE(1), NULL, NULL,
                                NULL); /* taken again */
    assert_int_equal(tether__preload_table_finish(PG(0), &s),
                     TETHER__PRELOAD_LEASED);
    assert_ptr_equal(s.lease, LEASE(1));
    tether__preload_table_forget(PG(0)); /* the driver closed it */
    assert_int_equal(tether__preload_table_finish(PG(0), &s),
                     TETHER__PRELOAD_NONE);
}

static void test_taint(void **state) {
    (void)state;
    tether__preload_slot s;
    assert_int_equal(tether__preload_table_taint(PG(1), "test"),
                     0); /* not the pool's */
    tether__preload_table_lease(PG(1), LEASE(1), NULL, NULL, NULL);
    assert_int_equal(tether__preload_table_taint(PG(1), "test"), 1);
    assert_int_equal(tether__preload_table_finish(PG(1), &s),
                     TETHER__PRELOAD_LEASED);
    assert_non_null(s.tainted);
    tether__preload_table_forget(PG(1));
}

static void test_fork_child(void **state) {
    (void)state;
    tether__preload_slot s;
    tether__preload_table_lease(PG(2), LEASE(2), NULL, NULL,
                                NULL); /* leased at the fork */
    tether__preload_table_lease(PG(3), LEASE(3), NULL, NULL, NULL);
    tether__preload_table_finish(PG(3), &s); /* idle in the pool at the fork */
    tether__preload_table_lock(); /* as pthread_atfork's prepare does */
    tether__preload_table_fork_child();
    assert_int_equal(tether__preload_table_state(PG(2)),
                     TETHER__PRELOAD_INHERITED);
    assert_int_equal(tether__preload_table_state(PG(3)), TETHER__PRELOAD_NONE);
    assert_int_equal(tether__preload_table_finish(PG(2), &s),
                     TETHER__PRELOAD_INHERITED);
    assert_int_equal(tether__preload_table_state(PG(2)),
                     TETHER__PRELOAD_NONE); /* libpq's now */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lease_and_finish),
        cmocka_unit_test(test_taint),
        cmocka_unit_test(test_fork_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
