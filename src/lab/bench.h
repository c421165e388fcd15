/* bench.h - what `tether bench cycle` (bench.c) and `tether bench query`
 * (bench_query.c) share: the options both take. */
#ifndef TETHER_LAB_BENCH_H
#define TETHER_LAB_BENCH_H

#include "cli.h"

/* The options both take (bench.c parses them). */
typedef struct bench_opts {
    int threads, pool;
    int64_t seconds_ms;
    int json;
} bench_opts;

/* Their shared options' vals; a benchmark's own ones start at BENCH_OPT_OWN.
 */
enum {
    BENCH_OPT_THREADS = 256,
    BENCH_OPT_POOL,
    BENCH_OPT_SECONDS,
    BENCH_OPT_JSON,
    BENCH_OPT_OWN
};

/* The shared options, for a struct option table. */
/* clang-format off */
#define BENCH_OPTIONS                                                         \
    {"threads", required_argument, NULL, BENCH_OPT_THREADS},                  \
    {"pool", required_argument, NULL, BENCH_OPT_POOL},                        \
    {"seconds", required_argument, NULL, BENCH_OPT_SECONDS},                  \
    {"json", no_argument, NULL, BENCH_OPT_JSON}
/* clang-format on */

/* tether__bench_take_opt is a cli_opt_fn (of command cmd) for the shared
 * options; any other opt is an unexpected argument. */
int tether__bench_take_opt(const char *cmd, bench_opts *b, int opt,
                           const char *v);

/* tether__lab_bench_query runs `tether bench query` (argv[0] "query"). */
int tether__lab_bench_query(int argc, char **argv);

#endif
