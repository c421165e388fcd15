/* corun.c - the pool's cost per SELECT 1, measured at the same time as its
 * baseline (bench/run-corun runs it inside a scratch cluster):
 *
 *   bench_corun --conninfo C [--threads T] [--pool P] [--seconds S]
 *               [--mode run|acquire|dedicated] [--json]
 *
 * P threads (default T/2; T defaults to 8) loop SELECT 1 on P dedicated
 * libpq connections while, in the same window and process, the other T-P
 * threads loop the same SELECT 1 through a tether pool of P connections
 * (mode run: tether_pool_run; acquire: tether_pool_acquire + PQexec +
 * tether_lease_release) or, in mode dedicated, on dedicated connections too
 * (the A/A control: it shows how far apart two identical halves land; T
 * must then be 2P). With T = 5P the pooled side is the "4 threads per
 * connection" case: 16 threads on a pool of 4 beside 4 dedicated. Both
 * halves share every moment of machine noise, so the ratio of their operation
 * counts is far steadier than the ratio of two separate runs (bench/run-query),
 * whose windows see different noise.
 *
 * It also reports the gap: the time on one thread from the end of one
 * SELECT 1 (its result freed) to the start of the next PQexec. On the
 * dedicated side that is the bare loop; on the pooled side it is release,
 * acquire and, in run mode, the retry wrapper. On a server that shares
 * the client's cores, a backend that gets its next query before it has
 * gone back to sleep saves a wake-up, so throughput falls faster than the
 * gap's CPU cost alone would say. */
#include "query_common.h"

#include <tether.h>

#include "pool_fill.h"

enum corun_mode { MODE_RUN, MODE_ACQUIRE, MODE_DEDICATED };

struct side {
    pthread_mutex_t lock;
    uint64_t ops, errors;
    lat_hist gap;
};

struct corun {
    const char *conninfo;
    enum corun_mode mode;
    int conns; /* P: dedicated threads, and the pool's size */
    tether_pool *pool;
    struct side side[2]; /* 0: dedicated, 1: the other half */
};

static __thread uint64_t work_end; /* when this thread's last SELECT 1 ended */

static void note_gap(struct q_thread *t) {
    uint64_t now = bench_now_ns();
    if (work_end)
        lat_hist_add(&t->wait, now - work_end);
}

static int work_select1(void *handle, void *arg, const tether_attempt *a,
                        tether_error *err) {
    struct q_thread *t = arg;
    (void)a;
    note_gap(t);
    bool ok = q_select1(t, handle);
    work_end = bench_now_ns();
    return ok ? 0
              : tether_error_set(err, TETHER_EQUERY, TETHER_CLASS_PERMANENT,
                                 "SELECT 1 failed");
}

/* One pooled operation; false when it failed. */
static bool pooled_op(struct corun *c, struct q_thread *t) {
    tether_error err;
    if (c->mode == MODE_RUN)
        return tether_pool_run(c->pool, TETHER_IDEMPOTENT, work_select1, t,
                               &err) == 0;
    tether_lease *l;
    if (tether_pool_acquire(c->pool, -1, &l, &err) != 0)
        return false;
    int rc = work_select1(tether_lease_handle(l), t, NULL, &err);
    tether_lease_release(l);
    return rc == 0;
}

/* One dedicated operation; false when it failed. */
static bool dedicated_op(struct q_thread *t, PGconn *conn) {
    note_gap(t);
    bool ok = q_select1(t, conn);
    work_end = bench_now_ns();
    return ok;
}

static void add_side(struct side *s, const struct q_thread *t) {
    pthread_mutex_lock(&s->lock);
    s->ops += t->ops;
    s->errors += t->errors;
    lat_hist_merge(&s->gap, &t->wait);
    pthread_mutex_unlock(&s->lock);
}

static void *worker(void *arg) {
    struct q_thread *t = arg;
    struct corun *c = t->ctx;
    int k = (int)t->index >= c->conns; /* the first P are the dedicated side */
    bool pooled = k == 1 && c->mode != MODE_DEDICATED;
    char why[256] = "";
    PGconn *conn = pooled ? NULL : q_connect(c->conninfo, why, sizeof why);
    if (!q_start(t, pooled || conn ? NULL : why)) {
        PQfinish(conn);
        return NULL;
    }
    while (!q_should_stop()) {
        bool ok = pooled ? pooled_op(c, t) : dedicated_op(t, conn);
        if (ok)
            t->ops++;
        else
            t->errors++;
    }
    PQfinish(conn);
    add_side(&c->side[k], t);
    return NULL;
}

