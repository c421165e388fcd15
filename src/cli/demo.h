/* demo.h - what `tether demo` (demo.c) hands its timeline drawing
 * (demo_svg.c). */
#ifndef TETHER_CLI_DEMO_H
#define TETHER_CLI_DEMO_H

#include "faults.h"
#include "hist.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* One second of the timeline. */
typedef struct sec_stats {
    uint64_t ops, app_errors, write_failures;
    uint64_t retries; /* the pool's retries counter at its end */
    lat_hist lat;
} sec_stats;

/* What happened during one fault. */
typedef struct fault_rec {
    fault_event e;
    int applied; /* 0: it could not be done (detail says) */
    int64_t start_ms, inforce_ms;
    atomic_int_fast64_t first_ok_ms; /* 0 until a success after inforce */
    atomic_uint_fast64_t app_errors, write_failures;
    char detail[200];
} fault_rec;

/* demo_svg writes the timeline of nsecs seconds (throughput, p99
 * latency, retries and errors a second) with a marker for each fault that
 * began, as an SVG image to path. Returns 0, or -1 with why filled. */
int demo_svg(const char *path, const sec_stats *secs, int nsecs,
             const fault_rec *faults, int nfaults, char *why, size_t n);

#endif
