/* report.c - the admin socket's answers (admin.h, docs/operations.md):
 * the pools document, read from each live pool's metrics, its connector's
 * host list and its holders, and the control requests, applied through
 * the public runtime-control API. Everything runs with the live list
 * locked (live.h), so no pool is destroyed under it; nothing here takes a
 * lock the acquire path takes, but for the moments tether_pool_metrics_get
 * and the control calls hold the pool's own. Pool names carry no secret
 * (tether_pool_name's rule); connection strings are never shown. */
#include "admin.h"
#include "live.h"
#include "pool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HELD_MAX 8 /* acquire sites shown per pool */

void tether__admin_put(tether__admin_buf *b, const char *fmt, ...) {
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 1024;
        while (cap - b->len <= (size_t)n)
            cap *= 2;
        char *q = tether__realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* The length of the valid UTF-8 sequence at s, or 0. */
static int utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    int n = c < 0x80                 ? 1
            : c >= 0xC2 && c <= 0xDF ? 2
            : (c & 0xF0) == 0xE0     ? 3
            : c >= 0xF0 && c <= 0xF4 ? 4
                                     : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) ||
        (c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return n;
}

/* A JSON string: quotes, backslashes and control bytes escaped, bytes
 * that are not UTF-8 replaced. */
static void put_str(tether__admin_buf *b, const char *s) {
    tether__admin_put(b, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
        int n = utf8_len(p);
        if (n == 0) {
            tether__admin_put(b, "\\ufffd");
            p++;
        } else if (*p == '"' || *p == '\\') {
            tether__admin_put(b, "\\%c", *p++);
        } else if (*p < 0x20 || *p == 0x7f) {
            tether__admin_put(b, "\\u%04x", *p++);
        } else {
            tether__admin_put(b, "%.*s", n, (const char *)p);
            p += n;
        }
    }
    tether__admin_put(b, "\"");
}

/* The acquire-time quantile q in microseconds: the upper bound of the
 * bucket it falls in (-1 with no acquire; the last bucket has none: its
 * lower bound). */
static int64_t quantile_us(const tether_pool_metrics *m, double q) {
    uint64_t total = 0, cum = 0;
    for (int i = 0; i < TETHER_HIST_BUCKETS; i++)
        total += m->hist[i];
    if (total == 0)
        return -1;
    uint64_t want = (uint64_t)(q * (double)total);
    if (want < 1)
        want = 1;
    for (int i = 0; i < TETHER_HIST_BUCKETS; i++) {
        cum += m->hist[i];
        if (cum >= want) {
            int64_t b = tether_pool_hist_bound_us(i);
            return b == INT64_MAX ? tether_pool_hist_bound_us(i - 1) : b;
        }
    }
    return -1;
}

static const char *host_state(int st) {
    switch (st) {
    case HS_DOWN:
        return "down";
    case HS_PRIMARY:
        return "primary";
    case HS_STANDBY:
        return "standby";
    default:
        return "unknown";
    }
}

/* The connector's hosts with what its host-state cache knows of them. */
static void put_hosts(tether__admin_buf *b, tether_pool *p) {
    tether_connector *c = p->o.connector;
    tether__admin_put(b, "\"hosts\":[");
    if (c) {
        int64_t now = tether__now_ms(NULL);
        pthread_mutex_lock(&c->lock);
        for (int i = 0; i < c->cfg.neps && i < TETHER__MAX_HOSTS; i++) {
            const tether__ep *ep = &c->cfg.eps[i];
            int st = c->cache && c->cache[i].until_ms > now ? c->cache[i].state
                                                            : HS_UNKNOWN;
            tether__admin_put(b, "%s{\"host\":", i ? "," : "");
            put_str(b, ep->host ? ep->host : ep->hostaddr ? ep->hostaddr : "");
            tether__admin_put(b, ",\"port\":%d,\"role\":\"%s\"}", ep->port,
                              host_state(st));
        }
        pthread_mutex_unlock(&c->lock);
    }
    tether__admin_put(b, "]");
}

static int by_age(const void *a, const void *b) {
    const tether_pool_holder *x = a, *y = b;
    return x->oldest_ms < y->oldest_ms   ? 1
           : x->oldest_ms > y->oldest_ms ? -1
                                         : 0;
}

/* The longest-held leases by acquire site ("held_known": false when this
 * build cannot tell). */
static void put_held(tether__admin_buf *b, tether_pool *p) {
    tether_pool_holder h[HELD_MAX];
    int n = tether_pool_holders(p, h, HELD_MAX);
    tether__admin_put(b, "\"held_known\":%s,\"held\":[",
                      n < 0 ? "false" : "true");
    if (n > 0)
        qsort(h, (size_t)n, sizeof(h[0]), by_age);
    for (int i = 0; i < n; i++) {
        h[i].site[sizeof(h[i].site) - 1] = '\0';
        tether__admin_put(b, "%s{\"site\":", i ? "," : "");
        put_str(b, h[i].site);
        tether__admin_put(b, ",\"count\":%d,\"age_ms\":%lld}", h[i].count,
                          (long long)h[i].oldest_ms);
    }
    tether__admin_put(b, "]");
}

typedef struct walk {
    tether__admin_buf *b;
    int n; /* pools written */
} walk;

