/* demo_check.c - the invariants `tether demo` (and its --chaos soak)
 * checks all along (demo.h): no connection held by two callers, no call
 * later than its limit, no idempotent failure while the database served
 * others before the caller's deadline, resident memory, and writes back
 * soon after each fault. */
#include "demo.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) ||           \
    __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#else
#define UNDER_SANITIZER 0
#endif

int check_writes_back_ms(void) {
    return UNDER_SANITIZER ? CHECK_WRITES_BACK_SANITIZER_MS
                           : CHECK_WRITES_BACK_MS;
}

int check_overrun_slack_ms(void) {
    return UNDER_SANITIZER ? CHECK_OVERRUN_SLACK_SANITIZER_MS
                           : CHECK_OVERRUN_SLACK_MS;
}

static atomic_uint_fast64_t overruns;
static atomic_int_fast64_t worst_overrun;

/* Each thread's /proc/thread-self/schedstat, open for its life. */
static pthread_key_t schedstat_key;
static pthread_once_t schedstat_once = PTHREAD_ONCE_INIT;

static void schedstat_close(void *p) {
    close((int)(intptr_t)p - 1);
}

static void schedstat_init(void) {
    pthread_key_create(&schedstat_key, schedstat_close);
}

int64_t check_cpu_wait_ms(void) {
    pthread_once(&schedstat_once, schedstat_init);
    intptr_t v = (intptr_t)pthread_getspecific(schedstat_key);
    if (v == 0) { /* fd + 1, so that 0 means not opened yet */
        int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        v = fd >= 0 ? fd + 1 : -1;
        pthread_setspecific(schedstat_key, (void *)v);
    }
    char buf[96];
    ssize_t n = v > 0 ? pread((int)v - 1, buf, sizeof(buf) - 1, 0) : -1;
    unsigned long long on_cpu, waited;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (sscanf(buf, "%llu %llu", &on_cpu, &waited) != 2)
        return 0;
    return (int64_t)(waited / 1000000ull);
}

