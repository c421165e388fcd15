/* pool.h - the pool's internal structures, shared by pool.c (acquire,
 * release, waiters), housekeeper.c (the one background thread), metrics.c
 * and run.c. The design is in docs/pool.md. */
#ifndef TETHER_POOL_H
#define TETHER_POOL_H

#include "breaker.h"
#include "connector.h"
#include "driver.h"
#include "internal.h"
#include "tether_pq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* Slot states. A slot holds at most one connection. */
enum {
    SLOT_FREE = 0, /* no connection */
    SLOT_CREATING, /* reserved for a connection being created */
    SLOT_IDLE,     /* connection available */
    SLOT_USED,     /* leased, or being checked out / handed off */
    SLOT_RESERVED  /* taken by housekeeping */
};

/* A slot's state word holds the state in its low 3 bits; above them, up
 * to bit 15, the number of releases still inside tether__pool_put_idle
 * after publishing the slot: such a release still reads the pool, so
 * tether_pool_destroy waits for the count to fall to 0 (docs/pool.md); in
 * bits 16-31 the lease generation, which moves on whenever the slot
 * passes to a new holder, so that a stale lease is refused (lease_held). Only
 * the slot's owner changes the state bits and the generation of an owned slot;
 * the count changes under anyone's feet, so every change of state keeps it. */
#define SLOT_MASK 7u
#define SLOT_INFLIGHT 8u /* one release in flight */
#define SLOT_INFLIGHT_MASK 0xfff8u
#define SLOT_GEN_SHIFT 16
#define SLOT_GEN_ONE (1u << SLOT_GEN_SHIFT)

#define NOT_HELD INT64_MIN /* acquired_ms of a slot nobody holds */

/* Why a connection was closed (metrics). */
typedef enum close_reason {
    CLOSE_IDLE = 0,
    CLOSE_LIFETIME,
    CLOSE_BROKEN,
    CLOSE_CLEARED,
    CLOSE_VALIDATION,
    CLOSE_RESET,
    CLOSE_DISCARDED,
    CLOSE_SHUTDOWN,
    CLOSE_NREASONS,
    KEEP_DRAINING /* not closed: drained in the background (drain.c) */
} close_reason;

/* A slot holds one connection; a lease names a slot and its generation
 * (lease_token), so the fast path allocates nothing. One slot per possible
 * connection, each on its own cache lines. Fields other than state are written
 * only by the thread that owns the slot (state USED, RESERVED or CREATING);
 * fields the housekeeper reads while another thread holds the slot are atomics.
 */
typedef struct tether__slot tether__slot;
struct tether__slot {
    /* Read or written by every acquire and release: the first line. */
    _Atomic unsigned state;
    uint32_t gen; /* pool generation at creation */
    tether_pool *pool;
    void *conn;
    void *handle;
    int64_t expire_ms;      /* lifetime end; INT64_MAX = none */
    int64_t released_ms;    /* when last released (tether__pool_now) */
    int64_t checked_ms;     /* when last known good (release, validation) */
    _Atomic uint64_t quick; /* acquires served at once (histogram 0),
                               written only by the holder */

    int64_t created_ms;
    int64_t idle_limit_ms;       /* this connection's idle timeout */
    _Atomic int64_t acquired_ms; /* leak detection: NOT_HELD or when */
    const char *_Atomic file;    /* where it was acquired */
    _Atomic int line;
    _Atomic int leak_reported;

    /* Read/write routing (route.c), on a read side's slots only: the lag
     * verdict on conn lag_conn, made at lag_checked_ms. Written by the
     * holder. */
    void *lag_conn;
    int64_t lag_checked_ms;
    int lagging;
} __attribute__((aligned(64)));

/* A thread waiting in the FIFO queue; lives on the waiter's stack. A
 * non-blocking acquire (cq.c) is a waiter too, inside its entry: nb is set,
 * no thread sleeps on cv (it is never initialized), and whoever would wake
 * it calls tether__nb_wake instead (docs/evloop.md). */
typedef struct waiter {
    pthread_cond_t cv;
    struct waiter *next, *prev;
    tether__slot *given;      /* a connection handed over */
    int wake;                 /* WAKE_* reason when not given a connection */
    const tether__slot *last; /* the caller's last connection, or NULL */
    int64_t deadline_ns;      /* when the caller gives up (mono) */
    int64_t probe_ns;      /* 0, or when the breaker's period ends: with nothing
                              out, the waiter waits for that probe (mono) */
    struct tether__nb *nb; /* a non-blocking acquire's entry, else NULL */
} waiter;

