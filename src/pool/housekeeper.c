/* housekeeper.c - each pool's background duties, run on the core ticker's
 * thread (src/core/ticker.c, one for the process, which also publishes the
 * coarse time the acquire fast path reads): every 10 ms tick it hands a
 * connection left idle to a first waiter that is overdue and not polling
 * (tether__pool_serve_head), and every 100 ms it runs a housekeeping pass: idle
 * timeout, spaced lifetime retirement, leak reports, keepalive of long-idle
 * connections, the bound of reservations to a transaction (affinity.c),
 * refill to min_size and the move of a share of the connections to servers
 * Patroni's list gained (docs/patroni.md, "Rebalance"). The pass itself
 * never blocks on the network: creations and keepalive round trips run on
 * short-lived worker threads, so the published time never goes stale. Pools on
 * a virtual clock are left to tests, which call tether__pool_housekeep
 * directly. */
#include "cq.h"
#include "housekeeper.h"
#include "waitq.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PASS_EVERY 10 /* ticks */

/* ---- workers: background creation and keepalive ------------------------- */

/* connect_bg makes a connection on a worker thread for a reservation
 * counted by spawn_bg; returns its slot (USED), or NULL (said in the log
 * when it failed). */
static tether__slot *connect_bg(tether_pool *p) {
    tether__slot *s = NULL;
    tether_error err;
    int rc = tether__pool_create_reserved(p, p->o.acquire_timeout_ms, &s, &err);
    if (rc == 0 && atomic_load(&p->closing)) {
        tether__pool_discard(p, s, CLOSE_SHUTDOWN);
        return NULL;
    }
    if (rc != 0 && rc != TETHER_EOPEN && rc != TETHER__EPROBING)
        tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_WARN,
                    "pool %s: background connect failed: %s", p->name,
                    err.message);
    return rc == 0 ? s : NULL;
}

/* spawn_bg starts worker fn for one more connection (lock held); returns
 * 0, or -1 when no thread could start (nothing counted). */
static int spawn_bg(tether_pool *p, void *(*fn)(void *)) {
    p->total++;
    p->creating++;
    p->bg++;
    if (tether__pool_spawn(fn, p) == 0)
        return 0;
    p->total--;
    p->creating--;
    p->bg--;
    return -1;
}

static void *fill_main(void *arg) {
    tether_pool *p = arg;
    tether__slot *s = connect_bg(p);
    if (s)
        tether__pool_put_idle(p, s);
    tether__pool_bg_done(p);
    return NULL;
}

void tether__pool_fill(tether_pool *p) {
    pthread_mutex_lock(&p->lock);
    while (!atomic_load(&p->closing) && !atomic_load(&p->paused) &&
           p->total < p->o.min_size && p->creating < p->o.max_creating &&
           spawn_bg(p, fill_main) == 0)
        ;
    pthread_mutex_unlock(&p->lock);
}

typedef struct keepalive_job {
    tether_pool *p;
    int n;
    tether__slot *slots[];
} keepalive_job;

static void keepalive_run(tether_pool *p, tether__slot **slots, int n) {
    for (int i = 0; i < n; i++) {
        tether__slot *s = slots[i];
        if (p->drv->validate(s->conn, p->o.validate_timeout_ms, NULL)) {
            tether__pool_discard(p, s, CLOSE_VALIDATION);
            continue;
        }
        s->checked_ms = tether__pool_now(p);
        tether__pool_put_idle(p, s);
    }
}

static void *keepalive_main(void *arg) {
    keepalive_job *j = arg;
    keepalive_run(j->p, j->slots, j->n);
    tether__pool_bg_done(j->p);
    tether__free(j);
    return NULL;
}

/* Validate reserved slots in the background (inline on a virtual clock,
 * so tests stay deterministic). */
