/*
 * apr_cycle.c - acquire+release cycles per second of apr_reslist
 * (apr-util 1.x), for side-by-side comparison with `tether bench cycle`.
 *
 * The reslist holds P tiny malloc'd objects (min = smax = hmax = P, ttl 0,
 * acquire timeout 0 = wait forever).  Each of T threads loops
 * apr_reslist_acquire + apr_reslist_release until the window closes.
 *
 *   apr_cycle --threads T --pool P --seconds S [--json] [--wait|--no-wait]
 */
#include "peer_common.h"

#include <apr_general.h>
#include <apr_pools.h>
#include <apr_reslist.h>

struct dummy_resource {
    uint64_t id;
    char pad[56];
};

static apr_status_t res_construct(void **resource, void *params, apr_pool_t *pool)
{
    (void)params;
    (void)pool;
    struct dummy_resource *r = malloc(sizeof *r);
    if (!r)
        return APR_ENOMEM;
    memset(r, 0, sizeof *r);
    *resource = r;
    return APR_SUCCESS;
}

static apr_status_t res_destruct(void *resource, void *params, apr_pool_t *pool)
{
    (void)params;
    (void)pool;
    free(resource);
    return APR_SUCCESS;
}

struct apr_ctx {
    apr_reslist_t *rl;
    bool wait_sample;
};

static void *worker(void *arg)
{
    struct peer_thread *t = arg;
    const struct apr_ctx *c = t->ctx;
    apr_reslist_t *rl = c->rl;
    const bool sample = c->wait_sample;
    uint64_t ops = 0, failures = 0;
    /* De-phase the 1-in-64 sampling between threads. */
    unsigned tick = t->index * 7u;

    peer_wait_start();
    while (!peer_should_stop()) {
        void *res;
        apr_status_t rv;
        if (sample && (++tick & (PEER_SAMPLE_EVERY - 1)) == 0) {
            uint64_t t0 = bench_now_ns();
            rv = apr_reslist_acquire(rl, &res);
            peer_record_wait(t, bench_now_ns() - t0);
        } else {
            rv = apr_reslist_acquire(rl, &res);
        }
        if (rv != APR_SUCCESS) {
            failures++;
            continue;
        }
        apr_reslist_release(rl, res);
        ops++;
    }
    t->ops = ops;
    t->failures = failures;
    return NULL;
}

static void apr_die(const char *what, apr_status_t rv)
{
    char buf[256];
    fprintf(stderr, "apr_cycle: %s: %s\n", what, apr_strerror(rv, buf, sizeof buf));
    exit(2);
}

int main(int argc, char **argv)
{
    struct peer_opts o;
    int prc = peer_parse(argc, argv, &o);
    if (prc != 0)
        return prc > 0 ? 0 : 2;

    apr_status_t rv = apr_initialize();
    if (rv != APR_SUCCESS)
        apr_die("apr_initialize", rv);
    apr_pool_t *pool = NULL;
    rv = apr_pool_create(&pool, NULL);
    if (rv != APR_SUCCESS)
        apr_die("apr_pool_create", rv);

    struct apr_ctx ctx = {.rl = NULL, .wait_sample = o.wait_sample};
    rv = apr_reslist_create(&ctx.rl, o.pool, o.pool, o.pool, 0, res_construct,
                            res_destruct, NULL, pool);
    if (rv != APR_SUCCESS)
        apr_die("apr_reslist_create", rv);
    apr_reslist_timeout_set(ctx.rl, 0); /* block until a resource is free */

    struct peer_result r;
    if (peer_run(&o, worker, &ctx, &r) != 0)
        return 2;
    peer_report("apr_reslist", &o, &r);

    rv = apr_reslist_destroy(ctx.rl);
    if (rv != APR_SUCCESS)
        apr_die("apr_reslist_destroy", rv);
    apr_pool_destroy(pool);
    apr_terminate();
    return 0;
}
