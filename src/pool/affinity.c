/* affinity.c - transactions across acquires (docs/pool.md, "Transactions
 * across acquires"). A lease acquired with a key (tether_pool_acquire_key)
 * and released with its transaction open leaves its slot in SLOT_TXN,
 * reserved to the key: not idle, not reset, counted in the pool's size. The
 * next acquire with the key takes it back without queueing. Everything here
 * is off the fast path: a keyed acquire takes the pool's lock, a keyed
 * release is told apart by the SLOT_KEYED bit in the state word the
 * release loads anyway (slot.c, tether_lease_release), and a release
 * without a key reaches this file only when the driver's reset reports a
 * rollback (TETHER_ROLLED_BACK). */
#include "waitq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keys whose reservation ended without their holder (expired, broken,
 * cleared, closed) are remembered, this many at most and no longer than
 * LOST_MIN_MS or twice the reservation bound, so that the holder's next
 * acquire fails instead of running the rest of its transaction outside it.
 */
#define LOST_N 64
#define LOST_MIN_MS 60000

enum { LOST_EXPIRED = 1, LOST_BROKEN, LOST_CLEARED, LOST_CLOSED };

typedef struct txn_entry {
    /* The current keyed lease of the slot: written and read by its
     * holder only. */
    uint64_t lease_key;
    const char *lease_file;
    int lease_line;
    /* The reservation (state SLOT_TXN), under the pool's lock: key 0 when
     * there is none. */
    uint64_t key;
    int64_t since_ms;
    const char *file;
    int line;
} txn_entry;

typedef struct lost_key {
    uint64_t key;
    int64_t at_ms;
    int why;
} lost_key;

typedef struct tether__affinity tether__affinity;
struct tether__affinity {
    lost_key lost[LOST_N]; /* a ring, under the pool's lock */
    int lost_next;
    txn_entry ent[]; /* one per slot */
};

static const char *lost_why(int why) {
    switch (why) {
    case LOST_EXPIRED:
        return "it was held past tether_txn_reserve_timeout and rolled back";
    case LOST_BROKEN:
        return "the transaction's connection was lost";
    case LOST_CLEARED:
        return "the pool was cleared, which rolled it back";
    default:
        return "the pool was closed, which rolled it back";
    }
}

void tether__txn_free(tether_pool *p) {
    tether__free(p->aff);
    p->aff = NULL;
}

static int slot_index(const tether_pool *p, const tether__slot *s) {
    return (int)(s - p->slots);
}

/* remember_lost_locked notes that key's reservation ended without its
 * holder. */
static void remember_lost_locked(tether_pool *p, uint64_t key, int why,
                                 int64_t now) {
    tether__affinity *a = p->aff;
    if (!a || !key)
        return;
    a->lost[a->lost_next] = (lost_key){key, now, why};
    a->lost_next = (a->lost_next + 1) % LOST_N;
    atomic_fetch_add(&p->txn_lost, why != LOST_EXPIRED);
}

static void remember_lost(tether_pool *p, uint64_t key, int why) {
    int64_t now = tether__pool_now(p);
    pthread_mutex_lock(&p->lock);
    remember_lost_locked(p, key, why, now);
    pthread_mutex_unlock(&p->lock);
}

/* take_lost_locked: why key's reservation was lost (and forgets it), or 0. */
static int take_lost_locked(tether_pool *p, uint64_t key, int64_t now) {
    tether__affinity *a = p->aff;
    int64_t keep = TETHER__MAX(LOST_MIN_MS, 2 * p->txn_timeout_ms);
    for (int i = 0; i < LOST_N; i++) {
        lost_key *l = &a->lost[i];
        if (l->key == key && now - l->at_ms <= keep) {
            l->key = 0;
            return l->why;
        }
    }
    return 0;
}

/* find_locked: the slot index reserved to key, or -1. */
static int find_locked(const tether_pool *p, uint64_t key) {
    for (int i = 0; i < p->nslots; i++)
        if (p->aff->ent[i].key == key)
            return i;
    return -1;
}

/* end_locked ends the reservation of slot i (owned by the caller now). */
static void end_locked(tether_pool *p, int i) {
    p->aff->ent[i].key = 0;
    atomic_fetch_sub(&p->txn_reserved, 1);
}

