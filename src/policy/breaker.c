/* breaker.c - the circuit breaker (docs/breaker.md). Two ways to trip: N
 * consecutive failures, or a failure ratio over a sliding window (NBUCKETS
 * time buckets) once a minimum number of calls was seen. While open,
 * callers fail at once with the last recorded error; after the open period
 * one probe goes through (half-open) and its outcome closes the breaker or
 * reopens it with a period grown by `growth` up to max_open_ms (SqlClient's
 * blocking period is the "blocking-period" preset).
 *
 * One mutex guards the state; critical sections only update counters.
 * The state is mirrored in an atomic so allow() on a closed breaker takes
 * no lock. State-change callbacks are queued under the lock and delivered
 * in order, outside it, by whichever thread finds the queue idle: a
 * callback may call back into the breaker (even change its state). */
#include "breaker.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 10

/* One slice of the ratio window: the outcomes recorded during epoch
 * (now / width). */
typedef struct bucket {
    int64_t epoch;
    int calls;
    int failures;
} bucket;

/* A state change waiting for its callback. */
#define QUEUE_MIN                                                              \
    8 /* state changes queued at create: no allocation later                   \
         unless callbacks fall further behind */

typedef struct transition {
    tether_breaker_state from;
    tether_breaker_state to;
    int64_t period_ms;
} transition;

struct tether_breaker {
    pthread_mutex_t lock;
    tether_breaker_opts o;
    _Atomic int state; /* tether_breaker_state; written under lock */
    int consecutive;   /* failures in a row while closed */
    int64_t opened_at; /* start of the open period (ms) */
    int64_t period;    /* current or last open period; 0: never opened */
    int64_t hold;      /* this open's length: period less its jitter */
    tether__rng rng;   /* the jitter's draws (under lock) */
    int64_t probe_at;  /* when the half-open probe was let through */
    int64_t width;     /* ms per bucket */
    bucket win[NBUCKETS];
    int has_last; /* last holds a recorded failure */
    tether_error last;
    transition *q; /* pending callbacks: q[qhead..qlen) */
    int qhead, qlen, qcap;
    int draining; /* a thread is delivering callbacks */
};

const char *tether_breaker_state_name(tether_breaker_state s) {
    switch (s) {
    case TETHER_BREAKER_CLOSED:
        return "closed";
    case TETHER_BREAKER_OPEN:
        return "open";
    case TETHER_BREAKER_HALF_OPEN:
        return "half-open";
    case TETHER_BREAKER_ISOLATED:
        return "isolated";
    default:
        return "unknown";
    }
}

/* breaker_defaults fills a whole tether_breaker_opts with the defaults. */
static void breaker_defaults(tether_breaker_opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->mode = TETHER_BREAKER_CONSECUTIVE;
    o->failures = 5;
    o->ratio = 0.5;
    o->window_ms = 30000;
    o->min_calls = 20;
    o->open_ms = 5000;
    o->max_open_ms = 60000;
    o->growth = 2.0;
}

void tether_breaker_opts_init_sized(tether_breaker_opts *o, size_t size) {
    tether_breaker_opts d;
    breaker_defaults(&d);
    tether__sized_out(o, size, &d, sizeof(d));
}

static int breaker_preset(const char *name, tether_breaker_opts *o,
                          tether_error *err) {
    if (!name || strcmp(name, "blocking-period") != 0)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                "unknown breaker preset \"%.40s\" (want "
                                "blocking-period)",
                                name ? name : "(null)");
    /* Tuned with `tether sim storm` for fleets (docs/backoff.md): a check
     * within a second of the first failure (a blip), then one probe every
     * 7.5 to 15 s, the jitter spreading clients that failed together. */
    tether_breaker_opts_init(o);
    o->mode = TETHER_BREAKER_CONSECUTIVE;
    o->failures = 1;
    o->open_ms = 1000;
    o->growth = 15.0;
    o->max_open_ms = 15000;
    o->jitter = 0.5;
    return 0;
}

int tether_breaker_preset_sized(const char *name, tether_breaker_opts *o,
                                size_t size, tether_error *err) {
    if (!name || !o)
        return tether__null(err, "tether_breaker_preset", name ? "o" : "name");
    tether_breaker_opts full;
    int rc = breaker_preset(name, &full, err);
    if (rc == 0)
        tether__sized_out(o, size, &full, sizeof(full));
    return rc;
}

