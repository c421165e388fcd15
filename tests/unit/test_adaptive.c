/* test_adaptive.c - the pool's adaptive limit (src/pool/adaptive.c;
 * docs/pool.md, "Adaptive limit") over the sim driver on a virtual clock:
 * each window the test holds the limit's worth of leases for a chosen time
 * (the hold time the rule reads), then runs a housekeeping pass. The limit
 * grows while the hold time holds and the pool is at its limit, not when
 * it is not; it comes down when the hold time doubles and when the server
 * refuses a connect as full (53300, 57P03); it stays within min and max;
 * a shrink never takes a lease from its holder (the excess closes as it
 * is released), and waiters keep their order and their deadlines; one
 * quick window does not set the baseline; a fleet of pools over one
 * server settles below its limit. Also the keyword, and a fixed pool's
 * figures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../support/clock.h"
#include "../support/sim_pool.h"
#include "pool.h"
#include "pool_inspect.h"
#include "tether.h"
#include "tether_sim.h"

#define MAXL 64

static tether_pool_metrics metrics(tether_pool *p) {
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    return m;
}

/* The leases a test holds across windows. */
typedef struct held {
    tether_lease *l[MAXL];
    int n;
} held;

static void release_all(held *h) {
    for (int i = 0; i < h->n; i++)
        assert_int_equal(tether_lease_release(h->l[i]), 0);
    h->n = 0;
}

/* The tests' fixture: a pool over the sim on a virtual clock at 1 s (f),
 * and the leases the test holds (h). */
typedef struct fixture {
    sim_pool f;
    held h;
} fixture;

/* open_adaptive opens x: an adaptive pool of min..max over a sim that
 * admits at most server_max connections (0: any), nothing held. */
static void open_adaptive(fixture *x, int min, int max, int server_max) {
    tether_sim_opts so;
    tether_pool_opts po;
    sim_pool_opts(&x->f, 1000, &so, &po);
    so.max_connections = server_max;
    po.min_size = min;
    po.max_size = max;
    po.limit = TETHER_POOL_LIMIT_ADAPTIVE;
    po.barge_limit_us = 0; /* strict FIFO: the order is the test's */
    po.name = "adaptive";
    sim_pool_open(&x->f, &so, &po);
    x->h.n = 0;
}

/* close_fixture releases the leases x holds and closes its pool. */
static void close_fixture(fixture *x) {
    release_all(&x->h);
    sim_pool_close(&x->f);
}

static void hold_up_to(fixture *x, int n) {
    while (x->h.n < n)
        x->h.l[x->h.n++] = sim_pool_acquire(x->f.pool);
}

/* One window: the leases held (want of them, or the limit's worth when
 * want is -1) are held hold_ms, released, and the same number taken again
 * and held through the pass, so the pass finds the pool at its limit
 * when want is -1. Returns the limit after the pass. */
static int window(fixture *x, int want, int64_t hold_ms) {
    int n = want < 0 ? metrics(x->f.pool).limit : want;
    hold_up_to(x, n);
    sim_pool_advance_ms(&x->f, hold_ms);
    release_all(&x->h);
    hold_up_to(x, n);
    tether__pool_housekeep(x->f.pool);
    tether_pool_metrics m = metrics(x->f.pool);
    assert_true(m.limit >= m.limit_min && m.limit <= m.limit_max);
    assert_true(m.total <= TETHER__MAX(m.limit, n)); /* none created above */
    return m.limit;
}

/* grow runs n windows at the limit with a 10 ms hold; returns the limit
 * after the last pass. */
static int grow(fixture *x, int n) {
    for (int i = 0; i < n; i++)
        window(x, -1, 10);
    return metrics(x->f.pool).limit;
}

/* The limit grows while the hold time holds and the pool is at its limit,
 * in steps, up to max and no further. */
static void test_grows_to_max(void **state) {
    (void)state;
    fixture x;
    open_adaptive(&x, 0, 32, 0);
    tether_pool_metrics m = metrics(x.f.pool);
    assert_int_equal(m.limit_adaptive, 1);
    assert_int_equal(m.limit, 4); /* the first limit */
    assert_int_equal(m.limit_max, 32);
    assert_int_equal(m.limit_min, 1);
    int prev = m.limit, steps = 0;
    for (int i = 0; i < 40; i++) {
        int now = window(&x, -1, 10);
        assert_true(now >= prev);
        steps += now > prev;
        prev = now;
    }
    m = metrics(x.f.pool);
    assert_int_equal(m.limit, 32);
    assert_true(steps >= 5); /* gradual, not one jump */
    assert_int_equal(m.limit_up, (uint64_t)steps);
    assert_int_equal(m.limit_down, 0);
    assert_true(m.hold_short_us >= 9000 && m.hold_short_us <= 11000);
    assert_true(m.hold_long_us >= 9000 && m.hold_long_us <= 11000);
    assert_int_equal(m.max_size, 32); /* the ceiling */
    close_fixture(&x);
}

