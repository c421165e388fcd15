/* plan.c - `tether plan`: prints the connection schedule a strategy follows
 * when every attempt times out (or, with --fail-after D, fails after
 * min(D, budget)); attempts that have no limit of their own (the backoff
 * strategies without a --spec timeout) are shown failing at once unless
 * --fail-after is given. It drives the public schedule API on simulated
 * time: pauses take their delay, provisioning answers at once with the host
 * list. Output is a table, or one JSON object per attempt and per pause,
 * each with the seed that reproduces the plan. */
#include "cli.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CMD "plan"
#define MAX_HOSTS 64
#define MAX_PORTS 64
#define MAX_ROUNDS 100000
#define SAFETY_ROUNDS 1000 /* bounded plans without --rounds */
#define UNBOUNDED_ROUNDS 10

typedef struct plan {
    const char *strategy;
    const char *login; /* --login-timeout text, NULL when absent */
    const char *hosts_arg;
    const char *ports_arg;
    const char *spec;
    int64_t fail_after; /* -1: attempts time out */
    int fail_default;   /* fail_after 0 was chosen, not given */
    long long rounds;   /* 0: default */
    int rounds_given;
    uint64_t seed;
    int json;
    char *hostbuf;
    const char *hosts[MAX_HOSTS];
    int nhosts;
    long ports[MAX_PORTS];
    int nports;
    tether_schedule_opts o;
} plan;

/* What the walk through the schedule saw. */
typedef struct walk {
    int64_t t;
    int attempts;
    int unbounded; /* an attempt had no time limit */
    int held;      /* a pause waits to be printed */
    tether_step pause;
    int64_t pause_at;
    const char *why; /* why the plan ended */
} walk;

static const char *const usage_lines[] = {
    "usage: tether plan [--strategy NAME] [--login-timeout D] [--hosts a,b]",
    "                   [--ports p,q] [--seed N] [--fail-after D] [--rounds N]",
    "                   [--spec \"retry spec\"] [--json]",
    "",
    "Prints the connection schedule (tether_schedule) over every host and",
    "every port if every attempt timed out (time is simulated; nothing is",
    "contacted). A connector follows the same timing, but tries each host",
    "with its own port and skips streaming's first random wait.",
    "",
    "options:",
    "  --strategy NAME    mirroring (default; sequential with --spec),",
    "                     streaming, sequential, or a backoff driving a",
    "                     sequential schedule: grpc, exponential, fixed,",
    "                     incremental, immediate, reconnect, blocking-period",
    "  --login-timeout D  overall budget: 500ms, 15s, 2m, a bare number of",
    "                     seconds, or inf (default 15s; streaming: inf)",
    "  --hosts a,b        host names (default principal,partner for",
    "                     mirroring, else db1,db2; mirroring takes 1 or 2)",
    "  --ports p,q        ports tried on every host, in order (default 5432)",
    "  --seed N           random seed (default 0: random; the seed used is",
    "                     printed, in the header and on every JSON line, so",
    "                     the plan can be reproduced with --seed)",
    "  --fail-after D     attempts fail after min(D, budget) instead of",
    "                     timing out. Without it, attempts that have no time",
    "                     limit of their own are shown failing at once (as",
    "                     when refused): the sequential and backoff",
    "                     strategies, unless --spec sets timeout=D, so that",
    "                     they show a failing sequence of passes and pauses",
    "                     rather than one attempt that takes the whole login",
    "                     timeout",
    "  --rounds N         stop after N passes (mirroring: N pairs); default",
    "                     10 when the login timeout is infinite, else run",
    "                     until it is spent",
    "  --spec \"SPEC\"      a retry spec: its backoff is the pause between",
    "                     passes, its timeout=D the per-attempt cap, e.g.",
    "                     \"fixed base=1s jitter=none timeout=2s\" or",
    "                     \"grpc timeout=2s\"; with --strategy sequential or",
    "                     none (a backoff --strategy and --spec conflict)",
    "  --json             one JSON object per line (provisioning steps are",
    "                     shown only in the table):",
    ("                     {\"attempt\":n,\"host\":\"h\",\"port\":p,"
     "\"start_ms\":t,\"budget_ms\":b,\"seed\":s}"),
    "                     {\"delay_ms\":d,\"start_ms\":t,\"seed\":s}",
    "                     (budget_ms -1: no limit)",
    "  -h, --help         this help",
};

