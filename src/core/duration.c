/* duration.c - durations such as "250ms" (docs/policy-spec.md,
 * "Durations"), exact and without locale: numbers are converted by hand.
 * The policy specs and the connection-string keywords both read them;
 * tether_duration_parse is the public form. */
#include "duration.h"
#include "internal.h"

#include <string.h>

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

static int is_alpha(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

int tether__num_scan(const char *p, size_t n, tether__num *num) {
    size_t i = 0;
    memset(num, 0, sizeof(*num));
    num->whole_p = p;
    for (; i < n && is_digit(p[i]); i++) {
        unsigned d = (unsigned)(p[i] - '0');
        if (num->whole > (UINT64_MAX - d) / 10)
            num->whole_over = 1;
        else
            num->whole = num->whole * 10 + d;
    }
    num->whole_n = i;
    if (i == 0)
        return -1;
    if (i < n && p[i] == '.') {
        size_t start = ++i, last = start;
        for (; i < n && is_digit(p[i]); i++)
            if (p[i] != '0')
                last = i + 1;
        if (i == start)
            return -1;
        num->frac_p = p + start;
        num->frac_n = last - start;
    }
    num->end = i;
    return 0;
}

/* unit_factor returns the milliseconds in one unit u[0, n), or 0. */
static int64_t unit_factor(const char *u, size_t n) {
    static const struct {
        const char *name;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strlen(units[i].name) == n && memcmp(u, units[i].name, n) == 0)
            return units[i].ms;
    return 0;
}

/* duration_value converts a scanned number times unit f into *ms exactly.
 * A fraction of up to 7 significant digits can be a whole number of ms
 * (f divides 2^7 * 3^2 * 5^5); longer ones never are. */
static const char *duration_value(const tether__num *num, int64_t f,
                                  int64_t *ms) {
    uint64_t frac = 0, pow = 1;
    if (num->frac_n > 7)
        return "not a whole number of milliseconds";
    for (size_t i = 0; i < num->frac_n; i++) {
        frac = frac * 10 + (uint64_t)(num->frac_p[i] - '0');
        pow *= 10;
    }
    if ((frac * (uint64_t)f) % pow != 0)
        return "not a whole number of milliseconds";
    if (num->whole_over || num->whole > (uint64_t)(INT64_MAX / f))
        return "too large (overflows 64-bit milliseconds)";
    uint64_t v = num->whole * (uint64_t)f + frac * (uint64_t)f / pow;
    if (v > (uint64_t)INT64_MAX)
        return "too large (overflows 64-bit milliseconds)";
    *ms = (int64_t)v;
    return NULL;
}

const char *tether__duration_scan(const char *p, size_t n, int64_t *ms) {
    tether__num num;
    if (n > 0 && p[0] == '-')
        return "must not be negative";
    if (tether__num_scan(p, n, &num) != 0)
        return "not a number followed by a unit " TETHER__DURATION_UNITS;
    const char *unit = p + num.end;
    size_t un = n - num.end;
    if (un == 0) {
        if (num.whole == 0 && !num.whole_over && num.frac_n == 0) {
            *ms = 0;
            return NULL;
        }
        return "missing unit " TETHER__DURATION_UNITS;
    }
    int64_t f = unit_factor(unit, un);
    if (f == 0)
        return is_alpha(unit[0])
                   ? "unknown unit (want ms, s, m or h)"
                   : "not a number followed by a unit " TETHER__DURATION_UNITS;
    return duration_value(&num, f, ms);
}

int tether__duration_parse(const char *text, int64_t *ms) {
    int64_t v = 0;
    if (!text || !ms)
        return TETHER_EINVAL;
    if (tether__duration_scan(text, strlen(text), &v) != NULL ||
        v > TETHER_DURATION_MAX_MS)
        return TETHER_ESPEC;
    *ms = v;
    return 0;
}

int tether_duration_parse(const char *text, int64_t *ms) {
    return tether__duration_parse(text, ms);
}
