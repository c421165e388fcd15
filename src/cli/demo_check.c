/* demo_check.c - the invariants `tether demo` (and its --chaos soak)
 * checks all along (demo.h): no connection held by two callers, no call
 * later than its limit, no idempotent failure while the database served
 * others before the caller's deadline, resident memory. */
#include "demo.h"

#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- a connection held by two callers ------------------------------------ */

#define MAX_HELD 512

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static const void *held[MAX_HELD];
static atomic_uint_fast64_t double_leases;

void check_hold(const void *conn) {
    pthread_mutex_lock(&held_lock);
    int free_at = -1, twice = 0;
    for (int i = 0; i < MAX_HELD; i++) {
        if (held[i] == conn)
            twice = 1;
        else if (!held[i] && free_at < 0)
            free_at = i;
    }
    if (!twice && free_at >= 0)
        held[free_at] = conn;
    pthread_mutex_unlock(&held_lock);
    if (twice)
        atomic_fetch_add(&double_leases, 1);
}

void check_unhold(const void *conn) {
    pthread_mutex_lock(&held_lock);
    for (int i = 0; i < MAX_HELD; i++)
        if (held[i] == conn) {
            held[i] = NULL;
            break;
        }
    pthread_mutex_unlock(&held_lock);
}

/* ---- calls later than their limit ---------------------------------------- */

static atomic_uint_fast64_t overruns;
static atomic_int_fast64_t worst_overrun;

void check_took(int64_t took_ms, int64_t limit_ms) {
    int64_t over = took_ms - limit_ms;
    if (over <= 0)
        return;
    int_fast64_t w = atomic_load(&worst_overrun);
    while (over > w && !atomic_compare_exchange_weak(&worst_overrun, &w, over))
        ;
    if (over > CHECK_OVERRUN_SLACK_MS)
        atomic_fetch_add(&overruns, 1);
}

/* ---- idempotent failures ------------------------------------------------- */

typedef struct failed_op {
    int64_t end_ms, deadline_ms;
} failed_op;

static pthread_mutex_t failed_lock = PTHREAD_MUTEX_INITIALIZER;
static failed_op *failed;
static size_t nfailed, failed_cap;

void check_failed(int64_t start_ms, int64_t end_ms, int64_t limit_ms) {
    pthread_mutex_lock(&failed_lock);
    if (nfailed == failed_cap) {
        size_t cap = failed_cap ? 2 * failed_cap : 256;
        failed_op *f = realloc(failed, cap * sizeof(*f));
        if (f) {
            failed = f;
            failed_cap = cap;
        }
    }
    if (nfailed < failed_cap)
        failed[nfailed++] = (failed_op){end_ms, start_ms + limit_ms};
    pthread_mutex_unlock(&failed_lock);
}

/* A failure is covered when some statement succeeded in a later whole
 * second that ended before the failed call's deadline: the database was
 * serving again, and the call gave up before its time was out. */
static uint64_t covered(const sec_stats *secs, int nsecs) {
    uint64_t k = 0;
    pthread_mutex_lock(&failed_lock);
    for (size_t i = 0; i < nfailed; i++) {
        int from = (int)(failed[i].end_ms / 1000) + 1;
        int to = (int)(failed[i].deadline_ms / 1000) - 1;
        for (int s = from; s <= to && s < nsecs; s++)
            if (secs[s].ops > 0) {
                k++;
                break;
            }
    }
    pthread_mutex_unlock(&failed_lock);
    return k;
}

/* ---- memory -------------------------------------------------------------- */

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) ||           \
    __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#else
#define UNDER_SANITIZER 0
#endif

int check_memory_measured(void) {
    return !UNDER_SANITIZER; /* their allocators keep freed memory */
}

long check_heap_kb(void) {
    struct mallinfo2 mi = mallinfo2();
    return (long)((mi.uordblks + mi.hblkhd) / 1024);
}

long check_rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = 0;
    fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ---- the totals ---------------------------------------------------------- */

void check_totals(check_report *r, const sec_stats *secs, int nsecs) {
    r->double_leases = atomic_load(&double_leases);
    r->deadline_overruns = atomic_load(&overruns);
    r->worst_overrun_ms = atomic_load(&worst_overrun);
    r->covered_errors = covered(secs, nsecs);
}
