/* budget.c - the retry budget (docs/breaker.md, "Retry budget"): a
 * lock-free token bucket that keeps retries a bounded share of the traffic
 * to one target. Retries withdraw tokens, successes put some back; when the
 * bucket runs dry retries stop (no retry storms). The count lives in one
 * atomic int updated by CAS loops, so it never goes below zero nor above
 * the capacity. */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct tether_budget {
    _Atomic int tokens;
    tether_budget_opts o;
};

/* budget_defaults fills a whole tether_budget_opts with the defaults. */
static void budget_defaults(tether_budget_opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->capacity = 500;
    o->retry_cost = 5;
    o->timeout_cost = 10;
    o->success_refund = 1;
}

void tether_budget_opts_init_sized(tether_budget_opts *o, size_t size) {
    tether_budget_opts d;
    budget_defaults(&d);
    tether__sized_out(o, size, &d, sizeof(d));
}

static int bad(tether_error *err, const char *field, int value,
               const char *why) {
    return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                            "budget: bad %s = %d: %s", field, value, why);
}

static int validate(const tether_budget_opts *o, tether_error *err) {
    if (o->capacity <= 0)
        return bad(err, "capacity", o->capacity, "must be > 0");
    if (o->retry_cost <= 0)
        return bad(err, "retry_cost", o->retry_cost, "must be > 0");
    if (o->retry_cost > o->capacity)
        return bad(err, "retry_cost", o->retry_cost,
                   "must not exceed capacity");
    if (o->timeout_cost <= 0)
        return bad(err, "timeout_cost", o->timeout_cost, "must be > 0");
    if (o->timeout_cost > o->capacity)
        return bad(err, "timeout_cost", o->timeout_cost,
                   "must not exceed capacity");
    if (o->success_refund < 0)
        return bad(err, "success_refund", o->success_refund, "must be >= 0");
    return 0;
}

int tether_budget_create(tether_budget **out, const tether_budget_opts *o,
                         tether_error *err) {
    tether_budget_opts defaults;
    if (!out)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "budget: out is NULL");
    *out = NULL;
    budget_defaults(&defaults);
    int rc = TETHER__SIZED_IN(defaults, o, "tether_budget_opts", err);
    if (rc)
        return rc;
    o = &defaults;
    rc = validate(o, err);
    if (rc)
        return rc;
    tether_budget *b = tether__calloc(1, sizeof(*b));
    if (!b)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "budget: out of memory");
    b->o = *o;
    atomic_init(&b->tokens, o->capacity);
    *out = b;
    return 0;
}

void tether_budget_destroy(tether_budget *b) {
    tether__free(b);
}

/* The token count guards no other data, so relaxed ordering is enough: the
 * CAS alone makes each update atomic. */
int tether_budget_withdraw(tether_budget *b, int after_timeout) {
    if (!b)
        return TETHER_EINVAL;
    int cost = after_timeout ? b->o.timeout_cost : b->o.retry_cost;
    int cur = atomic_load_explicit(&b->tokens, memory_order_relaxed);
    do {
        if (cur < cost)
            return TETHER_EBUDGET;
    } while (!atomic_compare_exchange_weak_explicit(
        &b->tokens, &cur, cur - cost, memory_order_relaxed,
        memory_order_relaxed));
    return cost;
}

void tether_budget_success(tether_budget *b, int cost) {
    if (!b)
        return;
    int refund = cost > 0 ? cost : b->o.success_refund;
    if (cost < 0 || refund == 0)
        return;
    int cap = b->o.capacity;
    refund = TETHER__MIN(refund, cap);
    int cur = atomic_load_explicit(&b->tokens, memory_order_relaxed);
    int next;
    do {
        if (cur >= cap)
            return;
        next = cur > cap - refund ? cap : cur + refund;
    } while (!atomic_compare_exchange_weak_explicit(
        &b->tokens, &cur, next, memory_order_relaxed, memory_order_relaxed));
}

int tether_budget_tokens(const tether_budget *b) {
    if (!b)
        return 0;
    return atomic_load_explicit((_Atomic int *)&b->tokens,
                                memory_order_relaxed);
}