/* ---- acquire ------------------------------------------------------------- */

static int lost_error(tether_pool *p, uint64_t key, int why,
                      tether_error *err) {
    return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_PERMANENT,
                            "pool %s: the transaction of key %llu is gone: "
                            "%s; restart it (the next acquire with the key "
                            "starts afresh)",
                            p->name, (unsigned long long)key, lost_why(why));
}

/* mark_keyed makes the lease on s, owned, a keyed one and returns its
 * token. */
static tether_lease *mark_keyed(tether_pool *p, tether__slot *s, uint64_t key,
                                const char *file, int line) {
    txn_entry *e = &p->aff->ent[slot_index(p, s)];
    e->lease_key = key;
    e->lease_file = file;
    e->lease_line = line;
    unsigned v = atomic_fetch_or(&s->state, SLOT_KEYED) | SLOT_KEYED;
    return lease_token(s, v);
}

/* Take back the reservation at slot i (lock held, released here): the
 * connection is checked as a checkout would, without a round trip. */
static int take_reserved(tether_pool *p, int i, uint64_t key,
                         tether_lease **out, tether_error *err,
                         const char *file, int line) {
    tether__slot *s = &p->slots[i];
    unsigned v = slot_take_lease(s, SLOT_TXN);
    end_locked(p, i);
    pthread_mutex_unlock(&p->lock);
    if (!v) /* cannot happen: SLOT_TXN changes under the lock only */
        return tether_error_set(err, TETHER_ESTATE, TETHER_CLASS_PERMANENT,
                                "pool %s: reservation in a bad state", p->name);
    int why = 0;
    if (s->gen != atomic_load(&p->gen)) {
        why = atomic_load(&p->closing) ? LOST_CLOSED : LOST_CLEARED;
        tether__pool_discard(
            p, s, why == LOST_CLOSED ? CLOSE_SHUTDOWN : CLOSE_CLEARED);
    } else if (!tether__pool_still_up(p, s, 1)) { /* closed */
        why = LOST_BROKEN;
    } else if (p->drv->in_transaction(s->conn) != 1) {
        /* the server ended it (a backend killed between the socket check
         * and now, an idle-in-transaction timeout): not the same
         * transaction any more */
        tether__pool_discard(p, s, CLOSE_BROKEN);
        why = LOST_BROKEN;
    }
    if (why) {
        atomic_fetch_add(&p->txn_lost, 1);
        return lost_error(p, key, why, err);
    }
    atomic_fetch_add_explicit(&s->quick, 1, memory_order_relaxed);
    if (p->track & TRACK_SITES) { /* as checkout records it (slot.c) */
        atomic_store_explicit(&s->file, file, memory_order_relaxed);
        atomic_store_explicit(&s->line, line, memory_order_relaxed);
        atomic_store_explicit(&s->leak_reported, 0, memory_order_relaxed);
        atomic_store_explicit(&s->acquired_ms, tether__pool_now(p),
                              memory_order_release);
    }
    if (p->track & TRACK_HOLD) /* the adaptive limit's stamp */
        s->taken_us = tether__pool_now_us(p);
    *out = mark_keyed(p, s, key, file, line);
    return 0;
}

static int make_table_locked(tether_pool *p) {
    if (p->aff)
        return 0;
    size_t n = sizeof(tether__affinity) + sizeof(txn_entry) * (size_t)p->nslots;
    p->aff = tether__malloc(n);
    if (!p->aff)
        return -1;
    memset(p->aff, 0, n);
    return 0;
}

int tether_pool_acquire_key_at(tether_pool *p, uint64_t key, int64_t timeout_ms,
                               tether_lease **out, tether_error *err,
                               const char *file, int line) {
    if (!p || !out || !key || !p->drv->in_transaction)
        return tether_pool_acquire_at(p, timeout_ms, out, err, file, line);
    *out = NULL;
    int64_t now = tether__pool_now(p);
    pthread_mutex_lock(&p->lock);
    if (make_table_locked(p)) {
        pthread_mutex_unlock(&p->lock);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    }
    int i = find_locked(p, key);
    if (i >= 0)
        return take_reserved(p, i, key, out, err, file, line);
    int why = take_lost_locked(p, key, now);
    pthread_mutex_unlock(&p->lock);
    if (why)
        return lost_error(p, key, why, err);
    int rc = tether_pool_acquire_at(p, timeout_ms, out, err, file, line);
    if (rc == 0)
        *out = mark_keyed(p, lease_slot(*out), key, file, line);
    return rc;
}

