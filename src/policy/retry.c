/* retry.c - the retry policy and executor (docs/retry.md). tether_retry_run
 * calls the caller's operation until it succeeds or the policy stops: a
 * permanent failure, max attempts, the overall deadline (no pause or
 * attempt is started that would overrun it), the idempotency gate, an
 * exhausted retry budget or an open circuit breaker (docs/retry.md, "Budget
 * and breaker"). Pauses come from the backoff (backoff.c, docs/backoff.md),
 * whose state lives on the run's stack: a run allocates nothing.
 *
 * No cascading: a thread-local depth counter makes a run started inside
 * another run (on the same thread) try exactly once, so only the outermost
 * policy retries.
 *
 * The policy is immutable after create apart from its counters (relaxed C11
 * atomics), so one policy may serve many threads at once. */
#include "backoff.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest pause or deadline honoured, in ms (~73 years): keeps every
 * conversion to nanoseconds far from overflow. */
#define MAX_MS (INT64_MAX / TETHER__NS_PER_MS / 4)

/* Every field of tether_retry_stats, in order. */
#define RETRY_COUNTERS(X)                                                      \
    X(runs)                                                                    \
    X(attempts)                                                                \
    X(retries)                                                                 \
    X(successes)                                                               \
    X(failures)                                                                \
    X(transient)                                                               \
    X(throttled)                                                               \
    X(permanent)                                                               \
    X(stopped_deadline)                                                        \
    X(stopped_attempts)                                                        \
    X(stopped_idempotency)                                                     \
    X(stopped_budget)                                                          \
    X(stopped_breaker)                                                         \
    X(nested)                                                                  \
    X(delay_ms_total)

typedef struct retry_counters {
    _Atomic uint64_t quick; /* runs done by a first attempt that succeeded
                               on the fast path: each is also a run, an
                               attempt and a success (summed in stats) */
#define RETRY__DECL(name) _Atomic uint64_t name;
    RETRY_COUNTERS(RETRY__DECL)
#undef RETRY__DECL
} __attribute__((aligned(64))) retry_counters;

/* Counters are striped: a thread always bumps the same stripe, so threads
 * sharing one policy (a pool's run()) do not fight over one cache line on
 * every call. tether_retry_stats_get sums the stripes. */
#define STRIPES 8

struct tether_retry {
    /* Read by every run (see run_fast): one line. */
    int fast;                   /* first attempts may take run_fast */
    int64_t first_timeout_ms;   /* attempt 1's timeout_ms */
    int64_t deadline_ms;        /* o.deadline_ms capped at MAX_MS; 0 = none */
    int64_t attempt_timeout_ms; /* o.attempt_timeout_ms */
    tether_budget *budget;      /* o.budget */

    tether_retry_opts o; /* validated copy; classify and clock resolved */
    retry_counters c[STRIPES];
};

static _Atomic unsigned next_stripe;
static TETHER__TLS unsigned my_stripe = STRIPES; /* STRIPES: unassigned */

static unsigned stripe(void) {
    if (my_stripe == STRIPES)
        my_stripe = atomic_fetch_add(&next_stripe, 1) % STRIPES;
    return my_stripe;
}

#define BUMP(r, name, n)                                                       \
    atomic_fetch_add_explicit(&(r)->c[stripe()].name, (uint64_t)(n),           \
                              memory_order_relaxed)

/* How many tether_retry_run calls this thread is inside. */
static TETHER__TLS int run_depth;

/* ---- options ----------------------------------------------------------- */

/* retry_defaults fills a whole tether_retry_opts with the defaults. */
static void retry_defaults(tether_retry_opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    tether_backoff_opts_init(&o->backoff);
    o->max_attempts = 3;
    o->deadline_ms = 30000;
    o->attempt_timeout_ms = 0;
    o->classify = tether_classify_default;
}

void tether_retry_opts_init_sized(tether_retry_opts *o, size_t size) {
    tether_retry_opts d;
    retry_defaults(&d);
    tether__sized_out(o, size, &d, sizeof(d));
}

static tether_class class_of_code(int code) {
    switch (code) {
    case TETHER_ETIMEDOUT:
    case TETHER_ECONNECT:
    case TETHER_EBROKEN:
    case TETHER_EIO:
    case TETHER_ERESOLVE:
    case TETHER_ECONFLICT:
        return TETHER_CLASS_TRANSIENT;
    case TETHER_ETHROTTLED:
        return TETHER_CLASS_THROTTLED;
    default:
        return TETHER_CLASS_PERMANENT;
    }
}

