/* pool.c - the connection pool: create, acquire, release, the FIFO wait
 * queue, clear and close. The fast path (an idle connection is there and
 * nobody waits) takes no lock and allocates nothing: one CAS on the slot's
 * state to take it, one exchange to give it back. See docs/pool.md. */
#include "conninfo.h"
#include "pool.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TLS_WAYS 4

/* Per-thread affinity: the slot this thread last released, per pool id. */
typedef struct tls_entry {
    uint64_t pool_id;
    tether__slot *slot;
} tls_entry;

static TETHER__TLS tls_entry tls_cache[TLS_WAYS];
static _Atomic uint64_t next_pool_id = 1;

/* ---- options ------------------------------------------------------------ */

/* pool_defaults fills a whole tether_pool_opts with the defaults. */
static void pool_defaults(tether_pool_opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->max_size = 10;
    o->max_creating = 2;
    o->acquire_timeout_ms = 15000;
    o->max_waiters = 1024;
    o->barge_limit_us = 1000;
    o->validate_idle_ms = 500;
    o->validate_timeout_ms = 5000;
    o->probe_idle_ms = 10;
    o->keepalive_ms = 120000;
    o->idle_timeout_ms = 240000;
    o->max_lifetime_ms = 1800000;
    o->use_breaker = 1;
    tether_breaker_preset("blocking-period", &o->breaker, NULL);
    tether_retry_opts_init(&o->retry);
    o->retry.backoff.base_ms = 50;
    o->retry.backoff.max_ms = 1000;
    o->retry.max_attempts = 3;
    o->retry.deadline_ms = 0; /* 0 here: the acquire timeout at create */
}

void tether_pool_opts_init_sized(tether_pool_opts *o, size_t size) {
    tether_pool_opts d;
    pool_defaults(&d);
    tether__sized_out(o, size, &d, sizeof(d));
}

static int bad_opt(tether_error *err, const char *field, long long v,
                   const char *want) {
    return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                            "pool: bad %s (%lld): %s", field, v, want);
}

static int check_opts(const tether_pool_opts *o, tether_error *err) {
    if (!o->driver && !o->connector)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "pool: a driver or a connector is required");
    if (o->max_size < 1 || o->max_size > 100000)
        return bad_opt(err, "max_size", o->max_size, "want 1..100000");
    if (o->min_size < 0 || o->min_size > o->max_size)
        return bad_opt(err, "min_size", o->min_size, "want 0..max_size");
    if (o->max_creating < 1)
        return bad_opt(err, "max_creating", o->max_creating, "want >= 1");
    if (o->acquire_timeout_ms < 0 ||
        o->acquire_timeout_ms > TETHER_DURATION_MAX_MS)
        return bad_opt(err, "acquire_timeout_ms", o->acquire_timeout_ms,
                       "want 0 .. 1000000 h in ms");
    if (o->max_waiters < 0)
        return bad_opt(err, "max_waiters", o->max_waiters, "want >= 0");
    if (o->barge_limit_us < 0 || o->barge_limit_us > 1000000000)
        return bad_opt(err, "barge_limit_us", o->barge_limit_us,
                       "want 0 .. 1000000000 (1000 s)");
    if (o->probe_idle_ms < 0 || o->probe_idle_ms > TETHER_DURATION_MAX_MS)
        return bad_opt(err, "probe_idle_ms", o->probe_idle_ms,
                       "want 0 .. 1000000 h in ms");
    if (o->name && !tether__conninfo_name_ok(o->name))
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "pool: bad name \"%.40s\": %s", o->name,
                                TETHER__NAME_WANT);
    const int64_t *ms[] = {&o->validate_idle_ms, &o->validate_timeout_ms,
                           &o->keepalive_ms,     &o->idle_timeout_ms,
                           &o->max_lifetime_ms,  &o->leak_threshold_ms};
    const char *names[] = {"validate_idle_ms", "validate_timeout_ms",
                           "keepalive_ms",     "idle_timeout_ms",
                           "max_lifetime_ms",  "leak_threshold_ms"};
    for (int i = 0; i < 6; i++)
        if (*ms[i] < 0 || *ms[i] > TETHER_DURATION_MAX_MS)
            return bad_opt(err, names[i], *ms[i], "want 0 .. 1000000 h in ms");
    /* A connection that could expire before or soon after its first use
     * starves the pool (a connect alone may take seconds): HikariCP keeps
     * the same floor. */
    if (o->max_lifetime_ms > 0 && o->max_lifetime_ms < 30000)
        return bad_opt(err, "max_lifetime_ms", o->max_lifetime_ms,
                       "want 0 (none) or >= 30000: shorter, connections "
                       "expire before or soon after their first use");
    return 0;
}

/* ---- create / destroy ---------------------------------------------------- */

static char *dup_or_null(const char *s) {
    return s ? tether__strdup(s) : NULL;
}

static int make_policies(tether_pool *p, tether_error *err) {
    if (p->o.use_breaker) {
        tether_breaker_opts bo = p->o.breaker;
        if (!bo.clock)
            bo.clock = p->o.clock;
        if (!bo.seed && p->o.seed) /* a seeded pool is reproducible */
            bo.seed = p->o.seed * 0x9e3779b97f4a7c15ULL + 1;
        int rc = tether_breaker_create(&p->breaker, &bo, err);
        if (rc)
            return rc;
    }
    tether_retry_opts ro = p->o.retry;
    if (ro.deadline_ms == 0)
        ro.deadline_ms = p->o.acquire_timeout_ms;
    if (!ro.clock)
        ro.clock = p->o.clock;
    if (!ro.log) {
        ro.log = p->o.log;
        ro.log_ctx = p->o.log_ctx;
    }
    return tether_retry_create(&p->retry, &ro, err);
}

