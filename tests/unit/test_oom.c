/* test_oom.c - out of memory: an allocator (tether_set_allocator) that
 * fails the Nth allocation, for every N from 1 until a run makes fewer than
 * N allocations, along the creation and use of each layer: policies,
 * the connection-string layer, the connector, the pool, its non-blocking
 * acquire and the registry (all over the sim driver). Each call either succeeds
 * or returns TETHER_ENOMEM with err saying so ("out of memory"); after a
 * failure the scenario goes on with the same object (the call is made again,
 * and must now succeed), then destroys everything; the blocks the allocator
 * handed out and got back must balance after every run (and LeakSanitizer
 * checks the same in the ASan build).
 *
 * Deterministic: only the allocations of the test's own thread are counted
 * and failed (a thread-local flag). The pools here are on a virtual clock
 * with min_size 0, so no background thread runs anyway;
 * test_background_failures fails every allocation of the other threads
 * instead (a real-clock pool warming up) and checks that the pool logs it
 * and fills up once memory is back. The counts per layer are printed for
 * docs/reliability.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../support/needs_pq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <execinfo.h>

#include "../support/clock.h"
#include "conninfo.h"
#include "tether.h"
#include "tether_sim.h"

/* ---- the failing allocator ---------------------------------------------- */

static _Atomic long live;      /* blocks handed out and not freed */
static _Atomic long fail_at;   /* the armed allocation to fail; 0: none */
static _Atomic long count;     /* armed allocations so far in this run */
static _Atomic int fail_other; /* fail every other thread's allocation */
static _Atomic long other_failed;
static _Thread_local int armed; /* this thread's allocations are counted */
static _Thread_local int main_thread; /* the test's own thread */
static void *failed_at[16];           /* the stack of the failed one */
static int failed_depth;

static int should_fail(void) {
    if (!armed) {
        if (main_thread || !atomic_load(&fail_other))
            return 0;
        atomic_fetch_add(&other_failed, 1);
        return 1;
    }
    if (atomic_fetch_add(&count, 1) + 1 != atomic_load(&fail_at))
        return 0;
    failed_depth = backtrace(failed_at, 16);
    return 1;
}

static void *t_malloc(void *ctx, size_t n) {
    (void)ctx;
    assert_true(n > 0);
    if (should_fail())
        return NULL;
    void *p = malloc(n);
    if (p)
        atomic_fetch_add(&live, 1);
    return p;
}

static void *t_realloc(void *ctx, void *p, size_t n) {
    (void)ctx;
    assert_true(n > 0);
    if (should_fail())
        return NULL;
    void *q = realloc(p, n);
    if (q && !p)
        atomic_fetch_add(&live, 1);
    return q;
}

static void t_free(void *ctx, void *p) {
    (void)ctx;
    assert_non_null(p);
    atomic_fetch_sub(&live, 1);
    free(p);
}

static const tether_allocator failing = {t_malloc, t_realloc, t_free, NULL};

/* ---- the sweep ------------------------------------------------------------
 */

static long enomem_seen; /* calls that returned TETHER_ENOMEM this run */

/* check_enomem: a failed call said what happened. */
static void check_enomem(const tether_error *e, const char *what) {
    if (e->code != TETHER_ENOMEM || !strstr(e->message, "memory"))
        fail_msg("%s: TETHER_ENOMEM with err code %d, message \"%s\"", what,
                 e->code, e->message);
    enomem_seen++;
}

/* TRY runs expr (which fills E) until it returns something else than
 * TETHER_ENOMEM, then checks that is 0. Only the Nth allocation fails, so a
 * call made again after its failure must get through: the object it works
 * on was left usable. */