static int class_valid(tether_class cls) {
    return cls == TETHER_CLASS_TRANSIENT || cls == TETHER_CLASS_THROTTLED ||
           cls == TETHER_CLASS_PERMANENT;
}

tether_class tether_classify_default(void *ctx, const tether_error *err,
                                     int64_t *retry_after_ms) {
    (void)ctx;
    if (!err)
        return TETHER_CLASS_PERMANENT;
    tether_class cls =
        class_valid(err->cls) ? err->cls : class_of_code(err->code);
    if (cls == TETHER_CLASS_THROTTLED && retry_after_ms &&
        err->retry_after_ms > *retry_after_ms)
        *retry_after_ms = err->retry_after_ms;
    return cls;
}

/* attempt_timeout is an attempt's timeout_ms: the per-attempt timeout,
 * capped by left_ms, what is left of the overall deadline (-1: none). */
/* attempt_timeout caps an attempt at the policy's attempt_timeout_ms
 * (<= 0: none) and at the left_ms of the run (-1: no deadline). */
static int64_t attempt_timeout(int64_t attempt_timeout_ms, int64_t left_ms) {
    int64_t t = attempt_timeout_ms > 0 ? attempt_timeout_ms : -1;
    return left_ms >= 0 && (t < 0 || left_ms < t) ? left_ms : t;
}

static int bad(tether_error *err, const char *field, long long v,
               const char *why) {
    return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                            "retry: bad %s = %lld: %s", field, v, why);
}

static int validate(const tether_retry_opts *o, tether_error *err) {
    tether_error be;
    tether_error_clear(&be);
    if (tether_backoff_validate(&o->backoff, &be) != 0)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "retry: %.200s", be.message);
    if (o->max_attempts < 1)
        return bad(err, "max_attempts", o->max_attempts, "must be >= 1");
    if (o->deadline_ms < 0)
        return bad(err, "deadline_ms", (long long)o->deadline_ms,
                   "must be >= 0 (0 = none)");
    if (o->attempt_timeout_ms < 0)
        return bad(err, "attempt_timeout_ms", (long long)o->attempt_timeout_ms,
                   "must be >= 0 (0 = none)");
    if (o->clock && (!o->clock->now_ns || !o->clock->sleep_ns))
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "retry: bad clock: now_ns and sleep_ns must "
                                "be set");
    return 0;
}

int tether_retry_create(tether_retry **out, const tether_retry_opts *o,
                        tether_error *err) {
    tether_retry_opts defaults;
    if (!out)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "retry: out is NULL");
    *out = NULL;
    retry_defaults(&defaults);
    int rc = TETHER__SIZED_IN(defaults, o, "tether_retry_opts", err);
    if (rc)
        return rc;
    o = &defaults;
    rc = validate(o, err);
    if (rc)
        return rc;
    tether_retry *r = tether__aligned_alloc(64, sizeof(*r));
    if (r)
        memset(r, 0, sizeof(*r));
    if (!r)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "retry: out of memory");
    r->o = *o;
    if (!r->o.classify)
        r->o.classify = tether_classify_default;
    r->o.clock = tether__clock(o->clock);
    r->fast = !o->breaker && r->o.clock == tether_clock_real();
    r->deadline_ms = TETHER__MIN(o->deadline_ms, MAX_MS);
    r->attempt_timeout_ms = o->attempt_timeout_ms;
    r->first_timeout_ms = attempt_timeout(
        o->attempt_timeout_ms, r->deadline_ms > 0 ? r->deadline_ms : -1);
    r->budget = o->budget;
    *out = r;
    return 0;
}

void tether_retry_destroy(tether_retry *r) {
    tether__aligned_free(r);
}

static void retry_stats(const tether_retry *r, tether_retry_stats *out) {
    memset(out, 0, sizeof(*out));
    if (!r)
        return;
    for (int i = 0; i < STRIPES; i++) {
        retry_counters *c = (retry_counters *)&r->c[i];
#define RETRY__LOAD(name)                                                      \
    out->name += atomic_load_explicit(&c->name, memory_order_relaxed);
        RETRY_COUNTERS(RETRY__LOAD)
#undef RETRY__LOAD
        uint64_t quick = atomic_load_explicit(&c->quick, memory_order_relaxed);
        out->runs += quick;
        out->attempts += quick;
        out->successes += quick;
    }
}

