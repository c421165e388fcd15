/* metrics.c - pool metrics (docs/metrics.md): a snapshot struct and the
 * Prometheus text exposition. Counters the fast path would contend on live in
 * the slots (written only by their holder) and are summed here. */
#include "route.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int64_t tether_pool_hist_bound_us(int i) {
    if (i < 0 || i >= TETHER_HIST_BUCKETS)
        return INT64_MAX;
    return tether__hist_bounds_us[i];
}

size_t tether_pool_bytes_per_conn(void) {
    return sizeof(tether__slot);
}

static void count_slots(tether_pool *p, tether_pool_metrics *m) {
    uint64_t quick = atomic_load(&p->retired_quick);
    for (int i = 0; i < p->nslots; i++) {
        tether__slot *s = &p->slots[i];
        int st = slot_state(s);
        m->idle += st == SLOT_IDLE;
        m->in_use += st == SLOT_USED || st == SLOT_TXN;
        quick += atomic_load_explicit(&s->quick, memory_order_relaxed);
    }
    m->hist[0] += quick;
    for (int i = 0; i < TETHER_HIST_BUCKETS; i++)
        m->acquires += m->hist[i]; /* every acquire is in one bucket */
}

static void route_metrics(tether__route *r, tether_pool_metrics *m) {
    if (!r)
        return;
    m->reads_standby = atomic_load(&r->reads_standby);
    m->reads_primary = atomic_load(&r->reads_primary);
    m->reads_lagging = atomic_load(&r->reads_lagging);
    m->readonly_reroutes = atomic_load(&r->reroutes);
    m->lag_checks = atomic_load(&r->lag_checks);
}

/* Discovery's counters (docs/patroni.md), from the pool's connector. */
static void disc_metrics(tether_pool *p, tether_pool_metrics *m) {
    tether__disc_stats s;
    m->patroni_age_ms = -1;
    if (!tether__connector_disc_stats(p->o.connector, &s))
        return;
    m->patroni_requests = s.requests;
    m->patroni_failures = s.failures;
    m->patroni_kicks = s.kicks;
    m->patroni_members = s.members;
    m->patroni_age_ms = s.age_ms;
}

/* The limit (adaptive.c; docs/pool.md, "Adaptive limit"), lock held. An
 * adaptive pool's max_size is its ceiling, o.max_size its limit. */
static void limit_metrics(tether_pool *p, tether_pool_metrics *m) {
    const tether__adaptive *ad = &p->ad;
    m->limit = p->o.max_size;
    m->limit_min = m->min_size;
    m->limit_max = m->max_size;
    if (!ad->on)
        return;
    m->limit_adaptive = 1;
    m->limit_min = atomic_load(&ad->floor);
    m->limit_max = m->max_size = atomic_load(&ad->ceil);
    m->hold_short_us = (int64_t)ad->short_us;
    m->hold_long_us = (int64_t)ad->long_us;
    m->limit_up = ad->up;
    m->limit_down = ad->down;
    m->limit_full = ad->full;
}

