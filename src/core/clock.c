/* clock.c - the real monotonic clock and the virtual clock for tests. */
#include "internal.h"
#include "tether_sim.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

TETHER__HOT int64_t tether__mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t tether__coarse_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t real_now_ns(void *ctx) {
    (void)ctx;
    return tether__mono_ns();
}

static void real_sleep_ns(void *ctx, int64_t ns) {
    (void)ctx;
    if (ns <= 0)
        return;
    struct timespec ts = {(time_t)(ns / 1000000000LL),
                          (long)(ns % 1000000000LL)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static const tether_clock real_clock = {real_now_ns, real_sleep_ns, NULL};

const tether_clock *tether_clock_real(void) {
    return &real_clock;
}

const tether_clock *tether__clock(const tether_clock *c) {
    return c ? c : &real_clock;
}

int64_t tether__now_ms(const tether_clock *c) {
    c = tether__clock(c);
    return c->now_ns(c->ctx) / TETHER__NS_PER_MS;
}

int64_t tether_now_ms(const tether_clock *clock) {
    return tether__now_ms(clock);
}

struct tether_vclock {
    _Atomic int64_t now;
    tether_clock clock;
};

static int64_t vclock_now_ns(void *ctx) {
    tether_vclock *vc = ctx;
    return atomic_load(&vc->now);
}

static void vclock_sleep_ns(void *ctx, int64_t ns) {
    if (ns > 0)
        tether_vclock_advance(ctx, ns);
}

tether_vclock *tether_vclock_create(int64_t start_ns) {
    tether_vclock *vc = tether__calloc(1, sizeof(*vc));
    if (!vc)
        return NULL;
    atomic_init(&vc->now, start_ns);
    vc->clock.now_ns = vclock_now_ns;
    vc->clock.sleep_ns = vclock_sleep_ns;
    vc->clock.ctx = vc;
    return vc;
}

void tether_vclock_destroy(tether_vclock *vc) {
    tether__free(vc);
}

const tether_clock *tether_vclock_clock(tether_vclock *vc) {
    return vc ? &vc->clock : NULL;
}

void tether_vclock_advance(tether_vclock *vc, int64_t ns) {
    if (vc && ns > 0)
        atomic_fetch_add(&vc->now, ns);
}
