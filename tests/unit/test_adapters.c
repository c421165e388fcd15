/* test_adapters.c - libtether-uv and libtether-event (src/adapters,
 * docs/evloop.md) over the sim driver: acquires started on a pool of 2
 * arrive through each loop's callback, in order, one call per completion,
 * leases released from the callback hand the connections on (and a
 * release elsewhere on the loop's thread serves the next acquire in the
 * same turn, without waking the eventfd); a timeout
 * arrives the same way; destroy is clean; both allocate through tether's
 * allocator (tether_set_allocator) and report running out of memory;
 * with tether_uv_ticks / tether_levent_ticks the loop runs the pools'
 * ticks and the library's thread is gone until they are given back.
 * Linked with the shared library and both adapters, so built only when
 * both are (tests/CMakeLists.txt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <poll.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "../support/sim_pool.h"
#include "tether.h"
#include "tether_event.h"
#include "tether_sim.h"
#include "tether_uv.h"

#define N 50

typedef struct run {
    int got[N], ngot, errors, timeouts;
    tether_lease *held; /* kept back by the last completion, if any */
    int keep_last;
} run;

static void on_completion(tether_completion *c, void *arg) {
    run *r = arg;
    if (c->rc == TETHER_ETIMEDOUT) {
        r->timeouts++;
        return;
    }
    if (c->rc != 0) {
        r->errors++;
        return;
    }
    r->got[r->ngot++] = (int)(intptr_t)c->user;
    if (r->keep_last && r->ngot == N)
        r->held = c->lease;
    else
        tether_lease_release(c->lease);
}

/* A pool of 2 on the real clock, strict FIFO, both connections made: the
 * order completions arrive in is the queue's. */
static void make_pool(sim_pool *f) {
    tether_sim_opts so;
    tether_pool_opts po;
    sim_pool_opts(f, -1, &so, &po);
    po.max_size = 2;
    po.barge_limit_us = 0;
    sim_pool_open(f, &so, &po);
    sim_pool_warm(f, 2);
}

static void start_all(tether_pool *pool, tether_cq *cq) {
    for (int i = 0; i < N; i++)
        assert_int_equal(tether_pool_acquire_start(
                             pool, cq, 5000, (void *)(intptr_t)i, NULL, NULL),
                         0);
}