static void usage(FILE *f) {
    for (size_t i = 0; i < sizeof(usage_lines) / sizeof(usage_lines[0]); i++)
        fprintf(f, "%s\n", usage_lines[i]);
}

/* ---- option parsing ---------------------------------------------------- */

enum {
    OPT_STRATEGY = 256,
    OPT_LOGIN,
    OPT_HOSTS,
    OPT_PORTS,
    OPT_SPEC,
    OPT_SEED,
    OPT_ROUNDS,
    OPT_FAIL_AFTER,
    OPT_JSON
};

static const struct option plan_opts[] = {
    {"strategy", required_argument, NULL, OPT_STRATEGY},
    {"login-timeout", required_argument, NULL, OPT_LOGIN},
    {"hosts", required_argument, NULL, OPT_HOSTS},
    {"ports", required_argument, NULL, OPT_PORTS},
    {"spec", required_argument, NULL, OPT_SPEC},
    {"seed", required_argument, NULL, OPT_SEED},
    {"rounds", required_argument, NULL, OPT_ROUNDS},
    {"fail-after", required_argument, NULL, OPT_FAIL_AFTER},
    {"json", no_argument, NULL, OPT_JSON},
    {NULL, 0, NULL, 0}};

/* The options that take a number (checked here) or a duration. */
static int take_number(plan *p, int opt, const char *v) {
    long long n;
    if (opt == OPT_SEED) {
        if (cli_parse_int(CMD, "--seed", v, 0, INT64_MAX, &n))
            return CLI_USAGE;
        p->seed = (uint64_t)n;
    } else if (opt == OPT_ROUNDS) {
        if (cli_parse_int(CMD, "--rounds", v, 1, MAX_ROUNDS, &p->rounds))
            return CLI_USAGE;
        p->rounds_given = 1;
    } else if (cli_parse_duration(CMD, "--fail-after", v, &p->fail_after)) {
        return CLI_USAGE;
    }
    return 0;
}

/* cli_opt_fn: the text options are checked once all are read. */
static int take_opt(void *ctx, int opt, const char *v) {
    plan *p = ctx;
    switch (opt) {
    case OPT_STRATEGY:
        p->strategy = v;
        return 0;
    case OPT_LOGIN:
        p->login = v;
        return 0;
    case OPT_HOSTS:
        p->hosts_arg = v;
        return 0;
    case OPT_PORTS:
        p->ports_arg = v;
        return 0;
    case OPT_SPEC:
        p->spec = v;
        return 0;
    case OPT_JSON:
        p->json = 1;
        return 0;
    case OPT_SEED:
    case OPT_ROUNDS:
    case OPT_FAIL_AFTER:
        return take_number(p, opt, v);
    default:
        return cli_usage_error(CMD, "unexpected argument '%s'", v);
    }
}

/* ---- hosts and ports --------------------------------------------------- */

static int split_hosts(plan *p) {
    p->hostbuf = strdup(p->hosts_arg);
    if (!p->hostbuf)
        return cli_usage_error(CMD, "out of memory");
    char *s = p->hostbuf;
    for (;;) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma = '\0';
        if (!*s)
            return cli_usage_error(CMD, "empty host name in --hosts '%s'",
                                   p->hosts_arg);
        if (p->nhosts == MAX_HOSTS)
            return cli_usage_error(CMD, "too many hosts in --hosts (max %d)",
                                   MAX_HOSTS);
        p->hosts[p->nhosts++] = s;
        if (!comma)
            return 0;
        s = comma + 1;
    }
}

static int split_ports(plan *p) {
    const char *s = p->ports_arg;
    for (;;) {
        char item[16];
        size_t len = strcspn(s, ",");
        long long v;
        if (len == 0 || len >= sizeof(item))
            return cli_usage_error(CMD,
                                   "bad port '%.*s' in --ports '%s': "
                                   "want 1-65535",
                                   (int)len, s, p->ports_arg);
        memcpy(item, s, len);
        item[len] = '\0';
        if (cli_parse_int(CMD, "--ports", item, 1, 65535, &v))
            return CLI_USAGE;
        if (p->nports == MAX_PORTS)
            return cli_usage_error(CMD, "too many ports in --ports (max %d)",
                                   MAX_PORTS);
        p->ports[p->nports++] = (long)v;
        if (!s[len])
            return 0;
        s += len + 1;
    }
}

