/* hist.h - the latency histogram of the benchmarks: `tether bench cycle`
 * and `tether bench query` (src/lab), the cycle peers (through
 * bench/peers/peer_common.h), the query peers, bench_corun and
 * bench_interleave (through query_common.h), so that every one of them
 * reports its percentiles the same way. It sits in bench/support, the
 * benchmarks' shared code (the tether_benchbase include path).
 *
 * Log-linear over nanoseconds: 0..15 exact, then each power of two split
 * into 16 linear sub-buckets (a bucket reports its midpoint: percentiles
 * within ~3 %); the count and the maximum are exact. Header-only, static
 * inline: no library or object to link, and lat_hist_add inlines into the
 * timed loops. Not thread-safe: one histogram per thread, merged at the end.
 */
#ifndef TETHER_BENCH_HIST_H
#define TETHER_BENCH_HIST_H

#include <stdint.h>

#define LAT_HIST_SUB 16
#define LAT_HIST_BUCKETS (61 * LAT_HIST_SUB)

typedef struct lat_hist {
    uint64_t n, max;
    uint64_t b[LAT_HIST_BUCKETS];
} lat_hist;

static inline unsigned lat_hist_index(uint64_t ns) {
    if (ns < LAT_HIST_SUB)
        return (unsigned)ns;
    unsigned e = 63u - (unsigned)__builtin_clzll(ns); /* >= 4 */
    return (e - 3) * LAT_HIST_SUB +
           ((unsigned)(ns >> (e - 4)) & (LAT_HIST_SUB - 1));
}

/* The midpoint of bucket i, in ns. */
static inline uint64_t lat_hist_mid(unsigned i) {
    if (i < LAT_HIST_SUB)
        return i;
    unsigned e = i / LAT_HIST_SUB + 3;
    uint64_t width = (uint64_t)1 << (e - 4);
    return ((LAT_HIST_SUB + (uint64_t)(i % LAT_HIST_SUB)) << (e - 4)) +
           width / 2;
}

static inline void lat_hist_add(lat_hist *h, uint64_t ns) {
    h->b[lat_hist_index(ns)]++;
    h->n++;
    if (ns > h->max)
        h->max = ns;
}

static inline void lat_hist_merge(lat_hist *into, const lat_hist *h) {
    for (unsigned i = 0; i < LAT_HIST_BUCKETS; i++)
        into->b[i] += h->b[i];
    into->n += h->n;
    if (h->max > into->max)
        into->max = h->max;
}

/* The pct-th percentile in ns (0 when empty): the midpoint of the bucket
 * that holds the ceil(n * pct / 100)-th value, capped at the exact max. */
static inline uint64_t lat_hist_pct(const lat_hist *h, unsigned pct) {
    if (h->n == 0)
        return 0;
    uint64_t want = (h->n * pct + 99) / 100, acc = 0;
    for (unsigned i = 0; i < LAT_HIST_BUCKETS; i++)
        if ((acc += h->b[i]) >= want)
            return lat_hist_mid(i) < h->max ? lat_hist_mid(i) : h->max;
    return h->max;
}

/* ns as microseconds, the unit the query benchmarks print. */
static inline double lat_hist_us(uint64_t ns) {
    return (double)ns / 1000.0;
}

/* What the benchmarks print of a histogram: p50, p99 and the max. */
typedef struct lat_summary {
    double p50, p99, max;
} lat_summary;

/* h's p50, p99 and max in units of unit_ns nanoseconds (1: ns, 1000: us). */
static inline lat_summary lat_hist_summary(const lat_hist *h, double unit_ns) {
    lat_summary s = {(double)lat_hist_pct(h, 50) / unit_ns,
                     (double)lat_hist_pct(h, 99) / unit_ns,
                     (double)h->max / unit_ns};
    return s;
}

#endif
