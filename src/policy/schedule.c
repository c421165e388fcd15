/* schedule.c - connection schedules: the timing of tether's connector as a
 * pure state machine (sans I/O). The caller asks for the next step at its
 * own clock's time, performs it (an attempt, a pause, a provisioning call),
 * reports provisioning outcomes and asks again.
 *
 *   mirroring  (SqlClient's LoginWithFailover; docs/schedules.md,
 *              "Mirroring"): principal and partner alternate; attempt n
 *              gets 0.08 x LoginTimeout x (n/2 + 1), capped by the time
 *              left; after every pair a pause of 100, 200, 400, 800 ms,
 *              then 1 s; a pause that would reach the login timeout ends
 *              the loop.
 *   sequential every host, each of its ports, then a backoff pause and a
 *              new pass (docs/schedules.md, "Sequential").
 *   streaming  (docs/schedules.md, "Streaming"): a random 1-5 s delay,
 *              provisioning (the delay doubles up to 60 s on failure),
 *              every host and port, then the delay doubles and
 *              provisioning starts over.
 *
 * See docs/schedules.md. */
#include "backoff.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MIRROR_UNIT_PERMILLE 80       /* 8 % of the login timeout */
#define MIRROR_INFINITE_BASE_MS 15000 /* unit base when infinite */
#define MIRROR_FIRST_PAUSE_MS 100
#define MIRROR_PAUSE_DOUBLE_BELOW_MS 500
#define MIRROR_LAST_PAUSE_MS 1000
#define STREAM_MIN_DELAY_MS 1000
#define STREAM_MAX_START_MS 5000
#define STREAM_CAP_MS 60000

/* Streaming phases: what the next call to next() does. */
enum stream_phase {
    ST_START,     /* the initial random wait (or straight to provisioning) */
    ST_PROVISION, /* ask for the host list */
    ST_REPORT,    /* provisioning was issued: act on its report */
    ST_ATTEMPTS,  /* walk the hosts and their ports */
    ST_END_PASS   /* the list is exhausted: double, pause, provision */
};

struct tether_schedule {
    tether_schedule_opts o;
    int64_t deadline_ms;      /* -1: no login timeout */
    int64_t unit_ms;          /* mirroring: 8 % of the login timeout */
    tether__backoff_state bo; /* sequential: pauses between passes */
    tether__rng rng;          /* streaming: the initial delay */
    int done;
    int attempts;     /* attempts issued so far */
    int round;        /* current pass, from 1 */
    int host, port;   /* position of the next attempt in the pass */
    int nhosts;       /* current host list size */
    int pause_due;    /* mirroring, sequential: a pause comes next */
    int64_t delay_ms; /* mirroring: next pause; streaming: retry delay */
    enum stream_phase phase;
    int prov_ok; /* streaming: last provisioning report */
};

/* schedule_defaults fills a whole tether_schedule_opts with the defaults. */
static void schedule_defaults(tether_schedule_opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->strategy = TETHER_STRATEGY_SEQUENTIAL;
    o->login_timeout_ms = 15000;
    o->nhosts = 1;
    o->nports = 1;
    o->attempt_timeout_ms = 0;
    tether_backoff_opts_init(&o->backoff);
    o->initial_wait = 1;
    o->seed = 0;
}

void tether_schedule_opts_init_sized(tether_schedule_opts *o, size_t size) {
    tether_schedule_opts d;
    schedule_defaults(&d);
    tether__sized_out(o, size, &d, sizeof(d));
}

static int bad(tether_error *err, const char *field, long long value,
               const char *why) {
    return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                            "schedule: bad %s = %lld: %s", field, value, why);
}

static int validate(const tether_schedule_opts *o, tether_error *err) {
    if (!o)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "schedule: options are NULL");
    if ((unsigned)o->strategy > TETHER_STRATEGY_RACE)
        return bad(err, "strategy", o->strategy, "unknown strategy");
    if (o->nhosts < 1)
        return bad(err, "nhosts", o->nhosts, "must be >= 1");
    if (o->nports < 1)
        return bad(err, "nports", o->nports, "must be >= 1");
    if (o->login_timeout_ms <= 0 && o->login_timeout_ms != -1)
        return bad(err, "login_timeout_ms", o->login_timeout_ms,
                   "must be > 0, or -1 for infinite");
    if (o->attempt_timeout_ms < 0)
        return bad(err, "attempt_timeout_ms", o->attempt_timeout_ms,
                   "must be >= 0 (0 = the rest of the login timeout)");
    return tether_backoff_validate(&o->backoff, err);
}