/* ---- strategy and options ---------------------------------------------- */

static int backoff_for(const char *name, tether_backoff_opts *b) {
    static const struct {
        const char *name;
        tether_backoff_kind kind;
    } kinds[] = {{"exponential", TETHER_BACKOFF_EXPONENTIAL},
                 {"fixed", TETHER_BACKOFF_FIXED},
                 {"incremental", TETHER_BACKOFF_INCREMENTAL},
                 {"immediate", TETHER_BACKOFF_IMMEDIATE}};
    if (!strcmp(name, "sequential")) {
        tether_backoff_opts_init(b);
        return 0;
    }
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (!strcmp(name, kinds[i].name)) {
            tether_backoff_opts_init(b);
            b->kind = kinds[i].kind;
            return 0;
        }
    }
    if (!strcmp(name, "grpc") || !strcmp(name, "reconnect") ||
        !strcmp(name, "blocking-period"))
        return tether_backoff_preset(name, b, NULL);
    return -1;
}

static int set_strategy(plan *p) {
    tether_schedule_opts *o = &p->o;
    if (!strcmp(p->strategy, "mirroring")) {
        o->strategy = TETHER_STRATEGY_MIRRORING;
    } else if (!strcmp(p->strategy, "streaming")) {
        o->strategy = TETHER_STRATEGY_STREAMING;
        o->login_timeout_ms = -1;
    } else if (backoff_for(p->strategy, &o->backoff) == 0) {
        o->strategy = TETHER_STRATEGY_SEQUENTIAL;
    } else {
        return cli_usage_error(CMD,
                               "unknown --strategy '%s' (want mirroring, "
                               "streaming, sequential, grpc, "
                               "exponential, fixed, incremental, "
                               "immediate, reconnect or blocking-period)",
                               p->strategy);
    }
    return 0;
}

static int apply_spec(plan *p) {
    if (!p->spec)
        return 0;
    if (p->o.strategy != TETHER_STRATEGY_SEQUENTIAL)
        return cli_usage_error(CMD,
                               "--spec does not apply to --strategy %s "
                               "(only to sequential)",
                               p->strategy);
    if (strcmp(p->strategy, "sequential") != 0) { /* two backoffs */
        const char *eg = strcmp(p->strategy, "blocking-period") != 0
                             ? p->strategy
                             : "fixed base=5s";
        return cli_usage_error(CMD,
                               "--strategy %s and --spec '%s' conflict: both "
                               "set the backoff between passes; give "
                               "--spec alone (e.g. --spec \"%s timeout=2s\") "
                               "or --strategy alone",
                               p->strategy, p->spec, eg);
    }
    tether_retry_opts ro;
    tether_error err = {0};
    if (tether_retry_opts_parse(p->spec, &ro, &err) != 0)
        return cli_usage_error(CMD, "bad --spec '%s': %s", p->spec,
                               err.message);
    p->o.backoff = ro.backoff;
    if (ro.attempt_timeout_ms > 0)
        p->o.attempt_timeout_ms = ro.attempt_timeout_ms;
    return 0;
}

static int set_login(plan *p) {
    if (!p->login)
        return 0;
    if (!strcmp(p->login, "inf") || !strcmp(p->login, "infinite")) {
        p->o.login_timeout_ms = -1;
        return 0;
    }
    int64_t ms;
    if (cli_parse_duration(CMD, "--login-timeout", p->login, &ms))
        return CLI_USAGE;
    if (ms <= 0)
        return cli_usage_error(CMD,
                               "bad value '%s' for --login-timeout: "
                               "must be > 0 (use 'inf' for no limit)",
                               p->login);
    p->o.login_timeout_ms = ms;
    return 0;
}

static uint64_t random_seed(void) {
    uint64_t s = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
        if (read(fd, &s, sizeof(s)) != (ssize_t)sizeof(s))
            s = 0;
        close(fd);
    }
    s ^= (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
    s &= (uint64_t)INT64_MAX; /* reusable through --seed */
    return s ? s : 1;
}

