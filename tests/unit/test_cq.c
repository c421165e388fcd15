/* test_cq.c - the non-blocking acquire (src/pool/cq.c, docs/evloop.md) over
 * the sim driver on the real clock: completion at once and after a
 * release, the descriptor's readiness (and the loop thread's posts
 * without it), first come first served across blocking and non-blocking
 * waiters, the deadline kept by the pool's tick,
 * cancel (queued and posted), the queue bound, creation on a worker
 * thread, destroying the cq or the pool with acquires pending, and a
 * threaded stress test with an ownership marker (no lease handed twice,
 * exactly one completion per start). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../support/clock.h"
#include "../support/sim_pool.h"
#include "../support/thread_time.h"
#include "pool_inspect.h"
#include "tether.h"
#include "tether_sim.h"

/* A pool on the sim driver (../support/sim_pool.h, on the real clock) and
 * a completion queue. */
typedef struct fixture {
    sim_pool sp;
    tether_sim *sim;   /* sp's */
    tether_pool *pool; /* sp's */
    tether_cq *cq;
} fixture;

static void setup_opts(fixture *f, int max, int64_t latency_ms,
                       int max_waiters) {
    memset(f, 0, sizeof(*f));
    tether_sim_opts so;
    tether_pool_opts po;
    sim_pool_opts(&f->sp, -1, &so, &po);
    so.connect_latency_ms = latency_ms;
    po.max_size = max;
    po.barge_limit_us = 0; /* strict FIFO: the order is under test */
    if (max_waiters > 0)
        po.max_waiters = max_waiters;
    sim_pool_open(&f->sp, &so, &po);
    f->sim = f->sp.sim;
    f->pool = f->sp.pool;
    f->cq = tether_cq_create(NULL);
    assert_non_null(f->cq);
}

static void setup(fixture *f, int max) {
    setup_opts(f, max, 0, 0);
}

static void teardown(fixture *f) {
    tether_cq_destroy(f->cq);
    sim_pool_close(&f->sp);
}

/* Whether the cq's descriptor turns readable within ms. */
static int readable(tether_cq *cq, int ms) {
    struct pollfd pfd = {tether_cq_fd(cq), POLLIN, 0};
    return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN);
}

/* Wait (up to 2 s) for the fd and take one completion. The fd stays
 * readable until a take finds the queue empty (tether_cq_fd): a wake may
 * find nothing, and the wait goes on. */
static void next_one(tether_cq *cq, tether_completion *c) {
    int64_t until = now_ms() + 2000;
    int rc = TETHER_EAGAIN;
    while (rc == TETHER_EAGAIN && now_ms() < until)
        if (readable(cq, (int)(until - now_ms())))
            rc = tether_cq_next(cq, c);
    assert_int_equal(rc, 0);
}

/* wait_ticks returns once the housekeeper's ticker has published the time
 * n more times. Each tick publishes it, then runs every pool's tick (which
 * posts the queued acquires past their deadline, tether__cq_expire), so
 * n - 1 whole ticks have run since the call. */
static void wait_ticks(int n) {
    int64_t last = atomic_load(&tether__ticker);
    for (int i = 0, seen = 0; seen < n; i++) {
        if (i == 10000)
            fail_msg("the housekeeper did not tick %d times in 10 s", n);
        usleep(1000);
        int64_t t = atomic_load(&tether__ticker);
        seen += t != last;
        last = t;
    }
}

/* await_expiry waits for the completion of a queued acquire of ms started
 * between before and after (now_ms readings): never posted before its
 * deadline (seen readable only once the clock is past before + ms), and
 * posted by the first whole tick after it: once the deadline has passed,
 * two whole ticks later the completion is there. Judged on the ticker's
 * count, not on how soon this thread or the ticker's gets a CPU
 * (docs/testing.md, "Time in the tests"). */
static void await_expiry(tether_cq *cq, int64_t before, int64_t after,
                         int64_t ms) {
    for (;;) {
        int ready = readable(cq, 0);
        int64_t now = now_ms();
        if (ready) {
            if (now - before < ms)
                fail_msg("posted %lld ms after the start: before its %lld ms "
                         "deadline",
                         (long long)(now - before), (long long)ms);
            return;
        }
        if (now > after + ms)
            break; /* the deadline has passed */
        usleep(1000);
    }
    wait_ticks(3);
    if (!readable(cq, 0))
        fail_msg("not posted by the first tick after its %lld ms deadline",
                 (long long)ms);
}

