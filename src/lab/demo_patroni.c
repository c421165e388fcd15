/* demo_patroni.c - `tether demo --patroni`: the demo's workload against a
 * Patroni-managed cluster (scripts/patroni-cluster: etcd and three
 * PostgreSQL nodes, each run by its own Patroni), with discovery from
 * Patroni's REST API (docs/patroni.md, "tether demo --patroni").
 *
 * One routing pool (tether_route=read-write-split) whose hosts come from
 * tether_patroni (the cluster's REST endpoints); T threads, each doing
 * three reads (TETHER_READONLY) to one idempotent write (its row of a
 * table, INSERT ... ON CONFLICT DO UPDATE), all through
 * tether_pool_run_for with a 15 s deadline. The faults are Patroni's, done
 * by the cluster script: a switchover, a kill -9 of the leader's
 * postmaster (Patroni restarts it in place), and the leader's Patroni
 * stopped (a failover; its node started again after). Live progress on
 * stderr, a line a second; the report (text, or --json one object) on
 * stdout. The cluster is stopped and removed at the end, on Ctrl-C and on
 * failure. */
#include "cli.h"
#include "faults.h"
#include "lab.h"
#include "tether_pq.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CMD "demo"
#define RUN_LIMIT_MS 15000 /* each call's deadline (tether_pool_run_for) */
#define MAX_FAULTS 3
#define MIN_SECONDS 20
/* A fault waits for the cluster to be healthy at most until this long
 * before the end of the run: the time it needs to play out. */
#define HEALTH_SLACK_MS 4000

/* Without Patroni support (docs/patroni.md, "Build") the command parses
 * its options and shows its help, then says so. */
#ifdef TETHER_HAVE_PATRONI
#define HAVE_PATRONI 1
#else
#define HAVE_PATRONI 0
#endif

typedef struct pfault {
    const char *kind; /* switchover, kill-leader, stop-leader-patroni */
    int64_t at_ms;    /* when to begin it (run clock) */
    int applied;
    int64_t t_ms;     /* epoch ms the script applied it at (P.lock while its
                         window runs) */
    int old_port;     /* the leader's port before it */
    int64_t promo_ms; /* stop-leader-patroni: the fault to /cluster first
                         seen showing another leader; -1 none or not
                         measured (the fault thread's, read after its join) */
    char detail[160]; /* the script's line, or why it failed */
    atomic_llong first_new_ms; /* first write by another server (epoch) */
    atomic_llong stall_ms, stall_end_ms; /* longest gap between writes */
    atomic_ullong app_errors;
} pfault;

static struct {
    int threads, pool, json, faults;
    int64_t seconds_ms;
    char ctl[PATH_MAX];
    char dir[PATH_MAX];
    char hosts[512], rest[512], user[64], password[128], db[64];
    tether_pool *p;
    atomic_int stop;
    atomic_ullong ops, app_errors, writes, reads_standby, reads_primary;
    atomic_llong last_write_ms;
    atomic_int leader_port;
    pfault f[MAX_FAULTS];
    int nf;
    atomic_int cur; /* the fault whose window runs, -1: none */
    int64_t t0;     /* epoch ms of the workload's start */
    char first_error[TETHER_MSG_MAX];
    pthread_mutex_t lock;
} P;

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
    interrupted = sig;
    atomic_store(&P.stop, 1);
}

