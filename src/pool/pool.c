/* pool.c - the pool: options, create and destroy, creating connections
 * (reservations, the breaker's permit, the connect), closing them, clear
 * and close. The fast path is the slot's (slot.c), waiting the wait
 * queue's (waitq.c); the layers above (cq.c, housekeeper.c, metrics.c,
 * route.c) call into these three and are never called from them. See
 * docs/pool.md. */
#include "conninfo.h"
#include "waitq.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    o->txn_reserve_timeout_ms = TETHER__TXN_RESERVE_MS;
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
    if (o->max_size_limit != 0 &&
        (o->max_size_limit < o->max_size || o->max_size_limit > 100000))
        return bad_opt(err, "max_size_limit", o->max_size_limit,
                       "want 0 (max_size) or max_size..100000");
    if (o->min_size < 0 || o->min_size > o->max_size)
        return bad_opt(err, "min_size", o->min_size, "want 0..max_size");
    if (o->limit != TETHER_POOL_LIMIT_FIXED &&
        o->limit != TETHER_POOL_LIMIT_ADAPTIVE)
        return bad_opt(err, "limit", o->limit,
                       "want TETHER_POOL_LIMIT_FIXED (0) or "
                       "TETHER_POOL_LIMIT_ADAPTIVE (1)");
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
    const int64_t *ms[] = {&o->validate_idle_ms,      &o->validate_timeout_ms,
                           &o->keepalive_ms,          &o->idle_timeout_ms,
                           &o->max_lifetime_ms,       &o->leak_threshold_ms,
                           &o->txn_reserve_timeout_ms};
    const char *names[] = {"validate_idle_ms",      "validate_timeout_ms",
                           "keepalive_ms",          "idle_timeout_ms",
                           "max_lifetime_ms",       "leak_threshold_ms",
                           "txn_reserve_timeout_ms"};
    for (int i = 0; i < 7; i++)
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
    tether__txn_free(p);
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
    p->nslots = TETHER__MAX(o->max_size, o->max_size_limit);
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

int tether__pool_new(tether_pool **out, const tether_pool_opts *o,
                     tether_error *err) {
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
    p->track = (o->leak_threshold_ms > 0 ? TRACK_SITES : 0) |
               (o->limit == TETHER_POOL_LIMIT_ADAPTIVE ? TRACK_HOLD : 0);
    p->txn_timeout_ms = o->txn_reserve_timeout_ms > 0
                            ? o->txn_reserve_timeout_ms
                            : TETHER__TXN_RESERVE_MS;
    atomic_init(&p->txn_warn_ms, INT64_MIN);
    p->o.conninfo = p->conninfo;
    p->o.name = p->name;
    p->o.reset_query = p->reset_query;
    tether__rng_seed(&p->rng, o->seed);
    p->retire_gap_ms = o->max_lifetime_ms * 15 / 100 / o->max_size;
    tether__adaptive_init(p); /* sets o.max_size to the first limit */
    for (int i = 0; i < p->nslots; i++) {
        p->slots[i].pool = p;
        atomic_init(&p->slots[i].acquired_ms, NOT_HELD);
    }
    *out = p;
    return 0;
}

void tether__pool_free(tether_pool *p) {
    pthread_mutex_lock(&p->lock);
    while (p->bg > 0 || p->total > 0)
        pthread_cond_wait(&p->drained, &p->lock);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nslots; i++) /* releases still reading p */
        while (atomic_load(&p->slots[i].state) & SLOT_INFLIGHT_MASK)
            sched_yield();
    tether__slot_forget_pool(p);
    pthread_cond_destroy(&p->drained);
    pthread_mutex_destroy(&p->lock);
    free_pool(p);
}

/* ---- the acquire-time histogram --------------------------------------------
 */

const int64_t tether__hist_bounds_us[TETHER_HIST_BUCKETS] = {
    10,    50,    100,   250,    500,    1000,    2500,    5000,
    10000, 25000, 50000, 100000, 250000, 1000000, 5000000, INT64_MAX};

int tether__pool_acquire_limit(const tether_pool *p, int64_t timeout_ms,
                               int64_t *ms, tether_error *err) {
    if (timeout_ms < -1)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "pool %s: bad acquire timeout_ms %lld: want "
                                "-1 (the pool's) or >= 0",
                                p->name, (long long)timeout_ms);
    if (timeout_ms < 0)
        timeout_ms = p->o.acquire_timeout_ms;
    *ms = TETHER__MIN(timeout_ms, TETHER_DURATION_MAX_MS);
    return 0;
}

