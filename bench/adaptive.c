/* adaptive.c - the client of bench/run-adaptive (issue 35, the adaptive
 * pool limit): T threads run one statement through one tether pool
 * (tether_pool_open on the connection string, so the pool's settings are
 * its keywords: tether_pool_max, tether_pool_min, tether_pool_limit) for a
 * warm-up and then a measured window, and it prints the throughput, the
 * latency of acquire + statement (p50, p99, max), the errors by code, the
 * 53300 refusals its connects met, and the pool's limit over time when the
 * pool exposes one.
 *
 *   bench_adaptive --conninfo C --sql SQL [--sql SQL2 ...] [--threads T]
 *                  [--seconds S] [--warmup W] [--start-at MS]
 *                  [--sample-ms MS] [--timeout-ms MS]
 *                  [--limit-metric NAME] [--json]
 *   bench_adaptive --conninfo C --check
 *
 * With several --sql (at most 8) the statements take turns on the same
 * pool, each with its warm-up and window, and each gets its own report
 * (one JSON line each, "index" its place): the pool is not touched
 * between them, so an adaptive limit carries what it learnt from one to
 * the next.
 * --start-at MS (CLOCK_REALTIME milliseconds) starts the measured window
 * at that instant instead of after W seconds, so that the processes of a
 * fleet (bench/run-adaptive) measure the same window. --check only opens
 * the pool and closes it (no connection: tether_pool_min 0), to learn
 * whether this build takes the string's keywords.
 *
 * The limit is read from the pool's Prometheus text
 * (tether_pool_metrics_prometheus), so this program builds whether or not
 * the library has an adaptive limit: the metric named by --limit-metric
 * (default: tether_pool_limit, else the first gauge with "limit" in its
 * name); every metric whose name holds "limit", "adaptive", "rtt" or
 * "hold_seconds" is printed at the end. Without one, the limit is null
 * and only the pool's connections in use and open are sampled. (With a
 * library that has tether_pool_limit, a fixed pool's limit is its
 * maximum.)
 *
 * Exit status: 0 after a run (whatever errors it counted), 1 when it could
 * not run, 2 for bad arguments, 3 when the connection string is refused
 * (TETHER_ESPEC: an unknown keyword or value, the message printed on
 * stderr). */
#include "bench_base.h"
#include "hist.h"

#include <tether.h>
#include <tether_pq.h>

#include <libpq-fe.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "bench_adaptive"
#define MAX_CODES 64 /* -code of a TETHER_E* code, counted below this */
#define PROM_CAP (256 * 1024)

/* The phases of each statement's turn: warm-up, the measured window, after
 * it; cur is the statement running (--sql given more than once: in turn,
 * on the same pool). */
enum { PH_WARMUP, PH_WINDOW, PH_DONE };
#define MAX_SQL 8
static _Atomic int phase;
static _Atomic int cur;
static _Atomic int stop;

/* The connect events the pool reports (tether_pool_open's on_event), by
 * statement. */
static _Atomic uint64_t refused_warmup[MAX_SQL], refused_window[MAX_SQL];
static _Atomic uint64_t connects_window[MAX_SQL]; /* 53300 refusals, and
                                                     connects made */

/* One thread's figures for one statement's window. */
struct stats {
    lat_hist hist;
    uint64_t ops, errors, run53300;
    uint64_t codes[MAX_CODES];
    char first_error[256];
};

struct worker {
    pthread_t tid;
    tether_pool *pool;
    const char *const *sql; /* the statements, by index (cur) */
    int64_t timeout_ms;
    struct stats *st; /* one per statement */
    /* read by the sampler while the thread runs: every op, warm-up too */
    _Atomic uint64_t all_ops, all_lat_ns;
};

static pthread_barrier_t start;

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A refusal by a full server, as the pq driver classifies one
 * (src/drivers/pq.c: connect messages). */
static bool is_53300(const char *msg) {
    return msg && (strstr(msg, "too many clients") ||
                   strstr(msg, "remaining connection slots are reserved") ||
                   strstr(msg, "too many connections for"));
}

