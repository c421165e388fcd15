/* pools.c - the process's pools, one per key (docs/preload.md, "Which
 * pool"): what libpq would connect with, the secrets hashed. A chained
 * hash on the key under one mutex; a pool is opened on first use from the
 * pooled form of the string (tether_pool_open) and kept for the life of
 * the process (an unused pool holds no connection once its idle ones have
 * timed out). In a child after fork the parent's pools are abandoned,
 * never touched. */
#include "preload.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tp_pool *buckets[NBUCKETS];

static size_t bucket(const char *key) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return (size_t)(h % NBUCKETS);
}

/* open_pool makes the pool for c (lock held). */
static tp_pool *open_pool(const tp_conn *c) {
    tp_pool *p = calloc(1, sizeof(*p));
    tether_error err = {0};
    if (!p || !(p->key = strdup(c->key)) ||
        tether_pool_open(&p->pool, c->pooled, NULL, NULL, &err) != 0) {
        if (p && p->key)
            tp_log("no pool (%s): %s", err.message, c->display);
        if (p)
            free(p->key);
        free(p);
        return NULL;
    }
    tether_pool_metrics m;
    tether_pool_metrics_get(p->pool, &m);
    p->max = m.max_size;
    return p;
}

tp_pool *tp_pools_get(const tp_conn *c) {
    size_t b = bucket(c->key);
    pthread_mutex_lock(&lock);
    tp_pool *p = buckets[b];
    while (p && strcmp(p->key, c->key))
        p = p->next;
    if (!p && (p = open_pool(c)) != NULL) {
        p->next = buckets[b];
        buckets[b] = p;
    }
    pthread_mutex_unlock(&lock);
    return p;
}

void tp_pools_lock(void) {
    pthread_mutex_lock(&lock);
}

void tp_pools_unlock(void) {
    pthread_mutex_unlock(&lock);
}

void tp_pools_fork_child(void) {
    memset(buckets, 0, sizeof(buckets)); /* the parent's: abandoned */
    pthread_mutex_init(&lock, NULL);
}
