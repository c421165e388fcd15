/* faults.c - the scratch cluster and its faults (faults.h). */
#include "faults.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int signal_node(const fault_cluster *c, int node, int sig);

static const char *const kind_names[FAULT_NKINDS] = {
    "terminate", "restart",  "hang",           "too-many",
    "blackhole", "failover", "terminate-some", "stop"};

const char *fault_kind_name(fault_kind k) {
    return k >= 0 && k < FAULT_NKINDS ? kind_names[k] : "?";
}

static void say(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *buf, size_t n, const char *fmt, ...) {
    if (!buf || !n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

/* ---- the schedule -------------------------------------------------------- */

int fault_schedule_demo(fault_event *ev, int64_t total_ms, int blackhole) {
    /* Where each fault starts, in thousandths of the run, and how long it
     * is held (scaled with the run, within [1 s, 4 s]; for the failover,
     * how long the primary is down before the promotion). */
    static const struct {
        fault_kind kind;
        int at, hold;
    } plan[] = {
        {FAULT_TERMINATE, 80, 0},   {FAULT_RESTART, 200, 0},
        {FAULT_HANG, 320, 50},      {FAULT_TOO_MANY, 450, 60},
        {FAULT_BLACKHOLE, 590, 60}, {FAULT_FAILOVER, 740, 25},
    };
    int k = 0;
    for (size_t i = 0; i < sizeof(plan) / sizeof(plan[0]); i++) {
        if (plan[i].kind == FAULT_BLACKHOLE && !blackhole)
            continue;
        int64_t hold = total_ms * plan[i].hold / 1000;
        if (plan[i].hold)
            hold = hold < 1000 ? 1000 : hold > 4000 ? 4000 : hold;
        ev[k++] =
            (fault_event){total_ms * plan[i].at / 1000, plan[i].kind, hold};
    }
    return k;
}

static uint64_t lcg(uint64_t *seed) {
    *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return *seed >> 33;
}

int fault_schedule_random(fault_event *ev, int max, int64_t total_ms,
                          uint64_t seed) {
    int k = 0, left = 0;
    fault_kind bag[FAULT_NKINDS];
    int64_t t = 2000; /* after the warm-up */
    while (k < max) {
        if (left == 0) { /* every kind once per round, in a random order */
            for (int i = 0; i < FAULT_NKINDS; i++)
                bag[i] = (fault_kind)i;
            for (int i = FAULT_NKINDS - 1; i > 0; i--) {
                int j = (int)(lcg(&seed) % (uint64_t)(i + 1));
                fault_kind x = bag[i];
                bag[i] = bag[j];
                bag[j] = x;
            }
            left = FAULT_NKINDS;
        }
        fault_kind kind = bag[--left];
        uint64_t r = lcg(&seed);
        int64_t hold = 0;
        if (kind == FAULT_HANG)
            hold = 1000 + (int64_t)(r % 4001); /* 1-5 s */
        else if (kind == FAULT_STOP)
            hold = 2000 + (int64_t)(r % 4001); /* 2-6 s */
        else if (kind == FAULT_TOO_MANY || kind == FAULT_BLACKHOLE)
            hold = 1000 + (int64_t)(r % 2001);
        else if (kind == FAULT_FAILOVER)
            hold = 500 + (int64_t)(r % 1001);
        if (t + hold + 3000 > total_ms)
            break;
        ev[k++] = (fault_event){t, kind, hold};
        t += hold + 1000 + (int64_t)((r >> 12) % 2001); /* 1-3 s apart */
    }
    return k;
}

/* ---- pg-cluster ---------------------------------------------------------- */

/* Where tether's helper programs are, relative to the running tether:
 * installed, in PREFIX/libexec/tether beside PREFIX/bin/tether; in a build
 * tree, in libexec/tether beside the tether built there (CMakeLists.txt
 * puts them there). Never in the source tree: an installed tether must not
 * depend on it (docs/testing.md, "Faults on a schedule"). */
static const char *const tool_dirs[] = {"../libexec/tether", "libexec/tether"};
#define TOOL_DIRS_TEXT "../libexec/tether/ and libexec/tether/ beside tether"

int fault_find_tool(const char *env, const char *name, char *out, size_t n) {
    const char *e = getenv(env);
    if (e && *e) {
        snprintf(out, n, "%s", e);
        return access(out, X_OK);
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0)
        return -1;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    for (size_t i = 0; i < sizeof(tool_dirs) / sizeof(tool_dirs[0]); i++) {
        int k = snprintf(out, n, "%s/%s/%s", exe, tool_dirs[i], name);
        if (k > 0 && (size_t)k < n && access(out, X_OK) == 0)
            return 0;
    }
    return -1;
}

/* Run prog (pg-cluster or faultproxy) with args (NULL-terminated), its
 * stderr to ours (or, when quiet, to the cluster's ctl.log); with out set,
 * the last line of its stdout lands there. Returns its exit status, or
 * -1. */
static int ctl_run(const fault_cluster *c, const char *prog, int quiet,
                   char *out, size_t n, const char *const *args) {
    int pfd[2] = {-1, -1};
    if (out && pipe(pfd) != 0)
        return -1;
    char log[300];
    snprintf(log, sizeof(log), "%s/ctl.log", c->dir);
    fflush(stdout); /* else the child's copy of the buffers is written too */
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        const char *argv[16];
        int k = 0;
        argv[k++] = prog;
        for (int i = 0; args[i] && k < 15; i++)
            argv[k++] = args[i];
        argv[k] = NULL;
        int devnull = open("/dev/null", O_WRONLY);
        if (out) {
            dup2(pfd[1], 1);
            close(pfd[0]);
            close(pfd[1]);
        } else {
            dup2(devnull, 1);
        }
        if (quiet) { /* its messages to the cluster's ctl.log */
            int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(fd >= 0 ? fd : devnull, 2);
        }
        execv(prog, (char *const *)argv);
        _exit(127);
    }
    if (out) {
        close(pfd[1]);
        char buf[512], line[512] = "";
        size_t have = 0;
        ssize_t r;
        while ((r = read(pfd[0], buf + have, sizeof(buf) - 1 - have)) > 0) {
            have += (size_t)r;
            buf[have] = '\0';
            char *nl;
            while ((nl = strchr(buf, '\n')) != NULL) {
                *nl = '\0';
                if (*buf)
                    snprintf(line, sizeof(line), "%s", buf);
                memmove(buf, nl + 1, have - (size_t)(nl + 1 - buf) + 1);
                have -= (size_t)(nl + 1 - buf);
            }
            if (have == sizeof(buf) - 1)
                have = 0; /* an overlong line: not the one we want */
        }
        close(pfd[0]);
        snprintf(out, n, "%s", line);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run pg-cluster a1 a2 a3 quietly; on failure detail gets its last
 * message. Returns 0 or -1. */
static int ctl(const fault_cluster *c, const char *a1, const char *a2,
               const char *a3, char *detail, size_t n) {
    const char *args[] = {a1, a2, a3, NULL};
    int rc = ctl_run(c, c->ctl, 1, NULL, 0, args);
    if (rc == 0)
        return 0;
    char path[300], line[300], last[300] = "";
    snprintf(path, sizeof(path), "%s/ctl.log", c->dir);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        if (line[0] != '\n' && strncmp(line, "----", 4) != 0)
            snprintf(last, sizeof(last), "%s", line);
    if (f)
        fclose(f);
    last[strcspn(last, "\n")] = '\0';
    say(detail, n, "pg-cluster %s failed (exit %d)%s%s", a1, rc,
        last[0] ? ": " : "", last);
    return -1;
}

static const char *node_name(int node) {
    return node ? "standby" : "primary";
}

/* Read pg-cluster's env file (KEY=value lines, no quoting needed for the
 * values it writes here: paths without spaces, numbers, plain words). */
static int load_env(fault_cluster *c, char *why, size_t n) {
    char path[300];
    snprintf(path, sizeof(path), "%s/env", c->dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        say(why, n, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq++ = '\0';
        struct {
            const char *key;
            char *dst;
            size_t cap;
        } s[] = {{"PGC_HOST", c->host, sizeof(c->host)},
                 {"PGC_USER", c->user, sizeof(c->user)},
                 {"PGC_PASSWORD", c->password, sizeof(c->password)},
                 {"PGC_DB", c->db, sizeof(c->db)},
                 {"PGC_SOCK", c->sock, sizeof(c->sock)},
                 {"PGC_SUPERUSER", c->super, sizeof(c->super)}};
        for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
            if (!strcmp(line, s[i].key))
                snprintf(s[i].dst, s[i].cap, "%s", eq);
        if (!strcmp(line, "PRIMARY_PORT"))
            c->port[0] = atoi(eq);
        if (!strcmp(line, "STANDBY_PORT"))
            c->port[1] = atoi(eq);
    }
    fclose(f);
    if (!c->port[0] || !c->port[1] || !*c->sock) {
        say(why, n, "%s: incomplete", path);
        return -1;
    }
    return 0;
}

/* Start a fault proxy (tests/tools/faultproxy) in front of node. */
static int proxy_start(fault_cluster *c, int node, char *why, size_t n) {
    char target[96];
    snprintf(target, sizeof(target), "%s:%d", c->host, c->port[node]);
    snprintf(c->proxy_ctl[node], sizeof(c->proxy_ctl[node]), "%s/fp%d.sock",
             c->dir, node);
    int fds[2];
    char log[300];
    snprintf(log, sizeof(log), "%s/fp%d.log", c->dir, node);
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlives the demo */
        int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (lfd >= 0)
            dup2(lfd, 2); /* its mode changes: not between our lines */
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(c->proxy_bin, c->proxy_bin, "serve", "--listen", "0", "--target",
              target, "--control", c->proxy_ctl[node], (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = pid > 0 ? fdopen(fds[0], "r") : NULL;
    char line[64] = "";
    if (f && fgets(line, sizeof(line), f) &&
        sscanf(line, "port %d", &c->proxy_port[node]) == 1) {
        c->proxy_pid[node] = pid;
        fclose(f);
        return 0;
    }
    if (f)
        fclose(f);
    else
        close(fds[0]);
    if (pid > 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    say(why, n, "the fault proxy %s did not start", c->proxy_bin);
    return -1;
}

static int proxy_mode(const fault_cluster *c, int node, const char *mode) {
    const char *args[] = {"ctl", c->proxy_ctl[node], mode, NULL};
    return ctl_run(c, c->proxy_bin, 1, NULL, 0, args) == 0 ? 0 : -1;
}

int fault_cluster_start(fault_cluster *c, int proxies, char *why, size_t n) {
    memset(c, 0, sizeof(*c));
    if (fault_find_tool("TETHER_PG_CLUSTER", "pg-cluster", c->ctl,
                        sizeof(c->ctl)) != 0) {
        say(why, n,
            "cannot find pg-cluster (tried $TETHER_PG_CLUSTER, " TOOL_DIRS_TEXT
            ")");
        return -1;
    }
    if (proxies && fault_find_tool("TETHER_FAULTPROXY", "faultproxy",
                                   c->proxy_bin, sizeof(c->proxy_bin)) != 0) {
        say(why, n,
            "cannot find faultproxy (tried $TETHER_FAULTPROXY, " TOOL_DIRS_TEXT
            ")");
        return -1;
    }
    const char *args[] = {"start", NULL};
    char dir[256];
    if (ctl_run(c, c->ctl, 0, dir, sizeof(dir), args) != 0 || dir[0] != '/') {
        say(why, n, "pg-cluster start failed (its messages are above)");
        return -1;
    }
    snprintf(c->dir, sizeof(c->dir), "%s", dir);
    if (load_env(c, why, n) != 0)
        return -1;
    c->writable = 0;
    c->standby_up = 1;
    for (int node = 0; proxies && node < 2; node++)
        if (proxy_start(c, node, why, n) != 0)
            return -1;
    return 0;
}

void fault_cluster_stop(fault_cluster *c) {
    for (int node = 0; node < 2; node++)
        if (c->proxy_pid[node] > 0) {
            kill(c->proxy_pid[node], SIGTERM);
            waitpid(c->proxy_pid[node], NULL, 0);
            c->proxy_pid[node] = 0;
        }
    if (c->dir[0]) {
        /* a node left stopped by SIGSTOP would not stop */
        for (int node = 0; node < 2; node++) {
            char pidfile[300];
            snprintf(pidfile, sizeof(pidfile), "%s/%s/postmaster.pid", c->dir,
                     node_name(node));
            FILE *f = fopen(pidfile, "r");
            long pid = 0;
            if (f && fscanf(f, "%ld", &pid) == 1 && pid > 1)
                signal_node(c, node, SIGCONT);
            if (f)
                fclose(f);
        }
        ctl(c, "stop", c->dir, NULL, NULL, 0);
        c->dir[0] = '\0';
    }
}

void fault_cluster_conninfo(const fault_cluster *c, int via_proxy,
                            const char *app, const char *extra, char *out,
                            size_t n) {
    int p0 = via_proxy && c->proxy_port[0] ? c->proxy_port[0] : c->port[0];
    int p1 = via_proxy && c->proxy_port[1] ? c->proxy_port[1] : c->port[1];
    snprintf(out, n,
             "host=%s,%s port=%d,%d user=%s password=%s dbname=%s "
             "application_name=%s sslmode=disable gssencmode=disable%s%s",
             c->host, c->host, p0, p1, c->user, c->password, c->db, app,
             extra && *extra ? " " : "", extra ? extra : "");
}

/* ---- admin --------------------------------------------------------------- */

static PGconn *admin_connect(const fault_cluster *c, int node, int timeout_s) {
    char ci[600];
    snprintf(ci, sizeof(ci),
             "host=%s port=%d user=%s dbname=postgres connect_timeout=%d "
             "application_name=tether-demo-admin "
             "options='-c client_min_messages=error'",
             c->sock, c->port[node], c->super, timeout_s);
    return PQconnectdb(ci);
}

int fault_admin_exec(const fault_cluster *c, int node, const char *sql,
                     char *why, size_t n) {
    PGconn *a = admin_connect(c, node, 5);
    int rc = 0;
    if (PQstatus(a) != CONNECTION_OK) {
        say(why, n, "admin connection to %s: %s", node_name(node),
            PQerrorMessage(a));
        rc = -1;
    } else {
        PGresult *r = PQexec(a, sql);
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            say(why, n, "%s on %s: %s", sql, node_name(node),
                PQerrorMessage(a));
            rc = -1;
        }
        PQclear(r);
    }
    PQfinish(a);
    if (why && n)
        why[strcspn(why, "\n")] = '\0';
    return rc;
}

int fault_count_app(const fault_cluster *c, const char *app) {
    PGconn *a = admin_connect(c, c->writable, 1);
    int k = -1;
    if (PQstatus(a) == CONNECTION_OK) {
        const char *v[1] = {app};
        PGresult *r = PQexecParams(
            a,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
            "$1 AND backend_type = 'client backend'",
            1, NULL, v, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
            k = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    PQfinish(a);
    return k;
}

void fault_sessions_app(const fault_cluster *c, const char *app, char *buf,
                        size_t n) {
    snprintf(buf, n, "(sessions unreadable)");
    PGconn *a = admin_connect(c, c->writable, 1);
    if (PQstatus(a) == CONNECTION_OK) {
        const char *v[1] = {app};
        PGresult *r = PQexecParams(
            a,
            "SELECT string_agg(format('pid %s %s %s ms in state, wait %s: "
            "%s', pid, state, (extract(epoch FROM now() - state_change) * "
            "1000)::int, coalesce(wait_event_type || '/' || wait_event, "
            "'none'), left(query, 40)), '; ') FROM pg_stat_activity WHERE "
            "application_name = $1 AND backend_type = 'client backend'",
            1, NULL, v, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
            snprintf(buf, n, "%s", PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    PQfinish(a);
}

/* Whether node's standby streams from it (pg_stat_replication). */
static int standby_streams(const fault_cluster *c, int node) {
    PGconn *a = admin_connect(c, node, 1);
    int yes = 0;
    if (PQstatus(a) == CONNECTION_OK) {
        PGresult *r = PQexec(a, "SELECT count(*) FROM pg_stat_replication "
                                "WHERE state = 'streaming'");
        yes = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
              atoi(PQgetvalue(r, 0, 0)) > 0;
        PQclear(r);
    }
    PQfinish(a);
    return yes;
}

/* A clean failover: the primary is stopped only once its standby streams,
 * so that the fast stop hands it every commit. A standby that lost its
 * connection (the primary stopped or restarted moments before) reconnects
 * only after wal_retrieve_retry_interval (5 s); a failover then would lose
 * the last commits, as PostgreSQL's asynchronous replication does, and the
 * at-most-once check would count them missing (docs/failures.md). Waits
 * up to 15 s; 0 when it streams. */
static int wait_streaming(const fault_cluster *c, int node) {
    for (int i = 0; i < 150; i++) {
        if (standby_streams(c, node))
            return 0;
        struct timespec ts = {0, 100 * 1000000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

int fault_node_role(const fault_cluster *c, int node) {
    PGconn *a = admin_connect(c, node, 1);
    int role = -1;
    if (PQstatus(a) == CONNECTION_OK) {
        PGresult *r = PQexec(a, "SELECT pg_is_in_recovery()");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
            role = PQgetvalue(r, 0, 0)[0] == 'f';
        PQclear(r);
    }
    PQfinish(a);
    return role;
}

/* Terminate the workload's backends on node (every backend of the
 * application user but the slot holders of FAULT_TOO_MANY). */
static int terminate(fault_cluster *c, int all, char *detail, size_t n) {
    char sql[400];
    snprintf(sql, sizeof(sql),
             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
             "WHERE usename = '%s' AND application_name <> 'tether-demo-hog'%s",
             c->user, all ? "" : " AND random() < 0.5");
    return fault_admin_exec(c, c->writable, sql, detail, n);
}

static int terminate_all(fault_cluster *c, char *detail, size_t n) {
    return terminate(c, 1, detail, n);
}

/* ---- hang ---------------------------------------------------------------- */

/* The state letter of process pid ('T' stopped), or 0 when gone. */
static char proc_state(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t r = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[r] = '\0';
    char *p = strrchr(buf, ')'), st = 0;
    return p && sscanf(p + 1, " %c", &st) == 1 ? st : 0;
}

/* Wait (up to 2 s) until pid has stopped. */
static void wait_stopped(pid_t pid) {
    for (int i = 0; i < 2000; i++) {
        char st = proc_state(pid);
        if (st == 'T' || st == 't' || st == 0)
            return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Signal the postmaster of node and all its children: the postmaster
 * first when stopping (no new child), last when continuing. */
static int signal_node(const fault_cluster *c, int node, int sig) {
    char path[300];
    snprintf(path, sizeof(path), "%s/%s/postmaster.pid", c->dir,
             node_name(node));
    FILE *f = fopen(path, "r");
    long pm = 0;
    if (!f)
        return -1;
    int ok = fscanf(f, "%ld", &pm) == 1 && pm > 1;
    fclose(f);
    if (!ok)
        return -1;
    if (sig == SIGSTOP) {
        kill((pid_t)pm, sig);
        wait_stopped((pid_t)pm); /* no fork after the scan below */
    }
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        long pid = strtol(de->d_name, NULL, 10);
        if (pid <= 1 || pid == pm)
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        FILE *s = fopen(path, "r");
        char buf[512];
        if (!s)
            continue;
        size_t r = fread(buf, 1, sizeof(buf) - 1, s);
        fclose(s);
        buf[r] = '\0';
        char *close_paren = strrchr(buf, ')');
        long ppid = 0;
        char state;
        if (close_paren &&
            sscanf(close_paren + 1, " %c %ld", &state, &ppid) == 2 &&
            ppid == pm)
            kill((pid_t)pid, sig);
    }
    if (d)
        closedir(d);
    if (sig != SIGSTOP)
        kill((pid_t)pm, sig);
    return 0;
}

/* ---- too many connections ------------------------------------------------ */

#define MAX_HOGS 64
static PGconn *hogs[MAX_HOGS];
static int nhogs;

/* The connection slots ordinary users may still take on node. */
static int free_slots_now(const fault_cluster *c, int node) {
    PGconn *a = admin_connect(c, node, 5);
    PGresult *r =
        PQexec(a, "SELECT current_setting('max_connections')::int - "
                  "current_setting('superuser_reserved_connections')::int - "
                  "count(*) FROM pg_stat_activity WHERE backend_type = 'client "
                  "backend'");
    int k = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                ? atoi(PQgetvalue(r, 0, 0))
                : 0;
    PQclear(r);
    PQfinish(a);
    return k; /* counts the admin connection itself: one to spare */
}

static int fill_slots(fault_cluster *c, char *detail, size_t n) {
    char ci[600];
    snprintf(ci, sizeof(ci),
             "host=%s port=%d user=%s dbname=postgres "
             "application_name=tether-demo-hog connect_timeout=5",
             c->sock, c->port[c->writable], c->super);
    int want = free_slots_now(c, c->writable);
    while (nhogs < MAX_HOGS && nhogs < want) {
        PGconn *h = PQconnectdb(ci);
        if (PQstatus(h) != CONNECTION_OK) {
            PQfinish(h);
            break;
        }
        hogs[nhogs++] = h;
    }
    /* Terminated backends free their slots, and the pool would take them
     * back at once: the role's limit is set to 0, so that its reconnects
     * are refused (53300, as a full server refuses) until the fault ends.
     * Sessions already open are not touched by it. */
    char sql[200];
    snprintf(sql, sizeof(sql), "ALTER ROLE %s CONNECTION LIMIT 0", c->user);
    int rc = fault_admin_exec(c, c->writable, sql, detail, n);
    if (rc == 0)
        rc = terminate_all(c, detail, n);
    if (rc == 0)
        say(detail, n,
            "%d idle connections take every free slot of %s:%d, "
            "the role may open none; its backends terminated",
            nhogs, c->host, c->port[c->writable]);
    return rc;
}

static int free_slots(fault_cluster *c, char *detail, size_t n) {
    char sql[200];
    snprintf(sql, sizeof(sql), "ALTER ROLE %s CONNECTION LIMIT -1", c->user);
    int rc = fault_admin_exec(c, c->writable, sql, detail, n);
    while (nhogs > 0)
        PQfinish(hogs[--nhogs]);
    return rc;
}

/* ---- begin and end ------------------------------------------------------- */

int fault_begin(fault_cluster *c, const fault_event *e, char *detail,
                size_t n) {
    int w = c->writable;
    say(detail, n, "%s", "");
    switch (e->kind) {
    case FAULT_TERMINATE:
        if (terminate_all(c, detail, n) != 0)
            return -1;
        say(detail, n, "every backend of the workload on %s:%d terminated",
            c->host, c->port[w]);
        return 0;
    case FAULT_TERMINATE_SOME:
        if (terminate(c, 0, detail, n) != 0)
            return -1;
        say(detail, n,
            "about half the workload's backends on %s:%d "
            "terminated",
            c->host, c->port[w]);
        return 0;
    case FAULT_RESTART:
    case FAULT_STOP:
        if (ctl(c, "stop-node", c->dir, node_name(w), detail, n) != 0)
            return -1;
        if (e->kind == FAULT_RESTART)
            say(detail, n, "%s:%d stopped (fast), then started", c->host,
                c->port[w]);
        else
            say(detail, n, "%s:%d stopped (fast) for %.1f s, then started",
                c->host, c->port[w], (double)e->hold_ms / 1000.0);
        return 0;
    case FAULT_HANG:
        if (signal_node(c, w, SIGSTOP) != 0) {
            say(detail, n, "no running postmaster on %s:%d", c->host,
                c->port[w]);
            return -1;
        }
        say(detail, n, "every process of %s:%d stopped (SIGSTOP)", c->host,
            c->port[w]);
        return 0;
    case FAULT_TOO_MANY:
        return fill_slots(c, detail, n);
    case FAULT_BLACKHOLE:
        if (!c->proxy_pid[w]) {
            say(detail, n, "no fault proxy: skipped");
            return -1;
        }
        if (proxy_mode(c, w, "blackhole") != 0) {
            say(detail, n, "faultproxy ctl %s blackhole failed",
                c->proxy_ctl[w]);
            return -1;
        }
        say(detail, n,
            "the proxy to %s:%d drops every byte, accepts nothing; its "
            "connections stay silent for good",
            c->host, c->port[w]);
        return 0;
    case FAULT_FAILOVER:
        if (!c->standby_up) {
            say(detail, n, "no standby left: skipped");
            return -1;
        }
        if (wait_streaming(c, w) != 0) {
            say(detail, n,
                "the standby of %s:%d did not stream within 15 s: "
                "skipped",
                c->host, c->port[w]);
            return -1;
        }
        if (ctl(c, "stop-node", c->dir, node_name(w), detail, n) != 0)
            return -1;
        say(detail, n, "%s:%d stopped%s; standby %s:%d promoted %.1f s later",
            c->host, c->port[w],
            c->rebuild ? ", then rebuilt as a standby" : " for good", c->host,
            c->port[1 - w], (double)e->hold_ms / 1000.0);
        return 0;
    default:
        say(detail, n, "unknown fault %d", (int)e->kind);
        return -1;
    }
}

/* Tell the caller the server is back (fault_end's step that returns it
 * succeeded); rc passes through. */
static int back(const fault_cluster *c, int rc) {
    if (rc == 0 && c->on_back)
        c->on_back(c->on_back_ctx);
    return rc;
}

int fault_end(fault_cluster *c, const fault_event *e, char *detail, size_t n) {
    say(detail, n, "%s", "");
    switch (e->kind) {
    case FAULT_RESTART:
    case FAULT_STOP:
        return back(
            c, ctl(c, "start-node", c->dir, node_name(c->writable), detail, n));
    case FAULT_HANG:
        return back(c, signal_node(c, c->writable, SIGCONT));
    case FAULT_TOO_MANY:
        return back(c, free_slots(c, detail, n));
    case FAULT_BLACKHOLE:
        if (c->proxy_pid[c->writable] &&
            proxy_mode(c, c->writable, "pass") != 0) {
            say(detail, n, "faultproxy ctl %s pass failed",
                c->proxy_ctl[c->writable]);
            return -1;
        }
        return back(c, 0);
    case FAULT_FAILOVER:
        if (ctl(c, "promote", c->dir, node_name(1 - c->writable), detail, n))
            return -1;
        c->writable = 1 - c->writable;
        c->standby_up = 0;
        back(c, 0);
        if (!c->rebuild)
            return 0;
        if (ctl(c, "rebuild", c->dir, node_name(1 - c->writable), detail, n))
            return -1;
        c->standby_up = 1; /* so the failover can come again */
        return 0;
    default:
        return back(c, 0);
    }
}