static void wait_waiters(tether_pool *p, int n) {
    for (int i = 0; i < 2000 && tether__pool_inspect_waiters(p) != n; i++)
        usleep(1000);
    assert_int_equal(tether__pool_inspect_waiters(p), n);
}

static void test_immediate(void **state) {
    (void)state;
    fixture f;
    setup(&f, 2);
    int u = 7;
    uint64_t t = 0;
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 1000, &u, &t, NULL), 0);
    assert_true(t > 0);
    tether_completion c;
    next_one(f.cq, &c);
    assert_int_equal(c.rc, 0);
    assert_ptr_equal(c.user, &u);
    assert_true(c.ticket == t);
    assert_ptr_equal(c.pool, f.pool);
    assert_non_null(tether_lease_handle(c.lease));
    /* readable until a take finds it empty; then quiet, nothing ready,
     * nothing pending but the lease */
    assert_true(readable(f.cq, 0));
    assert_int_equal(tether_cq_next(f.cq, &c), TETHER_EAGAIN);
    assert_false(readable(f.cq, 0));
    assert_int_equal(tether_cq_pending(f.cq), 0);
    assert_int_equal(tether_lease_release(c.lease), 0);
    teardown(&f);
}

/* tether_cq_loop_thread: completions posted on the bound thread (an
 * acquire served at once, a release handing its connection over) leave the
 * descriptor quiet, since that loop takes them before it waits; one posted
 * on another thread wakes it; unbinding with one waiting wakes it. */
static void *release_elsewhere(void *arg) {
    tether_lease_release(arg);
    return NULL;
}

static tether_lease *take_quiet(tether_cq *cq) {
    tether_completion c;
    assert_false(readable(cq, 0));
    assert_int_equal(tether_cq_next(cq, &c), 0);
    assert_int_equal(c.rc, 0);
    return c.lease;
}

static void test_loop_thread(void **state) {
    (void)state;
    fixture f;
    setup(&f, 1);
    sim_pool_warm(&f.sp, 1);
    tether_cq_loop_thread(f.cq, 1);
    tether_completion c;
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 1000, NULL, NULL, NULL), 0);
    tether_lease *l = take_quiet(f.cq); /* served at once */
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 1000, NULL, NULL, NULL), 0);
    assert_int_equal(tether_cq_next(f.cq, &c), TETHER_EAGAIN); /* queued */
    tether_lease_release(l);
    l = take_quiet(f.cq); /* handed over by a release on this thread */
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 1000, NULL, NULL, NULL), 0);
    pthread_t t;
    pthread_create(&t, NULL, release_elsewhere, l);
    pthread_join(t, NULL);
    next_one(f.cq, &c); /* handed over on another thread: woken */
    assert_int_equal(c.rc, 0);
    assert_int_equal(tether_cq_next(f.cq, &c), TETHER_EAGAIN);
    assert_false(readable(f.cq, 0));
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 1000, NULL, NULL, NULL), 0);
    tether_lease_release(c.lease);
    assert_false(readable(f.cq, 0));
    tether_cq_loop_thread(f.cq, 0); /* one waits unsignaled: woken now */
    assert_true(readable(f.cq, 0));
    assert_int_equal(tether_cq_next(f.cq, &c), 0);
    tether_lease_release(c.lease);
    teardown(&f);
}

/* tether_cq_loop_notify: a post on the bound thread calls the notify
 * function instead of waking the descriptor, once until a take finds the
 * queue empty; a post on another thread wakes the descriptor and does not
 * call it; tether_cq_loop_thread(cq, 0) forgets it. */
static void count_notify(void *arg) {
    ++*(int *)arg;
}

