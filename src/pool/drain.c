/* drain.c - a connection whose statement outran its deadline, after its
 * release (docs/statements.md, "Draining"): a thread of the pool's has the
 * driver cancel the statement and read its results within the drain bound,
 * then releases the connection as any other (reset, back to idle or to a
 * waiter) or closes it. The slot stays in use throughout, so the
 * connection counts toward the pool's maximum and is handed to no one;
 * the thread counts in bg, so tether_pool_destroy waits for it. */
#include "pool.h"

static void *drain_main(void *arg) {
    tether__slot *s = arg;
    tether_pool *p = s->pool;
    int64_t bound = p->drain_ms == 0  ? TETHER__DRAIN_MS
                    : p->drain_ms < 0 ? 0
                                      : p->drain_ms;
    if (tether__driver_drain(p->drv, s->conn, bound) == 0)
        tether__pool_give_back(p, s); /* its reset may still close it */
    else
        tether__pool_discard(p, s, CLOSE_BROKEN);
    tether__pool_bg_done(p);
    return NULL;
}

void tether__pool_drain(tether_pool *p, tether__slot *s) {
    pthread_mutex_lock(&p->lock);
    p->bg++;
    pthread_mutex_unlock(&p->lock);
    if (tether__pool_spawn(drain_main, s) != 0) {
        tether__pool_discard(p, s, CLOSE_BROKEN);
        tether__pool_bg_done(p);
    }
}
