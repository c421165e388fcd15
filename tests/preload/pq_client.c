/* pq_client.c - a plain libpq program, written as programs that
 * connect per request are: it knows nothing of tether. The preload tests
 * (test_preload.sh) and bench/run-preload run it with and without
 * LD_PRELOAD=libtether-preload.so and compare what it prints.
 *
 *   pq_client cpq CONNINFO N         N x (connect, one query, PQfinish),
 *                                    rotating PQconnectdb, PQconnectdbParams
 *                                    and PQsetdbLogin
 *   pq_client nonblock CONNINFO N    the same with PQconnectStart(Params),
 *                                    PQconnectPoll and PQsendQuery in a poll
 *                                    loop on PQsocket
 *   pq_client threads CONNINFO T N   T threads, each as cpq
 *   pq_client fork CONNINFO          connects around a fork of 3 children
 *   pq_client state CONNINFO [double] session state left behind (SET, a temp
 *                                    table, a prepared statement, LISTEN, an
 *                                    open and a failed transaction, PQreset);
 *                                    "double": PQfinish twice (preload only)
 *   pq_client failover CONNINFO SECS connect-per-query for SECS seconds,
 *                                    each query needing a writable server
 *   pq_client signal CONNINFO        connects, then takes SIGUSR1 with sigwait
 *                                    on the main thread (the only thread of
 *                                    a plain program: no other may take it)
 *   pq_client exit CONNINFO          connects, queries, pings (PQping),
 *                                    exits without PQfinish
 *
 * Deterministic lines start with "result:"; measurements with "measure:". */
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *conninfo;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, PGconn *pg) {
    fprintf(stderr, "pq_client: %s: %s\n", what,
            pg ? PQerrorMessage(pg) : "(no connection)");
    exit(1);
}

/* connect_nth connects the i-th way: PQconnectdb, PQconnectdbParams,
 * PQsetdbLogin. */
static PGconn *connect_nth(int i) {
    static const char *keys[] = {"dbname", NULL};
    const char *vals[] = {conninfo, NULL};
    PGconn *pg;
    switch (i % 3) {
    case 0:
        pg = PQconnectdb(conninfo);
        break;
    case 1:
        pg = PQconnectdbParams(keys, vals, 1);
        break;
    default:
        pg = PQsetdbLogin(NULL, NULL, NULL, NULL, conninfo, NULL, NULL);
        break;
    }
    if (!pg || PQstatus(pg) != CONNECTION_OK)
        die("connect", pg);
    return pg;
}

/* The work of one request: a value that depends on i, the user, this
 * backend and how many backends the user has (every 10th request). */
typedef struct tally {
    long long sum;
    int max_backends;
    int pids[64], npids; /* distinct backends seen, up to 64 */
} tally;

static void seen_pid(tally *t, int pid) {
    for (int k = 0; k < t->npids; k++)
        if (t->pids[k] == pid)
            return;
    if (t->npids < 64)
        t->pids[t->npids++] = pid;
}

static void request(PGconn *pg, int i, tally *t) {
    char arg[16];
    snprintf(arg, sizeof(arg), "%d", i);
    const char *p[1] = {arg};
    const char *sql = i % 10
                          ? "SELECT $1::int * 3 + 1, 0"
                          : "SELECT $1::int * 3 + 1, (SELECT count(*) FROM "
                            "pg_stat_activity WHERE usename = current_user AND "
                            "backend_type = 'client backend')";
    PGresult *r = PQexecParams(pg, sql, 1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        die("query", pg);
    t->sum += atoll(PQgetvalue(r, 0, 0));
    int b = atoi(PQgetvalue(r, 0, 1));
    if (b > t->max_backends)
        t->max_backends = b;
    if (PQtransactionStatus(pg) != PQTRANS_IDLE)
        die("transaction status after a query", pg);
    seen_pid(t, PQbackendPID(pg));
    PQclear(r);
}

static void report(const char *mode, int n, const tally *t, double secs) {
    printf("result: %s n=%d sum=%lld\n", mode, n, t->sum);
    printf("measure: %s qps=%.0f max_backends=%d distinct_backends=%d\n", mode,
           n / secs, t->max_backends, t->npids);
}

static int cmd_cpq(int n) {
    tally t = {0};
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        PGconn *pg = connect_nth(i);
        request(pg, i, &t);
        PQfinish(pg);
    }
    report("cpq", n, &t, now_s() - t0);
    return 0;
}

/* wait_sock waits for the socket as libpq's poll result asks. */
static void wait_sock(PGconn *pg, int writing) {
    struct pollfd pfd = {PQsocket(pg), writing ? POLLOUT : POLLIN, 0};
    if (poll(&pfd, 1, 10000) <= 0)
        die("poll", pg);
}

static PGconn *connect_nonblock(int i) {
    static const char *keys[] = {"dbname", NULL};
    const char *vals[] = {conninfo, NULL};
    PGconn *pg =
        i % 2 ? PQconnectStartParams(keys, vals, 1) : PQconnectStart(conninfo);
    if (!pg || PQstatus(pg) == CONNECTION_BAD)
        die("connect start", pg);
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED)
            die("connect poll", pg);
        wait_sock(pg, st == PGRES_POLLING_WRITING);
        st = PQconnectPoll(pg);
    }
    return pg;
}

