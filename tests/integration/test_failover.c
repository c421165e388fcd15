/* test_failover.c - the connector and the pool against a real PostgreSQL
 * primary and streaming standby under real faults (issue "PostgreSQL for
 * real", tests 1-9). Run through the cluster script, which starts the
 * servers, exports where they are, and always cleans up:
 *
 *   scripts/pg-cluster run -- test_failover PG_CLUSTER_SCRIPT FAULTPROXY
 *
 * The destructive steps (promotion, stopping the old primary) come last. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../support/clock.h"
#include "../support/faultproxy.h"
#include "../support/thread_time.h"
#include "tether.h"
#include "tether_pq.h"

static const char *cluster_script, *proxy_bin;
static char base[512]; /* user, password, dbname */
static int primary_port, standby_port;

static void cluster(const char *fmt, ...) {
    char args[256], cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    /* the script takes the directory after the verb */
    char verb[64] = "", rest[192] = "";
    sscanf(args, "%63s %191[^\n]", verb, rest);
    snprintf(cmd, sizeof(cmd), "%s %s %s %s >/dev/null 2>&1", cluster_script,
             verb, getenv("PGC_DIR"), rest);
    if (system(cmd) != 0)
        fail_msg("cluster command failed: %s", cmd);
}

/* The value of the first row and column of sql on c ("" on error). */
static const char *value(PGconn *c, const char *sql) {
    static char buf[128];
    PGresult *r = PQexec(c, sql);
    buf[0] = '\0';
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 &&
        !PQgetisnull(r, 0, 0))
        snprintf(buf, sizeof(buf), "%s", PQgetvalue(r, 0, 0));
    else /* the reason, for the assertion that follows (NULL: no rows or a
            null value) */
        print_message("%s on port %s: %s (result %s, connection %s)\n", sql,
                      PQport(c), PQerrorMessage(c),
                      PQresStatus(PQresultStatus(r)),
                      PQstatus(c) == CONNECTION_OK ? "ok" : "bad");
    PQclear(r);
    return buf;
}

static int exec_ok(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    PQclear(r);
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/* What a connector reported, from the thread that connects; ev_lock
 * guards it, ev_cv announces every event. */
typedef struct events {
    char text[8192];
    int fails, oks, throttled;
    int64_t first_fail_ms;    /* elapsed at the first failed attempt */
    thread_time start;        /* set by the test just before connecting */
    double first_fail_slept;  /* ms the thread slept until then */
    int slot_freed, ok_freed; /* set by the test; slot_freed at the "ok" */
} events;

static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;

static void on_event(void *ctx, const tether_connect_event *ev) {
    events *e = ctx;
    char line[256];
    thread_time now = thread_time_stop();
    snprintf(line, sizeof(line), "%s %s:%d %s t=%lld b=%lld\n",
             tether_phase_name(ev->phase), ev->host, ev->port,
             ev->code ? tether_errname(ev->code) : "-",
             (long long)ev->elapsed_ms, (long long)ev->budget_ms);
    pthread_mutex_lock(&ev_lock);
    if (strlen(e->text) + strlen(line) < sizeof(e->text))
        strcat(e->text, line);
    if (ev->phase == TETHER_PHASE_FAIL && e->fails++ == 0) {
        e->first_fail_ms = ev->elapsed_ms;
        e->first_fail_slept = thread_time_slept_ms(&e->start, &now);
    }
    e->throttled += ev->code == TETHER_ETHROTTLED;
    if (ev->phase == TETHER_PHASE_OK && e->oks++ == 0)
        e->ok_freed = e->slot_freed;
    pthread_cond_broadcast(&ev_cv);
    pthread_mutex_unlock(&ev_lock);
}

static tether_connector *connector(const char *extra, events *ev) {
    char ci[1024];
    snprintf(ci, sizeof(ci), "%s %s", base, extra);
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = ci;
    o.on_event = ev ? on_event : NULL;
    o.event_ctx = ev;
    tether_connector *c = NULL;
    tether_error err = {0};
    if (tether_connector_create(&c, &o, &err))
        fail_msg("connector: %s", err.message);
    return c;
}

static tether_pool *pool(const char *extra) {
    char ci[1024];
    snprintf(ci, sizeof(ci), "%s %s", base, extra);
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, NULL, NULL, &err))
        fail_msg("pool: %s", err.message);
    return p;
}

