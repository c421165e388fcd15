/* table.c - the PGconns the pool made, once handed out: leased (the
 * program holds it), idle (given back: a second PQfinish is ignored), or
 * inherited (leased in a parent before fork: the child's, as with plain
 * libpq). A slot is dropped when the driver closes its PGconn, before
 * libpq frees it, so an address libpq hands out again is never mistaken
 * for a pooled one. A chained hash on the pointer under one mutex; it
 * counts the idle ones, for the cap across pools (TETHER_PRELOAD_IDLE_MAX,
 * docs/preload.md). */
#include "preload.h"

#include <time.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024

typedef struct node {
    tether__preload_slot slot;
    struct node *next;
} node;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static node *buckets[NBUCKETS];
static int nidle; /* slots in TETHER__PRELOAD_IDLE */

int64_t tether__preload_now_ms(void) {
    struct timespec ts;
    /* Coarse (a few ms, read without a system call or a TSC read): every
     * bound the preload keeps with it is 100 ms or more. */
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static node **bucket(const PGconn *pg) {
    uintptr_t h = (uintptr_t)pg;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return &buckets[(h >> 40) % NBUCKETS];
}

/* find returns the link that points at pg's node (lock held). */
static node **find(const PGconn *pg) {
    node **pp = bucket(pg);
    while (*pp && (*pp)->slot.pg != pg)
        pp = &(*pp)->next;
    return pp;
}

int64_t tether__preload_table_lease(PGconn *pg, tether_lease *lease,
                                    PQnoticeReceiver rx,
                                    struct tether__preload_pool *pool,
                                    char *asked) {
    int64_t now = tether__preload_now_ms(), born = now;
    pthread_mutex_lock(&lock);
    node **pp = find(pg);
    node *n = *pp;
    char *settings = NULL;
    if (n) {
        born = n->slot.born_ms;
        settings = n->slot.settings;
        nidle -= n->slot.state == TETHER__PRELOAD_IDLE;
        free(n->slot.asked);
    } else if ((n = calloc(1, sizeof(*n))) != NULL) {
        n->next = *bucket(pg);
        *bucket(pg) = n;
    }
    if (n) { /* out of memory: untracked, PQfinish then closes it for real */
        tether__preload_prep *prep = n->slot.prep; /* kept across leases */
        tether__preload_prep_mark(prep, NULL, 0);
        n->slot = (tether__preload_slot){
            pg,   lease, pool, asked, settings, TETHER__PRELOAD_LEASED,
            NULL, rx,    born, 0,     prep,     0,
            0};
    } else
        free(asked);
    pthread_mutex_unlock(&lock);
    return born;
}

int tether__preload_table_finish(PGconn *pg, tether__preload_slot *out) {
    int cap = tether__preload_config_get()->idle_max;
    pthread_mutex_lock(&lock);
    node **pp = find(pg);
    node *n = *pp;
    int st = n ? n->slot.state : TETHER__PRELOAD_NONE;
    if (st == TETHER__PRELOAD_LEASED) {
        *out = n->slot;
        out->too_many_idle = nidle >= cap;
        n->slot.state = TETHER__PRELOAD_IDLE;
        n->slot.lease = NULL;
        n->slot.pool = NULL;
        n->slot.asked = NULL;
        n->slot.prep_unknown = 0; /* the give-back deallocates (pool.c) */
        nidle++;
    } else if (st == TETHER__PRELOAD_INHERITED) {
        *pp = n->next;
        free(n->slot.asked);
        free(n->slot.settings);
        tether__preload_prep_free(&n->slot.prep);
        free(n);
    }
    pthread_mutex_unlock(&lock);
    return st;
}

int tether__preload_table_settings(PGconn *pg, const char *settings) {
    pthread_mutex_lock(&lock);
    node *n = *find(pg);
    int rc = 0;
    if (n && !n->slot.settings)
        n->slot.settings = strdup(settings); /* out of memory: unchecked */
    else if (n)
        rc = strcmp(n->slot.settings, settings) != 0;
    pthread_mutex_unlock(&lock);
    return rc;
}

PQconninfoOption *tether__preload_table_asked(PGconn *pg) {
    pthread_mutex_lock(&lock);
    node *n = *find(pg);
    char *asked = n && n->slot.state == TETHER__PRELOAD_LEASED && n->slot.asked
                      ? strdup(n->slot.asked)
                      : NULL;
    pthread_mutex_unlock(&lock);
    if (!asked)
        return NULL;
    PQconninfoOption *o = PQconninfoParse(asked, NULL);
    free(asked);
    return o;
}

int tether__preload_table_state(PGconn *pg) {
    pthread_mutex_lock(&lock);
    node *n = *find(pg);
    int st = n ? n->slot.state : TETHER__PRELOAD_NONE;
    pthread_mutex_unlock(&lock);
    return st;
}

int tether__preload_table_taint(PGconn *pg, const char *why) {
    pthread_mutex_lock(&lock);
    node *n = *find(pg);
    int leased = n && n->slot.state == TETHER__PRELOAD_LEASED;
    if (leased)
        n->slot.tainted = why;
    pthread_mutex_unlock(&lock);
    return leased;
}

void tether__preload_table_forget(PGconn *pg) {
    pthread_mutex_lock(&lock);
    node **pp = find(pg);
    node *n = *pp;
    if (n) {
        nidle -= n->slot.state == TETHER__PRELOAD_IDLE;
        *pp = n->next;
        free(n->slot.asked);
        free(n->slot.settings);
        tether__preload_prep_free(&n->slot.prep);
        free(n);
    }
    pthread_mutex_unlock(&lock);
}

/* leased_node returns pg's node when it is leased (lock held). */
static node *leased_node(const PGconn *pg) {
    node *n = *find(pg);
    return n && n->slot.state == TETHER__PRELOAD_LEASED ? n : NULL;
}

int tether__preload_table_prep(PGconn *pg, const char *name, const char *query,
                               int n, const Oid *types) {
    pthread_mutex_lock(&lock);
    node *nd = leased_node(pg);
    int rc =
        !nd || nd->slot.prep_unknown || !nd->slot.pool ||
                !nd->slot.pool->keep_prepared
            ? -1
            : tether__preload_prep_find(nd->slot.prep, name, query, n, types);
    if (rc == TETHER__PRELOAD_PREP_SAME) /* the program has it, as asked */
        tether__preload_prep_mark(nd->slot.prep, name, 1);
    pthread_mutex_unlock(&lock);
    return rc;
}

char *tether__preload_table_prep_stale(PGconn *pg) {
    pthread_mutex_lock(&lock);
    node *nd = leased_node(pg);
    char *sql = nd && !nd->slot.prep_unknown && nd->slot.pool &&
                        nd->slot.pool->keep_prepared
                    ? tether__preload_prep_take_stale(&nd->slot.prep, pg)
                    : NULL;
    pthread_mutex_unlock(&lock);
    return sql;
}

void tether__preload_table_prep_set(PGconn *pg, const char *name,
                                    const char *query, int n,
                                    const Oid *types) {
    pthread_mutex_lock(&lock);
    node *nd = leased_node(pg);
    if (nd && !nd->slot.prep_unknown) {
        tether__preload_prep_drop(&nd->slot.prep, name);
        /* A kept statement runs on later leases out of sight (PQexecPrepared
         * is not watched): one that could change the session is not kept. */
        if (!tether__preload_sql_clean(query) ||
            tether__preload_prep_add(&nd->slot.prep, name, query, n, types)) {
            tether__preload_prep_free(&nd->slot.prep);
            nd->slot.prep_unknown = 1;
        }
    }
    pthread_mutex_unlock(&lock);
}

void tether__preload_table_prep_unknown(PGconn *pg) {
    pthread_mutex_lock(&lock);
    node *nd = leased_node(pg);
    if (nd) {
        tether__preload_prep_free(&nd->slot.prep);
        nd->slot.prep_unknown = 1;
    }
    pthread_mutex_unlock(&lock);
}

void tether__preload_table_dirty(PGconn *pg) {
    pthread_mutex_lock(&lock);
    node *nd = leased_node(pg);
    if (nd)
        nd->slot.dirty = 1;
    pthread_mutex_unlock(&lock);
}

void tether__preload_table_lock(void) {
    pthread_mutex_lock(&lock);
}

void tether__preload_table_unlock(void) {
    pthread_mutex_unlock(&lock);
}

void tether__preload_table_fork_child(void) {
    for (size_t i = 0; i < NBUCKETS; i++) {
        node **pp = &buckets[i];
        while (*pp) {
            node *n = *pp;
            if (n->slot.state == TETHER__PRELOAD_LEASED) {
                n->slot.state = TETHER__PRELOAD_INHERITED;
                n->slot.lease = NULL;
                n->slot.pool = NULL;
                pp = &n->next;
            } else {
                *pp = n->next;
                free(n->slot.settings);
                tether__preload_prep_free(&n->slot.prep);
                free(n);
            }
        }
    }
    nidle = 0;
    pthread_mutex_init(&lock, NULL);
}