static void pool_metrics(tether_pool *p, tether_pool_metrics *m) {
    memset(m, 0, sizeof(*m));
    for (int i = 0; i < TETHER_HIST_BUCKETS; i++)
        m->hist[i] = atomic_load(&p->hist[i]);
    m->hist_sum_us = atomic_load(&p->hist_sum_us);
    count_slots(p, m);
    pthread_mutex_lock(&p->lock);
    m->total = p->total;
    m->creating = p->creating;
    m->min_size = p->o.min_size; /* tether_pool_resize changes them */
    m->max_size = p->o.max_size;
    limit_metrics(p, m);
    pthread_mutex_unlock(&p->lock);
    m->waiters = tether__pool_queued(p);
    m->paused = atomic_load(&p->paused);
    tether__pool_held_ages(p, &m->held, &m->held_oldest_ms, &m->held_median_ms);
    m->evicted = atomic_load(&p->evicted);
    m->reconnects = atomic_load(&p->reconnects);
    m->rebalanced = atomic_load(&p->rebalanced);
    m->created = atomic_load(&p->created);
    m->connect_failures = atomic_load(&p->connect_failures);
    _Atomic uint64_t *c = p->closed;
    m->closed_idle = atomic_load(&c[CLOSE_IDLE]);
    m->closed_lifetime = atomic_load(&c[CLOSE_LIFETIME]);
    m->closed_broken = atomic_load(&c[CLOSE_BROKEN]);
    m->closed_cleared = atomic_load(&c[CLOSE_CLEARED]);
    m->closed_validation = atomic_load(&c[CLOSE_VALIDATION]);
    m->closed_reset = atomic_load(&c[CLOSE_RESET]);
    m->closed_discarded = atomic_load(&c[CLOSE_DISCARDED]);
    m->closed_shutdown = atomic_load(&c[CLOSE_SHUTDOWN]);
    m->timeouts = atomic_load(&p->timeouts);
    m->queue_full = atomic_load(&p->queue_full);
    m->breaker_rejections = atomic_load(&p->breaker_rejections);
    m->leaks = atomic_load(&p->leaks);
    m->stale_releases = atomic_load(&p->stale_releases);
    m->txn_reserved = atomic_load(&p->txn_reserved);
    m->txn_reservations = atomic_load(&p->txn_reservations);
    m->txn_expired = atomic_load(&p->txn_expired);
    m->txn_lost = atomic_load(&p->txn_lost);
    m->txn_rolled_back = atomic_load(&p->txn_rolled_back);
    tether_retry_stats rs;
    tether_retry_stats_get(p->retry, &rs);
    m->retries = rs.retries;
    m->breaker_state = p->breaker ? tether_breaker_state_get(p->breaker)
                                  : TETHER_BREAKER_CLOSED;
    m->breaker_blocked_ms =
        p->breaker ? tether__breaker_blocked_ms(p->breaker, NULL) : 0;
    m->probing = atomic_load(&p->probing);
    m->probes = atomic_load(&p->probes);
    m->probe_failures = atomic_load(&p->probe_failures);
    m->connects_cut = atomic_load(&p->connects_cut);
    route_metrics(p->route, m);
    disc_metrics(p, m);
}

/* ---- Prometheus text format --------------------------------------------- */

typedef struct out {
    char *buf;
    size_t cap, len;
} out;