/* pool1 makes a pool of one connection to the primary with option opt, and
 * acquires it into *l. */
static tether_pool *pool1(const char *opt, tether_lease **l) {
    char extra[256];
    snprintf(extra, sizeof(extra),
             "host=127.0.0.1 port=%d tether_pool_max=1 %s", primary_port, opt);
    tether_pool *p = pool(extra);
    assert_int_equal(tether_pool_acquire(p, 5000, l, NULL), 0);
    return p;
}

/* primary_conn opens a plain libpq connection straight to the primary
 * (the caller checks its status: the server may refuse it). */
static PGconn *primary_conn(void) {
    char ci[1024];
    snprintf(ci, sizeof(ci), "%s host=127.0.0.1 port=%d", base, primary_port);
    return PQconnectdb(ci);
}

static int port_of(PGconn *c) {
    return atoi(value(c, "SELECT inet_server_port()"));
}

/* 1. [a closed port, the primary]: connects; the events show the refusal. */
static void test_closed_port_then_primary(void **state) {
    (void)state;
    events ev = {0};
    char extra[128];
    snprintf(extra, sizeof(extra), "host=127.0.0.1,127.0.0.1 port=1,%d",
             primary_port);
    tether_connector *c = connector(extra, &ev);
    PGconn *pg = NULL;
    tether_error err = {0};
    assert_int_equal(tether_connector_connect(c, (void **)&pg, &err), 0);
    assert_int_equal(port_of(pg), primary_port);
    assert_non_null(strstr(ev.text, "fail 127.0.0.1:1 TETHER_ECONNECT"));
    tether_connector_close(c, pg);
    tether_connector_destroy(c);
}

/* 2. A blackhole first: the attempt budget and the login timeout are kept:
 * never ended early, and the connecting thread sleeps no longer than the
 * budget (time it then waits for a CPU is the scheduler's, counted apart:
 * tests/support/thread_time.h). The wall-clock upper bounds only tell the
 * budget that ended a wait from the next longer one (the 5 s login
 * timeout; TCP's SYN retries, minutes). */
static void test_blackhole_budgets(void **state) {
    (void)state;
    proxy px;
    proxy_start(&px, proxy_bin, primary_port, "fp");
    proxy_mode(&px, "blackhole");
    char extra[256];
    snprintf(extra, sizeof(extra),
             "host=127.0.0.1,127.0.0.1 port=%d,%d tether_attempt_timeout=300ms "
             "tether_login_timeout=5s",
             px.port, primary_port);
    events ev = {0};
    tether_connector *c = connector(extra, &ev);
    PGconn *pg = NULL;
    tether_error err = {0};
    ev.start = thread_time_start();
    assert_int_equal(tether_connector_connect(c, (void **)&pg, &err), 0);
    thread_time t1 = thread_time_stop();
    print_message("blackhole first: connected after %.0f ms, the blackhole's "
                  "attempt failed after %lld ms (slept %.1f ms)\n%s",
                  thread_time_elapsed_ms(&ev.start, &t1),
                  (long long)ev.first_fail_ms, ev.first_fail_slept, ev.text);
    /* The blackhole's attempt ends on its 300 ms budget; then the
     * primary's connect, within the login timeout. */
    assert_int_equal(ev.fails, 1);
    assert_true(ev.first_fail_ms >= 300);
    assert_true(ev.first_fail_slept <= 300 + THREAD_TIME_SLACK_MS);
    assert_true(ev.first_fail_ms < 5000);
    assert_int_equal(port_of(pg), primary_port);
    tether_connector_close(c, pg);
    tether_connector_destroy(c);
    /* Only the blackhole: the login timeout ends it. */
    snprintf(extra, sizeof(extra),
             "host=127.0.0.1 port=%d tether_login_timeout=1s", px.port);
    c = connector(extra, NULL);
    thread_time t0 = thread_time_start();
    assert_int_equal(tether_connector_connect(c, (void **)&pg, &err),
                     TETHER_ETIMEDOUT);
    t1 = thread_time_stop();
    double took = thread_time_elapsed_ms(&t0, &t1);
    double slept = thread_time_slept_ms(&t0, &t1);
    print_message("blackhole only, login timeout 1 s: gave up after %.1f ms "
                  "(slept %.1f ms)\n",
                  took, slept);
    assert_true(took >= 1000);
    assert_true(slept <= 1000 + THREAD_TIME_SLACK_MS);
    assert_true(took < 5000);
    tether_connector_destroy(c);
    proxy_stop(&px);
}

