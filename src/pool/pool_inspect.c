/* pool_inspect.c - the tests' window into a pool (pool_inspect.h). */
#include "pool_inspect.h"
#include "slot.h"
#include "waitq.h"

int tether__pool_inspect_waiters(tether_pool *p) {
    return tether__pool_queued(p);
}

int tether__pool_inspect_age_head(tether_pool *p, int64_t ms) {
    pthread_mutex_lock(&p->lock);
    int rc = p->head ? 0 : -1;
    if (p->head)
        atomic_fetch_sub(&p->head_since_ns, ms * TETHER__NS_PER_MS);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int tether__pool_inspect_head_unarmed(tether_pool *p) {
    return atomic_load(&p->head_unarmed);
}

void tether__pool_inspect_sync(tether_pool *p) {
    pthread_mutex_lock(&p->lock);
    pthread_mutex_unlock(&p->lock);
}

int tether__pool_inspect_poke_head(tether_pool *p) {
    pthread_mutex_lock(&p->lock);
    int rc = p->head && !p->head->no_thread ? 0 : -1;
    if (rc == 0) {
        atomic_store(&p->head_unarmed, 0);
        pthread_cond_signal(p->head->cv);
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int tether__pool_inspect_slot_index(const tether_lease *l) {
    const tether__slot *s = lease_slot(l);
    return (int)(s - s->pool->slots);
}

int64_t tether__pool_inspect_lifetime_ms(const tether_lease *l) {
    const tether__slot *s = lease_slot(l);
    return s->expire_ms - s->created_ms;
}

int tether__pool_inspect_reserve_idle(tether_pool *p, int idx) {
    return slot_cas(&p->slots[idx], SLOT_IDLE, SLOT_RESERVED);
}

void tether__pool_inspect_put_idle(tether_pool *p, int idx) {
    tether__pool_put_idle(p, &p->slots[idx]);
}

int tether__pool_inspect_route_lag(tether_pool *p, tether__lag_fn lag,
                                   int64_t recheck_ms) {
    if (!p->route)
        return -1;
    if (lag)
        p->route->lag = lag;
    if (recheck_ms >= 0)
        p->route->lag_recheck_ms = recheck_ms;
    return 0;
}
