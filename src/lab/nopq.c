/* nopq.c - the lab's PostgreSQL commands in a build without libpq
 * (-DTETHER_PQ=OFF, docs/architecture.md): `tether demo` and `tether bench
 * query` say that this tether cannot run them, rather than being missing.
 * In a build with libpq this file is empty: demo.c and bench_query.c
 * define them. */
#include "bench.h"
#include "cli.h"
#include "lab.h"

#include <stdio.h>

#ifndef TETHER_HAVE_PQ
static int no_pq(const char *cmd) {
    fprintf(stderr,
            "tether %s: this tether was built without PostgreSQL (cmake "
            "-DTETHER_PQ=OFF): %s needs the pq driver\n",
            cmd, cmd);
    return CLI_FAIL;
}

int tether__lab_demo(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return no_pq("demo");
}

int tether__lab_bench_query(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return no_pq("bench query");
}
#else
typedef int tether__lab_nopq_unused; /* ISO C: no empty translation unit */
#endif