static void check_order(const run *r) {
    assert_int_equal(r->ngot, N);
    assert_int_equal(r->errors, 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(r->got[i], i);
}

/* The libuv tests' fixture: the pool of 2, a completion queue, a loop and a
 * watcher on it that delivers to r, which keeps the last lease back. */
typedef struct uv_fixture {
    sim_pool f;
    tether_cq *cq;
    uv_loop_t loop;
    run r;
    tether_uv *w;
} uv_fixture;

static void uv_open(uv_fixture *u) {
    make_pool(&u->f);
    u->cq = tether_cq_create(NULL);
    assert_non_null(u->cq);
    assert_int_equal(uv_loop_init(&u->loop), 0);
    memset(&u->r, 0, sizeof(u->r));
    u->r.keep_last = 1;
    assert_int_equal(
        tether_uv_create(&u->w, &u->loop, u->cq, on_completion, &u->r, NULL),
        0);
}

/* uv_close_all destroys the watcher, runs the loop until its close is done
 * (nothing else left open) and closes the loop, the queue and the pool. */
static void uv_close_all(uv_fixture *u) {
    tether_uv_destroy(u->w);
    assert_int_equal(uv_run(&u->loop, UV_RUN_DEFAULT), 0); /* the close */
    assert_int_equal(uv_loop_close(&u->loop), 0);
    tether_cq_destroy(u->cq);
    sim_pool_close(&u->f);
}

static void test_uv(void **state) {
    (void)state;
    uv_fixture u;
    uv_open(&u);
    start_all(u.f.pool, u.cq);
    while (u.r.ngot < N)
        uv_run(&u.loop, UV_RUN_ONCE);
    check_order(&u.r);
    /* the held lease: a timeout comes through the loop as well */
    tether_lease *other;
    assert_int_equal(tether_pool_acquire(u.f.pool, 1000, &other, NULL), 0);
    assert_int_equal(
        tether_pool_acquire_start(u.f.pool, u.cq, 30, NULL, NULL, NULL), 0);
    while (u.r.timeouts == 0)
        uv_run(&u.loop, UV_RUN_ONCE);
    assert_int_equal(u.r.timeouts, 1);
    tether_lease_release(other);
    tether_lease_release(u.r.held);
    /* no loop: refused */
    tether_uv *w;
    tether_error err;
    assert_int_equal(
        tether_uv_create(&w, NULL, u.cq, on_completion, &u.r, &err),
        TETHER_EINVAL);
    uv_close_all(&u);
}

/* A release on the loop's thread, outside the watcher's callback (as a
 * program releases when its query's result arrives on another handle),
 * hands the connection to a queued acquire without waking the eventfd:
 * the watcher's prepare handle delivers it before the loop would wait. A
 * loop that waited for the fd would block here; a 2 s timer fails it. */
static void on_guard(uv_timer_t *t) {
    *(int *)t->data = 1;
}

static void test_uv_same_turn(void **state) {
    (void)state;
    uv_fixture u;
    uv_open(&u);
    tether_lease *a, *b;
    assert_int_equal(tether_pool_acquire(u.f.pool, 1000, &a, NULL), 0);
    assert_int_equal(tether_pool_acquire(u.f.pool, 1000, &b, NULL), 0);
    uv_run(&u.loop, UV_RUN_NOWAIT); /* the watcher binds the loop's thread */
    start_all(u.f.pool, u.cq);      /* all queued: the pool is held */
    int late = 0;
    uv_timer_t guard;
    uv_timer_init(&u.loop, &guard);
    guard.data = &late;
    uv_timer_start(&guard, on_guard, 2000, 0);
    tether_lease_release(a);
    tether_lease_release(b);
    struct pollfd pfd = {tether_cq_fd(u.cq), POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 0), 0); /* no wake-up written */
    uv_run(&u.loop, UV_RUN_ONCE);
    assert_int_equal(late, 0);
    check_order(&u.r); /* each callback's release served the next at once */
    tether_lease_release(u.r.held);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_close_all(&u);
}

/* The libevent tests' fixture: the pool of 2, a completion queue, a base
 * and a watcher on it that delivers to r. */
typedef struct ev_fixture {
    sim_pool f;
    tether_cq *cq;
    struct event_base *base;
    run r;
    tether_levent *w;
} ev_fixture;

static void ev_open(ev_fixture *e) {
    make_pool(&e->f);
    e->cq = tether_cq_create(NULL);
    assert_non_null(e->cq);
    e->base = event_base_new();
    assert_non_null(e->base);
    memset(&e->r, 0, sizeof(e->r));
    assert_int_equal(
        tether_levent_create(&e->w, e->base, e->cq, on_completion, &e->r, NULL),
        0);
}

/* ev_close_all frees the base and closes the queue and the pool; the
 * watcher is destroyed already. */
static void ev_close_all(ev_fixture *e) {
    event_base_free(e->base);
    tether_cq_destroy(e->cq);
    sim_pool_close(&e->f);
}

static void test_libevent(void **state) {
    (void)state;
    ev_fixture e;
    ev_open(&e);
    start_all(e.f.pool, e.cq);
    while (e.r.ngot < N)
        event_base_loop(e.base, EVLOOP_ONCE);
    check_order(&e.r);
    tether_levent_destroy(e.w);
    tether_levent_destroy(NULL);
    tether_error err;
    tether_levent *w;
    assert_int_equal(
        tether_levent_create(&w, e.base, NULL, on_completion, &e.r, &err),
        TETHER_EINVAL);
    ev_close_all(&e);
}

/* The same with libevent: once the watcher's event has run on the loop's
 * thread, a release there activates it (tether_cq_loop_notify) instead of
 * waking the eventfd, and one turn of the loop delivers every acquire. */
