/* spec.c - policy specifications (docs/policy-spec.md): parses one-line
 * specs such as "exponential base=100ms max=60s jitter=full attempts=5
 * deadline=30s" into retry, breaker and budget options. Durations ("250ms")
 * are core's (core/duration.c): the connection-string layer below reads
 * them too.
 *
 * The grammar is documented in docs/policy-spec.md, "Grammar". Parsing
 * works in place over the caller's string with (pointer, length) tokens: no
 * allocation and no locale (numbers are converted by hand, floats exactly,
 * without strtod, so a process that called setlocale() still reads "0.5" as
 * one half). Each parser fills a local copy of the options and commits it
 * only on success: on error the caller's options are unchanged and err
 * (TETHER_ESPEC) names the key and the value. */
#include "duration.h"
#include "internal.h"

#include <float.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SPEC_COUNT_MAX 1000000              /* bound of every count */
#define SPEC_DUR_MAX TETHER_DURATION_MAX_MS /* 1000000h: ns fit int64 */
#define SPEC_QUOTE_MAX 40                   /* user text shown in errors */
#define SPEC_QBUF (SPEC_QUOTE_MAX + 4)      /* + "..." + NUL */
#define SPEC_DIGITS_MAX 15                  /* significant digits (floats) */
#define SPEC_POW10_MAX 22                   /* 1e22 is exact in a double */
#define SPEC_BIT(i) (1u << (i))
#define SPEC_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

#define WANT_DURATION "want a duration in [0, 1000000h]"
#define WANT_COUNT "want an integer in [1, 1000000]"

/* A token: a slice of the spec string (not NUL-terminated). */
typedef struct spec_tok {
    const char *p;
    size_t n;
} spec_tok;

typedef enum spec_type {
    SPEC_DURATION, /* int64_t milliseconds in [lo, hi] */
    SPEC_INT,      /* int in [lo, hi] */
    SPEC_U64,      /* uint64_t, any value */
    SPEC_FLOAT,    /* double in [flo, fhi], or (flo, fhi] when flo_open */
    SPEC_JITTER    /* tether_jitter by name */
} spec_type;

/* One key of a spec: where its value goes and what it accepts. */
typedef struct spec_key {
    const char *name;
    spec_type type;
    size_t offset; /* of the field in the options struct */
    int64_t lo, hi;
    double flo, fhi;
    int flo_open;
    const char *want; /* the accepted values, for error messages */
} spec_key;

/* Table rows: a name, the field's offset, the accepted range, the message
 * part that states it. Durations and counts share one upper bound. */
#define KEY_DUR(name, off, lo, want)                                           \
    { name, SPEC_DURATION, off, lo, SPEC_DUR_MAX, 0, 0, 0, want }
#define KEY_INT(name, off, lo, want)                                           \
    { name, SPEC_INT, off, lo, SPEC_COUNT_MAX, 0, 0, 0, want }
#define KEY_FLOAT(name, off, lo, hi, lo_open, want)                            \
    { name, SPEC_FLOAT, off, 0, 0, lo, hi, lo_open, want }
#define KEY_U64(name, off, want)                                               \
    { name, SPEC_U64, off, 0, 0, 0, 0, 0, want }
#define KEY_JITTER(name, off, want)                                            \
    { name, SPEC_JITTER, off, 0, 0, 0, 0, 0, want }

/* One family of specs: its name in messages, its kinds and its keys. */
typedef struct spec_def {
    const char *what;         /* "retry spec" */
    const char *const *kinds; /* kinds[0] is the default kind */
    int nkinds;
    const char *kinds_want; /* the kinds, listed for messages */
    const spec_key *keys;
    int nkeys;
} spec_def;

/* A parse in progress. */
typedef struct spec_parser {
    const spec_def *def;
    tether_error *err;
    const char *cur; /* next unread character */
    int kind;        /* index into def->kinds */
    uint32_t seen;   /* bit i: def->keys[i] was given */
} spec_parser;

/* A scanned number (core/duration.h). */
typedef tether__num spec_num;

