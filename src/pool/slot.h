/* slot.h - the pool's first room: a slot's state word, the lease token
 * that names a slot and its generation, and the steps that take and give
 * a slot. Nothing here locks, sleeps or allocates; slot.c is the fast path
 * built on it (docs/pool.md, "Slots and leases" and
 * "The fast path"). */
#ifndef TETHER_SLOT_H
#define TETHER_SLOT_H

#include "internal.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Slot states. A slot holds at most one connection. */
enum {
    SLOT_FREE = 0, /* no connection */
    SLOT_CREATING, /* reserved for a connection being created */
    SLOT_IDLE,     /* connection available */
    SLOT_USED,     /* leased, or being checked out / handed off */
    SLOT_RESERVED, /* taken by housekeeping */
    SLOT_TXN       /* released with its transaction open: reserved to the
                      key it was acquired with (affinity.c); changed under
                      the pool's lock only */
};

/* A slot's state word holds the state in its low 3 bits; above them, up
 * to bit 14, the number of releases still inside tether__pool_put_idle
 * after publishing the slot: such a release still reads the pool, so
 * tether_pool_destroy waits for the count to fall to 0 (docs/pool.md);
 * in bit 15 SLOT_KEYED (below); in bits 16-31 the lease generation, which moves
 * on whenever the slot passes to a new holder, so that a stale lease is refused
 * (lease_held). Only the slot's owner changes the state bits and the generation
 * of an owned slot; the count changes under anyone's feet, so every change of
 * state keeps it. */
#define SLOT_MASK 7u
#define SLOT_INFLIGHT 8u /* one release in flight */
#define SLOT_INFLIGHT_MASK 0x7ff8u
/* Bit 15: the lease was acquired with a key (tether_pool_acquire_key):
 * its release takes affinity.c's path. Set and cleared by the holder; the
 * release reads it in the load that checks the lease, so a release
 * without a key pays one test of a register for it. */
#define SLOT_KEYED 0x8000u
#define SLOT_GEN_SHIFT 16
#define SLOT_GEN_ONE (1u << SLOT_GEN_SHIFT)

#define NOT_HELD INT64_MIN /* acquired_ms of a slot nobody holds */

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
    /* The adaptive limit (TRACK_HOLD): when the holder took it, in the
     * pool's microseconds modulo 2^32 (tether__pool_now_us). */
    uint32_t taken_us;
} __attribute__((aligned(64)));

/* A slot stays two lines with the routing fields. */
_Static_assert(sizeof(tether__slot) == 128, "tether__slot: two cache lines");

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

/* slot_take_lease moves s from from to SLOT_USED for a new holder, moving its
 * lease generation on in the same step. Returns the state word it wrote
 * (never 0), or 0 when s was not in from. */
static inline unsigned slot_take_lease(tether__slot *s, unsigned from) {
    unsigned v = atomic_load_explicit(&s->state, memory_order_relaxed);
    while ((v & SLOT_MASK) == from) {
        unsigned to = (v & ~SLOT_MASK) + SLOT_GEN_ONE + SLOT_USED;
        if (atomic_compare_exchange_weak(&s->state, &v, to))
            return to;
    }
    return 0;
}

/* slot_take_idle takes s for a new holder if it is idle: slot_take_lease from
 * SLOT_IDLE (a plain load first: no write to a busy slot's line). */
static inline unsigned slot_take_idle(tether__slot *s) {
    return slot_take_lease(s, SLOT_IDLE);
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

/* lease_plain says whether l names its slot's current lease (as
 * lease_current below) and that lease was acquired without a key: the
 * release fast path's single test. */
static inline int lease_plain(const tether_lease *l, unsigned v) {
    if ((v & (SLOT_MASK | SLOT_KEYED)) != SLOT_USED)
        return 0;
#if UINTPTR_MAX > 0xffffffffu
    uintptr_t a = (uintptr_t)l;
    if (a >> 63)
        return (a >> LEASE_TAG_SHIFT) == lease_tag(v);
#endif
    return 1;
}

/* lease_current says whether l names its slot's current lease: the slot
 * is in use and, for a tagged l, in l's generation (keyed or not). */
static inline int lease_current(const tether_lease *l, unsigned v) {
    return lease_plain(l, v & ~SLOT_KEYED);
}

/* lease_held returns the slot of l when l names its current lease, else
 * NULL (a stale lease: released or discarded already). A plain load: the
 * generation moves on when a slot passes to a new holder, in the step that
 * takes it (slot_take_lease), so the release path pays no atomic step for it.
 */
static inline tether__slot *lease_held(const tether_lease *l) {
    tether__slot *s = lease_slot(l);
    unsigned v = atomic_load_explicit(&s->state, memory_order_relaxed);
    return lease_current(l, v) ? s : NULL;
}

/* ---- slot.c: the fast path ------------------------------------------------
 */

/* tether__pool_take_idle takes an idle slot of p, the one this thread
 * released last first. NULL when none is idle. */
tether__slot *tether__pool_take_idle(tether_pool *p);

/* tether__slot_last_used returns the slot this thread released last to p,
 * or NULL (thread affinity: a waiter would rather have it back). */
const tether__slot *tether__slot_last_used(const tether_pool *p);

/* tether__slot_forget_pool drops the calling thread's affinity to p's
 * slots (p is being destroyed). */
void tether__slot_forget_pool(const tether_pool *p);

/* tether__pool_checkout checks an owned slot before handing it out: 0 when
 * good, 1 when good after a round-trip validation, -1 when it was
 * discarded (the caller looks for another). */
int tether__pool_checkout(tether_pool *p, tether__slot *s, const char *file,
                          int line);

/* tether__pool_take is tether_pool_acquire_at giving the slot: for run(),
 * which hands no lease out and so needs no generation. */
int tether__pool_take(tether_pool *p, int64_t timeout_ms, tether__slot **out,
                      tether_error *err, const char *file, int line);

/* tether__pool_give_back is tether_lease_release of an owned slot. */
void tether__pool_give_back(tether_pool *p, tether__slot *s);

/* ---- affinity.c: transactions across acquires (docs/pool.md,
 * "Transactions across acquires") ---------------------------------------- */

/* tether__txn_release is tether_lease_release of an owned slot whose lease
 * was acquired with a key: the connection is reserved to the key when its
 * transaction is open, else given back as usual. */
void tether__txn_release(tether_pool *p, tether__slot *s);

/* tether__txn_rolled_back: the reset of a release without a key rolled a
 * transaction back (the driver's TETHER_ROLLED_BACK). Counts it and warns,
 * at most once a second, naming the acquire site. */
void tether__txn_rolled_back(tether_pool *p, tether__slot *s);

/* tether__pool_put_idle makes an owned, healthy slot available: handed to
 * the first waiter, or marked idle. */
void tether__pool_put_idle(tether_pool *p, tether__slot *s);

#endif