/* 3. Mirroring against a stopped principal and a live partner. */
static void test_mirroring_stopped_principal(void **state) {
    (void)state;
    cluster("stop-node standby");
    char extra[256];
    snprintf(extra, sizeof(extra),
             "host=127.0.0.1,127.0.0.1 port=%d,%d tether_strategy=mirroring",
             standby_port, primary_port);
    events ev = {0};
    tether_connector *c = connector(extra, &ev);
    PGconn *pg = NULL;
    tether_error err = {0};
    assert_int_equal(tether_connector_connect(c, (void **)&pg, &err), 0);
    assert_int_equal(port_of(pg), primary_port);
    assert_int_equal(ev.fails, 1); /* the principal, at once */
    tether_connector_close(c, pg);
    tether_connector_destroy(c);
    cluster("start-node standby");
}

/* 4a. Role targeting whatever the order. */
static void test_roles(void **state) {
    (void)state;
    const char *targets[] = {"read-write", "standby", "read-only", "primary"};
    const int want_standby[] = {0, 1, 1, 0};
    for (int order = 0; order < 2; order++)
        for (int t = 0; t < 4; t++) {
            char extra[256];
            snprintf(extra, sizeof(extra),
                     "host=127.0.0.1,127.0.0.1 port=%d,%d "
                     "target_session_attrs=%s",
                     order ? standby_port : primary_port,
                     order ? primary_port : standby_port, targets[t]);
            tether_connector *c = connector(extra, NULL);
            PGconn *pg = NULL;
            tether_error err = {0};
            assert_int_equal(tether_connector_connect(c, (void **)&pg, &err),
                             0);
            assert_string_equal(value(pg, "SELECT pg_is_in_recovery()"),
                                want_standby[t] ? "t" : "f");
            tether_connector_close(c, pg);
            tether_connector_destroy(c);
        }
}

static int select1(void *handle, void *arg, const tether_attempt *a,
                   tether_error *err) {
    (void)arg, (void)a;
    PGresult *r = PQexec(handle, "SELECT 1");
    int rc = PQresultStatus(r) == PGRES_TUPLES_OK
                 ? 0
                 : tether_pq_error(handle, r, err);
    PQclear(r);
    return rc;
}

/* 5. pg_terminate_backend on every pooled connection: the next run()
 * calls succeed, the application sees no error. */
static void test_terminate_all(void **state) {
    (void)state;
    char extra[128];
    snprintf(extra, sizeof(extra),
             "host=127.0.0.1 port=%d tether_pool_max=4 tether_pool_min=4",
             primary_port);
    tether_pool *p = pool(extra);
    tether_lease *l[4];
    char sql[256];
    int n = snprintf(sql, sizeof(sql),
                     "SELECT count(*) FROM pg_stat_activity WHERE pid IN (");
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tether_pool_acquire(p, 5000, &l[i], NULL), 0);
        n += snprintf(sql + n, sizeof(sql) - (size_t)n, "%s%d", i ? "," : "",
                      PQbackendPID(tether_lease_handle(l[i])));
    }
    snprintf(sql + n, sizeof(sql) - (size_t)n, ")");
    for (int i = 0; i < 4; i++)
        tether_lease_release(l[i]);
    cluster("terminate primary"); /* waits until they are gone */
    PGconn *admin = primary_conn();
    assert_int_equal(PQstatus(admin), CONNECTION_OK);
    assert_string_equal(value(admin, sql), "0");
    PQfinish(admin);
    for (int i = 0; i < 20; i++) {
        tether_error err = {0};
        int rc = tether_pool_run(p, 0, select1, NULL, &err); /* not even
                                                                 idempotent */
        if (rc)
            fail_msg("run %d after terminate: %s", i, err.message);
    }
    tether_pool_destroy(p);
}

