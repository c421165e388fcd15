/* housekeeper.c - each pool's background duties, run on the core ticker's
 * thread (src/core/ticker.c, one for the process, which also publishes the
 * coarse time the acquire fast path reads): every 10 ms tick it hands a
 * connection left idle to a first waiter that is overdue and not polling
 * (tether__pool_serve_head), and every 100 ms it runs a housekeeping pass: idle
 * timeout, spaced lifetime retirement, leak reports, keepalive of long-idle
 * connections, the bound of reservations to a transaction (affinity.c) and
 * refill to min_size. The pass itself never blocks on the
 * network: creations and keepalive round trips run on short-lived worker
 * threads, so the published time never goes stale. Pools on a virtual
 * clock are left to tests, which call tether__pool_housekeep directly. */
#include "cq.h"
#include "housekeeper.h"
#include "waitq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PASS_EVERY 10 /* ticks */

/* ---- workers: background creation and keepalive ------------------------- */

static void *fill_main(void *arg) {
    tether_pool *p = arg;
    tether__slot *s = NULL;
    tether_error err;
    int rc = tether__pool_create_reserved(p, p->o.acquire_timeout_ms, &s, &err);
    if (rc == 0) {
        if (atomic_load(&p->closing))
            tether__pool_discard(p, s, CLOSE_SHUTDOWN);
        else
            tether__pool_put_idle(p, s);
    } else if (rc != TETHER_EOPEN && rc != TETHER__EPROBING) {
        tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_WARN,
                    "pool %s: background connect failed: %s", p->name,
                    err.message);
    }
    tether__pool_bg_done(p);
    return NULL;
}

void tether__pool_fill(tether_pool *p) {
    pthread_mutex_lock(&p->lock);
    while (!atomic_load(&p->closing) && !atomic_load(&p->paused) &&
           p->total < p->o.min_size && p->creating < p->o.max_creating) {
        p->total++;
        p->creating++;
        p->bg++;
        if (tether__pool_spawn(fill_main, p) != 0) {
            p->total--;
            p->creating--;
            p->bg--;
            break;
        }
    }
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
    if (!p->real_clock)
        return; /* virtual time: tests call tether__pool_housekeep */
    p->tick.fn = pool_tick;
    p->tick.ctx = p;
    tether__ticker_subscribe(&p->tick);
}

void tether__housekeeper_stop(tether_pool *p) {
    if (p->real_clock)
        tether__ticker_unsubscribe(&p->tick);
}