static int init_sync(tether_pool *p) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_mutex_init(&p->lock, NULL) ||
             pthread_cond_init(&p->drained, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}

static void free_pool(tether_pool *p) {
    tether_connector_destroy(p->own_connector);
    tether_breaker_destroy(p->breaker);
    tether_retry_destroy(p->retry);
    tether__aligned_free(p->slots);
    tether__free(p->conninfo);
    tether__free(p->name);
    tether__free(p->reset_query);
    tether__aligned_free(p);
}

static int alloc_pool(tether_pool **out, const tether_pool_opts *o,
                      tether_error *err) {
    tether_pool *p = tether__aligned_alloc(64, sizeof(*p));
    if (!p)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    memset(p, 0, sizeof(*p));
    p->o = *o;
    p->nslots = o->max_size;
    size_t bytes = sizeof(tether__slot) * (size_t)p->nslots;
    p->slots = tether__aligned_alloc(64, bytes);
    p->conninfo = dup_or_null(o->conninfo);
    p->id = atomic_fetch_add(&next_pool_id, 1);
    char dflt[32]; /* "pool-N": unique in the process */
    snprintf(dflt, sizeof(dflt), "pool-%llu", (unsigned long long)p->id);
    p->name = dup_or_null(o->name ? o->name : dflt);
    p->reset_query = dup_or_null(o->reset_query);
    *out = p;
    if (!p->slots || !p->name || (o->conninfo && !p->conninfo) ||
        (o->reset_query && !p->reset_query))
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    memset(p->slots, 0, bytes);
    return 0;
}

int tether_pool_create(tether_pool **out, const tether_pool_opts *o,
                       tether_error *err) {
    if (!out)
        return tether__null(err, "tether_pool_create", "out");
    *out = NULL;
    if (!o)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "pool: options are required");
    tether_pool_opts full;
    pool_defaults(&full);
    int rc = TETHER__SIZED_IN(full, o, "tether_pool_opts", err);
    if (rc)
        return rc;
    o = &full;
    rc = check_opts(o, err);
    tether_pool *p = NULL;
    if (rc == 0)
        rc = alloc_pool(&p, o, err);
    if (rc == 0)
        rc = make_policies(p, err);
    if (rc == 0 && init_sync(p))
        rc = tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                              "pool: cannot initialize locks");
    if (rc) {
        if (p)
            free_pool(p);
        return rc;
    }
    p->drv = o->connector ? tether__connector_driver(o->connector) : o->driver;
    p->real_clock = !o->clock || o->clock == tether_clock_real();
    p->validate_idle_ms = o->validate_idle_ms;
    p->probe_idle_ms = o->probe_idle_ms;
    p->leak_threshold_ms = o->leak_threshold_ms;
    p->leak_on = o->leak_threshold_ms > 0;
    p->o.conninfo = p->conninfo;
    p->o.name = p->name;
    p->o.reset_query = p->reset_query;
    tether__rng_seed(&p->rng, o->seed);
    p->retire_gap_ms = o->max_lifetime_ms * 15 / 100 / o->max_size;
    for (int i = 0; i < p->nslots; i++) {
        p->slots[i].pool = p;
        atomic_init(&p->slots[i].acquired_ms, NOT_HELD);
    }
    tether__hk_register(p);
    tether__pool_fill(p);
    *out = p;
    return 0;
}

void tether_pool_destroy(tether_pool *p) {
    if (!p)
        return;
    tether__route_free(p); /* the read side, first */
    tether_pool_close(p, -1, NULL);
    tether__hk_unregister(p);
    pthread_mutex_lock(&p->lock);
    while (p->bg > 0 || p->total > 0)
        pthread_cond_wait(&p->drained, &p->lock);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nslots; i++) /* releases still reading p */
        while (atomic_load(&p->slots[i].state) & SLOT_INFLIGHT_MASK)
            sched_yield();
    for (int i = 0; i < TLS_WAYS; i++)
        if (tls_cache[i].pool_id == p->id)
            tls_cache[i].pool_id = 0;
    pthread_cond_destroy(&p->drained);
    pthread_mutex_destroy(&p->lock);
    free_pool(p);
}

/* ---- the wait queue (lock held) ----------------------------------------- */

/* When first waiter w starts being passed over: now; for a non-blocking
 * waiter long ago (1 ns), so that it is overdue at once. It has no thread
 * to poll for idle connections, so a release hands over to it as in strict
 * FIFO mode, and arrivals never barge ahead of it (docs/evloop.md). */
static int64_t head_since(const waiter *w) {
    return w->nb ? 1 : tether__mono_ns();
}

static void queue_push(tether_pool *p, waiter *w) {
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
    if (w->nb)
        atomic_fetch_add(&p->nb_queued, 1);
    atomic_fetch_add(&p->waiters, 1); /* seq_cst: see put_idle */
}

/* Take w out of the queue. A new first waiter's time of being passed over
 * starts now; in barging mode wake_next wakes it to start polling for idle
 * connections (sleep_turn). */