static void on_connect(void *ctx, const tether_connect_event *ev) {
    (void)ctx;
    int ph = atomic_load_explicit(&phase, memory_order_relaxed);
    int k = atomic_load_explicit(&cur, memory_order_relaxed);
    if (ev->phase == TETHER_PHASE_FAIL && is_53300(ev->message))
        atomic_fetch_add(
            ph == PH_WINDOW ? &refused_window[k] : &refused_warmup[k], 1);
    else if (ev->phase == TETHER_PHASE_OK && ph == PH_WINDOW)
        atomic_fetch_add(&connects_window[k], 1);
}

static int work(void *handle, void *arg, const tether_attempt *a,
                tether_error *err) {
    (void)a;
    PGresult *r = PQexec(handle, (const char *)arg);
    int rc = tether_pq_error(handle, r, err);
    PQclear(r);
    return rc;
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    tether_error err;
    pthread_barrier_wait(&start);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        int k = atomic_load_explicit(&cur, memory_order_relaxed);
        uint64_t t0 = bench_now_ns();
        int rc = tether_pool_run_for(w->pool, 0, w->timeout_ms, work,
                                     (void *)w->sql[k], &err);
        uint64_t dt = bench_now_ns() - t0;
        atomic_fetch_add_explicit(&w->all_ops, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&w->all_lat_ns, dt, memory_order_relaxed);
        /* counted in statement k's window only, and only if it ended
         * there */
        if (atomic_load_explicit(&phase, memory_order_relaxed) != PH_WINDOW ||
            atomic_load_explicit(&cur, memory_order_relaxed) != k)
            continue;
        struct stats *st = &w->st[k];
        if (rc == 0) {
            lat_hist_add(&st->hist, dt);
            st->ops++;
            continue;
        }
        st->errors++;
        if (-rc > 0 && -rc < MAX_CODES)
            st->codes[-rc]++;
        if (!strcmp(err.sqlstate, "53300"))
            st->run53300++;
        if (!st->first_error[0])
            snprintf(st->first_error, sizeof st->first_error, "%s: %.200s",
                     tether_errname(rc), err.message);
    }
    return NULL;
}

/* ---- the pool's limit, from its Prometheus text ----------------------- */

struct sample {
    int64_t wall_ms; /* CLOCK_REALTIME */
    double limit;    /* valid when has_limit */
    int has_limit, in_use, total, waiters, creating;
    uint64_t ops, lat_ns; /* in the interval */
};

/* The space before the value on a line of len bytes (the last one: a
 * label's value may hold spaces), or NULL. */
static const char *value_space(const char *l, size_t len) {
    for (size_t i = len; i > 0; i--)
        if (l[i - 1] == ' ')
            return l + i - 1;
    return NULL;
}

/* A number as JSON: null unless finite. */
static void json_number(double v) {
    if (isfinite(v))
        printf("%.6g", v);
    else
        printf("null");
}

/* The value of metric name in text (the first series), or -1 if absent.
 * With name "" (auto): tether_pool_limit, else the first metric whose name
 * holds "limit" and ends in none of the counter or histogram suffixes;
 * found (if not NULL) gets the name used. */
static int prom_value(const char *text, const char *name, double *out,
                      char *found, size_t cap) {
    const char *auto_pick = NULL;
    size_t auto_len = 0;
    double auto_val = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (*l != '#') {
            size_t n = strcspn(l, "{ ");
            const char *sp = value_space(l, len);
            if (n <= len && sp && isfinite(strtod(sp + 1, NULL))) {
                double v = strtod(sp + 1, NULL);
                if (*name) {
                    if (n == strlen(name) && !strncmp(l, name, n)) {
                        *out = v;
                        if (found)
                            snprintf(found, cap, "%s", name);
                        return 0;
                    }
                } else {
                    char nm[128];
                    snprintf(nm, sizeof nm, "%.*s", (int)(n < 127 ? n : 127),
                             l);
                    size_t nl = strlen(nm);
                    bool suffix = false;
                    static const char *const sfx[] = {
                        "_total", "_bucket", "_sum", "_count", "_seconds"};
                    for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
                        size_t sl = strlen(sfx[i]);
                        if (nl >= sl && !strcmp(nm + nl - sl, sfx[i]))
                            suffix = true;
                    }
                    if (!strcmp(nm, "tether_pool_limit")) {
                        *out = v;
                        if (found)
                            snprintf(found, cap, "%s", nm);
                        return 0;
                    }
                    if (!auto_pick && strstr(nm, "limit") && !suffix) {
                        auto_pick = l;
                        auto_len = n;
                        auto_val = v;
                    }
                }
            }
        }
        l = e ? e + 1 : NULL;
    }
    if (auto_pick) {
        *out = auto_val;
        if (found)
            snprintf(found, cap, "%.*s", (int)auto_len, auto_pick);
        return 0;
    }
    return -1;
}

