/* storm.c - `tether sim storm`: the reconnect-storm model. N clients lose
 * their server at t=0 (every backend terminated); it is down for S seconds,
 * then admits at most C connects per second and refuses the rest as
 * overloaded (53300). Each client is a real tether_pool on the sim driver
 * and a virtual clock doing an idempotent SELECT 1 every 200 ms through
 * tether_pool_run (storm_world.c); a strategy is the connection string its
 * pools are made from. The model counts connects and connection times. */
#include "lab.h"
#include "storm.h"

#include <stdlib.h>
#include <string.h>

#define CMD "sim storm"
#define STORM_MAX_DOWN_MS (3600 * 1000LL)
#define STORM_MAX_CLIENT_SECONDS 1e6

/* The strategies compared. "default" is what tether_pool_open does with no
 * settings; the others set only the connector's pause between passes
 * (tether_pause: exponential 1 s x2 to 60 s with each jitter mode), or,
 * for streaming, its own schedule (tether_strategy=streaming,
 * docs/schedules.md "Streaming"). */
static const char *const strategy_names[] = {
    "nojitter", "full", "equal", "decorrelated", "streaming", "default"};
static const char *const strategy_conninfo[] = {
    "host=storm tether_pause='exponential base=1s max=60s jitter=none'",
    "host=storm tether_pause='exponential base=1s max=60s jitter=full'",
    "host=storm tether_pause='exponential base=1s max=60s jitter=equal'",
    ("host=storm tether_pause='exponential base=1s max=60s "
     "jitter=decorrelated'"),
    "host=storm tether_strategy=streaming",
    "host=storm"};
#define NSTRATEGIES 6

static int storm_run(int k, const storm_params *p, storm_result *res) {
    char msg[256];
    memset(res, 0, sizeof(*res));
    res->strategy = strategy_names[k];
    if (storm_world_run(p, strategy_conninfo[k], res, msg, sizeof(msg)) == 0)
        return 0;
    fprintf(stderr, "tether " CMD ": %s: %s\n", strategy_names[k], msg);
    return -1;
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
        f,
        "usage: tether sim storm --clients N --down S --capacity C\n"
        "                        [--strategy X[,Y...]] [--seed N] [--json]\n\n"
        "N clients lose their server at t=0 (every backend terminated); it "
        "is down\nfor S seconds (a duration, bare numbers are seconds), then "
        "admits at most C\nconnects per second and refuses the rest as "
        "overloaded (53300). Each client\nis a real tether pool on the "
        "simulated driver and a virtual clock, doing an\nidempotent SELECT 1 "
        "every 200 ms through tether_pool_run. Prints, per\nstrategy, the "
        "total connect attempts, the peak in any one second after\n"
        "recovery, the time the last client connected (seconds from t=0) and "
        "how\nmany connected within the horizon (down + 1 h).\n\n"
        "strategies: default (what tether_pool_open does with no settings);\n"
        "            nojitter full equal decorrelated (tether_pause: "
        "exponential\n            1 s x2 to 60 s with that jitter), "
        "streaming (tether_strategy=\n            streaming, "
        "docs/schedules.md); the "
        "others keep every default but that.\n            All of them when "
        "--strategy is absent.\n"
        "limits: --down at most 1h; clients x down at most 1000000 "
        "client-seconds\n        (the run time grows with both).\n"
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
    /* The run time grows with the clients and the outage (every client's
     * loop runs through it): both are bounded, with a clear error. */
    if (a.p.down_ms > STORM_MAX_DOWN_MS)
        return cli_usage_error(CMD,
                               "--down %lld ms is too long: want at most "
                               "1h",
                               (long long)a.p.down_ms);
    if ((double)a.p.clients * ((double)a.p.down_ms / 1000.0) >
        STORM_MAX_CLIENT_SECONDS)
        return cli_usage_error(
            CMD,
            "--clients %d with --down %.1f s is too much to model: want "
            "clients x down at most %.0f client-seconds (e.g. 10000 "
            "clients for 100 s)",
            a.p.clients, (double)a.p.down_ms / 1000.0,
            STORM_MAX_CLIENT_SECONDS);
    storm_params p = a.p;
    p.horizon_ms = p.down_ms + 3600 * 1000LL;
    if (!a.json)
        print_header(&p);
    for (int i = 0; i < n; i++) {
        storm_result r;
        if (storm_run(pick[i], &p, &r))
            return CLI_FAIL;
        print_result(&r, &p, a.json);
        fflush(stdout);
    }
    return CLI_OK;
}

int tether__lab_sim(int argc, char **argv) {
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
