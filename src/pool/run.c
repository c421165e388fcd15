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

int64_t tether__attempt_deadline_ns(const tether_attempt *a) {
    if (a->timeout_ms < 0)
        return -1;
    int64_t began = tether__attempt_of(a)->began_ns;
    return (began >= 0 ? began : tether__mono_ns()) +
           a->timeout_ms * TETHER__NS_PER_MS;
}

int tether__run_work(tether__slot *s, tether_work_fn fn, void *arg,
                     const tether_attempt *a, int64_t deadline_ns,
                     tether_error *err) {
    int64_t outer = tether__run_deadline_ns;
    tether__run_deadline_ns = deadline_ns;
    int rc = fn(s->handle, arg, a, err);
    tether__run_deadline_ns = outer;
    return rc;
}

TETHER__HOT int tether__pool_run_attempt(tether_pool *p, tether_work_fn fn,
                                         void *arg, const tether_attempt *a,
                                         int64_t deadline_ns,
                                         tether_error *err) {
    tether__slot *l = NULL;
    int rc = tether__pool_take(p, a->timeout_ms, &l, err, "tether_pool_run", 0);
    if (rc) {
        if (err)
            err->not_sent = 1; /* nothing reached the server */
        return rc;
    }
    rc = tether__run_work(l, fn, arg, a, deadline_ns, err);
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

/* run_once is one attempt of tether_pool_run, called by the pool's retry
 * only (a is a tether__attempt): its statements default to the attempt's
 * deadline (docs/statements.md), counted from its start. */
TETHER__HOT static int run_once(void *arg, const tether_attempt *a,
                                tether_error *err) {
    run_ctx *c = arg;
    return tether__pool_run_attempt(c->p, c->fn, c->arg, a,
                                    tether__attempt_deadline_ns(a), err);
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
