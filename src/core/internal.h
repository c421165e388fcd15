/* internal.h - helpers shared by tether's modules (not installed). Internal
 * non-static names start with tether__. */
#ifndef TETHER_INTERNAL_H
#define TETHER_INTERNAL_H

#include "tether.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#define TETHER__NS_PER_MS 1000000LL

#define TETHER__MIN(a, b) ((a) < (b) ? (a) : (b))
#define TETHER__MAX(a, b) ((a) > (b) ? (a) : (b))

/* Thread-local storage read on hot paths: initial-exec is a plain
 * %fs-relative load, no __tls_get_addr call from the shared library. */
#define TETHER__TLS _Thread_local __attribute__((tls_model("initial-exec")))

/* Marks a function of the per-operation path (acquire, release, run,
 * the driver's alive and reset). The compiler places these together in
 * .text.hot: a cycle then touches two or three code pages instead of ten,
 * which matters because the path runs cold, after each wait for the
 * server has let other processes take the caches and the TLB. */
#define TETHER__HOT __attribute__((hot))

/* A small, fast PRNG (xoshiro256**) seeded through splitmix64. */
typedef struct tether__rng {
    uint64_t s[4];
} tether__rng;

/* tether__rng_seed seeds r; seed 0 draws a seed from the system. */
void tether__rng_seed(tether__rng *r, uint64_t seed);

/* tether__rng_next returns 64 random bits. */
uint64_t tether__rng_next(tether__rng *r);

/* tether__rng_double returns a uniform double in [0, 1). */
double tether__rng_double(tether__rng *r);

/* tether__rng_range returns a uniform integer in [lo, hi] (lo <= hi). */
int64_t tether__rng_range(tether__rng *r, int64_t lo, int64_t hi);

/* tether__system_seed returns a seed from the OS (never 0). */
uint64_t tether__system_seed(void);

/* The library's allocator (src/core/alloc.c): libc's, or the one given to
 * tether_set_allocator. Every allocation of the library goes through these
 * (never malloc and free directly). A size of 0 allocates 1 byte, so NULL
 * always means out of memory. */
void *tether__malloc(size_t n);
void *tether__calloc(size_t n, size_t size);
void *tether__realloc(void *p, size_t n);
void tether__free(void *p);
char *tether__strdup(const char *s);
char *tether__strndup(const char *s, size_t n);

/* tether__aligned_alloc returns n bytes aligned to align (a power of two);
 * free them with tether__aligned_free, never tether__free. */
void *tether__aligned_alloc(size_t align, size_t n);
void tether__aligned_free(void *p);

/* tether__null fills err for a required argument that is NULL (the
 * NULL-handle rule, tether.h): TETHER_EINVAL, "<fn>: <arg> is NULL", and
 * returns TETHER_EINVAL. */
int tether__null(tether_error *err, const char *fn, const char *arg);

/* tether__error_vset is tether_error_set with a va_list and a prefix:
 * the message is "<prefix><formatted text>" (prefix may be ""). */
int tether__error_vset(tether_error *err, int code, tether_class cls,
                       const char *prefix, const char *fmt, va_list ap);

/* Sized structs (docs/api-stability.md): every public options and metrics
 * struct starts with size_t size, the sizeof the caller was compiled with.
 *
 * tether__sized_out writes a struct the library filled (full, full_size
 * bytes, its size field ignored) into the caller's dst of size bytes: the
 * first min(size, full_size) bytes, zero beyond, and dst's size = size.
 * A NULL dst is left alone. */
void tether__sized_out(void *dst, size_t size, const void *full,
                       size_t full_size);

/* tether__sized_in copies the caller's src over dst (full_size bytes,
 * already holding the defaults) as far as src's size field says: a caller
 * built against an older header leaves the newer fields at their
 * defaults. min_size is the struct's first published size. A size of 0
 * (not initialized), below min_size or above full_size (a newer header
 * than this library) is TETHER_EINVAL naming the struct. */
int tether__sized_in(void *dst, size_t full_size, const void *src,
                     size_t min_size, const char *name, tether_error *err);

/* TETHER__SIZED_IN copies the caller's options o (NULL: none) over full,
 * which holds the defaults (tether__sized_in); 0 or TETHER_EINVAL. */