/* WAKE_AGAIN: look again (the breaker blocks new connections, none is out
 * to be released, and its next probe comes after the waiter's deadline:
 * it fails fast). */
enum { WAKE_NONE = 0, WAKE_CREATE, WAKE_CLOSED, WAKE_AGAIN };

struct tether_pool {
    /* Everything acquire, release and run() read when an idle connection
     * is there, on one line: the path runs with cold caches after each
     * round trip to the server, and every further line it touches is a
     * miss (docs/pool.md). gen and closing change on clear and close;
     * waiters on every wait, when the waits' own line is written too. */
    const tether_driver *drv;
    uint64_t id;
    tether_retry *retry;
    char *reset_query;
    int64_t validate_idle_ms; /* o.validate_idle_ms */
    int64_t probe_idle_ms;    /* o.probe_idle_ms */
    _Atomic int waiters;
    _Atomic uint32_t gen;
    _Atomic int closing;
    unsigned char real_clock;
    unsigned char leak_on; /* o.leak_threshold_ms > 0 */

    /* Read-mostly: configuration and handles. */
    _Alignas(64) int nslots;
    tether__slot *slots;
    int64_t leak_threshold_ms; /* o.leak_threshold_ms */
    tether_pool_opts o;
    tether_breaker *breaker;
    char *conninfo, *name;
    tether_connector *own_connector; /* tether_pool_open's */
    struct tether__route *route;     /* read/write routing, or NULL */
    int fallback;     /* a routing pool's read side: its callers have the
                         primary to go to, so none waits for the breaker's
                         probe (docs/routing.md) */
    int64_t drain_ms; /* tether_drain_timeout; 0: TETHER__DRAIN_MS, -1:
                         none (close at once); in the line's padding */

    /* Written on waits (hand-over turns): a line of its own. */
    _Alignas(64) _Atomic int64_t head_since_ns; /* when the first waiter
                                                   became first */
    _Atomic int head_unarmed; /* it is asleep, or became first by a
                                 hand-over and was not woken */

    /* The slow path: everything below is guarded by lock. */
    _Alignas(64) pthread_mutex_t lock;
    pthread_cond_t drained; /* total or background creators changed */
    waiter *head, *tail;
    int nqueued;
    int total;              /* slots not FREE */
    int creating;           /* creations in progress */
    int bg;                 /* background creator threads alive */
    _Atomic int probing;    /* the pool's probe is connecting (probe.c);
                               written under lock */
    int64_t probe_start_ns; /* when it started (mono) */
    tether__rng rng;
    _Atomic int64_t next_retire_ms; /* lifetime retirements are spaced */
    int64_t retire_gap_ms;

    /* Counters (slow path only). */
    _Atomic uint64_t created, connect_failures, timeouts, queue_full,
        breaker_rejections, leaks, retired_quick, stale_releases;
    _Atomic uint64_t probes, probe_failures, connects_cut;
    _Atomic uint64_t closed[CLOSE_NREASONS];
    _Atomic uint64_t hist[TETHER_HIST_BUCKETS];
    _Atomic uint64_t hist_sum_us;

    /* The housekeeper's subscription to the core ticker. */
    tether__tick_sub tick;

    /* Non-blocking acquires (cq.c), guarded by lock: every entry of this
     * pool not yet taken by tether_cq_next (queued, worked on by a worker
     * thread, or posted with a connection), for cancel; nb_queued counts
     * those in the wait queue, for the tick's deadline check. */
    struct tether__nb *nb_all;
    _Atomic int nb_queued;
    int64_t nb_due_ns; /* no queued one's deadline is earlier (may be
                          earlier than the earliest: then a check finds
                          nothing and sets it anew) */
};

/* A slot stays two lines with the routing fields. */
_Static_assert(sizeof(tether__slot) == 128, "tether__slot: two cache lines");

/* The fast path's fields fill the first line and no more. */
_Static_assert(offsetof(struct tether_pool, nslots) == 64,
               "tether_pool: the fast path's fields must fit one line");

