/* route.h - read/write routing (docs/routing.md): a wrapper above the
 * pool that owns a routing pool's read side. The pool never calls it. */
#ifndef TETHER_ROUTE_H
#define TETHER_ROUTE_H

#include "pool.h"

/* The lag query of a read side's connections (a driver's lag operation). */
typedef int (*tether__lag_fn)(void *conn, int64_t timeout_ms, int64_t *lag_ms,
                              int64_t *lag_bytes, tether_error *err);

/* How a pool routes TETHER_READONLY work (route.c, docs/routing.md). */
typedef struct tether__route {
    tether_pool *read;      /* the read side: standby connections, owned */
    int64_t max_lag_ms;     /* skip a standby lagging more; -1: no bound */
    int64_t max_lag_bytes;  /* the same in bytes of WAL; -1: no bound */
    int64_t lag_recheck_ms; /* how long a lag verdict holds */
    int64_t read_wait_ms;   /* the most the read side may take of a run */
    tether__lag_fn lag;     /* the read side's driver's, or a test's */
    _Atomic uint64_t reads_standby, reads_primary, reads_lagging, reroutes,
        lag_checks;
} tether__route;

/* tether__route_attach makes w route TETHER_READONLY work to read, which
 * it then owns (destroyed with w, on failure too). The bounds, recheck and
 * wait come from k (k->on is not read). */
int tether__route_attach(tether_pool *w, tether_pool *read,
                         const tether__route_keys *k, tether_error *err);

/* tether__route_run is tether_pool_run_for of TETHER_READONLY work on a
 * routing pool. */
int tether__route_run(tether_pool *p, unsigned flags, int64_t timeout_ms,
                      tether_work_fn fn, void *arg, tether_error *err);

/* tether__route_close closes p's read side within wait_ms (-1: forever)
 * and returns what is left of wait_ms for the rest of the close. */
int64_t tether__route_close(tether_pool *p, int64_t wait_ms);

/* tether__route_free destroys p's read side and routing state (NULL
 * route: nothing). */
void tether__route_free(tether_pool *p);

#endif