/* Far below its limit the pool learns nothing of it: no growth. */
static void test_no_growth_unbound(void **state) {
    (void)state;
    fixture x;
    open_adaptive(&x, 0, 32, 0);
    for (int i = 0; i < 20; i++)
        assert_int_equal(window(&x, 1, 10), 4);
    close_fixture(&x);
}

/* A window without a release teaches nothing: every lease held through
 * the passes (the pool at its limit), the limit stays. */
static void test_no_release_no_change(void **state) {
    (void)state;
    fixture x;
    open_adaptive(&x, 0, 32, 0);
    int before = grow(&x, 3);
    assert_true(before > 4);
    hold_up_to(&x, before); /* every connection in use: at the limit */
    for (int i = 0; i < 10; i++) {
        sim_pool_advance_ms(&x.f, 100);
        tether__pool_housekeep(x.f.pool);
        assert_int_equal(metrics(x.f.pool).limit, before);
    }
    close_fixture(&x);
}

/* Waiters at the limit count as bound: the pass grows the limit, and the
 * acquire that found no room (timeout 0) leaves no trace. */
static void test_waiter_counts_as_bound(void **state) {
    (void)state;
    fixture x;
    open_adaptive(&x, 0, 32, 0);
    hold_up_to(&x, 4);
    sim_pool_advance_ms(&x.f, 10);
    release_all(&x.h);
    hold_up_to(&x, 3); /* one idle: in use is below the limit */
    tether_lease *l = NULL;
    tether_lease *l4 = sim_pool_acquire(x.f.pool);
    assert_int_not_equal(tether_pool_acquire(x.f.pool, 1, &l, NULL), 0);
    tether_lease_release(l4);
    tether__pool_housekeep(x.f.pool);
    assert_true(metrics(x.f.pool).limit > 4);
    close_fixture(&x);
}

/* Grow to 16 at a 10 ms hold, then double the hold: the limit comes down
 * while the hold stays doubled, and never below the floor. */
static void test_shrinks_when_latency_doubles(void **state) {
    (void)state;
    fixture x;
    open_adaptive(&x, 3, 16, 0);
    assert_int_equal(grow(&x, 30), 16);
    int prev = 16, first = 0;
    for (int i = 0; i < 10; i++) {
        int now = window(&x, -1, 20);
        assert_true(now <= prev);
        if (!first && now < 16)
            first = i + 1;
        prev = now;
    }
    tether_pool_metrics m = metrics(x.f.pool);
    assert_true(first >= 1 && first <= 2); /* at once */
    assert_true(m.limit <= 8);
    assert_true(m.limit_down > 0);
    assert_true(m.hold_short_us >= 19000); /* the baseline follows slowly */
    assert_true(m.hold_long_us >= 10000 && m.hold_long_us <= 13000);
    /* Four times the hold: down to the floor (min 3), and no lower. */
    for (int i = 0; i < 30; i++)
        assert_true(window(&x, -1, 40) >= 3);
    m = metrics(x.f.pool);
    assert_int_equal(m.limit, 3);
    assert_int_equal(m.limit_min, 3);
    /* The leases above the limit were closed as released: the pool holds
     * the limit's worth, all in use. */
    assert_int_equal(m.total, 3);
    close_fixture(&x);
}

/* One window of quick leases (a burst of lookups) does not set the
 * baseline: back at the usual hold time, the limit stays where it was
 * (a baseline that took the least window mean had brought it to the floor
 * at the real server, under client load). */
static void test_one_quick_window(void **state) {
    (void)state;
    fixture x;
    open_adaptive(&x, 0, 16, 0);
    assert_int_equal(grow(&x, 30), 16);
    window(&x, -1, 0); /* held for no time at all */
    for (int i = 0; i < 20; i++)
        assert_true(window(&x, -1, 10) >= 14);
    close_fixture(&x);
}

/* The server refuses a connect as full (53300): the next pass brings the
 * limit to 3/4 of what the pool holds and keeps it from growing above
 * that for a while; the leases held stay with their holders, and the one
 * too many closes as it is released. */