/* 5b. A connection whose backend was terminated while it sat idle is never
 * handed out, even when only the liveness check looks at it (round-trip
 * validation is off for an hour): the next acquire gets a new backend,
 * which answers. It sat idle past the socket probe's window (probe_idle_ms,
 * 10 ms of the pool's coarse clock by default). */
static void test_terminated_idle_not_handed_out(void **state) {
    (void)state;
    char sql[128];
    tether_lease *l = NULL;
    tether_pool *p = pool1("tether_validate_idle=1h", &l);
    int pid = PQbackendPID(tether_lease_handle(l));
    tether_lease_release(l);
    PGconn *admin = primary_conn();
    assert_int_equal(PQstatus(admin), CONNECTION_OK);
    snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d)", pid);
    assert_string_equal(value(admin, sql), "t");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_stat_activity WHERE pid = %d", pid);
    int64_t t0 = now_ms();
    while (strcmp(value(admin, sql), "0") != 0 && now_ms() - t0 < 3000)
        usleep(2000); /* gone: its FATAL has been sent */
    assert_string_equal(value(admin, sql), "0");
    PQfinish(admin);
    usleep(50 * 1000); /* past the probe window, whatever the above took */
    assert_int_equal(tether_pool_acquire(p, 5000, &l, NULL), 0);
    PGconn *pg = tether_lease_handle(l);
    assert_int_not_equal(PQbackendPID(pg), pid);
    assert_true(exec_ok(pg, "SELECT 1"));
    tether_lease_release(l);
    tether_pool_destroy(p);
}

typedef struct sleeper {
    tether_pool *p;
    unsigned flags;
    int rc;
    tether_error err;
    int calls;
} sleeper;

static int slow_query(void *handle, void *arg, const tether_attempt *a,
                      tether_error *err) {
    (void)a;
    sleeper *s = arg;
    s->calls++;
    PGresult *r =
        PQexec(handle, s->calls == 1 ? "SELECT pg_sleep(30)" : "SELECT 1");
    int rc = PQresultStatus(r) == PGRES_TUPLES_OK
                 ? 0
                 : tether_pq_error(handle, r, err);
    PQclear(r);
    return rc;
}

static void *sleeper_main(void *arg) {
    sleeper *s = arg;
    s->rc = tether_pool_run(s->p, s->flags, slow_query, s, &s->err);
    return NULL;
}

/* 6. Primary restart during work: idempotent work completes after the
 * restart within its deadline; non-idempotent work gets a clear error. */
static void test_restart_during_work(void **state) {
    (void)state;
    char extra[256];
    snprintf(extra, sizeof(extra),
             "host=127.0.0.1 port=%d tether_pool_max=4 "
             "tether_retry='exponential base=100ms max=1s attempts=40 "
             "deadline=30s'",
             primary_port);
    tether_pool *p = pool(extra);
    sleeper idem = {p, TETHER_IDEMPOTENT, -1, {0}, 0};
    sleeper once = {p, 0, -1, {0}, 0};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, sleeper_main, &idem);
    pthread_create(&t2, NULL, sleeper_main, &once);
    /* Both queries are running: the server says so. */
    PGconn *admin = primary_conn();
    assert_int_equal(PQstatus(admin), CONNECTION_OK);
    const char *running = "SELECT count(*) FROM pg_stat_activity WHERE "
                          "state = 'active' AND query = 'SELECT pg_sleep(30)'";
    int64_t t0 = now_ms();
    while (strcmp(value(admin, running), "2") != 0 && now_ms() - t0 < 20000)
        usleep(2000);
    assert_string_equal(value(admin, running), "2");
    PQfinish(admin);
    t0 = now_ms();
    cluster("restart primary");
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    print_message("restart: idempotent rc=%d after %lld ms (%d calls); "
                  "non-idempotent rc=%d stop=%s: %s\n",
                  idem.rc, (long long)(now_ms() - t0), idem.calls, once.rc,
                  tether_stop_name(once.err.stop), once.err.message);
    assert_int_equal(idem.rc, 0);
    assert_true(idem.calls >= 2);
    assert_int_not_equal(once.rc, 0);
    assert_int_equal(once.calls, 1); /* never retried */
    assert_int_equal(once.err.stop, TETHER_STOP_NOT_IDEMPOTENT);
    tether_pool_destroy(p);
}

