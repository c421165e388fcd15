/* pools.c - the process's pools, one per key (docs/preload.md, "Which
 * pool"): what libpq would connect with, the secrets hashed. A chained
 * hash on the key under one mutex; a pool is opened on first use from the
 * pooled form of the string (tether_pool_open). A connect reserves one of
 * its pool's connections under the mutex (never more than the pool's
 * maximum: beyond, the program holds them all). A pool with nothing
 * reserved and no connection, unused for EVICT_MS, is closed (scanned at
 * most once a second), so that a program that connects with ever new
 * strings (an application_name per connect) does not gather pools. A
 * pool of which the program has held no connection for RELEASE_MS closes
 * its idle connections (on tether's ticker thread, every 100 ms), so that
 * a database the program has left can be dropped (docs/preload.md, "Idle
 * connections and DROP DATABASE"). In a child after fork the parent's
 * pools are abandoned, never touched. */
#include "internal.h"
#include "preload.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 256
#define EVICT_MS 10000
#define RELEASE_MS 250

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tether__preload_pool *buckets[NBUCKETS];
static int64_t next_scan_ms;
static tether__tick_sub tick_sub;
static int subscribed;

/* release_idle: on the ticker thread, every 10th tick. The pools' lock is
 * only tried: fork's prepare holds it while it waits for the ticker's. A
 * pool is cleared (its idle connections closed now) when nothing of it is
 * reserved and the last reservation ended RELEASE_MS ago. */
static void release_idle(void *ctx, unsigned tick) {
    (void)ctx;
    if (tick % 10 || pthread_mutex_trylock(&lock) != 0)
        return;
    int64_t now = tether__preload_now_ms();
    for (size_t b = 0; b < NBUCKETS; b++)
        for (tether__preload_pool *p = buckets[b]; p; p = p->next) {
            tether_pool_metrics m;
            if (__atomic_load_n(&p->leased, __ATOMIC_ACQUIRE) ||
                now - __atomic_load_n(&p->released_ms, __ATOMIC_ACQUIRE) <
                    RELEASE_MS)
                continue;
            tether_pool_metrics_get(p->pool, &m);
            if (m.idle > 0)
                tether_pool_clear(p->pool);
        }
    pthread_mutex_unlock(&lock);
}

/* open_pool makes the pool for c (without the lock). */
static tether__preload_pool *open_pool(const tether__preload_conn *c) {
    tether__preload_pool *p = calloc(1, sizeof(*p));
    tether_error err = {0};
    if (!p || !(p->key = strdup(c->key)) ||
        tether_pool_open(&p->pool, c->pooled, NULL, NULL, &err) != 0) {
        if (p && p->key)
            tether__preload_log("no pool (%s): %s", err.message, c->display);
        if (p)
            free(p->key);
        free(p);
        return NULL;
    }
    tether_pool_metrics m;
    tether_pool_metrics_get(p->pool, &m);
    p->max = m.max_size;
    p->keep_prepared = c->keep_prepared;
    p->own_reset = c->own_reset;
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

/* unused: p has nothing reserved, no connection, and no use for EVICT_MS
 * (lock held: nobody can reserve it meanwhile). */
static int unused(tether__preload_pool *p, int64_t now) {
    if (__atomic_load_n(&p->leased, __ATOMIC_ACQUIRE) ||
        now - p->used_ms < EVICT_MS)
        return 0;
    tether_pool_metrics m;
    tether_pool_metrics_get(p->pool, &m);
    return m.total == 0 && m.creating == 0;
}

/* evict unlinks the unused pools onto *out (lock held). */
static void evict(int64_t now, tether__preload_pool **out) {
    if (now < next_scan_ms)
        return;
    next_scan_ms = now + 1000;
    for (size_t b = 0; b < NBUCKETS; b++)
        for (tether__preload_pool **pp = &buckets[b]; *pp;) {
            tether__preload_pool *p = *pp;
            if (unused(p, now)) {
                *pp = p->next;
                p->next = *out;
                *out = p;
            } else {
                pp = &p->next;
            }
        }
}

static void destroy(tether__preload_pool *list) {
    while (list) {
        tether__preload_pool *next = list->next;
        tether_pool_destroy(list->pool);
        pthread_mutex_destroy(&list->mu);
        free(list->settings);
        free(list->key);
        free(list);
        list = next;
    }
}

/* find returns the pool for key in bucket b (lock held), or NULL. */
static tether__preload_pool *find(size_t b, const char *key) {
    tether__preload_pool *p = buckets[b];
    while (p && strcmp(p->key, key))
        p = p->next;
    return p;
}

/* reserve takes one of p's connections for a connect (lock held); 0, or
 * -1 when the program holds them all. */
static int reserve(tether__preload_pool *p, int64_t now) {
    p->used_ms = now;
    if (__atomic_load_n(&p->leased, __ATOMIC_ACQUIRE) >= p->max)
        return -1;
    __atomic_fetch_add(&p->leased, 1, __ATOMIC_ACQ_REL);
    return 0;
}

/* subscribe puts release_idle on the ticker once per process (never with
 * the pools' lock held: the ticker's lock comes first, as in fork). */
static void subscribe(void) {
    if (__atomic_exchange_n(&subscribed, 1, __ATOMIC_ACQ_REL))
        return;
    tick_sub = (tether__tick_sub){release_idle, NULL, NULL};
    tether__ticker_subscribe(&tick_sub);
}

/* A pool is opened (and one that is no longer used, destroyed) without
 * the pools' lock: opening one subscribes it to the ticker, whose lock
 * is taken before the pools' one (fork, release_idle). Two threads may
 * open one for the same key: the second to insert destroys its own. */
tether__preload_pool *
tether__preload_pools_reserve(const tether__preload_conn *c, int *full) {
    size_t b = (size_t)(c->key_hash % NBUCKETS);
    int64_t now = tether__preload_now_ms();
    tether__preload_pool *gone = NULL, *fresh = NULL;
    pthread_mutex_lock(&lock);
    evict(now, &gone);
    tether__preload_pool *p = find(b, c->key);
    if (!p) {
        pthread_mutex_unlock(&lock);
        destroy(gone);
        gone = NULL;
        *full = 0;
        if (!(fresh = open_pool(c)))
            return NULL;
        subscribe();
        pthread_mutex_lock(&lock);
        if (!(p = find(b, c->key))) {
            p = fresh;
            p->next = buckets[b];
            buckets[b] = p;
            fresh = NULL;
        }
    }
    *full = reserve(p, now) != 0;
    pthread_mutex_unlock(&lock);
    destroy(gone);
    destroy(fresh);
    return *full ? NULL : p;
}

void tether__preload_pools_unreserve(tether__preload_pool *p) {
    __atomic_store_n(&p->released_ms, tether__preload_now_ms(),
                     __ATOMIC_RELEASE);
    __atomic_fetch_sub(&p->leased, 1, __ATOMIC_ACQ_REL);
}

void tether__preload_pools_lock(void) {
    pthread_mutex_lock(&lock);
}

void tether__preload_pools_unlock(void) {
    pthread_mutex_unlock(&lock);
}

void tether__preload_pools_fork_child(void) {
    memset(buckets, 0, sizeof(buckets)); /* the parent's: abandoned */
    next_scan_ms = 0;
    __atomic_store_n(&subscribed, 0, __ATOMIC_RELEASE); /* the ticker forgot
                                                          its subscribers */
    pthread_mutex_init(&lock, NULL);
}
