/* table.c - the PGconns the pool made, once handed out: leased (the
 * program holds it), idle (given back: a second PQfinish is ignored), or
 * inherited (leased in a parent before fork: the child's, as with plain
 * libpq). A slot is dropped when the driver closes its PGconn, before
 * libpq frees it, so an address libpq hands out again is never mistaken
 * for a pooled one. A chained hash on the pointer under one mutex. */
#include "preload.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024

typedef struct node {
    tp_slot slot;
    struct node *next;
} node;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static node *buckets[NBUCKETS];

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

void tp_table_lease(PGconn *pg, tether_lease *lease, PQnoticeReceiver rx) {
    pthread_mutex_lock(&lock);
    node **pp = find(pg);
    node *n = *pp;
    if (!n && (n = calloc(1, sizeof(*n))) != NULL) {
        n->next = *bucket(pg);
        *bucket(pg) = n;
    }
    if (n) /* out of memory: untracked, PQfinish then closes it for real */
        n->slot = (tp_slot){pg, lease, TP_LEASED, 0, rx};
    pthread_mutex_unlock(&lock);
}

int tp_table_finish(PGconn *pg, tp_slot *out) {
    pthread_mutex_lock(&lock);
    node **pp = find(pg);
    node *n = *pp;
    int st = n ? n->slot.state : TP_NONE;
    if (st == TP_LEASED) {
        *out = n->slot;
        n->slot.state = TP_IDLE;
        n->slot.lease = NULL;
    } else if (st == TP_INHERITED) {
        *pp = n->next;
        free(n);
    }
    pthread_mutex_unlock(&lock);
    return st;
}

int tp_table_state(PGconn *pg) {
    pthread_mutex_lock(&lock);
    node *n = *find(pg);
    int st = n ? n->slot.state : TP_NONE;
    pthread_mutex_unlock(&lock);
    return st;
}

int tp_table_taint(PGconn *pg) {
    pthread_mutex_lock(&lock);
    node *n = *find(pg);
    int leased = n && n->slot.state == TP_LEASED;
    if (leased)
        n->slot.tainted = 1;
    pthread_mutex_unlock(&lock);
    return leased;
}

void tp_table_forget(PGconn *pg) {
    pthread_mutex_lock(&lock);
    node **pp = find(pg);
    node *n = *pp;
    if (n) {
        *pp = n->next;
        free(n);
    }
    pthread_mutex_unlock(&lock);
}

void tp_table_lock(void) {
    pthread_mutex_lock(&lock);
}

void tp_table_unlock(void) {
    pthread_mutex_unlock(&lock);
}

void tp_table_fork_child(void) {
    for (size_t i = 0; i < NBUCKETS; i++) {
        node **pp = &buckets[i];
        while (*pp) {
            node *n = *pp;
            if (n->slot.state == TP_LEASED) {
                n->slot.state = TP_INHERITED;
                n->slot.lease = NULL;
                pp = &n->next;
            } else {
                *pp = n->next;
                free(n);
            }
        }
    }
    pthread_mutex_init(&lock, NULL);
}
