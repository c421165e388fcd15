/* test_pool_alloc.c - the acquire/release fast path allocates nothing.
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (see
 * tests/CMakeLists.txt): every allocation the library makes is counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>

#include "tether.h"
#include "tether_sim.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

static _Atomic long allocations;

void *__wrap_malloc(size_t n) {
    atomic_fetch_add(&allocations, 1);
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m) {
    atomic_fetch_add(&allocations, 1);
    return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n) {
    atomic_fetch_add(&allocations, 1);
    return __real_realloc(p, n);
}

static void test_fast_path_allocates_nothing(void **state) {
    (void)state;
    tether_sim *sim = NULL;
    tether_pool *pool = NULL;
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    assert_int_equal(tether_sim_create(&sim, &so, NULL), 0);
    po.driver = tether_driver_sim();
    po.driver_ctx = sim;
    po.max_size = 4;
    assert_int_equal(tether_pool_create(&pool, &po, NULL), 0);
    tether_lease *l[4];
    for (int i = 0; i < 4; i++) /* creating connections may allocate */
        assert_int_equal(tether_pool_acquire(pool, 1000, &l[i], NULL), 0);
    for (int i = 0; i < 4; i++)
        tether_lease_release(l[i]);
    long before = atomic_load(&allocations);
    for (int i = 0; i < 100000; i++) {
        tether_lease *x;
        assert_int_equal(tether_pool_acquire(pool, 1000, &x, NULL), 0);
        tether_lease_release(x);
    }
    long after = atomic_load(&allocations);
    assert_int_equal(after - before, 0);
    assert_true(before > 0); /* the wrap does count the library's calls */
    tether_pool_destroy(pool);
    tether_sim_destroy(sim);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_path_allocates_nothing),
    };
    return cmocka_run_group_tests_name("pool_alloc", tests, NULL, NULL);
}
