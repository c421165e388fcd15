/*
 * tether.h - connection pool, failover connector and transient-fault handling.
 *
 * The main public header; tether_pq.h adds the PostgreSQL specifics,
 * tether_driver.h the driver interface and the TCP driver, and
 * tether_sim.h a simulated driver and a virtual clock for tests.
 * Conventions:
 *   - every object is an opaque handle with a create/destroy pair; destroy
 *     accepts NULL;
 *   - fallible functions return 0 or a negative TETHER_E* code; details go
 *     into a tether_error the caller passes in (it may be NULL), whose code
 *     is always the value returned;
 *   - options structs are filled with defaults by their *_init function;
 *     every default is documented beside its field;
 *   - options and metrics structs start with size_t size, which *_init and
 *     the *_get functions set to the struct's sizeof as the caller was
 *     compiled (they are macros), so
 *     a program keeps working with a later libtether whose structs have
 *     grown (docs/api-stability.md);
 *   - durations in options are milliseconds (int64_t); clocks count
 *     nanoseconds;
 *   - NULL handles, one rule for every function here and in tether_pq.h
 *     and tether_sim.h (tests/unit/test_null.c calls each with NULL):
 *     a function that frees or gives back (every *_destroy,
 *     tether_lease_release, tether_lease_discard, tether_connector_close)
 *     does nothing when given NULL. Every other function given a NULL
 *     handle or a NULL required pointer (an out pointer, a name, a spec, a
 *     callback) returns TETHER_EINVAL when it returns a code, with err's
 *     message naming the argument ("tether_pool_acquire: p is NULL");
 *     does nothing when it returns void (an out struct it fills gets
 *     zeros; tether_schedule_next a TETHER_STEP_DONE step); and otherwise
 *     returns its neutral value: 0 (counts, tokens, times, ids, lengths),
 *     NULL (pointers and names), TETHER_BREAKER_CLOSED. NULL where a
 *     function documents a meaning is that meaning, not an error: err
 *     (no details wanted), a clock (the real one), the options of
 *     tether_budget_create, tether_breaker_create, tether_retry_create and
 *     tether_sim_create (the defaults; the other creates want options);
 *   - memory: every allocation goes through tether_set_allocator's
 *     allocator (libc's by default); a call that runs out of memory
 *     returns TETHER_ENOMEM and leaves its object usable, or, for a
 *     create, nothing behind (docs/errors.md).
 *
 * Thread safety is stated on each object.
 */
#ifndef TETHER_H
#define TETHER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TETHER_STATIC)
#define TETHER_API
#elif defined(_WIN32)
#ifdef TETHER_BUILDING
#define TETHER_API __declspec(dllexport)
#else
#define TETHER_API __declspec(dllimport)
#endif
#else
#define TETHER_API __attribute__((visibility("default")))
#endif

#define TETHER_VERSION_MAJOR 0
#define TETHER_VERSION_MINOR 1
#define TETHER_VERSION_PATCH 0

/* tether_version returns the library version as "MAJOR.MINOR.PATCH". */
TETHER_API const char *tether_version(void);

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/* The one list of error codes: X(NAME, value, message). */
#define TETHER_ERRORS(X)                                                       \
    X(EINVAL, -1, "invalid argument")                                          \
    X(ENOMEM, -2, "out of memory")                                             \
    X(ETIMEDOUT, -3, "timed out")                                              \
    X(EBUDGET, -4, "retry budget exhausted")                                   \
    X(EOPEN, -5, "circuit breaker is open")                                    \
    X(ECLOSED, -6, "object is closed")                                         \
    X(EQUEUEFULL, -7, "wait queue is full")                                    \
    X(ESPEC, -8, "invalid policy or connection specification")                 \
    X(ECONNECT, -9, "connection failed")                                       \
    X(EAUTH, -10, "authentication failed")                                     \
    X(ETHROTTLED, -11, "server is overloaded")                                 \
    X(EBROKEN, -12, "connection is broken")                                    \
    X(EREADONLY, -13, "server is read-only")                                   \
    X(ECONFLICT, -14, "transaction conflict, retry the transaction")           \
    X(EQUERY, -15, "query failed")                                             \
    X(ENOHOST, -16, "no host matched the target role")                         \
    X(ERESOLVE, -17, "host name resolution failed")                            \
    X(EIO, -18, "input/output error")                                          \
    X(ESTATE, -19, "operation not valid in the current state")                 \
    X(ECANCELED, -20, "operation canceled")                                    \
    X(EEXHAUSTED, -21, "no more attempts in the schedule")                     \
    X(EFAILED, -22, "operation failed")                                        \
    X(EAGAIN, -23, "nothing ready yet, try again later")

/* tether_errcode: 0 is success, every failure a negative value. */
enum tether_errcode {
    TETHER_OK = 0,
#define TETHER__ENUM(name, val, msg) TETHER_##name = (val),
    TETHER_ERRORS(TETHER__ENUM)
#undef TETHER__ENUM
};

/* tether_strerror returns a static message for a code; never NULL. */
TETHER_API const char *tether_strerror(int code);

/* tether_errname returns the code's name ("TETHER_ETIMEDOUT"); never NULL. */
TETHER_API const char *tether_errname(int code);

/* How a failure should be treated by a retry policy. */
typedef enum tether_class {
    TETHER_CLASS_NONE = 0,  /* not classified yet: the classifier decides */
    TETHER_CLASS_TRANSIENT, /* may succeed if tried again */
    TETHER_CLASS_THROTTLED, /* server alive but overloaded: back off more */
    TETHER_CLASS_PERMANENT  /* will fail again: do not retry */
} tether_class;

/* Why a retry loop stopped (tether_error.stop). */
typedef enum tether_stop {
    TETHER_STOP_NONE = 0,       /* it did not stop early (success) */
    TETHER_STOP_PERMANENT,      /* the failure was classified permanent */
    TETHER_STOP_ATTEMPTS,       /* max attempts used */
    TETHER_STOP_DEADLINE,       /* the next pause or attempt would overrun */
    TETHER_STOP_NOT_IDEMPOTENT, /* work may have reached the server */
    TETHER_STOP_BUDGET,         /* the retry budget is exhausted */
    TETHER_STOP_BREAKER,        /* the circuit breaker is open */
    TETHER_STOP_NESTED          /* inside another policy: no retry here */
} tether_stop;

#define TETHER_MSG_MAX 256

/* The longest duration tether takes anywhere (1000000 h, in ms): policy
 * specs, connection-string keywords and the pool's options refuse longer
 * ones; the timeouts of tether_pool_acquire and tether_pool_close are
 * capped at it. Deadlines in nanoseconds then fit in 64 bits. */
#define TETHER_DURATION_MAX_MS 3600000000000LL

/* Details of a failure. Zero-initialize it or call tether_error_clear. */
typedef struct tether_error {
    int code;                     /* TETHER_E* (0 when no error): always the
                                     value the call returned */
    int cause;                    /* with TETHER_EOPEN: the code of the
                                     failure that keeps the breaker open
                                     (0 when none was recorded) */
    tether_class cls;             /* transient / throttled / permanent */
    tether_stop stop;             /* set by retry loops: why they gave up */
    int not_sent;                 /* 1: the failed work surely never reached the
                                     server (safe to retry even if not idempotent);
                                     0 (default): it may have. Set it with
                                     tether_error_set_not_sent, or after
                                     tether_error_set (which resets it) */
    int attempts;                 /* attempts made (retry loops, connectors) */
    int64_t elapsed_ms;           /* time spent (retry loops, connectors) */
    int64_t retry_after_ms;       /* server-suggested pause, 0 when none */
    char sqlstate[6];             /* SQLSTATE when there is one, else "" */
    char message[TETHER_MSG_MAX]; /* human text; never contains passwords */
} tether_error;

/* tether_error_clear resets err: numbers to 0, classes to none, sqlstate
 * and message to "" (NULL is accepted). */
TETHER_API void tether_error_clear(tether_error *err);

/* tether_error_set fills err (if not NULL) with code, class and a printf-style
 * message, and returns code so that callers can write
 * `return tether_error_set(err, TETHER_EINVAL, ...)`. It starts from a
 * cleared err (tether_error_clear): a not_sent, retry_after_ms or sqlstate
 * set before the call is reset to its default, so set those after it, or
 * use tether_error_set_not_sent for a failure that never reached the
 * server. */