void tether_retry_stats_get_sized(const tether_retry *r,
                                  tether_retry_stats *out, size_t size) {
    tether_retry_stats full;
    if (!out)
        return;
    retry_stats(r, &full);
    tether__sized_out(out, size, &full, sizeof(full));
}

/* ---- one run ----------------------------------------------------------- */

typedef struct run_state {
    tether_retry *r;
    const tether_retry_opts *o;
    unsigned flags;
    tether_op_fn fn;
    void *arg;
    tether_error *err;
    int64_t start_ns;
    int64_t now_ns;      /* when the next attempt starts */
    int64_t deadline_ns; /* valid when has_deadline */
    int has_deadline;
    int nested;
    int attempts; /* made so far */
    int last_rc;  /* the operation's last failure code */
    int permit;   /* what the breaker allowed for this attempt */
    int cost;     /* budget tokens the retry in progress took */
    uint64_t seq; /* this run's number, for deterministic seeding */
    int bo_ready; /* bo is seeded (lazily: first-try successes skip it) */
    tether__backoff_state bo;
} run_state;

static int64_t clock_ns(const run_state *x) {
    return x->o->clock->now_ns(x->o->clock->ctx);
}

static int64_t elapsed_ms(const run_state *x) {
    return (clock_ns(x) - x->start_ns) / TETHER__NS_PER_MS;
}

/* run_limit_ms is a run's overall limit in ms: the policy's deadline, or
 * the caller's timeout_ms (-1: none) when that is sooner; -1 for none. */
static int64_t run_limit_ms(const tether_retry *r, int64_t timeout_ms) {
    int64_t d = r->deadline_ms > 0 ? r->deadline_ms : -1;
    if (timeout_ms >= 0 && (d < 0 || timeout_ms < d))
        d = TETHER__MIN(timeout_ms, MAX_MS);
    return d;
}

/* run_init readies x for a run that started at start_ns within limit_ms
 * (-1: no deadline), nested in another when nested is set (err is not
 * touched). */
static void run_init(run_state *x, tether_retry *r, unsigned flags,
                     tether_op_fn fn, void *arg, tether_error *err,
                     int64_t start_ns, int64_t limit_ms, int nested) {
    memset(x, 0, sizeof(*x));
    x->r = r;
    x->o = &r->o;
    x->flags = flags;
    x->fn = fn;
    x->arg = arg;
    x->err = err;
    /* distinct per run and per stripe, reproducible on one thread */
    x->seq = BUMP(r, runs, 1) * STRIPES + stripe();
    x->nested = nested;
    if (x->nested)
        BUMP(r, nested, 1);
    x->start_ns = start_ns;
    x->now_ns = x->start_ns;
    x->has_deadline = limit_ms >= 0;
    x->deadline_ns = x->start_ns + limit_ms * TETHER__NS_PER_MS;
}

static void count_stop(tether_retry *r, tether_stop stop) {
    switch (stop) {
    case TETHER_STOP_DEADLINE:
        BUMP(r, stopped_deadline, 1);
        break;
    case TETHER_STOP_ATTEMPTS:
        BUMP(r, stopped_attempts, 1);
        break;
    case TETHER_STOP_NOT_IDEMPOTENT:
        BUMP(r, stopped_idempotency, 1);
        break;
    case TETHER_STOP_BUDGET:
        BUMP(r, stopped_budget, 1);
        break;
    case TETHER_STOP_BREAKER:
        BUMP(r, stopped_breaker, 1);
        break;
    default: /* permanent: counted by class; nested: counted at start */
        break;
    }
}

/* give_up ends a failed run: permanent failures are logged as errors; the
 * rest (transient faults, open breaker, spent budget) as warnings, except a
 * nested run's stop, which is expected (the outer policy decides). */
static int give_up(run_state *x, int rc, tether_stop stop) {
    tether_error *e = x->err;
    e->stop = stop;
    e->attempts = x->attempts;
    e->elapsed_ms = elapsed_ms(x);
    BUMP(x->r, failures, 1);
    count_stop(x->r, stop);
    tether_log_level lvl = stop == TETHER_STOP_PERMANENT ? TETHER_LOG_ERROR
                           : stop == TETHER_STOP_NESTED  ? TETHER_LOG_INFO
                                                         : TETHER_LOG_WARN;
    tether__log(x->o->log, x->o->log_ctx, lvl,
                "retry: giving up after %d attempt(s) in %lld ms (stop: %s, "
                "%s %s): %s",
                x->attempts, (long long)e->elapsed_ms, tether_stop_name(stop),
                tether_class_name(e->cls), tether_errname(e->code), e->message);
    return rc;
}