/* slot_state returns s's state without the in-flight count. */
static inline int slot_state(const tether__slot *s) {
    return (int)(atomic_load_explicit(&s->state, memory_order_relaxed) &
                 SLOT_MASK);
}

/* slot_cas moves s from state from to state to if it is in from, keeping
 * the in-flight count. Returns 1 when it moved (a full barrier). */
static inline int slot_cas(tether__slot *s, unsigned from, unsigned to) {
    unsigned v = atomic_load_explicit(&s->state, memory_order_relaxed);
    while ((v & SLOT_MASK) == from)
        if (atomic_compare_exchange_weak(&s->state, &v, (v & ~SLOT_MASK) | to))
            return 1;
    return 0;
}

/* slot_take moves s from from to SLOT_USED for a new holder, moving its
 * lease generation on in the same step. Returns the state word it wrote
 * (never 0), or 0 when s was not in from. */
static inline unsigned slot_take(tether__slot *s, unsigned from) {
    unsigned v = atomic_load_explicit(&s->state, memory_order_relaxed);
    while ((v & SLOT_MASK) == from) {
        unsigned to = (v & ~SLOT_MASK) + SLOT_GEN_ONE + SLOT_USED;
        if (atomic_compare_exchange_weak(&s->state, &v, to))
            return to;
    }
    return 0;
}

/* slot_set moves s, owned by the caller, to state to and adds inflight to
 * the in-flight count (or SLOT_GEN_ONE to the generation), in one atomic
 * step (a full barrier). */
static inline void slot_set(tether__slot *s, unsigned to, unsigned inflight) {
    unsigned v = atomic_load_explicit(&s->state, memory_order_relaxed);
    atomic_fetch_add(&s->state, to - (v & SLOT_MASK) + inflight);
}

/* A lease is a token, never dereferenced: where pointers leave their top
 * 16 bits 0 (64-bit platforms' user space), the slot's address with a
 * marker bit and 15 bits of its generation in the top 16 bits; elsewhere the
 * plain address (no stale-lease check). */
#define LEASE_TAG_SHIFT 48
#define LEASE_TAG_MARK 0x8000u
#define LEASE_TAG_GEN 0x7fffu

/* lease_tag returns the tag of state word v. */
static inline uintptr_t lease_tag(unsigned v) {
    return (uintptr_t)(((v >> SLOT_GEN_SHIFT) & LEASE_TAG_GEN) |
                       LEASE_TAG_MARK);
}

/* lease_token names s, owned by the caller, in the generation of its state
 * word v (what the step that took s wrote: no load after that step, so a
 * release's loads need not wait for it). */
static inline tether_lease *lease_token(tether__slot *s, unsigned v) {
    uintptr_t a = (uintptr_t)s;
#if UINTPTR_MAX > 0xffffffffu
    if ((a >> LEASE_TAG_SHIFT) == 0)
        a |= lease_tag(v) << LEASE_TAG_SHIFT;
#endif
    return (tether_lease *)a;
}

/* lease_slot returns the slot l names (whether l is stale or not). */
static inline tether__slot *lease_slot(const tether_lease *l) {
    uintptr_t a = (uintptr_t)l;
#if UINTPTR_MAX > 0xffffffffu
    if (a >> 63)
        a &= ((uintptr_t)1 << LEASE_TAG_SHIFT) - 1;
#endif
    return (tether__slot *)a;
}

/* lease_current says whether l names its slot's current lease: the slot
 * is in use and, for a tagged l, in l's generation. */
static inline int lease_current(const tether_lease *l, unsigned v) {
    if ((v & SLOT_MASK) != SLOT_USED)
        return 0;
#if UINTPTR_MAX > 0xffffffffu
    uintptr_t a = (uintptr_t)l;
    if (a >> 63)
        return (a >> LEASE_TAG_SHIFT) == lease_tag(v);
#endif
    return 1;
}

/* lease_held returns the slot of l when l names its current lease, else
 * NULL (a stale lease: released or discarded already). A plain load: the
 * generation moves on when a slot passes to a new holder, in the step that
 * takes it (slot_take), so the release path pays no atomic step for it. */
static inline tether__slot *lease_held(const tether_lease *l) {
    tether__slot *s = lease_slot(l);
    unsigned v = atomic_load_explicit(&s->state, memory_order_relaxed);
    return lease_current(l, v) ? s : NULL;
}

