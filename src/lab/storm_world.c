/* storm_world.c - the world `tether sim storm` runs: N real clients (each a
 * tether_pool with its own connector, as tether_pool_open makes them, on the
 * sim driver) on one virtual clock, against a server model that is down
 * for S seconds and then admits at most C connects a second.
 *
 * Each client is a coroutine (ucontext) running an application loop: an
 * idempotent "SELECT 1" through tether_pool_run every 200 ms. Sleeping on
 * the world's clock, wherever the library does it (the connector's pause
 * between passes, run()'s retry pauses, the loop's own 200 ms), suspends the
 * coroutine until the virtual time it wakes at; a scheduler resumes
 * coroutines in order of that time. Nothing else blocks: one caller per pool
 * never waits on the pool's queue. So the state machines that run are the
 * ones a program runs; only time and the server are simulated.
 *
 * The server model sits in front of the sim driver's connect: it decides
 * each connect at the virtual time it starts and has the sim refuse it
 * (tether_sim_fail_next) as down (08001, transient) or as overloaded
 * (53300, throttled). */
#include "storm.h"

#include "tether_driver.h"
#include "tether_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#define STACK_BYTES (192 * 1024)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STACK_BYTES (192 * 1024)
#endif
#endif
#ifndef STACK_BYTES
#define STACK_BYTES (128 * 1024)
#endif
#define PAGE 4096
#define APP_PERIOD_NS (200 * 1000000LL)
#define NS_PER_MS 1000000LL

typedef struct sclient {
    ucontext_t uc;
    void *stack;
    int64_t wake_ns;
    uint64_t seq; /* FIFO among equal wake times */
    uint64_t seed;
    tether_connector *conn;
    tether_pool *pool;
    int done;
} sclient;

typedef struct world {
    const storm_params *p;
    int64_t now_ns;
    int ending; /* past the horizon: sleeps return at once */
    ucontext_t sched;
    sclient *cs;
    sclient *cur; /* the coroutine running, NULL in the scheduler */
    int *heap;
    int nheap;
    uint64_t seq;
    tether_clock clock;
    tether_sim *sim;
    tether_driver drv; /* the sim driver, its connect behind the model */
    int (*sim_start)(void *, const tether_endpoint *, void **, tether_wait *,
                     tether_error *);
    int counting; /* from t = 0 */
    int64_t window;
    long long admitted, in_window;
    storm_result *res;
} world;

static world W; /* the CLI runs one world at a time */

/* ---- scheduler heap, keyed by (wake_ns, seq) ----------------------------- */

static int before(int x, int y) {
    const sclient *a = &W.cs[W.heap[x]], *b = &W.cs[W.heap[y]];
    if (a->wake_ns != b->wake_ns)
        return a->wake_ns < b->wake_ns;
    return a->seq < b->seq;
}

static void swap_at(int x, int y) {
    int t = W.heap[x];
    W.heap[x] = W.heap[y];
    W.heap[y] = t;
}

static void push(int id, int64_t wake_ns) {
    W.cs[id].wake_ns = wake_ns;
    W.cs[id].seq = W.seq++;
    int i = W.nheap++;
    W.heap[i] = id;
    while (i > 0 && before(i, (i - 1) / 2)) {
        swap_at(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static int pop(void) {
    int top = W.heap[0], i = 0;
    W.heap[0] = W.heap[--W.nheap];
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < W.nheap && before(l, m))
            m = l;
        if (r < W.nheap && before(r, m))
            m = r;
        if (m == i)
            return top;
        swap_at(i, m);
        i = m;
    }
}

/* ---- the clock ----------------------------------------------------------- */

static int64_t w_now_ns(void *ctx) {
    (void)ctx;
    return W.now_ns;
}

/* Sleep: suspend the running coroutine until now + ns. Outside a
 * coroutine (setup) or past the horizon, time just moves on. */
static void w_sleep_ns(void *ctx, int64_t ns) {
    (void)ctx;
    if (ns < 0)
        ns = 0;
    sclient *c = W.cur;
    if (!c || W.ending) {
        W.now_ns += ns;
        return;
    }
    push((int)(c - W.cs), W.now_ns + ns);
    swapcontext(&c->uc, &W.sched);
}

/* ---- the server model ---------------------------------------------------- */

/* The outcome of a connect starting now: NONE, TRANSIENT (down) or
 * THROTTLED; counts it. */
static tether_class server_decide(void) {
    if (!W.counting)
        return TETHER_CLASS_NONE; /* before t = 0: the pools' first connects */
    storm_result *r = W.res;
    r->total_attempts++;
    int64_t t_ms = W.now_ns / NS_PER_MS;
    if (t_ms < W.p->down_ms)
        return TETHER_CLASS_TRANSIENT;
    int64_t w = (t_ms - W.p->down_ms) / 1000;
    if (w != W.window) {
        W.window = w;
        W.admitted = 0;
        W.in_window = 0;
    }
    if (++W.in_window > r->peak_after_recovery)
        r->peak_after_recovery = W.in_window;
    if (W.admitted < W.p->capacity) {
        W.admitted++;
        return TETHER_CLASS_NONE;
    }
    return TETHER_CLASS_THROTTLED;
}

static int model_connect_start(void *ctx, const tether_endpoint *ep,
                               void **conn, tether_wait *w, tether_error *err) {
    tether_class cls = server_decide();
    if (cls == TETHER_CLASS_TRANSIENT)
        tether_sim_fail_next(W.sim, 1, TETHER_ECONNECT, cls);
    else if (cls == TETHER_CLASS_THROTTLED)
        tether_sim_fail_next(W.sim, 1, TETHER_ETHROTTLED, cls);
    return W.sim_start(ctx, ep, conn, w, err);
}

/* ---- clients ------------------------------------------------------------- */

static int select1(void *handle, void *arg, const tether_attempt *a,
                   tether_error *err) {
    (void)arg;
    (void)a;
    return tether_sim_use(handle, err);
}

/* The application loop: SELECT 1 every 200 ms until it succeeds once. */
static void client_main(void) {
    sclient *c = W.cur;
    /* The loop's phase: a uniform start within the first period. */
    w_sleep_ns(NULL, (int64_t)(c->seed % (uint64_t)APP_PERIOD_NS));
    for (;;) {
        tether_error err = {0};
        if (tether_pool_run(c->pool, TETHER_IDEMPOTENT, select1, NULL, &err) ==
            0)
            break;
        if (W.ending)
            return;
        w_sleep_ns(NULL, APP_PERIOD_NS);
    }
    if (!W.ending) {
        W.res->connected++;
        double s = (double)W.now_ns / 1e9;
        if (s > W.res->all_connected_s)
            W.res->all_connected_s = s;
    }
    c->done = 1;
}

static void client_entry(void) {
    client_main();
    W.cur->done = 1; /* back to the scheduler through uc_link */
}

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Make client i's connector and pool, and its first connection. */
static int client_setup(sclient *c, const char *conninfo, tether_error *err) {
    tether_connector_opts co;
    tether_connector_opts_init(&co);
    co.conninfo = conninfo;
    co.driver = &W.drv;
    co.driver_ctx = W.sim;
    co.clock = &W.clock;
    co.seed = c->seed | 1;
    int rc = tether_connector_create(&c->conn, &co, err);
    if (rc)
        return rc;
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    po.connector = c->conn;
    po.clock = &W.clock;
    po.seed = mix(c->seed) | 1;
    po.retry.backoff.seed = mix(po.seed) | 1; /* seeds: reproducible runs */
    rc = tether_pool_create(&c->pool, &po, err);
    if (rc == 0)
        rc = tether_pool_run(c->pool, TETHER_IDEMPOTENT, select1, NULL, err);
    return rc;
}

static int client_start(sclient *c) {
    char *s = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s == MAP_FAILED)
        return -1;
    mprotect(s, PAGE, PROT_NONE); /* a guard page below the stack */
    c->stack = s;
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = s;
    c->uc.uc_stack.ss_size = STACK_BYTES;
    c->uc.uc_link = &W.sched;
    makecontext(&c->uc, client_entry, 0);
    return 0;
}

