/* route.c - read/write routing (docs/routing.md): a pool opened with
 * tether_route=read-write-split owns a second pool, its read side, whose
 * connections reach standbys only. TETHER_READONLY work runs there, unless
 * the read side cannot give a connection within its share of the time (no
 * standby up: its breaker then fails it at once) or the connection's
 * standby lags beyond the bound: then on the primary (the routing pool
 * itself). A standby that refuses the work as a write (25006,
 * TETHER_EREADONLY) did nothing: the work is re-run once on the primary.
 * Nothing here runs for work without TETHER_READONLY, nor for a pool that
 * does not route. */
#include "route.h"

typedef struct route_ctx {
    tether_pool *p;
    tether__route *r;
    tether_work_fn fn;
    void *arg;
} route_ctx;

/* clear_read_side is the write side's on_clear: whatever clears the
 * primary's connections (a fatal server event) clears the standbys' too. */
static void clear_read_side(void *arg) {
    tether__route *r = arg;
    tether_pool_clear(r->read);
}

int tether__route_attach(tether_pool *w, tether_pool *read,
                         const tether__route_keys *k, tether_error *err) {
    tether__route *r = tether__calloc(1, sizeof(*r));
    if (!r) {
        tether_pool_destroy(read);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    }
    r->read = read;
    read->fallback = 1;
    r->max_lag_ms = k->max_lag_ms;
    r->max_lag_bytes = k->max_lag_bytes;
    r->lag_recheck_ms = k->lag_recheck_ms;
    r->read_wait_ms = k->read_wait_ms;
    r->lag = read->drv->lag;
    w->route = r;
    w->on_clear = clear_read_side;
    w->on_clear_arg = r;
    return 0;
}

void tether__route_free(tether_pool *p) {
    if (!p || !p->route)
        return;
    p->on_clear = NULL;
    tether_pool_destroy(p->route->read);
    tether__free(p->route);
    p->route = NULL;
}

int64_t tether__route_close(tether_pool *p, int64_t wait_ms) {
    int64_t t0 = tether__mono_ns();
    tether_pool_close(p->route->read, wait_ms, NULL);
    if (wait_ms < 0)
        return wait_ms;
    int64_t used = (tether__mono_ns() - t0) / TETHER__NS_PER_MS;
    return used < wait_ms ? wait_ms - used : 0;
}

tether_pool *tether_pool_read_side(const tether_pool *p) {
    return p && p->route ? p->route->read : NULL;
}

/* read_budget: what the read side may take of an attempt of t ms (-1:
 * unbounded): at most read_wait_ms, and at most half, so that the primary
 * keeps time for the work when no standby answers. */
static int64_t read_budget(const tether__route *r, int64_t t) {
    if (t < 0)
        return r->read_wait_ms;
    return TETHER__MIN(r->read_wait_ms, t / 2);
}

/* lag_over says whether lag (ms, bytes) is beyond r's bounds. */
static int lag_over(const tether__route *r, int64_t ms, int64_t bytes) {
    return (r->max_lag_ms >= 0 && ms > r->max_lag_ms) ||
           (r->max_lag_bytes >= 0 && bytes > r->max_lag_bytes);
}

/* The least time worth a lag query: with less, the read goes to the
 * primary unchecked (a query that overran its time would break s). */
#define LAG_MIN_BUDGET_MS 10
#define LAG_NO_TIME 2

/* lagging says whether s's standby lags beyond the bound, asking it at most
 * once per lag_recheck_ms per connection. Returns 1 lagging, 0 not,
 * LAG_NO_TIME when a check is due and budget is too short for it, or a
 * negative error from the lag query (s may then be broken). */
static int lagging(tether__route *r, tether__slot *s, int64_t budget,
                   tether_error *err) {
    if ((r->max_lag_ms < 0 && r->max_lag_bytes < 0) || !r->lag)
        return 0;
    int64_t now = tether__pool_now(r->read);
    if (s->lag_conn == s->conn && now - s->lag_checked_ms < r->lag_recheck_ms)
        return s->lagging;
    if (budget < LAG_MIN_BUDGET_MS)
        return LAG_NO_TIME; /* a query cut short would break s */
    int64_t ms = 0, bytes = 0;
    atomic_fetch_add_explicit(&r->lag_checks, 1, memory_order_relaxed);
    int rc = r->lag(s->conn, budget, &ms, &bytes, err);
    if (rc < 0) {
        s->lag_conn = NULL;
        tether__log(r->read->o.log, r->read->o.log_ctx, TETHER_LOG_WARN,
                    "pool %s: lag query failed (%s: %s): the read goes to "
                    "the primary",
                    r->read->name, tether_errname(rc), err->message);
        return rc;
    }
    s->lag_conn = s->conn;
    s->lag_checked_ms = now;
    s->lagging = lag_over(r, ms, bytes);
    if (s->lagging)
        tether__log(r->read->o.log, r->read->o.log_ctx, TETHER_LOG_INFO,
                    "pool %s: standby lags %lld ms, %lld bytes: beyond the "
                    "bound, reads go to the primary for %lld ms",
                    r->read->name, (long long)ms, (long long)bytes,
                    (long long)r->lag_recheck_ms);
    return s->lagging;
}