/* ---- validation ------------------------------------------------------ */

static int bad_int(tether_error *err, const char *field, long long v,
                   const char *why) {
    return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                            "breaker: bad %s = %lld: %s", field, v, why);
}

static int bad_dbl(tether_error *err, const char *field, double v,
                   const char *why) {
    return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                            "breaker: bad %s = %g: %s", field, v, why);
}

static int validate_trip(const tether_breaker_opts *o, tether_error *err) {
    if (o->mode != TETHER_BREAKER_CONSECUTIVE &&
        o->mode != TETHER_BREAKER_RATIO)
        return bad_int(err, "mode", o->mode, "must be consecutive or ratio");
    if (o->failures < 1)
        return bad_int(err, "failures", o->failures, "must be >= 1");
    if (!(o->ratio > 0.0 && o->ratio <= 1.0))
        return bad_dbl(err, "ratio", o->ratio, "must be in (0, 1]");
    if (o->window_ms < NBUCKETS)
        return bad_int(err, "window_ms", o->window_ms, "must be >= 10");
    if (o->min_calls < 1)
        return bad_int(err, "min_calls", o->min_calls, "must be >= 1");
    return 0;
}

static int validate_open(const tether_breaker_opts *o, tether_error *err) {
    if (o->open_ms <= 0)
        return bad_int(err, "open_ms", o->open_ms, "must be > 0");
    if (o->max_open_ms < o->open_ms)
        return bad_int(err, "max_open_ms", o->max_open_ms,
                       "must be >= open_ms");
    if (!(o->growth >= 1.0) || !isfinite(o->growth))
        return bad_dbl(err, "growth", o->growth, "must be >= 1");
    if (!(o->jitter >= 0.0 && o->jitter <= 1.0))
        return bad_dbl(err, "jitter", o->jitter, "must be in [0, 1]");
    return 0;
}

/* ---- create / destroy ------------------------------------------------ */

static void window_clear(tether_breaker *b) {
    for (int i = 0; i < NBUCKETS; i++)
        b->win[i] = (bucket){INT64_MIN, 0, 0};
}

int tether_breaker_create(tether_breaker **out, const tether_breaker_opts *o,
                          tether_error *err) {
    tether_breaker_opts defaults;
    if (!out)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "breaker: out is NULL");
    *out = NULL;
    breaker_defaults(&defaults);
    int rc = TETHER__SIZED_IN(defaults, o, "tether_breaker_opts", err);
    if (rc)
        return rc;
    o = &defaults;
    rc = validate_trip(o, err);
    if (!rc)
        rc = validate_open(o, err);
    if (rc)
        return rc;
    tether_breaker *b = tether__calloc(1, sizeof(*b));
    if (b) /* room for the state changes not yet told (enqueue) */
        b->q = tether__calloc(QUEUE_MIN, sizeof(*b->q));
    if (!b || !b->q || pthread_mutex_init(&b->lock, NULL) != 0) {
        if (b)
            tether__free(b->q);
        tether__free(b);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "breaker: out of memory");
    }
    b->qcap = QUEUE_MIN;
    b->o = *o;
    tether__rng_seed(&b->rng, o->seed);
    atomic_init(&b->state, TETHER_BREAKER_CLOSED);
    b->width = o->window_ms / NBUCKETS;
    window_clear(b);
    *out = b;
    return 0;
}

void tether_breaker_destroy(tether_breaker *b) {
    if (!b)
        return;
    pthread_mutex_destroy(&b->lock);
    tether__free(b->q);
    tether__free(b);
}

/* ---- state changes and their callbacks -------------------------------- */

