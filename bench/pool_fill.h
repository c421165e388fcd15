/* pool_fill.h - for the bench programs (bench/corun.c, bench/interleave.c):
 * a tether pool of exactly size connections, each opened and checked once
 * before the measured window. Include after <tether.h>. */
#ifndef TETHER_BENCH_POOL_FILL_H
#define TETHER_BENCH_POOL_FILL_H

#include <stdio.h>
#include <stdlib.h>

/* bench_pool_open opens *out from conninfo with min = max = size and
 * leases every connection once; returns 0, or -1 with the reason on
 * stderr (prefixed with prog). */
static int bench_pool_open(tether_pool **out, const char *conninfo, int size,
                           const char *prog) {
    char *ci = NULL;
    tether_error err;
    if (asprintf(&ci, "%s tether_pool_min=%d tether_pool_max=%d", conninfo,
                 size, size) < 0)
        return -1;
    int rc = tether_pool_open(out, ci, NULL, NULL, &err);
    free(ci);
    if (rc == 0) {
        tether_lease *l[256];
        int n = 0;
        while (n < size && n < 256 &&
               tether_pool_acquire(*out, 10000, &l[n], &err) == 0)
            n++;
        for (int i = 0; i < n; i++)
            tether_lease_release(l[i]);
        rc = n == size ? 0 : -1;
    }
    if (rc != 0)
        fprintf(stderr, "%s: pool: %s\n", prog, err.message);
    return rc;
}

#endif
