/* duration.h - durations such as "250ms", "15s", "2m", "1h"
 * (docs/policy-spec.md, "Durations"): read by the connection-string layer
 * (tether_*_timeout keywords) and the policy specs alike, so they live in core,
 * below both. Internal. */
#ifndef TETHER_DURATION_H
#define TETHER_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* The units a duration takes, for messages. */
#define TETHER__DURATION_UNITS "(ms, s, m, h)"

/* A scanned number: digit+ ["." digit+]. */
typedef struct tether__num {
    const char *whole_p; /* integer digits */
    size_t whole_n;
    const char *frac_p; /* fraction digits, trailing zeros dropped */
    size_t frac_n;
    uint64_t whole; /* value of the integer digits */
    int whole_over; /* ... which overflowed uint64_t */
    size_t end;     /* index just after the number */
} tether__num;

/* tether__num_scan reads digit+ ["." digit+] at the start of p[0, n) into
 * num. Returns 0, or -1 when p does not start with such a number. */
int tether__num_scan(const char *p, size_t n, tether__num *num);

/* tether__duration_scan parses p[0, n) as a duration in ms (no upper bound
 * but int64_t's). Returns NULL with *ms set, or the reason it is not one
 * (a fixed phrase: never the input). */
const char *tether__duration_scan(const char *p, size_t n, int64_t *ms);

/* tether__duration_parse parses text as a duration in [0,
 * TETHER_DURATION_MAX_MS] ms. Returns 0 with *ms set, TETHER_ESPEC or
 * TETHER_EINVAL (NULL argument); *ms is untouched on failure. */
int tether__duration_parse(const char *text, int64_t *ms);

#endif