struct sampler {
    pthread_t tid;
    tether_pool *pool;
    struct worker *w;
    int threads;
    int64_t period_ms;
    struct sample *s;
    size_t n, cap;
    const char *metric; /* "" = auto */
    char found[128];    /* the metric read, "" if none */
    char *buf;
};

static void take_sample(struct sampler *sp, uint64_t *last_ops,
                        uint64_t *last_lat) {
    if (sp->n == sp->cap)
        return;
    struct sample *s = &sp->s[sp->n];
    memset(s, 0, sizeof *s);
    s->wall_ms = wall_ms();
    tether_pool_metrics m;
    tether_pool_metrics_get(sp->pool, &m);
    s->in_use = m.in_use;
    s->total = m.total;
    s->waiters = m.waiters;
    s->creating = m.creating;
    size_t len = tether_pool_metrics_prometheus(sp->pool, sp->buf, PROM_CAP);
    if (len < PROM_CAP) {
        double v;
        char found[128];
        if (!prom_value(sp->buf, sp->metric, &v, found, sizeof found)) {
            s->limit = v;
            s->has_limit = 1;
            snprintf(sp->found, sizeof sp->found, "%s", found);
        }
    }
    uint64_t ops = 0, lat = 0;
    for (int i = 0; i < sp->threads; i++) {
        ops += atomic_load_explicit(&sp->w[i].all_ops, memory_order_relaxed);
        lat += atomic_load_explicit(&sp->w[i].all_lat_ns, memory_order_relaxed);
    }
    s->ops = ops - *last_ops;
    s->lat_ns = lat - *last_lat;
    *last_ops = ops;
    *last_lat = lat;
    sp->n++;
}

static void *sampler_main(void *arg) {
    struct sampler *sp = arg;
    uint64_t last_ops = 0, last_lat = 0;
    uint64_t next = bench_now_ns();
    while (!atomic_load(&stop)) {
        take_sample(sp, &last_ops, &last_lat);
        next += (uint64_t)sp->period_ms * 1000000u;
        bench_sleep_until(next);
    }
    take_sample(sp, &last_ops, &last_lat);
    return NULL;
}

/* Every metric whose name holds limit, adaptive, rtt or hold_seconds (the
 * adaptive limit's inputs, docs/metrics.md), as JSON members ("name":
 * value, the first series of each), for the reader. */
static void print_limit_metrics(const char *text) {
    char seen[32][128];
    int nseen = 0;
    printf("{");
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        size_t n = strcspn(l, "{ ");
        const char *sp = value_space(l, len);
        if (*l != '#' && sp && n < 128) {
            char nm[128];
            snprintf(nm, sizeof nm, "%.*s", (int)n, l);
            bool dup = false;
            for (int i = 0; i < nseen; i++)
                dup = dup || !strcmp(seen[i], nm);
            if (!dup && nseen < 32 &&
                (strstr(nm, "limit") || strstr(nm, "adaptive") ||
                 strstr(nm, "rtt") || strstr(nm, "hold_seconds"))) {
                printf("%s\"%s\":", nseen ? "," : "", nm);
                json_number(strtod(sp + 1, NULL));
                snprintf(seen[nseen++], sizeof seen[0], "%s", nm);
            }
        }
        l = e ? e + 1 : NULL;
    }
    printf("}");
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: %s --conninfo C --sql SQL [--sql SQL2 ...] [--threads T]\n"
        "         [--seconds S] [--warmup W] [--start-at MS] [--sample-ms MS]\n"
        "         [--timeout-ms MS] [--limit-metric NAME] [--json]\n"
        "       %s --conninfo C --check\n"
        "  defaults: 64 threads, 5 s, warm-up 1 s, samples every 250 "
        "ms,\n"
        "  acquire+statement timeout 10000 ms\n",
        PROG, PROG);
}

