/* run.c - tether_pool_run (docs/pool.md, "tether_pool_run"): acquire, call the
 * caller's work, release; transient failures are retried under the pool's retry
 * policy with the idempotency rule, and a broken connection is discarded, never
 * returned to the pool. */
#include "route.h"

typedef struct run_ctx {
    tether_pool *p;
    tether_work_fn fn;
    void *arg;
} run_ctx;

TETHER__HOT static int run_once(void *arg, const tether_attempt *a,
                                tether_error *err) {
    run_ctx *c = arg;
    tether_pool *p = c->p;
    tether__slot *l = NULL;
    /* Statements default to the attempt's deadline (docs/statements.md),
     * counted from its start when the retry read it precisely. */
    int64_t began = tether__attempt_began_ns;
    tether__attempt_began_ns = -1; /* the work's own runs must not see it */
    int64_t deadline = a->timeout_ms < 0
                           ? -1
                           : (began >= 0 ? began : tether__mono_ns()) +
                                 a->timeout_ms * TETHER__NS_PER_MS;
    int rc = tether__pool_take(p, a->timeout_ms, &l, err, "tether_pool_run", 0);
    if (rc) {
        if (err)
            err->not_sent = 1; /* nothing reached the server */
        return rc;
    }
    int64_t outer = tether__run_deadline_ns;
    tether__run_deadline_ns = deadline;
    rc = c->fn(l->handle, c->arg, a, err);
    tether__run_deadline_ns = outer;
    if (rc >= 0) {
        tether__pool_give_back(p, l);
        return 0;
    }
    if (err && err->cls == TETHER_CLASS_NONE)
        p->drv->classify(l->conn, err);
    if (rc == TETHER_EREADONLY) {
        /* A write reached a read-only server (a standby, or a primary
         * demoted by a failover): it was refused, so nothing happened.
         * Forget every connection and re-route through the connector. */
        tether__pool_fatal(p);
        if (err) {
            err->cls = TETHER_CLASS_TRANSIENT;
            err->not_sent = 1;
        }
    }
    if (rc == TETHER_EBROKEN)
        tether__pool_discard(p, l, CLOSE_BROKEN);
    else if (tether__pool_still_up(p, l, 1)) /* else closed, maybe cleared */
        tether__pool_give_back(p, l);
    return rc;
}

int tether__pool_run_attempt(tether_pool *p, tether_work_fn fn, void *arg,
                             const tether_attempt *a, tether_error *err) {
    run_ctx c = {p, fn, arg};
    return run_once(&c, a, err);
}

TETHER__HOT int tether_pool_run_for(tether_pool *p, unsigned flags,
                                    int64_t timeout_ms, tether_work_fn fn,
                                    void *arg, tether_error *err) {
    if (!p || !fn)
        return tether__null(err, "tether_pool_run", p ? "fn" : "p");
    if ((flags & TETHER_READONLY) && p->route) /* routing: route.c */
        return tether__route_run(p, flags, timeout_ms, fn, arg, err);
    run_ctx c = {p, fn, arg};
    return tether_retry_run_for(p->retry, flags & TETHER_IDEMPOTENT, timeout_ms,
                                run_once, &c, err);
}

TETHER__HOT int tether_pool_run(tether_pool *p, unsigned flags,
                                tether_work_fn fn, void *arg,
                                tether_error *err) {
    return tether_pool_run_for(p, flags, -1, fn, arg, err);
}
