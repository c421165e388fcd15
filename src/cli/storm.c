/* storm.c - `tether sim storm`: the reconnect-storm model. N clients lose
 * their server at t=0; it is down for S seconds, then admits at most C
 * connection attempts per second and refuses the rest as overloaded. Each
 * client follows one reconnect strategy, driven through the public backoff
 * and schedule APIs; the model counts attempts and connection times. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#define CMD "sim storm"

typedef enum { POLICY_BACKOFF, POLICY_SCHEDULE } policy_kind;

typedef struct storm_params {
    int clients;
    int64_t down_ms;
    int capacity;
    int64_t horizon_ms;
    uint64_t seed;
} storm_params;

typedef struct storm_result {
    const char *strategy;
    long long total_attempts;
    long long peak_after_recovery;
    double all_connected_s;
    int connected;
} storm_result;

typedef struct client {
    int64_t next_ms;
    policy_kind kind;
    tether_backoff *backoff;
    tether_schedule *schedule;
} client;

/* A binary min-heap of client indexes keyed by next_ms, then index. */
typedef struct heap {
    int *a;
    int n;
    const client *c;
} heap;

static int heap_less(const heap *h, int x, int y) {
    const client *cx = &h->c[h->a[x]], *cy = &h->c[h->a[y]];
    if (cx->next_ms != cy->next_ms)
        return cx->next_ms < cy->next_ms;
    return h->a[x] < h->a[y];
}

static void heap_swap(heap *h, int x, int y) {
    int t = h->a[x];
    h->a[x] = h->a[y];
    h->a[y] = t;
}

static void heap_push(heap *h, int id) {
    int i = h->n++;
    h->a[i] = id;
    while (i > 0 && heap_less(h, i, (i - 1) / 2)) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static int heap_pop(heap *h) {
    int top = h->a[0], i = 0;
    h->a[0] = h->a[--h->n];
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && heap_less(h, l, m))
            m = l;
        if (r < h->n && heap_less(h, r, m))
            m = r;
        if (m == i)
            break;
        heap_swap(h, i, m);
        i = m;
    }
    return top;
}

/* The strategies compared: exponential 1 s x2 capped at 60 s with each
 * jitter mode, the seed-003 streaming schedule, and tether's default
 * reconnect policy. */
static const char *const strategy_names[] = {
    "nojitter", "full", "equal", "decorrelated", "streaming", "default"};
#define NSTRATEGIES 6

static int make_backoff_opts(const char *name, tether_backoff_opts *o,
                             uint64_t seed) {
    if (!strcmp(name, "default")) {
        tether_backoff_preset("reconnect", o, NULL);
    } else {
        tether_backoff_opts_init(o);
        o->base_ms = 1000;
        o->max_ms = 60000;
        o->multiplier = 2.0;
        if (!strcmp(name, "nojitter"))
            o->jitter = TETHER_JITTER_NONE;
        else if (!strcmp(name, "full"))
            o->jitter = TETHER_JITTER_FULL;
        else if (!strcmp(name, "equal"))
            o->jitter = TETHER_JITTER_EQUAL;
        else if (!strcmp(name, "decorrelated"))
            o->jitter = TETHER_JITTER_DECORRELATED;
        else
            return -1;
    }
    o->seed = seed;
    return 0;
}

static int client_init(client *c, const char *strategy, uint64_t seed) {
    memset(c, 0, sizeof(*c));
    if (!strcmp(strategy, "streaming")) {
        tether_schedule_opts so;
        tether_schedule_opts_init(&so);
        so.strategy = TETHER_STRATEGY_STREAMING;
        so.login_timeout_ms = -1;
        so.seed = seed;
        c->kind = POLICY_SCHEDULE;
        return tether_schedule_create(&c->schedule, &so, 0, NULL);
    }
    tether_backoff_opts bo;
    if (make_backoff_opts(strategy, &bo, seed))
        return -1;
    c->kind = POLICY_BACKOFF;
    return tether_backoff_create(&c->backoff, &bo, NULL);
}

/* Advance c to its next connection attempt at or after now; the previous
 * attempt (if any) failed with cause. Returns 0, or -1 if it gives up. */
static int client_advance(client *c, int64_t now, tether_class cause) {
    if (c->kind == POLICY_BACKOFF) {
        int64_t d;
        if (tether_backoff_next(c->backoff, cause, &d))
            return -1;
        c->next_ms = now + d;
        return 0;
    }
    for (;;) {
        tether_step st;
        tether_schedule_next(c->schedule, now, &st);
        if (st.kind == TETHER_STEP_ATTEMPT) {
            c->next_ms = now;
            return 0;
        }
        if (st.kind == TETHER_STEP_DONE)
            return -1;
        if (st.kind == TETHER_STEP_PAUSE)
            now += st.delay_ms;
        else /* provisioning is instant and succeeds: one server, port */
            tether_schedule_provisioned(c->schedule, 1, 1);
    }
}