int64_t check_took(int64_t took_ms, int64_t cpu_wait_ms, int64_t limit_ms) {
    int64_t over = took_ms - (cpu_wait_ms > 0 ? cpu_wait_ms : 0) - limit_ms;
    if (over <= 0)
        return over;
    int_fast64_t w = atomic_load(&worst_overrun);
    while (over > w && !atomic_compare_exchange_weak(&worst_overrun, &w, over))
        ;
    if (over > check_overrun_slack_ms())
        atomic_fetch_add(&overruns, 1);
    return over;
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

/* ---- writes back after a fault ------------------------------------------ */

static void keep_max(atomic_int_fast64_t *v, int64_t x);

/* How long after a caught connect's timeout its pool may take to record
 * the failure in its breaker (the connector's other hosts first). */
#define CAUGHT_RECORD_MS 1000

/* The pacing in force when the server came back: the breaker's period
 * (tether_pool_metrics.breaker_blocked_ms while it is open; a half-open
 * breaker's probe is connecting, and passes over the hosts every 100 to
 * 500 ms) and a pause between passes that a connect of the pool began (2
 * to 4 s after a "too many connections"). docs/failures.md, "Writes back
 * after a fault". */

void check_watch_init(pool_watch *w, const char *name, tether_pool *p) {
    w->name = name;
    w->pool = p;
    atomic_store(&w->pause_end_ms, 0);
}

void check_watch_event(pool_watch *w, int64_t now_ms,
                       const tether_connect_event *ev) {
    if (ev->phase == TETHER_PHASE_PAUSE)
        keep_max(&w->pause_end_ms, now_ms + ev->delay_ms);
}

void check_back_start(fault_back *b, pool_watch *w, int64_t back_ms) {
    tether_pool_metrics m;
    tether_pool_metrics_get(w->pool, &m);
    int64_t pause_end = atomic_load(&w->pause_end_ms);
    b->pause_left_ms = pause_end > back_ms ? pause_end - back_ms : 0;
    b->state = m.breaker_state;
    atomic_store(&b->min_budget, -1);
    atomic_store(&b->max_budget, -1);
    atomic_store(&b->first_fail_code, 0);
    atomic_store(&b->first_fail_ms, 0);
    atomic_store(&b->caught_ms, 0);
    b->caught_read = b->caught_opened = 0;
    b->period_end_ms = back_ms;
    if (b->state == TETHER_BREAKER_OPEN)
        b->period_end_ms += m.breaker_blocked_ms;
}

int64_t check_back_allowance_ms(const fault_back *b, int64_t back_ms) {
    int64_t from = b->period_end_ms > back_ms ? b->period_end_ms : back_ms;
    if (back_ms + b->pause_left_ms > from)
        from = back_ms + b->pause_left_ms;
    return from - back_ms + check_writes_back_ms();
}

void check_back_judge(fault_back *b, int64_t back_ms, int64_t now_ms) {
    int64_t limit = back_ms + check_back_allowance_ms(b, back_ms);
    int64_t wrote = atomic_load(&b->first_write_ms);
    b->judged = wrote > 0 || now_ms > limit;
    b->breach = wrote > 0 ? wrote > limit : now_ms > limit;
}

int check_back_due(const fault_back *b, int64_t back_ms, int64_t now_ms) {
    if (atomic_load(&b->first_write_ms))
        return 1;
    return now_ms > back_ms + check_back_allowance_ms(b, back_ms);
}

static void keep_min(atomic_int_fast64_t *v, int64_t x) {
    int_fast64_t cur = atomic_load(v);
    while ((cur < 0 || x < cur) && !atomic_compare_exchange_weak(v, &cur, x))
        ;
}

static void keep_max(atomic_int_fast64_t *v, int64_t x) {
    int_fast64_t cur = atomic_load(v);
    while (x > cur && !atomic_compare_exchange_weak(v, &cur, x))
        ;
}

void check_back_caught(fault_back *b, pool_watch *w, int64_t now_ms) {
    int64_t caught = atomic_load(&b->caught_ms);
    if (!caught || b->caught_read)
        return;
    tether_pool_metrics m;
    tether_pool_metrics_get(w->pool, &m);
    if (m.breaker_state == TETHER_BREAKER_OPEN) {
        if (now_ms + m.breaker_blocked_ms > b->period_end_ms)
            b->period_end_ms = now_ms + m.breaker_blocked_ms;
        b->caught_read = b->caught_opened = 1;
    } else if (now_ms - caught > CAUGHT_RECORD_MS) {
        b->caught_read = 1; /* it opened nothing */
    }
}

/* A connect attempt that timed out at now_ms with its whole budget begun
 * before the server's return at back_ms was caught in the outage. */
static void note_caught(fault_back *b, const tether_connect_event *ev,
                        int64_t now_ms, int64_t back_ms) {
    int_fast64_t none = 0;
    if (ev->code == TETHER_ETIMEDOUT && ev->budget_ms >= 0 &&
        now_ms - ev->budget_ms < back_ms)
        atomic_compare_exchange_strong(&b->caught_ms, &none, now_ms);
}

void check_back_event(fault_back *b, const tether_connect_event *ev,
                      int64_t now_ms, int64_t back_ms) {
    switch (ev->phase) {
    case TETHER_PHASE_PAUSE:
        atomic_fetch_add(&b->pause_ms, ev->delay_ms);
        return;
    case TETHER_PHASE_SKIP:
        atomic_fetch_add(&b->skipped, 1);
        return;
    case TETHER_PHASE_FAIL:
        if (atomic_fetch_add(&b->failed, 1) == 0) {
            atomic_store(&b->first_fail_ms, now_ms - back_ms);
            atomic_store(&b->first_fail_code, ev->code ? ev->code : -1);
        }
        note_caught(b, ev, now_ms, back_ms);
        break;
    case TETHER_PHASE_ROLE:
        atomic_fetch_add(&b->wrong_role, 1);
        break;
    case TETHER_PHASE_OK:
        break;
    default:
        return;
    }
    atomic_fetch_add(&b->attempts, 1);
    if (ev->budget_ms >= 0) {
        keep_min(&b->min_budget, ev->budget_ms);
        keep_max(&b->max_budget, ev->budget_ms);
    }
}