static int set_topology(plan *p) {
    int mirroring = p->o.strategy == TETHER_STRATEGY_MIRRORING;
    if (!p->hosts_arg)
        p->hosts_arg = mirroring ? "principal,partner" : "db1,db2";
    if (!p->ports_arg)
        p->ports_arg = "5432";
    if (split_hosts(p) || split_ports(p))
        return CLI_USAGE;
    if (mirroring && p->nhosts > 2)
        return cli_usage_error(CMD,
                               "--hosts '%s': mirroring takes one or "
                               "two hosts (principal, partner)",
                               p->hosts_arg);
    if (mirroring && p->nports > 1)
        return cli_usage_error(CMD,
                               "--ports '%s': mirroring uses one port "
                               "per host",
                               p->ports_arg);
    p->o.nhosts = p->nhosts;
    p->o.nports = p->nports;
    return 0;
}

/* Sequential attempts without a cap of their own would each take the
 * whole login timeout: unless --fail-after says how long they last, they
 * are shown failing at once, so that the plan shows the passes and pauses
 * of the backoff. */
static void default_failure(plan *p) {
    if (p->fail_after < 0 && p->o.strategy == TETHER_STRATEGY_SEQUENTIAL &&
        p->o.attempt_timeout_ms <= 0) {
        p->fail_after = 0;
        p->fail_default = 1;
    }
}

static int configure(plan *p) {
    tether_schedule_opts_init(&p->o);
    if (!p->strategy)
        p->strategy = p->spec ? "sequential" : "mirroring";
    if (set_strategy(p) || apply_spec(p) || set_login(p) || set_topology(p))
        return CLI_USAGE;
    default_failure(p);
    if (!p->seed)
        p->seed = random_seed();
    p->o.seed = p->seed;
    if (!p->o.backoff.seed)
        p->o.backoff.seed = p->seed;
    if (!p->rounds)
        p->rounds =
            p->o.login_timeout_ms < 0 ? UNBOUNDED_ROUNDS : SAFETY_ROUNDS;
    return 0;
}

/* ---- output ------------------------------------------------------------ */

static const char *strategy_label(const plan *p) {
    switch (p->o.strategy) {
    case TETHER_STRATEGY_MIRRORING:
        return "mirroring";
    case TETHER_STRATEGY_STREAMING:
        return "streaming";
    default:
        return "sequential";
    }
}

static void print_header(const plan *p) {
    char login[32];
    if (p->o.login_timeout_ms < 0)
        snprintf(login, sizeof(login), "infinite");
    else
        snprintf(login, sizeof(login), "%lld ms",
                 (long long)p->o.login_timeout_ms);
    printf("strategy %s", strategy_label(p));
    if (p->o.strategy == TETHER_STRATEGY_SEQUENTIAL)
        printf(" (backoff: %s)", p->spec ? "from --spec" : p->strategy);
    printf(", login timeout %s, seed %llu\n", login,
           (unsigned long long)p->seed);
    if (p->fail_default)
        printf("every attempt fails at once (as if refused): without a "
               "per-attempt limit\none would take the whole login timeout; "
               "see --fail-after and --spec timeout=D\n");
    else if (p->fail_after >= 0)
        printf("every attempt fails after min(%lld ms, budget)\n",
               (long long)p->fail_after);
    else
        printf("every attempt times out\n");
    printf("\n%7s  %-28s %10s %10s  %s\n", "attempt", "host:port", "start_ms",
           "budget_ms", "round");
}

static void print_attempt(const plan *p, const tether_step *st, int64_t t) {
    const char *host = p->hosts[st->host];
    long port = p->ports[st->port];
    if (p->json) {
        printf("{\"attempt\":%d,\"host\":", st->attempt);
        cli_json_str(host);
        printf(",\"port\":%ld,\"start_ms\":%lld,\"budget_ms\":%lld,"
               "\"seed\":%llu}\n",
               port, (long long)t, (long long)st->budget_ms,
               (unsigned long long)p->seed);
        return;
    }
    char where[300];
    char budget[24];
    snprintf(where, sizeof(where), "%s:%ld", host, port);
    if (st->budget_ms < 0)
        snprintf(budget, sizeof(budget), "unbounded");
    else
        snprintf(budget, sizeof(budget), "%lld", (long long)st->budget_ms);
    printf("%7d  %-28s %10lld %10s  %d\n", st->attempt, where, (long long)t,
           budget, st->round);
}