static int64_t epoch_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps until epoch ms t or the stop; returns 0 when stopped. */
static int sleep_until(int64_t t) {
    while (!atomic_load(&P.stop)) {
        int64_t left = t - epoch_ms();
        if (left <= 0)
            return 1;
        if (left > 100)
            left = 100;
        struct timespec ts = {0, (long)left * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* scripts/patroni-cluster: $TETHER_PATRONI_CLUSTER, else beside the
 * running tether (../libexec/tether, libexec/tether), as the demo finds
 * scripts/pg-cluster (src/lab/faults.c). */
static int find_ctl(void) {
    return fault_find_tool("TETHER_PATRONI_CLUSTER", "patroni-cluster", P.ctl,
                           sizeof(P.ctl));
}

/* Runs the cluster script with args (NULL-terminated); its stderr to ours
 * when loud, else to nowhere; the last line of its stdout into out.
 * Returns its exit status, or -1. */
static int ctl(int loud, char *out, size_t n, const char *const *args) {
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        const char *argv[16];
        int k = 0;
        argv[k++] = P.ctl;
        for (int i = 0; args[i] && k < 15; i++)
            argv[k++] = args[i];
        argv[k] = NULL;
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        if (!loud) {
            int devnull = open("/dev/null", O_WRONLY);
            dup2(devnull, 2);
        }
        execv(P.ctl, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    char buf[1024], line[1024] = "";
    size_t have = 0;
    ssize_t r;
    while ((r = read(pfd[0], buf + have, sizeof(buf) - 1 - have)) > 0 ||
           (r < 0 && errno == EINTR)) {
        if (r < 0)
            continue;
        have += (size_t)r;
        buf[have] = '\0';
        char *nl;
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = '\0';
            if (*buf)
                snprintf(line, sizeof(line), "%s", buf);
            have -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, have + 1);
        }
        if (have == sizeof(buf) - 1)
            have = 0;
    }
    close(pfd[0]);
    if (out)
        snprintf(out, n, "%s", line);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Reads D/env (KEY='value' lines) for what the pool needs. */
static int load_env(void) {
    char path[PATH_MAX + 8], line[1024];
    snprintf(path, sizeof(path), "%s/env", P.dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    struct {
        const char *key;
        char *dst;
        size_t n;
    } want[] = {{"PATRONI_HOSTS", P.hosts, sizeof(P.hosts)},
                {"PATRONI_REST", P.rest, sizeof(P.rest)},
                {"PATRONI_USER", P.user, sizeof(P.user)},
                {"PATRONI_PASSWORD", P.password, sizeof(P.password)},
                {"PATRONI_DB", P.db, sizeof(P.db)}};
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *v = eq + 1;
        size_t len = strlen(v);
        if (len >= 2 && v[0] == '\'' && v[len - 1] == '\'') {
            v[len - 1] = '\0';
            v++;
        }
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
            if (!strcmp(line, want[i].key))
                snprintf(want[i].dst, want[i].n, "%s", v);
    }
    fclose(f);
    return P.hosts[0] && P.rest[0] && P.user[0] && P.db[0] ? 0 : -1;
}

/* ---- the workload ---------------------------------------------------- */

typedef struct op {
    int worker, write;
    long long seq;
    int port, inrec;
} op;

static int work(void *conn, void *arg, const tether_attempt *a,
                tether_error *err) {
    (void)a;
    op *o = arg;
    PGresult *res;
    if (o->write) {
        char w[16], s[32];
        snprintf(w, sizeof(w), "%d", o->worker);
        snprintf(s, sizeof(s), "%lld", o->seq);
        const char *params[2] = {w, s};
        res = PQexecParams(conn,
                           "INSERT INTO tether_demo_patroni(worker, n) "
                           "VALUES ($1, $2) ON CONFLICT (worker) DO UPDATE "
                           "SET n = EXCLUDED.n RETURNING inet_server_port()",
                           2, NULL, params, NULL, NULL, 0);
    } else {
        res =
            PQexec(conn, "SELECT inet_server_port(), pg_is_in_recovery()::int");
    }
    int rc = 0;
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        rc = tether_pq_error(conn, res, err);
    } else {
        o->port = atoi(PQgetvalue(res, 0, 0));
        o->inrec = o->write ? 0 : atoi(PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return rc;
}

static void note_write(int port) {
    int64_t now = epoch_ms();
    int64_t prev = atomic_exchange(&P.last_write_ms, now);
    atomic_store(&P.leader_port, port);
    int k = atomic_load(&P.cur);
    if (k < 0)
        return;
    pfault *f = &P.f[k];
    if (port != f->old_port && !atomic_load(&f->first_new_ms))
        atomic_store(&f->first_new_ms, now);
    pthread_mutex_lock(&P.lock);
    if (prev && now - prev > atomic_load(&f->stall_ms) &&
        now <= f->t_ms + 30000 && now >= f->t_ms) {
        atomic_store(&f->stall_ms, now - (prev > f->t_ms ? prev : f->t_ms));
        atomic_store(&f->stall_end_ms, now);
    }
    pthread_mutex_unlock(&P.lock);
}

static void *worker_main(void *arg) {
    int w = (int)(intptr_t)arg;
    long long seq = 0;
    unsigned i = (unsigned)w;
    while (!atomic_load(&P.stop)) {
        op o = {w, (i++ % 4) == 0, 0, 0, 0};
        if (o.write)
            o.seq = ++seq;
        unsigned flags = TETHER_IDEMPOTENT | (o.write ? 0 : TETHER_READONLY);
        tether_error err = {0};
        int rc = tether_pool_run_for(P.p, flags, RUN_LIMIT_MS, work, &o, &err);
        if (atomic_load(&P.stop) && rc == TETHER_ECLOSED)
            break;
        if (rc == 0) {
            atomic_fetch_add(&P.ops, 1);
            if (o.write) {
                atomic_fetch_add(&P.writes, 1);
                note_write(o.port);
            } else {
                atomic_fetch_add(o.inrec ? &P.reads_standby : &P.reads_primary,
                                 1);
            }
        } else {
            atomic_fetch_add(&P.app_errors, 1);
            int k = atomic_load(&P.cur);
            if (k >= 0)
                atomic_fetch_add(&P.f[k].app_errors, 1);
            pthread_mutex_lock(&P.lock);
            if (!P.first_error[0])
                snprintf(P.first_error, sizeof(P.first_error), "%s",
                         err.message);
            pthread_mutex_unlock(&P.lock);
        }
    }
    return NULL;
}

/* ---- the faults ------------------------------------------------------ */

static int leader_port(char *name, size_t n) {
    char line[256];
    const char *args[] = {"leader", P.dir, NULL};
    if (ctl(0, line, sizeof(line), args) != 0)
        return 0;
    char *colon = strrchr(line, ':');
    char *sp = strchr(line, ' ');
    if (!colon || !sp)
        return 0;
    snprintf(name, n, "%.*s", (int)(sp - line), line);
    return atoi(colon + 1);
}

/* healthy_by waits until the cluster is healthy again (patroni-cluster
 * status: a running leader, every replica streaming from it) or epoch ms
 * until; 0 when stopped. A fault on a cluster still mending from the last
 * shows Patroni's limits, not tether's: after a kill -9 of the leader, its
 * replicas could not stream for seconds (their slots were gone from the
 * restarted leader), fell more than maximum_lag_on_failover behind, and
 * the leader's Patroni stopped then had no successor. */
static int healthy_by(int64_t until, const char *kind) {
    const char *args[] = {"status", P.dir, NULL};
    int64_t t0 = epoch_ms();
    int said = 0;
    while (!atomic_load(&P.stop) && ctl(0, NULL, 0, args) != 0) {
        if (epoch_ms() >= until) {
            fprintf(stderr,
                    "tether demo: %5.1fs the cluster is not healthy yet; "
                    "%s now anyway\n",
                    (double)(epoch_ms() - P.t0) / 1000.0, kind);
            return 1;
        }
        if (!said++)
            fprintf(stderr,
                    "tether demo: %5.1fs waiting for the cluster to be "
                    "healthy before %s\n",
                    (double)(t0 - P.t0) / 1000.0, kind);
        if (!sleep_until(epoch_ms() + 200))
            return 0;
    }
    return !atomic_load(&P.stop);
}

static void *fault_main(void *arg) {
    (void)arg;
    for (int k = 0; k < P.nf; k++) {
        pfault *f = &P.f[k];
        if (!sleep_until(P.t0 + f->at_ms) ||
            !healthy_by(P.t0 + P.seconds_ms - HEALTH_SLACK_MS, f->kind))
            return NULL;
        char old[64] = "", line[256] = "";
        f->old_port = leader_port(old, sizeof(old));
        const char *args[] = {f->kind, P.dir, NULL};
        f->t_ms = epoch_ms(); /* before the window opens (cur) */
        int64_t began = f->t_ms;
        atomic_store(&P.cur, k);
        int rc = ctl(0, line, sizeof(line), args);
        int64_t took = epoch_ms() - began;
        size_t kl = strlen(f->kind);
        if (rc == 0 && !strncmp(line, f->kind, kl) && line[kl] == ' ') {
            f->applied = 1;
            pthread_mutex_lock(&P.lock); /* note_write reads it under it */
            f->t_ms = atoll(line + kl + 1);
            pthread_mutex_unlock(&P.lock);
            const char *d = strchr(line + kl + 1, ' ');
            snprintf(f->detail, sizeof(f->detail), "%s", d ? d + 1 : "");
        } else {
            snprintf(f->detail, sizeof(f->detail),
                     "patroni-cluster %s failed (exit %d)", f->kind, rc);
        }
        fprintf(stderr,
                "tether demo: %5.1fs %s %s (the command took %lld ms)\n",
                (double)(f->t_ms - P.t0) / 1000.0, f->kind, f->detail,
                (long long)took);
        if (f->applied && !strcmp(f->kind, "stop-leader-patroni") && old[0]) {
            /* Only once another node leads: a Patroni started again at
             * once can win the leader race it just left (it has the
             * newest WAL), and then never streams from a leader. */
            const char *a1[] = {"wait-leader", P.dir, "--not", old,
                                "--timeout",   "30",  NULL};
            const char *a2[] = {"start-node", P.dir, old, NULL};
            char seen[128] = "", who[64];
            long long at = 0;
            int led = ctl(0, seen, sizeof(seen), a1) == 0 &&
                      sscanf(seen, "%63s %lld", who, &at) == 2;
            if (led)
                f->promo_ms = at - f->t_ms;
            else
                fprintf(stderr,
                        "tether demo: %5.1fs no node but %s led within 30 s "
                        "of the stop: Patroni did not fail over\n",
                        (double)(epoch_ms() - P.t0) / 1000.0, old);
            if (led && ctl(0, NULL, 0, a2) == 0)
                fprintf(stderr, "tether demo: %5.1fs %s started again\n",
                        (double)(epoch_ms() - P.t0) / 1000.0, old);
        }
    }
    return NULL;
}

static int64_t write_gap_ms(const pfault *f) {
    int64_t t = !strcmp(f->kind, "kill-leader") ? atomic_load(&f->stall_end_ms)
                                                : atomic_load(&f->first_new_ms);
    return f->applied && t ? t - f->t_ms : -1;
}

/* ---- the report ------------------------------------------------------ */

static void progress(int64_t t, uint64_t last_ops, int64_t dt) {
    tether_pool_metrics m;
    tether_pool_metrics_get(P.p, &m);
    uint64_t ops = atomic_load(&P.ops);
    fprintf(stderr,
            "%3llds %6.0f ops/s  retries %llu  errors %llu  leader "
            "127.0.0.1:%d  reads standby %llu primary %llu  patroni "
            "requests %llu\n",
            (long long)(t / 1000),
            dt > 0 ? (double)(ops - last_ops) * 1000.0 / (double)dt : 0.0,
            (unsigned long long)m.retries,
            (unsigned long long)atomic_load(&P.app_errors),
            atomic_load(&P.leader_port),
            (unsigned long long)atomic_load(&P.reads_standby),
            (unsigned long long)atomic_load(&P.reads_primary),
            (unsigned long long)m.patroni_requests);
}

static void report(int64_t ran_ms) {
    tether_pool_metrics m;
    tether_pool_metrics_get(P.p, &m);
    int64_t failover = -1;
    for (int k = 0; k < P.nf; k++)
        if (!strcmp(P.f[k].kind, "stop-leader-patroni"))
            failover = write_gap_ms(&P.f[k]);
    if (P.json) {
        printf("{\"patroni\":true,\"seconds\":%.1f,\"threads\":%d,\"pool\":%d,"
               "\"ops\":%llu,\"app_errors\":%llu,\"retries\":%llu,"
               "\"writes\":%llu,\"reads_standby\":%llu,\"reads_primary\":%llu,"
               "\"patroni_requests\":%llu,\"patroni_failures\":%llu,"
               "\"failover_ms\":%lld,\"faults\":[",
               (double)ran_ms / 1000.0, P.threads, P.pool,
               (unsigned long long)atomic_load(&P.ops),
               (unsigned long long)atomic_load(&P.app_errors),
               (unsigned long long)m.retries,
               (unsigned long long)atomic_load(&P.writes),
               (unsigned long long)atomic_load(&P.reads_standby),
               (unsigned long long)atomic_load(&P.reads_primary),
               (unsigned long long)m.patroni_requests,
               (unsigned long long)m.patroni_failures, (long long)failover);
        for (int k = 0; k < P.nf; k++) {
            const pfault *f = &P.f[k];
            printf("%s{\"kind\":\"%s\",\"at_ms\":%lld,\"applied\":%s,"
                   "\"recovery_ms\":%lld,\"write_stall_ms\":%lld,"
                   "\"promotion_ms\":%lld,\"app_errors\":%llu,\"detail\":",
                   k ? "," : "", f->kind,
                   (long long)(f->t_ms ? f->t_ms - P.t0 : -1),
                   f->applied ? "true" : "false", (long long)write_gap_ms(f),
                   (long long)atomic_load(&f->stall_ms), (long long)f->promo_ms,
                   (unsigned long long)atomic_load(&f->app_errors));
            cli_json_str(f->detail);
            printf("}");
        }
        printf("]}\n");
        return;
    }
    printf("tether demo --patroni: %.1f s, %d threads on a routing pool of "
           "%d, hosts from Patroni\n",
           (double)ran_ms / 1000.0, P.threads, P.pool);
    printf("  ops %llu (writes %llu; reads on a replica %llu, on the leader "
           "%llu), retries %llu, errors reaching the workload %llu\n",
           (unsigned long long)atomic_load(&P.ops),
           (unsigned long long)atomic_load(&P.writes),
           (unsigned long long)atomic_load(&P.reads_standby),
           (unsigned long long)atomic_load(&P.reads_primary),
           (unsigned long long)m.retries,
           (unsigned long long)atomic_load(&P.app_errors));
    printf("  Patroni REST requests %llu (%llu failed)\n",
           (unsigned long long)m.patroni_requests,
           (unsigned long long)m.patroni_failures);
    for (int k = 0; k < P.nf; k++) {
        const pfault *f = &P.f[k];
        if (!f->t_ms)
            continue;
        printf("  %-20s at %5.1f s  writes on the leader again after %lld "
               "ms (no write for %lld ms), errors %llu  %s\n",
               f->kind, (double)(f->t_ms - P.t0) / 1000.0,
               (long long)write_gap_ms(f), (long long)atomic_load(&f->stall_ms),
               (unsigned long long)atomic_load(&f->app_errors), f->detail);
        if (f->promo_ms >= 0)
            printf("  %-20s Patroni showed the new leader after %lld ms\n", "",
                   (long long)f->promo_ms);
    }
    if (P.first_error[0])
        printf("  first error: %s\n", P.first_error);
}

/* ---- the command ----------------------------------------------------- */

enum {
    OPT_THREADS = 1000,
    OPT_POOL,
    OPT_SECONDS,
    OPT_JSON,
    OPT_NO_FAULTS,
    OPT_PATRONI
};

static const struct option options[] = {
    {"threads", required_argument, NULL, OPT_THREADS},
    {"pool", required_argument, NULL, OPT_POOL},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"json", no_argument, NULL, OPT_JSON},
    {"no-faults", no_argument, NULL, OPT_NO_FAULTS},
    {"patroni", no_argument, NULL, OPT_PATRONI},
    {NULL, 0, NULL, 0}};

static int take_opt(void *ctx, int opt, const char *v) {
    (void)ctx;
    switch (opt) {
    case OPT_THREADS:
        return cli_parse_count(CMD, "--threads", v, 1, 64, &P.threads);
    case OPT_POOL:
        return cli_parse_count(CMD, "--pool", v, 1, 50, &P.pool);
    case OPT_SECONDS:
        if (cli_parse_seconds(CMD, v, &P.seconds_ms))
            return CLI_USAGE;
        if (P.seconds_ms < MIN_SECONDS * 1000 || P.seconds_ms > 3600000)
            return cli_usage_error(CMD,
                                   "bad value '%s' for --seconds: want %d s "
                                   "to 3600 s with --patroni (the faults "
                                   "need room)",
                                   v, MIN_SECONDS);
        return 0;
    case OPT_JSON:
        P.json = 1;
        return 0;
    case OPT_NO_FAULTS:
        P.faults = 0;
        return 0;
    case OPT_PATRONI:
        return 0;
    default:
        return cli_usage_error(CMD, "unexpected argument '%s' (with --patroni)",
                               v);
    }
}

static void help(void) {
    printf(
        "usage: tether demo --patroni [--seconds N] [--threads T] [--pool P]\n"
        "                   [--json] [--no-faults]\n\n"
        "Starts a scratch Patroni cluster on 127.0.0.1 (scripts/patroni-"
        "cluster: etcd\nand three PostgreSQL nodes, each run by Patroni; "
        "Debian's patroni and\netcd-server), runs a workload through one "
        "tether routing pool whose hosts\ncome from Patroni's REST API "
        "(tether_patroni, refreshed every second),\nand does Patroni's faults "
        "at 20 %%, 45 %% and 70 %% of the run, each once the\ncluster is "
        "healthy "
        "again (waiting at most until 4 s before the end): a\nswitchover, a "
        "kill -9 of the leader's postmaster, and the leader's Patroni\n"
        "stopped (a failover; that node started again once another leads). "
        "The\ncluster is stopped and removed at the end, on Ctrl-C and on "
        "failure. Needs\na tether built with Patroni support "
        "(docs/patroni.md).\n\n"
        "  --seconds N   how long the workload runs (default 60, at least "
        "20)\n"
        "  --threads T   application threads (default 8): 3 reads to 1 "
        "idempotent\n                write, each with a 15 s deadline\n"
        "  --pool P      the pool's size (default 4, each side)\n"
        "  --json        the report as one JSON object on stdout\n"
        "  --no-faults   the workload alone\n\n"
        "Progress goes to stderr, a line a second. Exit status: 0, or 1 when "
        "a fault\ncould not be done or an error reached the workload.\n\n"
        "--json fields: patroni (true), seconds, threads, pool, ops, "
        "app_errors,\nretries, writes, reads_standby, reads_primary, "
        "patroni_requests,\npatroni_failures, failover_ms (the stopped "
        "Patroni's recovery_ms), faults\n(kind, at_ms, applied, recovery_ms: "
        "from the fault to the first write done\nby the new leader, for "
        "kill-leader by the restarted one, -1: none;\nwrite_stall_ms, "
        "promotion_ms: for stop-leader-patroni, from the fault to\n/cluster "
        "first seen showing another leader, -1: none within 30 s or not\n"
        "measured; app_errors, detail).\n");
}

static void catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void stop_cluster(void) {
    if (!P.dir[0])
        return;
    const char *args[] = {"stop", P.dir, NULL};
    ctl(0, NULL, 0, args);
}

static int setup_and_run(void) {
    char sql[256];
    snprintf(sql, sizeof(sql),
             "CREATE TABLE tether_demo_patroni(worker int PRIMARY KEY, n "
             "bigint); GRANT ALL ON tether_demo_patroni TO \"%s\"",
             P.user);
    const char *a[] = {"psql", P.dir, "-d", P.db, "-q", "-c", sql, NULL};
    if (ctl(0, NULL, 0, a) != 0) {
        fprintf(stderr, "tether demo: creating the table failed\n");
        return CLI_FAIL;
    }
    char first[sizeof(P.hosts)];
    snprintf(first, sizeof(first), "%s", P.hosts);
    first[strcspn(first, ",")] = '\0';
    char *colon = strrchr(first, ':');
    if (!colon)
        return CLI_FAIL;
    *colon = '\0';
    char ci[2048];
    snprintf(ci, sizeof(ci),
             "host=%s port=%s user=%s password=%s dbname=%s sslmode=disable "
             "gssencmode=disable connect_timeout=2 "
             "application_name=tether-demo tether_pool_name=demo-patroni "
             "tether_pool_max=%d tether_route=read-write-split "
             "tether_max_standby_lag=1MB tether_patroni=%s "
             "tether_patroni_refresh=1s",
             first, colon + 1, P.user, P.password, P.db, P.pool, P.rest);
    tether_error err;
    if (tether_pool_open(&P.p, ci, NULL, NULL, &err) != 0) {
        fprintf(stderr, "tether demo: opening the pool: %s\n", err.message);
        return CLI_FAIL;
    }
    fprintf(stderr,
            "tether demo: %d threads on a routing pool of %d for %lld s, "
            "hosts from tether_patroni=%s; %s\n",
            P.threads, P.pool, (long long)(P.seconds_ms / 1000), P.rest,
            P.faults ? "Patroni's faults on a schedule" : "no faults");
    static const char *const kinds[] = {"switchover", "kill-leader",
                                        "stop-leader-patroni"};
    static const int pct[] = {20, 45, 70};
    P.nf = P.faults ? MAX_FAULTS : 0;
    for (int k = 0; k < P.nf; k++) {
        P.f[k].kind = kinds[k];
        P.f[k].at_ms = P.seconds_ms * pct[k] / 100;
        P.f[k].promo_ms = -1;
    }
    atomic_store(&P.cur, -1);
    P.t0 = epoch_ms();
    pthread_t *ws = calloc((size_t)P.threads, sizeof(*ws));
    if (!ws)
        return CLI_FAIL;
    for (int i = 0; i < P.threads; i++)
        pthread_create(&ws[i], NULL, worker_main, (void *)(intptr_t)(i + 1));
    pthread_t ft;
    int have_ft = P.nf && pthread_create(&ft, NULL, fault_main, NULL) == 0;
    int64_t next = P.t0 + 1000, last_t = P.t0;
    uint64_t last_ops = 0;
    while (
        sleep_until(next < P.t0 + P.seconds_ms ? next : P.t0 + P.seconds_ms) &&
        epoch_ms() < P.t0 + P.seconds_ms) {
        int64_t t = epoch_ms();
        progress(t - P.t0, last_ops, t - last_t);
        last_ops = atomic_load(&P.ops);
        last_t = t;
        next += 1000;
    }
    int64_t ran = epoch_ms() - P.t0;
    atomic_store(&P.stop, 1);
    tether_pool_close(P.p, 0, NULL);
    if (have_ft)
        pthread_join(ft, NULL);
    for (int i = 0; i < P.threads; i++)
        pthread_join(ws[i], NULL);
    free(ws);
    if (interrupted)
        return CLI_FAIL;
    report(ran);
    int rc = atomic_load(&P.app_errors) ? CLI_FAIL : CLI_OK;
    for (int k = 0; k < P.nf; k++)
        if (!P.f[k].applied)
            rc = CLI_FAIL;
    return rc;
}

int tether__lab_demo_patroni(int argc, char **argv) {
    if (cli_want_help(argc, argv)) {
        help();
        return CLI_OK;
    }
    P.threads = 8;
    P.pool = 4;
    P.seconds_ms = 60000;
    P.faults = 1;
    int rc = cli_parse_opts(CMD, argc, argv, options, take_opt, NULL);
    if (rc)
        return rc;
    if (!HAVE_PATRONI) {
        fprintf(stderr, "tether demo: --patroni: this tether was built "
                        "without Patroni support (cmake -DTETHER_PATRONI=ON "
                        "needs libcurl and json-c)\n");
        return CLI_FAIL;
    }
    if (find_ctl() != 0) {
        fprintf(stderr,
                "tether demo: --patroni: patroni-cluster not found (set "
                "TETHER_PATRONI_CLUSTER, or install it in ../libexec/tether "
                "beside tether)\n");
        return CLI_FAIL;
    }
    catch_signals();
    pthread_mutex_init(&P.lock, NULL);
    fprintf(stderr, "tether demo: starting a scratch Patroni cluster (etcd, "
                    "3 nodes)\n");
    char line[512] = "";
    const char *args[] = {"start", NULL};
    int st = ctl(1, line, sizeof(line), args);
    if (line[0] == '/')
        snprintf(P.dir, sizeof(P.dir), "%s", line);
    if (st != 0 || !P.dir[0] || load_env() != 0) {
        fprintf(stderr, "tether demo: the Patroni cluster did not start\n");
        stop_cluster();
        return interrupted ? 128 + interrupted : CLI_FAIL;
    }
    fprintf(stderr, "tether demo: cluster in %s (removed at the end)\n", P.dir);
    rc = interrupted ? CLI_FAIL : setup_and_run();
    if (P.p)
        tether_pool_destroy(P.p);
    stop_cluster();
    if (interrupted) {
        fprintf(stderr, "tether demo: interrupted; cluster removed\n");
        return 128 + interrupted;
    }
    return rc;
}
