/* waitq.c - the pool's wait queue: callers that found no idle connection
 * wait here first come, first served. A release hands its connection to
 * the first waiter (handoff); in barging mode arrivals may take idle
 * connections ahead of the waiters until the first has been passed over for
 * barge_limit_us, and the first waiter polls meanwhile; capacity for new
 * connections goes to the first waiters, and with the breaker blocking and
 * nothing out they wait for its probe. A waiter is woken by the function it
 * carries (tether__waiter.wake): a blocking caller's thread is signalled,
 * a non-blocking acquire's owner posts it; the queue names neither. See
 * docs/pool.md, "Waiters". */
#include "waitq.h"

#include <string.h>
#include <stdio.h>
#include <time.h>

/* ---- the queue (lock held) ----------------------------------------------- */

/* When first waiter w starts being passed over: now; for a non-blocking
 * waiter long ago (1 ns), so that it is overdue at once. It has no thread
 * to poll for idle connections, so a release hands over to it as in strict
 * FIFO mode, and arrivals never barge ahead of it (docs/evloop.md). */
static int64_t head_since(const tether__waiter *w) {
    return w->no_thread ? 1 : tether__mono_ns();
}

/* prefetch_waiter asks for w's first lines: a long queue's entries were
 * queued long ago and are out of the cache when their turn comes, and
 * reading the new head cost more than the rest of a hand-over with
 * thousands of non-blocking acquires queued (docs/evloop.md, "Cost"). The
 * lines after the waiter are a queue entry's own (cq.c). */
static void prefetch_waiter(const tether__waiter *w) {
    const char *c = (const char *)w;
    __builtin_prefetch(c);
    __builtin_prefetch(c + 64);
    __builtin_prefetch(c + 128);
    __builtin_prefetch(c + 192);
}

void tether__waitq_push(tether_pool *p, tether__waiter *w) {
    w->next = NULL;
    w->prev = p->tail;
    if (p->tail) {
        p->tail->next = w;
    } else {
        p->head = w;
        atomic_store(&p->head_since_ns, head_since(w));
    }
    p->tail = w;
    p->nqueued++;
    if (w->no_thread)
        atomic_fetch_add(&p->queued_no_thread, 1);
    atomic_fetch_add(&p->waiters,
                     1); /* seq_cst: see tether__pool_put_idle (slot.c) */
}

/* Take w out of the queue. A new first waiter's time of being passed over
 * starts now; in barging mode wake_next wakes it to start polling for idle
 * connections (sleep_turn). */
void tether__waitq_remove(tether_pool *p, tether__waiter *w, int wake_next) {
    if (w->prev) {
        w->prev->next = w->next;
    } else {
        p->head = w->next;
        if (p->head && p->head->next) /* the next head, before its turn */
            prefetch_waiter(p->head->next);
        atomic_store(&p->head_since_ns, p->head ? head_since(p->head) : 0);
        int poll = p->head && !p->head->no_thread && p->o.barge_limit_us > 0;
        if (poll && wake_next)
            pthread_cond_signal(p->head->cv);
        atomic_store(&p->head_unarmed, poll && !wake_next);
    }
    if (w->next)
        w->next->prev = w->prev;
    else
        p->tail = w->prev;
    w->next = w->prev = NULL;
    p->nqueued--;
    if (w->no_thread)
        atomic_fetch_sub(&p->queued_no_thread, 1);
    atomic_fetch_sub(&p->waiters, 1);
}

void tether__waitq_signal(void *unused, tether__waiter *w) {
    (void)unused;
    pthread_cond_signal(w->cv);
}

/* Wake w, out of the queue now, the way it carries (lock held). */
static void wake(tether__waiter *w) {
    w->wake(w->wake_arg, w);
}

/* How long the connect breaker keeps refusing new connections, in ms: 0
 * when a connect may go now. INT64_MAX when no probe is worth waiting for:
 * isolated, or open on a permanent failure (a wrong password, a database
 * that does not exist), which the next probe would only meet again, or
 * the read side of a routing pool, whose callers go to the primary; the
 * callers then fail at once instead of waiting for it. */