static int put_pool(tether_pool *p, void *ctx) {
    walk *w = ctx;
    tether__admin_buf *b = w->b;
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    int paused = tether_pool_paused(p);
    tether__admin_put(b, "%s{\"name\":", w->n++ ? "," : "");
    put_str(b, tether_pool_name(p));
    tether__admin_put(
        b,
        ",\"size\":%d,\"in_use\":%d,\"idle\":%d,\"creating\":%d,"
        "\"waiting\":%d,\"min\":%d,\"max\":%d,\"paused\":%s,"
        "\"acquires\":%llu,\"timeouts\":%llu,\"queue_full\":%llu,"
        "\"acquire_p50_us\":%lld,\"acquire_p99_us\":%lld,"
        "\"created\":%llu,\"connect_failures\":%llu,\"leaks\":%llu,"
        "\"breaker\":\"%s\",\"breaker_blocked_ms\":%lld,",
        m.total, m.in_use, m.idle, m.creating, m.waiters, m.min_size,
        m.max_size,
        paused < 0 ? "null"
        : paused   ? "true"
                   : "false",
        (unsigned long long)m.acquires, (unsigned long long)m.timeouts,
        (unsigned long long)m.queue_full, (long long)quantile_us(&m, 0.50),
        (long long)quantile_us(&m, 0.99), (unsigned long long)m.created,
        (unsigned long long)m.connect_failures, (unsigned long long)m.leaks,
        tether_breaker_state_name(m.breaker_state),
        (long long)m.breaker_blocked_ms);
    tether__admin_put(b,
                      "\"limit\":%d,\"limit_mode\":\"%s\",\"limit_min\":%d,"
                      "\"limit_max\":%d,\"hold_us\":%lld,\"hold_base_us\":%lld,"
                      "\"limit_up\":%llu,\"limit_down\":%llu,"
                      "\"limit_full\":%llu,",
                      m.limit, m.limit_adaptive ? "adaptive" : "fixed",
                      m.limit_min, m.limit_max, (long long)m.hold_short_us,
                      (long long)m.hold_long_us, (unsigned long long)m.limit_up,
                      (unsigned long long)m.limit_down,
                      (unsigned long long)m.limit_full);
    put_hosts(b, p);
    tether_pool *r = tether_pool_read_side(p);
    tether__admin_put(b, ",\"read_side\":");
    if (r) {
        put_str(b, tether_pool_name(r));
        tether__admin_put(b,
                          ",\"reads_standby\":%llu,\"reads_primary\":%llu,"
                          "\"reads_lagging\":%llu,\"lag_checks\":%llu",
                          (unsigned long long)m.reads_standby,
                          (unsigned long long)m.reads_primary,
                          (unsigned long long)m.reads_lagging,
                          (unsigned long long)m.lag_checks);
    } else {
        tether__admin_put(b, "null");
    }
    tether__admin_put(b, ",");
    put_held(b, p);
    tether__admin_put(b, "}");
    return 0;
}

/* One control request applied to every pool of that name. */
typedef struct control {
    const tether__admin_req *r;
    int matched, failed, evicted;
    tether_error err;
} control;

static int control_one(tether_pool *p, void *ctx) {
    control *c = ctx;
    if (strcmp(tether_pool_name(p), c->r->name) != 0)
        return 0;
    c->matched++;
    int rc = 0;
    switch (c->r->verb) {
    case TETHER__ADMIN_PAUSE:
        rc = tether_pool_pause(p, 0);
        break;
    case TETHER__ADMIN_PAUSE_IDLE:
        rc = tether_pool_pause(p, TETHER_PAUSE_CLOSE_IDLE);
        break;
    case TETHER__ADMIN_RESUME:
        rc = tether_pool_resume(p);
        break;
    case TETHER__ADMIN_RESIZE:
        rc = tether_pool_resize(p, c->r->min, c->r->max, &c->err);
        break;
    case TETHER__ADMIN_EVICT:
        rc = tether_pool_evict_idle(p);
        if (rc > 0)
            c->evicted += rc;
        break;
    case TETHER__ADMIN_RECONNECT:
        rc = tether_pool_reconnect(p);
        break;
    default:
        break;
    }
    if (rc < 0) {
        c->failed++;
        if (!c->err.code)
            tether_error_set(&c->err, rc, TETHER_CLASS_PERMANENT, "%s",
                             tether_strerror(rc));
    }
    return 0;
}

void tether__admin_answer(const tether__admin_req *r, tether__admin_buf *b) {
    if (r->verb == TETHER__ADMIN_PING) {
        tether__admin_put(b, "ok\n");
        return;
    }
    if (r->verb == TETHER__ADMIN_POOLS) {
        walk w = {b, 0};
        tether__admin_put(b, "{\"pools\":[");
        tether__live_walk(put_pool, &w);
        tether__admin_put(b, "]}\n");
        return;
    }
    control c = {.r = r};
    tether__live_walk(control_one, &c);
    if (c.matched == 0)
        tether__admin_put(b, "error: no pool of that name\n");
    else if (c.failed) {
        for (char *q = c.err.message; *q; q++) /* one line */
            if ((unsigned char)*q < 0x20)
                *q = ' ';
        tether__admin_put(b, "error: %s\n", c.err.message);
    } else if (r->verb == TETHER__ADMIN_EVICT)
        tether__admin_put(b, "ok %d closed\n", c.evicted);
    else
        tether__admin_put(b, "ok\n");
}