static void on_ev_guard(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    *(int *)arg = 1;
}

static void test_libevent_same_turn(void **state) {
    (void)state;
    ev_fixture e;
    ev_open(&e);
    assert_int_equal(tether_pool_acquire_start(e.f.pool, e.cq, 5000,
                                               (void *)(intptr_t)-1, NULL,
                                               NULL),
                     0); /* through the eventfd: the watcher binds */
    event_base_loop(e.base, EVLOOP_ONCE);
    assert_int_equal(e.r.ngot, 1);
    e.r.ngot = 0;
    tether_lease *a, *b;
    assert_int_equal(tether_pool_acquire(e.f.pool, 1000, &a, NULL), 0);
    assert_int_equal(tether_pool_acquire(e.f.pool, 1000, &b, NULL), 0);
    start_all(e.f.pool, e.cq);
    e.r.keep_last = 1;
    int late = 0;
    struct event *guard = evtimer_new(e.base, on_ev_guard, &late);
    struct timeval two = {2, 0};
    evtimer_add(guard, &two);
    tether_lease_release(a);
    tether_lease_release(b);
    struct pollfd pfd = {tether_cq_fd(e.cq), POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 0), 0); /* no wake-up written */
    event_base_loop(e.base, EVLOOP_ONCE);
    assert_int_equal(late, 0);
    check_order(&e.r);
    tether_lease_release(e.r.held);
    event_free(guard);
    tether_levent_destroy(e.w);
    ev_close_all(&e);
}

/* ---- ticks on the loop ------------------------------------------------ */

/* threads counts the process's threads (/proc/self/task), once no thread
 * of a pool's is still ending (a few ms at most). */
