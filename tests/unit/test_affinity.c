/* test_affinity.c - transactions across acquires (docs/pool.md,
 * "Transactions across acquires") on the sim driver: a keyed release with
 * its transaction open reserves the connection to the key; the key gets it
 * back without queueing; nobody else ever does; commit, the bound, clear,
 * close and a broken connection end the reservation; a keyless release
 * with a transaction open warns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../support/logbuf.h"
#include "../support/sim_pool.h"
#include "housekeeper.h"
#include "pool_inspect.h"

static tether_lease *acquire_key(tether_pool *p, uint64_t key) {
    tether_lease *l = NULL;
    tether_error err = {0};
    if (tether_pool_acquire_key(p, key, 1000, &l, &err) != 0)
        fail_msg("tether_pool_acquire_key: %s", err.message);
    return l;
}

static uint64_t conn_id(const tether_lease *l) {
    return tether_sim_conn_id(tether_lease_handle(l));
}

static tether_pool_metrics metrics(tether_pool *p) {
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    return m;
}

/* Reserve: key 7's transaction, left open, keeps its connection. */
static uint64_t reserve(tether_pool *p, uint64_t key) {
    tether_lease *l = acquire_key(p, key);
    uint64_t id = conn_id(l);
    assert_int_equal(tether_sim_txn(tether_lease_handle(l), 1), 0);
    assert_int_equal(tether_lease_release(l), 0);
    return id;
}

static void open_pool(sim_pool *f, int max, logbuf *log) {
    tether_sim_opts so;
    tether_pool_opts po;
    sim_pool_opts(f, 1000, &so, &po);
    po.max_size = max;
    po.txn_reserve_timeout_ms = 5000;
    if (log) {
        po.log = logbuf_capture;
        po.log_ctx = log;
    }
    sim_pool_open(f, &so, &po);
}

static void test_reserve_and_take_back(void **state) {
    (void)state;
    sim_pool f;
    open_pool(&f, 2, NULL);
    uint64_t id = reserve(f.pool, 7);
    tether_pool_metrics m = metrics(f.pool);
    assert_int_equal(m.txn_reserved, 1);
    assert_int_equal(m.txn_reservations, 1);
    assert_int_equal(m.in_use, 1);
    /* Others get another connection, however often they come. */
    for (int i = 0; i < 3; i++) {
        tether_lease *o = sim_pool_acquire(f.pool);
        assert_true(conn_id(o) != id);
        tether_lease_release(o);
        o = acquire_key(f.pool, 8); /* another key: no reservation */
        assert_true(conn_id(o) != id);
        tether_lease_release(o);
    }
    /* The key gets its own back, still in its transaction. */
    tether_lease *l = acquire_key(f.pool, 7);
    assert_int_equal(conn_id(l), id);
    assert_int_equal(metrics(f.pool).txn_reserved, 0);
    tether_lease_release(l); /* still open: reserved again */
    assert_int_equal(metrics(f.pool).txn_reserved, 1);
    l = acquire_key(f.pool, 7);
    assert_int_equal(conn_id(l), id);
    /* Commit: the release ends the reservation, the connection is
     * anyone's. */
    assert_int_equal(tether_sim_txn(tether_lease_handle(l), 0), 0);
    tether_lease_release(l);
    m = metrics(f.pool);
    assert_int_equal(m.txn_reserved, 0);
    assert_int_equal(m.txn_reservations, 2);
    assert_int_equal(m.in_use, 0);
    assert_int_equal(m.idle, 2);
    assert_int_equal(m.txn_rolled_back, 0);
    /* A stale keyed lease is refused like any other. */
    assert_int_equal(tether_lease_release(l), TETHER_EINVAL);
    /* Key 0 is a plain acquire. */
    tether_lease *z = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire_key(f.pool, 0, 100, &z, &err), 0);
    assert_int_equal(tether_lease_release(z), 0);
    sim_pool_close(&f);
}

typedef struct waiter {
    tether_pool *p;
    int64_t timeout_ms;
    int rc;
    uint64_t id;
    tether_error err;
} waiter;

static void *wait_main(void *arg) {
    waiter *w = arg;
    tether_lease *l = NULL;
    w->rc = tether_pool_acquire(w->p, w->timeout_ms, &l, &w->err);
    if (w->rc == 0) {
        w->id = conn_id(l);
        tether_lease_release(l);
    }
    return NULL;
}

/* Every connection reserved: a keyless caller waits and times out with a
 * message that says why; the key's holder gets its own at once meanwhile;
 * its commit hands the connection to the waiter. */