static void keepalive_start(tether_pool *p, tether__slot **slots, int n) {
    keepalive_job *j = NULL;
    if (p->real_clock)
        j = tether__malloc(sizeof(*j) + sizeof(tether__slot *) * (size_t)n);
    if (!j) {
        keepalive_run(p, slots, n);
        return;
    }
    j->p = p;
    j->n = n;
    memcpy(j->slots, slots, sizeof(tether__slot *) * (size_t)n);
    pthread_mutex_lock(&p->lock);
    p->bg++;
    pthread_mutex_unlock(&p->lock);
    if (tether__pool_spawn(keepalive_main, j) != 0) {
        tether__pool_bg_done(p);
        keepalive_run(p, slots, n);
        tether__free(j);
    }
}

/* ---- a rebalance --------------------------------------------------------- */

/* What the housekeeper knew of a slot at its last pass. */
typedef struct tether__rebal_seen {
    unsigned leases;     /* the state word's generation: leases taken */
    unsigned char fresh; /* its connection was made after the rebalance
                            began (seen when it was reserved) */
} rebal_seen;

#define REBAL_PASSES 600 /* a rebalance ends after 60 s, moved or not */

static unsigned leases_of(const tether__slot *s) {
    return atomic_load_explicit(&s->state, memory_order_relaxed) >>
           SLOT_GEN_SHIFT;
}

/* rebalance_start: when Patroni's list gained servers (a replica added,
 * an old leader back as a replica), the share of p's connections they
 * would hold in a spread made now (at least one) is to move, and the
 * connector puts the new servers first for the connects that move them. */
static int rebalance_start(tether_pool *p, int64_t now) {
    int added = 0, servers = 0;
    if (atomic_load(&p->rebal_moving) ||
        !tether__connector_added(p->o.connector, &p->rebal_gen, &added,
                                 &servers))
        return 0;
    pthread_mutex_lock(&p->lock);
    int n = p->total;
    pthread_mutex_unlock(&p->lock);
    int move = (n * added + servers / 2) / servers;
    if (move == 0 && n > 0)
        move = 1;
    if (move == 0)
        return 0;
    if (!p->rebal_seen && !(p->rebal_seen = tether__calloc(
                                (size_t)p->nslots, sizeof(*p->rebal_seen))))
        return 0; /* no memory: the connections stay where they are */
    for (int i = 0; i < p->nslots; i++)
        p->rebal_seen[i] = (rebal_seen){leases_of(&p->slots[i]), 0};
    p->rebal_left = move;
    p->rebal_passes = 0;
    p->rebal_before_ms = now;
    tether__connector_favour(p->o.connector, (move + added - 1) / added);
    tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_INFO,
                "pool %s: %d new server%s in Patroni's list of %d: moving %d "
                "of %d connections",
                p->name, added, added == 1 ? "" : "s", servers, move, n);
    return 1;
}

static void rebalance_end(tether_pool *p) {
    p->rebal_left = 0;
    tether__free(p->rebal_seen);
    p->rebal_seen = NULL;
}

/* take_old reserves idle slot i when its connection is older than the
 * rebalance; a newer one goes back and is remembered as such. */
static int take_old(tether_pool *p, int i) {
    tether__slot *s = &p->slots[i];
    if (!slot_cas(s, SLOT_IDLE, SLOT_RESERVED))
        return 0;
    if (s->created_ms < p->rebal_before_ms)
        return 1;
    p->rebal_seen[i].fresh = 1;
    tether__pool_put_idle(p, s);
    return 0;
}

/* take_hot reserves the most used slot for the exchange: it is most
 * often leased, so it is tried every millisecond for up to MOVE_WAIT_MS
 * (the mover's own thread waits, no caller). */