static void emit(out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void emit(out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

/* The pool label value, escaped as the format requires (dst: room for
 * every byte of name escaped, and the NUL). */
static void label(const char *name, char *dst, size_t cap) {
    size_t j = 0;
    for (const char *s = name; *s && j + 2 < cap; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n') {
            dst[j++] = '\\';
            dst[j++] = *s == '\n' ? 'n' : *s;
        } else {
            dst[j++] = *s;
        }
    }
    dst[j] = '\0';
}

static void metric(out *o, const char *name, const char *type,
                   const char *help) {
    emit(o, "# HELP tether_pool_%s %s\n# TYPE tether_pool_%s %s\n", name, help,
         name, type);
}

static void gauges(out *o, const char *l, const tether_pool_metrics *m) {
    metric(o, "connections", "gauge", "Connections by state.");
    emit(o,
         "tether_pool_connections{pool=\"%s\",state=\"idle\"} %d\n"
         "tether_pool_connections{pool=\"%s\",state=\"in_use\"} %d\n"
         "tether_pool_connections{pool=\"%s\",state=\"creating\"} %d\n",
         l, m->idle, l, m->in_use, l, m->creating);
    metric(o, "connections_total", "gauge", "Connections open or opening.");
    emit(o, "tether_pool_connections_total{pool=\"%s\"} %d\n", l, m->total);
    metric(o, "max_connections", "gauge", "Configured max_size.");
    emit(o, "tether_pool_max_connections{pool=\"%s\"} %d\n", l, m->max_size);
    metric(o, "waiters", "gauge", "Callers waiting for a connection.");
    emit(o, "tether_pool_waiters{pool=\"%s\"} %d\n", l, m->waiters);
    metric(o, "breaker_open", "gauge",
           "1 while the connect breaker is not closed.");
    emit(o, "tether_pool_breaker_open{pool=\"%s\",state=\"%s\"} %d\n", l,
         tether_breaker_state_name(m->breaker_state),
         m->breaker_state != TETHER_BREAKER_CLOSED);
    metric(o, "breaker_blocked_seconds", "gauge",
           "How long the breaker keeps refusing new connections from now.");
    emit(o, "tether_pool_breaker_blocked_seconds{pool=\"%s\"} %.3f\n", l,
         (double)m->breaker_blocked_ms / 1000.0);
    metric(o, "probing", "gauge", "1 while the pool's probe connects.");
    emit(o, "tether_pool_probing{pool=\"%s\"} %d\n", l, m->probing);
    metric(o, "paused", "gauge", "1 while the pool is paused.");
    emit(o, "tether_pool_paused{pool=\"%s\"} %d\n", l, m->paused);
    metric(o, "held_oldest_seconds", "gauge",
           "Age of the oldest lease held (0: none).");
    emit(o, "tether_pool_held_oldest_seconds{pool=\"%s\"} %.3f\n", l,
         (double)m->held_oldest_ms / 1000.0);
    metric(o, "held_median_seconds", "gauge",
           "Median age of the leases held (0: none).");
    emit(o, "tether_pool_held_median_seconds{pool=\"%s\"} %.3f\n", l,
         (double)m->held_median_ms / 1000.0);
    metric(o, "limit", "gauge",
           "Connections the pool may hold now (adaptive: its current limit).");
    emit(o, "tether_pool_limit{pool=\"%s\",mode=\"%s\"} %d\n", l,
         m->limit_adaptive ? "adaptive" : "fixed", m->limit);
    metric(o, "limit_min", "gauge", "The floor of the limit.");
    emit(o, "tether_pool_limit_min{pool=\"%s\"} %d\n", l, m->limit_min);
    metric(o, "limit_max", "gauge", "The ceiling of the limit.");
    emit(o, "tether_pool_limit_max{pool=\"%s\"} %d\n", l, m->limit_max);
    metric(o, "hold_seconds", "gauge",
           "Adaptive limit's input: mean lease hold time, last window "
           "(short) and its baseline (long).");
    emit(o,
         "tether_pool_hold_seconds{pool=\"%s\",window=\"short\"} %.6f\n"
         "tether_pool_hold_seconds{pool=\"%s\",window=\"long\"} %.6f\n",
         l, (double)m->hold_short_us / 1e6, l, (double)m->hold_long_us / 1e6);
    metric(o, "txn_reserved", "gauge",
           "Connections reserved to an open transaction's key.");
    emit(o, "tether_pool_txn_reserved{pool=\"%s\"} %d\n", l, m->txn_reserved);
}

static void counter(out *o, const char *l, const char *name, const char *help,
                    uint64_t v) {
    metric(o, name, "counter", help);
    emit(o, "tether_pool_%s{pool=\"%s\"} %llu\n", name, l,
         (unsigned long long)v);
}

static void counters(out *o, const char *l, const tether_pool_metrics *m,
                     const tether__route *r) {
    counter(o, l, "acquires_total", "Connections handed out.", m->acquires);
    counter(o, l, "created_total", "Connections created.", m->created);
    counter(o, l, "connect_failures_total", "Connection creations that failed.",
            m->connect_failures);
    metric(o, "closed_total", "counter", "Connections closed, by reason.");
    const char *why[] = {"idle",       "lifetime", "broken",    "cleared",
                         "validation", "reset",    "discarded", "shutdown"};
    const uint64_t v[] = {m->closed_idle,       m->closed_lifetime,
                          m->closed_broken,     m->closed_cleared,
                          m->closed_validation, m->closed_reset,
                          m->closed_discarded,  m->closed_shutdown};
    for (int i = 0; i < 8; i++)
        emit(o, "tether_pool_closed_total{pool=\"%s\",reason=\"%s\"} %llu\n", l,
             why[i], (unsigned long long)v[i]);
    counter(o, l, "timeouts_total", "Acquires that timed out.", m->timeouts);
    counter(o, l, "queue_full_total", "Acquires refused: wait queue full.",
            m->queue_full);
    counter(o, l, "breaker_rejections_total",
            "Connection creations refused during a blocking period.",
            m->breaker_rejections);
    counter(o, l, "probes_total", "Probes of the server made by the pool.",
            m->probes);
    counter(o, l, "probe_failures_total", "Probes of the server that failed.",
            m->probe_failures);
    counter(o, l, "connects_cut_total",
            "Connects a caller's deadline cut short with nothing learnt.",
            m->connects_cut);
    counter(o, l, "retries_total", "Retries made by tether_pool_run.",
            m->retries);
    counter(o, l, "leaks_total", "Leases reported as possible leaks.",
            m->leaks);
    counter(o, l, "stale_releases_total",
            "Releases and discards refused: the lease was already ended.",
            m->stale_releases);
    counter(o, l, "evicted_total",
            "Idle connections closed by evict, pause or shrink.", m->evicted);
    counter(o, l, "reconnects_total", "Rolling reconnects started.",
            m->reconnects);
    counter(o, l, "rebalanced_total",
            "Connections retired to move them to servers Patroni's list "
            "gained.",
            m->rebalanced);
    metric(o, "limit_changes_total", "counter",
           "Changes of the adaptive limit: up, down, and the refusals as "
           "full (53300, 57P03) that brought it down.");
    emit(o,
         "tether_pool_limit_changes_total{pool=\"%s\",direction=\"up\"} "
         "%llu\n"
         "tether_pool_limit_changes_total{pool=\"%s\",direction=\"down\"} "
         "%llu\n"
         "tether_pool_limit_changes_total{pool=\"%s\",direction=\"full\"} "
         "%llu\n",
         l, (unsigned long long)m->limit_up, l,
         (unsigned long long)m->limit_down, l,
         (unsigned long long)m->limit_full);
    counter(o, l, "txn_reservations_total",
            "Keyed releases that reserved their connection to the key.",
            m->txn_reservations);
    counter(o, l, "txn_expired_total",
            "Reservations rolled back: held past tether_txn_reserve_timeout.",
            m->txn_expired);
    counter(o, l, "txn_lost_total",
            "Reservations lost: connection broken, pool cleared or closed.",
            m->txn_lost);
    counter(o, l, "txn_rolled_back_total",
            "Releases without a key that found a transaction open.",
            m->txn_rolled_back);
    { /* discovery from Patroni: 0 and -1 without it */
        counter(o, l, "patroni_requests_total",
                "Patroni REST calls made (GET /cluster).", m->patroni_requests);
        counter(o, l, "patroni_failures_total",
                "Patroni REST calls that failed or gave a bad answer.",
                m->patroni_failures);
        counter(o, l, "patroni_kicks_total",
                "Patroni refreshes asked for by a trigger.", m->patroni_kicks);
        metric(o, "patroni_members", "gauge",
               "Members in the Patroni list last known.");
        emit(o, "tether_pool_patroni_members{pool=\"%s\"} %d\n", l,
             m->patroni_members);
        metric(o, "patroni_age_seconds", "gauge",
               "Since the Patroni list last known came (-1: none ever).");
        emit(o, "tether_pool_patroni_age_seconds{pool=\"%s\"} %g\n", l,
             m->patroni_age_ms < 0 ? -1.0 : (double)m->patroni_age_ms / 1e3);
    }
    if (!r) /* read/write routing: on routing pools only */
        return;
    counter(o, l, "reads_standby_total",
            "TETHER_READONLY work done on a standby.", m->reads_standby);
    counter(o, l, "reads_primary_total",
            "TETHER_READONLY work sent to the primary: no standby up, or "
            "lagging.",
            m->reads_primary);
    counter(o, l, "reads_lagging_total",
            "TETHER_READONLY work sent to the primary: the standby lagged.",
            m->reads_lagging);
    counter(o, l, "readonly_reroutes_total",
            "Work a standby refused as a write, re-run on the primary.",
            m->readonly_reroutes);
    counter(o, l, "lag_checks_total", "Lag queries run on standbys.",
            m->lag_checks);
}

static void histogram(out *o, const char *l, const tether_pool_metrics *m) {
    metric(o, "acquire_seconds", "histogram",
           "Acquire latency (immediate acquires counted in the first "
           "bucket untimed).");
    uint64_t cum = 0;
    for (int i = 0; i < TETHER_HIST_BUCKETS; i++) {
        cum += m->hist[i];
        if (tether__hist_bounds_us[i] == INT64_MAX)
            emit(o,
                 "tether_pool_acquire_seconds_bucket{pool=\"%s\","
                 "le=\"+Inf\"} %llu\n",
                 l, (unsigned long long)cum);
        else
            emit(o,
                 "tether_pool_acquire_seconds_bucket{pool=\"%s\","
                 "le=\"%g\"} %llu\n",
                 l, (double)tether__hist_bounds_us[i] / 1e6,
                 (unsigned long long)cum);
    }
    emit(o, "tether_pool_acquire_seconds_sum{pool=\"%s\"} %g\n", l,
         (double)m->hist_sum_us / 1e6);
    emit(o, "tether_pool_acquire_seconds_count{pool=\"%s\"} %llu\n", l,
         (unsigned long long)cum);
}

/* ---- OpenTelemetry's names ---------------------------------------------- */

/* The semantic conventions' database client connection-pool metrics
 * (db.client.connection.*), in Prometheus spelling as OpenTelemetry's
 * Prometheus mapping gives it: dots become underscores, a unit in seconds
 * adds _seconds, a counter adds _total; the attributes
 * db.client.connection.pool.name and .state are shortened to pool_name and
 * state (docs/metrics.md, "OpenTelemetry names"). */

static void otel_metric(out *o, const char *name, const char *type,
                        const char *help) {
    emit(o,
         "# HELP db_client_connection_%s %s\n"
         "# TYPE db_client_connection_%s %s\n",
         name, help, name, type);
}

static void otel_histogram(out *o, const char *l, const char *name,
                           const char *help, const uint64_t *hist,
                           uint64_t sum_us) {
    otel_metric(o, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i < TETHER_HIST_BUCKETS; i++) {
        cum += hist[i];
        if (tether__hist_bounds_us[i] == INT64_MAX)
            emit(o,
                 "db_client_connection_%s_bucket{pool_name=\"%s\","
                 "le=\"+Inf\"} %llu\n",
                 name, l, (unsigned long long)cum);
        else
            emit(o,
                 "db_client_connection_%s_bucket{pool_name=\"%s\","
                 "le=\"%g\"} %llu\n",
                 name, l, (double)tether__hist_bounds_us[i] / 1e6,
                 (unsigned long long)cum);
    }
    emit(o, "db_client_connection_%s_sum{pool_name=\"%s\"} %g\n", name, l,
         (double)sum_us / 1e6);
    emit(o, "db_client_connection_%s_count{pool_name=\"%s\"} %llu\n", name, l,
         (unsigned long long)cum);
}

static void otel(out *o, const char *l, tether_pool *p,
                 const tether_pool_metrics *m) {
    otel_metric(o, "count", "gauge", "Connections by state (idle, used).");
    emit(o,
         "db_client_connection_count{pool_name=\"%s\",state=\"idle\"} %d\n"
         "db_client_connection_count{pool_name=\"%s\",state=\"used\"} %d\n",
         l, m->idle, l, m->in_use);
    otel_metric(o, "idle_max", "gauge", "The most idle connections allowed.");
    emit(o, "db_client_connection_idle_max{pool_name=\"%s\"} %d\n", l,
         m->max_size);
    otel_metric(o, "idle_min", "gauge", "The fewest idle connections kept.");
    emit(o, "db_client_connection_idle_min{pool_name=\"%s\"} %d\n", l,
         m->min_size);
    otel_metric(o, "max", "gauge", "The most open connections allowed.");
    emit(o, "db_client_connection_max{pool_name=\"%s\"} %d\n", l, m->max_size);
    otel_metric(o, "pending_requests", "gauge",
                "Callers waiting for a connection.");
    emit(o, "db_client_connection_pending_requests{pool_name=\"%s\"} %d\n", l,
         m->waiters);
    otel_metric(o, "timeouts_total", "counter",
                "Acquires that timed out waiting for a connection.");
    emit(o, "db_client_connection_timeouts_total{pool_name=\"%s\"} %llu\n", l,
         (unsigned long long)m->timeouts);
    uint64_t create[TETHER_HIST_BUCKETS];
    for (int i = 0; i < TETHER_HIST_BUCKETS; i++)
        create[i] = atomic_load(&p->create_hist[i]);
    otel_histogram(o, l, "create_time_seconds",
                   "Time to create a connection (connects that succeeded).",
                   create, atomic_load(&p->create_sum_us));
    otel_histogram(o, l, "wait_time_seconds",
                   "Time to obtain a connection (tether_pool_acquire_seconds).",
                   m->hist, m->hist_sum_us);
    uint64_t use[TETHER_HIST_BUCKETS];
    for (int i = 0; i < TETHER_HIST_BUCKETS; i++)
        use[i] = atomic_load(&p->use_hist[i]);
    otel_histogram(o, l, "use_time_seconds",
                   "Time a connection was held, from acquire to release "
                   "(with leak detection on).",
                   use, atomic_load(&p->use_sum_us));
}

size_t tether_pool_metrics_prometheus(tether_pool *p, char *buf, size_t size) {
    if (!p) { /* no pool: no text */
        if (buf && size)
            buf[0] = '\0';
        return 0;
    }
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    char l[2 * TETHER_POOL_NAME_MAX + 1]; /* names are checked at create */
    label(p->name, l, sizeof(l));
    out o = {buf, buf ? size : 0, 0};
    if (buf && size)
        buf[0] = '\0';
    gauges(&o, l, &m);
    counters(&o, l, &m, p->route);
    histogram(&o, l, &m);
    otel(&o, l, p, &m);
    return o.len;
}

const char *tether_pool_name(const tether_pool *p) {
    return p ? p->name : NULL;
}

void tether_pool_metrics_get_sized(tether_pool *p, tether_pool_metrics *m,
                                   size_t size) {
    tether_pool_metrics full;
    if (p)
        pool_metrics(p, &full);
    else
        memset(&full, 0, sizeof(full)); /* no pool: zeros */
    tether__sized_out(m, size, &full, sizeof(full));
}