#define TETHER__SIZED_IN(full, o, name, err)                                   \
    ((o) ? tether__sized_in(&(full), sizeof(full), (o), sizeof(full), (name),  \
                            (err))                                             \
         : 0)

/* tether__clock returns c, or the real clock when c is NULL. */
const tether_clock *tether__clock(const tether_clock *c);

/* tether__now_ms reads clock c in milliseconds. */
int64_t tether__now_ms(const tether_clock *c);

/* tether__log formats and sends a message to fn (or the process sink when
 * fn is NULL) if level passes the sink's threshold. */
void tether__log(tether_log_fn fn, void *ctx, tether_log_level level,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* tether__mul_sat multiplies a non-negative ms value by f, saturating at
 * cap (avoids overflow for long exponential sequences). */
int64_t tether__mul_sat(int64_t v, double f, int64_t cap);

/* The shared coarse time word (ms, monotonic), published every 10 ms by
 * the ticker thread (src/core/ticker.c), valid while tether__ticker_on. */
extern _Atomic int64_t tether__ticker;
extern _Atomic int tether__ticker_on;

/* tether__thread_spawn starts fn(arg) on a detached thread with every
 * signal blocked (thread.c). Returns 0, or -1 when no thread was made. */
int tether__thread_spawn(void *(*fn)(void *), void *arg);

/* A subscriber to the ticker: fn(ctx, tick) runs on the ticker thread
 * every tick (tick counts from 1). The node lives in the subscriber. */
typedef struct tether__tick_sub {
    void (*fn)(void *ctx, unsigned tick);
    void *ctx;
    struct tether__tick_sub *next;
} tether__tick_sub;

/* tether__ticker_subscribe adds s and starts the thread if it is the first
 * subscriber. fn must not subscribe or unsubscribe. */
void tether__ticker_subscribe(tether__tick_sub *s);

/* tether__ticker_unsubscribe removes s; once it returns, s->fn is not
 * running and will not run again. The last one stops the thread. */
void tether__ticker_unsubscribe(tether__tick_sub *s);

/* tether__log_fork_prepare, _parent and _child hold the log sink's lock
 * across a fork (registered with pthread_atfork by the preload library,
 * so that a child forked while another thread logs can log). */
void tether__log_fork_prepare(void);
void tether__log_fork_parent(void);
void tether__log_fork_child(void);

/* Fork hooks for a process that keeps using tether in a child (the
 * preload library registers them with pthread_atfork; libtether does not):
 * prepare holds the ticker's lock across fork, parent releases it, child
 * forgets every subscriber (the parent's pools are abandoned, never used)
 * and the thread, which does not exist in the child: the next subscriber
 * starts a new one. */
void tether__ticker_fork_prepare(void);
void tether__ticker_fork_parent(void);
void tether__ticker_fork_child(void);

/* tether__mono_ns reads CLOCK_MONOTONIC in ns (the real clock's now_ns;
 * also for code that must use real time whatever clock it was given). */
int64_t tether__mono_ns(void);

/* tether__attempt is how the library's retry hands an attempt to its
 * operation: the public tether_attempt first (all a caller's operation
 * sees), then when the attempt began (CLOCK_MONOTONIC ns) when the retry
 * read it precisely, else -1. The library's own operations (run.c's and
 * route.c's), which only its retry calls, read it with tether__attempt_of:
 * tether_pool_run counts its statements' default deadline from it. */
typedef struct tether__attempt {
    tether_attempt a;
    int64_t began_ns;
} tether__attempt;

static inline const tether__attempt *
tether__attempt_of(const tether_attempt *a) {
    return (const tether__attempt *)(const void *)a;
}

/* tether__coarse_ms reads CLOCK_MONOTONIC_COARSE in ms. */
int64_t tether__coarse_ms(void);

/* tether__ticker_ms returns the published time, or reads the coarse clock
 * when the ticker is not running. Inline: it is on the fast path. */
static inline int64_t tether__ticker_ms(void) {
    if (atomic_load_explicit(&tether__ticker_on, memory_order_relaxed))
        return atomic_load_explicit(&tether__ticker, memory_order_relaxed);
    return tether__coarse_ms();
}

#endif