static void request_nonblock(PGconn *pg, int i, tally *t) {
    char sql[64];
    snprintf(sql, sizeof(sql), "SELECT %d * 3 + 1", i);
    if (PQsetnonblocking(pg, 1) != 0 || !PQsendQuery(pg, sql))
        die("send", pg);
    while (PQflush(pg) > 0)
        wait_sock(pg, 1);
    PGresult *r;
    for (;;) {
        while (PQisBusy(pg)) {
            wait_sock(pg, 0);
            if (!PQconsumeInput(pg))
                die("consume", pg);
        }
        if (!(r = PQgetResult(pg)))
            break;
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            die("query", pg);
        t->sum += atoll(PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    seen_pid(t, PQbackendPID(pg));
}

static int cmd_nonblock(int n) {
    tally t = {0};
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        PGconn *pg = connect_nonblock(i);
        request_nonblock(pg, i, &t);
        PQfinish(pg);
    }
    report("nonblock", n, &t, now_s() - t0);
    return 0;
}

typedef struct worker {
    pthread_t th;
    int id, n;
    tally t;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int i = 0; i < w->n; i++) {
        PGconn *pg = connect_nth(i);
        request(pg, w->id * 100000 + i, &w->t);
        PQfinish(pg);
    }
    return NULL;
}

static int cmd_threads(int nt, int n) {
    worker w[32];
    if (nt < 1 || nt > 32)
        nt = 32;
    double t0 = now_s();
    for (int k = 0; k < nt; k++) {
        w[k] = (worker){.id = k, .n = n};
        pthread_create(&w[k].th, NULL, work, &w[k]);
    }
    tally all = {0};
    for (int k = 0; k < nt; k++) {
        pthread_join(w[k].th, NULL);
        all.sum += w[k].t.sum;
        if (w[k].t.max_backends > all.max_backends)
            all.max_backends = w[k].t.max_backends;
        for (int j = 0; j < w[k].t.npids; j++)
            seen_pid(&all, w[k].t.pids[j]);
    }
    report("threads", nt * n, &all, now_s() - t0);
    return 0;
}

static int one_value(PGconn *pg, const char *sql, char *out, size_t cap) {
    PGresult *r = PQexec(pg, sql);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (ok)
        snprintf(out, cap, "%s",
                 PQgetisnull(r, 0, 0) ? "null" : PQgetvalue(r, 0, 0));
    PQclear(r);
    return ok ? 0 : -1;
}

static void must(PGconn *pg, const char *sql) {
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        die(sql, pg);
    PQclear(r);
}

/* A child connects: it must get its own backend, never a parent's. */
static int child(int a, int b) {
    PGconn *pg = connect_nth(0);
    tally t = {0};
    request(pg, 7, &t);
    int pid = PQbackendPID(pg);
    PQfinish(pg);
    if (pid == a || pid == b) {
        fprintf(stderr, "pq_client: child got its parent's backend %d\n", pid);
        return 1;
    }
    return t.sum == 22 ? 0 : 1;
}

static int cmd_fork(void) {
    PGconn *a = connect_nth(0), *b = connect_nth(1);
    int pa = PQbackendPID(a), pb = PQbackendPID(b);
    PQfinish(a); /* idle in the pool, under the preload */
    fflush(stdout);
    pid_t kids[3];
    for (int k = 0; k < 3; k++) {
        kids[k] = fork();
        if (kids[k] == 0)
            _exit(child(pa, pb));
    }
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    tally t = {0};
    request(b, 1, &t); /* the parent's leased connection still works */
    PGconn *c = connect_nth(2);
    request(c, 2, &t);
    printf("result: fork children_failed=%d sum=%lld\n", bad, t.sum);
    printf("measure: fork parent_reused=%d\n", PQbackendPID(c) == pa);
    PQfinish(c);
    PQfinish(b);
    return bad ? 1 : 0;
}

/* state: what one session leaves, the next connect must not see. */
static void dirty(PGconn *pg) {
    must(pg, "SET work_mem = '1234kB'");
    must(pg, "SET application_name = 'left_behind'"); /* reported by libpq */
    must(pg, "CREATE TEMP TABLE tether__preload_tmp (x int)");
    must(pg, "PREPARE tether__preload_stmt AS SELECT 1");
    must(pg, "LISTEN tether__preload_chan");
    must(pg, "NOTIFY tether__preload_chan, 'left behind'");
    must(pg, "SELECT 1");
    must(pg, "BEGIN");
    must(pg, "INSERT INTO tether__preload_tmp VALUES (1)");
}