static int parse_mode(const char *s, enum corun_mode *m) {
    static const char *names[] = {"run", "acquire", "dedicated"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *m = (enum corun_mode)i;
            return 0;
        }
    fprintf(stderr,
            "bench_corun: invalid --mode '%s' (run, acquire or dedicated)\n",
            s);
    return -1;
}

/* Takes --mode out of argv (q_parse knows the common options only). */
static int take_mode(int *argc, char **argv, enum corun_mode *m) {
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--mode") != 0)
            continue;
        if (i + 1 >= *argc || parse_mode(argv[i + 1], m) != 0) {
            if (i + 1 >= *argc)
                fprintf(stderr, "bench_corun: --mode needs a value\n");
            return -1;
        }
        bench_argv_drop(argc, argv, i--, 1);
    }
    return 0;
}

static const char *mode_name(enum corun_mode m) {
    return m == MODE_RUN ? "run" : m == MODE_ACQUIRE ? "acquire" : "dedicated";
}

static void report(const struct q_opts *o, const struct corun *c, double secs) {
    const struct side *d = &c->side[0], *x = &c->side[1];
    double ratio = d->ops ? 100.0 * (double)x->ops / (double)d->ops : 0;
    const char *fmt =
        o->json
            ? "{\"bench\":\"corun\",\"mode\":\"%s\",\"dedicated_threads\":%d,"
              "\"other_threads\":%d,\"connections\":%d,"
              "\"seconds\":%.3f,\"dedicated_ops\":%llu,\"other_ops\":%llu,"
              "\"ratio_pct\":%.2f,\"dedicated_gap_p50_ns\":%llu,"
              "\"other_gap_p50_ns\":%llu,\"other_gap_p99_ns\":%llu,"
              "\"errors\":%llu}\n"
            : "corun mode=%s threads=%d+%d on %d connections each, %.1f s: "
              "dedicated %llu ops, other %llu ops, ratio %.1f %%; gap p50 "
              "%llu ns (dedicated) vs %llu ns, p99 %llu ns; errors %llu\n";
    printf(fmt, mode_name(c->mode), c->conns, o->threads - c->conns, c->conns,
           secs, (unsigned long long)d->ops, (unsigned long long)x->ops, ratio,
           (unsigned long long)lat_hist_pct(&d->gap, 50),
           (unsigned long long)lat_hist_pct(&x->gap, 50),
           (unsigned long long)lat_hist_pct(&x->gap, 99),
           (unsigned long long)(d->errors + x->errors));
}

int main(int argc, char **argv) {
    static struct corun c;
    struct q_opts o = {.impl = "corun"};
    c.mode = MODE_RUN;
    if (take_mode(&argc, argv, &c.mode) != 0)
        return 2;
    int prc = q_parse(
        argc, argv,
        "SELECT 1 on P dedicated connections (P threads) and, at the same\n"
        "time, with the other T-P threads through a tether pool of P (--mode\n"
        "run, the default, or acquire) or on dedicated connections too\n"
        "(--mode dedicated, the control: T = 2P). P defaults to T/2.",
        &o);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    c.conns = o.pool > 0 ? o.pool : o.threads / 2;
    if (c.conns < 1 || o.threads - c.conns < 1 ||
        (c.mode == MODE_DEDICATED && o.threads != 2 * c.conns)) {
        fprintf(stderr,
                "bench_corun: --threads %d --pool %d: want P >= 1 and T > P "
                "(T = 2P in mode dedicated)\n",
                o.threads, c.conns);
        return 2;
    }
    c.conninfo = o.conninfo;
    for (int k = 0; k < 2; k++)
        pthread_mutex_init(&c.side[k].lock, NULL);
    if (c.mode != MODE_DEDICATED &&
        bench_pool_open(&c.pool, c.conninfo, c.conns, "bench_corun") != 0)
        return 2;
    struct q_result r;
    int rc = q_run(&o, worker, &c, &r);
    if (rc == 0)
        report(&o, &c, r.elapsed_s);
    tether_pool_destroy(c.pool);
    return rc != 0 || r.errors ? 1 : 0;
}