#define MOVE_WAIT_MS 200
static tether__slot *take_hot(tether_pool *p, const tether__slot *s) {
    int h = p->rebal_hot;
    tether__slot *hs = h >= 0 ? &p->slots[h] : NULL;
    if (!hs || hs == s)
        return NULL;
    for (int i = 0; i < MOVE_WAIT_MS && !atomic_load(&p->closing); i++) {
        if (slot_cas(hs, SLOT_IDLE, SLOT_RESERVED))
            return hs;
        if (slot_state(hs) == SLOT_FREE) /* closed meanwhile */
            return NULL;
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    return NULL;
}

/* The mover: connects (a new server first), then swaps the new connection
 * into the most used slot, so that the callers who use that slot reach
 * the new server; that slot's old connection stays, idle, in the new
 * one's place. */
static void *move_main(void *arg) {
    tether_pool *p = arg;
    tether__slot *s = connect_bg(p);
    /* Landed when on a server the list added: a connect whose first host,
     * the new one, failed went on to an old one, and then the next pass
     * moves once more. */
    int fresh = s && tether__connector_fresh_last(p->o.connector);
    tether__slot *hs = fresh ? take_hot(p, s) : NULL;
    if (fresh)
        atomic_fetch_add(&p->rebalanced, 1);
    else
        atomic_store(&p->rebal_missed, 1);
    if (hs) {
        if (hs->created_ms < p->rebal_before_ms)
            tether__pool_exchange(s, hs);
        tether__pool_put_idle(p, hs);
    }
    if (s)
        tether__pool_put_idle(p, s);
    atomic_store(&p->rebal_moving, 0);
    tether__pool_bg_done(p);
    return NULL;
}

/* rebalance_pass moves one connection: the idle one least used since the
 * last pass closes, and a mover replaces it. */
static void rebalance_pass(tether_pool *p, int64_t now) {
    /* The first move waits for the next pass: the use of each slot is
     * counted from here, and with none counted yet the most used slot,
     * where the move should land, is unknown. */
    if (rebalance_start(p, now) || !p->rebal_seen ||
        atomic_load(&p->rebal_moving))
        return;
    if (atomic_exchange(&p->rebal_missed, 0)) { /* (move_main) */
        p->rebal_left++;
        tether__connector_favour(p->o.connector, 1);
    }
    if (!p->rebal_left || ++p->rebal_passes > REBAL_PASSES ||
        atomic_load(&p->closing)) {
        rebalance_end(p);
        return;
    }
    int cold = -1, hot = -1;
    unsigned cold_use = UINT_MAX, hot_use = 0;
    for (int i = 0; i < p->nslots; i++) {
        rebal_seen *w = &p->rebal_seen[i];
        unsigned now_leases = leases_of(&p->slots[i]);
        unsigned use = (now_leases - w->leases) & 0xffffu;
        w->leases = now_leases;
        if (w->fresh)
            continue;
        /* The most used may be leased now (most often it is): take_hot
         * waits for it. Judged among idle slots only, it was a slot nobody
         * used whenever the busy ones were leased at this moment, and the
         * moved connection went unused. */
        if (use > 0 && use >= hot_use && slot_state(&p->slots[i]) != SLOT_FREE)
            hot_use = use, hot = i;
        if (slot_state(&p->slots[i]) == SLOT_IDLE && use < cold_use)
            cold_use = use, cold = i;
    }
    if (cold < 0 || !take_old(p, cold))
        return; /* the next pass looks again */
    p->rebal_hot = hot == cold ? -1 : hot;
    p->rebal_left--;
    tether__pool_discard(p, &p->slots[cold], CLOSE_LIFETIME);
    pthread_mutex_lock(&p->lock);
    if (!atomic_load(&p->closing) && p->total < p->o.max_size) {
        atomic_store(&p->rebal_moving, 1);
        if (spawn_bg(p, move_main) != 0)
            atomic_store(&p->rebal_moving, 0);
    }
    pthread_mutex_unlock(&p->lock);
}

/* ---- one pass ------------------------------------------------------------ */

static void report_leak(tether_pool *p, tether__slot *s, int64_t now) {
    int64_t at = atomic_load_explicit(&s->acquired_ms, memory_order_acquire);
    if (at == NOT_HELD || now - at < p->leak_threshold_ms)
        return;
    int zero = 0;
    if (!atomic_compare_exchange_strong(&s->leak_reported, &zero, 1))
        return;
    const char *file = atomic_load_explicit(&s->file, memory_order_relaxed);
    int line = atomic_load_explicit(&s->line, memory_order_relaxed);
    atomic_fetch_add(&p->leaks, 1);
    tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_WARN,
                "pool %s: connection leak? held for %lld ms (threshold %lld "
                "ms), acquired at %s:%d",
                p->name, (long long)(now - at), (long long)p->leak_threshold_ms,
                file ? file : "?", line);
}

