/*
 * query_apr.c - SELECT 1 per second through an apr_reslist (apr-util 1.x)
 * of libpq connections, side by side with `tether bench query`.
 *
 * The reslist holds P connections (min = smax = hmax = P, ttl 0; the
 * constructor is PQconnectdb, the destructor PQfinish) with no acquire
 * timeout: an acquire on an exhausted list blocks until a release.  All P
 * are opened by apr_reslist_create and each runs one SELECT 1 before the
 * window.  Each of T threads loops apr_reslist_acquire, SELECT 1,
 * apr_reslist_release; a connection whose query failed because it broke is
 * apr_reslist_invalidate'd (the list makes a new one).
 *
 *   query_apr --conninfo C --threads T --pool P --seconds S [--json]
 */
#include "query_common.h"

#include <apr_general.h>
#include <apr_pools.h>
#include <apr_reslist.h>

static atomic_int connect_failed;

static apr_status_t pg_construct(void **resource, void *params, apr_pool_t *pool)
{
    (void)pool;
    char why[256];
    PGconn *c = q_connect(params, why, sizeof why);
    if (!c) {
        if (atomic_exchange(&connect_failed, 1) == 0)
            fprintf(stderr, "query_apr: connect: %.*s\n", (int)strcspn(why, "\n"), why);
        return APR_EGENERAL;
    }
    *resource = c;
    return APR_SUCCESS;
}

static apr_status_t pg_destruct(void *resource, void *params, apr_pool_t *pool)
{
    (void)params;
    (void)pool;
    PQfinish(resource);
    return APR_SUCCESS;
}

static void *worker(void *arg)
{
    struct q_thread *t = arg;
    apr_reslist_t *rl = t->ctx;
    if (!q_start(t, NULL))
        return NULL;
    while (!q_should_stop()) {
        void *res;
        uint64_t t0 = bench_now_ns();
        apr_status_t rv = apr_reslist_acquire(rl, &res);
        uint64_t tw = bench_now_ns();
        if (rv != APR_SUCCESS) {
            q_error(t, "apr_reslist_acquire", "failed");
            t->errors++;
            q_error_pause();
            continue;
        }
        PGconn *c = res;
        if (!q_select1(t, c)) {
            t->errors++;
            if (PQstatus(c) == CONNECTION_BAD)
                apr_reslist_invalidate(rl, res);
            else
                apr_reslist_release(rl, res);
            q_error_pause();
            continue;
        }
        apr_reslist_release(rl, res);
        q_op_done(t, t0, tw, bench_now_ns());
    }
    return NULL;
}

static void apr_die(const char *what, apr_status_t rv)
{
    char buf[256];
    fprintf(stderr, "query_apr: %s: %s\n", what, apr_strerror(rv, buf, sizeof buf));
    exit(2);
}

/* Acquire all P connections, SELECT 1 on each, release them. */
static int warm_up(apr_reslist_t *rl, int pool)
{
    void **res = calloc((size_t)pool, sizeof *res);
    struct q_thread *t = calloc(1, sizeof *t);
    int n = 0, rc = res && t ? 0 : -1;
    while (rc == 0 && n < pool && apr_reslist_acquire(rl, &res[n]) == APR_SUCCESS) {
        if (!q_select1(t, res[n++])) {
            fprintf(stderr, "query_apr: warm-up: %s\n", t->error);
            rc = -1;
        }
    }
    if (rc == 0 && n < pool)
        rc = -1;
    for (int i = 0; i < n; i++)
        apr_reslist_release(rl, res[i]);
    free(res);
    free(t);
    return rc;
}

int main(int argc, char **argv)
{
    struct q_opts o = {.impl = "apr_reslist"};
    int prc = q_parse(argc, argv,
                      "SELECT 1 through an apr_reslist of P libpq connections (default 8).",
                      &o);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    int pool_size = o.pool ? o.pool : 8;

    apr_status_t rv = apr_initialize();
    if (rv != APR_SUCCESS)
        apr_die("apr_initialize", rv);
    apr_pool_t *pool = NULL;
    rv = apr_pool_create(&pool, NULL);
    if (rv != APR_SUCCESS)
        apr_die("apr_pool_create", rv);
    apr_reslist_t *rl = NULL;
    rv = apr_reslist_create(&rl, pool_size, pool_size, pool_size, 0, pg_construct, pg_destruct,
                            (void *)o.conninfo, pool);
    if (rv != APR_SUCCESS)
        apr_die("apr_reslist_create", rv);
    apr_reslist_timeout_set(rl, 0); /* block until a connection is free */
    if (warm_up(rl, pool_size) != 0)
        return 2;

    struct q_result r;
    int rc = q_run(&o, worker, rl, &r);
    if (rc == 0)
        q_report(&o, pool_size, &r);

    rv = apr_reslist_destroy(rl);
    if (rv != APR_SUCCESS)
        apr_die("apr_reslist_destroy", rv);
    apr_pool_destroy(pool);
    apr_terminate();
    return rc != 0 ? 2 : r.ops == 0 ? 1 : 0;
}