/* ---- release ------------------------------------------------------------- */

void tether__txn_release(tether_pool *p, tether__slot *s) {
    atomic_fetch_and(&s->state, ~SLOT_KEYED);
    const txn_entry *e = &p->aff->ent[slot_index(p, s)];
    uint64_t key = e->lease_key;
    int in = p->drv->in_transaction(s->conn);
    if (in == 0) { /* committed or rolled back: the reservation is over */
        tether__pool_give_back(p, s);
        return;
    }
    if (in < 0) { /* unknown: reset rolls back or closes it */
        remember_lost(p, key, LOST_BROKEN);
        tether__pool_give_back(p, s);
        return;
    }
    int64_t now = tether__pool_now(p);
    pthread_mutex_lock(&p->lock);
    int lost = atomic_load(&p->closing)         ? LOST_CLOSED
               : s->gen != atomic_load(&p->gen) ? LOST_CLEARED
                                                : 0;
    /* A second lease of a key already reserved (one lease per key at a
     * time): the first reservation stays, this transaction is rolled
     * back. */
    int twice = !lost && find_locked(p, key) >= 0;
    if (lost || twice) { /* given back: reset rolls it back, or closes it */
        if (lost)
            remember_lost_locked(p, key, lost, now);
        pthread_mutex_unlock(&p->lock);
        tether__pool_give_back(p, s);
        return;
    }
    txn_entry *r = &p->aff->ent[slot_index(p, s)];
    r->key = key;
    r->since_ms = now;
    r->file = r->lease_file;
    r->line = r->lease_line;
    s->released_ms = now;
    atomic_store_explicit(&s->acquired_ms, NOT_HELD, memory_order_relaxed);
    slot_set(s, SLOT_TXN, 0);
    atomic_fetch_add(&p->txn_reserved, 1);
    atomic_fetch_add(&p->txn_reservations, 1);
    pthread_mutex_unlock(&p->lock);
}

void tether__txn_rolled_back(tether_pool *p, tether__slot *s) {
    atomic_fetch_add(&p->txn_rolled_back, 1);
    int64_t at = atomic_load_explicit(&s->acquired_ms, memory_order_relaxed);
    const char *file = atomic_load_explicit(&s->file, memory_order_relaxed);
    int line = atomic_load_explicit(&s->line, memory_order_relaxed);
    int known = at != NOT_HELD && file;
    int64_t now = tether__pool_now(p);
    int64_t last = atomic_load(&p->txn_warn_ms);
    if ((last != INT64_MIN && now - last < 1000) ||
        !atomic_compare_exchange_strong(&p->txn_warn_ms, &last, now)) {
        atomic_fetch_add(&p->txn_warn_quiet, 1); /* at most one a second */
        return;
    }
    uint64_t quiet = atomic_exchange(&p->txn_warn_quiet, 0);
    char more[64] = "";
    if (quiet)
        snprintf(more, sizeof(more), "; %llu more since the last warning",
                 (unsigned long long)quiet);
    char site[256]; /* recorded by leak detection only: the fast path
                       records nothing more for this (docs/pool.md) */
    if (known)
        snprintf(site, sizeof(site), "acquired at %s:%d", file, line);
    else
        snprintf(site, sizeof(site),
                 "acquire site not recorded: set tether_leak_threshold to "
                 "record it");
    tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_WARN,
                "pool %s: a lease released with its transaction open was "
                "rolled back (%s); to keep a transaction across acquires, "
                "acquire with a key (docs/pool.md, \"Transactions across "
                "acquires\")%s",
                p->name, site, more);
}

/* ---- the bound, clear and close ------------------------------------------ */