/* Decide for one reserved idle slot. Returns 1 if it awaits keepalive. */
static int inspect_idle(tether_pool *p, tether__slot *s, int64_t now,
                        int *excess) {
    if (s->gen != atomic_load(&p->gen)) {
        tether__pool_discard(p, s, CLOSE_CLEARED);
    } else if (*excess > 0 && p->o.idle_timeout_ms > 0 &&
               now - s->released_ms >= s->idle_limit_ms) {
        (*excess)--;
        tether__pool_discard(p, s, CLOSE_IDLE);
    } else if (tether__pool_retire_due(p, s, now)) {
        tether__pool_discard(p, s, CLOSE_LIFETIME);
    } else if (!tether__pool_still_up(p, s, 1)) {
        /* closed */
    } else if (p->o.keepalive_ms > 0 &&
               now - s->checked_ms >= p->o.keepalive_ms) {
        return 1;
    } else {
        tether__pool_put_idle(p, s);
    }
    return 0;
}

void tether__pool_housekeep(tether_pool *p) {
    if (atomic_load(&p->closing))
        return;
    int64_t now = tether__pool_now(p);
    pthread_mutex_lock(&p->lock);
    int excess = p->total - p->o.min_size;
    pthread_mutex_unlock(&p->lock);
    tether__slot *batch[64];
    int nbatch = 0;
    for (int i = 0; i < p->nslots; i++) {
        tether__slot *s = &p->slots[i];
        int st = slot_state(s);
        if (st == SLOT_USED && p->leak_threshold_ms > 0)
            report_leak(p, s, now);
        if (st != SLOT_IDLE || !slot_cas(s, SLOT_IDLE, SLOT_RESERVED))
            continue;
        if (inspect_idle(p, s, now, &excess))
            batch[nbatch++] = s;
        if (nbatch == 64) {
            keepalive_start(p, batch, nbatch);
            nbatch = 0;
        }
    }
    if (nbatch)
        keepalive_start(p, batch, nbatch);
    rebalance_pass(p, now);        /* Patroni's list gained servers */
    tether__txn_expire(p, now);    /* reservations past their bound */
    tether__adaptive_pass(p, now); /* the adaptive limit (adaptive.c) */
    tether__pool_fill(p);
    tether__pool_grant_due(p);
}

/* ---- the tick ------------------------------------------------------------ */

static void pool_tick(void *ctx, unsigned tick) {
    tether_pool *p = ctx;
    tether__pool_serve_head(p);
    tether__pool_grant_due(p);
    if (atomic_load_explicit(&p->queued_no_thread, memory_order_relaxed))
        tether__cq_expire(p); /* non-blocking acquires' deadlines (cq.c) */
    if (tick % PASS_EVERY == 0)
        tether__pool_housekeep(p);
}

void tether__housekeeper_start(tether_pool *p) {
    int added, servers; /* what the list added before: already spread */
    tether__connector_added(p->o.connector, &p->rebal_gen, &added, &servers);
    if (!p->real_clock)
        return; /* virtual time: tests call tether__pool_housekeep */
    p->tick.fn = pool_tick;
    p->tick.ctx = p;
    tether__ticker_subscribe(&p->tick);
}

void tether__housekeeper_stop(tether_pool *p) {
    if (p->real_clock)
        tether__ticker_unsubscribe(&p->tick);
    rebalance_end(p);
}
