/* live.c - the process's live pools and the hooks of the layer above
 * (live.h, docs/operations.md). Touched at create and destroy only. */
#include "live.h"
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static tether_pool **live;
static int nlive, caplive;
static const tether__live_hooks *_Atomic hooks;

void tether__live_hooks_set(const tether__live_hooks *h) {
    atomic_store(&hooks, h);
}

int tether__live_add(tether_pool *p) {
    pthread_mutex_lock(&live_lock);
    if (nlive == caplive) {
        int cap = caplive ? 2 * caplive : 16;
        tether_pool **n = tether__realloc(live, sizeof(*n) * (size_t)cap);
        if (!n) {
            pthread_mutex_unlock(&live_lock);
            return TETHER_ENOMEM;
        }
        live = n;
        caplive = cap;
    }
    live[nlive++] = p;
    pthread_mutex_unlock(&live_lock);
    const tether__live_hooks *h = atomic_load(&hooks);
    if (h && h->created)
        h->created();
    return 0;
}

void tether__live_remove(tether_pool *p) {
    pthread_mutex_lock(&live_lock);
    for (int i = 0; i < nlive; i++)
        if (live[i] == p) {
            for (int j = i + 1; j < nlive; j++)
                live[j - 1] = live[j];
            nlive--;
            break;
        }
    if (nlive == 0) { /* the last pool: give the memory back */
        tether__free(live);
        live = NULL;
        caplive = 0;
    }
    pthread_mutex_unlock(&live_lock);
}

int tether__live_opened(tether_pool *p, const tether__conninfo *ci,
                        tether_error *err) {
    const tether__live_hooks *h = atomic_load(&hooks);
    return h && h->opened ? h->opened(p, ci, err) : 0;
}

int tether__live_walk(int (*fn)(tether_pool *p, void *ctx), void *ctx) {
    int rc = 0;
    pthread_mutex_lock(&live_lock);
    for (int i = 0; rc == 0 && i < nlive; i++)
        rc = fn(live[i], ctx);
    pthread_mutex_unlock(&live_lock);
    return rc;
}
