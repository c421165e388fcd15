/* pool.h - the pool's third room and its shared state: struct
 * tether_pool, creating and closing connections. The slot (slot.h, the
 * fast path) and the wait queue (waitq.h) are the rooms below; the
 * completion queue, the housekeeper, metrics and the router sit above and
 * call down only. The design is in docs/pool.md. */
#ifndef TETHER_POOL_H
#define TETHER_POOL_H

#include "breaker.h"
#include "connector.h"
#include "driver.h"
#include "internal.h"
#include "slot.h"
#include "adaptive.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

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

/* A caller in the wait queue (waitq.h). */
typedef struct tether__waiter tether__waiter;

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
    unsigned char track; /* what checkout and release record of a lease:
                            TRACK_SITES, TRACK_HOLD (0: nothing, one test) */

    /* Read-mostly: configuration and handles. */
    _Alignas(64) int nslots;
    tether__slot *slots;
    int64_t leak_threshold_ms; /* o.leak_threshold_ms */
    tether_pool_opts o;
    tether_breaker *breaker;
    char *conninfo, *name;
    tether_connector *own_connector; /* tether_pool_open's */
    struct tether__route *route;     /* the router's, when this pool is a
                                        routing pool's write side (route.c;
                                        the pool never reads it) */
    /* Set by whoever owns the pool from above (the router): called after
     * every clear (tether_pool_clear, a fatal server event), outside the
     * lock. */
    void (*on_clear)(void *arg);
    void *on_clear_arg;
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
    tether__waiter *head, *tail;
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
    /* The acquire-time histogram (tether__pool_hist_add; metrics.c reads
     * it, with the slots' quick counts in bucket 0). */
    _Atomic uint64_t hist[TETHER_HIST_BUCKETS];
    _Atomic uint64_t hist_sum_us;

    /* Transaction affinity (affinity.c, docs/pool.md, "Transactions across
     * acquires"): the reservations, allocated by the first keyed acquire
     * (lock held; read by holders of keyed leases and under lock), and
     * their counts. */
    struct tether__affinity *aff;
    int64_t txn_timeout_ms;   /* o.txn_reserve_timeout_ms */
    _Atomic int txn_reserved; /* slots in SLOT_TXN; written under lock */
    _Atomic uint64_t txn_reservations, txn_expired, txn_lost, txn_rolled_back;
    _Atomic int64_t txn_warn_ms;     /* the last keyless warning, or
                                        INT64_MIN */
    _Atomic uint64_t txn_warn_quiet; /* warnings held back since */

    /* Waiters in the queue with no thread of their own (no_thread), for
     * the tick's deadline check (written by the wait queue, lock held). */
    _Atomic int queued_no_thread;

    /* Runtime control (ops.c; docs/pool.md, "Operating a pool at
     * runtime"). slow is 1 while the pool is paused or holds more
     * connections than max_size (after a shrink), and then waiters carries
     * TETHER__SLOW_BIAS: the fast path, which reads waiters anyway, takes
     * the slow path, and every release goes through the hand-over
     * (tether__waitq_handoff), which holds connections back while paused
     * and closes those above max_size. Written under lock
     * (tether__pool_slow_locked). */
    _Atomic int slow;
    _Atomic int paused;
    _Atomic int64_t last_fail_ns; /* the last failed connect (mono) */
    _Atomic uint64_t pauses, evicted, reconnects, resizes;

    /* Owned by the layers above, which the pool never calls: the
     * housekeeper's subscription to the core ticker (housekeeper.c), and
     * the non-blocking acquires (cq.c), guarded by lock: every entry of
     * this pool not yet taken by tether_cq_next (queued, worked on by a
     * worker thread, or posted with a connection), for cancel. */
    tether__tick_sub tick;
    struct tether__cq_entry *cq_entries;
    int64_t cq_due_ns; /* no queued one's deadline is earlier (may be
                          earlier than the earliest: then a check finds
                          nothing and sets it anew) */

    /* The connect-time histogram, the acquire histogram's buckets (pool.c
     * counts each connect that succeeded; metrics.c writes it as
     * db_client_connection_create_time). Last: the fields above keep
     * their places. */
    _Atomic uint64_t create_hist[TETHER_HIST_BUCKETS];
    _Atomic uint64_t create_sum_us;
    /* How long leases were held (db_client_connection_use_time), counted
     * at release with leak detection on, when the acquire's time is
     * recorded (tether__pool_lease_done). */
    _Atomic uint64_t use_hist[TETHER_HIST_BUCKETS];
    _Atomic uint64_t use_sum_us;

    /* The adaptive limit (adaptive.c; docs/pool.md, "Adaptive limit"):
     * with tether_pool_limit=adaptive, o.max_size is the current limit. */
    tether__adaptive ad;

    /* A rebalance (housekeeper.c; docs/patroni.md, "Rebalance"):
     * Patroni's list gained servers, so rebal_left connections made before
     * rebal_before_ms move, one a pass: the least used idle one closes,
     * and the connection made for it, which reaches a new server first,
     * takes the place of the most used idle one (whose connection takes
     * the new slot). rebal_seen: each slot's lease count at the last pass
     * (the state word's generation) and whether it is known to be newer;
     * rebal_hot: the most used one's index for the move in flight
     * (rebal_moving). rebal_gen: the connector's generation of additions
     * last seen. Written by the housekeeper; the mover reads them while
     * rebal_moving is set, when the housekeeper leaves them alone. */
    unsigned rebal_gen;
    int rebal_left, rebal_hot, rebal_passes;
    int64_t rebal_before_ms;
    struct tether__rebal_seen *rebal_seen;
    _Atomic int rebal_moving;
    _Atomic int rebal_missed; /* the last move did not reach a new
                                 server: the next pass moves once more */
    _Atomic uint64_t rebalanced;
};

