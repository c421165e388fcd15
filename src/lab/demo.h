/* demo.h - what `tether demo` (demo.c) hands its timeline drawing
 * (demo_svg.c). */
#ifndef TETHER_LAB_DEMO_H
#define TETHER_LAB_DEMO_H

#include "faults.h"
#include "hist.h"

#include <tether.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The pools a run watches: the application's (today's workload) and the
 * job worker's (short deadlines, transactions: docs/failures.md, "A real
 * service's mix"). */
enum { POOL_APP, POOL_JOBS, DEMO_POOLS };

/* Writes must be back this long after the later of the server's return
 * and the end of the breaker's period in force then (docs/failures.md,
 * "Writes back after a fault"); longer in a build under a sanitizer, which
 * slows the connects that bring them back 5-15 fold. */
#define CHECK_WRITES_BACK_MS 1000
#define CHECK_WRITES_BACK_SANITIZER_MS 3000

/* check_writes_back_ms: this build's allowance (one of the two above). */
int check_writes_back_ms(void);

/* One pool's writes after one fault's server came back. */
typedef struct fault_back {
    atomic_int_fast64_t first_write_ms; /* first write done at or after the
                                           server's return; 0: none yet */
    int judged;                 /* 0: the run ended before its allowance did */
    int breach;                 /* back later than its allowance */
    tether_breaker_state state; /* the breaker at the server's return */
    int64_t period_end_ms;      /* end of the period in force then (run clock;
                                   the return itself when none was) */
    /* The pool's connect steps from the server's return until the first
     * write (its connect events): what kept the writes away. */
    atomic_uint attempts, failed, wrong_role, skipped;
    atomic_int_fast64_t pause_ms;               /* pauses between passes */
    atomic_int_fast64_t min_budget, max_budget; /* of the attempts; -1 */
    /* The first failed attempt: its code (0: none) and when it failed,
     * from the server's return. */
    atomic_int first_fail_code;
    atomic_int_fast64_t first_fail_ms;
    int64_t pause_left_ms; /* a connector's pause between passes in force at
                              the return: how much of it was left (0 none) */
    /* A connect attempt begun in the outage that timed out after the return
     * (its whole budget began before it): when (0 none), and whether the
     * breaker's period it opened was read into period_end_ms yet. */
    atomic_int_fast64_t caught_ms;
    int caught_read, caught_opened;
} fault_back;

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
    atomic_uint_fast64_t job_failures; /* jobs not acknowledged */
    atomic_int_fast64_t back_ms;       /* the server back (run clock); 0:
                                          not yet */
    atomic_int_fast64_t lifted_ms;     /* a blackhole: when the proxy passed
                                          bytes again (0: not yet) */
    fault_back wb[DEMO_POOLS];
    int back_judged; /* wb judged (by the fault thread, else at the end) */
    char detail[200];
} fault_rec;

/* ---- invariants (demo_check.c) ---- */

/* How much later than its limit a call may return before it counts as an
 * overrun (the reliability campaign's bound), and the bound in a build under
 * a sanitizer, whose instrumentation slows every thread the call waits on
 * 5-15 fold (docs/reliability.md). */
#define CHECK_OVERRUN_SLACK_MS 20
#define CHECK_OVERRUN_SLACK_SANITIZER_MS 100

/* check_overrun_slack_ms: this build's bound (one of the two above). */
int check_overrun_slack_ms(void);

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

/* check_took notes a call that took took_ms within a limit of limit_ms,
 * of which its thread spent cpu_wait_ms waiting for a CPU (the
 * scheduler's time, not the library's: check_cpu_wait_ms). Returns by how
 * much the library kept it past the limit (<= 0: not). */
int64_t check_took(int64_t took_ms, int64_t cpu_wait_ms, int64_t limit_ms);

/* check_cpu_wait_ms returns how long the calling thread has waited for a
 * CPU while runnable since it started (/proc/thread-self/schedstat), in
 * ms, or 0 when the kernel does not tell. */
int64_t check_cpu_wait_ms(void);

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

/* ---- writes back after a fault (demo_check.c) ---- */

/* What the run watches of a pool: its metrics (the breaker's state and
 * how long it still blocks, tether_pool_metrics.breaker_blocked_ms) at the
 * server's return, and the pauses between passes its connects began
 * (docs/failures.md, "Writes back after a fault"). */
typedef struct pool_watch {
    const char *name;
    tether_pool *pool;
    atomic_int_fast64_t pause_end_ms; /* end of the latest pause between
                                         passes a connect of it began */
} pool_watch;

/* check_watch_init readies w for pool p. */
void check_watch_init(pool_watch *w, const char *name, tether_pool *p);

/* check_back_event counts a connect event ev of b's pool at now_ms (once
 * its server is back at back_ms, until its first write). */
void check_back_event(fault_back *b, const tether_connect_event *ev,
                      int64_t now_ms, int64_t back_ms);

/* check_back_caught, at now_ms, extends b's pacing by the breaker period of
 * w's pool that a connect caught in the outage opened when it timed out
 * after the return (docs/failures.md, "Writes back after a fault"). */
void check_back_caught(fault_back *b, pool_watch *w, int64_t now_ms);

/* check_watch_event notes a connect event of w's pool at now_ms (its
 * pauses between passes). */
void check_watch_event(pool_watch *w, int64_t now_ms,
                       const tether_connect_event *ev);

/* check_back_start records, at the server's return back_ms, the state of
 * w's breaker into b. */
void check_back_start(fault_back *b, pool_watch *w, int64_t back_ms);

/* check_back_judge decides b at now_ms (once writes came back, or at the
 * end of the wait): whether writes came back within check_writes_back_ms() of
 * the later of back_ms and the end of the pacing then in force. */
void check_back_judge(fault_back *b, int64_t back_ms, int64_t now_ms);

/* check_back_due tells whether b is decided at now_ms: writes back, or
 * late already (the allowance past). */
int check_back_due(const fault_back *b, int64_t back_ms, int64_t now_ms);

/* check_back_allowance_ms returns how long after back_ms writes may take
 * to come back under b: the pacing in force at back_ms (the breaker's
 * period, or a connect's pause between passes, whichever ends later), then
 * check_writes_back_ms(). */
int64_t check_back_allowance_ms(const fault_back *b, int64_t back_ms);

/* check_totals fills r's counters (not the sampler's nor the memory). */
void check_totals(check_report *r, const sec_stats *secs, int nsecs);

/* demo_svg writes the timeline of nsecs seconds (throughput, p99
 * latency, retries and errors a second) with a marker for each fault that
 * began, as an SVG image to path. Returns 0, or -1 with why filled. */
int demo_svg(const char *path, const sec_stats *secs, int nsecs,
             const fault_rec *faults, int nfaults, char *why, size_t n);

#endif