static void test_loop_notify(void **state) {
    (void)state;
    fixture f;
    setup(&f, 2);
    sim_pool_warm(&f.sp, 2);
    int told = 0;
    tether_cq_loop_notify(f.cq, count_notify, &told);
    tether_cq_loop_notify(f.cq, NULL, &told); /* ignored */
    tether_completion c;
    for (int i = 0; i < 2; i++) /* both served at once: told once */
        assert_int_equal(
            tether_pool_acquire_start(f.pool, f.cq, 1000, NULL, NULL, NULL), 0);
    assert_int_equal(told, 1);
    tether_lease *a = take_quiet(f.cq), *b = take_quiet(f.cq);
    assert_int_equal(tether_cq_next(f.cq, &c), TETHER_EAGAIN); /* empty */
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 1000, NULL, NULL, NULL), 0);
    assert_int_equal(told, 1); /* queued: nothing posted */
    tether_lease_release(a);
    assert_int_equal(told, 2); /* handed over on this thread */
    a = take_quiet(f.cq);
    assert_int_equal(tether_cq_next(f.cq, &c), TETHER_EAGAIN);
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 1000, NULL, NULL, NULL), 0);
    pthread_t t;
    pthread_create(&t, NULL, release_elsewhere, b);
    pthread_join(t, NULL);
    assert_int_equal(told, 2); /* another thread: the descriptor instead */
    next_one(f.cq, &c);
    assert_int_equal(c.rc, 0);
    b = c.lease;
    assert_int_equal(tether_cq_next(f.cq, &c), TETHER_EAGAIN);
    assert_false(readable(f.cq, 0));
    tether_cq_loop_thread(f.cq, 0);
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 1000, NULL, NULL, NULL), 0);
    tether_lease_release(a);
    assert_int_equal(told, 2); /* forgotten: woken */
    next_one(f.cq, &c);
    tether_lease_release(c.lease);
    tether_lease_release(b);
    teardown(&f);
}

static void test_bad_args(void **state) {
    (void)state;
    fixture f;
    setup(&f, 1);
    tether_error err;
    assert_int_equal(tether_pool_acquire_start(NULL, f.cq, 0, NULL, NULL, &err),
                     TETHER_EINVAL);
    assert_int_equal(
        tether_pool_acquire_start(f.pool, NULL, 0, NULL, NULL, &err),
        TETHER_EINVAL);
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, -2, NULL, NULL, &err),
        TETHER_EINVAL);
    assert_int_equal(tether_cq_pending(f.cq), 0);
    assert_int_equal(tether_cq_next(f.cq, NULL), TETHER_EINVAL);
    assert_int_equal(tether_cq_fd(NULL), -1);
    tether_cq_destroy(NULL);
    teardown(&f);
}

static void test_completion_after_release(void **state) {
    (void)state;
    fixture f;
    setup(&f, 1);
    tether_lease *l;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &l, NULL), 0);
    void *h = tether_lease_handle(l);
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 5000, NULL, NULL, NULL), 0);
    assert_false(readable(f.cq, 50));
    tether_completion c;
    assert_int_equal(tether_cq_next(f.cq, &c), TETHER_EAGAIN);
    assert_int_equal(tether_cq_pending(f.cq), 1);
    assert_int_equal(tether_lease_release(l), 0);
    next_one(f.cq, &c);
    assert_int_equal(c.rc, 0);
    assert_ptr_equal(tether_lease_handle(c.lease), h);
    assert_int_equal(tether_lease_release(l), TETHER_EINVAL); /* stale */
    assert_int_equal(tether_lease_release(c.lease), 0);
    teardown(&f);
}

/* ---- FIFO across blocking and non-blocking waiters ----------------------- */

typedef struct fifo_ctx {
    tether_pool *pool;
    char name;
    char *order;
    _Atomic int *n;
} fifo_ctx;

static void *blocking_waiter(void *arg) {
    fifo_ctx *c = arg;
    tether_lease *l;
    assert_int_equal(tether_pool_acquire(c->pool, 5000, &l, NULL), 0);
    c->order[atomic_fetch_add(c->n, 1)] = c->name;
    usleep(2000);
    tether_lease_release(l);
    return NULL;
}

