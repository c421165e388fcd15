/* waitq.h - the pool's second room: the FIFO wait queue of callers that
 * found no idle connection. Hand-over of a released connection to the
 * first waiter, the barging limit, capacity granted to waiters and the
 * wait for the breaker's probe. A waiter carries how it is woken: a
 * blocking caller sleeps on its condition variable, a non-blocking acquire
 * is woken by the function its owner put in it; the queue knows nothing
 * else of either (docs/pool.md, "Waiters"). */
#ifndef TETHER_WAITQ_H
#define TETHER_WAITQ_H

#include "pool.h"

/* A caller waiting in the FIFO queue, on the caller's stack for a blocking
 * acquire (its thread sleeps on *cv, also on its stack), inside its entry
 * for a non-blocking one (no_thread: nobody sleeps, cv is NULL). Whoever
 * takes a waiter out of the queue to give it something calls its wake
 * (lock held). */
struct tether__waiter {
    pthread_cond_t *cv;
    struct tether__waiter *next, *prev;
    tether__slot *given;      /* a connection handed over */
    int woken;                /* WAKE_* reason when not given a connection */
    const tether__slot *last; /* the caller's last connection, or NULL */
    int64_t deadline_ns;      /* when the caller gives up (mono) */
    int64_t probe_ns; /* 0, or when the breaker's period ends: with nothing
                         out, the waiter waits for that probe (mono) */
    /* How it is woken: wake(wake_arg, w), out of the queue, lock held.
     * no_thread: no thread waits on cv that could poll for an idle
     * connection or sleep until the breaker's probe: a release hands over
     * to it at once, and the housekeeper's tick grants it capacity. */
    void (*wake)(void *wake_arg, tether__waiter *w);
    void *wake_arg;
    int no_thread;
};

/* WAKE_AGAIN: look again (the breaker blocks new connections, none is out
 * to be released, and its next probe comes after the waiter's deadline:
 * it fails fast). */
enum { WAKE_NONE = 0, WAKE_CREATE, WAKE_CLOSED, WAKE_AGAIN };

/* tether__waitq_signal is the wake of a blocking waiter: it signals the
 * waiter's condition variable. */
void tether__waitq_signal(void *unused, tether__waiter *w);

/* tether__waitq_push and tether__waitq_remove add w at the tail of the
 * wait queue and take it out (lock held); wake_next: a new first waiter
 * in barging mode is woken to poll. */
void tether__waitq_push(tether_pool *p, tether__waiter *w);
void tether__waitq_remove(tether_pool *p, tether__waiter *w, int wake_next);

/* tether__waitq_wake_all_closed takes every waiter out and wakes it with
 * WAKE_CLOSED (takes the lock). */
void tether__waitq_wake_all_closed(tether_pool *p);

/* tether__pool_grant_locked hands creation capacity to the first waiters
 * (lock held). */
void tether__pool_grant_locked(tether_pool *p);

/* tether__waitq_overdue_slow: the first waiter has been passed over for
 * barge_limit_us (or the queue is strict FIFO). */
int tether__waitq_overdue_slow(tether_pool *p);

/* tether__waitq_overdue says whether arrivals must leave idle connections
 * to the waiters: always when someone waits in strict FIFO mode
 * (barge_limit_us 0), else once the first waiter has been passed over for
 * barge_limit_us. One relaxed load when nobody waits: the fast path. */
static inline int tether__waitq_overdue(tether_pool *p) {
    if (atomic_load_explicit(&p->waiters, memory_order_relaxed) == 0)
        return 0;
    return tether__waitq_overdue_slow(p);
}

/* tether__waitq_handoff gives an owned slot to the first waiter. Returns 1
 * if it took it, 0 if nobody waits, -1 if the first waiter waits for its
 * own last connection. */
int tether__waitq_handoff(tether_pool *p, tether__slot *s);

/* tether__waitq_wake_unarmed_head wakes a first waiter made first by a
 * hand-over, which is not polling, when no connection but s is out. */
void tether__waitq_wake_unarmed_head(tether_pool *p, const tether__slot *s);

/* tether__waitq_acquire is the acquire that found no idle connection:
 * wait in the queue, create or fail (the histogram records its time). */
int tether__waitq_acquire(tether_pool *p, int64_t timeout_ms,
                          tether__slot **out, tether_error *err,
                          const char *file, int line);

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

/* tether__pool_timed_out fills err for an acquire that waited waited_ms
 * in vain (TETHER_ETIMEDOUT, counted), saying what is out, who waits, and
 * how long the breaker's probe has been connecting. locked: the caller
 * holds p's lock. Returns the code. */
int tether__pool_timed_out(tether_pool *p, int64_t waited_ms, tether_error *err,
                           int locked);

/* tether__pool_serve_head gives the first waiter, once overdue, a
 * connection left idle: the housekeeper's backstop on every tick for a
 * waiter that became first by a hand-over, which is not woken to poll. */
void tether__pool_serve_head(tether_pool *p);

/* tether__pool_grant_due hands creation capacity to waiters that the
 * connect breaker kept waiting, once it lets a connect through again
 * (the housekeeper calls it). */
void tether__pool_grant_due(tether_pool *p);

#endif
