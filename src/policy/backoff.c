/* backoff.c - backoff schedules (docs/backoff.md): immediate, fixed,
 * incremental, exponential and the reconnect policy; jitter none, full,
 * equal, decorrelated and proportional; named presets. Sans I/O: the
 * caller asks for the next pause and does the waiting. */
#include "backoff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* backoff_defaults fills a whole tether_backoff_opts with the defaults. */
static void backoff_defaults(tether_backoff_opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->kind = TETHER_BACKOFF_EXPONENTIAL;
    o->base_ms = 100;
    o->max_ms = 60000;
    o->step_ms = 100;
    o->multiplier = 2.0;
    o->jitter = TETHER_JITTER_FULL;
    o->jitter_ratio = 0.2;
}

void tether_backoff_opts_init_sized(tether_backoff_opts *o, size_t size) {
    tether_backoff_opts d;
    backoff_defaults(&d);
    tether__sized_out(o, size, &d, sizeof(d));
}

/* The reconnect policy's parameters (see docs/backoff.md). */
#define RECONNECT_BASE_MS 1000
#define RECONNECT_MAX_MS 25000
#define RECONNECT_THROTTLE_MS 5000
#define RECONNECT_MULTIPLIER 3.0
#define RECONNECT_THROTTLE_CAP 4 /* x max_ms */

static int backoff_preset(const char *name, tether_backoff_opts *o,
                          tether_error *err) {
    tether_backoff_opts_init(o);
    if (name && !strcmp(name, "grpc")) {
        o->base_ms = 1000;
        o->multiplier = 1.6;
        o->max_ms = 120000;
        o->jitter = TETHER_JITTER_PROPORTIONAL;
        o->jitter_ratio = 0.2;
    } else if (name && !strcmp(name, "blocking-period")) {
        o->base_ms = 5000;
        o->max_ms = 60000;
        o->jitter = TETHER_JITTER_NONE;
    } else if (name && !strcmp(name, "reconnect")) {
        o->kind = TETHER_BACKOFF_RECONNECT;
        o->base_ms = RECONNECT_BASE_MS;
        o->max_ms = RECONNECT_MAX_MS;
        o->step_ms = RECONNECT_THROTTLE_MS;
        o->multiplier = RECONNECT_MULTIPLIER;
        o->jitter = TETHER_JITTER_PROPORTIONAL;
        o->jitter_ratio = 0.5;
    } else {
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                "unknown backoff preset \"%.40s\" (want grpc, "
                                "blocking-period or reconnect)",
                                name ? name : "(null)");
    }
    return 0;
}

static int bad(tether_error *err, const char *field, const char *why) {
    return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                            "backoff: bad %s: %s", field, why);
}

static int check(const tether_backoff_opts *o, tether_error *err) {
    if ((unsigned)o->kind > TETHER_BACKOFF_RECONNECT)
        return bad(err, "kind", "unknown kind");
    if ((unsigned)o->jitter > TETHER_JITTER_PROPORTIONAL)
        return bad(err, "jitter", "unknown jitter mode");
    if (o->base_ms < 0)
        return bad(err, "base_ms", "must be >= 0");
    if (o->max_ms < o->base_ms)
        return bad(err, "max_ms", "must be >= base_ms");
    if (o->step_ms < 0)
        return bad(err, "step_ms", "must be >= 0");
    if (!(o->multiplier >= 1.0) || !isfinite(o->multiplier))
        return bad(err, "multiplier", "must be a finite number >= 1");
    if (!(o->jitter_ratio >= 0.0 && o->jitter_ratio <= 1.0))
        return bad(err, "jitter_ratio", "must be in [0, 1]");
    return 0;
}

void tether__backoff_init(tether__backoff_state *st,
                          const tether_backoff_opts *o) {
    memset(st, 0, sizeof(*st));
    tether__rng_seed(&st->rng, o->seed);
    st->prev_ms = o->base_ms;
}

void tether__backoff_restart(tether__backoff_state *st,
                             const tether_backoff_opts *o) {
    st->n = 0;
    st->throttles = 0;
    st->prev_ms = o->base_ms;
}

/* The un-jittered pause for the n-th retry (n from 0). */
static int64_t raw_delay(const tether_backoff_opts *o, int n) {
    switch (o->kind) {
    case TETHER_BACKOFF_FIXED:
        return o->base_ms;
    case TETHER_BACKOFF_INCREMENTAL: {
        double d = (double)o->base_ms + (double)o->step_ms * n;
        return d >= (double)o->max_ms ? o->max_ms : (int64_t)d;
    }
    default: {
        /* A zero base stays zero: 0 x inf (multiplier^n past ~1000
         * failures) would be NaN, and NaN to int64 is undefined. */
        if (o->base_ms <= 0)
            return 0;
        double d = (double)o->base_ms * pow(o->multiplier, n);
        return d >= (double)o->max_ms ? o->max_ms : (int64_t)d;
    }
    }
}