static void init_state(tether_schedule *s, int64_t now_ms) {
    const tether_schedule_opts *o = &s->o;
    int64_t login = o->login_timeout_ms;
    if (login < 0)
        s->deadline_ms = -1;
    else
        s->deadline_ms =
            now_ms > INT64_MAX - login ? INT64_MAX : now_ms + login;
    int64_t base = login < 0 ? MIRROR_INFINITE_BASE_MS : login;
    s->unit_ms = base / 1000 * MIRROR_UNIT_PERMILLE +
                 base % 1000 * MIRROR_UNIT_PERMILLE / 1000;
    s->round = 1;
    s->nhosts = o->nhosts;
    /* The backoff's own seed wins; else the schedule's (0: system). */
    tether_backoff_opts bo = o->backoff;
    if (bo.seed == 0)
        bo.seed = o->seed;
    tether__backoff_init(&s->bo, &bo);
    tether__rng_seed(&s->rng, o->seed);
    if (o->strategy == TETHER_STRATEGY_MIRRORING)
        s->delay_ms = MIRROR_FIRST_PAUSE_MS;
    else if (o->strategy == TETHER_STRATEGY_STREAMING)
        s->delay_ms = tether__rng_range(&s->rng, STREAM_MIN_DELAY_MS,
                                        STREAM_MAX_START_MS);
    s->phase = ST_START;
}

int tether_schedule_create(tether_schedule **out, const tether_schedule_opts *o,
                           int64_t now_ms, tether_error *err) {
    if (!out)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "schedule: out is NULL");
    *out = NULL;
    tether_schedule_opts full;
    schedule_defaults(&full);
    if (!o)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "schedule: options are NULL");
    int rc = TETHER__SIZED_IN(full, o, "tether_schedule_opts", err);
    if (rc)
        return rc;
    o = &full;
    rc = validate(o, err);
    if (rc)
        return rc;
    tether_schedule *s = tether__calloc(1, sizeof(*s));
    if (!s)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    s->o = *o;
    init_state(s, now_ms);
    *out = s;
    return 0;
}

void tether_schedule_destroy(tether_schedule *s) {
    tether__free(s);
}

/* ---- step builders ----------------------------------------------------- */

/* Time left before the login timeout; INT64_MAX when there is none. */
static int64_t remaining(const tether_schedule *s, int64_t now_ms) {
    return s->deadline_ms < 0 ? INT64_MAX : s->deadline_ms - now_ms;
}

static void emit(tether_schedule *s, tether_step_kind kind, tether_step *st) {
    memset(st, 0, sizeof(*st));
    st->kind = kind;
    st->attempt = s->attempts;
    st->round = s->round;
}

static void emit_done(tether_schedule *s, tether_step *st) {
    s->done = 1;
    emit(s, TETHER_STEP_DONE, st);
}

/* A pause of d ms, or DONE when it would reach the login timeout. */
static void emit_pause(tether_schedule *s, int64_t now_ms, int64_t d,
                       tether_step *st) {
    if (s->deadline_ms >= 0 && remaining(s, now_ms) <= d) {
        emit_done(s, st);
        return;
    }
    emit(s, TETHER_STEP_PAUSE, st);
    st->delay_ms = d;
}

static void emit_attempt(tether_schedule *s, int host, int port,
                         int64_t budget_ms, tether_step *st) {
    if (s->attempts < INT_MAX)
        s->attempts++;
    emit(s, TETHER_STEP_ATTEMPT, st);
    st->host = host;
    st->port = port;
    st->budget_ms = budget_ms;
}

/* Sequential and streaming budget: the attempt timeout if any, capped by
 * the time left; -1 when neither bounds it. */
static int64_t plain_budget(const tether_schedule *s, int64_t now_ms) {
    int64_t b = s->o.attempt_timeout_ms > 0 ? s->o.attempt_timeout_ms : -1;
    if (s->deadline_ms < 0)
        return b;
    int64_t left = remaining(s, now_ms);
    return b < 0 ? left : TETHER__MIN(b, left);
}

/* Emits the attempt at the current (host, port) and moves on; returns 1
 * when that attempt ended the pass over hosts and ports. */
static int walk_attempt(tether_schedule *s, int64_t now_ms, tether_step *st) {
    emit_attempt(s, s->host, s->port, plain_budget(s, now_ms), st);
    if (++s->port < s->o.nports)
        return 0;
    s->port = 0;
    if (++s->host < s->nhosts)
        return 0;
    s->host = 0;
    return 1;
}

/* ---- mirroring --------------------------------------------------------- */