static void test_fifo_mixed(void **state) {
    (void)state;
    fixture f;
    setup(&f, 1);
    tether_lease *l;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &l, NULL), 0);
    const char *arrivals = "AbCdEfG"; /* upper case: non-blocking */
    char order[8] = {0};
    _Atomic int n = 0;
    fifo_ctx ctx[7];
    pthread_t th[7];
    int nth = 0;
    for (int i = 0; arrivals[i]; i++) {
        ctx[i] = (fifo_ctx){f.pool, arrivals[i], order, &n};
        if (arrivals[i] >= 'a')
            assert_int_equal(
                pthread_create(&th[nth++], NULL, blocking_waiter, &ctx[i]), 0);
        else
            assert_int_equal(tether_pool_acquire_start(f.pool, f.cq, 5000,
                                                       &ctx[i], NULL, NULL),
                             0);
        wait_waiters(f.pool, i + 1);
    }
    tether_lease_release(l);
    int64_t until = now_ms() + 5000;
    while (atomic_load(&n) < 7 && now_ms() < until) {
        tether_completion c;
        if (!readable(f.cq, 50))
            continue;
        while (tether_cq_next(f.cq, &c) == 0) {
            assert_int_equal(c.rc, 0);
            fifo_ctx *x = c.user;
            order[atomic_fetch_add(&n, 1)] = x->name;
            usleep(2000);
            tether_lease_release(c.lease);
        }
    }
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    assert_string_equal(order, arrivals);
    teardown(&f);
}

/* ---- deadline, cancel, queue bound --------------------------------------- */

static void test_deadline(void **state) {
    (void)state;
    fixture f;
    setup(&f, 1);
    tether_lease *l;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &l, NULL), 0);
    int64_t t0 = now_ms();
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 60, NULL, NULL, NULL), 0);
    /* never early; by the first 10 ms tick after the deadline */
    await_expiry(f.cq, t0, now_ms(), 60);
    tether_completion c;
    next_one(f.cq, &c);
    int64_t took = now_ms() - t0;
    assert_int_equal(c.rc, TETHER_ETIMEDOUT);
    assert_int_equal(c.err.code, TETHER_ETIMEDOUT);
    assert_null(c.lease);
    assert_true(took >= 60);
    assert_int_equal(tether__pool_inspect_waiters(f.pool), 0);
    tether_pool_metrics m;
    tether_pool_metrics_get(f.pool, &m);
    assert_true(m.timeouts == 1);
    /* the queue goes on: a later start gets the connection on release */
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 1000, NULL, NULL, NULL), 0);
    tether_lease_release(l);
    next_one(f.cq, &c);
    assert_int_equal(c.rc, 0);
    tether_lease_release(c.lease);
    teardown(&f);
}

/* A short deadline behind a long one still fires on time (the tick walks
 * the queue only once its earliest deadline has come), and the others
 * keep their places. */
static void test_deadline_mixed(void **state) {
    (void)state;
    fixture f;
    setup(&f, 1);
    tether_lease *l;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &l, NULL), 0);
    uint64_t t[3];
    int64_t ms[3] = {5000, 50, 5000};
    int64_t t0 = now_ms();
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            tether_pool_acquire_start(f.pool, f.cq, ms[i], NULL, &t[i], NULL),
            0);
    /* the 50 ms one: never early, by the first tick after its deadline */
    await_expiry(f.cq, t0, now_ms(), 50);
    tether_completion c;
    next_one(f.cq, &c);
    assert_true(c.ticket == t[1]);
    assert_int_equal(c.rc, TETHER_ETIMEDOUT);
    assert_int_equal(tether_cq_next(f.cq, &c), TETHER_EAGAIN);
    assert_false(readable(f.cq, 60)); /* the others wait on */
    tether_lease_release(l);
    next_one(f.cq, &c);
    assert_true(c.ticket == t[0]);
    assert_int_equal(c.rc, 0);
    tether_lease_release(c.lease);
    next_one(f.cq, &c);
    assert_true(c.ticket == t[2]);
    assert_int_equal(c.rc, 0);
    tether_lease_release(c.lease);
    teardown(&f);
}

static void test_cancel(void **state) {
    (void)state;
    fixture f;
    setup(&f, 1);
    tether_lease *l;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &l, NULL), 0);
    uint64_t t1, t2, t3;
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 5000, NULL, &t1, NULL), 0);
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 5000, NULL, &t2, NULL), 0);
    assert_int_equal(tether_pool_acquire_cancel(f.pool, t1), 0);
    tether_completion c;
    next_one(f.cq, &c);
    assert_true(c.ticket == t1);
    assert_int_equal(c.rc, TETHER_ECANCELED);
    assert_int_equal(tether_pool_acquire_cancel(f.pool, t1), TETHER_ESTATE);
    assert_int_equal(tether_pool_acquire_cancel(f.pool, 999999999),
                     TETHER_ESTATE);
    assert_int_equal(tether__pool_inspect_waiters(f.pool), 1);
    tether_lease_release(l); /* to t2, the one left */
    next_one(f.cq, &c);
    assert_true(c.ticket == t2);
    assert_int_equal(c.rc, 0);
    /* cancel after the connection was posted, before it was taken: it goes
     * back to the pool */
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 5000, NULL, &t3, NULL), 0);
    tether_lease_release(c.lease);
    assert_true(readable(f.cq, 2000));
    assert_int_equal(tether_pool_acquire_cancel(f.pool, t3), 0);
    assert_int_equal(tether_cq_next(f.cq, &c), 0);
    assert_true(c.ticket == t3);
    assert_int_equal(c.rc, TETHER_ECANCELED);
    assert_null(c.lease);
    assert_int_equal(tether_pool_acquire(f.pool, 0, &l, NULL), 0);
    tether_lease_release(l);
    teardown(&f);
}