static int succeed(run_state *x) {
    if (x->o->breaker)
        tether_breaker_record(x->o->breaker, x->permit, 1, NULL);
    if (x->o->budget)
        tether_budget_success(x->o->budget, x->cost);
    tether_error_clear(x->err);
    x->err->attempts = x->attempts;
    x->err->elapsed_ms = elapsed_ms(x);
    BUMP(x->r, successes, 1);
    if (x->attempts > 1)
        tether__log(x->o->log, x->o->log_ctx, TETHER_LOG_INFO,
                    "retry: succeeded on attempt %d after %lld ms", x->attempts,
                    (long long)x->err->elapsed_ms);
    return 0;
}

/* admit runs before every attempt: it refuses one that would start with no
 * time left, then asks the breaker (only then: a permit must be used).
 * Returns 0 to go ahead, else the run's final (negative) code. */
static int admit(run_state *x) {
    if (x->attempts > 0) {
        x->now_ns = clock_ns(x);
        if (x->has_deadline && x->deadline_ns - x->now_ns < TETHER__NS_PER_MS)
            return give_up(x, x->last_rc, TETHER_STOP_DEADLINE);
    }
    x->permit = TETHER_PERMIT_CALL;
    if (!x->o->breaker)
        return 0;
    tether_error be;
    tether_error_clear(&be);
    int p = tether_breaker_allow(x->o->breaker, &be);
    if (p >= 0) {
        x->permit = p;
        return 0;
    }
    *x->err = be; /* the breaker's cached failure, message kept */
    if (x->err->code == 0)
        tether_error_set(x->err, p, TETHER_CLASS_TRANSIENT, NULL);
    return give_up(x, p, TETHER_STOP_BREAKER);
}

/* failed completes err after a failed attempt: the code, and a message
 * when the operation left none. Returns rc. */
static int failed(run_state *x, int rc) {
    if (x->err->code == 0)
        x->err->code = rc;
    if (x->err->message[0] == '\0')
        snprintf(x->err->message, sizeof(x->err->message), "%s",
                 tether_strerror(rc));
    return rc;
}

/* attempt makes one call; returns its code (>= 0 success). */
static int attempt(run_state *x) {
    tether__attempt ax;
    tether_attempt *a = &ax.a;
    a->number = ++x->attempts;
    a->timeout_ms = attempt_timeout(
        x->o->attempt_timeout_ms,
        x->has_deadline ? (x->deadline_ns - x->now_ns) / TETHER__NS_PER_MS
                        : -1);
    a->deadline_ms = x->has_deadline ? x->deadline_ns / TETHER__NS_PER_MS : -1;
    ax.began_ns = -1; /* x->now_ns may be another clock's */
    BUMP(x->r, attempts, 1);
    if (a->number > 1) /* the run's start cleared it for the first */
        tether_error_clear(x->err);
    int rc = x->fn(x->arg, a, x->err);
    return rc >= 0 ? rc : failed(x, rc);
}

/* classify names the failure's class (a classifier answering NONE or junk
 * falls back to the default one) and the server's suggested pause. */
static tether_class classify(run_state *x, int64_t *after_ms) {
    tether_error *e = x->err;
    int64_t ra = 0;
    tether_class cls = x->o->classify(x->o->classify_ctx, e, &ra);
    if (!class_valid(cls))
        cls = tether_classify_default(NULL, e, &ra);
    e->cls = cls;
    ra = TETHER__MAX(ra, e->retry_after_ms);
    *after_ms = TETHER__MIN(TETHER__MAX(ra, 0), MAX_MS);
    e->retry_after_ms = *after_ms;
    if (cls == TETHER_CLASS_TRANSIENT)
        BUMP(x->r, transient, 1);
    else if (cls == TETHER_CLASS_THROTTLED)
        BUMP(x->r, throttled, 1);
    else
        BUMP(x->r, permanent, 1);
    return cls;
}

/* early_stop applies the checks that need no pause, in order. */
static tether_stop early_stop(const run_state *x, tether_class cls) {
    if (cls == TETHER_CLASS_PERMANENT)
        return TETHER_STOP_PERMANENT;
    if (x->nested)
        return TETHER_STOP_NESTED;
    if (x->attempts >= x->o->max_attempts)
        return TETHER_STOP_ATTEMPTS;
    if (!(x->flags & TETHER_IDEMPOTENT) && !x->err->not_sent)
        return TETHER_STOP_NOT_IDEMPOTENT;
    return TETHER_STOP_NONE;
}