static int threads(void) {
    int n = 0;
    for (int tries = 0; tries < 100; tries++) {
        DIR *d = opendir("/proc/self/task");
        assert_non_null(d);
        int now = 0;
        for (struct dirent *e; (e = readdir(d));)
            now += e->d_name[0] != '.';
        closedir(d);
        if (now == n)
            return n;
        n = now;
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    return n;
}

static int64_t pool_timeouts(tether_pool *p) {
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    return (int64_t)m.timeouts;
}

/* One adapter's loop, as the ticks test drives it. */
typedef struct loop_ops {
    void *w, *loop;
    int (*ticks)(void *w, int on);
    void (*once)(void *loop);
} loop_ops;

/* check_ticks: with the loop's ticks on, the library's thread is gone; a
 * non-blocking acquire's deadline passes unnoticed while the loop does
 * not run (no tick), and its timeout comes once the loop runs; the thread
 * is back when the ticks are given back (tether_ticks_external counts). */
static void check_ticks(tether_pool *pool, tether_cq *cq, run *r,
                        const loop_ops *o) {
    tether_lease *a, *b;
    assert_int_equal(tether_pool_acquire(pool, 1000, &a, NULL), 0);
    assert_int_equal(tether_pool_acquire(pool, 1000, &b, NULL), 0);
    int with_thread = threads();
    assert_int_equal(o->ticks(o->w, 1), 0);
    assert_int_equal(o->ticks(o->w, 1), 0); /* already on: one count */
    assert_int_equal(threads(), with_thread - 1);
    assert_int_equal(tether_pool_acquire_start(pool, cq, 30, NULL, NULL, NULL),
                     0);
    struct timespec ts = {0, 150000000};
    nanosleep(&ts, NULL);
    assert_int_equal(pool_timeouts(pool), 0); /* no tick without the loop */
    r->timeouts = 0;
    for (int i = 0; i < 1000 && r->timeouts == 0; i++)
        o->once(o->loop);
    assert_int_equal(r->timeouts, 1);
    assert_int_equal(pool_timeouts(pool), 1);
    tether_ticks_external(1); /* counted: the adapter's 0 is not enough */
    assert_int_equal(o->ticks(o->w, 0), 0);
    assert_int_equal(threads(), with_thread - 1);
    tether_ticks_external(0);
    assert_int_equal(threads(), with_thread);
    assert_int_equal(o->ticks(o->w, 1), 0); /* destroy gives it back */
    assert_int_equal(threads(), with_thread - 1);
    tether_lease_release(a);
    tether_lease_release(b);
}

static int uv_ticks(void *w, int on) {
    return tether_uv_ticks(w, on);
}

static void uv_run_once(void *loop) {
    uv_run(loop, UV_RUN_ONCE);
}

static void test_uv_ticks(void **state) {
    (void)state;
    uv_fixture u;
    uv_open(&u);
    u.r.keep_last = 0;
    int with_thread = threads();
    loop_ops o = {u.w, &u.loop, uv_ticks, uv_run_once};
    check_ticks(u.f.pool, u.cq, &u.r, &o);
    assert_int_equal(tether_uv_ticks(NULL, 1), TETHER_EINVAL);
    uv_close_all(&u);
    assert_int_equal(threads(), with_thread - 1); /* the pool is gone too */
}

static int ev_ticks(void *w, int on) {
    return tether_levent_ticks(w, on);
}

static void ev_run_once(void *base) {
    event_base_loop(base, EVLOOP_ONCE);
}

static void test_libevent_ticks(void **state) {
    (void)state;
    ev_fixture e;
    ev_open(&e);
    int with_thread = threads();
    loop_ops o = {e.w, e.base, ev_ticks, ev_run_once};
    check_ticks(e.f.pool, e.cq, &e.r, &o);
    assert_int_equal(tether_levent_ticks(NULL, 1), TETHER_EINVAL);
    tether_levent_destroy(e.w);
    assert_int_equal(threads(), with_thread);
    ev_close_all(&e);
}

/* ---- both adapters allocate through tether's allocator -------------- */

static int allocs, frees, fail_allocs;

static void *counting_malloc(void *ctx, size_t n) {
    (void)ctx;
    if (fail_allocs)
        return NULL;
    allocs++;
    return malloc(n);
}

static void *counting_realloc(void *ctx, void *p, size_t n) {
    (void)ctx;
    return fail_allocs ? NULL : realloc(p, n);
}

static void counting_free(void *ctx, void *p) {
    (void)ctx;
    frees++;
    free(p);
}

static void test_allocator(void **state) {
    (void)state;
    tether_cq *cq = tether_cq_create(NULL);
    assert_non_null(cq);
    tether_allocator a = {counting_malloc, counting_realloc, counting_free,
                          NULL};
    assert_int_equal(tether_set_allocator(&a), 0);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct event_base *base = event_base_new();
    assert_non_null(base);
    run r;
    memset(&r, 0, sizeof(r));
    tether_uv *u;
    tether_levent *e;
    assert_int_equal(tether_uv_create(&u, &loop, cq, on_completion, &r, NULL),
                     0);
    assert_int_equal(
        tether_levent_create(&e, base, cq, on_completion, &r, NULL), 0);
    assert_int_equal(allocs, 2);
    tether_uv_destroy(u);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0); /* the close */
    tether_levent_destroy(e);
    assert_int_equal(frees, 2);
    /* out of memory: a clear error, nothing created */
    fail_allocs = 1;
    tether_error err;
    u = (tether_uv *)&r;
    assert_int_equal(tether_uv_create(&u, &loop, cq, on_completion, &r, &err),
                     TETHER_ENOMEM);
    assert_null(u);
    assert_int_equal(
        tether_levent_create(&e, base, cq, on_completion, &r, &err),
        TETHER_ENOMEM);
    fail_allocs = 0;
    assert_int_equal(tether_set_allocator(NULL), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    event_base_free(base);
    tether_cq_destroy(cq);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uv),
        cmocka_unit_test(test_uv_same_turn),
        cmocka_unit_test(test_libevent),
        cmocka_unit_test(test_libevent_same_turn),
        cmocka_unit_test(test_uv_ticks),
        cmocka_unit_test(test_libevent_ticks),
        cmocka_unit_test(test_allocator),
    };
    return cmocka_run_group_tests_name("adapters", tests, NULL, NULL);
}