static void queue_remove(tether_pool *p, waiter *w, int wake_next) {
    if (w->prev) {
        w->prev->next = w->next;
    } else {
        p->head = w->next;
        atomic_store(&p->head_since_ns, p->head ? head_since(p->head) : 0);
        int poll = p->head && !p->head->nb && p->o.barge_limit_us > 0;
        if (poll && wake_next)
            pthread_cond_signal(&p->head->cv);
        atomic_store(&p->head_unarmed, poll && !wake_next);
    }
    if (w->next)
        w->next->prev = w->prev;
    else
        p->tail = w->prev;
    w->next = w->prev = NULL;
    p->nqueued--;
    if (w->nb)
        atomic_fetch_sub(&p->nb_queued, 1);
    atomic_fetch_sub(&p->waiters, 1);
}

/* Wake w, out of the queue now: signal its thread, or for a non-blocking
 * waiter post its completion (lock held). */
static void wake(tether_pool *p, waiter *w) {
    if (w->nb)
        tether__nb_wake(p, w);
    else
        pthread_cond_signal(&w->cv);
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
    waiter *next;
    for (waiter *w = p->head; w; w = next) {
        next = w->next;
        if ((!p->real_clock && !w->nb) || w->deadline_ns <= end) {
            queue_remove(p, w, 0);
            w->wake = WAKE_AGAIN;
            wake(p, w);
            continue;
        }
        if (w->nb) /* the tick grants it (tether__pool_grant_due) */
            continue;
        int64_t was = w->probe_ns;
        w->probe_ns = end;
        if (was == 0 || was > end + 2000000) /* asleep past the end */
            pthread_cond_signal(&w->cv);
    }
}

/* Hand capacity (room for one more connection) to the first waiters: the
 * reservation is made here, the waiter creates the connection. Not while
 * the connect breaker blocks (a throttled or dead server): waiters then
 * wait for a release, or with none out for the breaker's probe. */
static void grant_capacity_locked(tether_pool *p) {
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
        waiter *w = p->head;
        queue_remove(p, w, 1);
        p->total++;
        p->creating++;
        w->wake = WAKE_CREATE;
        wake(p, w);
    }
}

static int head_overdue_slow(tether_pool *p) {
    if (p->o.barge_limit_us == 0)
        return 1;
    int64_t since =
        atomic_load_explicit(&p->head_since_ns, memory_order_relaxed);
    return since != 0 &&
           tether__mono_ns() - since >= p->o.barge_limit_us * 1000;
}

/* Whether arrivals must leave idle connections to the waiters: always when
 * someone waits in strict FIFO mode (barge_limit_us 0), else once the
 * first waiter has been passed over for barge_limit_us. */
static inline int head_overdue(tether_pool *p) {
    if (atomic_load_explicit(&p->waiters, memory_order_relaxed) == 0)
        return 0;
    return head_overdue_slow(p);
}

/* ---- slots --------------------------------------------------------------- */

/* Take slot s if it is idle (a plain load first: no write to a busy
 * slot's line). Returns 1 when it is now this caller's. */
TETHER__HOT static inline unsigned try_take(tether__slot *s) {
    return slot_take(s, SLOT_IDLE);
}

/* Take an idle slot, the one this thread used last first; *v gets the
 * state word the take wrote. NULL when none is idle. */
TETHER__HOT static tether__slot *take_idle_v(tether_pool *p, unsigned *v) {
    tls_entry *t = &tls_cache[p->id % TLS_WAYS];
    if (t->pool_id == p->id && (*v = try_take(t->slot)) != 0)
        return t->slot;
    int n = p->nslots;
    int start = (int)(((uintptr_t)t >> 6) % (uintptr_t)n);
    for (int i = 0; i < n; i++) {
        tether__slot *s = &p->slots[(start + i) % n];
        if ((*v = try_take(s)) != 0)
            return s;
    }
    return NULL;
}

static tether__slot *take_idle(tether_pool *p) {
    unsigned v;
    return take_idle_v(p, &v);
}

/* The connection this thread released last to p, or NULL. */
static const tether__slot *last_used(const tether_pool *p) {
    const tls_entry *t = &tls_cache[p->id % TLS_WAYS];
    return t->pool_id == p->id ? t->slot : NULL;
}

TETHER__HOT static void remember(tether_pool *p, tether__slot *s) {
    tls_entry *t = &tls_cache[p->id % TLS_WAYS];
    t->pool_id = p->id;
    t->slot = s;
}

static void relaxed_inc(_Atomic uint64_t *c) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

int tether__pool_retire_due(tether_pool *p, const tether__slot *s,
                            int64_t now) {
    if (s->expire_ms > now)
        return 0;
    int64_t next = atomic_load(&p->next_retire_ms);
    return now >= next &&
           atomic_compare_exchange_strong(&p->next_retire_ms, &next,
                                          now + p->retire_gap_ms);
}

/* Check an owned slot before handing it out. Returns 0 when it is good,
 * 1 when it was good after a round-trip validation (its duration in
 * *validate_us), -1 when it was discarded (the caller looks for
 * another). */