#define TRY(expr)                                                              \
    do {                                                                       \
        int rc_;                                                               \
        for (int try_ = 0;; try_++) {                                          \
            tether_error_clear(&E);                                            \
            rc_ = (expr);                                                      \
            if (rc_ != TETHER_ENOMEM || try_ > 0)                              \
                break;                                                         \
            check_enomem(&E, #expr);                                           \
        }                                                                      \
        if (rc_ != 0)                                                          \
            fail_msg("%s returned %d (%s)", #expr, rc_, E.message);            \
    } while (0)

/* TRY_NEW is TRY for a create function: on failure *out stays NULL. */
#define TRY_NEW(out, expr)                                                     \
    do {                                                                       \
        int rc_;                                                               \
        for (int try_ = 0;; try_++) {                                          \
            tether_error_clear(&E);                                            \
            (out) = NULL;                                                      \
            rc_ = (expr);                                                      \
            if (rc_ != TETHER_ENOMEM || try_ > 0)                              \
                break;                                                         \
            assert_null(out);                                                  \
            check_enomem(&E, #expr);                                           \
        }                                                                      \
        if (rc_ != 0)                                                          \
            fail_msg("%s returned %d (%s)", #expr, rc_, E.message);            \
        assert_non_null(out);                                                  \
    } while (0)

typedef struct sweep_result {
    long swept;    /* N for which the Nth allocation was failed */
    long clean;    /* of those, runs where a call returned TETHER_ENOMEM */
    long absorbed; /* of those, runs where the library got by without it */
} sweep_result;

/* sweep runs scenario with the Nth allocation failing, N = 1, 2, ... until a
 * run makes fewer than N allocations. */
static sweep_result sweep(const char *layer, void (*scenario)(void)) {
    sweep_result r = {0, 0, 0};
    long base = atomic_load(&live);
    for (long n = 1;; n++) {
        atomic_store(&count, 0);
        atomic_store(&fail_at, n);
        enomem_seen = 0;
        armed = 1;
        scenario();
        armed = 0;
        long made = atomic_load(&count);
        long now = atomic_load(&live);
        if (now != base)
            fail_msg("%s: N=%ld: %ld blocks leaked", layer, n, now - base);
        if (made < n)
            break; /* nothing failed: the sweep is complete */
        r.swept++;
        if (enomem_seen) {
            r.clean++;
        } else {
            r.absorbed++;
            if (getenv("TETHER_OOM_VERBOSE")) { /* where it was absorbed */
                print_message("%s: N=%ld absorbed at:\n", layer, n);
                backtrace_symbols_fd(failed_at, failed_depth, 2);
            }
        }
    }
    assert_true(r.swept > 0);
    print_message("oom %-10s swept N=1..%ld: %ld returned TETHER_ENOMEM, %ld "
                  "absorbed (the call succeeded anyway)\n",
                  layer, r.swept, r.clean, r.absorbed);
    return r;
}

/* ---- policies --------------------------------------------------------------
 */

static int transitions_seen;
static tether_breaker_state last_to;

static void on_state(void *ctx, tether_breaker_state from,
                     tether_breaker_state to) {
    (void)ctx;
    assert_int_equal(from, last_to); /* no change left untold */
    transitions_seen++;
    last_to = to;
}

static int op_calls;

static int flaky_op(void *arg, const tether_attempt *a, tether_error *err) {
    (void)arg;
    (void)a;
    if (op_calls++ % 2 == 0)
        return tether_error_set(err, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT,
                                "flaky");
    return 0;
}

static void scenario_policies(void) {
    tether_error E;
    tether_vclock *vc = NULL;
    vc = tether_vclock_create(1000 * MS);
    while (!vc) { /* not a tether_error API: NULL is its out of memory */
        enomem_seen++;
        vc = tether_vclock_create(1000 * MS);
    }
    const tether_clock *clk = tether_vclock_clock(vc);

    tether_backoff_opts bo;
    tether_backoff_opts_init(&bo);
    bo.seed = 3;
    tether_backoff *b;
    TRY_NEW(b, tether_backoff_create(&b, &bo, &E));
    int64_t d;
    assert_int_equal(tether_backoff_next(b, TETHER_CLASS_TRANSIENT, &d), 0);
    tether_backoff_reset(b);

    tether_schedule_opts so;
    tether_schedule_opts_init(&so);
    so.nhosts = 3;
    so.seed = 4;
    tether_schedule *s;
    TRY_NEW(s, tether_schedule_create(&s, &so, 0, &E));
    tether_step st;
    tether_schedule_next(s, 0, &st);
    assert_int_equal(st.kind, TETHER_STEP_ATTEMPT);

    tether_budget_opts gopts;
    TRY(tether_budget_opts_parse("budget tokens=100 cost=5", &gopts, &E));
    tether_budget *g;
    TRY_NEW(g, tether_budget_create(&g, &gopts, &E));
    assert_true(tether_budget_withdraw(g, 0) > 0);

    tether_breaker_opts ko;
    TRY(tether_breaker_opts_parse("breaker failures=1 open=1s", &ko, &E));
    ko.clock = clk;
    ko.on_state = on_state;
    transitions_seen = 0;
    last_to = TETHER_BREAKER_CLOSED;
    tether_breaker *k;
    TRY_NEW(k, tether_breaker_create(&k, &ko, &E));
    for (int i = 0; i < 4; i++) { /* closed, open, half-open, closed ... */
        int permit = tether_breaker_allow(k, NULL);
        if (permit >= 0)
            tether_breaker_record(k, permit, i % 2, NULL);
        tether_vclock_advance(vc, 2000 * MS);
    }
    tether_breaker_isolate(k);
    tether_breaker_reset(k);
    /* every state change was told, none lost for want of memory */
    assert_int_equal(last_to, tether_breaker_state_get(k));
    assert_true(transitions_seen >= 4);

    tether_retry_opts ro;
    TRY(tether_retry_opts_parse("exponential base=10ms max=1s attempts=3", &ro,
                                &E));
    int64_t ms;
    assert_int_equal(tether_duration_parse("1.5s", &ms), 0);
    ro.clock = clk;
    ro.budget = g;
    tether_retry *r;
    TRY_NEW(r, tether_retry_create(&r, &ro, &E));
    op_calls = 0;
    TRY(tether_retry_run(r, TETHER_IDEMPOTENT, flaky_op, NULL, &E));

    tether_retry_destroy(r);
    tether_breaker_destroy(k);
    tether_budget_destroy(g);
    tether_schedule_destroy(s);
    tether_backoff_destroy(b);
    tether_vclock_destroy(vc);
}

static void test_policies(void **state) {
    (void)state;
    sweep("policies", scenario_policies);
}

/* ---- the connection-string layer ------------------------------------------
 */

#define CONNINFO                                                               \
    "postgresql://app:s3cret@db1:5432,db2:5433/orders?"                        \
    "target_session_attrs=read-write&tether_pool_max=4&application_name=x"

static void scenario_conninfo(void) {
    tether_error E;
    char key[512];
    int n;
    for (;;) { /* TRY for a function that returns a length */
        tether_error_clear(&E);
        n = tether_registry_normalize(CONNINFO, key, sizeof(key), &E);
        if (n != TETHER_ENOMEM)
            break;
        check_enomem(&E, "tether_registry_normalize");
    }
    assert_true(n > 0 && (size_t)n < sizeof(key));

    tether__conninfo ci;
    for (;;) {
        tether_error_clear(&E);
        int rc = tether__conninfo_parse(CONNINFO, &ci, &E);
        if (rc == 0)
            break;
        assert_int_equal(rc, TETHER_ENOMEM);
        check_enomem(&E, "tether__conninfo_parse");
        tether__conninfo_free(&ci);
    }
    char *dup = NULL;
    while (!(dup = tether__conninfo_dup(&ci, 1)))
        enomem_seen++; /* NULL is its out of memory */
    assert_null(strstr(dup, "s3cret"));
    tether__free(dup);
    char *name;
    TRY(tether__conninfo_pool_name(&ci, &name, &E));
    assert_string_equal(name, "app@db1:5432/orders");
    tether__free(name);
    tether__conninfo_free(&ci);

    char *k, *disp;
    for (;;) {
        tether_error_clear(&E);
        k = disp = NULL;
        int rc = tether__conninfo_keys(CONNINFO, &k, &disp, &E);
        if (rc == 0)
            break;
        assert_int_equal(rc, TETHER_ENOMEM);
        assert_null(k);
        assert_null(disp);
        check_enomem(&E, "tether__conninfo_keys");
    }
    assert_string_equal(k, key);
    assert_null(strstr(disp, "s3cret"));
    tether__free(k);
    tether__free(disp);
}

static void test_conninfo(void **state) {
    (void)state;
    sweep("conninfo", scenario_conninfo);
}

/* ---- the connector
 * ----------------------------------------------------------- */

static tether_vclock *new_vclock(void) {
    tether_vclock *vc;
    while (!(vc = tether_vclock_create(1000 * MS)))
        enomem_seen++; /* NULL is its out of memory */
    return vc;
}

static int provide_hosts(void *ctx, char *buf, size_t cap) {
    (void)ctx;
    snprintf(buf, cap, "new1:5432,[::1]:5433,new3:5434");
    return 0;
}

/* Every attempt names a host of the list: none was lost to a failed copy
 * (a NULL host is the driver's default: another server). */
static void on_event(void *ctx, const tether_connect_event *ev) {
    (void)ctx;
    if (ev->phase == TETHER_PHASE_FAIL || ev->phase == TETHER_PHASE_OK)
        if (!ev->host || !*ev->host || !ev->port)
            fail_msg("an attempt on host %s port %d",
                     ev->host ? ev->host : "(default)", ev->port);
}

static void scenario_connector(void) {
    tether_error E;
    tether_vclock *vc = new_vclock();
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    so.clock = tether_vclock_clock(vc);
    tether_sim *sim;
    TRY_NEW(sim, tether_sim_create(&sim, &so, &E));
    tether_connector_opts co;
    tether_connector_opts_init(&co);
    co.conninfo = "host=a,b,c port=1,2,3 user=app password=s3cret "
                  "tether_strategy=round-robin application_name=oom";
    co.driver = tether_driver_sim();
    co.driver_ctx = sim;
    co.clock = tether_vclock_clock(vc);
    co.seed = 1;
    co.on_event = on_event;
    tether_connector *c;
    TRY_NEW(c, tether_connector_create(&c, &co, &E));
    void *h[3];
    for (int i = 0; i < 3; i++) {
        TRY(tether_connector_connect(c, &h[i], &E));
        assert_int_equal(tether_sim_use(h[i], NULL), 0);
    }
    tether_connector_invalidate(c);
    void *h4;
    TRY(tether_connector_connect(c, &h4, &E));
    tether_connector_close(c, h4);
    for (int i = 0; i < 3; i++)
        tether_connector_close(c, h[i]);
    tether_connector_destroy(c);

    /* provisioning: the host list replaced from a callback */
    co.conninfo = "host=old tether_strategy=streaming tether_login_timeout=5m";
    co.provision = provide_hosts;
    TRY_NEW(c, tether_connector_create(&c, &co, &E));
    TRY(tether_connector_connect(c, &h4, &E));
    tether_connector_close(c, h4);
    tether_connector_destroy(c);

    tether_sim_stats ss;
    tether_sim_stats_get(sim, &ss);
    assert_int_equal(ss.open, 0);
    tether_sim_destroy(sim);
    tether_vclock_destroy(vc);
}

static void test_connector(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
    sweep("connector", scenario_connector);
}

/* ---- the pool
 * ---------------------------------------------------------------- */

static int work(void *handle, void *arg, const tether_attempt *a,
                tether_error *err) {
    (void)arg;
    (void)a;
    return tether_sim_use(handle, err);
}

/* sim_on makes a sim server on vc's clock (its creation swept like any
 * call) and fills po with pool options over it, on the same clock. */
static tether_sim *sim_on(tether_vclock *vc, tether_pool_opts *po) {
    tether_error E;
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    so.clock = tether_vclock_clock(vc);
    tether_sim *sim;
    TRY_NEW(sim, tether_sim_create(&sim, &so, &E));
    tether_pool_opts_init(po);
    po->driver = tether_driver_sim();
    po->driver_ctx = sim;
    po->clock = tether_vclock_clock(vc);
    return sim;
}

static void scenario_pool(void) {
    tether_error E;
    tether_vclock *vc = new_vclock();
    tether_pool_opts po;
    tether_sim *sim = sim_on(vc, &po);
    po.max_size = 3;
    po.name = "oom";
    po.conninfo = "host=a password=s3cret";
    po.reset_query = "DISCARD ALL";
    tether_pool *p;
    TRY_NEW(p, tether_pool_create(&p, &po, &E));
    tether_lease *l[3];
    for (int i = 0; i < 3; i++) {
        TRY(tether_pool_acquire(p, 1000, &l[i], &E));
        assert_non_null(tether_lease_handle(l[i]));
    }
    tether_lease_release(l[0]);
    tether_lease_discard(l[1]);
    TRY(tether_pool_run(p, TETHER_IDEMPOTENT, work, NULL, &E));
    TRY(tether_pool_run(p, 0, work, NULL, &E));
    static char buf[32768]; /* the text with OpenTelemetry's names */
    size_t n = tether_pool_metrics_prometheus(p, buf, sizeof(buf));
    assert_true(n > 0 && n < sizeof(buf));
    assert_non_null(strstr(buf, "pool=\"oom\""));
    tether_pool_clear(p);
    tether_lease_release(l[2]);
    TRY(tether_pool_acquire(p, 1000, &l[0], &E));
    tether_lease_release(l[0]);
    TRY(tether_pool_close(p, 1000, &E));
    tether_pool_destroy(p);

    /* a PostgreSQL pool from a connection string: created, not connected
     * (min_size 0) */
    TRY_NEW(p, tether_pool_open(&p,
                                "host=db1,db2 port=5432,5433 user=app "
                                "password=s3cret tether_pool_max=3 "
                                "tether_reset_query='DISCARD ALL' "
                                "tether_retry='fixed base=10ms attempts=2'",
                                NULL, NULL, &E));
    assert_string_equal(tether_pool_name(p), "app@db1:5432");
    tether_pool_destroy(p);
    tether_sim_stats ss;
    tether_sim_stats_get(sim, &ss);
    assert_int_equal(ss.open, 0);
    tether_sim_destroy(sim);
    tether_vclock_destroy(vc);
}

static void test_pool(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
    sweep("pool", scenario_pool);
}

/* ---- the non-blocking acquire ---------------------------------------------
 */

/* take_one takes cq's one completion, which must be there. */
static void take_one(tether_cq *cq, tether_completion *c) {
    memset(c, 0, sizeof(*c));
    assert_int_equal(tether_cq_next(cq, c), 0);
}

/* A failed non-blocking acquire keeps its details in a block of its own,
 * made at the failure: when that block cannot be had, the completion still
 * has its code and says the details were lost. */
static void scenario_cq(void) {
    tether_error E;
    tether_vclock *vc = new_vclock();
    tether_pool_opts po;
    tether_sim *sim = sim_on(vc, &po);
    po.max_size = 1;
    po.max_waiters = 1;
    po.name = "oomcq";
    tether_pool *p;
    TRY_NEW(p, tether_pool_create(&p, &po, &E));
    tether_cq *cq = NULL;
    while (!(cq = tether_cq_create(&E)))
        check_enomem(&E, "tether_cq_create");
    tether_lease *l;
    TRY(tether_pool_acquire(p, 1000, &l, &E)); /* the one connection */
    uint64_t queued, full;
    TRY(tether_pool_acquire_start(p, cq, 60000, NULL, &queued, &E));
    TRY(tether_pool_acquire_start(p, cq, 60000, NULL, &full, &E));
    tether_completion c;
    take_one(cq, &c);
    assert_int_equal(c.ticket, full);
    assert_int_equal(c.rc, TETHER_EQUEUEFULL);
    assert_int_equal(c.err.code, TETHER_EQUEUEFULL);
    if (strstr(c.err.message, "no memory was left for the details"))
        enomem_seen++; /* told, not absorbed */
    else
        assert_non_null(strstr(c.err.message, "already waiting"));
    assert_int_equal(tether_pool_acquire_cancel(p, queued), 0);
    take_one(cq, &c);
    assert_int_equal(c.rc, TETHER_ECANCELED);
    assert_int_equal(c.err.code, TETHER_ECANCELED);
    if (strstr(c.err.message, "no memory was left for the details"))
        enomem_seen++;
    else
        assert_non_null(strstr(c.err.message, "pool oomcq: acquire canceled"));
    tether_lease_release(l);
    assert_int_equal(tether_cq_next(cq, &c), TETHER_EAGAIN);
    tether_cq_destroy(cq);
    tether_pool_destroy(p);
    tether_sim_destroy(sim);
    tether_vclock_destroy(vc);
}

static void test_cq(void **state) {
    (void)state;
    sweep("cq", scenario_cq);
}

/* ---- the registry ----------------------------------------------------------
 */

static void scenario_registry(void) {
    tether_error E;
    tether_vclock *vc = new_vclock();
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    so.clock = tether_vclock_clock(vc);
    tether_sim *sim;
    TRY_NEW(sim, tether_sim_create(&sim, &so, &E));
    tether_registry_opts ro;
    tether_registry_opts_init(&ro);
    ro.pool.driver = tether_driver_sim();
    ro.pool.driver_ctx = sim;
    ro.pool.clock = tether_vclock_clock(vc);
    ro.pool.reset_query = "DISCARD ALL";
    tether_registry *r;
    TRY_NEW(r, tether_registry_create(&r, &ro, &E));
    static const char *const infos[] = {
        "host=a user=u1 password=p1", "user=u1 host=a password=p1",
        "host=b user=u2 password=p2 tether_pool_name=second",
        "postgresql://u3@c:5433/db"};
    tether_lease *l[4];
    for (int i = 0; i < 4; i++)
        TRY(tether_registry_acquire(r, infos[i], 1000, &l[i], &E));
    assert_int_equal(tether_registry_count(r), 3);
    for (int i = 0; i < 4; i++)
        tether_lease_release(l[i]);
    tether_registry_clear_all(r);
    TRY(tether_registry_acquire(r, infos[2], 1000, &l[0], &E));
    tether_lease_release(l[0]);
    tether_registry_destroy(r);
    tether_sim_stats ss;
    tether_sim_stats_get(sim, &ss);
    assert_int_equal(ss.open, 0);
    tether_sim_destroy(sim);
    tether_vclock_destroy(vc);
}

static void test_registry(void **state) {
    (void)state;
    sweep("registry", scenario_registry);
}

/* ---- background threads
 * ------------------------------------------------------ */

static _Atomic int bg_logged;

static void bg_log(void *ctx, tether_log_level level, const char *msg) {
    (void)ctx;
    (void)level;
    if (strstr(msg, "background") && strstr(msg, "memory"))
        atomic_store(&bg_logged, 1);
}

/* A pool on the real clock warms up to min_size on worker threads; with
 * every allocation of those threads failing, it logs the failure and
 * tries again on a later pass; once memory is back it fills up. */
static void test_background_failures(void **state) {
    (void)state;
    long base = atomic_load(&live);
    tether_sim *sim = NULL;
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    assert_int_equal(tether_sim_create(&sim, &so, NULL), 0);
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    po.driver = tether_driver_sim();
    po.driver_ctx = sim;
    po.min_size = 2;
    po.max_size = 4;
    po.log = bg_log;
    atomic_store(&fail_other, 1);
    tether_pool *p = NULL;
    tether_error e = {0};
    assert_int_equal(tether_pool_create(&p, &po, &e), 0);
    for (int i = 0; i < 1000 && !atomic_load(&bg_logged); i++)
        sleep_ms(10); /* up to 10 s on a loaded machine; ~0.1 s alone */
    sleep_ms(250);    /* a few more housekeeping passes, all failing */
    atomic_store(&fail_other, 0);
    assert_true(atomic_load(&bg_logged));
    assert_true(atomic_load(&other_failed) > 0);
    tether_pool_metrics m;
    int filled = 0;
    for (int i = 0; i < 1000 && !filled; i++) {
        tether_pool_metrics_get(p, &m);
        filled = m.idle >= 2;
        if (!filled)
            sleep_ms(10);
    }
    print_message("oom background: %ld allocations failed on the pool's "
                  "threads, logged; warm-up done %s\n",
                  atomic_load(&other_failed),
                  filled ? "once memory was back" : "NOT");
    assert_true(filled);
    tether_lease *l;
    assert_int_equal(tether_pool_acquire(p, 1000, &l, &e), 0);
    tether_lease_release(l);
    tether_pool_destroy(p);
    tether_sim_destroy(sim);
    assert_int_equal(atomic_load(&live), base);
}

static void test_allocator_hook(void **state) {
    (void)state;
    tether_allocator bad = failing;
    bad.free_fn = NULL;
    assert_int_equal(tether_set_allocator(&bad), TETHER_EINVAL);
    /* the failing one stays in place: it counts this budget's blocks */
    long base = atomic_load(&live);
    tether_budget *g = NULL;
    assert_int_equal(tether_budget_create(&g, NULL, NULL), 0);
    assert_true(atomic_load(&live) > base);
    tether_budget_destroy(g);
    assert_int_equal(atomic_load(&live), base);
}

int main(void) {
    main_thread = 1;
    assert_int_equal(tether_set_allocator(&failing), 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocator_hook),
        cmocka_unit_test(test_policies),
        cmocka_unit_test(test_conninfo),
        cmocka_unit_test(test_connector),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_cq),
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_background_failures),
    };
    int rc = cmocka_run_group_tests_name("oom", tests, NULL, NULL);
    tether_set_allocator(NULL);
    return rc;
}
