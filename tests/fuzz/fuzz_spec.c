/* fuzz_spec.c - libFuzzer target for the policy-spec parsers
 * (docs/policy-spec.md): feeds arbitrary bytes (as a NUL-terminated copy) to
 * tether_retry_opts_parse, tether_breaker_opts_parse, tether_budget_opts_parse
 * and tether_duration_parse, and abort()s when an invariant breaks:
 *   - success: every field is in its documented range;
 *   - failure: TETHER_ESPEC, class permanent, a non-empty NUL-terminated
 *     message under 200 characters, and the output left byte-for-byte
 *     unchanged;
 *   - the same input always gives the same result;
 *   - a duration accepted by tether_duration_parse is accepted with the same
 *     value as a spec key, and its canonical "<n>ms" form parses back.
 * Build by hand from the repository root (or see CMakeLists.txt here), then
 * run it with a scratch directory first so new inputs never land in the
 * repository: */
// clang-format off
// clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude -Isrc/core -Isrc src/core/*.c src/policy/*.c tests/fuzz/fuzz_spec.c -lpthread -lm -o fuzz_spec
// mkdir -p /tmp/fz && ./fuzz_spec -max_total_time=60 /tmp/fz tests/fuzz/corpus/spec
// clang-format on
#include "tether.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DUR_MAX (1000000LL * 3600000LL) /* the keys' duration cap */

#define FUZZ_NAME "fuzz_spec"
#include "fuzz_check.h"

static int dur_ok(int64_t ms, int64_t lo) {
    return ms >= lo && ms <= DUR_MAX;
}

/* check_failure: a failed parse returned ESPEC with a proper message. */
static void check_failure(int rc, const tether_error *e) {
    CHECK(rc == TETHER_ESPEC);
    CHECK(e->code == TETHER_ESPEC);
    CHECK(e->cls == TETHER_CLASS_PERMANENT);
    size_t len = strnlen(e->message, sizeof(e->message));
    CHECK(len < sizeof(e->message)); /* NUL-terminated */
    CHECK(len > 0 && len < 200);
}

static void check_retry(const tether_retry_opts *o) {
    const tether_backoff_opts *b = &o->backoff;
    CHECK((unsigned)b->kind <= TETHER_BACKOFF_RECONNECT);
    CHECK(dur_ok(b->base_ms, 0) && dur_ok(b->max_ms, 0));
    CHECK(b->max_ms >= b->base_ms);
    CHECK(b->step_ms >= 0);
    CHECK(isfinite(b->multiplier) && b->multiplier >= 1.0);
    CHECK((unsigned)b->jitter <= TETHER_JITTER_PROPORTIONAL);
    CHECK(b->jitter_ratio >= 0.0 && b->jitter_ratio <= 1.0);
    CHECK(o->max_attempts >= 1 && o->max_attempts <= 1000000);
    CHECK(dur_ok(o->deadline_ms, 0) && dur_ok(o->attempt_timeout_ms, 0));
    CHECK(tether_backoff_validate(b, NULL) == 0);
}

static void check_breaker(const tether_breaker_opts *o) {
    CHECK(o->mode == TETHER_BREAKER_CONSECUTIVE ||
          o->mode == TETHER_BREAKER_RATIO);
    CHECK(o->failures >= 1);
    CHECK(o->ratio > 0.0 && o->ratio <= 1.0);
    CHECK(o->window_ms >= 10 && o->min_calls >= 1);
    CHECK(dur_ok(o->open_ms, 1) && o->max_open_ms >= o->open_ms);
    CHECK(isfinite(o->growth) && o->growth >= 1.0);
}

static void check_budget(const tether_budget_opts *o) {
    CHECK(o->capacity >= 1 && o->capacity <= 1000000);
    CHECK(o->retry_cost >= 1 && o->retry_cost <= o->capacity);
    CHECK(o->timeout_cost >= 1 && o->timeout_cost <= o->capacity);
    CHECK(o->success_refund >= 0);
}

/* A parser under test, with its result check, behind one signature. */
typedef int (*parse_fn)(const char *s, void *o, tether_error *e);
typedef void (*check_fn)(const void *o);

static int p_retry(const char *s, void *o, tether_error *e) {
    return tether_retry_opts_parse(s, o, e);
}
static int p_breaker(const char *s, void *o, tether_error *e) {
    return tether_breaker_opts_parse(s, o, e);
}
static int p_budget(const char *s, void *o, tether_error *e) {
    return tether_budget_opts_parse(s, o, e);
}
static void c_retry(const void *o) {
    check_retry(o);
}
static void c_breaker(const void *o) {
    check_breaker(o);
}
static void c_budget(const void *o) {
    check_budget(o);
}

/* run_one parses s twice into pattern-filled buffers and checks the
 * invariants, and that both runs give the same code and message. */
static void run_one(const char *s, parse_fn parse, check_fn check) {
    union {
        tether_retry_opts r;
        tether_breaker_opts b;
        tether_budget_opts g;
    } a, b, pattern;
    tether_error ea, eb;
    memset(&pattern, 0xA5, sizeof(pattern));
    a = pattern;
    b = pattern;
    memset(&ea, 0x5A, sizeof(ea));
    memset(&eb, 0x00, sizeof(eb));
    int rc = parse(s, &a, &ea);
    CHECK(parse(s, &b, &eb) == rc);
    if (rc == 0) {
        check(&a);
        check(&b);
        return;
    }
    check_failure(rc, &ea);
    CHECK(strcmp(ea.message, eb.message) == 0);
    CHECK(memcmp(&a, &pattern, sizeof(a)) == 0);
    CHECK(parse(s, &a, NULL) == rc); /* a NULL err is fine */
}

/* check_duration: tether_duration_parse agrees with the spec keys. */
static void check_duration(const char *s) {
    int64_t ms = -7, back = -7;
    char spec[96];
    int rc = tether_duration_parse(s, &ms);
    if (rc != 0) {
        CHECK(rc == TETHER_ESPEC && ms == -7);
        return;
    }
    CHECK(ms >= 0);
    snprintf(spec, sizeof(spec), "%lldms", (long long)ms);
    CHECK(tether_duration_parse(spec, &back) == 0 && back == ms);
    if (strlen(s) > 64 || ms > DUR_MAX)
        return;
    tether_retry_opts o;
    snprintf(spec, sizeof(spec), "fixed deadline=%s", s);
    CHECK(tether_retry_opts_parse(spec, &o, NULL) == 0);
    CHECK(o.deadline_ms == ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    run_one(s, p_retry, c_retry);
    run_one(s, p_breaker, c_breaker);
    run_one(s, p_budget, c_budget);
    check_duration(s);
    free(s);
    return 0;
}