/* Read/write routing keywords (docs/routing.md). */
typedef struct tether__route_keys {
    int on;                 /* tether_route=read-write-split */
    int read_max;           /* tether_read_pool_max; 0: tether_pool_max */
    int64_t max_lag_ms;     /* tether_max_standby_lag as a duration; -1 */
    int64_t max_lag_bytes;  /* ... as a size; -1 */
    int64_t lag_recheck_ms; /* tether_lag_recheck */
    int64_t read_wait_ms;   /* tether_read_wait */
} tether__route_keys;

/* What a connection string says of a pool (tether_pool_open, open.c):
 * tether_pool_opts' defaults with the string's pool keywords applied. */
typedef struct tether__pool_keys {
    tether_pool_opts o; /* o.name and o.reset_query point into this */
    int pooling;        /* tether_pooling: off = one connection */
    char *reset_query;  /* tether_reset_query */
    int64_t drain_ms;   /* tether_drain_timeout; 0: the default */
    char *name;         /* tether_pool_name or a default (o.name; NULL:
                           the pool's "pool-N") */
    tether__route_keys route;
} tether__pool_keys;

/* tether__pool_keys_parse maps conninfo's pool keywords onto k; errors
 * (TETHER_ESPEC) name the keyword. Free k with tether__pool_keys_free,
 * on failure too. */
int tether__pool_keys_parse(const char *conninfo, tether__pool_keys *k,
                            tether_error *err);

/* tether__pool_keys_free frees k's strings. */
void tether__pool_keys_free(tether__pool_keys *k);

/* tether__pool_now returns the pool's time in ms: the core ticker's word
 * for the real clock (a load: the per-operation path reads no precise
 * clock), the configured clock otherwise. Inline: it is on the fast path. */
static inline int64_t tether__pool_now(const tether_pool *p) {
    if (p->real_clock)
        return tether__ticker_ms();
    return tether__now_ms(p->o.clock);
}

/* tether__pool_discard closes s's connection and frees the slot. The caller
 * owns s (USED, RESERVED or CREATING with a connection). why KEEP_DRAINING
 * (release_verdict's, a statement past its deadline) hands s to
 * tether__pool_drain instead: the release path then keeps its layout. */
void tether__pool_discard(tether_pool *p, tether__slot *s, close_reason why);

/* The default bound of a drain after a statement's deadline
 * (tether_drain_timeout, docs/statements.md). */
#define TETHER__DRAIN_MS 1000

/* tether__pool_drain hands s, owned, whose statement outran its deadline,
 * to a thread of the pool's that cancels the statement and reads its
 * results within the drain bound, then releases s as usual or closes it.
 * Meanwhile s stays in use: counted, never handed out (drain.c). */
void tether__pool_drain(tether_pool *p, tether__slot *s);

/* tether__pool_fatal reacts to a fatal server event seen on one of p's
 * connections (shutdown, failover, role change): every connection is
 * suspect, so p is cleared and its connector forgets what it knew of the
 * hosts' roles. */
void tether__pool_fatal(tether_pool *p);

/* tether__pool_still_up runs the driver's cheap liveness check on s
 * (owned; probe: also look at the socket). Returns 1 when s may be handed
 * out; otherwise s is closed, as broken, or as cleared after a fatal
 * server event, which clears p too (tether__pool_fatal), and 0 is
 * returned. */
int tether__pool_still_up(tether_pool *p, tether__slot *s, int probe);

/* tether__pool_retire_due says whether s, owned, is past its lifetime at
 * now and the spacing of retirements allows one now (it then books the
 * next retirement no sooner than retire_gap_ms later). */
int tether__pool_retire_due(tether_pool *p, const tether__slot *s, int64_t now);

/* tether__pool_take is tether_pool_acquire_at giving the slot: for run(),
 * which hands no lease out and so needs no generation. */
int tether__pool_take(tether_pool *p, int64_t timeout_ms, tether__slot **out,
                      tether_error *err, const char *file, int line);

/* tether__pool_give_back is tether_lease_release of an owned slot. */
void tether__pool_give_back(tether_pool *p, tether__slot *s);

/* tether__pool_put_idle makes an owned, healthy slot available: handed to
 * the first waiter, or marked idle. */
void tether__pool_put_idle(tether_pool *p, tether__slot *s);