static void test_queue_full(void **state) {
    (void)state;
    fixture f;
    setup_opts(&f, 1, 0, 1);
    tether_lease *l;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &l, NULL), 0);
    uint64_t t1, t2;
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 5000, NULL, &t1, NULL), 0);
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 5000, NULL, &t2, NULL), 0);
    tether_completion c;
    next_one(f.cq, &c);
    assert_true(c.ticket == t2);
    assert_int_equal(c.rc, TETHER_EQUEUEFULL);
    tether_lease_release(l);
    next_one(f.cq, &c);
    assert_true(c.ticket == t1);
    assert_int_equal(c.rc, 0);
    tether_lease_release(c.lease);
    teardown(&f);
}

/* Connections are created on workers: the start returns at once. */
/* The breaker's blocking period with no connection out: an acquire whose
 * deadline comes first fails at once with EOPEN; the others wait for the
 * probe at the period's end (the pool's tick grants it), with one
 * connect; then first come, first served beside a blocking waiter. */
typedef struct probe_bw {
    tether_pool *pool;
    int rc;
    _Atomic int done;
} probe_bw;

static void *probe_blocking(void *arg) {
    probe_bw *b = arg;
    tether_lease *l = NULL;
    b->rc = tether_pool_acquire(b->pool, 3000, &l, NULL);
    usleep(20000);
    atomic_store(&b->done, 1);
    tether_lease_release(l);
    return NULL;
}

static void test_breaker_probe(void **state) {
    (void)state;
    fixture f;
    memset(&f, 0, sizeof(f));
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    assert_int_equal(tether_sim_create(&f.sim, &so, NULL), 0);
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    po.driver = tether_driver_sim();
    po.driver_ctx = f.sim;
    po.max_size = 1;
    po.barge_limit_us = 0;
    po.breaker.jitter = 0;
    po.breaker.open_ms = 300;
    assert_int_equal(tether_pool_create(&f.pool, &po, NULL), 0);
    f.cq = tether_cq_create(NULL);
    assert_non_null(f.cq);
    tether_sim_set_down(f.sim, 1);
    tether_lease *l = NULL;
    tether_error err;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &l, &err),
                     TETHER_ECONNECT); /* the breaker opens for 300 ms */
    int64_t t0 = now_ms();
    tether_completion c;
    tether_sim_stats st, st2;
    tether_sim_stats_get(f.sim, &st);
    tether_pool_metrics m0, m1;
    tether_pool_metrics_get(f.pool, &m0);
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 100, NULL, NULL, NULL), 0);
    next_one(f.cq, &c);
    /* Its deadline first: at once, with the breaker's error. Judged by
     * what happened, not by the clock: the breaker refused it (counted),
     * nothing connected, nothing waited until a deadline (a queued wait
     * ends in a counted time-out, a wait for the probe in a connect). */
    assert_int_equal(c.rc, TETHER_EOPEN);
    tether_sim_stats_get(f.sim, &st2);
    tether_pool_metrics_get(f.pool, &m1);
    assert_true(st2.connects == st.connects);
    assert_true(m1.breaker_rejections == m0.breaker_rejections + 1);
    assert_true(m1.timeouts == m0.timeouts);
    assert_int_equal(m1.waiters, 0);
    tether_sim_set_down(f.sim, 0);
    tether_sim_stats_get(f.sim, &st);
    uint64_t t[2];
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 3000, NULL, &t[0], NULL), 0);
    next_one(f.cq, &c); /* alone: the tick grants at the period's end */
    assert_int_equal(c.rc, 0);
    assert_true(c.ticket == t[0]);
    assert_true(now_ms() - t0 >= 250);
    probe_bw b = {f.pool, 1, 0};
    pthread_t th;
    pthread_create(&th, NULL, probe_blocking, &b);
    wait_waiters(f.pool, 1);
    assert_int_equal(
        tether_pool_acquire_start(f.pool, f.cq, 3000, NULL, &t[1], NULL), 0);
    wait_waiters(f.pool, 2);
    assert_int_equal(tether_lease_release(c.lease), 0);
    next_one(f.cq, &c); /* the last, after the blocking waiter */
    assert_int_equal(atomic_load(&b.done), 1);
    assert_int_equal(c.rc, 0);
    assert_true(c.ticket == t[1]);
    pthread_join(th, NULL);
    assert_int_equal(b.rc, 0);
    assert_int_equal(tether_lease_release(c.lease), 0);
    tether_sim_stats_get(f.sim, &st2);
    assert_int_equal(st2.connects, st.connects + 1); /* the probe only */
    teardown(&f);
}