typedef struct connect_arg {
    tether_connector *c;
    int rc;
    int64_t took;
} connect_arg;

static void *connect_main(void *arg) {
    connect_arg *a = arg;
    PGconn *pg = NULL;
    tether_error err = {0};
    int64_t t0 = now_ms();
    a->rc = tether_connector_connect(a->c, (void **)&pg, &err);
    a->took = now_ms() - t0;
    tether_connector_close(a->c, pg);
    return NULL;
}

/* 7. max_connections exhausted (53300): backs off, succeeds when a slot
 * frees. */
static void test_too_many_connections(void **state) {
    (void)state;
    PGconn *hog[32];
    int n = 0;
    while (n < 32) {
        hog[n] = primary_conn();
        if (PQstatus(hog[n]) != CONNECTION_OK) {
            PQfinish(hog[n]);
            break;
        }
        n++;
    }
    assert_true(n > 0 && n < 32);
    events ev = {0};
    char extra[128];
    snprintf(extra, sizeof(extra),
             "host=127.0.0.1 port=%d "
             "tether_login_timeout=10s "
             /* with a pause set, passes repeat after a busy answer (the
              * default leaves that pacing to the pool's breaker) */
             "tether_pause='exponential base=100ms max=2s'",
             primary_port);
    connect_arg a = {connector(extra, &ev), -1, 0};
    pthread_t t;
    pthread_create(&t, NULL, connect_main, &a);
    /* Once it was refused for want of a slot, a slot frees. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10; /* its login timeout */
    pthread_mutex_lock(&ev_lock);
    while (ev.throttled == 0 && ev.oks == 0 &&
           pthread_cond_timedwait(&ev_cv, &ev_lock, &until) == 0)
        ;
    int throttled_first = ev.throttled > 0 && ev.oks == 0;
    ev.slot_freed = 1;
    pthread_mutex_unlock(&ev_lock);
    PQfinish(hog[--n]);
    pthread_join(t, NULL);
    print_message("53300: connected after %lld ms\n%s", (long long)a.took,
                  ev.text);
    assert_true(throttled_first);
    assert_int_equal(a.rc, 0);
    assert_true(ev.ok_freed); /* connected only once a slot was free */
    while (n > 0)
        PQfinish(hog[--n]);
    tether_connector_destroy(a.c);
}

/* 8. Wrong password: a permanent error at once, no retry, the user named
 * and never the password. */
static void test_wrong_password(void **state) {
    (void)state;
    char ci[512];
    snprintf(ci, sizeof(ci),
             "host=127.0.0.1 port=%d user=%s password=Wr0ngPassw0rd "
             "dbname=%s",
             primary_port, getenv("PGC_USER"), getenv("PGC_DB"));
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = ci;
    tether_connector *c = NULL;
    tether_error err = {0};
    assert_int_equal(tether_connector_create(&c, &o, &err), 0);
    PGconn *pg = NULL;
    int64_t t0 = now_ms();
    assert_int_equal(tether_connector_connect(c, (void **)&pg, &err),
                     TETHER_EAUTH);
    assert_true(now_ms() - t0 < 1000);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    assert_int_equal(err.attempts, 1);
    assert_non_null(strstr(err.message, getenv("PGC_USER")));
    assert_null(strstr(err.message, "Wr0ngPassw0rd"));
    print_message("wrong password: %s\n", err.message);
    tether_connector_destroy(c);
}

/* 9. A lease released inside a transaction or after SET: the next lease
 * sees a clean session. */