static void test_all_reserved(void **state) {
    (void)state;
    sim_pool f;
    open_pool(&f, 2, NULL);
    uint64_t id7 = reserve(f.pool, 7);
    reserve(f.pool, 9);
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire(f.pool, 100, &l, &err),
                     TETHER_ETIMEDOUT);
    if (!strstr(err.message,
                "2 of 2 connections are reserved by open transactions"))
        fail_msg("message: %s", err.message);
    /* A key without a reservation queues like anyone. */
    assert_int_equal(tether_pool_acquire_key(f.pool, 11, 50, &l, &err),
                     TETHER_ETIMEDOUT);
    waiter w = {f.pool, 5000, 1, 0, {0}};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_main, &w), 0);
    while (tether__pool_inspect_waiters(f.pool) < 1)
        usleep(1000);
    /* The key's holder never queues: a 0 timeout is enough. */
    assert_int_equal(tether_pool_acquire_key(f.pool, 7, 0, &l, &err), 0);
    assert_int_equal(conn_id(l), id7);
    assert_int_equal(tether__pool_inspect_waiters(f.pool), 1);
    tether_sim_txn(tether_lease_handle(l), 0); /* commit */
    tether_lease_release(l);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    assert_int_equal(w.id, id7);
    sim_pool_close(&f); /* 9's reservation: closed, rolled back */
}

/* The bound: the housekeeper rolls an overdue reservation back, warns
 * with the key and the acquire site, and the key's next acquire fails
 * once. */
static void test_bound_expires(void **state) {
    (void)state;
    sim_pool f;
    logbuf log = {{0}, 0};
    open_pool(&f, 2, &log);
    uint64_t id = reserve(f.pool, 42);
    sim_pool_advance_ms(&f, 4000);
    tether__pool_housekeep(f.pool);
    assert_int_equal(metrics(f.pool).txn_reserved, 1); /* not yet */
    sim_pool_advance_ms(&f, 1500);
    tether__pool_housekeep(f.pool);
    tether_pool_metrics m = metrics(f.pool);
    assert_int_equal(m.txn_reserved, 0);
    assert_int_equal(m.txn_expired, 1);
    assert_int_equal(m.idle, 1); /* rolled back and returned */
    assert_int_equal(log.warns, 1);
    if (!strstr(log.text, "key 42") || !strstr(log.text, "test_affinity.c:") ||
        !strstr(log.text, "rolled back"))
        fail_msg("log: %s", log.text);
    /* The returned connection is clean: anyone may have it. */
    tether_lease *l = sim_pool_acquire(f.pool);
    assert_int_equal(conn_id(l), id);
    tether_lease_release(l);
    assert_int_equal(metrics(f.pool).txn_rolled_back, 0);
    /* The key learns its transaction is gone, once. */
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire_key(f.pool, 42, 100, &l, &err),
                     TETHER_EBROKEN);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    if (!strstr(err.message, "tether_txn_reserve_timeout"))
        fail_msg("message: %s", err.message);
    l = acquire_key(f.pool, 42);
    tether_lease_release(l);
    sim_pool_close(&f);
}

/* Clear closes reserved connections (the server rolls back); the key's
 * next acquire says so. Close does too, and does not wait for them. */
static void test_clear_and_close(void **state) {
    (void)state;
    sim_pool f;
    open_pool(&f, 3, NULL);
    reserve(f.pool, 1);
    reserve(f.pool, 2);
    tether_pool_clear(f.pool);
    tether_pool_metrics m = metrics(f.pool);
    assert_int_equal(m.txn_reserved, 0);
    assert_int_equal(m.closed_cleared, 2);
    assert_int_equal(m.txn_lost, 2);
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire_key(f.pool, 1, 100, &l, &err),
                     TETHER_EBROKEN);
    if (!strstr(err.message, "cleared"))
        fail_msg("message: %s", err.message);
    reserve(f.pool, 3);
    tether_sim_stats st;
    tether_sim_stats_get(f.sim, &st);
    assert_int_equal(st.open, 1);
    assert_int_equal(tether_pool_close(f.pool, 1000, &err), 0);
    tether_sim_stats_get(f.sim, &st);
    assert_int_equal(st.open, 0);
    assert_int_equal(metrics(f.pool).txn_reserved, 0);
    sim_pool_close(&f);
}

/* A reserved connection that broke is discarded when its key comes back,
 * which is told its transaction is gone. */
static void test_broken_reservation(void **state) {
    (void)state;
    sim_pool f;
    open_pool(&f, 2, NULL);
    reserve(f.pool, 5);
    tether_sim_break_all(f.sim);
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire_key(f.pool, 5, 100, &l, &err),
                     TETHER_EBROKEN);
    if (!strstr(err.message, "the transaction's connection was lost"))
        fail_msg("message: %s", err.message);
    tether_pool_metrics m = metrics(f.pool);
    assert_int_equal(m.txn_lost, 1);
    assert_int_equal(m.txn_reserved, 0);
    assert_int_equal(m.total, 0);
    l = acquire_key(f.pool, 5); /* afresh */
    tether_lease_release(l);
    sim_pool_close(&f);
}

/* Without a key, an open transaction is rolled back as before, and
 * warned about, at most once a second; the warning names the acquire site
 * when leak detection records it, else says how to have it. */
