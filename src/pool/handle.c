/* handle.c - the public pool handle, above the three rooms of the pool
 * (slot.c, waitq.c, pool.c): creating a pool starts its housekeeping
 * (housekeeper.c), and a routing pool's close and destroy take its read
 * side along (route.c). The pool itself calls neither. See docs/pool.md,
 * "Layout". */
#include "housekeeper.h"
#include "live.h"
#include "route.h"

int tether_pool_create(tether_pool **out, const tether_pool_opts *o,
                       tether_error *err) {
    if (!out)
        return tether__null(err, "tether_pool_create", "out");
    int rc = tether__pool_new(out, o, err);
    if (rc)
        return rc;
    if (tether__live_add(*out)) { /* the admin socket's list (live.h) */
        tether__pool_free(*out);
        *out = NULL;
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "tether_pool_create: out of memory");
    }
    tether__housekeeper_start(*out);
    tether__pool_fill(*out);
    return 0;
}

void tether_pool_destroy(tether_pool *p) {
    if (!p)
        return;
    tether__live_remove(p); /* out of the admin socket's sight first */
    tether__route_free(p);  /* the read side, first */
    tether_pool_close(p, -1, NULL);
    tether__housekeeper_stop(p);
    tether__pool_free(p);
}

int tether_pool_close(tether_pool *p, int64_t wait_ms, tether_error *err) {
    if (!p)
        return tether__null(err, "tether_pool_close", "p");
    if (p->route) /* the read side first, within the same wait_ms */
        wait_ms = tether__route_close(p, wait_ms);
    return tether__pool_shut(p, wait_ms, err);
}