static void test_shrinks_on_53300(void **state) {
    (void)state;
    fixture x;
    open_adaptive(&x, 0, 32, 8); /* the server admits 8 */
    for (int i = 0; i < 8; i++)  /* 4 -> 8 and on: the ninth is refused */
        window(&x, TETHER__MIN(metrics(x.f.pool).limit, 8), 10);
    tether_pool_metrics m = metrics(x.f.pool);
    assert_true(m.limit > 8);
    assert_int_equal(x.h.n, 8);
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire(x.f.pool, 1, &l, &err),
                     TETHER_ETIMEDOUT); /* refused, then waits for a release */
    assert_int_equal(metrics(x.f.pool).connect_failures, 1);
    tether__pool_housekeep(x.f.pool);
    m = metrics(x.f.pool);
    assert_int_equal(m.limit, 6); /* 8 held x 0.75 */
    assert_int_equal(m.limit_full, 1);
    assert_int_equal(m.total, 8); /* nothing taken from a holder */
    for (int i = 0; i < x.h.n; i++)
        assert_non_null(tether_lease_handle(x.h.l[i]));
    assert_int_equal(tether_sim_use(tether_lease_handle(x.h.l[0]), NULL), 0);
    sim_pool_advance_ms(&x.f, 10); /* held as long as the others */
    release_all(&x.h);
    m = metrics(x.f.pool);
    assert_int_equal(m.total, 6); /* two closed as released */
    assert_int_equal(m.idle, 6);
    assert_int_equal(m.closed_idle, 2);
    /* At the limit with the hold time steady: no growth above 6 while the
     * hold lasts (5 s), then it grows again. */
    for (int i = 0; i < 20; i++)
        assert_int_equal(window(&x, -1, 10), 6);
    sim_pool_advance_ms(&x.f, 5000);
    int grew = 0;
    for (int i = 0; i < 5; i++)
        grew |= window(&x, TETHER__MIN(metrics(x.f.pool).limit, 8), 10) > 6;
    assert_true(grew);
    close_fixture(&x);
}

/* 57P03 (the server is starting up or shutting down) counts the same. */
static void test_shrinks_on_57p03(void **state) {
    (void)state;
    fixture x;
    open_adaptive(&x, 0, 32, 0);
    int before = grow(&x, 4);
    assert_true(before > 4);
    sim_pool_advance_ms(&x.f, 10); /* held as long as in the windows */
    release_all(&x.h);
    tether_pool_evict_idle(x.f.pool);
    hold_up_to(&x, 4);
    tether_sim_fail_next_sqlstate(x.f.sim, 1, TETHER_ETHROTTLED,
                                  TETHER_CLASS_THROTTLED, "57P03");
    tether_lease *l = NULL;
    assert_int_not_equal(tether_pool_acquire(x.f.pool, 1, &l, NULL), 0);
    tether__pool_housekeep(x.f.pool);
    tether_pool_metrics m = metrics(x.f.pool);
    assert_int_equal(m.limit, 3); /* 4 held x 0.75 */
    assert_int_equal(m.limit_full, 1);
    /* A transition, not a size: no hold, it grows again at once. */
    assert_true(window(&x, -1, 10) > 3);
    close_fixture(&x);
}

/* A fleet without a proxy: 4 pools of at most 10 share a server that
 * admits 12. Each wants its whole ceiling; the first refusals bring them
 * below the server's limit, and in the second half of a minute (virtual)
 * refusals are rare and every pool still holds connections. */
#define FLEET 4

/* take_to_limit takes leases of p into h while h holds fewer than p's limit
 * and one comes within 1 ms (a refused connect ends it). */
static void take_to_limit(tether_pool *p, held *h) {
    tether_lease *l;
    while (h->n < metrics(p).limit && tether_pool_acquire(p, 1, &l, NULL) == 0)
        h->l[h->n++] = l;
}