/* p->track's bits. TRACK_SITES: o.leak_threshold_ms > 0, checkout records
 * the acquire site and time (leak detection, held.c). TRACK_HOLD: the
 * adaptive limit (adaptive.c), checkout stamps the slot's taken_us and
 * release counts the hold time. With neither, the fast path pays the one
 * test of the byte it always paid for leak detection. */
#define TRACK_SITES 1
#define TRACK_HOLD 2

/* What waiters carries on top of the queued callers while p->slow. */
#define TETHER__SLOW_BIAS (1 << 30) /* above max_waiters' bound */

/* tether__pool_queued returns how many callers wait in p's queue. */
static inline int tether__pool_queued(tether_pool *p) {
    return atomic_load(&p->waiters) % TETHER__SLOW_BIAS;
}

/* tether__pool_exchange swaps the connections of slots a and b, both
 * owned by the caller and neither leased, with what belongs to each (its
 * times, generation and lag verdict); the slots' states and counts stay
 * (pool.c; the rebalance, housekeeper.c). */
void tether__pool_exchange(tether__slot *a, tether__slot *b);

/* tether__pool_slow_locked sets p->slow (and the bias in waiters) to
 * whether p is paused or above max_size (lock held; pool.c, for ops.c). */
void tether__pool_slow_locked(tether_pool *p);

/* tether__pool_exhausted fills err for an acquire that waited waited_ms
 * in vain (TETHER_ETIMEDOUT, class throttled, not sent), saying who holds
 * the connections, who waits and what blocked creation (held.c; docs/pool.md,
 * "When the pool is exhausted"). locked: the caller holds p's lock.
 * Returns the code. */
int tether__pool_exhausted(tether_pool *p, int64_t waited_ms, tether_error *err,
                           int locked);

/* tether__pool_held_ages stores how many leases p holds now (*n), the
 * age of the oldest and the median age in ms (0 when none; held.c). */
void tether__pool_held_ages(tether_pool *p, int *n, int64_t *oldest,
                            int64_t *median);

/* The fast path's fields fill the first line and no more. */
_Static_assert(offsetof(struct tether_pool, nslots) == 64,
               "tether_pool: the fast path's fields must fit one line");

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

/* tether__pool_now_us returns the pool's time in microseconds, precise
 * (the monotonic clock, or the configured clock): the adaptive limit's
 * lease stamps, in checkout and release when TRACK_HOLD is set. */
static inline uint32_t tether__pool_now_us(const tether_pool *p) {
    int64_t ns =
        p->real_clock ? tether__mono_ns() : p->o.clock->now_ns(p->o.clock->ctx);
    return (uint32_t)(ns / 1000);
}

/* tether__pool_discard closes s's connection and frees the slot. The caller
 * owns s (USED, RESERVED or CREATING with a connection). why KEEP_DRAINING
 * (release_verdict's, a statement past its deadline) hands s to
 * tether__pool_drain instead: the release path then keeps its layout. */
void tether__pool_discard(tether_pool *p, tether__slot *s, close_reason why);

/* The default bound of a reservation to a transaction's key
 * (tether_txn_reserve_timeout, docs/pool.md). */
#define TETHER__TXN_RESERVE_MS 30000

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
 * returned. Inline: every checkout runs it (slot.c). */
static inline int tether__pool_still_up(tether_pool *p, tether__slot *s,
                                        int probe) {
    int up = p->drv->alive(s->conn, probe);
    if (up == 1)
        return 1;
    if (up == TETHER_FATAL_SEEN)
        tether__pool_fatal(p);
    tether__pool_discard(
        p, s, up == TETHER_FATAL_SEEN ? CLOSE_CLEARED : CLOSE_BROKEN);
    return 0;
}