static void client_free(sclient *c) {
    tether_pool_destroy(c->pool);
    tether_connector_destroy(c->conn);
    if (c->stack)
        munmap(c->stack, STACK_BYTES);
    c->pool = NULL;
    c->conn = NULL;
    c->stack = NULL;
}

/* ---- the run ------------------------------------------------------------- */

static int world_init(const storm_params *p, storm_result *res) {
    memset(&W, 0, sizeof(W));
    W.p = p;
    W.res = res;
    W.window = -1;
    W.clock.now_ns = w_now_ns;
    W.clock.sleep_ns = w_sleep_ns;
    W.now_ns = -10 * 1000 * NS_PER_MS; /* setup happens before t = 0 */
    W.cs = calloc((size_t)p->clients, sizeof(*W.cs));
    W.heap = calloc((size_t)p->clients, sizeof(int));
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    so.clock = &W.clock;
    so.seed = p->seed | 1;
    tether_error err = {0};
    if (!W.cs || !W.heap || tether_sim_create(&W.sim, &so, &err))
        return -1;
    W.drv = *tether_driver_sim();
    W.sim_start = W.drv.connect_start;
    W.drv.connect_start = model_connect_start;
    return 0;
}

static void world_free(void) {
    for (int i = 0; W.cs && i < W.p->clients; i++)
        client_free(&W.cs[i]);
    tether_sim_destroy(W.sim);
    free(W.cs);
    free(W.heap);
    memset(&W, 0, sizeof(W));
}

static void run_loop(int64_t horizon_ns) {
    while (W.nheap > 0) {
        int id = pop();
        sclient *c = &W.cs[id];
        if (c->wake_ns > horizon_ns) {
            push(id, c->wake_ns);
            break;
        }
        W.now_ns = c->wake_ns;
        W.cur = c;
        swapcontext(&W.sched, &c->uc);
        W.cur = NULL;
        if (c->done && c->stack) {
            munmap(c->stack, STACK_BYTES);
            c->stack = NULL;
        }
    }
    /* Past the horizon: let the rest finish their call with time moving
     * on at once, so that every pool can be closed. */
    W.ending = 1;
    W.counting = 0;
    while (W.nheap > 0) {
        sclient *c = &W.cs[pop()];
        W.cur = c;
        swapcontext(&W.sched, &c->uc);
        W.cur = NULL;
    }
}

int storm_world_run(const storm_params *p, const char *conninfo,
                    storm_result *res, char *msg, size_t msglen) {
    int rc = world_init(p, res);
    tether_error err = {0};
    for (int i = 0; rc == 0 && i < p->clients; i++) {
        W.cs[i].seed = mix(p->seed * 1000003ULL + (uint64_t)i + 1);
        rc = client_setup(&W.cs[i], conninfo, &err);
        if (rc == 0)
            rc = client_start(&W.cs[i]);
    }
    if (rc == 0) {
        W.now_ns = 0;
        W.counting = 1;
        tether_sim_break_all(W.sim); /* every backend terminated at t = 0 */
        for (int i = 0; i < p->clients; i++)
            push(i, 0);
        run_loop(p->horizon_ms * NS_PER_MS);
    } else {
        snprintf(msg, msglen, "%s",
                 err.message[0] ? err.message : "out of memory");
    }
    world_free();
    return rc ? -1 : 0;
}