static void test_create_off_thread(void **state) {
    (void)state;
    fixture f;
    setup_opts(&f, 2, 50, 0);
    int64_t t0 = now_ms();
    thread_time tt0 = thread_time_start();
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            tether_pool_acquire_start(f.pool, f.cq, 5000, NULL, NULL, NULL), 0);
    thread_time tt1 = thread_time_stop();
    /* The 50 ms connects are not made on this thread: it did not sleep
     * (thread_time.h; the pool's lock is held for microseconds). */
    double slept = thread_time_slept_ms(&tt0, &tt1);
    if (slept > THREAD_TIME_SLACK_MS)
        fail_msg("three starts slept %.1f ms", slept);
    assert_true(thread_time_elapsed_ms(&tt0, &tt1) < 5000);
    tether_completion c[2];
    next_one(f.cq, &c[0]);
    if (tether_cq_next(f.cq, &c[1]) != 0)
        next_one(f.cq, &c[1]);
    assert_true(now_ms() - t0 >= 50);
    assert_int_equal(c[0].rc, 0);
    assert_int_equal(c[1].rc, 0);
    tether_completion c3;
    assert_int_equal(tether_cq_next(f.cq, &c3), TETHER_EAGAIN);
    assert_false(readable(f.cq, 30)); /* the third waits for a release */
    tether_lease_release(c[0].lease);
    next_one(f.cq, &c3);
    assert_int_equal(c3.rc, 0);
    tether_lease_release(c3.lease);
    tether_lease_release(c[1].lease);
    teardown(&f);
}

/* ---- destroy with acquires pending -------------------------------------- */

static void test_destroy_cq_pending(void **state) {
    (void)state;
    fixture f;
    setup_opts(&f, 2, 30, 0);
    tether_lease *l;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &l, NULL), 0);
    /* one connecting on a worker, one posted, the rest queued */
    for (int i = 0; i < 5; i++)
        assert_int_equal(
            tether_pool_acquire_start(f.pool, f.cq, 5000, NULL, NULL, NULL), 0);
    tether_lease_release(l); /* posted to the first queued */
    assert_true(readable(f.cq, 2000));
    tether_cq_destroy(f.cq);
    f.cq = NULL;
    assert_int_equal(tether__pool_inspect_waiters(f.pool), 0);
    /* every connection is back: both can be acquired at once */
    tether_lease *a, *b;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &a, NULL), 0);
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &b, NULL), 0);
    tether_lease_release(a);
    tether_lease_release(b);
    teardown(&f);
}

static void *release_later(void *arg) {
    usleep(100 * 1000);
    tether_lease_release(arg);
    return NULL;
}

/* Destroy wakes the pending acquires (TETHER_ECLOSED) and waits for the
 * lease that is out; the completions can be taken after the pool is gone. */
static void test_destroy_pool_pending(void **state) {
    (void)state;
    fixture f;
    setup(&f, 1);
    tether_lease *l;
    assert_int_equal(tether_pool_acquire(f.pool, 1000, &l, NULL), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            tether_pool_acquire_start(f.pool, f.cq, 5000, NULL, NULL, NULL), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, l), 0);
    tether_pool_destroy(f.pool);
    f.pool = f.sp.pool = NULL;
    pthread_join(t, NULL);
    for (int i = 0; i < 3; i++) {
        tether_completion c;
        next_one(f.cq, &c);
        assert_int_equal(c.rc, TETHER_ECLOSED);
        assert_null(c.lease);
    }
    assert_int_equal(tether_cq_pending(f.cq), 0);
    teardown(&f);
}