static int clean(PGconn *pg, const char *label) {
    char wm[32], tmp[32], prep[32], lis[32];
    int bad = one_value(pg, "SHOW work_mem", wm, sizeof(wm)) ||
              one_value(pg, "SELECT to_regclass('pg_temp.tether__preload_tmp')", tmp,
                        sizeof(tmp)) ||
              one_value(pg, "SELECT count(*) FROM pg_prepared_statements", prep,
                        sizeof(prep)) ||
              one_value(pg, "SELECT count(*) FROM pg_listening_channels()", lis,
                        sizeof(lis));
    PGnotify *n = PQnotifies(pg);
    const char *app = PQparameterStatus(pg, "application_name");
    printf("result: %s work_mem_left=%d temp_table_left=%d prepared=%s "
           "listening=%s notify_left=%d txn_idle=%d appname_left=%d\n",
           label, !strcmp(wm, "1234kB"), strcmp(tmp, "null") != 0, prep, lis,
           n != NULL, PQtransactionStatus(pg) == PQTRANS_IDLE,
           !app || !strcmp(app, "left_behind"));
    if (n)
        PQfreemem(n);
    return bad;
}

static int cmd_state(int twice) {
    PGconn *pg = connect_nth(0);
    int p1 = PQbackendPID(pg);
    dirty(pg);
    PQfinish(pg);
    pg = connect_nth(0);
    int same = PQbackendPID(pg) == p1;
    int bad = clean(pg, "after-dirty");
    PGresult *r = PQexec(pg, "BEGIN; SELECT 1/0");
    PQclear(r);
    p1 = PQbackendPID(pg);
    PQfinish(pg); /* a failed transaction */
    pg = connect_nth(1);
    same += PQbackendPID(pg) == p1;
    bad |= clean(pg, "after-failed");
    p1 = PQbackendPID(pg);
    PQreset(pg);
    if (PQstatus(pg) != CONNECTION_OK)
        die("PQreset", pg);
    tally t = {0};
    request(pg, 3, &t);
    PQfinish(pg);
    pg = connect_nth(2);
    int reset_reused = PQbackendPID(pg) == p1;
    PQfinish(pg);
    if (twice)
        PQfinish(pg); /* given back already: ignored by the preload */
    pg = connect_nth(0);
    request(pg, 4, &t);
    PQfinish(pg);
    printf("result: state sum=%lld\n", t.sum);
    printf("measure: state same_backend=%d reset_reused=%d\n", same,
           reset_reused);
    return bad;
}

/* failover: a connect-per-query loop needing a writable server. */
static int cmd_failover(double secs) {
    int ok = 0, conn_fail = 0, query_fail = 0, streak = 0;
    char port[16] = "";
    double end = now_s() + secs;
    while (now_s() < end) {
        PGconn *pg = PQconnectdb(conninfo);
        if (PQstatus(pg) != CONNECTION_OK) {
            conn_fail++;
            streak = 0;
        } else if (one_value(pg,
                             "SELECT inet_server_port() WHERE txid_current() "
                             "> 0",
                             port, sizeof(port)) != 0) {
            query_fail++;
            streak = 0;
        } else {
            ok++;
            streak++;
        }
        PQfinish(pg);
        usleep(20000);
    }
    printf("measure: failover ok=%d connect_failures=%d query_failures=%d "
           "last_port=%s final_streak=%d\n",
           ok, conn_fail, query_fail, port, streak);
    return 0;
}

static int cmd_signal(void) {
    PGconn *pg = connect_nth(0);
    tally t = {0};
    request(pg, 6, &t);
    PQfinish(pg);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    kill(getpid(), SIGUSR1); /* default action: death, unless waited for */
    struct timespec two = {2, 0};
    int got = sigtimedwait(&usr1, NULL, &two);
    printf("result: signal waited=%d sum=%lld\n", got == SIGUSR1, t.sum);
    return got == SIGUSR1 ? 0 : 1;
}

/* The connection cmd_exit exits holding: still referenced at exit, as a
 * program's global connection would be, so that LeakSanitizer does not
 * report what the case does on purpose (reported or not depended on what
 * the stack held at exit). */
static PGconn *held_at_exit;

static int cmd_exit(void) {
    PGconn *pg = held_at_exit = connect_nth(0);
    tally t = {0};
    request(pg, 5, &t);
    printf("result: exit sum=%lld ping_ok=%d\n", t.sum,
           PQping(conninfo) == PQPING_OK);
    fflush(stdout);
    exit(0); /* no PQfinish */
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: pq_client MODE CONNINFO [ARGS] (see the "
                        "source)\n");
        return 2;
    }
    conninfo = argv[2];
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *m = argv[1];
    int a = argc > 3 ? atoi(argv[3]) : 100;
    int b = argc > 4 ? atoi(argv[4]) : 100;
    if (!strcmp(m, "cpq"))
        return cmd_cpq(a);
    if (!strcmp(m, "nonblock"))
        return cmd_nonblock(a);
    if (!strcmp(m, "threads"))
        return cmd_threads(a, b);
    if (!strcmp(m, "fork"))
        return cmd_fork();
    if (!strcmp(m, "state"))
        return cmd_state(argc > 3 && !strcmp(argv[3], "double"));
    if (!strcmp(m, "failover"))
        return cmd_failover(argc > 3 ? atof(argv[3]) : 5);
    if (!strcmp(m, "signal"))
        return cmd_signal();
    if (!strcmp(m, "exit"))
        return cmd_exit();
    fprintf(stderr, "pq_client: unknown mode '%s'\n", m);
    return 2;
}