static int64_t breaker_blocked_ms(tether_pool *p) {
    if (!p->breaker)
        return 0;
    if (atomic_load_explicit(&p->probing, memory_order_relaxed))
        return 1; /* the probe's connection is coming (its reservation
                     counts in total: a release to wait for) */
    tether_class last;
    int64_t blocked = tether__breaker_blocked_ms(p->breaker, &last);
    int no_wait = last == TETHER_CLASS_PERMANENT || p->fallback;
    return blocked > 0 && no_wait ? INT64_MAX : blocked;
}

/* The breaker blocks connects for blocked_ms and no connection is out, so
 * none will be released: what is left to wait for is the breaker's next
 * probe. A waiter whose deadline comes first is woken to fail fast with the
 * breaker's error; the others sleep until the period ends (probe_ns), when
 * capacity goes to them first come, first served. On a virtual clock, whose
 * periods are not slept on here, every waiter is woken to look again
 * (acquire sleeps on that clock). */
static void await_probe_locked(tether_pool *p, int64_t blocked_ms) {
    int64_t end = INT64_MAX;
    if (blocked_ms < (INT64_MAX - tether__mono_ns()) / 1000000)
        end = tether__mono_ns() + blocked_ms * 1000000;
    tether__waiter *next;
    for (tether__waiter *w = p->head; w; w = next) {
        next = w->next;
        if ((!p->real_clock && !w->no_thread) || w->deadline_ns <= end) {
            tether__waitq_remove(p, w, 0);
            w->woken = WAKE_AGAIN;
            wake(w);
            continue;
        }
        if (w->no_thread) /* the tick grants it (tether__pool_grant_due) */
            continue;
        int64_t was = w->probe_ns;
        w->probe_ns = end;
        if (was == 0 || was > end + 2000000) /* asleep past the end */
            pthread_cond_signal(w->cv);
    }
}

/* Hand capacity (room for one more connection) to the first waiters: the
 * reservation is made here, the waiter creates the connection. Not while
 * the connect breaker blocks (a throttled or dead server): waiters then
 * wait for a release, or with none out for the breaker's probe. */
static void grant_capacity_locked(tether_pool *p) {
    if (atomic_load_explicit(&p->paused, memory_order_relaxed))
        return; /* nothing is handed out: resume grants (ops.c) */
    if (p->head && p->total < p->o.max_size) {
        int64_t blocked = breaker_blocked_ms(p);
        if (blocked > 0) {
            if (p->total == 0)
                await_probe_locked(p, blocked);
            return;
        }
    }
    while (p->head && p->total < p->o.max_size &&
           p->creating < p->o.max_creating) {
        tether__waiter *w = p->head;
        tether__waitq_remove(p, w, 1);
        p->total++;
        p->creating++;
        w->woken = WAKE_CREATE;
        wake(w);
    }
}

int tether__waitq_overdue_slow(tether_pool *p) {
    /* paused or above max_size: every acquire and release takes the slow
     * path (ops.c) */
    if (p->o.barge_limit_us == 0 ||
        atomic_load_explicit(&p->slow, memory_order_relaxed))
        return 1;
    int64_t since =
        atomic_load_explicit(&p->head_since_ns, memory_order_relaxed);
    if (since <= 1) /* none; or a non-blocking waiter's, overdue at once */
        return since == 1;
    return tether__mono_ns() - since >= p->o.barge_limit_us * 1000;
}

/* Whether the first waiter w takes slot s now. In barging mode it would
 * rather have the connection it used last (same server session, and on a
 * shared host the scheduler keeps its thread beside that backend): it
 * waits for it until passed over for 2 x barge_limit_us, then takes any. */
static int head_takes(tether_pool *p, const tether__waiter *w,
                      const tether__slot *s) {
    if (p->o.barge_limit_us == 0 || !w->last || w->last == s)
        return 1;
    int64_t since =
        atomic_load_explicit(&p->head_since_ns, memory_order_relaxed);
    return tether__mono_ns() - since >= 2 * p->o.barge_limit_us * 1000;
}

/* Whether the housekeeper's tick serves this pool's first waiter. */
static int housekept(const tether_pool *p) {
    return p->real_clock &&
           atomic_load_explicit(&tether__ticker_on, memory_order_relaxed);
}

/* Give an owned slot to the first waiter. Returns 1 if it took it, 0 if
 * nobody waits, -1 if the first waiter waits for its own last connection. The
 * new first waiter is not woken to poll when the housekeeper serves it: a
 * wake-up at every hand-over costs a sleep and a switch, measured at 4 % of
 * throughput (docs/pool.md). */