/* Roll back and give back expired reservations' slots (owned, RESERVED). */
static void expire_run(tether_pool *p, tether__slot **slots, int n) {
    for (int i = 0; i < n; i++) {
        tether__slot *s = slots[i];
        int rc = p->drv->reset(s->conn, p->reset_query, NULL);
        if (rc == TETHER_FATAL) {
            tether__pool_fatal(p);
            tether__pool_discard(p, s, CLOSE_CLEARED);
        } else if (rc < 0 || atomic_load(&p->closing) ||
                   s->gen != atomic_load(&p->gen)) {
            tether__pool_discard(p, s, rc < 0 ? CLOSE_RESET : CLOSE_CLEARED);
        } else {
            s->released_ms = s->checked_ms = tether__pool_now(p);
            tether__pool_put_idle(p, s);
        }
    }
}

typedef struct expire_job {
    tether_pool *p;
    int n;
    tether__slot *slots[];
} expire_job;

static void *expire_main(void *arg) {
    expire_job *j = arg;
    expire_run(j->p, j->slots, j->n);
    tether__pool_bg_done(j->p);
    tether__free(j);
    return NULL;
}

typedef struct expired {
    uint64_t key;
    int64_t held_ms;
    const char *file;
    int line;
} expired;

void tether__txn_expire(tether_pool *p, int64_t now) {
    if (atomic_load_explicit(&p->txn_reserved, memory_order_relaxed) == 0)
        return;
    int cap = p->nslots;
    expire_job *j =
        tether__malloc(sizeof(*j) + sizeof(tether__slot *) * (size_t)cap);
    expired *info = tether__malloc(sizeof(*info) * (size_t)cap);
    if (!j || !info) {
        tether__free(j);
        tether__free(info);
        return; /* the next pass tries again */
    }
    int n = 0;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; p->aff && i < p->nslots; i++) {
        txn_entry *e = &p->aff->ent[i];
        tether__slot *s = &p->slots[i];
        if (!e->key || now - e->since_ms < p->txn_timeout_ms ||
            !slot_cas(s, SLOT_TXN, SLOT_RESERVED))
            continue;
        info[n] = (expired){e->key, now - e->since_ms, e->file, e->line};
        remember_lost_locked(p, e->key, LOST_EXPIRED, now);
        end_locked(p, i);
        j->slots[n++] = s;
    }
    if (n && p->real_clock)
        p->bg++;
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < n; i++) {
        atomic_fetch_add(&p->txn_expired, 1);
        tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_WARN,
                    "pool %s: the transaction of key %llu, acquired at %s:%d, "
                    "held its connection %lld ms between acquires "
                    "(tether_txn_reserve_timeout %lld ms): rolled back",
                    p->name, (unsigned long long)info[i].key,
                    info[i].file ? info[i].file : "?", info[i].line,
                    (long long)info[i].held_ms, (long long)p->txn_timeout_ms);
    }
    tether__free(info);
    j->p = p;
    j->n = n;
    /* The rollbacks are round trips: on a worker thread, so the pass never
     * blocks on the network (inline on a virtual clock, for tests). */
    if (n && p->real_clock && tether__pool_spawn(expire_main, j) == 0)
        return;
    if (n && p->real_clock)
        tether__pool_bg_done(p);
    expire_run(p, j->slots, n);
    tether__free(j);
}

void tether__txn_sweep(tether_pool *p, close_reason why) {
    if (atomic_load(&p->txn_reserved) == 0)
        return;
    int64_t now = tether__pool_now(p);
    for (;;) {
        tether__slot *s = NULL;
        pthread_mutex_lock(&p->lock);
        for (int i = 0; p->aff && i < p->nslots && !s; i++) {
            txn_entry *e = &p->aff->ent[i];
            if (!e->key || !slot_cas(&p->slots[i], SLOT_TXN, SLOT_RESERVED))
                continue;
            remember_lost_locked(
                p, e->key, why == CLOSE_SHUTDOWN ? LOST_CLOSED : LOST_CLEARED,
                now);
            end_locked(p, i);
            s = &p->slots[i];
        }
        pthread_mutex_unlock(&p->lock);
        if (!s)
            return;
        /* Closing the connection rolls its transaction back on the
         * server. */
        tether__pool_discard(p, s, why);
    }
}