/* ------------------------------------------------------------------------ */
/* Tokens and messages                                                      */
/* ------------------------------------------------------------------------ */

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
           c == '\r';
}

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

static int tok_is(spec_tok t, const char *s) {
    size_t n = strlen(s);
    return t.n == n && memcmp(t.p, s, n) == 0;
}

static int tok_has_eq(spec_tok t) {
    return memchr(t.p, '=', t.n) != NULL;
}

/* next_token returns the next run of non-space characters after *cur and
 * moves *cur past it; an empty token (n = 0) at the end of the string. */
static spec_tok next_token(const char **cur) {
    const char *p = *cur;
    while (is_space(*p))
        p++;
    spec_tok t = {p, 0};
    while (p[t.n] && !is_space(p[t.n]))
        t.n++;
    *cur = p + t.n;
    return t;
}

/* peek_token returns the token after cur without consuming it. */
static spec_tok peek_token(const char *cur) {
    return next_token(&cur);
}

/* quote copies t into buf for a message: at most SPEC_QUOTE_MAX characters
 * ("..." marks a cut), non-printable bytes shown as '?'. */
static const char *quote(spec_tok t, char buf[SPEC_QBUF]) {
    size_t n = t.n > SPEC_QUOTE_MAX ? SPEC_QUOTE_MAX : t.n;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t.p[i];
        buf[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (n < t.n) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

/* fmt_ms writes a duration for a message: "0", "20s" or "250ms". */
static const char *fmt_ms(int64_t ms, char buf[32]) {
    if (ms != 0 && ms % 1000 == 0)
        snprintf(buf, 32, "%" PRId64 "s", ms / 1000);
    else if (ms != 0)
        snprintf(buf, 32, "%" PRId64 "ms", ms);
    else
        snprintf(buf, 32, "0");
    return buf;
}

static int spec_fail(const spec_parser *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* spec_fail sets err to TETHER_ESPEC with "<what>: <message>". */
static int spec_fail(const spec_parser *ps, const char *fmt, ...) {
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "%s: ", ps->def->what);
    va_list ap;
    va_start(ap, fmt);
    int rc = tether__error_vset(ps->err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                prefix, fmt, ap);
    va_end(ap);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Numbers and durations                                                    */
/* ------------------------------------------------------------------------ */

/* scan_uint parses t, decimal digits only, into *v. Returns -1 on any other
 * character, an empty token or overflow. */
static int scan_uint(spec_tok t, uint64_t *v) {
    uint64_t x = 0;
    if (t.n == 0)
        return -1;
    for (size_t i = 0; i < t.n; i++) {
        if (!is_digit(t.p[i]))
            return -1;
        unsigned d = (unsigned)(t.p[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

/* duration_scan parses t as a duration (core/duration.c). Returns NULL
 * with *ms set, or the reason it is not one. */
static const char *duration_scan(spec_tok t, int64_t *ms) {
    return tether__duration_scan(t.p, t.n, ms);
}

/* float_value turns a scanned number into the nearest double: at most
 * SPEC_DIGITS_MAX significant digits m (exact in a double) times 10^e with
 * |e| <= 22 (exact too), so one multiplication or division rounds
 * correctly. Returns 0, -1 (too many digits) or -2 (out of range). */
static int float_value(const spec_num *num, double *v) {
    static const double pow10[SPEC_POW10_MAX + 1] = {
        1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    uint64_t m = 0;
    int64_t sig = 0, zeros = 0, e = -(int64_t)num->frac_n;
    for (size_t i = 0; i < num->whole_n + num->frac_n; i++) {
        char c =
            i < num->whole_n ? num->whole_p[i] : num->frac_p[i - num->whole_n];
        if (c == '0') {
            zeros += sig > 0;
            continue;
        }
        if (sig + zeros + 1 > SPEC_DIGITS_MAX)
            return -1;
        for (; zeros > 0; zeros--, sig++)
            m *= 10;
        m = m * 10 + (uint64_t)(c - '0');
        sig++;
    }
    e += zeros; /* trailing zeros of the integer part */
    if (m == 0) {
        *v = 0.0;
        return 0;
    }
    if (e > SPEC_POW10_MAX || e < -SPEC_POW10_MAX)
        return -2;
    *v = e >= 0 ? (double)m * pow10[e] : (double)m / pow10[-e];
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

static const char *const jitter_names[] = {"none", "full", "equal",
                                           "decorrelated", "proportional"};

static int bad_value(const spec_parser *ps, const spec_key *k, spec_tok val,
                     const char *why) {
    char qv[SPEC_QBUF];
    return spec_fail(ps, "bad value \"%s\" for key \"%s\": %s", quote(val, qv),
                     k->name, why);
}

static int set_duration(const spec_parser *ps, const spec_key *k, spec_tok val,
                        void *field) {
    char qv[SPEC_QBUF];
    int64_t ms = 0;
    const char *why = duration_scan(val, &ms);
    if (why)
        return spec_fail(ps, "bad duration \"%s\" for key \"%s\": %s",
                         quote(val, qv), k->name, why);
    if (ms < k->lo || ms > k->hi)
        return bad_value(ps, k, val, k->want);
    *(int64_t *)field = ms;
    return 0;
}

static int set_int(const spec_parser *ps, const spec_key *k, spec_tok val,
                   void *field) {
    uint64_t v = 0;
    if (scan_uint(val, &v) != 0 || v < (uint64_t)k->lo || v > (uint64_t)k->hi)
        return bad_value(ps, k, val, k->want);
    *(int *)field = (int)v;
    return 0;
}

static int set_u64(const spec_parser *ps, const spec_key *k, spec_tok val,
                   void *field) {
    uint64_t v = 0;
    if (scan_uint(val, &v) != 0)
        return bad_value(ps, k, val, k->want);
    *(uint64_t *)field = v;
    return 0;
}

static int set_float(const spec_parser *ps, const spec_key *k, spec_tok val,
                     void *field) {
    spec_num num;
    double v = 0.0;
    int rc = -2;
    if (tether__num_scan(val.p, val.n, &num) == 0 && num.end == val.n)
        rc = float_value(&num, &v);
    if (rc == -1)
        return bad_value(ps, k, val,
                         "too many significant digits (at most 15)");
    if (rc != 0 || v < k->flo || v > k->fhi || (k->flo_open && v == k->flo))
        return bad_value(ps, k, val, k->want);
    *(double *)field = v;
    return 0;
}

static int set_jitter(const spec_parser *ps, const spec_key *k, spec_tok val,
                      void *field) {
    for (int i = 0; i < SPEC_COUNT(jitter_names); i++) {
        if (tok_is(val, jitter_names[i])) {
            *(tether_jitter *)field = (tether_jitter)i;
            return 0;
        }
    }
    return bad_value(ps, k, val, k->want);
}

/* spec_set parses val as key k's value into its field of opts. */
static int spec_set(const spec_parser *ps, const spec_key *k, spec_tok val,
                    void *opts) {
    void *field = (char *)opts + k->offset;
    switch (k->type) {
    case SPEC_DURATION:
        return set_duration(ps, k, val, field);
    case SPEC_INT:
        return set_int(ps, k, val, field);
    case SPEC_U64:
        return set_u64(ps, k, val, field);
    case SPEC_FLOAT:
        return set_float(ps, k, val, field);
    case SPEC_JITTER:
        return set_jitter(ps, k, val, field);
    }
    return spec_fail(ps, "internal error: bad key type");
}

/* ------------------------------------------------------------------------ */
/* The generic parser                                                       */
/* ------------------------------------------------------------------------ */

static int kind_index(const spec_def *d, spec_tok t) {
    for (int i = 0; i < d->nkinds; i++)
        if (tok_is(t, d->kinds[i]))
            return i;
    return -1;
}

static int key_index(const spec_def *d, spec_tok t) {
    for (int i = 0; i < d->nkeys; i++)
        if (tok_is(t, d->keys[i].name))
            return i;
    return -1;
}

/* bare_word reports a token without '=' where a key=value must be. */
static int bare_word(const spec_parser *ps, spec_tok t) {
    char q[SPEC_QBUF];
    spec_tok next = peek_token(ps->cur);
    if (next.n > 0 && next.p[0] == '=')
        return spec_fail(ps, "no spaces allowed around \"=\" (after \"%s\")",
                         quote(t, q));
    if (kind_index(ps->def, t) >= 0)
        return spec_fail(ps,
                         "expected key=value, got \"%s\" (the kind must "
                         "come first)",
                         quote(t, q));
    return spec_fail(ps, "expected key=value, got \"%s\"", quote(t, q));
}

/* no_value reports "key=" (with a hint when "key= value" was meant). */
static int no_value(const spec_parser *ps, const spec_key *k) {
    spec_tok next = peek_token(ps->cur);
    if (next.n > 0 && !tok_has_eq(next))
        return spec_fail(ps,
                         "key \"%s\" has no value (no spaces allowed around "
                         "\"=\")",
                         k->name);
    return spec_fail(ps, "key \"%s\" has no value", k->name);
}

/* spec_apply handles one key=value token. */
static int spec_apply(spec_parser *ps, spec_tok tok, void *opts) {
    char qk[SPEC_QBUF], qv[SPEC_QBUF];
    const char *eq = memchr(tok.p, '=', tok.n);
    if (!eq)
        return bare_word(ps, tok);
    spec_tok name = {tok.p, (size_t)(eq - tok.p)};
    spec_tok val = {eq + 1, tok.n - name.n - 1};
    if (name.n == 0)
        return spec_fail(ps, "empty key in \"%s\"", quote(tok, qk));
    int i = key_index(ps->def, name);
    if (i < 0)
        return spec_fail(ps, "unknown key \"%s\" (value \"%s\")",
                         quote(name, qk), quote(val, qv));
    const spec_key *k = &ps->def->keys[i];
    if (ps->seen & SPEC_BIT(i))
        return spec_fail(ps, "duplicate key \"%s\"", k->name);
    if (val.n == 0)
        return no_value(ps, k);
    ps->seen |= SPEC_BIT(i);
    return spec_set(ps, k, val, opts);
}

/* spec_begin checks the arguments, rejects an empty spec and reads the kind
 * (the first token, when it has no '='; else the default kind). */
static int spec_begin(spec_parser *ps, const spec_def *def, const char *spec,
                      const void *o, tether_error *err) {
    char q[SPEC_QBUF];
    *ps = (spec_parser){def, err, spec, 0, 0};
    if (!spec || !o)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "%s: %s is NULL", def->what,
                                spec ? "options" : "specification");
    const char *after = spec;
    spec_tok t = next_token(&after);
    if (t.n == 0)
        return spec_fail(ps, "empty specification");
    if (tok_has_eq(t))
        return 0;
    ps->cur = after;
    ps->kind = kind_index(def, t);
    if (ps->kind >= 0)
        return 0;
    spec_tok next = peek_token(after);
    if (next.n > 0 && next.p[0] == '=')
        return spec_fail(ps, "no spaces allowed around \"=\" (after \"%s\")",
                         quote(t, q));
    return spec_fail(ps, "unknown kind \"%s\" (want %s)", quote(t, q),
                     def->kinds_want);
}

/* spec_keys applies every remaining key=value token to opts. */
static int spec_keys(spec_parser *ps, void *opts) {
    for (;;) {
        spec_tok t = next_token(&ps->cur);
        if (t.n == 0)
            return 0;
        int rc = spec_apply(ps, t, opts);
        if (rc)
            return rc;
    }
}

static const char *by_default(const spec_parser *ps, int key) {
    return (ps->seen & SPEC_BIT(key)) ? "" : " by default";
}

/* spec_shorter reports duration key a shorter than duration key b. */
static int spec_shorter(const spec_parser *ps, int a, int64_t av, int b,
                        int64_t bv) {
    char as[32], bs[32];
    return spec_fail(ps, "\"%s\" (%s%s) is shorter than \"%s\" (%s%s)",
                     ps->def->keys[a].name, fmt_ms(av, as), by_default(ps, a),
                     ps->def->keys[b].name, fmt_ms(bv, bs), by_default(ps, b));
}

/* ------------------------------------------------------------------------ */
/* Retry specs                                                              */
/* ------------------------------------------------------------------------ */

enum {
    RK_BASE,
    RK_MAX,
    RK_STEP,
    RK_MULTIPLIER,
    RK_JITTER,
    RK_RATIO,
    RK_ATTEMPTS,
    RK_DEADLINE,
    RK_TIMEOUT,
    RK_SEED,
    RK_COUNT
};

#define RETRY_OFF(f) offsetof(tether_retry_opts, f)

static const spec_key retry_keys[RK_COUNT] = {
    [RK_BASE] = KEY_DUR("base", RETRY_OFF(backoff.base_ms), 0, WANT_DURATION),
    [RK_MAX] = KEY_DUR("max", RETRY_OFF(backoff.max_ms), 0, WANT_DURATION),
    [RK_STEP] = KEY_DUR("step", RETRY_OFF(backoff.step_ms), 0, WANT_DURATION),
    [RK_MULTIPLIER] = KEY_FLOAT("multiplier", RETRY_OFF(backoff.multiplier),
                                1.0, DBL_MAX, 0, "want a number >= 1"),
    [RK_JITTER] = KEY_JITTER("jitter", RETRY_OFF(backoff.jitter),
                             "want one of none, full, equal, decorrelated, "
                             "proportional"),
    [RK_RATIO] = KEY_FLOAT("ratio", RETRY_OFF(backoff.jitter_ratio), 0.0, 1.0,
                           0, "want a number in [0, 1]"),
    [RK_ATTEMPTS] = KEY_INT("attempts", RETRY_OFF(max_attempts), 1, WANT_COUNT),
    [RK_DEADLINE] =
        KEY_DUR("deadline", RETRY_OFF(deadline_ms), 0, WANT_DURATION),
    [RK_TIMEOUT] =
        KEY_DUR("timeout", RETRY_OFF(attempt_timeout_ms), 0, WANT_DURATION),
    [RK_SEED] = KEY_U64("seed", RETRY_OFF(backoff.seed),
                        "want an integer in [0, 18446744073709551615]"),
};

static const char *const retry_kinds[] = {"exponential", "fixed", "incremental",
                                          "immediate",   "grpc",  "reconnect"};

static const spec_def retry_def = {
    .what = "retry spec",
    .kinds = retry_kinds,
    .nkinds = SPEC_COUNT(retry_kinds),
    .kinds_want =
        "exponential, fixed, incremental, immediate, grpc or reconnect",
    .keys = retry_keys,
    .nkeys = RK_COUNT};

/* retry_kind applies the kind: the first four name a backoff kind, the
 * others (grpc, reconnect) a backoff preset of the same name. */
static int retry_kind(const spec_parser *ps, tether_retry_opts *o) {
    static const tether_backoff_kind kinds[] = {
        TETHER_BACKOFF_EXPONENTIAL, TETHER_BACKOFF_FIXED,
        TETHER_BACKOFF_INCREMENTAL, TETHER_BACKOFF_IMMEDIATE};
    tether_error e = {0};
    if (ps->kind < SPEC_COUNT(kinds)) {
        o->backoff.kind = kinds[ps->kind];
        return 0;
    }
    if (tether_backoff_preset(retry_kinds[ps->kind], &o->backoff, &e) != 0)
        return spec_fail(ps, "kind \"%s\": %.150s", retry_kinds[ps->kind],
                         e.message);
    return 0;
}

/* retry_check finishes a retry spec: step follows base when the kind made
 * them equal, max must not be below base, and the backoff must validate. */
static int retry_check(const spec_parser *ps, tether_retry_opts *o,
                       const tether_backoff_opts *start) {
    tether_backoff_opts *b = &o->backoff;
    tether_error e = {0};
    if (!(ps->seen & SPEC_BIT(RK_STEP)) && (ps->seen & SPEC_BIT(RK_BASE)) &&
        start->step_ms == start->base_ms)
        b->step_ms = b->base_ms;
    if (b->max_ms < b->base_ms)
        return spec_shorter(ps, RK_MAX, b->max_ms, RK_BASE, b->base_ms);
    if (tether_backoff_validate(b, &e) != 0)
        return spec_fail(ps, "%.150s", e.message);
    return 0;
}

int tether_retry_opts_parse_sized(const char *spec, tether_retry_opts *o,
                                  size_t size, tether_error *err) {
    spec_parser ps;
    tether_retry_opts local;
    int rc = spec_begin(&ps, &retry_def, spec, o, err);
    if (rc)
        return rc;
    tether_retry_opts_init(&local);
    rc = retry_kind(&ps, &local);
    tether_backoff_opts start = local.backoff;
    if (!rc)
        rc = spec_keys(&ps, &local);
    if (!rc)
        rc = retry_check(&ps, &local, &start);
    if (!rc)
        tether__sized_out(o, size, &local, sizeof(local));
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Breaker specs                                                            */
/* ------------------------------------------------------------------------ */

enum {
    BK_FAILURES,
    BK_RATIO,
    BK_WINDOW,
    BK_MIN,
    BK_OPEN,
    BK_MAX_OPEN,
    BK_GROWTH,
    BK_JITTER,
    BK_COUNT
};

#define BREAKER_OFF(f) offsetof(tether_breaker_opts, f)

static const spec_key breaker_keys[BK_COUNT] = {
    [BK_FAILURES] = KEY_INT("failures", BREAKER_OFF(failures), 1, WANT_COUNT),
    [BK_RATIO] = KEY_FLOAT("ratio", BREAKER_OFF(ratio), 0.0, 1.0, 1,
                           "want a number in (0, 1]"),
    [BK_WINDOW] = KEY_DUR("window", BREAKER_OFF(window_ms), 10,
                          "want a duration in [10ms, 1000000h]"),
    [BK_MIN] = KEY_INT("min", BREAKER_OFF(min_calls), 1, WANT_COUNT),
    [BK_OPEN] = KEY_DUR("open", BREAKER_OFF(open_ms), 1,
                        "want a duration in [1ms, 1000000h]"),
    [BK_MAX_OPEN] = KEY_DUR("max-open", BREAKER_OFF(max_open_ms), 1,
                            "want a duration in [1ms, 1000000h]"),
    [BK_GROWTH] = KEY_FLOAT("growth", BREAKER_OFF(growth), 1.0, DBL_MAX, 0,
                            "want a number >= 1"),
    [BK_JITTER] = KEY_FLOAT("jitter", BREAKER_OFF(jitter), 0.0, 1.0, 0,
                            "want a number in [0, 1]"),
};

enum { BREAKER_KIND_PLAIN, BREAKER_KIND_BLOCKING_PERIOD };

static const char *const breaker_kinds[] = {[BREAKER_KIND_PLAIN] = "breaker",
                                            [BREAKER_KIND_BLOCKING_PERIOD] =
                                                "blocking-period"};

static const spec_def breaker_def = {.what = "breaker spec",
                                     .kinds = breaker_kinds,
                                     .nkinds = SPEC_COUNT(breaker_kinds),
                                     .kinds_want = "breaker or blocking-period",
                                     .keys = breaker_keys,
                                     .nkeys = BK_COUNT};

/* breaker_check picks the mode from the keys given and checks that
 * max-open is not shorter than open. */
static int breaker_check(const spec_parser *ps, tether_breaker_opts *o) {
    const uint32_t ratio_keys =
        SPEC_BIT(BK_RATIO) | SPEC_BIT(BK_WINDOW) | SPEC_BIT(BK_MIN);
    if ((ps->seen & SPEC_BIT(BK_FAILURES)) && (ps->seen & ratio_keys)) {
        int r = (ps->seen & SPEC_BIT(BK_RATIO))    ? BK_RATIO
                : (ps->seen & SPEC_BIT(BK_WINDOW)) ? BK_WINDOW
                                                   : BK_MIN;
        return spec_fail(ps,
                         "\"failures\" (consecutive mode) cannot be combined "
                         "with \"%s\" (ratio mode)",
                         breaker_keys[r].name);
    }
    if (ps->seen & ratio_keys)
        o->mode = TETHER_BREAKER_RATIO;
    else if (ps->seen & SPEC_BIT(BK_FAILURES))
        o->mode = TETHER_BREAKER_CONSECUTIVE;
    if (o->max_open_ms < o->open_ms)
        return spec_shorter(ps, BK_MAX_OPEN, o->max_open_ms, BK_OPEN,
                            o->open_ms);
    return 0;
}

int tether_breaker_opts_parse_sized(const char *spec, tether_breaker_opts *o,
                                    size_t size, tether_error *err) {
    spec_parser ps;
    tether_breaker_opts local;
    tether_error e = {0};
    int rc = spec_begin(&ps, &breaker_def, spec, o, err);
    if (rc)
        return rc;
    tether_breaker_opts_init(&local);
    if (ps.kind == BREAKER_KIND_BLOCKING_PERIOD &&
        tether_breaker_preset(breaker_kinds[ps.kind], &local, &e) != 0)
        return spec_fail(&ps, "kind \"%s\": %.150s", breaker_kinds[ps.kind],
                         e.message);
    rc = spec_keys(&ps, &local);
    if (!rc)
        rc = breaker_check(&ps, &local);
    if (!rc)
        tether__sized_out(o, size, &local, sizeof(local));
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Budget specs                                                             */
/* ------------------------------------------------------------------------ */

enum { GK_TOKENS, GK_COST, GK_TIMEOUT_COST, GK_REFUND, GK_COUNT };

#define BUDGET_OFF(f) offsetof(tether_budget_opts, f)

static const spec_key budget_keys[GK_COUNT] = {
    [GK_TOKENS] = KEY_INT("tokens", BUDGET_OFF(capacity), 1, WANT_COUNT),
    [GK_COST] = KEY_INT("cost", BUDGET_OFF(retry_cost), 1, WANT_COUNT),
    [GK_TIMEOUT_COST] =
        KEY_INT("timeout-cost", BUDGET_OFF(timeout_cost), 1, WANT_COUNT),
    [GK_REFUND] = KEY_INT("refund", BUDGET_OFF(success_refund), 0,
                          "want an integer in [0, 1000000]"),
};

static const char *const budget_kinds[] = {"budget"};

static const spec_def budget_def = {.what = "budget spec",
                                    .kinds = budget_kinds,
                                    .nkinds = SPEC_COUNT(budget_kinds),
                                    .kinds_want = "budget",
                                    .keys = budget_keys,
                                    .nkeys = GK_COUNT};

/* budget_larger reports a cost above the capacity. */
static int budget_larger(const spec_parser *ps, int key, int cost, int cap) {
    return spec_fail(ps, "\"%s\" (%d%s) is larger than \"tokens\" (%d%s)",
                     budget_keys[key].name, cost, by_default(ps, key), cap,
                     by_default(ps, GK_TOKENS));
}

int tether_budget_opts_parse_sized(const char *spec, tether_budget_opts *o,
                                   size_t size, tether_error *err) {
    spec_parser ps;
    tether_budget_opts local;
    int rc = spec_begin(&ps, &budget_def, spec, o, err);
    if (rc)
        return rc;
    tether_budget_opts_init(&local);
    rc = spec_keys(&ps, &local);
    if (!rc && local.retry_cost > local.capacity)
        rc = budget_larger(&ps, GK_COST, local.retry_cost, local.capacity);
    if (!rc && local.timeout_cost > local.capacity)
        rc = budget_larger(&ps, GK_TIMEOUT_COST, local.timeout_cost,
                           local.capacity);
    if (!rc)
        tether__sized_out(o, size, &local, sizeof(local));
    return rc;
}