static void test_fleet_settles(void **state) {
    (void)state;
    tether_vclock *vc = tether_vclock_create(1000 * MS);
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    so.clock = tether_vclock_clock(vc);
    so.max_connections = 12;
    tether_sim *sim = NULL;
    assert_int_equal(tether_sim_create(&sim, &so, NULL), 0);
    tether_pool *p[FLEET];
    held h[FLEET];
    for (int i = 0; i < FLEET; i++) {
        tether_pool_opts po;
        tether_pool_opts_init(&po);
        po.driver = tether_driver_sim();
        po.driver_ctx = sim;
        po.clock = so.clock;
        po.max_size = 10;
        po.limit = TETHER_POOL_LIMIT_ADAPTIVE;
        po.use_breaker = 0; /* a pool with none out retries at once */
        assert_int_equal(tether_pool_create(&p[i], &po, NULL), 0);
        h[i].n = 0;
    }
    uint64_t refused_first = 0, refused_second = 0;
    int least_held = 100;
    for (int round = 0; round < 600; round++) { /* 100 ms each */
        for (int i = 0; i < FLEET; i++) {       /* each takes what it may */
            take_to_limit(p[i], &h[i]);
            if (round >= 300)
                least_held = TETHER__MIN(least_held, h[i].n);
        }
        tether_vclock_advance(vc, 10 * MS);
        for (int i = 0; i < FLEET; i++)
            release_all(&h[i]);
        for (int i = 0; i < FLEET; i++) /* held again through the pass */
            take_to_limit(p[i], &h[i]);
        tether_vclock_advance(vc, 90 * MS);
        uint64_t refused = 0;
        for (int i = 0; i < FLEET; i++) {
            tether__pool_housekeep(p[i]);
            refused += metrics(p[i]).connect_failures;
        }
        if (round == 299)
            refused_first = refused;
        if (round == 599)
            refused_second = refused - refused_first;
        tether_vclock_advance(vc, 10 * MS); /* held as long next round */
        for (int i = 0; i < FLEET; i++)
            release_all(&h[i]);
    }
    int sum = 0;
    char each[64] = "";
    for (int i = 0; i < FLEET; i++) {
        sum += metrics(p[i]).limit;
        snprintf(each + strlen(each), sizeof(each) - strlen(each), " %d",
                 metrics(p[i]).limit);
    }
    printf("fleet: refusals %llu in the first 30 s, %llu in the second; "
           "limits%s (sum %d); the least held in the second half %d\n",
           (unsigned long long)refused_first,
           (unsigned long long)refused_second, each, sum, least_held);
    assert_true(refused_first >= 1);
    assert_true(refused_second <= refused_first);
    assert_true(refused_second <= 2 * FLEET);
    assert_true(least_held >= 1); /* every pool is served */
    for (int i = 0; i < FLEET; i++)
        tether_pool_destroy(p[i]);
    tether_sim_destroy(sim);
    tether_vclock_destroy(vc);
}

/* A shrink with callers queued: the first waiter (its connect refused as
 * full) is served first, the second next, the excess closes as released,
 * and a waiter with a short deadline times out at it. */
typedef struct waiter_arg {
    tether_pool *pool;
    int64_t timeout_ms;
    int rc;
    int order; /* the order it was served in, 0: not served */
    int64_t waited_ms;
    tether_lease *l;
} waiter_arg;

static atomic_int served;

static void *waiter_main(void *arg) {
    waiter_arg *w = arg;
    int64_t t0 = now_ms();
    w->rc = tether_pool_acquire(w->pool, w->timeout_ms, &w->l, NULL);
    w->waited_ms = now_ms() - t0;
    if (w->rc == 0)
        w->order = atomic_fetch_add(&served, 1) + 1;
    return NULL;
}

static void wait_waiters(tether_pool *p, int n) {
    for (int i = 0; i < 5000 && tether__pool_inspect_waiters(p) < n; i++)
        sleep_ms(1);
    assert_int_equal(tether__pool_inspect_waiters(p), n);
}

static void test_waiters_fifo_and_deadlines(void **state) {
    (void)state;
    fixture x;
    open_adaptive(&x, 0, 8, 3); /* the server admits 3 */
    hold_up_to(&x, 3); /* the limit is 4: the next connect is refused */
    atomic_store(&served, 0);
    waiter_arg a = {x.f.pool, 5000, -1, 0, 0, NULL};
    waiter_arg b = a, c = a;
    c.timeout_ms = 150;
    pthread_t ta, tb, tc;
    pthread_create(&ta, NULL, waiter_main, &a);
    wait_waiters(x.f.pool, 1); /* refused, waits for a release */
    tether__pool_housekeep(x.f.pool);
    assert_int_equal(metrics(x.f.pool).limit, 2); /* 3 x 0.75, rounded */
    pthread_create(&tb, NULL, waiter_main, &b);
    wait_waiters(x.f.pool, 2);
    pthread_create(&tc, NULL, waiter_main, &c);
    wait_waiters(x.f.pool, 3);
    assert_int_equal(tether_lease_release(x.h.l[0]), 0); /* closed: 3 > 2 */
    assert_int_equal(metrics(x.f.pool).total, 2);
    assert_int_equal(tether_lease_release(x.h.l[1]), 0); /* to a */
    pthread_join(ta, NULL);
    assert_int_equal(a.rc, 0);
    assert_int_equal(a.order, 1);
    pthread_join(tc, NULL); /* times out at its deadline */
    assert_int_equal(c.rc, TETHER_ETIMEDOUT);
    assert_true(c.waited_ms >= 140 && c.waited_ms < 1000);
    assert_int_equal(tether_lease_release(x.h.l[2]), 0); /* to b */
    pthread_join(tb, NULL);
    assert_int_equal(b.rc, 0);
    assert_int_equal(b.order, 2);
    tether_pool_metrics m = metrics(x.f.pool);
    assert_int_equal(m.total, 2);
    assert_int_equal(m.in_use, 2);
    tether_lease_release(a.l);
    tether_lease_release(b.l);
    sim_pool_close(&x.f); /* x.h's leases were released one by one above */
}