/* tether__pool_create_reserved creates a connection for a reservation
 * already counted in total and creating (released on failure). On success
 * the slot is returned in state USED. When the connect would be the
 * breaker's probe, the pool makes it on its own thread with the whole
 * connect budget (tether__pool_probe_start) and this returns
 * TETHER__EPROBING: the reservation went with it, and the caller waits in
 * the queue for the connection (tether__pool_refused says so). */
int tether__pool_create_reserved(tether_pool *p, int64_t budget_ms,
                                 tether__slot **out, tether_error *err);

/* TETHER__EPROBING: the pool's probe connects for the caller (never
 * returned to the application). */
#define TETHER__EPROBING (-1000)

/* tether__pool_connect_reserved is the connect of a reservation under a
 * breaker permit (TETHER_PERMIT_CALL or _PROBE; TETHER_EOPEN: no connect,
 * the reservation is released), with budget_ms (-1: the connector's or
 * driver's own). A failure that the caller's budget cut short with nothing
 * learnt is not held against the server (docs/breaker.md). probe: the
 * pool's probe, whose mark it clears with the reservation. */
int tether__pool_connect_reserved(tether_pool *p, int permit, int64_t budget_ms,
                                  int probe, tether__slot **out,
                                  tether_error *err);

/* tether__pool_probe_start hands a reservation and the breaker's probe
 * permit to a thread of the pool's that connects with the whole budget and
 * puts the connection idle or in a waiter's hands (probe.c). Returns 0, or
 * -1 when no thread could be started (the caller probes itself). */
int tether__pool_probe_start(tether_pool *p);

/* tether__pool_spawn starts fn(arg) on a detached thread with every
 * signal blocked (the application's signals stay on its threads). Returns
 * pthread_create's result. */
int tether__pool_spawn(void *(*fn)(void *), void *arg);

/* tether__pool_timed_out fills err for an acquire that waited waited_ms
 * in vain (TETHER_ETIMEDOUT, counted), saying what is out, who waits, and
 * how long the breaker's probe has been connecting. Returns the code. */
int tether__pool_timed_out(tether_pool *p, int64_t waited_ms,
                           tether_error *err);

/* tether__pool_bg_done ends a background thread's hold on p (bg). */
void tether__pool_bg_done(tether_pool *p);

/* tether__pool_fill starts background creations up to min_size. */
void tether__pool_fill(tether_pool *p);

/* tether__pool_serve_head gives the first waiter, once overdue, a
 * connection left idle: the housekeeper's backstop on every tick for a
 * waiter that became first by a hand-over, which is not woken to poll. */
void tether__pool_serve_head(tether_pool *p);

/* tether__pool_grant_due hands creation capacity to waiters that the
 * connect breaker kept waiting, once it lets a connect through again
 * (the housekeeper calls it). */
void tether__pool_grant_due(tether_pool *p);

/* tether__pool_housekeep runs one housekeeping pass over p now: idle
 * timeout, lifetime, keepalive, leak reports, refill to min. Tests call it
 * directly with a virtual clock. */
void tether__pool_housekeep(tether_pool *p);

/* ---- shared with cq.c (non-blocking acquire); lock held where _locked -- */

/* tether__pool_take_idle takes an idle slot (this thread's last first). */
tether__slot *tether__pool_take_idle(tether_pool *p);

/* tether__pool_checkout checks an owned slot before handing it out: 0 or 1
 * (validated) when good, -1 when it was discarded. */
int tether__pool_checkout(tether_pool *p, tether__slot *s, const char *file,
                          int line);

/* tether__pool_queue_push and tether__pool_queue_remove add w at the tail
 * of the wait queue and take it out (lock held). */
void tether__pool_queue_push(tether_pool *p, waiter *w);
void tether__pool_queue_remove(tether_pool *p, waiter *w, int wake_next);

/* tether__pool_grant_locked hands creation capacity to the first waiters. */
void tether__pool_grant_locked(tether_pool *p);

/* tether__ms_left: the milliseconds left until deadline_ns (mono),
 * rounded up; 0 once it has passed. */
static inline int64_t tether__ms_left(int64_t deadline_ns) {
    int64_t ns = deadline_ns - tether__mono_ns();
    return ns <= 0 ? 0 : (ns + 999999) / 1000000;
}