/* tether__pool_retire_due says whether s, owned, is past its lifetime at
 * now and the spacing of retirements allows one now (it then books the
 * next retirement no sooner than retire_gap_ms later). Inline: every
 * checkout asks (slot.c). */
static inline int tether__pool_retire_due(tether_pool *p, const tether__slot *s,
                                          int64_t now) {
    if (s->expire_ms > now)
        return 0;
    int64_t next = atomic_load(&p->next_retire_ms);
    return now >= next &&
           atomic_compare_exchange_strong(&p->next_retire_ms, &next,
                                          now + p->retire_gap_ms);
}

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

/* tether__pool_bg_done ends a background thread's hold on p (bg). */
void tether__pool_bg_done(tether_pool *p);

/* tether__pool_fill starts background creations up to min_size. */
void tether__pool_fill(tether_pool *p);

/* tether__ms_left: the milliseconds left until deadline_ns (mono),
 * rounded up; 0 once it has passed. */
static inline int64_t tether__ms_left(int64_t deadline_ns) {
    int64_t ns = deadline_ns - tether__mono_ns();
    return ns <= 0 ? 0 : (ns + 999999) / 1000000;
}

/* The acquire-time histogram's bucket bounds in microseconds (the last
 * is INT64_MAX). */
extern const int64_t tether__hist_bounds_us[TETHER_HIST_BUCKETS];

/* tether__pool_acquire_limit checks an acquire's timeout_ms and stores in
 * *ms what the acquire may wait: the pool's acquire timeout for -1,
 * capped at TETHER_DURATION_MAX_MS. Returns 0, or TETHER_EINVAL (below
 * -1) with err naming the value. */
int tether__pool_acquire_limit(const tether_pool *p, int64_t timeout_ms,
                               int64_t *ms, tether_error *err);

/* tether__pool_lease_begin records what p->track asks of a checkout of
 * s at now_ms: the acquire site and time (leak detection), the hold's
 * start (the adaptive limit). Out of line: the checkout's fast path pays
 * only its test of p->track. */
void tether__pool_lease_begin(tether_pool *p, tether__slot *s, const char *file,
                              int line, int64_t now_ms);

/* tether__pool_lease_done marks s no longer held and counts how long it
 * was (from its acquire to now_ms), with leak detection on only: the
 * release's fast path calls it inside the branch it takes for that
 * anyway. */
void tether__pool_lease_done(tether_pool *p, tether__slot *s, int64_t now_ms);

/* tether__pool_hist_add counts one timed acquire of us microseconds in p's
 * histogram (metrics.c reads it). */
void tether__pool_hist_add(tether_pool *p, int64_t us);

/* tether__pool_new makes a pool of o (no housekeeping: whoever creates the
 * pool starts that, tether_pool_create). */
int tether__pool_new(tether_pool **out, const tether_pool_opts *o,
                     tether_error *err);

/* tether__pool_shut closes p (without any pool it owns from above) within
 * wait_ms (-1: forever): tether_pool_close's work. */
int tether__pool_shut(tether_pool *p, int64_t wait_ms, tether_error *err);

/* tether__pool_free waits for p's connections and background threads,
 * then frees it; p is closed and nothing above calls into it any more. */
void tether__pool_free(tether_pool *p);

/* tether__txn_expire rolls back and returns the reservations held past
 * p->txn_timeout_ms at now, with a warning each (the housekeeping pass;
 * the round trips run on a worker thread on the real clock). */
void tether__txn_expire(tether_pool *p, int64_t now);

/* tether__txn_sweep ends every reservation of p (clear and close): their
 * connections are closed with why, which rolls their transactions back on
 * the server, and their keys remembered as lost. */
void tether__txn_sweep(tether_pool *p, close_reason why);

/* tether__txn_free frees p's reservation table. */
void tether__txn_free(tether_pool *p);

/* tether__pool_run_attempt is one attempt of tether_pool_run on p: take
 * a connection within a->timeout_ms, run fn with its statements' deadline
 * deadline_ns (mono, -1 none), give it back (or discard it). */
int tether__pool_run_attempt(tether_pool *p, tether_work_fn fn, void *arg,
                             const tether_attempt *a, int64_t deadline_ns,
                             tether_error *err);

/* tether__attempt_deadline_ns is the default deadline of attempt a's
 * statements: its timeout counted from its start (a is the retry's
 * tether__attempt), -1 for none. Read it before the attempt waits. */
int64_t tether__attempt_deadline_ns(const tether_attempt *a);

/* tether__run_work runs fn on the connection of s for attempt a, with
 * deadline_ns in force as its statements' default (tether_pq.h's
 * TETHER_PQ_RUN_DEADLINE). */
int tether__run_work(tether__slot *s, tether_work_fn fn, void *arg,
                     const tether_attempt *a, int64_t deadline_ns,
                     tether_error *err);

#endif
