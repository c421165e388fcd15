/* ops_pending.c - TEMPORARY: replaced by the ops-pool branch at merge.
 *
 * Stand-ins for the runtime-control API of include/tether.h (resize, pause,
 * resume, evict, reconnect, holders), which the ops-pool branch implements
 * in the pool. Until then each says it cannot: TETHER_ESTATE. The admin
 * socket and `tether ctl` report that as an error, and their tests skip the
 * checks that need the real behaviour (saying so). The lead deletes this
 * file at the merge. */
#include "pool.h"

int tether_pool_resize(tether_pool *p, int min_size, int max_size,
                       tether_error *err) {
    (void)p, (void)min_size, (void)max_size;
    return tether_error_set(err, TETHER_ESTATE, TETHER_CLASS_PERMANENT,
                            "tether_pool_resize: not in this build");
}

int tether_pool_pause(tether_pool *p, unsigned flags) {
    (void)p, (void)flags;
    return TETHER_ESTATE;
}

int tether_pool_resume(tether_pool *p) {
    (void)p;
    return TETHER_ESTATE;
}

int tether_pool_evict_idle(tether_pool *p) {
    (void)p;
    return TETHER_ESTATE;
}

int tether_pool_reconnect(tether_pool *p) {
    (void)p;
    return TETHER_ESTATE;
}

int tether_pool_holders(tether_pool *p, tether_pool_holder *out, int cap) {
    (void)p, (void)out, (void)cap;
    return TETHER_ESTATE;
}

int tether_pool_paused(tether_pool *p) {
    (void)p;
    return TETHER_ESTATE;
}