static int parse_ms(const char *name, const char *s, int64_t min,
                    int64_t *out) {
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < min) {
        fprintf(stderr, "%s: invalid %s '%s'\n", PROG, name, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_secs(const char *name, const char *s, double min,
                      double *out) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= min) || v > 86400) {
        fprintf(stderr, "%s: invalid %s '%s'\n", PROG, name, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* One statement's window: when it started (CLOCK_REALTIME ms), how long it
 * ran, the pool's metrics at its ends. */
struct window {
    int64_t wall;
    double elapsed;
    tether_pool_metrics m0, m1;
};

static void json_string(const char *s) {
    putchar('"');
    for (const char *c = s; *c; c++)
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if ((unsigned char)*c >= 0x20)
            putchar(*c);
    putchar('"');
}

/* Prints statement k's figures: a human block, or one JSON line. The
 * samples shown are those after the previous statement's window (from
 * the start for the first) up to the end of k's (to the end for the last),
 * with t_ms from k's window's start. */
static void report(int k, int nsql, const char *sql, int threads,
                   const struct worker *w, struct sampler *sp,
                   const struct window *win, int64_t sample_ms, int json) {
    const struct window *wk = &win[k];
    int64_t from =
        k ? win[k - 1].wall + (int64_t)(win[k - 1].elapsed * 1000) : INT64_MIN;
    int64_t to =
        k + 1 < nsql ? wk->wall + (int64_t)(wk->elapsed * 1000) : INT64_MAX;
    lat_hist *all = calloc(1, sizeof *all);
    uint64_t ops = 0, errors = 0, run53300 = 0, codes[MAX_CODES] = {0};
    const char *first_error = "";
    for (int i = 0; i < threads; i++) {
        const struct stats *st = &w[i].st[k];
        if (all)
            lat_hist_merge(all, &st->hist);
        ops += st->ops;
        errors += st->errors;
        run53300 += st->run53300;
        for (int c = 0; c < MAX_CODES; c++)
            codes[c] += st->codes[c];
        if (!*first_error && st->first_error[0])
            first_error = st->first_error;
    }
    lat_summary ls = {0, 0, 0};
    if (all)
        ls = lat_hist_summary(all, 1e6); /* ms */
    free(all);
    double tps = (double)ops / wk->elapsed;
    /* The limit over the window: min, max, last, mean of the samples. */
    int has_limit = 0;
    double lmin = 0, lmax = 0, llast = 0, lsum = 0;
    int ln = 0;
    for (size_t i = 0; i < sp->n; i++) {
        const struct sample *x = &sp->s[i];
        int64_t t = x->wall_ms - wk->wall;
        if (!x->has_limit || t < 0 || (double)t > wk->elapsed * 1000)
            continue;
        if (!has_limit || x->limit < lmin)
            lmin = x->limit;
        if (!has_limit || x->limit > lmax)
            lmax = x->limit;
        has_limit = 1;
        llast = x->limit;
        lsum += x->limit;
        ln++;
    }
    uint64_t rw = atomic_load(&refused_warmup[k]),
             rr = atomic_load(&refused_window[k]),
             cw = atomic_load(&connects_window[k]);

    if (!json) {
        printf("%s%s\n%d threads, %.1f s: %.1f tps, p50 %.3f ms, p99 %.3f ms, "
               "max %.3f ms, %llu errors\n",
               k ? "\n" : "", sql, threads, wk->elapsed, tps, ls.p50, ls.p99,
               ls.max, (unsigned long long)errors);
        if (*first_error)
            printf("first error: %s\n", first_error);
        printf("53300 refusals: %llu in the warm-up, %llu in the window; "
               "%llu connects in the window\n",
               (unsigned long long)rw, (unsigned long long)rr,
               (unsigned long long)cw);
        if (has_limit)
            printf("limit (%s): min %g, max %g, mean %.2f, last %g\n",
                   sp->found, lmin, lmax, lsum / ln, llast);
        else
            printf("limit: not exposed by this build's pool metrics\n");
        printf("%-8s %-8s %-6s %-6s %-7s %-8s %s\n", "t_ms", "limit", "in_use",
               "total", "waiters", "tps", "mean_ms");
        for (size_t i = 0; i < sp->n; i++) {
            const struct sample *x = &sp->s[i];
            if (x->wall_ms <= from || x->wall_ms > to)
                continue;
            char lim[32] = "-";
            if (x->has_limit)
                snprintf(lim, sizeof lim, "%g", x->limit);
            printf("%-8lld %-8s %-6d %-6d %-7d %-8.0f %.3f\n",
                   (long long)(x->wall_ms - wk->wall), lim, x->in_use, x->total,
                   x->waiters, (double)x->ops * 1000 / (double)sample_ms,
                   x->ops ? (double)x->lat_ns / (double)x->ops / 1e6 : 0.0);
        }
        return;
    }
    printf("{\"index\":%d,\"statements\":%d,\"threads\":%d,\"seconds\":%.3f,"
           "\"ops\":%llu,\"tps\":%.2f,\"p50_ms\":%.4f,\"p99_ms\":%.4f,"
           "\"max_ms\":%.4f,\"errors\":%llu,\"errors_by_code\":{",
           k, nsql, threads, wk->elapsed, (unsigned long long)ops, tps, ls.p50,
           ls.p99, ls.max, (unsigned long long)errors);
    int first = 1;
    for (int c = 1; c < MAX_CODES; c++)
        if (codes[c]) {
            printf("%s\"%s\":%llu", first ? "" : ",", tether_errname(-c),
                   (unsigned long long)codes[c]);
            first = 0;
        }
    printf("},\"first_error\":");
    json_string(first_error);
    printf(
        ",\"run_53300\":%llu,\"refused_53300_warmup\":%llu,"
        "\"refused_53300\":%llu,\"connects\":%llu,"
        "\"connect_failures\":%llu,\"max_size\":%d,",
        (unsigned long long)run53300, (unsigned long long)rw,
        (unsigned long long)rr, (unsigned long long)cw,
        (unsigned long long)(wk->m1.connect_failures - wk->m0.connect_failures),
        wk->m1.max_size);
    if (has_limit)
        printf("\"limit_metric\":\"%s\",\"limit_min\":%g,\"limit_max\":%g,"
               "\"limit_mean\":%.3f,\"limit_last\":%g,",
               sp->found, lmin, lmax, lsum / ln, llast);
    else
        printf("\"limit_metric\":null,\"limit_min\":null,\"limit_max\":"
               "null,\"limit_mean\":null,\"limit_last\":null,");
    printf("\"limit_metrics\":");
    print_limit_metrics(sp->buf);
    /* [wall_ms, t_ms, limit|null, in_use, total, waiters, ops, mean_ms,
     * creating]: total counts the connects in progress (creating) too */
    printf(",\"sample_ms\":%lld,\"samples\":[", (long long)sample_ms);
    first = 1;
    for (size_t i = 0; i < sp->n; i++) {
        const struct sample *x = &sp->s[i];
        if (x->wall_ms <= from || x->wall_ms > to)
            continue;
        printf("%s[%lld,%lld,", first ? "" : ",", (long long)x->wall_ms,
               (long long)(x->wall_ms - wk->wall));
        first = 0;
        if (x->has_limit)
            printf("%g", x->limit);
        else
            printf("null");
        printf(",%d,%d,%d,%llu,%.3f,%d]", x->in_use, x->total, x->waiters,
               (unsigned long long)x->ops,
               x->ops ? (double)x->lat_ns / (double)x->ops / 1e6 : 0.0,
               x->creating);
    }
    printf("]}\n");
}

int main(int argc, char **argv) {
    const char *conninfo = NULL, *metric = "";
    const char *sql[MAX_SQL];
    int nsql = 0;
    int threads = 64, json = 0, check = 0;
    double seconds = 5, warmup = 1;
    int64_t start_at = 0, sample_ms = 250, timeout_ms = 10000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!strcmp(a, "--check")) {
            check = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "%s: %s needs a value\n", PROG, a);
            usage(stderr);
            return 2;
        }
        i++;
        int rc = 0;
        if (!strcmp(a, "--conninfo"))
            conninfo = v;
        else if (!strcmp(a, "--sql")) {
            if (nsql == MAX_SQL) {
                fprintf(stderr, "%s: at most %d --sql\n", PROG, MAX_SQL);
                return 2;
            }
            sql[nsql++] = v;
        } else if (!strcmp(a, "--limit-metric"))
            metric = v;
        else if (!strcmp(a, "--threads"))
            rc = bench_parse_int(PROG, "--threads", v, 4096, &threads);
        else if (!strcmp(a, "--seconds"))
            rc = parse_secs("--seconds", v, 0.1, &seconds);
        else if (!strcmp(a, "--warmup"))
            rc = parse_secs("--warmup", v, 0, &warmup);
        else if (!strcmp(a, "--start-at"))
            rc = parse_ms("--start-at", v, 1, &start_at);
        else if (!strcmp(a, "--sample-ms"))
            rc = parse_ms("--sample-ms", v, 10, &sample_ms);
        else if (!strcmp(a, "--timeout-ms"))
            rc = parse_ms("--timeout-ms", v, 0, &timeout_ms);
        else {
            fprintf(stderr, "%s: unknown option '%s'\n", PROG, a);
            usage(stderr);
            return 2;
        }
        if (rc)
            return 2;
    }
    if (!conninfo || (!nsql && !check)) {
        fprintf(stderr, "%s: --conninfo and --sql are required\n", PROG);
        usage(stderr);
        return 2;
    }

    tether_pool *pool = NULL;
    tether_error err;
    int rc = tether_pool_open(&pool, conninfo, on_connect, NULL, &err);
    if (rc == TETHER_ESPEC) {
        fprintf(stderr, "%s: connection string refused: %s\n", PROG,
                err.message);
        return 3;
    }
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", PROG, tether_errname(rc), err.message);
        return 1;
    }
    if (check) {
        tether_pool_destroy(pool);
        return 0;
    }

    struct worker *w = calloc((size_t)threads, sizeof *w);
    struct sampler sp;
    memset(&sp, 0, sizeof sp);
    double total_s = (seconds + warmup) * nsql + 5;
    if (start_at)
        total_s += (double)(start_at - wall_ms()) / 1000;
    sp.cap = (size_t)(total_s * 1000 / (double)sample_ms) + 16;
    sp.s = calloc(sp.cap, sizeof *sp.s);
    sp.buf = malloc(PROM_CAP);
    if (!w || !sp.s || !sp.buf) {
        fprintf(stderr, "%s: out of memory\n", PROG);
        return 1;
    }
    for (int i = 0; i < threads; i++) {
        w[i].pool = pool;
        w[i].sql = sql;
        w[i].timeout_ms = timeout_ms;
        w[i].st = calloc((size_t)nsql, sizeof *w[i].st);
        if (!w[i].st) {
            fprintf(stderr, "%s: out of memory\n", PROG);
            return 1;
        }
    }
    sp.pool = pool;
    sp.w = w;
    sp.threads = threads;
    sp.period_ms = sample_ms;
    sp.metric = metric;

    if (bench_spawn(&start, (size_t)threads, worker_main, w, sizeof *w,
                    offsetof(struct worker, tid)))
        return 1;
    if (pthread_create(&sp.tid, NULL, sampler_main, &sp)) {
        fprintf(stderr, "%s: pthread_create failed\n", PROG);
        return 1;
    }
    pthread_barrier_wait(&start);
    struct window win[MAX_SQL];
    for (int k = 0; k < nsql; k++) {
        atomic_store(&cur, k);
        if (k == 0 && start_at) {
            int64_t d = start_at - wall_ms();
            if (d > 0)
                bench_sleep_for((double)d / 1000);
        } else if (warmup > 0) {
            bench_sleep_for(warmup);
        }
        tether_pool_metrics_get(pool, &win[k].m0);
        win[k].wall = wall_ms();
        uint64_t t0 = bench_now_ns();
        atomic_store(&phase, PH_WINDOW);
        bench_sleep_for(seconds);
        atomic_store(&phase, k + 1 < nsql ? PH_WARMUP : PH_DONE);
        win[k].elapsed = (double)(bench_now_ns() - t0) / 1e9;
        tether_pool_metrics_get(pool, &win[k].m1);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < threads; i++)
        pthread_join(w[i].tid, NULL);
    pthread_join(sp.tid, NULL);

    size_t plen = tether_pool_metrics_prometheus(pool, sp.buf, PROM_CAP);
    if (plen >= PROM_CAP)
        sp.buf[0] = '\0';
    for (int k = 0; k < nsql; k++)
        report(k, nsql, sql[k], threads, w, &sp, win, sample_ms, json);
    fflush(stdout);
    tether_pool_destroy(pool);
    for (int i = 0; i < threads; i++)
        free(w[i].st);
    free(sp.s);
    free(sp.buf);
    free(w);
    return 0;
}