static void client_free(client *c) {
    tether_backoff_destroy(c->backoff);
    tether_schedule_destroy(c->schedule);
}

typedef struct server {
    const storm_params *p;
    int64_t window;      /* current one-second window after recovery */
    int admitted;        /* attempts admitted in that window */
    long long in_window; /* attempts seen in that window */
} server;

/* One attempt at time t: 0 connected, else the failure class. */
static tether_class server_attempt(server *s, int64_t t, storm_result *res) {
    if (t < s->p->down_ms)
        return TETHER_CLASS_TRANSIENT; /* refused: nothing listens */
    int64_t w = (t - s->p->down_ms) / 1000;
    if (w != s->window) {
        s->window = w;
        s->admitted = 0;
        s->in_window = 0;
    }
    if (++s->in_window > res->peak_after_recovery)
        res->peak_after_recovery = s->in_window;
    if (s->admitted < s->p->capacity) {
        s->admitted++;
        return TETHER_CLASS_NONE;
    }
    return TETHER_CLASS_THROTTLED; /* "too many connections" */
}

static void storm_loop(client *cs, heap *h, const storm_params *p,
                       storm_result *res) {
    server srv = {p, -1, 0, 0};
    int64_t last = 0;
    while (h->n > 0) {
        int id = heap_pop(h);
        client *c = &cs[id];
        if (c->next_ms > p->horizon_ms)
            break;
        res->total_attempts++;
        tether_class cls = server_attempt(&srv, c->next_ms, res);
        if (cls == TETHER_CLASS_NONE) {
            res->connected++;
            last = c->next_ms;
            continue;
        }
        if (client_advance(c, c->next_ms, cls) == 0)
            heap_push(h, id);
    }
    res->all_connected_s = (double)last / 1000.0;
}

static int storm_run(const char *strategy, const storm_params *p,
                     storm_result *res) {
    memset(res, 0, sizeof(*res));
    res->strategy = strategy;
    client *cs = calloc((size_t)p->clients, sizeof(*cs));
    heap h = {calloc((size_t)p->clients, sizeof(int)), 0, cs};
    int rc = (cs && h.a) ? 0 : -1;
    for (int i = 0; rc == 0 && i < p->clients; i++) {
        uint64_t seed = p->seed * 1000003ULL + (uint64_t)i + 1;
        rc = client_init(&cs[i], strategy, seed);
        if (rc == 0 && client_advance(&cs[i], 0, TETHER_CLASS_NONE) == 0)
            heap_push(&h, i);
    }
    if (rc == 0)
        storm_loop(cs, &h, p, res);
    for (int i = 0; cs && i < p->clients; i++)
        client_free(&cs[i]);
    free(cs);
    free(h.a);
    return rc;
}

static void print_result(const storm_result *r, const storm_params *p,
                         int json) {
    if (json) {
        printf("{\"strategy\":\"%s\",\"total_attempts\":%lld,"
               "\"peak_after_recovery\":%lld,\"all_connected_s\":%.3f,"
               "\"connected\":%d}\n",
               r->strategy, r->total_attempts, r->peak_after_recovery,
               r->all_connected_s, r->connected);
        return;
    }
    printf("%-13s %14lld %10lld %8.2fx %13.1f %9d\n", r->strategy,
           r->total_attempts, r->peak_after_recovery,
           (double)r->peak_after_recovery / p->capacity, r->all_connected_s,
           r->connected);
}

static void storm_usage(FILE *f) {
    fprintf(
        f, "usage: tether sim storm --clients N --down S --capacity C\n"
           "                        [--strategy X[,Y...]] [--seed N] "
           "[--json]\n\n"
           "N clients lose their server at t=0; it is down for S seconds "
           "(a duration,\nbare numbers are seconds), then admits at most C "
           "connection attempts per\nsecond and refuses the rest as "
           "overloaded. Prints, per strategy, the total\nattempts, the peak "
           "attempts in any one second after recovery, the time the\nlast "
           "client connected (seconds from t=0) and how many connected "
           "within\nthe horizon (down + 1 h).\n\n"
           "strategies: nojitter full equal decorrelated (exponential 1 s "
           "x2 to 60 s),\n            streaming (random 1-5 s, then doubling "
           "to 60 s), default (tether's\n            reconnect policy); all of "
           "them when --strategy is absent.\n"
           "defaults: --clients 10000 --down 30 --capacity 500 --seed 1\n");
}