static void next_mirroring(tether_schedule *s, int64_t now_ms,
                           tether_step *st) {
    if (s->pause_due) {
        s->pause_due = 0;
        emit_pause(s, now_ms, s->delay_ms, st);
        st->round = s->attempts / 2;
        s->delay_ms = s->delay_ms < MIRROR_PAUSE_DOUBLE_BELOW_MS
                          ? s->delay_ms * 2
                          : MIRROR_LAST_PAUSE_MS;
        return;
    }
    int64_t left = remaining(s, now_ms);
    if (left <= 0) {
        emit_done(s, st);
        return;
    }
    int n = s->attempts; /* 0-based index of this attempt */
    int64_t budget =
        tether__mul_sat(s->unit_ms, (double)(n / 2 + 1), INT64_MAX / 2);
    s->round = n / 2 + 1;
    emit_attempt(s, s->nhosts > 1 ? n % 2 : 0, 0, TETHER__MIN(budget, left),
                 st);
    if (s->attempts % 2 == 0)
        s->pause_due = 1;
}

/* ---- sequential -------------------------------------------------------- */

static void next_sequential(tether_schedule *s, int64_t now_ms,
                            tether_step *st) {
    if (s->pause_due) {
        int64_t d;
        s->pause_due = 0;
        if (tether__backoff_next(&s->o.backoff, &s->bo, TETHER_CLASS_TRANSIENT,
                                 &d) != 0) {
            emit_done(s, st); /* the backoff allows no further pass */
            return;
        }
        emit_pause(s, now_ms, d, st);
        s->round++;
        return;
    }
    if (remaining(s, now_ms) <= 0) {
        emit_done(s, st);
        return;
    }
    s->pause_due = walk_attempt(s, now_ms, st);
}

/* ---- streaming --------------------------------------------------------- */

static void double_delay(tether_schedule *s) {
    s->delay_ms = TETHER__MIN(s->delay_ms * 2, STREAM_CAP_MS);
}

static void stream_provision(tether_schedule *s, int64_t now_ms,
                             tether_step *st) {
    if (remaining(s, now_ms) <= 0) {
        emit_done(s, st);
        return;
    }
    s->phase = ST_REPORT;
    s->prov_ok = 0; /* no report counts as a failure */
    emit(s, TETHER_STEP_PROVISION, st);
}

static void stream_attempt(tether_schedule *s, int64_t now_ms,
                           tether_step *st) {
    if (remaining(s, now_ms) <= 0) {
        emit_done(s, st);
        return;
    }
    if (walk_attempt(s, now_ms, st))
        s->phase = ST_END_PASS;
}

static void next_streaming(tether_schedule *s, int64_t now_ms,
                           tether_step *st) {
    switch (s->phase) {
    case ST_START:
        s->phase = ST_PROVISION;
        if (s->o.initial_wait) {
            emit_pause(s, now_ms, s->delay_ms, st);
            return;
        }
        stream_provision(s, now_ms, st);
        return;
    case ST_PROVISION:
        stream_provision(s, now_ms, st);
        return;
    case ST_REPORT:
        if (s->prov_ok) {
            s->host = s->port = 0;
            s->phase = ST_ATTEMPTS;
            stream_attempt(s, now_ms, st);
            return;
        }
        double_delay(s);
        s->phase = ST_PROVISION;
        emit_pause(s, now_ms, s->delay_ms, st);
        return;
    case ST_ATTEMPTS:
        stream_attempt(s, now_ms, st);
        return;
    case ST_END_PASS:
        double_delay(s);
        s->phase = ST_PROVISION;
        emit_pause(s, now_ms, s->delay_ms, st);
        s->round++;
        return;
    }
}

void tether_schedule_next(tether_schedule *s, int64_t now_ms,
                          tether_step *step) {
    if (!step)
        return;
    if (!s) { /* nothing to schedule */
        memset(step, 0, sizeof(*step));
        step->kind = TETHER_STEP_DONE;
        return;
    }
    if (s->done) {
        emit(s, TETHER_STEP_DONE, step);
        return;
    }
    switch (s->o.strategy) {
    case TETHER_STRATEGY_MIRRORING:
        next_mirroring(s, now_ms, step);
        break;
    case TETHER_STRATEGY_STREAMING:
        next_streaming(s, now_ms, step);
        break;
    default:
        next_sequential(s, now_ms, step);
        break;
    }
}

void tether_schedule_provisioned(tether_schedule *s, int ok, int nhosts) {
    if (!s)
        return;
    if (s->o.strategy != TETHER_STRATEGY_STREAMING &&
        s->o.strategy != TETHER_STRATEGY_MIRRORING) {
        /* sequential timing: between passes, the next pass's host count */
        if (ok && nhosts >= 1 && s->host == 0 && s->port == 0)
            s->nhosts = nhosts;
        return;
    }
    if (s->phase != ST_REPORT)
        return;
    s->prov_ok = ok && nhosts >= 1;
    if (s->prov_ok)
        s->nhosts = nhosts;
}