static uint64_t mix_seed(uint64_t seed, uint64_t seq) {
    uint64_t z = seed + (seq + 1) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z ? z : 1;
}

/* next_pause draws the pause before the next attempt: the backoff's, or
 * the server's suggestion when longer. TETHER_EEXHAUSTED when the schedule
 * has no further attempt. */
static int next_pause(run_state *x, tether_class cls, int64_t after_ms,
                      int64_t *pause_ms) {
    const tether_backoff_opts *bo = &x->o->backoff;
    if (!x->bo_ready) {
        tether__backoff_init(&x->bo, bo); /* seed 0: from the system */
        if (bo->seed != 0)
            tether__rng_seed(&x->bo.rng, mix_seed(bo->seed, x->seq));
        x->bo_ready = 1;
    }
    int64_t d = 0;
    int rc = tether__backoff_next(bo, &x->bo, cls, &d);
    if (rc != 0)
        return rc;
    *pause_ms = TETHER__MIN(TETHER__MAX(d, after_ms), MAX_MS);
    return 0;
}

/* overruns says whether pausing pause_ms from now would leave less than
 * 1 ms for another attempt before the deadline. */
static int overruns(run_state *x, int64_t pause_ms) {
    if (!x->has_deadline)
        return 0;
    int64_t left = x->deadline_ns - clock_ns(x);
    return left - pause_ms * TETHER__NS_PER_MS < TETHER__NS_PER_MS;
}

/* budget_stop ends the run on a spent budget: EBUDGET, with the last
 * failure's message kept after the explanation. */
static int budget_stop(run_state *x) {
    tether_error *e = x->err;
    char last[TETHER_MSG_MAX];
    memcpy(last, e->message, sizeof(last));
    last[sizeof(last) - 1] = '\0';
    e->code = TETHER_EBUDGET;
    snprintf(e->message, sizeof(e->message),
             "retry budget exhausted after attempt %d: %.200s", x->attempts,
             last);
    return give_up(x, TETHER_EBUDGET, TETHER_STOP_BUDGET);
}

/* take_budget pays for the next retry; returns 0 or TETHER_EBUDGET. */
static int take_budget(run_state *x) {
    if (!x->o->budget)
        return 0;
    int timeout =
        x->last_rc == TETHER_ETIMEDOUT || x->err->code == TETHER_ETIMEDOUT;
    int cost = tether_budget_withdraw(x->o->budget, timeout);
    if (cost < 0)
        return TETHER_EBUDGET;
    x->cost = cost;
    return 0;
}

/* wait_retry reports the coming retry (hook, warning) and waits. */
static void wait_retry(run_state *x, tether_class cls, int64_t pause_ms) {
    tether_retry_event ev;
    ev.attempt = x->attempts;
    ev.delay_ms = pause_ms;
    ev.elapsed_ms = elapsed_ms(x);
    ev.cls = cls;
    ev.error = x->err;
    if (x->o->on_retry)
        x->o->on_retry(x->o->on_retry_ctx, &ev);
    tether__log(x->o->log, x->o->log_ctx, TETHER_LOG_WARN,
                "retry: attempt %d failed after %lld ms (%s, %s): %s; "
                "retrying in %lld ms",
                ev.attempt, (long long)ev.elapsed_ms, tether_class_name(cls),
                tether_errname(x->err->code), x->err->message,
                (long long)pause_ms);
    BUMP(x->r, retries, 1);
    BUMP(x->r, delay_ms_total, pause_ms);
    if (pause_ms > 0)
        x->o->clock->sleep_ns(x->o->clock->ctx, pause_ms * TETHER__NS_PER_MS);
}

/* after_failure decides whether to go again (returns 0, having paused) or
 * to stop (returns the run's final, negative code). */
static int after_failure(run_state *x, int rc) {
    int64_t after_ms = 0, pause_ms = 0;
    x->last_rc = rc;
    tether_class cls = classify(x, &after_ms);
    if (x->o->breaker)
        tether_breaker_record(x->o->breaker, x->permit, 0, x->err);
    tether_stop stop = early_stop(x, cls);
    if (stop != TETHER_STOP_NONE)
        return give_up(x, rc, stop);
    if (next_pause(x, cls, after_ms, &pause_ms) != 0)
        return give_up(x, rc, TETHER_STOP_ATTEMPTS);
    if (overruns(x, pause_ms))
        return give_up(x, rc, TETHER_STOP_DEADLINE);
    if (take_budget(x) != 0)
        return budget_stop(x);
    wait_retry(x, cls, pause_ms);
    return 0;
}