/* ---- stress: threads, both kinds of waiters, cancels --------------------- */

#define STRESS_MAX 3

typedef struct stress {
    tether_pool *pool;
    _Atomic int owner[STRESS_MAX];
    _Atomic int doubles;
    _Atomic long ops;
    _Atomic int stop;
} stress;

static void hold(stress *s, tether_lease *l, int who) {
    int i = tether__pool_inspect_slot_index(l);
    int was = atomic_exchange(&s->owner[i], who);
    if (was != 0)
        atomic_fetch_add(&s->doubles, 1);
    sched_yield();
    if (atomic_exchange(&s->owner[i], 0) != who)
        atomic_fetch_add(&s->doubles, 1);
    atomic_fetch_add(&s->ops, 1);
    tether_lease_release(l);
}

static void *stress_blocking(void *arg) {
    stress *s = arg;
    int who = (int)(uintptr_t)pthread_self() | 1;
    while (!atomic_load(&s->stop)) {
        tether_lease *l;
        if (tether_pool_acquire(s->pool, 2000, &l, NULL) == 0)
            hold(s, l, who);
    }
    return NULL;
}

static void *stress_loop(void *arg) {
    stress *s = arg;
    int who = (int)(uintptr_t)pthread_self() | 1;
    tether_cq *cq = tether_cq_create(NULL);
    long started = 0, completed = 0, ok = 0, canceled = 0, other = 0;
    unsigned seed = (unsigned)(uintptr_t)cq;
    while (!atomic_load(&s->stop)) {
        while (started - completed < 8) {
            uint64_t t;
            assert_int_equal(
                tether_pool_acquire_start(s->pool, cq, 2000, NULL, &t, NULL),
                0);
            started++;
            if (rand_r(&seed) % 8 == 0)
                tether_pool_acquire_cancel(s->pool, t);
        }
        if (!readable(cq, 100))
            continue;
        tether_completion c;
        while (tether_cq_next(cq, &c) == 0) {
            completed++;
            if (c.rc == 0) {
                ok++;
                hold(s, c.lease, who);
            } else if (c.rc == TETHER_ECANCELED) {
                canceled++;
            } else {
                other++;
            }
        }
    }
    assert_int_equal(tether_cq_pending(cq), (int)(started - completed));
    tether_cq_destroy(cq);
    assert_true(ok > 0);
    assert_true(canceled > 0);
    assert_int_equal(other, 0);
    return NULL;
}

static void test_stress(void **state) {
    (void)state;
    fixture f;
    setup_opts(&f, STRESS_MAX, 0, 0);
    stress *s = calloc(1, sizeof(*s));
    s->pool = f.pool;
    pthread_t th[5];
    for (int i = 0; i < 5; i++)
        assert_int_equal(pthread_create(&th[i], NULL,
                                        i < 3 ? stress_blocking : stress_loop,
                                        s),
                         0);
    /* At least 1 s, and on until 1000 leases have been held (a loaded
     * machine gives these threads less time: up to 10 s). */
    int64_t t0 = now_ms();
    do
        usleep(100 * 1000);
    while (now_ms() - t0 < 10000 &&
           (now_ms() - t0 < 1000 || atomic_load(&s->ops) <= 1000));
    atomic_store(&s->stop, 1);
    for (int i = 0; i < 5; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&s->doubles), 0);
    assert_true(atomic_load(&s->ops) > 1000);
    free(s);
    teardown(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_immediate),
        cmocka_unit_test(test_loop_thread),
        cmocka_unit_test(test_loop_notify),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_completion_after_release),
        cmocka_unit_test(test_fifo_mixed),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_deadline_mixed),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_queue_full),
        cmocka_unit_test(test_breaker_probe),
        cmocka_unit_test(test_create_off_thread),
        cmocka_unit_test(test_destroy_cq_pending),
        cmocka_unit_test(test_destroy_pool_pending),
        cmocka_unit_test(test_stress),
    };
    return cmocka_run_group_tests_name("cq", tests, NULL, NULL);
}