/* tether_pool_resize sets an adaptive pool's floor and ceiling. */
static void test_resize_bounds(void **state) {
    (void)state;
    fixture x;
    open_adaptive(&x, 0, 32, 0);
    assert_int_equal(grow(&x, 40), 32);
    release_all(&x.h);
    assert_int_equal(tether_pool_resize(x.f.pool, 2, 10, NULL), 0);
    tether_pool_metrics m = metrics(x.f.pool);
    assert_int_equal(m.limit, 10);
    assert_int_equal(m.limit_max, 10);
    assert_int_equal(m.limit_min, 2);
    assert_true(m.total <= 10);
    for (int i = 0; i < 10; i++)
        assert_true(window(&x, -1, 10) <= 10);
    close_fixture(&x);
}

/* The keyword: fixed (the default), adaptive, and a bad value named. */
static void test_keyword(void **state) {
    (void)state;
    tether__pool_keys k;
    tether_error err = {0};
    assert_int_equal(tether__pool_keys_parse("host=h", &k, &err), 0);
    assert_int_equal(k.o.limit, TETHER_POOL_LIMIT_FIXED);
    tether__pool_keys_free(&k);
    assert_int_equal(
        tether__pool_keys_parse("host=h tether_pool_limit=adaptive", &k, &err),
        0);
    assert_int_equal(k.o.limit, TETHER_POOL_LIMIT_ADAPTIVE);
    tether__pool_keys_free(&k);
    assert_int_equal(
        tether__pool_keys_parse("host=h tether_pool_limit=elastic", &k, &err),
        TETHER_ESPEC);
    assert_non_null(strstr(err.message, "tether_pool_limit"));
    assert_non_null(strstr(err.message, "elastic"));
    tether__pool_keys_free(&k);
    /* The options struct: a value out of range is refused by name. */
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    assert_int_equal(po.limit, TETHER_POOL_LIMIT_FIXED);
    po.driver = tether_driver_sim();
    po.limit = 7;
    tether_pool *p = NULL;
    assert_int_equal(tether_pool_create(&p, &po, &err), TETHER_EINVAL);
    assert_non_null(strstr(err.message, "limit"));
}

/* A fixed pool: the limit is max_size, no samples, no changes. */
static void test_fixed_reports_max(void **state) {
    (void)state;
    fixture x = {0};
    tether_sim_opts so;
    tether_pool_opts po;
    sim_pool_opts(&x.f, 1000, &so, &po);
    po.max_size = 5;
    sim_pool_open(&x.f, &so, &po);
    for (int i = 0; i < 10; i++)
        window(&x, 5, 10);
    tether_pool_metrics m = metrics(x.f.pool);
    assert_int_equal(m.limit_adaptive, 0);
    assert_int_equal(m.limit, 5);
    assert_int_equal(m.limit_max, 5);
    assert_int_equal(m.hold_short_us, 0);
    assert_int_equal(m.limit_up + m.limit_down + m.limit_full, 0);
    static char buf[32768];
    tether_pool_metrics_prometheus(x.f.pool, buf, sizeof(buf));
    assert_non_null(strstr(buf, "tether_pool_limit{pool=\"pool-"));
    assert_non_null(strstr(buf, "mode=\"fixed\"} 5\n"));
    close_fixture(&x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grows_to_max),
        cmocka_unit_test(test_no_growth_unbound),
        cmocka_unit_test(test_no_release_no_change),
        cmocka_unit_test(test_waiter_counts_as_bound),
        cmocka_unit_test(test_shrinks_when_latency_doubles),
        cmocka_unit_test(test_one_quick_window),
        cmocka_unit_test(test_shrinks_on_53300),
        cmocka_unit_test(test_shrinks_on_57p03),
        cmocka_unit_test(test_waiters_fifo_and_deadlines),
        cmocka_unit_test(test_fleet_settles),
        cmocka_unit_test(test_resize_bounds),
        cmocka_unit_test(test_keyword),
        cmocka_unit_test(test_fixed_reports_max),
    };
    return cmocka_run_group_tests_name("adaptive", tests, NULL, NULL);
}