static void test_clean_session(void **state) {
    (void)state;
    tether_lease *l = NULL;
    tether_pool *p = pool1("tether_reset_query='DISCARD ALL'", &l);
    PGconn *pg = tether_lease_handle(l);
    char def[64];
    snprintf(def, sizeof(def), "%s", value(pg, "SHOW work_mem"));
    assert_true(exec_ok(pg, "BEGIN"));
    assert_true(exec_ok(pg, "CREATE TEMP TABLE t(x int)"));
    assert_true(exec_ok(pg, "SET work_mem = '7MB'"));
    tether_lease_release(l); /* inside a transaction */
    assert_int_equal(tether_pool_acquire(p, 5000, &l, NULL), 0);
    pg = tether_lease_handle(l);
    assert_int_equal(PQtransactionStatus(pg), PQTRANS_IDLE);
    assert_string_equal(value(pg, "SHOW work_mem"), def);
    assert_true(exec_ok(pg, "SET work_mem = '9MB'"));
    tether_lease_release(l); /* after SET */
    assert_int_equal(tether_pool_acquire(p, 5000, &l, NULL), 0);
    assert_string_equal(value(tether_lease_handle(l), "SHOW work_mem"), def);
    tether_lease_release(l);
    tether_pool_destroy(p);
}

static void expect_in(const char *msg, const char *needle) {
    if (!strstr(msg, needle))
        fail_msg("message \"%s\" lacks \"%s\"", msg, needle);
}

static int no_work(void *conn, void *arg, const tether_attempt *a,
                   tether_error *err) {
    (void)conn, (void)arg, (void)a, (void)err;
    return 0;
}

/* 4c. The primary stopped, the standby up but read-only (a failover not
 * yet done): the error names both hosts, the primary as refused and the
 * standby as read-only; through a pool, run() says the same (after
 * waiting for the breaker's probes) and an acquire then finds the breaker
 * open, says so and when it probes next. The
 * primary is started again afterwards (a teardown: also when it fails). */
static void test_primary_down_standby_read_only(void **state) {
    (void)state;
    char extra[256], refused[64], read_only[96];
    snprintf(extra, sizeof(extra),
             "host=127.0.0.1,127.0.0.1 port=%d,%d "
             "target_session_attrs=read-write tether_login_timeout=2s",
             primary_port, standby_port);
    snprintf(refused, sizeof(refused), "127.0.0.1:%d refused", primary_port);
    snprintf(read_only, sizeof(read_only),
             "127.0.0.1:%d is a standby (read-only), not read-write",
             standby_port);
    cluster("stop-node primary");
    tether_connector *c = connector(extra, NULL);
    tether_error err = {0};
    PGconn *pg = NULL;
    int64_t t0 = now_ms();
    assert_int_equal(tether_connector_connect(c, (void **)&pg, &err),
                     TETHER_ECONNECT);
    int64_t took = now_ms() - t0;
    print_message("connector after %lld ms: %s\n", (long long)took,
                  err.message);
    assert_true(took <= 2500);
    expect_in(err.message, "no read-write server after ");
    expect_in(err.message, refused);
    expect_in(err.message, read_only);
    assert_null(strstr(err.message, getenv("PGC_PASSWORD")));
    tether_connector_destroy(c);

    /* Through a pool's run(): its retries wait for the breaker's probes
     * while they come before its deadline; it ends with the last probe's
     * error, or with the open breaker's when the next probe comes after
     * the deadline (the period is jittered), or with a time-out while the
     * pool's probe connects (docs/breaker.md); each names the hosts. Then
     * an acquire with less time than the period left fails at once. */
    tether_pool *p = pool(extra);
    t0 = now_ms();
    int rc = tether_pool_run(p, TETHER_IDEMPOTENT, no_work, NULL, &err);
    took = now_ms() - t0;
    print_message("run after %lld ms: %s\n", (long long)took, err.message);
    assert_true(took <= 15000 + 20);
    if (rc == TETHER_EOPEN) {
        expect_in(err.message, "circuit breaker is open, next probe in ");
        assert_int_equal(err.cause, TETHER_ECONNECT);
    } else if (rc == TETHER_ETIMEDOUT) {
        expect_in(err.message, "probing for ");
        assert_int_equal(err.cause, TETHER_ECONNECT);
    } else {
        assert_int_equal(rc, TETHER_ECONNECT);
        expect_in(err.message, "no read-write server after ");
    }
    expect_in(err.message, refused);
    expect_in(err.message, read_only);
    tether_lease *l = NULL;
    rc = tether_pool_acquire(p, 1000, &l, &err);
    if (rc == TETHER_ETIMEDOUT) { /* the pool's probe still connecting (the
                                     run above ended so under ASan) */
        expect_in(err.message, "probing for ");
    } else {
        assert_int_equal(rc, TETHER_EOPEN);
        expect_in(err.message, "circuit breaker is open, next probe in ");
        expect_in(err.message, refused);
    }
    assert_null(strstr(err.message, getenv("PGC_PASSWORD")));
    tether_pool_destroy(p);
}