static int64_t jittered(const tether_backoff_opts *o, tether__backoff_state *st,
                        int64_t d) {
    switch (o->jitter) {
    case TETHER_JITTER_FULL:
        return tether__rng_range(&st->rng, 0, d);
    case TETHER_JITTER_EQUAL:
        return d / 2 + tether__rng_range(&st->rng, 0, d - d / 2);
    case TETHER_JITTER_DECORRELATED: {
        /* Cap the range, not the draw: uniform [base, min(max, 3 prev)]. */
        int64_t hi = tether__mul_sat(st->prev_ms, 3.0, o->max_ms);
        int64_t v = tether__rng_range(&st->rng, o->base_ms,
                                      TETHER__MAX(hi, o->base_ms));
        st->prev_ms = v;
        return v;
    }
    case TETHER_JITTER_PROPORTIONAL: {
        double f =
            1.0 + o->jitter_ratio * (2.0 * tether__rng_double(&st->rng) - 1.0);
        return (int64_t)llround((double)d * f);
    }
    default:
        return d;
    }
}

/* Reconnect policy (docs/backoff.md): a "down" failure (nothing answers)
 * grows the pause from base by multiplier up to max with +-ratio jitter, so
 * pollers make few attempts while the server is away and end up spread in
 * phase; a "throttled" failure (the server is up but refuses for load) draws
 * the pause uniformly from [w/2, w], where the window w starts at step and
 * doubles per consecutive throttle up to 4 x max, so a herd thins itself
 * out to what the server admits. */
static int64_t reconnect_delay(const tether_backoff_opts *o,
                               tether__backoff_state *st, tether_class cause) {
    if (cause == TETHER_CLASS_THROTTLED) {
        int64_t cap =
            tether__mul_sat(o->max_ms, RECONNECT_THROTTLE_CAP, INT64_MAX / 2);
        int64_t w = tether__mul_sat(o->step_ms, ldexp(1.0, st->throttles), cap);
        if (st->throttles < 62)
            st->throttles++;
        return tether__rng_range(&st->rng, w / 2, w);
    }
    st->throttles = 0;
    if (st->n == 0)
        return tether__rng_range(&st->rng, 0, o->base_ms);
    return jittered(o, st, raw_delay(o, st->n - 1));
}

int tether__backoff_next(const tether_backoff_opts *o,
                         tether__backoff_state *st, tether_class cause,
                         int64_t *delay_ms) {
    int64_t d;
    if (o->kind == TETHER_BACKOFF_IMMEDIATE) {
        if (st->n > 0)
            return TETHER_EEXHAUSTED;
        d = 0;
    } else if (o->kind == TETHER_BACKOFF_RECONNECT) {
        d = reconnect_delay(o, st, cause);
    } else {
        d = jittered(o, st, raw_delay(o, st->n));
    }
    if (st->n < INT32_MAX)
        st->n++;
    *delay_ms = d < 0 ? 0 : d;
    return 0;
}

struct tether_backoff {
    tether_backoff_opts o;
    tether__backoff_state st;
};

/* take copies the caller's o into full and checks it. */
static int take(tether_backoff_opts *full, const tether_backoff_opts *o,
                tether_error *err) {
    if (!o)
        return bad(err, "options", "NULL");
    backoff_defaults(full);
    int rc = tether__sized_in(full, sizeof(*full), o, sizeof(*full),
                              "tether_backoff_opts", err);
    return rc ? rc : check(full, err);
}

int tether_backoff_validate(const tether_backoff_opts *o, tether_error *err) {
    tether_backoff_opts full;
    return take(&full, o, err);
}

int tether_backoff_create(tether_backoff **out, const tether_backoff_opts *o,
                          tether_error *err) {
    if (!out)
        return tether__null(err, "tether_backoff_create", "out");
    *out = NULL;
    tether_backoff_opts full;
    int rc = take(&full, o, err);
    if (rc)
        return rc;
    o = &full;
    tether_backoff *b = tether__malloc(sizeof(*b));
    if (!b)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    b->o = *o;
    tether__backoff_init(&b->st, o);
    *out = b;
    return 0;
}

void tether_backoff_destroy(tether_backoff *b) {
    tether__free(b);
}

int tether_backoff_next(tether_backoff *b, tether_class cause,
                        int64_t *delay_ms) {
    if (!b || !delay_ms)
        return TETHER_EINVAL;
    return tether__backoff_next(&b->o, &b->st, cause, delay_ms);
}

void tether_backoff_reset(tether_backoff *b) {
    if (b)
        tether__backoff_restart(&b->st, &b->o);
}

int tether_backoff_count(const tether_backoff *b) {
    return b ? b->st.n : 0;
}

int tether_backoff_preset_sized(const char *name, tether_backoff_opts *o,
                                size_t size, tether_error *err) {
    if (!name || !o)
        return tether__null(err, "tether_backoff_preset", name ? "o" : "name");
    tether_backoff_opts full;
    int rc = backoff_preset(name, &full, err);
    if (rc == 0)
        tether__sized_out(o, size, &full, sizeof(full));
    return rc;
}