static void test_keyless_open_txn_warns(void **state) {
    (void)state;
    sim_pool f;
    logbuf log = {{0}, 0};
    open_pool(&f, 2, &log);
    tether_lease *l0 = sim_pool_acquire(f.pool);
    tether_sim_txn(tether_lease_handle(l0), 1);
    tether_lease_release(l0);
    assert_int_equal(log.warns, 1);
    if (!strstr(log.text, "acquire site not recorded: set "
                          "tether_leak_threshold"))
        fail_msg("log: %s", log.text);
    sim_pool_close(&f);
    memset(&log, 0, sizeof(log));
    tether_sim_opts so;
    tether_pool_opts po;
    sim_pool_opts(&f, 1000, &so, &po);
    po.max_size = 2;
    po.leak_threshold_ms = 60000;
    po.log = logbuf_capture;
    po.log_ctx = &log;
    sim_pool_open(&f, &so, &po);
    for (int round = 0; round < 3; round++) {
        tether_lease *l = sim_pool_acquire(f.pool);
        tether_sim_txn(tether_lease_handle(l), 1);
        tether_lease_release(l);
        if (round == 1)
            sim_pool_advance_ms(&f, 1100);
    }
    tether_pool_metrics m = metrics(f.pool);
    assert_int_equal(m.txn_rolled_back, 3);
    assert_int_equal(m.txn_reserved, 0);
    assert_int_equal(m.idle, 1); /* rolled back, kept */
    assert_int_equal(log.warns, 2);
    if (!strstr(log.text, "acquired at") || !strstr(log.text, "sim_pool.h:") ||
        !strstr(log.text, "1 more"))
        fail_msg("log: %s", log.text);
    /* A committed transaction is not warned about. */
    sim_pool_advance_ms(&f, 1100);
    tether_lease *l = sim_pool_acquire(f.pool);
    tether_sim_txn(tether_lease_handle(l), 1);
    tether_sim_txn(tether_lease_handle(l), 0);
    tether_lease_release(l);
    assert_int_equal(log.warns, 2);
    sim_pool_close(&f);
}

/* A second lease of a key already reserved: the first reservation stays,
 * the second transaction is rolled back. */
static void test_one_lease_per_key(void **state) {
    (void)state;
    sim_pool f;
    open_pool(&f, 3, NULL);
    tether_lease *a = acquire_key(f.pool, 3);
    tether_lease *b = acquire_key(f.pool, 3);
    uint64_t ida = conn_id(a);
    assert_true(ida != conn_id(b));
    tether_sim_txn(tether_lease_handle(a), 1);
    tether_sim_txn(tether_lease_handle(b), 1);
    tether_lease_release(a);
    tether_lease_release(b);
    tether_pool_metrics m = metrics(f.pool);
    assert_int_equal(m.txn_reserved, 1);
    assert_int_equal(m.txn_rolled_back, 1);
    a = acquire_key(f.pool, 3);
    assert_int_equal(conn_id(a), ida);
    tether_sim_txn(tether_lease_handle(a), 0);
    tether_lease_release(a);
    /* A keyed lease discarded: its reservation never happens. */
    a = acquire_key(f.pool, 4);
    tether_sim_txn(tether_lease_handle(a), 1);
    assert_int_equal(tether_lease_discard(a), 0);
    a = acquire_key(f.pool, 4);
    assert_int_equal(tether_lease_release(a), 0);
    assert_int_equal(metrics(f.pool).txn_reserved, 0);
    sim_pool_close(&f);
}

/* A driver that cannot tell an open transaction: a key has no effect,
 * the transaction is rolled back on release as without one. */
static void test_driver_without_hook(void **state) {
    (void)state;
    static tether_driver plain;
    plain = *tether_driver_sim();
    plain.in_transaction = NULL;
    sim_pool f;
    tether_sim_opts so;
    tether_pool_opts po;
    sim_pool_opts(&f, 1000, &so, &po);
    tether_error err = {0};
    assert_int_equal(tether_sim_create(&f.sim, &so, &err), 0);
    po.driver = &plain;
    po.driver_ctx = f.sim;
    po.max_size = 1;
    assert_int_equal(tether_pool_create(&f.pool, &po, &err), 0);
    tether_lease *l = acquire_key(f.pool, 7);
    tether_sim_txn(tether_lease_handle(l), 1);
    tether_lease_release(l);
    tether_pool_metrics m = metrics(f.pool);
    assert_int_equal(m.txn_reserved, 0);
    assert_int_equal(m.txn_rolled_back, 1);
    assert_int_equal(m.idle, 1);
    sim_pool_close(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_and_take_back),
        cmocka_unit_test(test_all_reserved),
        cmocka_unit_test(test_bound_expires),
        cmocka_unit_test(test_clear_and_close),
        cmocka_unit_test(test_broken_reservation),
        cmocka_unit_test(test_keyless_open_txn_warns),
        cmocka_unit_test(test_one_lease_per_key),
        cmocka_unit_test(test_driver_without_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