static void enqueue(tether_breaker *b, transition t) {
    if (b->qlen == b->qcap && b->qhead > 0) {
        memmove(b->q, b->q + b->qhead,
                (size_t)(b->qlen - b->qhead) * sizeof(*b->q));
        b->qlen -= b->qhead;
        b->qhead = 0;
    }
    if (b->qlen == b->qcap) {
        int cap = b->qcap * 2; /* create allocated QUEUE_MIN */
        transition *q = tether__realloc(b->q, (size_t)cap * sizeof(*q));
        if (!q) { /* out of memory: fold t into the last one not told */
            transition *last = &b->q[b->qlen - 1];
            last->to = t.to;
            last->period_ms = t.period_ms;
            if (last->from == last->to)
                b->qlen--; /* back where it was: nothing to tell */
            return;
        }
        b->q = q;
        b->qcap = cap;
    }
    b->q[b->qlen++] = t;
}

/* set_state changes the state (lock held) and queues the callback. */
static void set_state(tether_breaker *b, tether_breaker_state to) {
    tether_breaker_state from =
        atomic_load_explicit(&b->state, memory_order_relaxed);
    if (from == to)
        return;
    atomic_store_explicit(&b->state, to, memory_order_release);
    enqueue(b, (transition){from, to, b->period});
}

static void notify(tether_breaker *b, const transition *t) {
    if (t->to == TETHER_BREAKER_OPEN)
        tether__log(NULL, NULL, TETHER_LOG_WARN,
                    "circuit breaker %s -> open for %lld ms",
                    tether_breaker_state_name(t->from),
                    (long long)t->period_ms);
    else
        tether__log(NULL, NULL, TETHER_LOG_INFO, "circuit breaker %s -> %s",
                    tether_breaker_state_name(t->from),
                    tether_breaker_state_name(t->to));
    if (b->o.on_state)
        b->o.on_state(b->o.on_state_ctx, t->from, t->to);
}

/* unlock releases the lock; if callbacks are pending and nobody delivers
 * them, this thread does, in order, with the lock released around each. */
static void unlock(tether_breaker *b) {
    int deliver = b->qhead < b->qlen && !b->draining;
    b->draining |= deliver;
    while (deliver && b->qhead < b->qlen) {
        transition t = b->q[b->qhead++];
        if (b->qhead == b->qlen)
            b->qhead = b->qlen = 0;
        pthread_mutex_unlock(&b->lock);
        notify(b, &t);
        pthread_mutex_lock(&b->lock);
    }
    if (deliver)
        b->draining = 0;
    pthread_mutex_unlock(&b->lock);
}

static void open_now(tether_breaker *b, int64_t now, int64_t period) {
    b->period = period;
    b->hold = period;
    if (b->o.jitter > 0.0)
        b->hold -= tether__rng_range(&b->rng, 0,
                                     (int64_t)((double)period * b->o.jitter));
    b->opened_at = now;
    b->consecutive = 0;
    set_state(b, TETHER_BREAKER_OPEN);
}

static void close_now(tether_breaker *b) {
    b->consecutive = 0;
    b->period = b->o.open_ms;
    window_clear(b);
    set_state(b, TETHER_BREAKER_CLOSED);
}

/* ---- the ratio window ------------------------------------------------- */

static int64_t epoch_of(const tether_breaker *b, int64_t now) {
    int64_t e = now / b->width;
    return (now < 0 && now % b->width) ? e - 1 : e;
}

static void window_add(tether_breaker *b, int64_t now, int ok) {
    int64_t e = epoch_of(b, now);
    bucket *s = &b->win[((e % NBUCKETS) + NBUCKETS) % NBUCKETS];
    if (s->epoch != e)
        *s = (bucket){e, 0, 0};
    s->calls++;
    s->failures += !ok;
}

/* tripped says whether the window's failure ratio opens the breaker. */
static int tripped(const tether_breaker *b, int64_t now) {
    int64_t e = epoch_of(b, now);
    int calls = 0, failures = 0;
    for (int i = 0; i < NBUCKETS; i++) {
        if (b->win[i].epoch > e - NBUCKETS && b->win[i].epoch <= e) {
            calls += b->win[i].calls;
            failures += b->win[i].failures;
        }
    }
    return calls >= b->o.min_calls &&
           (double)failures / (double)calls >= b->o.ratio;
}

/* ---- allow / record --------------------------------------------------- */