TETHER_API int tether_error_set(tether_error *err, int code, tether_class cls,
                                const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* tether_error_set_not_sent is tether_error_set for work that surely never
 * reached the server (refused, no connection, nothing written): it also
 * sets err->not_sent = 1, so that a retry loop may repeat even work that is
 * not idempotent (docs/retry.md). Returns code.
 * `return tether_error_set_not_sent(err, TETHER_ECONNECT,
 *                                   TETHER_CLASS_TRANSIENT, "refused");` */
TETHER_API int tether_error_set_not_sent(tether_error *err, int code,
                                         tether_class cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* tether_class_name returns "transient", "throttled", "permanent" or "none". */
TETHER_API const char *tether_class_name(tether_class cls);

/* tether_stop_name returns a short name for a stop reason ("deadline"...). */
TETHER_API const char *tether_stop_name(tether_stop stop);

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum tether_log_level {
    TETHER_LOG_DEBUG = 0,
    TETHER_LOG_INFO = 1,
    TETHER_LOG_WARN = 2, /* transient faults are reported at this level */
    TETHER_LOG_ERROR = 3 /* permanent failures */
} tether_log_level;

typedef void (*tether_log_fn)(void *ctx, tether_log_level level,
                              const char *msg);

/* tether_set_log installs the process-wide log sink used by components whose
 * options name none. The default is no logging at all. Thread-safe. */
TETHER_API void tether_set_log(tether_log_fn fn, void *ctx,
                               tether_log_level min_level);

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

/* An allocator: every allocation the library makes (not libpq's, nor the C
 * library's own, such as a thread's stack) goes through these three
 * functions, each given ctx. malloc_fn and realloc_fn return NULL when out
 * of memory (the library then fails the call with TETHER_ENOMEM or, in a
 * background thread, logs and tries again later); they are never asked for
 * 0 bytes. realloc_fn and free_fn only ever get blocks from malloc_fn or
 * realloc_fn; free_fn never gets NULL. All three must be thread-safe: the
 * library allocates from its background threads too. */
typedef struct tether_allocator {
    void *(*malloc_fn)(void *ctx, size_t size);
    void *(*realloc_fn)(void *ctx, void *ptr, size_t size);
    void (*free_fn)(void *ctx, void *ptr);
    void *ctx;
} tether_allocator;

/* tether_set_allocator makes a (copied) the allocator of every later
 * allocation; NULL restores the C library's malloc, realloc and free.
 * Returns 0, or TETHER_EINVAL when a function is missing (the allocator in
 * place is kept). Not thread-safe: call it before any other tether call,
 * while no tether object exists and no other thread is inside tether (a
 * block is freed by the allocator in place at the time, so it must be
 * one that can free what the previous one allocated). */
TETHER_API int tether_set_allocator(const tether_allocator *a);

/* tether_ticks_external hands the library's periodic work to the
 * caller. Each pool on the real clock has work to do every 10 ms: the
 * deadlines of non-blocking acquires, the breaker's probes granted to their
 * waiters, retiring idle and old connections, topping up min_size, health
 * checks. By default one thread runs it for every pool of the process,
 * started with the first pool. With on = 1 that thread stops, and is not
 * started again while the count of on = 1 calls exceeds that of on = 0
 * calls; the caller runs the ticks instead, calling tether_tick about every
 * 10 ms from one thread at a time (tether_uv_ticks and tether_levent_ticks
 * do it from the loop's timer). Nothing of that work runs while nobody
 * calls it; a blocking acquire keeps its deadline either way. When the
 * count comes back to 0, the thread starts again if a pool needs it. Not
 * from a log sink or any callback the library calls (docs/evloop.md, "Ticks
 * on the loop"). */
TETHER_API void tether_ticks_external(int on);

/* tether_tick runs one tick of every pool's periodic work on the calling
 * thread (see tether_ticks_external); does nothing while the library's
 * own thread runs the ticks. */
TETHER_API void tether_tick(void);

/* tether_calloc allocates n zeroed blocks of size bytes through the
 * allocator in place, as the library does for its own objects (for code
 * built on the public headers, such as the event-loop adapters). Returns
 * NULL when out of memory or when n * size overflows. */
TETHER_API void *tether_calloc(size_t n, size_t size);

/* tether_free frees a block from tether_calloc (NULL is ignored). */
TETHER_API void tether_free(void *p);

/* ------------------------------------------------------------------------ */
/* Clocks                                                                   */
/* ------------------------------------------------------------------------ */

/* A monotonic clock. Every component takes one in its options (NULL means
 * tether_clock_real()), so tests can run on virtual time. */
typedef struct tether_clock {
    int64_t (*now_ns)(void *ctx);            /* monotonic nanoseconds */
    void (*sleep_ns)(void *ctx, int64_t ns); /* pause the calling thread */
    void *ctx;
} tether_clock;

/* tether_clock_real returns the process's monotonic clock
 * (CLOCK_MONOTONIC, nanosleep). */
TETHER_API const tether_clock *tether_clock_real(void);

/* tether_now_ms reads clock (NULL: the real clock) in milliseconds. */
TETHER_API int64_t tether_now_ms(const tether_clock *clock);

/* ------------------------------------------------------------------------ */
/* Backoff schedules                                                        */
/* ------------------------------------------------------------------------ */

typedef enum tether_backoff_kind {
    TETHER_BACKOFF_EXPONENTIAL = 0, /* base * multiplier^n, capped at max */
    TETHER_BACKOFF_IMMEDIATE,       /* one retry with no pause, then none */
    TETHER_BACKOFF_FIXED,           /* base every time */
    TETHER_BACKOFF_INCREMENTAL,     /* base + step * n, capped at max */
    TETHER_BACKOFF_RECONNECT        /* tether's default reconnect policy:
                                       uses the failure class (see docs) */
} tether_backoff_kind;

typedef enum tether_jitter {
    TETHER_JITTER_NONE = 0,     /* d */
    TETHER_JITTER_FULL,         /* uniform [0, d] */
    TETHER_JITTER_EQUAL,        /* d/2 + uniform [0, d/2] */
    TETHER_JITTER_DECORRELATED, /* uniform [base, min(max, 3 * previous)]:
                                   the cap bounds the range, not the draw, so
                                   values never pile up on the cap */
    TETHER_JITTER_PROPORTIONAL  /* d * (1 + uniform [-ratio, +ratio]) (gRPC) */
} tether_jitter;

/* Backoff options. Defaults (tether_backoff_opts_init): exponential,
 * base 100 ms, max 60 s, multiplier 2.0, step = base, full jitter,
 * jitter ratio 0.2, seed 0 (random). */
typedef struct tether_backoff_opts {
    size_t size; /* sizeof, set by tether_backoff_opts_init */
    tether_backoff_kind kind;
    int64_t base_ms;   /* first pause (>= 0) */
    int64_t max_ms;    /* cap on any pause (>= base_ms) */
    int64_t step_ms;   /* incremental: added per retry */
    double multiplier; /* exponential growth factor (>= 1.0) */
    tether_jitter jitter;
    double jitter_ratio;   /* proportional jitter: +-ratio, in [0, 1] */
    uint64_t seed;         /* RNG seed; 0 seeds from the system */
    uint64_t reserved_[4]; /* room to grow without moving the fields of
                              the options that embed this struct; 0 */
} tether_backoff_opts;

/* tether_backoff_opts_init fills o with the documented defaults and sets
 * o->size (a macro: it passes the struct's sizeof as the caller was
 * compiled). */
TETHER_API void tether_backoff_opts_init_sized(tether_backoff_opts *o,
                                               size_t size);
#define tether_backoff_opts_init(o)                                            \
    tether_backoff_opts_init_sized((o), sizeof(tether_backoff_opts))

/* tether_backoff_preset fills o with a named preset: "grpc" (1 s, x1.6,
 * +-20 %, cap 120 s), "blocking-period" (5 s doubling to 60 s, no jitter),
 * "reconnect" (tether's default reconnect policy: docs/backoff.md). The
 * mirroring and streaming schedules are connection schedules
 * (tether_schedule). Returns TETHER_ESPEC for an unknown name. */
TETHER_API int tether_backoff_preset_sized(const char *name,
                                           tether_backoff_opts *o, size_t size,
                                           tether_error *err);
#define tether_backoff_preset(name, o, err)                                    \
    tether_backoff_preset_sized((name), (o), sizeof(tether_backoff_opts), (err))

/* tether_backoff_validate checks o; on failure names the bad field. */
TETHER_API int tether_backoff_validate(const tether_backoff_opts *o,
                                       tether_error *err);

/* A backoff iterator: one per retry sequence. Not thread-safe. */
typedef struct tether_backoff tether_backoff;

/* tether_backoff_create makes an iterator over the schedule o describes. */
TETHER_API int tether_backoff_create(tether_backoff **out,
                                     const tether_backoff_opts *o,
                                     tether_error *err);

/* tether_backoff_destroy frees b (NULL is accepted). */
TETHER_API void tether_backoff_destroy(tether_backoff *b);

/* tether_backoff_next stores in *delay_ms the pause before the next attempt,
 * given the class of the failure that just happened (TETHER_CLASS_NONE when
 * unknown; only the reconnect kind uses it). Returns 0, or TETHER_EEXHAUSTED
 * when the schedule allows no further attempt (immediate after its one). */
TETHER_API int tether_backoff_next(tether_backoff *b, tether_class cause,
                                   int64_t *delay_ms);

/* tether_backoff_reset starts the sequence over (after a success). */
TETHER_API void tether_backoff_reset(tether_backoff *b);

/* tether_backoff_count returns how many delays next() has produced. */
TETHER_API int tether_backoff_count(const tether_backoff *b);

/* ------------------------------------------------------------------------ */
/* Connection schedules (the connector's timing, sans I/O)                  */
/* ------------------------------------------------------------------------ */

typedef enum tether_strategy {
    TETHER_STRATEGY_SEQUENTIAL = 0, /* each host in order, then a pause from
                                       the backoff and a new pass */
    TETHER_STRATEGY_MIRRORING,      /* SQL Server's principal/partner
                                       alternation with growing budgets
                                       (the first two hosts) */
    TETHER_STRATEGY_STREAMING,      /* provisioning, every host and port in
                                       turn, pauses doubling to 60 s; a
                                       schedule first waits a random 1-5 s
                                       (initial_wait), a connector does not */
    TETHER_STRATEGY_RANDOM,         /* sequential timing, hosts shuffled per
                                       connect */
    TETHER_STRATEGY_ROUND_ROBIN,    /* sequential timing, starting at the
                                       next host each connect */
    TETHER_STRATEGY_RACE            /* staggered parallel attempts (the
                                       connector; a schedule times it as
                                       sequential) */
} tether_strategy;

/* tether_strategy_name returns "sequential", "mirroring", "streaming",
 * "random", "round-robin", "race" or "unknown". */
TETHER_API const char *tether_strategy_name(tether_strategy s);

/* tether_strategy_parse stores in *out the strategy named name (the names
 * of tether_strategy_name). Returns 0 or TETHER_ESPEC. */
TETHER_API int tether_strategy_parse(const char *name, tether_strategy *out);

/* Schedule options. Defaults (tether_schedule_opts_init): sequential,
 * login timeout 15 s, one host with one port, attempt timeout 0 (the rest of
 * the login timeout), backoff defaults, initial wait on (streaming only),
 * seed 0. */
typedef struct tether_schedule_opts {
    size_t size; /* sizeof, set by tether_schedule_opts_init */
    tether_strategy strategy;
    int64_t login_timeout_ms;    /* overall budget; -1 = infinite */
    int nhosts;                  /* hosts in the list (>= 1) */
    int nports;                  /* ports per host (>= 1) */
    int64_t attempt_timeout_ms;  /* sequential: cap per attempt; 0 = none */
    tether_backoff_opts backoff; /* sequential: pause between passes */
    int initial_wait;            /* streaming: wait the random 1-5 s before
                                    the first provisioning call (1, default) */
    uint64_t seed;               /* RNG seed; 0 seeds from the system */
} tether_schedule_opts;

/* tether_schedule_opts_init fills o with the documented defaults and sets
 * o->size (a macro: it passes the struct's sizeof as the caller was
 * compiled). */
TETHER_API void tether_schedule_opts_init_sized(tether_schedule_opts *o,
                                                size_t size);
#define tether_schedule_opts_init(o)                                           \
    tether_schedule_opts_init_sized((o), sizeof(tether_schedule_opts))

typedef enum tether_step_kind {
    TETHER_STEP_ATTEMPT = 0, /* connect to host/port within budget_ms */
    TETHER_STEP_PAUSE,       /* wait delay_ms */
    TETHER_STEP_PROVISION,   /* refresh the host list, then report */
    TETHER_STEP_DONE         /* the login timeout is spent: give up */
} tether_step_kind;

/* One step of a schedule. */
typedef struct tether_step {
    tether_step_kind kind;
    int attempt;       /* 1-based attempt number (ATTEMPT) */
    int host;          /* host index (ATTEMPT) */
    int port;          /* port index within the host (ATTEMPT) */
    int64_t budget_ms; /* time allowed for this attempt; -1 = unbounded */
    int64_t delay_ms;  /* pause length (PAUSE) */
    int round;         /* pass number, from 1 */
} tether_step;

/* A schedule: the sequence of attempts and pauses a connector follows.
 * Pure state machine; the caller reports outcomes and supplies time.
 * Not thread-safe. */
typedef struct tether_schedule tether_schedule;

/* tether_schedule_create makes a schedule; the login timeout starts at
 * now_ms (the caller's clock). */
TETHER_API int tether_schedule_create(tether_schedule **out,
                                      const tether_schedule_opts *o,
                                      int64_t now_ms, tether_error *err);

/* tether_schedule_destroy frees s (NULL is accepted). */
TETHER_API void tether_schedule_destroy(tether_schedule *s);

/* tether_schedule_next returns in *step what to do at now_ms, after the
 * previous step finished (an attempt failed, a pause elapsed, provisioning
 * answered as reported). */
TETHER_API void tether_schedule_next(tether_schedule *s, int64_t now_ms,
                                     tether_step *step);

/* tether_schedule_provisioned reports the outcome of a PROVISION step
 * (ok = 1 success) and the new number of hosts (ignored when ok = 0). A
 * PROVISION step left unreported, or ok with nhosts < 1, counts as a failed
 * provisioning call. The sequential, random, round-robin and race timings
 * emit no PROVISION step: for them, a report with ok between two passes
 * (after the PAUSE step) sets the number of hosts of the next pass, as
 * the connector does when its provisioning callback refreshed the list. */
TETHER_API void tether_schedule_provisioned(tether_schedule *s, int ok,
                                            int nhosts);

/* ------------------------------------------------------------------------ */
/* Retry budget                                                             */
/* ------------------------------------------------------------------------ */

/* Budget options. Defaults: 500 tokens (also the start), a retry costs 5, a
 * retry after a timeout costs 10, a first-try success refunds 1, a retry
 * that succeeds refunds its cost. */
typedef struct tether_budget_opts {
    size_t size;        /* sizeof, set by tether_budget_opts_init */
    int capacity;       /* maximum and initial tokens (> 0) */
    int retry_cost;     /* tokens a retry takes */
    int timeout_cost;   /* tokens a retry after a timeout takes */
    int success_refund; /* tokens a success without retry gives back */
} tether_budget_opts;

/* tether_budget_opts_init fills o with the documented defaults and sets
 * o->size (a macro: it passes the struct's sizeof as the caller was
 * compiled). */
TETHER_API void tether_budget_opts_init_sized(tether_budget_opts *o,
                                              size_t size);
#define tether_budget_opts_init(o)                                             \
    tether_budget_opts_init_sized((o), sizeof(tether_budget_opts))

/* A token bucket keeping retries a bounded share of traffic to one target.
 * Thread-safe (lock-free). */
typedef struct tether_budget tether_budget;

/* tether_budget_create makes a budget. */
TETHER_API int tether_budget_create(tether_budget **out,
                                    const tether_budget_opts *o,
                                    tether_error *err);

/* tether_budget_destroy frees b (NULL is accepted). */
TETHER_API void tether_budget_destroy(tether_budget *b);

/* tether_budget_withdraw takes the cost of one retry (the timeout cost when
 * after_timeout). Returns the cost taken (> 0), or TETHER_EBUDGET when too
 * few tokens are left; then nothing is taken. */
TETHER_API int tether_budget_withdraw(tether_budget *b, int after_timeout);

/* tether_budget_success records a success: refunds `cost` (what withdraw
 * returned for the retry that succeeded; keep it), or the first-try refund
 * when cost is 0. Never rises above capacity. */
TETHER_API void tether_budget_success(tether_budget *b, int cost);

/* tether_budget_tokens returns the tokens available now. */
TETHER_API int tether_budget_tokens(const tether_budget *b);

/* ------------------------------------------------------------------------ */
/* Circuit breaker                                                          */
/* ------------------------------------------------------------------------ */

typedef enum tether_breaker_state {
    TETHER_BREAKER_CLOSED = 0, /* calls flow */
    TETHER_BREAKER_OPEN,       /* calls fail at once with the last error */
    TETHER_BREAKER_HALF_OPEN,  /* one probe in flight, others fail at once */
    TETHER_BREAKER_ISOLATED    /* forced open until reset */
} tether_breaker_state;

typedef enum tether_breaker_mode {
    TETHER_BREAKER_CONSECUTIVE = 0, /* open after N failures in a row */
    TETHER_BREAKER_RATIO            /* open when failures/calls in the window
                                       reach ratio with >= min calls */
} tether_breaker_mode;

typedef void (*tether_breaker_fn)(void *ctx, tether_breaker_state from,
                                  tether_breaker_state to);

/* Breaker options. Defaults: consecutive, 5 failures, ratio 0.5 over a 30 s
 * window with at least 20 calls, open 5 s, growth 2.0, max open 60 s, no
 * jitter, real clock, no callback. A failed probe grows the period by
 * growth, one refused as busy (class throttled) by at most 2. */
typedef struct tether_breaker_opts {
    size_t size; /* sizeof, set by tether_breaker_opts_init */
    tether_breaker_mode mode;
    int failures;        /* consecutive mode threshold (>= 1) */
    double ratio;        /* ratio mode threshold, in (0, 1] */
    int64_t window_ms;   /* ratio mode sliding window (>= 10 ms) */
    int min_calls;       /* ratio mode minimum throughput (>= 1) */
    int64_t open_ms;     /* first open period (> 0) */
    int64_t max_open_ms; /* cap of the growing open period */
    double growth;       /* open period multiplier per failed probe (>= 1) */
    const tether_clock *clock;
    tether_breaker_fn on_state; /* called outside the breaker's lock */
    void *on_state_ctx;
    double jitter;         /* in [0, 1]: each open lasts a uniform draw from
                              [(1 - jitter) x period, period], so breakers that
                              opened together do not probe together; 0: none */
    uint64_t seed;         /* for the jitter; 0: seeded from the system */
    uint64_t reserved_[2]; /* room to grow without moving the fields of
                              the options that embed this struct; 0 */
} tether_breaker_opts;

/* tether_breaker_opts_init fills o with the documented defaults and sets
 * o->size (a macro: it passes the struct's sizeof as the caller was
 * compiled). */
TETHER_API void tether_breaker_opts_init_sized(tether_breaker_opts *o,
                                               size_t size);
#define tether_breaker_opts_init(o)                                            \
    tether_breaker_opts_init_sized((o), sizeof(tether_breaker_opts))

/* tether_breaker_preset fills o with a named preset: "blocking-period"
 * (the pool's default, after SqlClient's pool blocking period but tuned for
 * fleets with `tether sim storm`: open on the first failure for 1 s, then
 * 15 s after a failed probe (growth 15, max 15 s), each open drawn from
 * [P/2, P] (jitter 0.5); a probe refused as busy at most doubles the
 * period; a success resets it). */
TETHER_API int tether_breaker_preset_sized(const char *name,
                                           tether_breaker_opts *o, size_t size,
                                           tether_error *err);
#define tether_breaker_preset(name, o, err)                                    \
    tether_breaker_preset_sized((name), (o), sizeof(tether_breaker_opts), (err))

/* A circuit breaker. Thread-safe. */
typedef struct tether_breaker tether_breaker;

/* tether_breaker_create makes a breaker in the closed state. */
TETHER_API int tether_breaker_create(tether_breaker **out,
                                     const tether_breaker_opts *o,
                                     tether_error *err);

/* tether_breaker_destroy frees b (NULL is accepted). */
TETHER_API void tether_breaker_destroy(tether_breaker *b);

#define TETHER_PERMIT_CALL 0  /* a normal call */
#define TETHER_PERMIT_PROBE 1 /* the half-open probe: its outcome decides */

/* tether_breaker_allow asks to make a call. Returns TETHER_PERMIT_CALL or
 * TETHER_PERMIT_PROBE (pass it to tether_breaker_record), or TETHER_EOPEN
 * while open, isolated, or half-open with the probe in flight. Then err
 * says so and when the next probe may go, with the last recorded failure:
 * its code in err->cause, its class and SQLSTATE, and its message after
 * the breaker's; not_sent is 1. A probe that never reports is replaced by a
 * new one after one more open period. */
TETHER_API int tether_breaker_allow(tether_breaker *b, tether_error *err);

/* tether_breaker_record reports the outcome of a permitted call: ok = 1 for
 * success; for failure, err (may be NULL) is cached for fail-fast callers. */
TETHER_API void tether_breaker_record(tether_breaker *b, int permit, int ok,
                                      const tether_error *err);

/* tether_breaker_state_get returns the current state (OPEN turns HALF_OPEN
 * only when a call is allowed after the open period). */
TETHER_API tether_breaker_state tether_breaker_state_get(tether_breaker *b);

/* tether_breaker_open_ms returns the length of the current or last open
 * period in milliseconds (0 if it never opened). */
TETHER_API int64_t tether_breaker_open_ms(tether_breaker *b);

/* tether_breaker_isolate forces the breaker open until reset. */
TETHER_API void tether_breaker_isolate(tether_breaker *b);

/* tether_breaker_reset closes the breaker and forgets its history. */
TETHER_API void tether_breaker_reset(tether_breaker *b);

/* tether_breaker_state_name returns "closed", "open", "half-open" or
 * "isolated". */
TETHER_API const char *tether_breaker_state_name(tether_breaker_state s);

/* ------------------------------------------------------------------------ */
/* Retry policy and executor                                                */
/* ------------------------------------------------------------------------ */

/* One attempt's context, handed to the operation. */
typedef struct tether_attempt {
    int number;          /* 1-based */
    int64_t timeout_ms;  /* time this attempt may take; -1 = unbounded */
    int64_t deadline_ms; /* the run's overall deadline, absolute on the
                            policy clock (ms); -1 = none */
} tether_attempt;

/* The caller's operation: returns 0 on success, or a negative TETHER_E* code
 * with err filled (class, not_sent, retry_after_ms when known). */
typedef int (*tether_op_fn)(void *arg, const tether_attempt *attempt,
                            tether_error *err);

/* A classifier: returns the class of err (may read err->cls, code,
 * sqlstate) and may set *retry_after_ms for throttled failures. Returning
 * TETHER_CLASS_NONE defers to tether_classify_default. */
typedef tether_class (*tether_classify_fn)(void *ctx, const tether_error *err,
                                           int64_t *retry_after_ms);

/* What a retry hook sees before each pause. */
typedef struct tether_retry_event {
    int attempt;        /* the attempt that failed (1-based) */
    int64_t delay_ms;   /* pause before the next attempt */
    int64_t elapsed_ms; /* since the run started */
    tether_class cls;   /* class of the failure */
    const tether_error *error;
} tether_retry_event;

typedef void (*tether_retry_hook)(void *ctx, const tether_retry_event *ev);

/* Retry options. Defaults: backoff defaults (exponential 100 ms x2 to 60 s,
 * full jitter), 3 attempts, deadline 30 s, no per-attempt timeout, default
 * classifier (tether_classify_default), no budget, no breaker, no hook, real
 * clock, process log sink. */
typedef struct tether_retry_opts {
    size_t size; /* sizeof, set by tether_retry_opts_init */
    tether_backoff_opts backoff;
    int max_attempts;           /* total attempts including the first (>=1) */
    int64_t deadline_ms;        /* overall, from the start; 0 = none */
    int64_t attempt_timeout_ms; /* per attempt; 0 = none */
    tether_classify_fn classify;
    void *classify_ctx;
    tether_budget *budget;   /* optional, not owned */
    tether_breaker *breaker; /* optional, not owned */
    tether_retry_hook on_retry;
    void *on_retry_ctx;
    tether_log_fn log; /* NULL: the process sink (tether_set_log) */
    void *log_ctx;
    const tether_clock *clock; /* NULL: real clock */
    uint64_t reserved_[4];     /* room to grow without moving the fields of
                                  the options that embed this struct; 0 */
} tether_retry_opts;

/* tether_retry_opts_init fills o with the documented defaults and sets
 * o->size (a macro: it passes the struct's sizeof as the caller was
 * compiled). */
TETHER_API void tether_retry_opts_init_sized(tether_retry_opts *o, size_t size);
#define tether_retry_opts_init(o)                                              \
    tether_retry_opts_init_sized((o), sizeof(tether_retry_opts))

/* tether_classify_default classifies by err->cls when set, else by code:
 * ETIMEDOUT, ECONNECT, EBROKEN, EIO, ERESOLVE, ECONFLICT are transient;
 * ETHROTTLED is throttled; everything else permanent. */
TETHER_API tether_class tether_classify_default(void *ctx,
                                                const tether_error *err,
                                                int64_t *retry_after_ms);

/* A retry policy: immutable after creation apart from its counters, so one
 * policy may serve many threads at once. */
typedef struct tether_retry tether_retry;

/* tether_retry_create makes a policy from o (copied). */
TETHER_API int tether_retry_create(tether_retry **out,
                                   const tether_retry_opts *o,
                                   tether_error *err);

/* tether_retry_destroy frees r (NULL is accepted). */
TETHER_API void tether_retry_destroy(tether_retry *r);

#define TETHER_IDEMPOTENT 1u /* run flag: the work may be repeated safely */
/* Run flag (tether_pool_run): the work only reads. A routing pool sends it
 * to a standby (docs/routing.md); other pools, and tether_retry_run,
 * ignore it. */
#define TETHER_READONLY 2u

/* tether_retry_run calls fn until it succeeds or the policy stops: a
 * permanent failure, max attempts, the deadline (no pause or attempt is
 * started that would overrun it), a failure that may have reached the server
 * when TETHER_IDEMPOTENT is not in flags, an exhausted budget (returns
 * TETHER_EBUDGET, err->code too, the message keeping the last failure's)
 * or an open breaker (returns TETHER_EOPEN, err->cause the failure
 * behind it). Otherwise returns fn's last code. err
 * receives the last failure with stop, attempts and elapsed_ms set; on
 * success it is cleared but for attempts and elapsed_ms (when the first
 * attempt succeeds on the real clock, elapsed_ms is told by the coarse
 * clock: the 10 ms ticks of the thread that serves open pools, or the
 * kernel's coarse clock (a few ms) when none is open; 0 for most quick
 * runs). A suggested pause
 * (retry_after_ms) is honoured for any retried failure, never past the
 * deadline.
 *
 * No cascading: a run started on a thread that is already inside another
 * tether_retry_run makes exactly one attempt (stop = TETHER_STOP_NESTED when
 * it fails), so only the outermost policy retries. */
TETHER_API int tether_retry_run(tether_retry *r, unsigned flags,
                                tether_op_fn fn, void *arg, tether_error *err);

/* tether_retry_run_for is tether_retry_run with the caller's own deadline:
 * the run ends within timeout_ms of its start (no attempt or pause is
 * started that would overrun it; the policy's deadline still applies when
 * sooner). -1 means the policy's deadline only; 0 allows one attempt whose
 * timeout_ms is 0. A timeout_ms below -1 is TETHER_EINVAL. */
TETHER_API int tether_retry_run_for(tether_retry *r, unsigned flags,
                                    int64_t timeout_ms, tether_op_fn fn,
                                    void *arg, tether_error *err);

/* Counters of a policy, summed over all runs. */
typedef struct tether_retry_stats {
    size_t size; /* what the library filled (the caller's sizeof) */
    uint64_t runs;
    uint64_t attempts;
    uint64_t retries;
    uint64_t successes;
    uint64_t failures;  /* runs that ended in failure */
    uint64_t transient; /* failures classified transient */
    uint64_t throttled; /* failures classified throttled */
    uint64_t permanent; /* failures classified permanent */
    uint64_t stopped_deadline;
    uint64_t stopped_attempts;
    uint64_t stopped_idempotency;
    uint64_t stopped_budget;
    uint64_t stopped_breaker;
    uint64_t nested;
    uint64_t delay_ms_total;
} tether_retry_stats;

/* tether_retry_stats_get copies the counters of r into out. */
TETHER_API void tether_retry_stats_get_sized(const tether_retry *r,
                                             tether_retry_stats *out,
                                             size_t size);
#define tether_retry_stats_get(r, out)                                         \
    tether_retry_stats_get_sized((r), (out), sizeof(tether_retry_stats))

/* ------------------------------------------------------------------------ */
/* Policy specifications                                                    */
/* ------------------------------------------------------------------------ */

/* tether_retry_opts_parse parses a retry spec such as
 * "exponential base=100ms max=60s jitter=full attempts=5 deadline=30s" into
 * o: every field is first reset to its default (clock, hooks, classifier,
 * budget and breaker pointers too: set those after parsing), then the spec's
 * keys apply. The grammar is in docs/policy-spec.md. Errors (TETHER_ESPEC)
 * name the key and value and leave o unchanged; NULL spec or o gives
 * TETHER_EINVAL. */
TETHER_API int tether_retry_opts_parse_sized(const char *spec,
                                             tether_retry_opts *o, size_t size,
                                             tether_error *err);
#define tether_retry_opts_parse(spec, o, err)                                  \
    tether_retry_opts_parse_sized((spec), (o), sizeof(tether_retry_opts), (err))

/* tether_breaker_opts_parse parses a breaker spec such as
 * "breaker ratio=0.5 window=30s min=20 open=5s max-open=60s" or
 * "blocking-period". */
TETHER_API int tether_breaker_opts_parse_sized(const char *spec,
                                               tether_breaker_opts *o,
                                               size_t size, tether_error *err);
#define tether_breaker_opts_parse(spec, o, err)                                \
    tether_breaker_opts_parse_sized((spec), (o), sizeof(tether_breaker_opts),  \
                                    (err))

/* tether_budget_opts_parse parses "budget tokens=500 cost=5
 * timeout-cost=10 refund=1". */
TETHER_API int tether_budget_opts_parse_sized(const char *spec,
                                              tether_budget_opts *o,
                                              size_t size, tether_error *err);
#define tether_budget_opts_parse(spec, o, err)                                 \
    tether_budget_opts_parse_sized((spec), (o), sizeof(tether_budget_opts),    \
                                   (err))

/* tether_duration_parse parses "250ms", "15s", "2m", "1h" (also "0", and
 * "1.5s" when it is a whole number of ms; no surrounding whitespace) into
 * milliseconds, at most TETHER_DURATION_MAX_MS. Returns 0, TETHER_ESPEC
 * for bad or longer text or TETHER_EINVAL for NULL arguments; *ms is
 * unchanged on error. */
TETHER_API int tether_duration_parse(const char *text, int64_t *ms);

/* ------------------------------------------------------------------------ */
/* Drivers                                                                  */
/* ------------------------------------------------------------------------ */

/* A driver talks to one kind of server. Users pick one by handle:
 * tether_driver_pq() (tether_pq.h) for PostgreSQL, tether_driver_tcp()
 * (tether_driver.h) for any TCP service, tether_driver_sim()
 * (tether_sim.h) for tests. Its operations, and how to write a driver,
 * are in tether_driver.h (docs/drivers.md). */
typedef struct tether_driver tether_driver;

/* ------------------------------------------------------------------------ */
/* Connector: one logical connection, many endpoints                       */
/* ------------------------------------------------------------------------ */

/* Which server a connection must reach (libpq's target_session_attrs, plus
 * prefer-primary). */
typedef enum tether_target {
    TETHER_TARGET_ANY = 0,
    TETHER_TARGET_READ_WRITE,
    TETHER_TARGET_PRIMARY,
    TETHER_TARGET_READ_ONLY,
    TETHER_TARGET_STANDBY,
    TETHER_TARGET_PREFER_STANDBY,
    TETHER_TARGET_PREFER_PRIMARY
} tether_target;

/* A server's role. */
typedef enum tether_role {
    TETHER_ROLE_UNKNOWN = 0, /* not reported and not asked */
    TETHER_ROLE_PRIMARY,     /* accepts writes */
    TETHER_ROLE_STANDBY      /* read-only (a hot standby) */
} tether_role;

/* tether_role_name returns "unknown", "primary" or "standby". */
TETHER_API const char *tether_role_name(tether_role role);

/* The steps of a connect, as the event callback reports them. */
typedef enum tether_phase {
    TETHER_PHASE_FAIL = 0, /* an attempt failed (code, cls, message) */
    TETHER_PHASE_OK,       /* an attempt connected to a server that fits */
    TETHER_PHASE_ROLE,     /* it connected, but to a server of the wrong
                              role (role says which) */
    TETHER_PHASE_SKIP,     /* the host-state cache skipped the host */
    TETHER_PHASE_PAUSE,    /* a pause between passes (delay_ms) */
    TETHER_PHASE_PROVISION /* the provisioning callback was called */
} tether_phase;

/* tether_phase_name returns "fail", "ok", "role", "skip", "pause",
 * "provision" or "unknown". */
TETHER_API const char *tether_phase_name(tether_phase phase);

/* One step of a connect, reported to the event callback. */
typedef struct tether_connect_event {
    int attempt;      /* 1-based attempt number (0 for pauses) */
    const char *host; /* endpoint (no secrets) */
    int port;
    tether_phase phase;
    int code; /* 0 or the failure's TETHER_E* code */
    tether_class cls;
    tether_role role;    /* OK and ROLE: the server's role */
    int64_t elapsed_ms;  /* since the connect began */
    int64_t budget_ms;   /* this attempt's budget (-1 unbounded) */
    int64_t delay_ms;    /* pauses */
    const char *message; /* failure text, "" when none */
} tether_connect_event;

typedef void (*tether_event_fn)(void *ctx, const tether_connect_event *ev);

/* An endpoint provisioning callback: called when a pass over the host
 * list is exhausted (sequential, random, round-robin: before the pause
 * that starts the next pass), and first, for the streaming strategy. It
 * writes a new list as "host:port,host:port" (a host with several ports:
 * "host:6379|6380") into buf (cap bytes) and returns 0, or a negative code
 * when the provisioning service failed (the list is then kept). */
typedef int (*tether_provision_fn)(void *ctx, char *buf, size_t cap);

/* Connector options. Defaults: the PostgreSQL driver, no callbacks, real
 * clock, seed 0. The conninfo (libpq key=value or postgresql:// URI; "" for
 * libpq's defaults) also carries tether's own keywords (docs/conninfo.md),
 * taken out before the driver sees the rest; a keyword it leaves out takes
 * its PG* environment variable, as in libpq. */
typedef struct tether_connector_opts {
    size_t size;                 /* sizeof, set by tether_connector_opts_init */
    const char *conninfo;        /* required */
    const tether_driver *driver; /* NULL: tether_driver_pq() */
    void *driver_ctx;            /* with a driver: its parameters */
    tether_event_fn on_event;
    void *event_ctx;
    tether_provision_fn provision;
    void *provision_ctx;
    tether_log_fn log;
    void *log_ctx;
    const tether_clock *clock;
    uint64_t seed;
} tether_connector_opts;

/* tether_connector_opts_init fills o with the documented defaults and sets
 * o->size (a macro: it passes the struct's sizeof as the caller was
 * compiled). */
TETHER_API void tether_connector_opts_init_sized(tether_connector_opts *o,
                                                 size_t size);
#define tether_connector_opts_init(o)                                          \
    tether_connector_opts_init_sized((o), sizeof(tether_connector_opts))

/* A connector: endpoints, a strategy, a role target and a host-state cache.
 * Thread-safe: many threads may connect through one connector. */
typedef struct tether_connector tether_connector;

/* tether_connector_create parses o->conninfo: a bad or unknown tether
 * keyword, a bad value or mismatched host and port counts is TETHER_ESPEC
 * naming the keyword (never a password). */
TETHER_API int tether_connector_create(tether_connector **out,
                                       const tether_connector_opts *o,
                                       tether_error *err);

/* tether_connector_destroy frees c (NULL is accepted). */
TETHER_API void tether_connector_destroy(tether_connector *c);

/* tether_connector_connect opens one connection following the strategy
 * within the login timeout. On success *handle is the driver's connection
 * (PGconn * for pq), owned by the caller: close it with
 * tether_connector_close. err gets attempts and elapsed_ms either way. */
TETHER_API int tether_connector_connect(tether_connector *c, void **handle,
                                        tether_error *err);

/* tether_connector_close closes a handle from tether_connector_connect. */
TETHER_API void tether_connector_close(tether_connector *c, void *handle);

/* tether_connector_invalidate forgets what the host-state cache knows (for
 * instance after a failover was detected). */
TETHER_API void tether_connector_invalidate(tether_connector *c);

/* tether_target_name returns "any", "read-write", ... */
TETHER_API const char *tether_target_name(tether_target t);

/* ------------------------------------------------------------------------ */
/* Pool                                                                     */
/* ------------------------------------------------------------------------ */

/* Pool options. Defaults (tether_pool_opts_init): min 0, max 10, at most 2
 * connections being created at once, acquire timeout 15 s, at most 1024
 * waiters, barge limit 1 ms (waiters are served first come, first served;
 * a newcomer may take an idle connection ahead of the first waiter only
 * until that waiter has been passed over for 1 ms; from then on it is
 * handed the connection its thread used last, or after 2 ms any
 * connection that comes back), validation bypass
 * window 500 ms, validation timeout 5 s, socket probe of connections idle
 * 10 ms or longer by the coarse clock, i.e. not released in the current
 * tick (the cheap liveness check's system call; see probe_idle_ms),
 * keepalive of idle connections every 2 min, idle timeout 4 min
 * (each connection gets a random value in [1, 2] x that: 4-8 min), max lifetime
 * 30 min (each connection gets a random value in [0.85, 1] x that, and
 * retirements are spaced), leak threshold 0 (off), breaker preset
 * "blocking-period" (use_breaker 1), retry policy for tether_pool_run:
 * exponential 50 ms x2 to 1 s, full jitter, 3 attempts, deadline = the
 * acquire timeout; no reset query; real clock; seed 0; limit
 * TETHER_POOL_LIMIT_FIXED (the pool holds up to max_size). */
typedef struct tether_pool_opts {
    size_t size;                 /* sizeof, set by tether_pool_opts_init */
    const tether_driver *driver; /* required unless connector is set */
    void *driver_ctx;            /* driver's target (tether_sim for sim) */
    tether_connector *connector; /* create connections through it (not
                                    owned); its driver is used */
    const char *conninfo;        /* for reference only (copied): the
                                    driver_ctx or the connector says where
                                    to connect */
    const char *name;            /* label in logs and metrics (copied): 1
                                    to TETHER_POOL_NAME_MAX bytes, no
                                    control characters, no secrets;
                                    default NULL: "pool-N", N the pool's
                                    number in this process */
    int min_size;
    int max_size;
    int max_creating;
    int64_t acquire_timeout_ms;
    int max_waiters;
    int64_t barge_limit_us;   /* how long arrivals may take idle
                                 connections ahead of the first waiter
                                 (0 = strict FIFO) */
    int64_t validate_idle_ms; /* round trip only if idle longer */
    int64_t validate_timeout_ms;
    int64_t probe_idle_ms;     /* the liveness check also polls the
                                  socket when the connection has been idle
                                  this long by the pool's coarse clock
                                  (10 ms ticks); 0 = on every checkout */
    int64_t keepalive_ms;      /* 0 = off */
    int64_t idle_timeout_ms;   /* 0 = never (idle above min_size) */
    int64_t max_lifetime_ms;   /* 0 = unlimited */
    int64_t leak_threshold_ms; /* 0 = off */
    int use_breaker;
    tether_breaker_opts breaker;
    tether_retry_opts retry;
    const char *reset_query; /* run on release (e.g. "DISCARD ALL") */
    tether_log_fn log;
    void *log_ctx;
    const tether_clock *clock;
    uint64_t seed;
    int64_t txn_reserve_timeout_ms; /* how long a connection may stay
                                       reserved to a transaction's key
                                       between two acquires before the pool
                                       rolls it back (docs/pool.md,
                                       "Transactions across acquires");
                                       default 30000; 0: the default */
    int max_size_limit;             /* the largest max_size tether_pool_resize
                                       may set (0: max_size); the pool
                                       keeps a slot for each (bytes:
                                       tether_pool_bytes_per_conn), and an
                                       acquire that finds no connection of
                                       its thread's idle scans them all */
    int limit;                      /* how many connections the pool
                                       may hold: TETHER_POOL_LIMIT_FIXED
                                       (default): max_size;
                                       TETHER_POOL_LIMIT_ADAPTIVE: a limit
                                       between min_size (at least 1) and
                                       max_size that follows the lease
                                       hold time and the server's "too many
                                       connections" (docs/pool.md,
                                       "Adaptive limit") */
    uint64_t reserved_[2];          /* room to grow without moving the fields of
                                       the options that embed this struct; 0 */
} tether_pool_opts;

/* tether_pool_opts.limit's values (conninfo tether_pool_limit=fixed or
 * adaptive). */
#define TETHER_POOL_LIMIT_FIXED 0
#define TETHER_POOL_LIMIT_ADAPTIVE 1

/* The longest pool name (tether_pool_opts.name, tether_pool_name), bytes. */
#define TETHER_POOL_NAME_MAX 128

/* tether_pool_opts_init fills o with the documented defaults and sets
 * o->size (a macro: it passes the struct's sizeof as the caller was
 * compiled). */
TETHER_API void tether_pool_opts_init_sized(tether_pool_opts *o, size_t size);
#define tether_pool_opts_init(o)                                               \
    tether_pool_opts_init_sized((o), sizeof(tether_pool_opts))

/* A connection pool. Thread-safe. */
typedef struct tether_pool tether_pool;

/* A lease: one borrowed connection. Release (or discard) it exactly once,
 * from any thread. A lease is a token, not a pointer to dereference: it
 * names a connection and the turn the caller holds it in, so that a release
 * or discard after the first is refused with TETHER_EINVAL (and counted in
 * tether_pool_metrics.stale_releases) and never touches the connection,
 * even when another caller holds it now. The check needs 64-bit pointers
 * whose top 16 bits are 0 (user space on x86-64 and arm64); it tells turns
 * apart modulo 32768. Not caught: a lease of a destroyed pool, and two
 * releases of one lease racing on two threads at the same instant (the
 * lease was then in use on both, which it must never be). */
typedef struct tether_lease tether_lease;

/* tether_pool_create makes a pool and starts warming it up to min_size in
 * the background. */
TETHER_API int tether_pool_create(tether_pool **out, const tether_pool_opts *o,
                                  tether_error *err);

/* tether_pool_open creates a PostgreSQL pool from a connection string:
 * hosts, strategy, role target and pool settings all come from conninfo's
 * keywords (docs/conninfo.md), and a keyword the string leaves out from its
 * PG* environment variable, as in libpq. The pool's name (metrics labels,
 * logs) is tether_pool_name's value, else "user@host:port/dbname" from the
 * string's first host and port (the parts it gives), else "pool-N".
 * on_event (may be NULL) sees every connect attempt. The pool owns its
 * connector. */
TETHER_API int tether_pool_open(tether_pool **out, const char *conninfo,
                                tether_event_fn on_event, void *event_ctx,
                                tether_error *err);

/* A connection-string keyword, as tether_conninfo_keyword gives it. The
 * strings are static. */
typedef struct tether_keyword {
    const char *name;   /* "tether_pool_max" */
    const char *reader; /* who reads it: "connector", "discovery", "pool"
                           or a driver ("libpq") */
    const char *desc;   /* one line */
} tether_keyword;

/* tether_conninfo_keyword stores in *out the i-th keyword a connection
 * string may hold: tether's own (the connector's, then the pool's), then
 * the drivers' (the PostgreSQL driver's: the linked libpq's), the list that
 * docs/conninfo.md documents and `tether probe --help` prints. Returns 0,
 * or TETHER_EINVAL past the end or for a NULL out. */
TETHER_API int tether_conninfo_keyword(size_t i, tether_keyword *out);

/* tether_pool_close stops handing out connections (acquire then returns
 * TETHER_ECLOSED), closes idle connections and waits up to wait_ms (-1 =
 * forever; below -1 is taken as forever, longer than
 * TETHER_DURATION_MAX_MS is capped at it) for leases to come back, closing
 * each as it returns (a routing pool: its read side first, both within
 * wait_ms). Returns 0, or TETHER_ETIMEDOUT with leases still out (they
 * close when released). */
TETHER_API int tether_pool_close(tether_pool *p, int64_t wait_ms,
                                 tether_error *err);

/* tether_pool_destroy closes p, waiting for every lease, and frees it (NULL
 * is accepted). No other call on p may be in progress or follow, a
 * release included: destroy after the threads using p are done. */
TETHER_API void tether_pool_destroy(tether_pool *p);

/* tether_pool_acquire_at borrows a connection within timeout_ms (-1: the
 * pool's acquire timeout; longer than TETHER_DURATION_MAX_MS is capped at
 * it; below -1 is TETHER_EINVAL). Waiters are served first come, first served.
 * Errors: TETHER_ETIMEDOUT (no connection within the deadline: class
 * throttled, not_sent 1, unlike a statement's timeout, which is transient;
 * the message says who holds the connections, who waits and what blocked
 * creation: docs/pool.md, "When the pool is exhausted"), TETHER_EQUEUEFULL
 * (too many waiters), TETHER_ECLOSED, a connect error, or TETHER_EOPEN
 * during a blocking period after failed connects (err->cause: the connect
 * error; the message says when the next connect may be tried). file and
 * line name the caller (recorded with leak detection on,
 * leak_threshold_ms: for leak reports, tether_pool_holders and the
 * timeout's message); use the tether_pool_acquire macro. */
TETHER_API int tether_pool_acquire_at(tether_pool *p, int64_t timeout_ms,
                                      tether_lease **out, tether_error *err,
                                      const char *file, int line);

/* tether_pool_acquire borrows a connection, recording the caller's place. */
#define tether_pool_acquire(p, timeout_ms, out, err)                           \
    tether_pool_acquire_at((p), (timeout_ms), (out), (err), __FILE__, __LINE__)

/* ---- Operating a pool at runtime (docs/pool.md, "Operating a pool at
 * runtime"). Every call is thread-safe and may run while other threads
 * acquire and release; none of them slows the fast path down. Pause,
 * resume, evict and reconnect of a routing pool act on its read side
 * (tether_pool_read_side) too; resize sets the pool given only. ------- */

/* Flags for tether_pool_pause. */
#define TETHER_PAUSE_CLOSE_IDLE 1u /* also close idle connections now */

/* tether_pool_resize sets min and max at runtime (0 <= min_size <= max_size,
 * 1 <= max_size <= the pool's capacity: tether_pool_opts.max_size_limit,
 * else its max_size at creation). Growing lets waiters create at once and
 * fills up to the new min_size in the background; shrinking closes idle
 * connections above the new max at once and closes leased ones as they
 * come back, until the pool is within it. Returns 0, TETHER_EINVAL (err
 * names the bad value) or TETHER_ECLOSED. */
TETHER_API int tether_pool_resize(tether_pool *p, int min_size, int max_size,
                                  tether_error *err);

/* tether_pool_pause stops handing out connections: leases in use come back
 * as usual (and stay idle); new connections are not created; callers wait
 * in the queue within their deadlines and, if the pause outlasts them, fail
 * with TETHER_ETIMEDOUT whose message says the pool is paused. An acquire
 * already past its checks when the pause begins may still complete.
 * flags: TETHER_PAUSE_CLOSE_IDLE also closes the idle connections now (and
 * each one released during the pause stays idle until resume). Pausing a
 * paused pool does nothing more. Returns 0, or TETHER_EINVAL for a NULL
 * p. */
TETHER_API int tether_pool_pause(tether_pool *p, unsigned flags);

/* tether_pool_resume ends a pause: the callers waiting get the idle
 * connections first come, first served, and new ones are created for the
 * rest. Returns 0 (also when p was not paused), or TETHER_EINVAL for a
 * NULL p. */
TETHER_API int tether_pool_resume(tether_pool *p);

/* tether_pool_evict_idle closes the idle connections now (a soft evict:
 * leased ones are untouched; the pool refills to min_size as usual).
 * Returns how many were closed (0 for a NULL p). */
TETHER_API int tether_pool_evict_idle(tether_pool *p);

/* tether_pool_reconnect retires every connection: the idle ones now, each
 * leased one when it is released, so that every connection is made anew
 * (new credentials, a DNS change) without a pause: a rolling reconnect.
 * The connector forgets what it knew of the hosts' roles. A transaction
 * reserved to a key (tether_pool_acquire_key) is lost, as with
 * tether_pool_clear. Returns 0, or TETHER_EINVAL for a NULL p. */
TETHER_API int tether_pool_reconnect(tether_pool *p);

/* One acquire site holding leases (tether_pool_holders). */
typedef struct tether_pool_holder {
    char site[64];     /* "file.c:123" (the file's base name), "" when not
                          recorded */
    int count;         /* leases held from that site */
    int64_t oldest_ms; /* age of the oldest of them */
} tether_pool_holder;

/* tether_pool_holders fills out (cap entries) with the sites holding
 * leases now, most leases first (then the oldest first); returns how many
 * were written (0 for a NULL p or out, or out of memory). Sites and ages
 * are recorded with leak detection on (tether_pool_opts.leak_threshold_ms,
 * tether_leak_threshold; a long threshold records them without reports);
 * without it, one entry counts every lease (site "", oldest_ms 0). */
TETHER_API int tether_pool_holders(tether_pool *p, tether_pool_holder *out,
                                   int cap);

/* tether_pool_paused returns 1 while p is paused, else 0. */
TETHER_API int tether_pool_paused(tether_pool *p);

/* tether_pool_acquire_key_at is tether_pool_acquire_at for a transaction
 * spread over several acquires (docs/pool.md, "Transactions across
 * acquires"). key (the application's: a request's or a transaction's id;
 * 0: no key, exactly tether_pool_acquire_at) ties the lease to a
 * transaction. When a lease acquired with key is released with its
 * transaction open, the connection stays reserved to key: not reset, never
 * handed to another caller, counted in the pool's size and in
 * tether_pool_metrics.txn_reserved. The next acquire with key gets it back
 * at once, without queueing; a release that finds the transaction ended
 * (committed or rolled back) ends the reservation. A reservation held
 * longer than tether_pool_opts.txn_reserve_timeout_ms is rolled back by the
 * pool, with a warning naming the acquire site and the key; clear and
 * close roll reservations back too. A keyed acquire whose reservation was
 * lost that way, or whose connection broke, fails once with TETHER_EBROKEN
 * (class permanent: restart the transaction), so the rest of a transaction
 * never runs outside it; the next acquire with key starts afresh. Keys have
 * no effect with a driver that cannot tell an open transaction
 * (tether_driver.in_transaction; pq and sim can). One lease per key at a
 * time: a second concurrent acquire with a key in use gets a connection of
 * its own, not the first one's transaction. tether_pool_run and the
 * non-blocking tether_pool_acquire_start take no key. */
TETHER_API int tether_pool_acquire_key_at(tether_pool *p, uint64_t key,
                                          int64_t timeout_ms,
                                          tether_lease **out, tether_error *err,
                                          const char *file, int line);

/* tether_pool_acquire_key: tether_pool_acquire_key_at recording the
 * caller's place (named in the warning of a reservation held too long). */
#define tether_pool_acquire_key(p, key, timeout_ms, out, err)                  \
    tether_pool_acquire_key_at((p), (key), (timeout_ms), (out), (err),         \
                               __FILE__, __LINE__)

/* tether_lease_release returns a connection to its pool: it is reset
 * (open transaction rolled back, reset query) and reused, or closed when its
 * state is unknown. A lease acquired with a key (tether_pool_acquire_key)
 * and released with its transaction open stays reserved to the key
 * instead; without a key, a transaction found open is rolled back and a
 * warning (at most one a second) names where the lease was acquired. Returns 0
 * (NULL: nothing done), or TETHER_EINVAL for a lease already released or
 * discarded (refused: logged at error level, counted, the connection
 * untouched). */
TETHER_API int tether_lease_release(tether_lease *l);

/* tether_lease_discard closes the leased connection instead of reusing it
 * (use it when its state is unknown or it broke). Returns 0, or
 * TETHER_EINVAL as tether_lease_release. */
TETHER_API int tether_lease_discard(tether_lease *l);

/* tether_lease_handle returns the driver's connection (PGconn * for pq, a
 * sim handle for sim), or NULL for NULL or a lease no longer held. */
TETHER_API void *tether_lease_handle(const tether_lease *l);

/* tether_pool_clear discards every connection: idle ones now, leased ones
 * when released (a generation counter). */
TETHER_API void tether_pool_clear(tether_pool *p);

/* The caller's work for tether_pool_run: use handle within
 * attempt->timeout_ms; on failure fill err and return a negative code. */
typedef int (*tether_work_fn)(void *handle, void *arg,
                              const tether_attempt *attempt, tether_error *err);

/* tether_pool_run acquires a connection, calls fn with it and releases it,
 * retrying transient failures under the pool's retry policy: idempotent
 * work (TETHER_IDEMPOTENT in flags) is retried; other work only when it
 * surely never reached the server. A broken connection is discarded, never
 * returned to the pool. With TETHER_READONLY in flags, a routing pool
 * (tether_route=read-write-split, docs/routing.md) runs the work on a
 * standby, or on the primary when no standby is up or within the lag
 * bound, and re-runs it once on the primary when the standby refuses it as
 * a write (TETHER_EREADONLY). */
TETHER_API int tether_pool_run(tether_pool *p, unsigned flags,
                               tether_work_fn fn, void *arg, tether_error *err);

/* tether_pool_run_for is tether_pool_run within timeout_ms: the wait for a
 * connection, each retry's wait and every pause end by then (the pool's
 * retry deadline, by default its acquire timeout, still applies when
 * sooner), and fn's attempt->timeout_ms says what is left. The work itself
 * is fn's: a statement fn runs is not interrupted at the deadline, so fn
 * must bound it (for PostgreSQL, statement_timeout or PQcancel); a call
 * can return late by as long as fn overruns. -1 means the pool's own
 * limits only; 0 takes an idle connection or fails at once with
 * TETHER_ETIMEDOUT. For a caller with a request deadline. */
TETHER_API int tether_pool_run_for(tether_pool *p, unsigned flags,
                                   int64_t timeout_ms, tether_work_fn fn,
                                   void *arg, tether_error *err);

#define TETHER_HIST_BUCKETS 16

/* Pool metrics. The acquire-latency histogram counts acquires served at
 * once from an idle connection in bucket 0 without timing them; others are
 * timed. Bucket upper bounds: tether_pool_hist_bound_us. */
typedef struct tether_pool_metrics {
    size_t size; /* what the library filled (the caller's sizeof) */
    int total, idle, in_use, creating, waiters, min_size, max_size;
    uint64_t acquires;
    uint64_t created;
    uint64_t connect_failures;
    uint64_t closed_idle, closed_lifetime, closed_broken, closed_cleared,
        closed_validation, closed_reset, closed_discarded, closed_shutdown;
    uint64_t timeouts;
    uint64_t queue_full;
    uint64_t breaker_rejections;
    uint64_t retries;
    uint64_t leaks;
    tether_breaker_state breaker_state;
    uint64_t hist[TETHER_HIST_BUCKETS];
    uint64_t hist_sum_us;    /* of timed acquires */
    uint64_t stale_releases; /* releases and discards refused: the lease
                                was released or discarded before */
    /* Read/write routing (docs/routing.md); 0 on a pool that does not
     * route. The read side's own metrics: tether_pool_read_side. */
    uint64_t reads_standby;     /* TETHER_READONLY work done on a standby */
    uint64_t reads_primary;     /* ... sent to the primary instead: no
                                   standby up, or every one lagging */
    uint64_t reads_lagging;     /* ... of those, because the standby's
                                   connection lagged beyond the bound */
    uint64_t readonly_reroutes; /* work a standby refused as read-only
                                   (25006), re-run on the primary */
    uint64_t lag_checks;        /* lag queries run on standbys */
    /* The breaker's probe (docs/breaker.md, "The probe belongs to the
     * pool"). */
    int64_t breaker_blocked_ms; /* how long from now the breaker keeps
                                   refusing new connections (0: closed, or
                                   the next probe may go now) */
    int probing;                /* 1 while the pool's probe connects */
    uint64_t probes;            /* probes the pool has made */
    uint64_t probe_failures;    /* ... of them that failed */
    uint64_t connects_cut;      /* connects a caller's deadline cut short
                                   with nothing learnt: not held against
                                   the server (not counted by the breaker,
                                   no host marked down) */
    /* Transaction affinity (docs/pool.md, "Transactions across acquires").
     */
    int txn_reserved;          /* connections reserved to a transaction's
                                  key now */
    uint64_t txn_reservations; /* keyed releases that reserved one */
    uint64_t txn_expired;      /* reservations rolled back: held past
                                  txn_reserve_timeout_ms */
    uint64_t txn_lost;         /* reservations lost otherwise: the
                                  connection broke, clear or close */
    uint64_t txn_rolled_back;  /* releases whose reset rolled an open
                                  transaction back (warned): without a
                                  key, or keyed and not kept
                                  (docs/metrics.md) */
    /* Runtime control and held leases (docs/pool.md, "Operating a pool at
     * runtime", "When the pool is exhausted"). */
    int paused;             /* 1 while paused (tether_pool_pause) */
    int held;               /* leases held now (in_use less connections
                               reserved to a transaction; with leak
                               detection, less those in transit) */
    int64_t held_oldest_ms; /* age of the oldest lease held (0: none, or
                               leak detection off: not recorded) */
    int64_t held_median_ms; /* median age of the leases held (0: as
                               held_oldest_ms) */
    uint64_t evicted;       /* connections closed by tether_pool_evict_idle,
                               a pause with TETHER_PAUSE_CLOSE_IDLE or a
                               shrink (also in closed_idle) */
    uint64_t reconnects;    /* tether_pool_reconnect calls */
    /* Discovery from Patroni (docs/patroni.md, "Discovery"), 0 without
     * tether_patroni; shared by the pools that name the same endpoints. */
    uint64_t patroni_requests; /* REST calls made (GET /cluster) */
    uint64_t patroni_failures; /* ... that failed or gave a bad answer */
    uint64_t patroni_kicks;    /* refreshes asked for by a trigger */
    int patroni_members;       /* members in the list last known */
    int64_t patroni_age_ms;    /* since that list came; -1 none ever */
    /* The limit (docs/pool.md, "Adaptive limit"). A fixed pool: limit =
     * limit_max = max_size, limit_min = min_size, the rest 0. */
    int limit_adaptive;       /* 1 with TETHER_POOL_LIMIT_ADAPTIVE */
    int limit;                /* connections the pool may hold now */
    int limit_min, limit_max; /* its floor and ceiling */
    int64_t hold_short_us;    /* the last window's mean lease hold time */
    int64_t hold_long_us;     /* its baseline (the long-run level) */
    uint64_t limit_up;        /* changes of the limit upwards */
    uint64_t limit_down;      /* ... downwards (latency or refusals) */
    uint64_t limit_full;      /* connects refused as full (53300, 57P03)
                                 that brought it down */
    uint64_t rebalanced;      /* connections retired to move them to servers
                                 Patroni's list gained (docs/patroni.md,
                                 "Rebalance"; also in closed_lifetime) */
} tether_pool_metrics;

/* tether_pool_hist_bound_us returns bucket i's upper bound in microseconds
 * (the last bucket is unbounded: INT64_MAX). */
TETHER_API int64_t tether_pool_hist_bound_us(int i);

/* tether_pool_metrics_get copies p's current metrics into out. */
TETHER_API void tether_pool_metrics_get_sized(tether_pool *p,
                                              tether_pool_metrics *out,
                                              size_t size);
#define tether_pool_metrics_get(p, out)                                        \
    tether_pool_metrics_get_sized((p), (out), sizeof(tether_pool_metrics))

/* tether_pool_bytes_per_conn returns the bytes of pool bookkeeping each
 * connection costs (its slot; the pool's fixed part is not counted). */
TETHER_API size_t tether_pool_bytes_per_conn(void);

/* tether_pool_metrics_prometheus writes p's metrics in the Prometheus text
 * format (every metric labelled pool="NAME", tether_pool_name; the list is
 * in docs/metrics.md) into buf, like snprintf: it writes at most size - 1
 * bytes and a NUL (nothing when size is 0; buf may then be NULL), and
 * returns the length of the whole text, excluding the NUL. A return value
 * of size or more means the text was cut: call again with a buffer of at
 * least the return value + 1 bytes (the text may grow a little between two
 * calls as counters grow). */
TETHER_API size_t tether_pool_metrics_prometheus(tether_pool *p, char *buf,
                                                 size_t size);

/* tether_pool_read_side returns the read side of a routing pool (the pool
 * of standby connections that TETHER_READONLY work goes to, named
 * "NAME:read"), for its metrics; NULL for a pool that does not route. Owned
 * by p: never destroy it. */
TETHER_API tether_pool *tether_pool_read_side(const tether_pool *p);

/* tether_pool_name returns p's name, its label in metrics and logs
 * (tether_pool_opts.name, tether_pool_name in a connection string, or the
 * default); valid until p is destroyed. */
TETHER_API const char *tether_pool_name(const tether_pool *p);

/* ------------------------------------------------------------------------ */
/* The admin socket (docs/operations.md)                                    */
/* ------------------------------------------------------------------------ */

/* tether_admin_start opens the admin socket at path (a Unix socket, mode
 * 0600, peers of the same user or root only) and serves it on one thread of
 * its own: every live pool of the process, inspected and controlled with
 * the line protocol of docs/operations.md (`tether top`, `tether ctl`). A
 * stale socket file at path is replaced; a live one (another process
 * answers there) is TETHER_ESTATE. Starting the same path again is 0. The
 * environment variable TETHER_ADMIN_SOCKET does the same when the process's
 * first pool is created, and the keyword tether_admin_socket when a pool is
 * opened from a connection string. Returns 0, TETHER_EINVAL (path empty or
 * too long), TETHER_ESTATE or TETHER_EIO (err says why). */
TETHER_API int tether_admin_start(const char *path, tether_error *err);

/* tether_admin_stop closes every admin socket of the process, removes
 * their files and ends the server thread. The process's exit does the same
 * for the files. */
TETHER_API void tether_admin_stop(void);

/* ------------------------------------------------------------------------ */
/* Non-blocking acquire, for event loops (docs/evloop.md)                   */
/* ------------------------------------------------------------------------ */

/* A completion queue: non-blocking acquires post their outcome to it, and
 * its file descriptor (tether_cq_fd) becomes readable while a completion
 * waits. Use one per event loop; tether_cq_next is thread-safe. */
typedef struct tether_cq tether_cq;

/* The outcome of one tether_pool_acquire_start (filled by tether_cq_next,
 * which sets size: docs/api-stability.md). */
typedef struct tether_completion {
    size_t size;         /* what the library filled (the caller's sizeof) */
    uint64_t ticket;     /* the ticket tether_pool_acquire_start gave */
    void *user;          /* its user pointer */
    tether_pool *pool;   /* its pool */
    int rc;              /* 0: lease is set; else TETHER_ETIMEDOUT at the
                            deadline, TETHER_ECANCELED, TETHER_ECLOSED,
                            TETHER_EQUEUEFULL, a connect error, TETHER_EOPEN */
    tether_lease *lease; /* rc 0: the connection, released once as any lease;
                            else NULL */
    tether_error err;    /* rc != 0: the details, as the blocking acquire's */
} tether_completion;

/* tether_cq_create makes a completion queue with its file descriptor (an
 * eventfd). Returns NULL on failure (err: TETHER_ENOMEM or TETHER_EIO). */
TETHER_API tether_cq *tether_cq_create(tether_error *err);

/* tether_cq_destroy cancels cq's pending acquires, waits until each has
 * completed, releases the leases of completions not taken yet, closes the
 * file descriptor and frees cq (NULL is accepted). Every pool cq has
 * acquires in must still exist; no other call on cq may be in progress. */
TETHER_API void tether_cq_destroy(tether_cq *cq);

/* tether_cq_fd returns the descriptor to poll for input: readable while
 * a completion waits in cq, and until tether_cq_next has found cq empty
 * (returned TETHER_EAGAIN) once: a loop that takes completions until
 * TETHER_EAGAIN sees it quiet again; one that stops earlier is woken
 * again. Read nothing from it: tether_cq_next drains it. -1 for NULL. */
TETHER_API int tether_cq_fd(const tether_cq *cq);

/* tether_cq_next takes the next completion without blocking. Returns 0
 * with *out filled, TETHER_EAGAIN when none is ready, TETHER_EINVAL for
 * NULL arguments. A connection handed over is checked here, as a blocking
 * acquire checks it (the cheap liveness check; a round trip only for one
 * idle longer than validate_idle_ms); one that fails the check is closed
 * and its acquire waits again, within its deadline. */
TETHER_API int tether_cq_next_sized(tether_cq *cq, tether_completion *out,
                                    size_t size);
#define tether_cq_next(cq, out)                                                \
    tether_cq_next_sized((cq), (out), sizeof(tether_completion))

/* tether_cq_loop_thread (on 1) tells cq that the calling thread runs the
 * loop that takes its completions, and that this loop takes every ready
 * completion before it next waits for events (libtether-uv does, in a
 * uv_prepare_t): completions posted on that thread (a release handing its
 * connection to a queued acquire, an acquire served at once) then skip
 * the descriptor's wake-up, a write and a read of the eventfd and a turn
 * of the loop. Completions posted on other threads wake it as before.
 * on 0 forgets the thread (a watcher that stops watching). A loop that
 * does not keep the promise would wait with completions ready: without
 * this call, every completion wakes the descriptor (docs/evloop.md,
 * "Adapters"). */
TETHER_API void tether_cq_loop_thread(tether_cq *cq, int on);

/* A loop's "take the completions" request (tether_cq_loop_notify). */
typedef void (*tether_cq_notify_fn)(void *arg);

/* tether_cq_loop_notify is tether_cq_loop_thread(cq, 1) for a loop with no
 * hook that runs before it waits (libevent 2.1): a completion posted on
 * the calling thread calls fn(arg) instead of waking the descriptor, once
 * until tether_cq_next next finds cq empty, and fn makes the loop take the
 * ready completions before it next waits (libtether-event activates its
 * event with event_active). fn runs on that thread, inside whatever tether
 * call posted the completion (a release, an acquire served at once), with
 * the pool's lock held: it must not call tether functions or block.
 * tether_cq_loop_thread(cq, 0) forgets fn and the thread. Nothing for a
 * NULL cq or fn. */
TETHER_API void tether_cq_loop_notify(tether_cq *cq, tether_cq_notify_fn fn,
                                      void *arg);

/* tether_cq_pending returns how many of cq's acquires have not been taken
 * by tether_cq_next yet (waiting or ready). */
TETHER_API int tether_cq_pending(tether_cq *cq);

/* tether_pool_acquire_start starts borrowing a connection without blocking:
 * exactly one completion for it comes to cq later (or at once when an
 * idle connection is there), with user and the ticket stored in *ticket
 * (may be NULL). It queues in the same first come, first served queue as
 * blocking tether_pool_acquire callers; timeout_ms as for
 * tether_pool_acquire_at (-1: the pool's acquire timeout). The deadline is
 * kept by the pool's 10 ms tick (pools on the real clock), so it fires
 * 0-10 ms late at worst and the caller polls no timer. Connections are
 * created on short-lived worker threads, never on the caller's. Returns 0,
 * or TETHER_EINVAL (bad arguments: then no completion comes) or
 * TETHER_ENOMEM. */
TETHER_API int tether_pool_acquire_start(tether_pool *p, tether_cq *cq,
                                         int64_t timeout_ms, void *user,
                                         uint64_t *ticket, tether_error *err);

/* tether_pool_acquire_cancel cancels the acquire with ticket on p: its
 * completion says TETHER_ECANCELED (a connection it was given goes back to
 * the pool). Returns 0, or TETHER_ESTATE when it is not pending any more
 * (tether_cq_next took its completion already, or no such ticket). */
TETHER_API int tether_pool_acquire_cancel(tether_pool *p, uint64_t ticket);

/* ------------------------------------------------------------------------ */
/* Registry                                                                 */
/* ------------------------------------------------------------------------ */

/* Registry options. Defaults: pool template from tether_pool_opts_init with
 * name NULL (each pool is named as tether_pool_open names it:
 * tether_pool_name, else "user@host:port/dbname", else "pool-N"), pools
 * unused (no lease out, no acquire) for 10 min are closed.
 * With the template's driver NULL, pools are PostgreSQL pools opened from
 * each connection string (tether_pool_open: hosts, credentials and pool
 * settings all from the string); otherwise every pool copies the template
 * (its connector must be NULL). */
typedef struct tether_registry_opts {
    size_t size;           /* sizeof, set by tether_registry_opts_init */
    tether_pool_opts pool; /* template for new pools (conninfo ignored) */
    int64_t evict_idle_ms; /* 0 = never evict */
} tether_registry_opts;

/* tether_registry_opts_init fills o with the documented defaults and sets
 * o->size (a macro: it passes the struct's sizeof as the caller was
 * compiled). */
TETHER_API void tether_registry_opts_init_sized(tether_registry_opts *o,
                                                size_t size);
#define tether_registry_opts_init(o)                                           \
    tether_registry_opts_init_sized((o), sizeof(tether_registry_opts))

/* Pools keyed by normalized connection string (keyword order, whitespace
 * and quoting do not matter; credentials always do). Thread-safe. */
typedef struct tether_registry tether_registry;

/* tether_registry_create makes a registry. */
TETHER_API int tether_registry_create(tether_registry **out,
                                      const tether_registry_opts *o,
                                      tether_error *err);

/* tether_registry_destroy closes every pool and frees r (NULL accepted). */
TETHER_API void tether_registry_destroy(tether_registry *r);

/* tether_registry_acquire_at borrows a connection from the pool for
 * conninfo, creating the pool on first use. */
TETHER_API int tether_registry_acquire_at(tether_registry *r,
                                          const char *conninfo,
                                          int64_t timeout_ms,
                                          tether_lease **out, tether_error *err,
                                          const char *file, int line);

/* tether_registry_acquire borrows a connection, recording the caller. */
#define tether_registry_acquire(r, conninfo, timeout_ms, out, err)             \
    tether_registry_acquire_at((r), (conninfo), (timeout_ms), (out), (err),    \
                               __FILE__, __LINE__)

/* tether_registry_clear_all clears every pool (tether_pool_clear). */
TETHER_API void tether_registry_clear_all(tether_registry *r);

/* tether_registry_count returns how many pools r holds. */
TETHER_API int tether_registry_count(tether_registry *r);

/* tether_registry_normalize writes conninfo's registry key into buf like
 * snprintf (NUL-terminated, truncated to cap; buf may be NULL when cap is
 * 0) and returns the key's full length (>= cap: truncated), or
 * TETHER_ESPEC for a malformed string (err names the problem, never a
 * password). */
TETHER_API int tether_registry_normalize(const char *conninfo, char *buf,
                                         size_t cap, tether_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_H */