TETHER__HOT static inline __attribute__((always_inline)) int
checkout(tether_pool *p, tether__slot *s, const char *file, int line,
         int64_t *validate_us) {
    int64_t now = tether__pool_now(p);
    int validated = 0;
    if (s->gen != atomic_load_explicit(&p->gen, memory_order_relaxed)) {
        tether__pool_discard(
            p, s, atomic_load(&p->closing) ? CLOSE_SHUTDOWN : CLOSE_CLEARED);
        return -1;
    }
    if (tether__pool_retire_due(p, s, now)) {
        tether__pool_discard(p, s, CLOSE_LIFETIME);
        return -1;
    }
    if (!tether__pool_still_up(p, s, now - s->released_ms >= p->probe_idle_ms))
        return -1;
    if (now - s->checked_ms > p->validate_idle_ms) {
        int64_t t0 = tether__mono_ns();
        int bad = p->drv->validate(s->conn, p->o.validate_timeout_ms, NULL);
        if (validate_us)
            *validate_us = (tether__mono_ns() - t0) / 1000;
        if (bad) {
            tether__pool_discard(p, s, CLOSE_VALIDATION);
            return -1;
        }
        if (!tether__pool_still_up(p, s, 0)) /* a role change it reported */
            return -1;
        s->checked_ms = now;
        validated = 1;
    }
    if (p->leak_on) {
        atomic_store_explicit(&s->file, file, memory_order_relaxed);
        atomic_store_explicit(&s->line, line, memory_order_relaxed);
        atomic_store_explicit(&s->leak_reported, 0, memory_order_relaxed);
        atomic_store_explicit(&s->acquired_ms, now, memory_order_release);
    }
    return validated;
}

void tether__pool_fatal(tether_pool *p) {
    tether_pool_clear(p);
    if (p->o.connector)
        tether_connector_invalidate(p->o.connector);
}

int tether__pool_still_up(tether_pool *p, tether__slot *s, int probe) {
    int up = p->drv->alive(s->conn, probe);
    if (up == 1)
        return 1;
    if (up == TETHER__FATAL_SEEN)
        tether__pool_fatal(p);
    tether__pool_discard(
        p, s, up == TETHER__FATAL_SEEN ? CLOSE_CLEARED : CLOSE_BROKEN);
    return 0;
}

void tether__pool_discard(tether_pool *p, tether__slot *s, close_reason why) {
    if (why == KEEP_DRAINING) { /* from give_back: not closed (drain.c) */
        tether__pool_drain(p, s);
        return;
    }
    void *conn = s->conn;
    s->conn = NULL;
    s->handle = NULL;
    if (conn)
        p->drv->close(conn);
    atomic_fetch_add(&p->closed[why], 1);
    atomic_fetch_add(&p->retired_quick, atomic_load(&s->quick));
    atomic_store(&s->quick, 0);
    atomic_store(&s->acquired_ms, NOT_HELD);
    pthread_mutex_lock(&p->lock);
    slot_set(s, SLOT_FREE, 0);
    p->total--;
    if (!atomic_load(&p->closing))
        grant_capacity_locked(p);
    pthread_cond_broadcast(&p->drained);
    pthread_mutex_unlock(&p->lock);
}

/* Whether the first waiter w takes slot s now. In barging mode it would
 * rather have the connection it used last (same server session, and on a
 * shared host the scheduler keeps its thread beside that backend): it
 * waits for it until passed over for 2 x barge_limit_us, then takes any. */
