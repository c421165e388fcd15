/* rng.c - xoshiro256** seeded by splitmix64; system seeding. */
#include "internal.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t tether__system_seed(void) {
    static _Atomic uint64_t counter;
    uint64_t seed = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &seed, sizeof(seed)) != (ssize_t)sizeof(seed))
            seed = 0;
        close(fd);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t mix = seed ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
                   (atomic_fetch_add(&counter, 1) << 40);
    mix = splitmix64(&mix);
    return mix ? mix : 0x2545f4914f6cdd1dULL;
}

void tether__rng_seed(tether__rng *r, uint64_t seed) {
    uint64_t x = seed ? seed : tether__system_seed();
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t tether__rng_next(tether__rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double tether__rng_double(tether__rng *r) {
    return (double)(tether__rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

int64_t tether__rng_range(tether__rng *r, int64_t lo, int64_t hi) {
    if (hi <= lo)
        return lo;
    uint64_t span = (uint64_t)(hi - lo) + 1;
    if (span == 0)
        return (int64_t)tether__rng_next(r);
    /* Lemire-style rejection keeps the draw unbiased. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % span);
    uint64_t x;
    do {
        x = tether__rng_next(r);
    } while (x >= limit);
    return lo + (int64_t)(x % span);
}

int64_t tether__mul_sat(int64_t v, double f, int64_t cap) {
    double d = (double)v * f;
    if (d >= (double)cap)
        return cap;
    if (d < 0)
        return 0;
    return (int64_t)d;
}