enum {
    OPT_CLIENTS = 256,
    OPT_DOWN,
    OPT_CAPACITY,
    OPT_STRATEGY,
    OPT_SEED,
    OPT_JSON
};

static const struct option storm_opts[] = {
    {"clients", required_argument, NULL, OPT_CLIENTS},
    {"down", required_argument, NULL, OPT_DOWN},
    {"capacity", required_argument, NULL, OPT_CAPACITY},
    {"strategy", required_argument, NULL, OPT_STRATEGY},
    {"seed", required_argument, NULL, OPT_SEED},
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0}};

/* What the options set: the model, the strategy list, the output form. */
typedef struct storm_args {
    storm_params p;
    const char *strategies; /* NULL: all */
    int json;
} storm_args;

/* cli_opt_fn: the numbers are checked here, the strategies later. */
static int take_opt(void *ctx, int opt, const char *v) {
    storm_args *a = ctx;
    long long n;
    switch (opt) {
    case OPT_CLIENTS:
        return cli_parse_count(CMD, "--clients", v, 1, 1000000, &a->p.clients);
    case OPT_CAPACITY:
        return cli_parse_count(CMD, "--capacity", v, 1, 100000000,
                               &a->p.capacity);
    case OPT_SEED:
        if (cli_parse_int(CMD, "--seed", v, 0, INT64_MAX, &n))
            return CLI_USAGE;
        a->p.seed = (uint64_t)n;
        return 0;
    case OPT_DOWN:
        return cli_parse_duration(CMD, "--down", v, &a->p.down_ms) ? CLI_USAGE
                                                                   : 0;
    case OPT_STRATEGY:
        a->strategies = v;
        return 0;
    case OPT_JSON:
        a->json = 1;
        return 0;
    default:
        return cli_usage_error(CMD, "unexpected argument '%s'", v);
    }
}

static int known_strategy(const char *name, size_t len) {
    for (int i = 0; i < NSTRATEGIES; i++)
        if (strlen(strategy_names[i]) == len &&
            !strncmp(strategy_names[i], name, len))
            return i;
    return -1;
}

/* Parse "a,b,c" into indexes; every name must be known. */
static int pick_strategies(const char *list, int *pick, int *n) {
    *n = 0;
    if (!list) {
        for (int i = 0; i < NSTRATEGIES; i++)
            pick[(*n)++] = i;
        return 0;
    }
    const char *s = list;
    for (;;) {
        size_t len = strcspn(s, ",");
        int k = known_strategy(s, len);
        if (k < 0 || *n >= NSTRATEGIES) {
            cli_usage_error(CMD,
                            "unknown strategy '%.*s' for --strategy (want "
                            "nojitter, full, equal, decorrelated, streaming "
                            "or default)",
                            (int)len, s);
            return -1;
        }
        pick[(*n)++] = k;
        if (!s[len])
            return 0;
        s += len + 1;
    }
}

static void print_header(const storm_params *p) {
    printf("reconnect storm: %d clients, server down %.1f s, then %d "
           "attempts/s admitted (limit: all connected %.1f s after "
           "recovery)\n\n%-13s %14s %10s %9s %13s %9s\n",
           p->clients, p->down_ms / 1000.0, p->capacity,
           (double)p->clients / p->capacity, "strategy", "total_attempts",
           "peak/s", "peak/cap", "all_conn_s", "connected");
}

static int cli_storm(int argc, char **argv) {
    if (cli_want_help(argc, argv)) {
        storm_usage(stdout);
        return CLI_OK;
    }
    storm_args a = {{10000, 30000, 500, 0, 1}, NULL, 0};
    int pick[NSTRATEGIES], n;
    if (cli_parse_opts(CMD, argc, argv, storm_opts, take_opt, &a) ||
        pick_strategies(a.strategies, pick, &n))
        return CLI_USAGE;
    storm_params p = a.p;
    p.horizon_ms = p.down_ms + 3600 * 1000LL;
    if (!a.json)
        print_header(&p);
    for (int i = 0; i < n; i++) {
        storm_result r;
        if (storm_run(strategy_names[pick[i]], &p, &r)) {
            fprintf(stderr, "tether " CMD ": out of memory\n");
            return CLI_FAIL;
        }
        print_result(&r, &p, a.json);
        fflush(stdout);
    }
    return CLI_OK;
}

int cli_sim(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: tether sim storm [OPTIONS]   (tether sim storm "
                "--help)\n");
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    if (!strcmp(argv[1], "storm"))
        return cli_storm(argc - 1, argv + 1);
    return cli_usage_error("sim", "unknown simulation '%s' (want storm)",
                           argv[1]);
}