static int run_loop(run_state *x) {
    for (;;) {
        int rc = admit(x);
        if (rc < 0)
            return rc;
        rc = attempt(x);
        if (rc >= 0)
            return succeed(x);
        rc = after_failure(x, rc);
        if (rc < 0)
            return rc;
    }
}

/* Limits from which run_fast starts its clock from the coarse word. */
#define COARSE_START_MIN_MS 1000

/* run_fast makes the first attempt of an outermost run on a policy with
 * no breaker and the real clock, without the run state: on success it
 * costs one clock read (the attempt's deadline) and one counter. Its
 * elapsed_ms comes from the core ticker's coarse word, read at both ends:
 * a precise read after the attempt finds the clock's lines cold after
 * the work's round trip and cost ~180 cycles, a sixth of the pool's whole
 * per-statement cost (docs/pool.md). A failure hands over to the full
 * loop in x, as if that attempt had been made by it. timeout_ms is the
 * caller's limit (-1: the policy's deadline only). */
TETHER__HOT static int run_fast(run_state *x, tether_retry *r, unsigned flags,
                                int64_t timeout_ms, tether_op_fn fn, void *arg,
                                tether_error *err) {
    int64_t tick = tether__ticker_ms();
    int64_t limit = run_limit_ms(r, timeout_ms);
    /* The run's start: the coarse word when the limit is long (or none),
     * which puts the deadline at most a tick and a jiffy (~15 ms) early,
     * never late; a precise read only for a short limit, where that would
     * show. The precise read cost ~60 ns a statement (cold after the
     * previous statement's round trip; docs/pool.md). */
    int64_t start = limit < 0 || limit >= COARSE_START_MIN_MS
                        ? tick * TETHER__NS_PER_MS
                        : tether__mono_ns();
    tether__attempt ax = {
        {1,
         timeout_ms < 0 ? r->first_timeout_ms
                        : attempt_timeout(r->attempt_timeout_ms, limit),
         -1},
        limit >= 0 && limit < COARSE_START_MIN_MS ? start /* a precise read */
                                                  : -1};
    tether_attempt *a = &ax.a;
    if (limit >= 0)
        a->deadline_ms =
            (start + limit * TETHER__NS_PER_MS) / TETHER__NS_PER_MS;
    int rc = fn(arg, a, err);
    if (rc >= 0) {
        if (r->budget)
            tether_budget_success(r->budget, 0);
        tether_error_clear(err);
        err->attempts = 1;
        int64_t took = tether__ticker_ms() - tick; /* < 0 if the ticker */
        err->elapsed_ms = took > 0 ? took : 0;     /* stopped meanwhile */
        BUMP(r, quick, 1);
        return 0;
    }
    run_init(x, r, flags, fn, arg, err, start, limit, 0);
    x->attempts = 1;
    x->permit = TETHER_PERMIT_CALL;
    BUMP(r, attempts, 1);
    rc = after_failure(x, failed(x, rc));
    return rc < 0 ? rc : run_loop(x);
}

TETHER__HOT int tether_retry_run_for(tether_retry *r, unsigned flags,
                                     int64_t timeout_ms, tether_op_fn fn,
                                     void *arg, tether_error *err) {
    tether_error scratch;
    if (!r || !fn)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "retry: %s is NULL", r ? "fn" : "policy");
    if (timeout_ms < -1)
        return bad(err, "timeout_ms", (long long)timeout_ms,
                   "want -1 (the policy's deadline) or >= 0");
    if (!err)
        err = &scratch;
    tether_error_clear(err);
    run_state x;
    int rc;
    if (r->fast && run_depth == 0) {
        run_depth++;
        rc = run_fast(&x, r, flags, timeout_ms, fn, arg, err);
    } else {
        run_init(&x, r, flags, fn, arg, err,
                 r->o.clock->now_ns(r->o.clock->ctx),
                 run_limit_ms(r, timeout_ms), run_depth > 0);
        run_depth++;
        rc = run_loop(&x);
    }
    run_depth--;
    return rc;
}

TETHER__HOT int tether_retry_run(tether_retry *r, unsigned flags,
                                 tether_op_fn fn, void *arg,
                                 tether_error *err) {
    return tether_retry_run_for(r, flags, -1, fn, arg, err);
}
