/* sim_pool.h - the fixture of the tests that drive a pool over the sim
 * driver: a sim, a pool on it, and the virtual clock both read (or the
 * real clock). Build the options, tune them, open; close frees all three.
 *
 *     sim_pool f;
 *     tether_sim_opts so;
 *     tether_pool_opts po;
 *     sim_pool_opts(&f, 1000, &so, &po);  (virtual clock at 1 s; -1: real)
 *     po.max_size = 2;
 *     sim_pool_open(&f, &so, &po);
 *     ...
 *     sim_pool_close(&f);
 *
 * Header only (static inline functions); unit tests include it as
 * "../support/sim_pool.h" after <cmocka.h> (a failed call fails the
 * test). */
#ifndef TETHER_TEST_SIM_POOL_H
#define TETHER_TEST_SIM_POOL_H

#include <stdint.h>
#include <string.h>

#include "tether.h"
#include "tether_sim.h"

typedef struct sim_pool {
    tether_vclock *vc; /* NULL: the real clock */
    tether_sim *sim;
    tether_pool *pool;
} sim_pool;

/* sim_pool_opts clears f and fills so and po with their defaults; with
 * start_ms >= 0 both read a new virtual clock that starts at start_ms, else
 * the real clock. The caller tunes them and calls sim_pool_open. */
static inline void sim_pool_opts(sim_pool *f, int64_t start_ms,
                                 tether_sim_opts *so, tether_pool_opts *po) {
    memset(f, 0, sizeof(*f));
    tether_sim_opts_init(so);
    tether_pool_opts_init(po);
    if (start_ms >= 0) {
        f->vc = tether_vclock_create(start_ms * 1000000LL);
        assert_non_null(f->vc);
        so->clock = po->clock = tether_vclock_clock(f->vc);
    }
}

/* sim_pool_open creates f's sim from so and its pool from po, on the sim
 * driver over that sim (po's driver and driver_ctx are set here). */
static inline void sim_pool_open(sim_pool *f, const tether_sim_opts *so,
                                 const tether_pool_opts *po) {
    tether_error err = {0};
    if (tether_sim_create(&f->sim, so, &err) != 0)
        fail_msg("tether_sim_create: %s", err.message);
    tether_pool_opts o = *po;
    o.driver = tether_driver_sim();
    o.driver_ctx = f->sim;
    if (tether_pool_create(&f->pool, &o, &err) != 0)
        fail_msg("tether_pool_create: %s", err.message);
    assert_non_null(f->pool);
}

/* sim_pool_close destroys the pool, then the sim, then the clock. */
static inline void sim_pool_close(sim_pool *f) {
    tether_pool_destroy(f->pool);
    tether_sim_destroy(f->sim);
    tether_vclock_destroy(f->vc);
    memset(f, 0, sizeof(*f));
}

/* sim_pool_advance_ms moves f's virtual clock on by ms. */
static inline void sim_pool_advance_ms(sim_pool *f, int64_t ms) {
    assert_non_null(f->vc);
    tether_vclock_advance(f->vc, ms * 1000000LL);
}

/* sim_pool_acquire takes a lease from p within 1 s, or fails the test. */
static inline tether_lease *sim_pool_acquire(tether_pool *p) {
    tether_lease *l = NULL;
    tether_error err = {0};
    if (tether_pool_acquire(p, 1000, &l, &err) != 0)
        fail_msg("tether_pool_acquire: %s", err.message);
    assert_non_null(l);
    return l;
}

/* sim_pool_warm makes n connections (all held at once, so n distinct
 * ones) and releases them: n idle in the pool, in the order released
 * (n <= 16). */
static inline void sim_pool_warm(sim_pool *f, int n) {
    tether_lease *l[16];
    assert_true(n >= 0 && n <= 16);
    for (int i = 0; i < n; i++)
        l[i] = sim_pool_acquire(f->pool);
    for (int i = 0; i < n; i++)
        tether_lease_release(l[i]);
}

#endif
