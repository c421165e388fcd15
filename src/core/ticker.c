/* ticker.c - the shared coarse time word and the one thread that keeps it.
 *
 * The per-operation paths (the pool's acquire and release, the pq driver's
 * role tick) read the time from one word instead of the clock: the ticker
 * thread stores CLOCK_MONOTONIC in it every TICK_MS. The thread runs while
 * anything is subscribed; each subscriber's callback runs on it every tick
 * (the pool's housekeeping rides on it, so the process has one background
 * thread, not one per pool). With no thread, readers fall back to the
 * coarse clock (tether__ticker_ms).
 *
 * tether_ticks_external stops the thread and lets the application run the
 * ticks with tether_tick, from its event loop (docs/evloop.md, "Ticks on
 * the loop"): a single-threaded program then has no thread of ours. */
#include "internal.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#define TICK_MS 10

_Atomic int64_t tether__ticker;
_Atomic int tether__ticker_on;

static pthread_mutex_t tk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tk_cv;
static pthread_once_t tk_once = PTHREAD_ONCE_INIT;
static tether__tick_sub *tk_subs;
static int tk_running;
static uint64_t tk_gen;
static pthread_t tk_thread;
static int tk_external;    /* tether_ticks_external's count */
static unsigned tk_manual; /* ticks run by tether_tick */

static void tk_init(void) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&tk_cv, &ca);
    pthread_condattr_destroy(&ca);
}

static void publish(void) {
    atomic_store_explicit(&tether__ticker, tether__mono_ns() / 1000000,
                          memory_order_relaxed);
}

static void wait_tick(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += TICK_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&tk_cv, &tk_lock, &ts);
}

/* The thread: callbacks run under tk_lock, so unsubscribe returning means
 * the callback is not running and will not run again. */
static void *tk_main(void *arg) {
    uint64_t mine = (uint64_t)(uintptr_t)arg;
    unsigned tick = 0;
    pthread_mutex_lock(&tk_lock);
    while (tk_running && tk_gen == mine) {
        publish();
        tick++;
        for (tether__tick_sub *s = tk_subs; s; s = s->next)
            s->fn(s->ctx, tick);
        wait_tick();
    }
    pthread_mutex_unlock(&tk_lock);
    return NULL;
}

/* Start the thread (tk_lock held, not running). */
static void start_locked(void) {
    tk_running = 1;
    tk_gen++;
    publish();
    /* Every signal blocked on the thread: the application's signals go to
     * its own threads (a program under libtether-preload never knew this
     * thread exists). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc =
        pthread_create(&tk_thread, NULL, tk_main, (void *)(uintptr_t)tk_gen);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        atomic_store(&tether__ticker_on, 1);
    else
        tk_running = 0; /* no thread: readers use the coarse clock */
}

/* Tell the thread to end (tk_lock held, running); the caller joins *t
 * once it has let the lock go. */
static void stop_locked(pthread_t *t) {
    tk_running = 0;
    atomic_store(&tether__ticker_on, 0);
    pthread_cond_broadcast(&tk_cv);
    *t = tk_thread;
}

void tether__ticker_subscribe(tether__tick_sub *s) {
    pthread_once(&tk_once, tk_init);
    pthread_mutex_lock(&tk_lock);
    s->next = tk_subs;
    tk_subs = s;
    if (!tk_running && !tk_external)
        start_locked();
    pthread_mutex_unlock(&tk_lock);
}

void tether__ticker_unsubscribe(tether__tick_sub *s) {
    pthread_mutex_lock(&tk_lock);
    tether__tick_sub **pp = &tk_subs;
    while (*pp && *pp != s)
        pp = &(*pp)->next;
    if (*pp)
        *pp = s->next;
    int stop = tk_running && !tk_subs;
    pthread_t t;
    if (stop)
        stop_locked(&t);
    pthread_mutex_unlock(&tk_lock);
    if (stop)
        pthread_join(t, NULL);
}

void tether_ticks_external(int on) {
    pthread_once(&tk_once, tk_init);
    pthread_mutex_lock(&tk_lock);
    int stop = 0;
    pthread_t t;
    if (on) {
        stop = tk_external++ == 0 && tk_running;
        if (stop)
            stop_locked(&t);
    } else if (tk_external > 0 && --tk_external == 0 && tk_subs &&
               !tk_running) {
        start_locked();
    }
    pthread_mutex_unlock(&tk_lock);
    if (stop)
        pthread_join(t, NULL);
}

void tether_tick(void) {
    pthread_once(&tk_once, tk_init);
    pthread_mutex_lock(&tk_lock);
    if (!tk_running) { /* the thread, when it runs, keeps its own ticks */
        tk_manual++;
        for (tether__tick_sub *s = tk_subs; s; s = s->next)
            s->fn(s->ctx, tk_manual);
    }
    pthread_mutex_unlock(&tk_lock);
}

void tether__ticker_fork_prepare(void) {
    pthread_once(&tk_once, tk_init);
    pthread_mutex_lock(&tk_lock);
}

void tether__ticker_fork_parent(void) {
    pthread_mutex_unlock(&tk_lock);
}

void tether__ticker_fork_child(void) {
    tk_subs = NULL;
    tk_running = 0;
    tk_gen++;
    atomic_store(&tether__ticker_on, 0);
    pthread_mutex_init(&tk_lock, NULL);
    tk_init(); /* a fresh condition variable: the old one had a waiter */
}