static void print_pause(const plan *p, const tether_step *st, int64_t t) {
    if (p->json)
        printf("{\"delay_ms\":%lld,\"start_ms\":%lld,\"seed\":%llu}\n",
               (long long)st->delay_ms, (long long)t,
               (unsigned long long)p->seed);
    else {
        char what[40];
        snprintf(what, sizeof(what), "pause %lld ms", (long long)st->delay_ms);
        printf("%7s  %-28s %10lld %10s  %d\n", "-", what, (long long)t, "",
               st->round);
    }
}

static void print_provision(const plan *p, const tether_step *st, int64_t t) {
    if (!p->json)
        printf("%7s  %-28s %10lld %10s  %d\n", "-", "provisioning (host list)",
               (long long)t, "", st->round);
}

static void print_summary(const plan *p, const walk *w) {
    if (p->json)
        return;
    printf("\n%d attempts, %lld ms in total; %s\n", w->attempts,
           (long long)w->t, w->why);
    if (w->unbounded && p->fail_after < 0)
        printf("note: attempts without a time limit are shown failing at "
               "once; use --fail-after to model their length\n");
}

/* ---- the walk ---------------------------------------------------------- */

static int64_t attempt_length(const plan *p, walk *w, int64_t budget) {
    if (budget < 0) {
        w->unbounded = 1;
        return p->fail_after < 0 ? 0 : p->fail_after;
    }
    if (p->fail_after >= 0 && p->fail_after < budget)
        return p->fail_after;
    return budget;
}

static const char *done_reason(const plan *p) {
    if (p->o.strategy == TETHER_STRATEGY_SEQUENTIAL &&
        p->o.backoff.kind == TETHER_BACKOFF_IMMEDIATE)
        return "done: the immediate backoff allows one retry pass only";
    return "done: the login timeout leaves no room for another pause or "
           "attempt";
}

/* Handles one step; returns 0 to go on, 1 when the plan is over. */
static int take_step(const plan *p, tether_schedule *s, walk *w,
                     const tether_step *st) {
    if (st->kind == TETHER_STEP_DONE) {
        w->why = done_reason(p);
        return 1;
    }
    if (st->round > p->rounds) {
        w->why = p->rounds_given ? "stopped after --rounds passes"
                                 : "stopped after the default number of "
                                   "passes (use --rounds)";
        return 1;
    }
    if (st->kind == TETHER_STEP_PAUSE) {
        w->held = 1; /* printed only if something follows it */
        w->pause = *st;
        w->pause_at = w->t;
        w->t += st->delay_ms;
        return 0;
    }
    if (w->held)
        print_pause(p, &w->pause, w->pause_at);
    w->held = 0;
    if (st->kind == TETHER_STEP_PROVISION) {
        print_provision(p, st, w->t);
        tether_schedule_provisioned(s, 1, p->nhosts);
        return 0;
    }
    print_attempt(p, st, w->t);
    w->attempts = st->attempt;
    w->t += attempt_length(p, w, st->budget_ms);
    return 0;
}

static int run_plan(const plan *p) {
    tether_schedule *s = NULL;
    tether_error err = {0};
    if (tether_schedule_create(&s, &p->o, 0, &err) != 0)
        return cli_usage_error(CMD, "%s", err.message);
    if (!p->json)
        print_header(p);
    walk w = {0};
    for (;;) {
        tether_step st;
        tether_schedule_next(s, w.t, &st);
        if (take_step(p, s, &w, &st))
            break;
    }
    if (w.held) /* a trailing pause leads nowhere: not part of the plan */
        w.t = w.pause_at;
    print_summary(p, &w);
    tether_schedule_destroy(s);
    return CLI_OK;
}

int cli_plan(int argc, char **argv) {
    if (cli_want_help(argc, argv)) {
        usage(stdout);
        return CLI_OK;
    }
    plan p;
    memset(&p, 0, sizeof(p));
    p.fail_after = -1;
    int rc = cli_parse_opts(CMD, argc, argv, plan_opts, take_opt, &p);
    if (!rc)
        rc = configure(&p);
    if (!rc)
        rc = run_plan(&p);
    free(p.hostbuf);
    return rc;
}
