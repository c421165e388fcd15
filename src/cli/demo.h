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
    int64_t start_ms;
    atomic_int_fast64_t inforce_ms;  /* 0 until it is in force */
    atomic_int_fast64_t first_ok_ms; /* 0 until a success after inforce */
    atomic_uint_fast64_t app_errors, write_failures;
    char detail[200];
} fault_rec;

/* ---- invariants (demo_check.c) ---- */

/* How much later than its limit a call may return before it counts as an
 * overrun (the reliability campaign's bound). */
#define CHECK_OVERRUN_SLACK_MS 20

typedef struct check_report {
    uint64_t double_leases;         /* a connection handed to two callers */
    uint64_t deadline_overruns;     /* calls later than limit + slack */
    int64_t worst_overrun_ms;       /* the latest, slack or not (0: none) */
    uint64_t covered_errors;        /* idempotent failures while others were
                                       served again before the deadline */
    uint64_t accounting_mismatches; /* filled by demo.c's sampler */
    long rss_warm_kb, rss_end_kb;
    long heap_warm_kb, heap_end_kb; /* bytes malloc has handed out */
} check_report;

/* check_hold notes that conn is now held by a caller (counting a double
 * lease when another holds it); check_unhold that it is given back. */
void check_hold(const void *conn);
void check_unhold(const void *conn);

/* check_took notes a call that took took_ms within a limit of limit_ms. */
void check_took(int64_t took_ms, int64_t limit_ms);

/* check_failed notes an idempotent call that failed at end_ms (run clock),
 * begun at start_ms with limit_ms. */
void check_failed(int64_t start_ms, int64_t end_ms, int64_t limit_ms);

/* check_rss_kb returns the process's resident memory; check_heap_kb what
 * malloc has handed out and not had back (glibc's mallinfo2): resident
 * memory that grows while this does not is the allocator's free lists. */
long check_rss_kb(void);
long check_heap_kb(void);

/* check_memory_measured is 0 in a sanitizer build: ASan's quarantine and
 * the sanitizers' shadow memory grow resident memory on their own. */
int check_memory_measured(void);

/* check_totals fills r's counters (not the sampler's nor the memory). */
void check_totals(check_report *r, const sec_stats *secs, int nsecs);

/* demo_svg writes the timeline of nsecs seconds (throughput, p99
 * latency, retries and errors a second) with a marker for each fault that
 * began, as an SVG image to path. Returns 0, or -1 with why filled. */
int demo_svg(const char *path, const sec_stats *secs, int nsecs,
             const fault_rec *faults, int nfaults, char *why, size_t n);

#endif