static int start_primary(void **state) {
    (void)state;
    cluster("start-node primary");
    return 0;
}

/* 4b. Promote the standby and stop the old primary: new acquires reach the
 * new primary, and no connection to the old one is handed out. */
static void test_failover(void **state) {
    (void)state;
    char extra[256];
    snprintf(extra, sizeof(extra),
             "host=127.0.0.1,127.0.0.1 port=%d,%d "
             "target_session_attrs=read-write tether_pool_max=4 "
             "tether_breaker='breaker failures=100'",
             primary_port, standby_port);
    tether_pool *p = pool(extra);
    tether_lease *l = NULL;
    assert_int_equal(tether_pool_acquire(p, 5000, &l, NULL), 0);
    assert_int_equal(port_of(tether_lease_handle(l)), primary_port);
    tether_lease_release(l);
    cluster("promote");
    cluster("stop-node primary");
    int64_t t0 = now_ms();
    for (int i = 0; i < 10; i++) {
        tether_error err = {0};
        if (tether_pool_acquire(p, 15000, &l, &err))
            fail_msg("acquire after failover: %s", err.message);
        PGconn *pg = tether_lease_handle(l);
        assert_int_equal(port_of(pg), standby_port);
        assert_string_equal(value(pg, "SELECT pg_is_in_recovery()"), "f");
        if (i == 0)
            assert_true(exec_ok(pg, "CREATE TABLE failover_t(x int)"));
        assert_true(exec_ok(pg, "INSERT INTO failover_t VALUES (1)"));
        tether_lease_release(l);
    }
    print_message("failover: 10 writes on the new primary, first after %lld "
                  "ms\n",
                  (long long)(now_ms() - t0));
    tether_pool_destroy(p);
}

int main(int argc, char **argv) {
    if (argc < 3 || !getenv("PRIMARY_PORT")) {
        fprintf(stderr, "usage: scripts/pg-cluster run -- test_failover "
                        "PG_CLUSTER_SCRIPT FAULTPROXY\n");
        return 2;
    }
    cluster_script = argv[1];
    proxy_bin = argv[2];
    primary_port = atoi(getenv("PRIMARY_PORT"));
    standby_port = atoi(getenv("STANDBY_PORT"));
    snprintf(base, sizeof(base), "user=%s password=%s dbname=%s",
             getenv("PGC_USER"), getenv("PGC_PASSWORD"), getenv("PGC_DB"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_port_then_primary),
        cmocka_unit_test(test_blackhole_budgets),
        cmocka_unit_test(test_mirroring_stopped_principal),
        cmocka_unit_test(test_roles),
        cmocka_unit_test(test_terminate_all),
        cmocka_unit_test(test_terminated_idle_not_handed_out),
        cmocka_unit_test(test_restart_during_work),
        cmocka_unit_test(test_too_many_connections),
        cmocka_unit_test(test_wrong_password),
        cmocka_unit_test(test_clean_session),
        cmocka_unit_test_teardown(test_primary_down_standby_read_only,
                                  start_primary),
        cmocka_unit_test(test_failover),
    };
    return cmocka_run_group_tests_name("failover", tests, NULL, NULL);
}