static int head_takes(tether_pool *p, const waiter *w, const tether__slot *s) {
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
static int handoff(tether_pool *p, tether__slot *s) {
    pthread_mutex_lock(&p->lock);
    waiter *w = p->head;
    int rc = w ? (head_takes(p, w, s) ? 1 : -1) : 0;
    if (rc > 0) {
        queue_remove(p, w, !housekept(p));
        slot_set(s, SLOT_USED, SLOT_GEN_ONE); /* a new holder, maybe from
                                                 housekeeping (RESERVED) */
        w->given = s;
        wake(p, w);
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
static void wake_unarmed_head(tether_pool *p, const tether__slot *s) {
    if (others_out(p, s))
        return;
    pthread_mutex_lock(&p->lock);
    if (p->head && !p->head->nb && atomic_load(&p->head_unarmed)) {
        atomic_store(&p->head_unarmed, 0);
        pthread_cond_signal(&p->head->cv);
    }
    pthread_mutex_unlock(&p->lock);
}

/* What a release does after publishing s idle, h being what its hand-over
 * gave before (0: nobody waited, -1: the first waiter wants its own last
 * connection). The slot may be taken, even closed, at any moment here. */
TETHER__HOT static void after_publish(tether_pool *p, tether__slot *s, int h) {
    for (;;) {
        /* A close that began after our first check may have swept the idle
         * slots already and now waits for this one: take it back and close
         * it (a full barrier on both sides; the CAS decides who closes). */
        if (atomic_load(&p->closing)) {
            if (slot_cas(s, SLOT_IDLE, SLOT_RESERVED))
                tether__pool_discard(p, s, CLOSE_SHUTDOWN);
            return;
        }
        if (atomic_load(&p->waiters) == 0)
            return;
        if (h != 0 || !head_overdue(p))
            break;
        if (!slot_take(s, SLOT_IDLE))
            return; /* someone took it */
        if ((h = handoff(p, s)) > 0)
            return;
        slot_set(s, SLOT_IDLE, 0); /* and look at closing again */
    }
    if (atomic_load(&p->head_unarmed)) /* seq_cst: see sleep_turn */
        wake_unarmed_head(p, s);
}

TETHER__HOT void tether__pool_put_idle(tether_pool *p, tether__slot *s) {
    if (atomic_load_explicit(&p->closing, memory_order_relaxed)) {
        tether__pool_discard(p, s, CLOSE_SHUTDOWN); /* never idle again */
        return;
    }
    int h = head_overdue(p) ? handoff(p, s) : 0;
    if (h > 0)
        return;
    /* Publishing s and reading the waiter count after it are seq_cst, and a
     * waiter fences between queuing and its rescan (wait_turn): either a
     * waiter that queued before it is seen, or that waiter's own rescan
     * sees this slot idle. In barging mode the first waiter also polls
     * every 2 x barge_limit_us; one made first by a hand-over is woken when
     * no other connection is out, else the housekeeper's tick serves it
     * (tether__pool_serve_head). From the publication on, s counts as
     * returned, so the pool could be destroyed under us: the in-flight
     * count in s's state word, added in the same step, holds
     * tether_pool_destroy back until our last touch of the pool. */
    slot_set(s, SLOT_IDLE, SLOT_INFLIGHT);
    after_publish(p, s, h);
    atomic_fetch_sub(&s->state, SLOT_INFLIGHT);
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
    if (!head_overdue(p))
        return;
    pthread_mutex_lock(&p->lock);
    tether__slot *want = p->head ? (tether__slot *)p->head->last : NULL;
    pthread_mutex_unlock(&p->lock);
    tether__slot *s = want && try_take(want) ? want : take_idle(p);
    if (s)
        tether__pool_put_idle(p, s);
}

/* ---- creating connections ------------------------------------------------ */

/* Claim a free slot for a creation already counted in total/creating. */
static tether__slot *claim_free_locked(tether_pool *p) {
    for (int i = 0; i < p->nslots; i++) {
        tether__slot *s = &p->slots[i];
        if (slot_state(s) == SLOT_FREE) {
            slot_set(s, SLOT_CREATING, 0);
            return s;
        }
    }
    return NULL; /* cannot happen while total <= nslots */
}

static void setup_slot(tether_pool *p, tether__slot *s, void *conn) {
    int64_t now = tether__pool_now(p);
    pthread_mutex_lock(&p->lock);
    double life = 0.85 + 0.15 * tether__rng_double(&p->rng);
    double idle = 1.0 + tether__rng_double(&p->rng);
    pthread_mutex_unlock(&p->lock);
    s->conn = conn;
    s->handle = p->drv->handle(conn);
    s->gen = atomic_load(&p->gen);
    s->created_ms = s->checked_ms = s->released_ms = now; /* no probe due */
    s->expire_ms = p->o.max_lifetime_ms
                       ? now + (int64_t)((double)p->o.max_lifetime_ms * life)
                       : INT64_MAX;
    s->idle_limit_ms = (int64_t)((double)p->o.idle_timeout_ms * idle);
}

/* Connect for a reservation within budget_ms. *cut: the failure came of
 * the caller's budget running out with nothing learnt of the server (the
 * connector's judgement, or for a bare driver a timeout that used the
 * whole budget). */
static int pool_connect(tether_pool *p, int64_t budget_ms, void **conn,
                        tether_error *err, int *cut) {
    *cut = 0;
    if (p->o.connector)
        return tether__connector_open(p->o.connector, budget_ms, conn, err,
                                      cut);
    const tether_clock *clock = tether__clock(p->o.clock);
    int64_t t0 = tether__now_ms(clock);
    int rc = tether__driver_connect(p->drv, p->o.driver_ctx, NULL, budget_ms,
                                    p->o.clock, conn, err);
    /* the whole of a short budget, give or take the ms's rounding */
    *cut = rc == TETHER_ETIMEDOUT && budget_ms >= 0 &&
           budget_ms < TETHER__CUT_FLOOR_MS &&
           tether__now_ms(clock) - t0 >= budget_ms - 1;
    return rc;
}

/* Tell the breaker how a connect under permit went. A throttled refusal
 * (53300) comes from a server that is up but busy: while other
 * connections are out, callers wait for their release and it blocks
 * nothing; a pool with none has nothing to wait for, so it paces the next
 * connect like a failure (callers see the breaker's error with the class
 * throttled: up, busy). A server starting up or shutting down (57P03)
 * serves no new session whatever is out: it always counts, so that one
 * pool makes no burst of connects at it. A connect the caller's deadline
 * cut short with nothing learnt counts for nothing (docs/breaker.md). */
static void record_connect(tether_pool *p, int permit, int rc, int cut,
                           const tether_error *err) {
    if (rc != 0 && cut) {
        if (permit == TETHER_PERMIT_PROBE)
            tether__breaker_probe_void(p->breaker);
        return;
    }
    int ok = rc == 0;
    if (!ok && err->cls == TETHER_CLASS_THROTTLED &&
        strcmp(err->sqlstate, "57P03") != 0) {
        pthread_mutex_lock(&p->lock);
        ok = p->total > 1; /* this creation counts in total */
        pthread_mutex_unlock(&p->lock);
    }
    tether_breaker_record(p->breaker, permit, ok, err);
}

int tether__pool_connect_reserved(tether_pool *p, int permit, int64_t budget_ms,
                                  int probe, tether__slot **out,
                                  tether_error *err) {
    *out = NULL;
    tether_error scratch; /* the failure's class decides below */
    if (!err)
        err = &scratch;
    void *conn = NULL;
    int rc = TETHER_EOPEN, cut = 0;
    if (permit != TETHER_EOPEN)
        rc = pool_connect(p, budget_ms, &conn, err, &cut);
    if (p->breaker && permit != TETHER_EOPEN)
        record_connect(p, permit, rc, cut, err);
    pthread_mutex_lock(&p->lock);
    p->creating--;
    if (probe)
        atomic_store(&p->probing, 0);
    tether__slot *s = rc == 0 ? claim_free_locked(p) : NULL;
    if (rc != 0)
        p->total--;
    /* A probe's connection goes to the first waiter (probe.c): capacity
     * for the others only after, or that waiter would make a second. */
    if (!atomic_load(&p->closing) && !(probe && rc == 0))
        grant_capacity_locked(p);
    pthread_cond_broadcast(&p->drained);
    pthread_mutex_unlock(&p->lock);
    if (rc != 0) {
        if (probe)
            atomic_fetch_add(&p->probe_failures, 1);
        if (cut)
            atomic_fetch_add(&p->connects_cut, 1);
        else if (rc != TETHER_EOPEN)
            atomic_fetch_add(&p->connect_failures, 1);
        return rc;
    }
    slot_take(s, SLOT_CREATING);
    setup_slot(p, s, conn);
    atomic_fetch_add(&p->created, 1);
    *out = s;
    return 0;
}

int tether__pool_create_reserved(tether_pool *p, int64_t budget_ms,
                                 tether__slot **out, tether_error *err) {
    int permit = TETHER_PERMIT_CALL;
    if (p->breaker && atomic_load(&p->probing)) {
        permit = TETHER_EOPEN; /* give the reservation back: wait for it */
    } else if (p->breaker) {
        permit = tether_breaker_allow(p->breaker, err);
        if (permit == TETHER_EOPEN)
            atomic_fetch_add(&p->breaker_rejections, 1);
        /* The probe is the pool's: on its thread, with the whole budget
         * (a virtual clock's tests keep it on the caller's, in step). */
        if (permit == TETHER_PERMIT_PROBE && p->real_clock &&
            tether__pool_probe_start(p) == 0) {
            *out = NULL;
            return TETHER__EPROBING;
        }
    }
    int rc = tether__pool_connect_reserved(p, permit, budget_ms, 0, out, err);
    return rc == TETHER_EOPEN && permit == TETHER_EOPEN &&
                   atomic_load(&p->probing)
               ? TETHER__EPROBING
               : rc;
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
static tether__slot *head_look(tether_pool *p, const waiter *w) {
    tether__slot *last = (tether__slot *)w->last;
    if (last && try_take(last))
        return last;
    tether__slot *s = take_idle(p);
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
static int sleep_turn(acq *a, waiter *w, tether__slot **s) {
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
    pthread_cond_timedwait(&w->cv, &p->lock, &ts);
    if (w->given || w->wake) /* handed over: no clock read under the lock */
        return 1;
    int64_t now = tether__mono_ns();
    if (w->probe_ns && now >= w->probe_ns) {
        w->probe_ns = 0; /* the period is over: capacity, first come first */
        grant_capacity_locked(p); /* served, or a new period to wait for */
    }
    return w->given || w->wake || now < a->deadline_ns;
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
    waiter w;
    memset(&w, 0, sizeof(w));
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w.cv, &ca);
    pthread_condattr_destroy(&ca);
    w.last = last_used(p);
    w.deadline_ns = a->deadline_ns;
    w.probe_ns = a->probe_ns;
    a->probe_ns = 0;
    queue_push(p, &w);
    pthread_mutex_unlock(&p->lock);
    /* Rescan after publishing ourselves: a release that ran before it
     * published its slot as idle without seeing us. The fence orders the
     * count's increment before the rescan's loads (see put_idle). */
    atomic_thread_fence(memory_order_seq_cst);
    tether__slot *s = take_idle(p);
    pthread_mutex_lock(&p->lock);
    while (!s && !w.given && !w.wake && sleep_turn(a, &w, &s))
        ; /* the first waiter looks for an idle one before each sleep */
    if (!w.given && !w.wake)
        queue_remove(p, &w, 1);
    pthread_mutex_unlock(&p->lock);
    pthread_cond_destroy(&w.cv);
    if (s) { /* found by the rescan: give back anything granted since */
        if (w.given)
            tether__pool_put_idle(p, w.given);
        if (w.wake == WAKE_CREATE)
            unreserve(p);
        *got = s;
        return 1;
    }
    if (w.given) {
        *got = w.given;
        return 1;
    }
    if (w.wake == WAKE_CREATE) {
        int rc = tether__pool_create_reserved(p, left_ms(a), got, a->err);
        return rc == 0 ? 1 : after_refusal(a, rc);
    }
    if (w.wake == WAKE_CLOSED || atomic_load(&p->closing))
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
    /* no_create (wait for a release) holds only while one may come. */
    int room = p->total < p->o.max_size && p->creating < p->o.max_creating &&
               (!no_create || p->total == 0);
    if (p->total > 0) { /* others out: no probe to wait for */
        if (!room || p->nqueued)
            return ARRIVE_QUEUE;
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
    int rc = tether_error_set(
        err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
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

int tether__pool_timed_out(tether_pool *p, int64_t waited_ms,
                           tether_error *err) {
    atomic_fetch_add(&p->timeouts, 1);
    tether_error last;
    if (err && atomic_load(&p->probing) && p->breaker &&
        tether__breaker_last(p->breaker, &last))
        return probing_timed_out(p, waited_ms, &last, err);
    char probe[96] = "";
    if (atomic_load(&p->probing))
        snprintf(
            probe, sizeof(probe),
            "; the breaker's probe has been connecting for %lld ms",
            (long long)((tether__mono_ns() - p->probe_start_ns) / 1000000));
    return tether_error_set(
        err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
        "pool %s: no connection within %lld ms (%d in use, %d waiting%s)",
        p->name, (long long)waited_ms, p->total, atomic_load(&p->waiters),
        probe);
}

static int timed_out(acq *a) {
    return tether__pool_timed_out(
        a->p, (a->deadline_ns - a->start_ns) / 1000000, a->err);
}

static int acquire_slow(acq *a, tether__slot **out) {
    tether_pool *p = a->p;
    for (;;) {
        if (atomic_load(&p->closing))
            return tether_error_set(a->err, TETHER_ECLOSED,
                                    TETHER_CLASS_PERMANENT, "pool %s is closed",
                                    p->name);
        tether__slot *s = take_idle(p);
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
        if (checkout(p, s, a->file, a->line, NULL) >= 0) {
            *out = s;
            return 0;
        }
    }
}

/* The acquire that found no idle connection: wait, create or fail. Out of
 * line, so that its frame (an error for when the caller passed none) is
 * not the fast path's. */
__attribute__((noinline)) static int
acquire_wait(tether_pool *p, int64_t timeout_ms, tether__slot **out,
             tether_error *err, const char *file, int line) {
    if (timeout_ms < -1)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "pool %s: bad acquire timeout_ms %lld: want "
                                "-1 (the pool's) or >= 0",
                                p->name, (long long)timeout_ms);
    if (timeout_ms < 0)
        timeout_ms = p->o.acquire_timeout_ms;
    timeout_ms = TETHER__MIN(timeout_ms, TETHER_DURATION_MAX_MS);
    tether_error scratch; /* acquire_slow reads the class of a failure */
    acq a = {p, tether__mono_ns(), 0, file, line, err ? err : &scratch, 0, 0};
    a.deadline_ns = a.start_ns + timeout_ms * 1000000LL;
    int rc = acquire_slow(&a, out);
    if (rc == 0)
        tether__hist_record(p, (tether__mono_ns() - a.start_ns) / 1000);
    return rc;
}

/* take is tether_pool_acquire_at giving the slot itself; inlined in both
 * callers, so that neither pays a call more than before. */
TETHER__HOT static inline __attribute__((always_inline)) int
take(tether_pool *p, int64_t timeout_ms, tether__slot **out, unsigned *v,
     tether_error *err, const char *file, int line) {
    *out = NULL;
    *v = 0;
    /* No closed check here: close bumps the generation, so checkout
     * discards whatever the fast path finds; the slow path reports it, and
     * a timeout below -1. */
    if (!head_overdue(p) && __builtin_expect(timeout_ms >= -1, 1)) {
        tether__slot *s;
        int64_t us = 0;
        while ((s = take_idle_v(p, v)) != NULL) {
            int rc = checkout(p, s, file, line, &us);
            if (rc == 0)
                relaxed_inc(&s->quick);
            else if (rc > 0) /* timed by its validation round trip */
                tether__hist_record(p, us);
            if (rc >= 0) {
                *out = s;
                return 0;
            }
        }
    }
    return acquire_wait(p, timeout_ms, out, err, file, line);
}

TETHER__HOT int tether__pool_take(tether_pool *p, int64_t timeout_ms,
                                  tether__slot **out, tether_error *err,
                                  const char *file, int line) {
    unsigned v;
    return take(p, timeout_ms, out, &v, err, file, line);
}

TETHER__HOT int tether_pool_acquire_at(tether_pool *p, int64_t timeout_ms,
                                       tether_lease **out, tether_error *err,
                                       const char *file, int line) {
    if (__builtin_expect(!p || !out, 0)) {
        if (out)
            *out = NULL;
        return tether__null(err, "tether_pool_acquire", p ? "out" : "p");
    }
    tether__slot *s;
    unsigned v; /* the state word the fast path's take wrote, else 0 */
    int rc = take(p, timeout_ms, &s, &v, err, file, line);
    if (rc == 0 && v == 0) /* the slow path: the slot is ours, read it */
        v = atomic_load_explicit(&s->state, memory_order_relaxed);
    *out = rc == 0 ? lease_token(s, v) : NULL;
    return rc;
}

/* ---- release ------------------------------------------------------------- */

TETHER__HOT static close_reason release_verdict(tether_pool *p,
                                                tether__slot *s) {
    if (atomic_load_explicit(&p->closing, memory_order_relaxed))
        return CLOSE_SHUTDOWN;
    int rc = p->drv->reset(s->conn, p->reset_query, NULL);
    if (rc < 0) /* a statement that outran its deadline: drain.c */
        return rc == TETHER__EDRAIN ? KEEP_DRAINING : CLOSE_RESET;
    if (rc == TETHER__FATAL) { /* shutdown, failover: all are suspect */
        tether__pool_fatal(p);
        return CLOSE_CLEARED;
    }
    if (s->gen != atomic_load_explicit(&p->gen, memory_order_relaxed))
        return atomic_load(&p->closing) ? CLOSE_SHUTDOWN : CLOSE_CLEARED;
    return CLOSE_NREASONS; /* keep it */
}

/* give_back is tether_lease_release of an owned slot (inlined, as take). */
TETHER__HOT static inline __attribute__((always_inline)) void
give_back(tether_pool *p, tether__slot *s) {
    close_reason why = release_verdict(p, s);
    if (why != CLOSE_NREASONS) {
        tether__pool_discard(p, s, why); /* KEEP_DRAINING: drains */
        return;
    }
    s->released_ms = s->checked_ms = tether__pool_now(p);
    if (p->leak_on)
        atomic_store_explicit(&s->acquired_ms, NOT_HELD, memory_order_relaxed);
    remember(p, s);
    tether__pool_put_idle(p, s);
}

TETHER__HOT void tether__pool_give_back(tether_pool *p, tether__slot *s) {
    give_back(p, s);
}

/* A release or discard of a lease that is not current: refused, counted,
 * logged (the slot and its connection are left alone). */
__attribute__((noinline)) static int stale_lease(const tether_lease *l,
                                                 const char *what) {
    tether_pool *p = lease_slot(l)->pool;
    atomic_fetch_add(&p->stale_releases, 1);
    tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_ERROR,
                "pool %s: %s of a lease already released or discarded: "
                "refused (the connection is not touched)",
                p->name, what);
    return TETHER_EINVAL;
}

TETHER__HOT int tether_lease_release(tether_lease *l) {
    if (!l)
        return 0; /* as free(NULL) */
    tether__slot *s = lease_held(l);
    if (!s)
        return stale_lease(l, "release");
    give_back(s->pool, s);
    return 0;
}

int tether_lease_discard(tether_lease *l) {
    if (!l)
        return 0; /* as free(NULL) */
    tether__slot *s = lease_held(l);
    if (!s)
        return stale_lease(l, "discard");
    tether__pool_discard(s->pool, s, CLOSE_DISCARDED);
    return 0;
}

/* The slot of a current lease l, else NULL. */
static const tether__slot *lease_peek(const tether_lease *l) {
    const tether__slot *s = l ? lease_slot(l) : NULL;
    return s && lease_current(
                    l, atomic_load_explicit(&s->state, memory_order_relaxed))
               ? s
               : NULL;
}

TETHER__HOT void *tether_lease_handle(const tether_lease *l) {
    const tether__slot *s = lease_peek(l);
    return s ? s->handle : NULL;
}

PGconn *tether_pq_conn(const tether_lease *l) {
    return tether_lease_handle(l);
}

/* ---- clear and close ----------------------------------------------------- */

/* Discard every idle connection that fails keep(p, s). */
static void sweep_idle(tether_pool *p, close_reason why) {
    for (int i = 0; i < p->nslots; i++) {
        tether__slot *s = &p->slots[i];
        if (slot_cas(s, SLOT_IDLE, SLOT_RESERVED))
            tether__pool_discard(p, s, why);
    }
}

void tether_pool_clear(tether_pool *p) {
    if (!p)
        return;
    atomic_fetch_add(&p->gen, 1);
    sweep_idle(p, CLOSE_CLEARED);
    if (p->route)
        tether_pool_clear(p->route->read);
}

static void wake_all_closed(tether_pool *p) {
    pthread_mutex_lock(&p->lock);
    while (p->head) {
        waiter *w = p->head;
        queue_remove(p, w, 1);
        w->wake = WAKE_CLOSED;
        wake(p, w);
    }
    pthread_mutex_unlock(&p->lock);
}

int tether_pool_close(tether_pool *p, int64_t wait_ms, tether_error *err) {
    if (!p)
        return tether__null(err, "tether_pool_close", "p");
    if (p->route) /* the read side first, within the same wait_ms */
        wait_ms = tether__route_close(p, wait_ms);
    atomic_store(&p->closing, 1);
    atomic_fetch_add(&p->gen, 1); /* what the fast path finds is stale */
    wake_all_closed(p);
    sweep_idle(p, CLOSE_SHUTDOWN);
    wait_ms = TETHER__MIN(wait_ms, TETHER_DURATION_MAX_MS);
    int64_t deadline =
        wait_ms < 0 ? -1 : tether__mono_ns() + wait_ms * 1000000LL;
    struct timespec ts = {(time_t)(deadline / 1000000000LL),
                          (long)(deadline % 1000000000LL)};
    int rc = 0;
    pthread_mutex_lock(&p->lock);
    while (p->total > 0 && rc == 0) {
        if (deadline < 0)
            pthread_cond_wait(&p->drained, &p->lock);
        else if (pthread_cond_timedwait(&p->drained, &p->lock, &ts) ==
                 ETIMEDOUT)
            rc = TETHER_ETIMEDOUT;
    }
    int left = p->total;
    pthread_mutex_unlock(&p->lock);
    sweep_idle(p, CLOSE_SHUTDOWN); /* created while we waited */
    if (rc)
        return tether_error_set(err, rc, TETHER_CLASS_TRANSIENT,
                                "pool %s: %d connections still leased after "
                                "%lld ms",
                                p->name, left, (long long)wait_ms);
    return 0;
}

/* ---- for cq.c: the non-blocking acquire --------------------------------- */

tether__slot *tether__pool_take_idle(tether_pool *p) {
    return take_idle(p);
}

int tether__pool_checkout(tether_pool *p, tether__slot *s, const char *file,
                          int line) {
    return checkout(p, s, file, line, NULL);
}

void tether__pool_queue_push(tether_pool *p, waiter *w) {
    queue_push(p, w);
}

void tether__pool_queue_remove(tether_pool *p, waiter *w, int wake_next) {
    queue_remove(p, w, wake_next);
}

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