/* put_back returns s to the read side after it failed with rc, or
 * discards it, as tether_pool_run does. */
static void put_back(tether_pool *rp, tether__slot *s, int rc) {
    if (rc == TETHER_EBROKEN)
        tether__pool_discard(rp, s, CLOSE_BROKEN);
    else if (tether__pool_still_up(rp, s, 1))
        tether__pool_give_back(rp, s);
}

/* on_standby runs the work on a read-side connection when one is there
 * within the read side's budget and its standby is within the lag bound.
 * Returns 1 when the work must go to the primary instead (err untouched),
 * 2 when it must be re-run there (a standby refused it as a write), else
 * the work's result. */
static int on_standby(route_ctx *c, const tether_attempt *a,
                      int64_t deadline_ns, tether_error *err) {
    tether__route *r = c->r;
    tether_pool *rp = r->read;
    int64_t budget = read_budget(r, a->timeout_ms);
    tether__slot *s = NULL;
    tether_error e2 = {0};
    if (tether__pool_take(rp, budget, &s, &e2, "tether_pool_run", 0)) {
        /* no standby up, or none free in time */
        tether__log(rp->o.log, rp->o.log_ctx, TETHER_LOG_DEBUG,
                    "pool %s: no standby connection in %lld ms (%s): the "
                    "read goes to the primary",
                    rp->name, (long long)budget, e2.message);
        return 1;
    }
    int lag = lagging(r, s, budget, &e2);
    if (lag != 0) {
        if (lag == 1)
            atomic_fetch_add_explicit(&r->reads_lagging, 1,
                                      memory_order_relaxed);
        put_back(rp, s, lag > 0 ? 0 : e2.code);
        return 1;
    }
    int rc = tether__run_work(s, c->fn, c->arg, a, deadline_ns, err);
    if (rc >= 0) {
        /* Counted where it ran: a standby promoted meanwhile reports its
         * new role with the work's answer (docs/routing.md). */
        int promoted =
            rp->drv->role && rp->drv->role(s->conn) == TETHER_ROLE_PRIMARY;
        tether__pool_give_back(rp, s);
        atomic_fetch_add_explicit(promoted ? &r->reads_primary
                                           : &r->reads_standby,
                                  1, memory_order_relaxed);
        return 0;
    }
    if (err && err->cls == TETHER_CLASS_NONE)
        rp->drv->classify(s->conn, err);
    put_back(rp, s, rc);
    if (rc != TETHER_EREADONLY)
        return rc;
    /* A write sent as read-only: the standby refused it, nothing happened.
     * Patroni's list is asked again (docs/patroni.md, "Refresh"). */
    atomic_fetch_add_explicit(&r->reroutes, 1, memory_order_relaxed);
    tether__connector_kick(rp->o.connector);
    tether__log(rp->o.log, rp->o.log_ctx, TETHER_LOG_WARN,
                "pool %s: TETHER_READONLY work was refused as a write by a "
                "standby; re-running it on the primary",
                rp->name);
    tether_error_clear(err);
    return 2;
}

/* route_once is one attempt of read-only work: on a standby, else on the
 * primary with what is left of the attempt's time. */
static int route_once(void *arg, const tether_attempt *a, tether_error *err) {
    route_ctx *c = arg;
    const tether_clock *clock = c->p->o.clock;
    int64_t start = tether__now_ms(clock);
    int64_t deadline = tether__attempt_deadline_ns(a); /* either side's */
    int rc = on_standby(c, a, deadline, err);
    if (rc != 1 && rc != 2)
        return rc;
    tether_attempt rest = *a;
    if (a->timeout_ms >= 0) {
        int64_t used = tether__now_ms(clock) - start;
        rest.timeout_ms = a->timeout_ms > used ? a->timeout_ms - used : 0;
    }
    if (rc == 1)
        atomic_fetch_add_explicit(&c->r->reads_primary, 1,
                                  memory_order_relaxed);
    return tether__pool_run_attempt(c->p, c->fn, c->arg, &rest, deadline, err);
}

int tether__route_run(tether_pool *p, unsigned flags, int64_t timeout_ms,
                      tether_work_fn fn, void *arg, tether_error *err) {
    route_ctx c = {p, p->route, fn, arg};
    return tether_retry_run_for(p->retry, flags & TETHER_IDEMPOTENT, timeout_ms,
                                route_once, &c, err);
}