static void cache_failure(tether_breaker *b, const tether_error *err) {
    if (!err) {
        b->has_last = 0;
        return;
    }
    tether_error *l = &b->last;
    tether_error_clear(l);
    l->code = err->code ? err->code : TETHER_EFAILED;
    l->cls = err->cls;
    memcpy(l->sqlstate, err->sqlstate, sizeof(l->sqlstate));
    l->sqlstate[sizeof(l->sqlstate) - 1] = '\0';
    memcpy(l->message, err->message, sizeof(l->message));
    l->message[sizeof(l->message) - 1] = '\0';
    b->has_last = 1;
}

/* fail_fast fills err for a refused call: TETHER_EOPEN, saying when the
 * next probe may go, with the last failure as recorded (its code in
 * cause, its class and SQLSTATE, its message after the breaker's). */
static void fail_fast(const tether_breaker *b, int64_t now, tether_error *err) {
    if (!err)
        return;
    int64_t wait = TETHER__MAX(b->hold - (now - b->opened_at), 0);
    char head[64];
    if (atomic_load_explicit(&b->state, memory_order_relaxed) ==
        TETHER_BREAKER_ISOLATED)
        snprintf(head, sizeof(head), "isolated (open until reset)");
    else
        snprintf(head, sizeof(head), "open, next probe in %lld ms",
                 (long long)wait);
    if (!b->has_last)
        tether_error_set(err, TETHER_EOPEN, TETHER_CLASS_TRANSIENT,
                         "circuit breaker is %s", head);
    else
        tether_error_set(err, TETHER_EOPEN, b->last.cls,
                         "circuit breaker is %s; last failure: %s: %s", head,
                         tether_errname(b->last.code), b->last.message);
    size_t len = strlen(err->message);
    if (len == sizeof(err->message) - 1) /* cut: say so */
        memcpy(err->message + len - 3, "...", 3);
    if (b->has_last) {
        err->cause = b->last.code;
        memcpy(err->sqlstate, b->last.sqlstate, sizeof(err->sqlstate));
    }
    err->not_sent = 1; /* the call was never made */
}

/* admit decides a call while not closed (lock held). A probe that never
 * reports back would keep the breaker half-open forever, so after a whole
 * open period without an answer the next caller becomes the new probe. */
static int admit(tether_breaker *b, int64_t now) {
    switch ((tether_breaker_state)atomic_load_explicit(&b->state,
                                                       memory_order_relaxed)) {
    case TETHER_BREAKER_CLOSED:
        return TETHER_PERMIT_CALL;
    case TETHER_BREAKER_OPEN:
        if (now - b->opened_at < b->hold)
            return TETHER_EOPEN;
        b->probe_at = now;
        set_state(b, TETHER_BREAKER_HALF_OPEN);
        return TETHER_PERMIT_PROBE;
    case TETHER_BREAKER_HALF_OPEN:
        if (now - b->probe_at < b->period)
            return TETHER_EOPEN;
        b->probe_at = now;
        return TETHER_PERMIT_PROBE;
    default:
        return TETHER_EOPEN;
    }
}

int tether_breaker_allow(tether_breaker *b, tether_error *err) {
    if (!b)
        return tether__null(err, "tether_breaker_allow", "b");
    if (atomic_load_explicit(&b->state, memory_order_acquire) ==
        TETHER_BREAKER_CLOSED)
        return TETHER_PERMIT_CALL;
    int64_t now = tether__now_ms(b->o.clock);
    pthread_mutex_lock(&b->lock);
    int rc = admit(b, now);
    if (rc == TETHER_EOPEN)
        fail_fast(b, now, err);
    unlock(b);
    return rc;
}

/* count_closed records an outcome while closed and trips if due. */
static void count_closed(tether_breaker *b, int64_t now, int ok) {
    if (b->o.mode == TETHER_BREAKER_CONSECUTIVE) {
        b->consecutive = ok ? 0 : b->consecutive + 1;
        if (b->consecutive >= b->o.failures)
            open_now(b, now, b->o.open_ms);
        return;
    }
    window_add(b, now, ok);
    if (!ok && tripped(b, now))
        open_now(b, now, b->o.open_ms);
}

/* A failed probe grows the period by growth; a probe refused as busy
 * (throttled: the server is up) at most doubles it, so a caller waiting
 * for a free slot is not held for the down growth. */