void tether__pool_hist_add(tether_pool *p, int64_t us) {
    int i = 0;
    while (i < TETHER_HIST_BUCKETS - 1 && us > tether__hist_bounds_us[i])
        i++;
    atomic_fetch_add_explicit(&p->hist[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->hist_sum_us, (uint64_t)(us < 0 ? 0 : us),
                              memory_order_relaxed);
}

/* ---- connections --------------------------------------------------------- */

/* count_in adds a time of us microseconds to the histogram h (sum in
 * *sum), in the acquire histogram's buckets. */
static void count_in(_Atomic uint64_t *h, _Atomic uint64_t *sum, int64_t us) {
    int i = 0;
    while (i < TETHER_HIST_BUCKETS - 1 && us > tether__hist_bounds_us[i])
        i++;
    atomic_fetch_add_explicit(&h[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(sum, (uint64_t)(us < 0 ? 0 : us),
                              memory_order_relaxed);
}

/* count_create counts one connect of us microseconds that succeeded. */
static void count_create(tether_pool *p, int64_t us) {
    count_in(p->create_hist, &p->create_sum_us, us);
}

__attribute__((noinline)) void
tether__pool_lease_begin(tether_pool *p, tether__slot *s, const char *file,
                         int line, int64_t now_ms) {
    if (p->track & TRACK_SITES) {
        atomic_store_explicit(&s->file, file, memory_order_relaxed);
        atomic_store_explicit(&s->line, line, memory_order_relaxed);
        atomic_store_explicit(&s->leak_reported, 0, memory_order_relaxed);
        atomic_store_explicit(&s->acquired_ms, now_ms, memory_order_release);
    }
    if (p->track & TRACK_HOLD) /* the adaptive limit's stamp */
        s->taken_us = tether__pool_now_us(p);
}

__attribute__((noinline)) void
tether__pool_lease_done(tether_pool *p, tether__slot *s, int64_t now_ms) {
    if (p->track & TRACK_HOLD) /* the adaptive limit's sample */
        tether__adaptive_hold(&p->ad,
                              (uint32_t)(tether__pool_now_us(p) - s->taken_us));
    if (!(p->track & TRACK_SITES))
        return;
    int64_t since = atomic_exchange_explicit(&s->acquired_ms, NOT_HELD,
                                             memory_order_relaxed);
    if (since != NOT_HELD && now_ms >= since)
        count_in(p->use_hist, &p->use_sum_us, (now_ms - since) * 1000);
}

void tether__pool_fatal(tether_pool *p) {
    tether_pool_clear(p);
    if (p->o.connector)
        tether_connector_invalidate(p->o.connector);
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
    atomic_fetch_and(&s->state, ~SLOT_KEYED); /* a keyed lease discarded */
    pthread_mutex_lock(&p->lock);
    slot_set(s, SLOT_FREE, 0);
    p->total--;
    if (atomic_load_explicit(&p->slow, memory_order_relaxed))
        tether__pool_slow_locked(p); /* back within max_size (ops.c) */
    if (!atomic_load(&p->closing))
        tether__pool_grant_locked(p);
    pthread_cond_broadcast(&p->drained);
    pthread_mutex_unlock(&p->lock);
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

#define SWAP(x, y)                                                             \
    do {                                                                       \
        __typeof__(x) t_ = (x);                                                \
        (x) = (y);                                                             \
        (y) = t_;                                                              \
    } while (0)

void tether__pool_exchange(tether__slot *a, tether__slot *b) {
    SWAP(a->conn, b->conn);
    SWAP(a->handle, b->handle);
    SWAP(a->gen, b->gen);
    SWAP(a->expire_ms, b->expire_ms);
    SWAP(a->released_ms, b->released_ms);
    SWAP(a->checked_ms, b->checked_ms);
    SWAP(a->created_ms, b->created_ms);
    SWAP(a->idle_limit_ms, b->idle_limit_ms);
    SWAP(a->lag_conn, b->lag_conn);
    SWAP(a->lag_checked_ms, b->lag_checked_ms);
    SWAP(a->lagging, b->lagging);
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
    int64_t t0 = tether__mono_ns();
    if (permit != TETHER_EOPEN)
        rc = pool_connect(p, budget_ms, &conn, err, &cut);
    if (rc == 0) /* the connect time (docs/metrics.md) */
        count_create(p, (tether__mono_ns() - t0) / 1000);
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
        tether__pool_grant_locked(p);
    pthread_cond_broadcast(&p->drained);
    pthread_mutex_unlock(&p->lock);
    if (rc != 0) {
        if (probe)
            atomic_fetch_add(&p->probe_failures, 1);
        if (cut) {
            atomic_fetch_add(&p->connects_cut, 1);
        } else if (rc != TETHER_EOPEN) {
            atomic_fetch_add(&p->connect_failures, 1);
            atomic_store(&p->last_fail_ns, tether__mono_ns());
            if (p->ad.on && err->cls == TETHER_CLASS_THROTTLED &&
                (!strcmp(err->sqlstate, "53300") ||
                 !strcmp(err->sqlstate, "57P03")))
                tether__adaptive_full(p, err->sqlstate); /* the server is
                                                            full */
        }
        return rc;
    }
    slot_take_lease(s, SLOT_CREATING);
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

/* ---- runtime control's slow mode (ops.c) --------------------------------
 */

void tether__pool_slow_locked(tether_pool *p) {
    int want = atomic_load(&p->paused) || p->total > p->o.max_size;
    if (want == atomic_load(&p->slow))
        return;
    atomic_store(&p->slow, want);
    atomic_fetch_add(&p->waiters,
                     want ? TETHER__SLOW_BIAS : -TETHER__SLOW_BIAS);
}

/* ---- clear and close ----------------------------------------------------- */

/* Discard every idle connection, and every one reserved to a
 * transaction (affinity.c). */
static void sweep_idle(tether_pool *p, close_reason why) {
    for (int i = 0; i < p->nslots; i++) {
        tether__slot *s = &p->slots[i];
        if (slot_cas(s, SLOT_IDLE, SLOT_RESERVED))
            tether__pool_discard(p, s, why);
    }
    tether__txn_sweep(p, why);
}

void tether_pool_clear(tether_pool *p) {
    if (!p)
        return;
    atomic_fetch_add(&p->gen, 1);
    sweep_idle(p, CLOSE_CLEARED);
    if (p->on_clear) /* the owner above: a router clears its read side */
        p->on_clear(p->on_clear_arg);
}

int tether__pool_shut(tether_pool *p, int64_t wait_ms, tether_error *err) {
    atomic_store(&p->closing, 1);
    atomic_fetch_add(&p->gen, 1); /* what the fast path finds is stale */
    tether__waitq_wake_all_closed(p);
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