/* tether__pool_arrive_locked says what an acquire that found no idle
 * connection does next: ARRIVE_CREATE (make the reservation and create; with
 * the breaker blocking past deadline_ns and nothing out, that fails fast
 * with its error), ARRIVE_PROBE (the breaker blocks for *blocked_ms, nothing
 * is out, and its probe comes before the deadline: wait for it) or
 * ARRIVE_QUEUE (wait for a release). no_create: a connect of this acquire
 * was refused; it waits for a release. */
enum { ARRIVE_CREATE = 1, ARRIVE_PROBE, ARRIVE_QUEUE };
int tether__pool_arrive_locked(tether_pool *p, int no_create,
                               int64_t deadline_ns, int64_t *blocked_ms);

/* tether__pool_refused decides after a connect for an acquire failed with
 * rc (and err): 1 to go round again, either waiting for a release without
 * connecting (*no_create set: a throttled server or an open breaker while
 * other connections are out) or, with none out, for the breaker's probe
 * before deadline_ns; 0 to fail with rc. Takes the lock. */
int tether__pool_refused(tether_pool *p, int rc, const tether_error *err,
                         int64_t deadline_ns, int *no_create);

/* tether__nb_wake does for the non-blocking waiter w, already out of the
 * queue, what a signal of its condition variable does for a thread: post
 * the connection handed over (w->given), start a worker to create one
 * (WAKE_CREATE, WAKE_AGAIN: the reservation is made) or post TETHER_ECLOSED
 * (WAKE_CLOSED). Lock held. */
void tether__nb_wake(tether_pool *p, waiter *w);

/* tether__nb_expire completes queued non-blocking acquires past their
 * deadline with TETHER_ETIMEDOUT (the housekeeper's tick). */
void tether__nb_expire(tether_pool *p);

/* tether__hist_record counts one timed acquire of us microseconds. */
void tether__hist_record(tether_pool *p, int64_t us);

/* tether__hk_register starts p's housekeeping on the core ticker (pools
 * on the real clock only); tether__hk_unregister stops it: once it
 * returns, no housekeeping of p runs. */
void tether__hk_register(tether_pool *p);
void tether__hk_unregister(tether_pool *p);

/* tether__pool_run_attempt is one attempt of tether_pool_run on p: take
 * a connection within a->timeout_ms, run fn, give it back (or discard it). */
int tether__pool_run_attempt(tether_pool *p, tether_work_fn fn, void *arg,
                             const tether_attempt *a, tether_error *err);

/* The lag query of a read side's connections (a driver's lag operation). */
typedef int (*tether__lag_fn)(void *conn, int64_t timeout_ms, int64_t *lag_ms,
                              int64_t *lag_bytes, tether_error *err);

/* How a pool routes TETHER_READONLY work (route.c, docs/routing.md). */
typedef struct tether__route {
    tether_pool *read;      /* the read side: standby connections, owned */
    int64_t max_lag_ms;     /* skip a standby lagging more; -1: no bound */
    int64_t max_lag_bytes;  /* the same in bytes of WAL; -1: no bound */
    int64_t lag_recheck_ms; /* how long a lag verdict holds */
    int64_t read_wait_ms;   /* the most the read side may take of a run */
    tether__lag_fn lag;     /* the read side's driver's, or a test's */
    _Atomic uint64_t reads_standby, reads_primary, reads_lagging, reroutes,
        lag_checks;
} tether__route;

/* tether__route_attach makes w route TETHER_READONLY work to read, which
 * it then owns (destroyed with w, on failure too). The bounds, recheck and
 * wait come from k (k->on is not read). */
int tether__route_attach(tether_pool *w, tether_pool *read,
                         const tether__route_keys *k, tether_error *err);

/* tether__route_run is tether_pool_run_for of TETHER_READONLY work on a
 * routing pool. */
int tether__route_run(tether_pool *p, unsigned flags, int64_t timeout_ms,
                      tether_work_fn fn, void *arg, tether_error *err);

/* tether__route_close closes p's read side within wait_ms (-1: forever)
 * and returns what is left of wait_ms for the rest of the close. */
int64_t tether__route_close(tether_pool *p, int64_t wait_ms);

/* tether__route_free destroys p's read side and routing state (NULL
 * route: nothing). */
void tether__route_free(tether_pool *p);

#endif