static double growth_for(const tether_breaker *b, const tether_error *err) {
    if (err && err->cls == TETHER_CLASS_THROTTLED && b->o.growth > 2.0)
        return 2.0;
    return b->o.growth;
}

void tether_breaker_record(tether_breaker *b, int permit, int ok,
                           const tether_error *err) {
    if (!b)
        return;
    int64_t now = tether__now_ms(b->o.clock);
    pthread_mutex_lock(&b->lock);
    tether_breaker_state s = (tether_breaker_state)atomic_load_explicit(
        &b->state, memory_order_relaxed);
    if (!ok && err && err->code == TETHER_ENOMEM) {
        /* Out of memory here says nothing of the other side: not a
         * failure, and a probe that hit it decides nothing (the next
         * caller probes at once). */
        if (permit == TETHER_PERMIT_PROBE && s == TETHER_BREAKER_HALF_OPEN)
            b->probe_at = now - b->period;
        unlock(b);
        return;
    }
    if (!ok)
        cache_failure(b, err);
    if (s == TETHER_BREAKER_CLOSED) {
        count_closed(b, now, ok);
    } else if (permit == TETHER_PERMIT_PROBE && s == TETHER_BREAKER_HALF_OPEN) {
        if (ok)
            close_now(b);
        else
            open_now(b, now,
                     tether__mul_sat(b->period, growth_for(b, err),
                                     b->o.max_open_ms));
    } else if (b->o.mode == TETHER_BREAKER_RATIO) {
        window_add(b, now, ok); /* late outcome: counted, no state change */
    }
    unlock(b);
}

int tether__breaker_last(tether_breaker *b, tether_error *out) {
    pthread_mutex_lock(&b->lock);
    int has = b->has_last;
    if (has)
        *out = b->last;
    pthread_mutex_unlock(&b->lock);
    return has;
}

void tether__breaker_probe_void(tether_breaker *b) {
    int64_t now = tether__now_ms(b->o.clock);
    pthread_mutex_lock(&b->lock);
    if (atomic_load_explicit(&b->state, memory_order_relaxed) ==
        TETHER_BREAKER_HALF_OPEN)
        b->probe_at = now - b->period;
    pthread_mutex_unlock(&b->lock);
}

/* ---- inspection and manual control ------------------------------------ */

int64_t tether__breaker_blocked_ms(tether_breaker *b, tether_class *last) {
    if (last)
        *last = TETHER_CLASS_NONE;
    if (atomic_load_explicit(&b->state, memory_order_acquire) ==
        TETHER_BREAKER_CLOSED)
        return 0;
    int64_t now = tether__now_ms(b->o.clock);
    pthread_mutex_lock(&b->lock);
    int64_t left;
    switch ((tether_breaker_state)atomic_load_explicit(&b->state,
                                                       memory_order_relaxed)) {
    case TETHER_BREAKER_OPEN:
        left = b->hold - (now - b->opened_at);
        break;
    case TETHER_BREAKER_HALF_OPEN:
        left = b->period - (now - b->probe_at);
        break;
    case TETHER_BREAKER_CLOSED:
        left = 0;
        break;
    default: /* isolated: until reset */
        left = INT64_MAX;
    }
    if (last && b->has_last)
        *last = b->last.cls;
    pthread_mutex_unlock(&b->lock);
    return left > 0 ? left : 0;
}

tether_breaker_state tether_breaker_state_get(tether_breaker *b) {
    if (!b)
        return TETHER_BREAKER_CLOSED;
    return (tether_breaker_state)atomic_load_explicit(&b->state,
                                                      memory_order_acquire);
}

int64_t tether_breaker_open_ms(tether_breaker *b) {
    if (!b)
        return 0;
    pthread_mutex_lock(&b->lock);
    int64_t period = b->period;
    pthread_mutex_unlock(&b->lock);
    return period;
}

void tether_breaker_isolate(tether_breaker *b) {
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    set_state(b, TETHER_BREAKER_ISOLATED);
    unlock(b);
}

void tether_breaker_reset(tether_breaker *b) {
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    b->consecutive = 0;
    b->has_last = 0;
    if (b->period)
        b->period = b->o.open_ms;
    window_clear(b);
    set_state(b, TETHER_BREAKER_CLOSED);
    unlock(b);
}