int tether__waitq_handoff(tether_pool *p, tether__slot *s) {
    pthread_mutex_lock(&p->lock);
    if (atomic_load_explicit(&p->slow, memory_order_relaxed)) {
        /* Runtime control (ops.c): paused, the connection is left idle
         * for the resume; above max_size, it is closed. */
        if (atomic_load_explicit(&p->paused, memory_order_relaxed)) {
            pthread_mutex_unlock(&p->lock);
            return -1;
        }
        if (p->total > p->o.max_size) {
            pthread_mutex_unlock(&p->lock);
            atomic_fetch_add(&p->evicted, 1);
            tether__pool_discard(p, s, CLOSE_IDLE);
            return 1;
        }
    }
    tether__waiter *w = p->head;
    int rc = w ? (head_takes(p, w, s) ? 1 : -1) : 0;
    if (rc > 0) {
        tether__waitq_remove(p, w, !housekept(p));
        slot_set(s, SLOT_USED, SLOT_GEN_ONE); /* a new holder, maybe from
                                                 housekeeping (RESERVED) */
        w->given = s;
        wake(w);
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* Whether a slot other than s is out (in use, being created or checked):
 * its return will come through tether__pool_put_idle. */
static int others_out(const tether_pool *p, const tether__slot *s) {
    for (int i = 0; i < p->nslots; i++) {
        const tether__slot *o = &p->slots[i];
        int st = slot_state(o);
        if (o != s && st != SLOT_IDLE && st != SLOT_FREE)
            return 1;
    }
    return 0;
}

/* Slot s was left idle while the first waiter, made first by a hand-over,
 * is not polling. While other connections are out, their releases hand
 * over once it is overdue (and the housekeeper's tick backs that up); when
 * none is, no release will come (a burst has ended): wake it to poll. */
void tether__waitq_wake_unarmed_head(tether_pool *p, const tether__slot *s) {
    if (others_out(p, s))
        return;
    pthread_mutex_lock(&p->lock);
    if (p->head && !p->head->no_thread && atomic_load(&p->head_unarmed)) {
        atomic_store(&p->head_unarmed, 0);
        pthread_cond_signal(p->head->cv);
    }
    pthread_mutex_unlock(&p->lock);
}

void tether__pool_grant_due(tether_pool *p) {
    if (!p->breaker ||
        atomic_load_explicit(&p->waiters, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&p->lock);
    if (!atomic_load(&p->closing))
        grant_capacity_locked(p);
    pthread_mutex_unlock(&p->lock);
}

void tether__pool_serve_head(tether_pool *p) {
    if (!tether__waitq_overdue(p) || atomic_load(&p->paused))
        return;
    pthread_mutex_lock(&p->lock);
    tether__slot *want = p->head ? (tether__slot *)p->head->last : NULL;
    pthread_mutex_unlock(&p->lock);
    tether__slot *s =
        want && slot_take_idle(want) ? want : tether__pool_take_idle(p);
    if (s)
        tether__pool_put_idle(p, s);
}

/* ---- acquire ------------------------------------------------------------- */

typedef struct acq {
    tether_pool *p;
    int64_t start_ns, deadline_ns;
    const char *file;
    int line;
    tether_error *err;
    int no_create; /* a connect was throttled or blocked: wait for a release */
    int64_t probe_ns; /* for wait_turn: wait for the breaker's probe then */
} acq;

static int64_t left_ms(const acq *a) {
    return tether__ms_left(a->deadline_ns);
}

/* Give back a creation reservation that is not needed after all. */
static void unreserve(tether_pool *p) {
    pthread_mutex_lock(&p->lock);
    p->total--;
    p->creating--;
    grant_capacity_locked(p);
    pthread_cond_broadcast(&p->drained);
    pthread_mutex_unlock(&p->lock);
}

/* head_look is what the first waiter w takes when it looks before a
 * sleep, by the rule its hand-overs follow (head_takes): the connection
 * its thread used last if that is idle; another idle one only once it may
 * take any, or when nothing else is out (then nothing it would rather have
 * can come back). A connection it declines is left idle. */
static tether__slot *head_look(tether_pool *p, const tether__waiter *w) {
    tether__slot *last = (tether__slot *)w->last;
    if (atomic_load_explicit(&p->paused, memory_order_relaxed))
        return NULL; /* nothing is handed out while paused (ops.c) */
    if (last && slot_take_idle(last))
        return last;
    tether__slot *s = tether__pool_take_idle(p);
    if (!s || head_takes(p, w, s) || atomic_load(&p->closing) ||
        !others_out(p, s))
        return s;
    slot_set(s, SLOT_IDLE, 0);
    return NULL;
}

/* Sleep once (lock held) until woken, the deadline, or, for the first
 * waiter in barging mode, the next poll. The poll comes 2 x barge_limit_us
 * after the last: in a busy pool the first release after the head falls
 * overdue hands it a connection within microseconds, and a poll due at
 * the very moment it falls overdue would wake it for nothing just before
 * (docs/pool.md). The first waiter marks itself asleep (head_unarmed) and
 * then looks once more for an idle connection (*s): a release publishes
 * its slot before it reads the mark, so either this look finds the slot
 * or that release wakes us when it leaves the last connection idle
 * (wake_unarmed_head). A waiter waiting for the breaker's probe (none is
 * out, nothing to poll for) sleeps until the probe. Returns 0 at the
 * deadline. */
static int sleep_turn(acq *a, tether__waiter *w, tether__slot **s) {
    tether_pool *p = a->p;
    int64_t until = a->deadline_ns;
    if (w->probe_ns)
        until = TETHER__MIN(until, w->probe_ns);
    if (p->head == w && p->o.barge_limit_us > 0 && !w->probe_ns) {
        until = TETHER__MIN(until,
                            tether__mono_ns() + 2 * p->o.barge_limit_us * 1000);
        atomic_store(&p->head_unarmed, 1);
        atomic_thread_fence(memory_order_seq_cst); /* before the look */
        if ((*s = head_look(p, w)) != NULL)
            return 1;
    }
    struct timespec ts = {(time_t)(until / 1000000000LL),
                          (long)(until % 1000000000LL)};
    pthread_cond_timedwait(w->cv, &p->lock, &ts);
    if (w->given || w->woken) /* handed over: no clock read under the lock */
        return 1;
    int64_t now = tether__mono_ns();
    if (w->probe_ns && now >= w->probe_ns) {
        w->probe_ns = 0; /* the period is over: capacity, first come first */
        grant_capacity_locked(p); /* served, or a new period to wait for */
    }
    return w->given || w->woken || now < a->deadline_ns;
}

/* A connect this caller made failed with rc: 0 to go round again (wait for
 * a release or the breaker's probe: tether__pool_refused), else rc. */
static int timed_out(acq *a);

static int after_refusal(acq *a, int rc) {
    if (tether__pool_refused(a->p, rc, a->err, a->deadline_ns, &a->no_create))
        return 0;
    return rc == TETHER__EPROBING ? timed_out(a) : rc;
}

/* Wait in the queue until handed a slot, granted capacity, closed or the
 * deadline. Returns 1 with *got set, 0 to go round again, <0 on error. */
static int wait_turn(acq *a, tether__slot **got) {
    tether_pool *p = a->p;
    tether__waiter w;
    pthread_cond_t cv;
    memset(&w, 0, sizeof(w));
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    w.cv = &cv;
    pthread_condattr_destroy(&ca);
    w.last = tether__slot_last_used(p);
    w.wake = tether__waitq_signal;
    w.deadline_ns = a->deadline_ns;
    w.probe_ns = a->probe_ns;
    a->probe_ns = 0;
    tether__waitq_push(p, &w);
    pthread_mutex_unlock(&p->lock);
    /* Rescan after publishing ourselves: a release that ran before it
     * published its slot as idle without seeing us. The fence orders the
     * count's increment before the rescan's loads (see tether__pool_put_idle).
     */
    atomic_thread_fence(memory_order_seq_cst);
    tether__slot *s = tether__pool_take_idle(p);
    pthread_mutex_lock(&p->lock);
    while (!s && !w.given && !w.woken && sleep_turn(a, &w, &s))
        ; /* the first waiter looks for an idle one before each sleep */
    if (!w.given && !w.woken)
        tether__waitq_remove(p, &w, 1);
    pthread_mutex_unlock(&p->lock);
    pthread_cond_destroy(&cv);
    if (s) { /* found by the rescan: give back anything granted since */
        if (w.given)
            tether__pool_put_idle(p, w.given);
        if (w.woken == WAKE_CREATE)
            unreserve(p);
        *got = s;
        return 1;
    }
    if (w.given) {
        *got = w.given;
        return 1;
    }
    if (w.woken == WAKE_CREATE) {
        int rc = tether__pool_create_reserved(p, left_ms(a), got, a->err);
        return rc == 0 ? 1 : after_refusal(a, rc);
    }
    if (w.woken == WAKE_CLOSED || atomic_load(&p->closing))
        return tether_error_set(a->err, TETHER_ECLOSED, TETHER_CLASS_PERMANENT,
                                "pool %s is closed", p->name);
    return 0;
}

/* tether__pool_arrive_locked's rule. The breaker is consulted only when
 * its state can change the answer: a full pool, or one with others out and
 * earlier waiters, queues whatever it says (the common case under load,
 * and this runs under the pool's lock). */
static int arrive_locked(tether_pool *p, int no_create, int64_t deadline_ns,
                         int64_t *blocked_ms) {
    *blocked_ms = 0;
    if (atomic_load_explicit(&p->paused, memory_order_relaxed))
        return ARRIVE_QUEUE; /* until the resume or the deadline (ops.c) */
    /* no_create (wait for a release) holds only while one may come. */
    int room = p->total < p->o.max_size && p->creating < p->o.max_creating &&
               (!no_create || p->total == 0);
    if (p->total > 0) { /* others out: no probe to wait for */
        if (!room || p->nqueued) {
            if (p->ad.on && p->total >= p->o.max_size)
                tether__adaptive_bound_locked(p); /* adaptive.c */
            return ARRIVE_QUEUE;
        }
        *blocked_ms = breaker_blocked_ms(p);
        return *blocked_ms > 0 ? ARRIVE_QUEUE : ARRIVE_CREATE;
    }
    int64_t blocked = breaker_blocked_ms(p);
    *blocked_ms = blocked;
    if (blocked > 0 && blocked < tether__ms_left(deadline_ns))
        return ARRIVE_PROBE;
    /* Create, or with the breaker blocking past the deadline and nothing
     * out to wait for, fail fast with its error. */
    if (room && (blocked > 0 || !p->nqueued))
        return ARRIVE_CREATE;
    return ARRIVE_QUEUE;
}

/* One round of the slow path, entered with the lock held. Returns 1 with
 * *got, 0 to go round again, <0 on error (the lock is released). */
static int slow_round(acq *a, tether__slot **got) {
    tether_pool *p = a->p;
    grant_capacity_locked(p); /* earlier arrivals first */
    int64_t blocked = 0;
    int next = arrive_locked(p, a->no_create, a->deadline_ns, &blocked);
    if (next == ARRIVE_PROBE) { /* nothing out: wait for the breaker's probe */
        a->no_create = 0;
        if (!p->real_clock) {
            pthread_mutex_unlock(&p->lock);
            p->o.clock->sleep_ns(p->o.clock->ctx, blocked * 1000000);
            return 0;
        }
        a->probe_ns = tether__mono_ns() + blocked * 1000000;
    } else if (next == ARRIVE_CREATE) {
        p->total++;
        p->creating++;
        pthread_mutex_unlock(&p->lock);
        int rc = tether__pool_create_reserved(p, left_ms(a), got, a->err);
        return rc == 0 ? 1 : after_refusal(a, rc);
    }
    if (p->nqueued >= p->o.max_waiters) {
        pthread_mutex_unlock(&p->lock);
        atomic_fetch_add(&p->queue_full, 1);
        return tether_error_set(
            a->err, TETHER_EQUEUEFULL, TETHER_CLASS_THROTTLED,
            "pool %s: %d callers already waiting", p->name, p->o.max_waiters);
    }
    return wait_turn(a, got);
}

/* The time-out of a caller that waited for the pool's probe: how long it
 * has been connecting, and what the last connect found (every host and
 * why), in the room the message has. */
static int probing_timed_out(tether_pool *p, int64_t waited_ms,
                             const tether_error *last, tether_error *err) {
    int rc = tether_error_set_not_sent(
        err, TETHER_ETIMEDOUT, TETHER_CLASS_THROTTLED,
        "pool %s: no connection within %lld ms; probing for %lld ms, last "
        "failure: %s",
        p->name, (long long)waited_ms,
        (long long)((tether__mono_ns() - p->probe_start_ns) / 1000000),
        last->message);
    size_t len = strlen(err->message);
    if (len == sizeof(err->message) - 1) /* cut: say so */
        memcpy(err->message + len - 3, "...", 3);
    err->cause = last->code;
    return rc;
}

int tether__pool_timed_out(tether_pool *p, int64_t waited_ms, tether_error *err,
                           int locked) {
    atomic_fetch_add(&p->timeouts, 1);
    tether_error last;
    if (err && atomic_load(&p->probing) && p->breaker &&
        tether__breaker_last(p->breaker, &last))
        return probing_timed_out(p, waited_ms, &last, err);
    return tether__pool_exhausted(p, waited_ms, err, locked);
}

static int timed_out(acq *a) {
    return tether__pool_timed_out(
        a->p, (a->deadline_ns - a->start_ns) / 1000000, a->err, 0);
}

static int acquire_slow(acq *a, tether__slot **out) {
    tether_pool *p = a->p;
    for (;;) {
        if (atomic_load(&p->closing))
            return tether_error_set(a->err, TETHER_ECLOSED,
                                    TETHER_CLASS_PERMANENT, "pool %s is closed",
                                    p->name);
        tether__slot *s = tether__pool_take_idle(p);
        if (!s) {
            if (tether__mono_ns() >= a->deadline_ns)
                return timed_out(a);
            pthread_mutex_lock(&p->lock);
            int rc = slow_round(a, &s);
            if (rc < 0)
                return rc;
            if (rc == 0)
                continue;
        }
        if (tether__pool_checkout(p, s, a->file, a->line) >= 0) {
            *out = s;
            return 0;
        }
    }
}

/* The acquire that found no idle connection: wait, create or fail. Out of
 * line, so that its frame (an error for when the caller passed none) is
 * not the fast path's. */
__attribute__((noinline)) int
tether__waitq_acquire(tether_pool *p, int64_t timeout_ms, tether__slot **out,
                      tether_error *err, const char *file, int line) {
    int rc = tether__pool_acquire_limit(p, timeout_ms, &timeout_ms, err);
    if (rc)
        return rc;
    tether_error scratch; /* acquire_slow reads the class of a failure */
    acq a = {p, tether__mono_ns(), 0, file, line, err ? err : &scratch, 0, 0};
    a.deadline_ns = a.start_ns + timeout_ms * 1000000LL;
    rc = acquire_slow(&a, out);
    if (rc == 0)
        tether__pool_hist_add(p, (tether__mono_ns() - a.start_ns) / 1000);
    return rc;
}

void tether__waitq_wake_all_closed(tether_pool *p) {
    pthread_mutex_lock(&p->lock);
    while (p->head) {
        tether__waiter *w = p->head;
        tether__waitq_remove(p, w, 1);
        w->woken = WAKE_CLOSED;
        wake(w);
    }
    pthread_mutex_unlock(&p->lock);
}

/* ---- the rules the non-blocking acquire shares (cq.c) ------------------- */

void tether__pool_grant_locked(tether_pool *p) {
    grant_capacity_locked(p);
}

int tether__pool_refused(tether_pool *p, int rc, const tether_error *err,
                         int64_t deadline_ns, int *no_create) {
    int throttled = err && err->cls == TETHER_CLASS_THROTTLED;
    if ((rc != TETHER_EOPEN && rc != TETHER__EPROBING && !throttled) ||
        tether__mono_ns() >= deadline_ns)
        return 0;
    pthread_mutex_lock(&p->lock);
    int others = p->total > 0;
    pthread_mutex_unlock(&p->lock);
    if (others) {
        *no_create = 1;
        return 1;
    }
    int64_t blocked = breaker_blocked_ms(p);
    return blocked > 0 && blocked < tether__ms_left(deadline_ns);
}

/* What an acquire that found no idle connection does next, the rule of
 * the blocking and the non-blocking acquire alike (lock held). */
int tether__pool_arrive_locked(tether_pool *p, int no_create,
                               int64_t deadline_ns, int64_t *blocked_ms) {
    return arrive_locked(p, no_create, deadline_ns, blocked_ms);
}
