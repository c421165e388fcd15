/* test_routing.c - read/write routing (docs/routing.md) against the
 * real scratch cluster, a primary and a streaming standby:
 *
 *   scripts/pg-cluster run -- test_routing FAULTPROXY
 *
 * One connection string names both nodes (the standby first, so that a
 * pool that does not route would land there). Read-only work lands on the
 * standby (pg_is_in_recovery() and inet_server_port() inside the work, and
 * the standby's pg_stat_activity), other work on the primary; a write sent
 * as read-only is refused by the standby (25006) and applied once on the
 * primary; a standby whose replay is paused (pg_wal_replay_pause) while the
 * primary writes is skipped; a stopped standby sends reads to the primary
 * within the caller's deadline; a pool that does not route is unchanged;
 * the read side spreads its connections over two standby endpoints (the
 * standby, and a faultproxy in front of it).
 * The standby is stopped last. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../support/clock.h"
#include "tether.h"
#include "tether_pq.h"

static char base[1024]; /* both nodes, user, password, dbname */
static int primary_port, standby_port;
static const char *proxy_bin; /* faultproxy: a second way to the standby */

/* A superuser session on one node, over the unix socket. */
static PGconn *su(int port) {
    char ci[512];
    snprintf(ci, sizeof(ci), "host=%s port=%d user=%s dbname=%s",
             getenv("PGC_SOCK"), port, getenv("PGC_SUPERUSER"),
             getenv("PGC_DB"));
    PGconn *c = PQconnectdb(ci);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("superuser connection to %d: %s", port, PQerrorMessage(c));
    return c;
}

/* The first value of sql on node port, as a number (-1: failed). */
static long long su_value(int port, const char *sql) {
    PGconn *c = su(port);
    PGresult *r = PQexec(c, sql);
    long long v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0)
        v = atoll(PQgetvalue(r, 0, 0));
    else
        print_message("%s on %d: %s\n", sql, port, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return v;
}

static void su_exec(int port, const char *sql) {
    PGconn *c = su(port);
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
        fail_msg("%s on %d: %s", sql, port, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

static tether_pool *open_pool(const char *extra) {
    char ci[2048];
    snprintf(ci, sizeof(ci), "%s %s", base, extra);
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, NULL, NULL, &err))
        fail_msg("pool: %s", err.message);
    return p;
}

/* Where a piece of work ran. */
typedef struct where {
    int port;
    int standby;
} where;

static int where_work(void *h, void *arg, const tether_attempt *a,
                      tether_error *err) {
    (void)a;
    where *w = arg;
    PGresult *r = PQexec(
        h, "SELECT inet_server_port(), pg_is_in_recovery()::int, pg_sleep(0)");
    int rc = tether_pq_error(h, r, err);
    if (rc == 0) {
        w->port = atoi(PQgetvalue(r, 0, 0));
        w->standby = atoi(PQgetvalue(r, 0, 1));
    }
    PQclear(r);
    return rc;
}

static where run_where(tether_pool *p, unsigned flags, int64_t timeout_ms) {
    where w = {0, -1};
    tether_error err = {0};
    int rc = tether_pool_run_for(p, flags, timeout_ms, where_work, &w, &err);
    if (rc)
        fail_msg("run: %s", err.message);
    return w;
}

static tether_pool_metrics metrics(tether_pool *p) {
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    return m;
}

/* wait_same waits until sql gives the standby what it gives the primary
 * (replication is asynchronous, and the cluster commits with
 * synchronous_commit=off). */
static void wait_same(const char *sql) {
    long long want = su_value(primary_port, sql), got = -1;
    for (int i = 0; i < 200 && got != want; i++) {
        got = su_value(standby_port, sql);
        if (got != want)
            sleep_ms(50);
    }
    if (got != want)
        fail_msg("%s: the standby has %lld, the primary %lld", sql, got, want);
}

#define ROWS "SELECT coalesce((SELECT count(*) FROM route_t), -2)"

static void test_reads_on_standby_writes_on_primary(void **state) {
    (void)state;
    tether_pool *p = open_pool("application_name=route-a "
                               "tether_route=read-write-split "
                               "tether_pool_max=4 tether_read_pool_max=3");
    for (int i = 0; i < 20; i++) {
        where r = run_where(p, TETHER_READONLY, 5000);
        assert_int_equal(r.standby, 1);
        assert_int_equal(r.port, standby_port);
        where w = run_where(p, 0, 5000);
        assert_int_equal(w.standby, 0);
        assert_int_equal(w.port, primary_port);
    }
    tether_pool_metrics m = metrics(p);
    assert_int_equal(m.reads_standby, 20);
    assert_int_equal(m.reads_primary, 0);
    /* The server side: each node sees the connections of its own side. */
    long long on_standby =
        su_value(standby_port, "SELECT count(*) FROM pg_stat_activity WHERE "
                               "application_name = 'route-a'");
    long long on_primary =
        su_value(primary_port, "SELECT count(*) FROM pg_stat_activity WHERE "
                               "application_name = 'route-a'");
    print_message("route-a backends: standby %lld, primary %lld\n", on_standby,
                  on_primary);
    assert_true(on_standby >= 1 && on_standby <= 3);
    assert_true(on_primary >= 1 && on_primary <= 4);
    tether_pool *r = tether_pool_read_side(p);
    assert_non_null(r);
    char want[256];
    snprintf(want, sizeof(want), "%s:read", tether_pool_name(p));
    assert_string_equal(tether_pool_name(r), want);
    assert_int_equal(metrics(r).in_use, 0);
    tether_pool_destroy(p);
}

static int insert_work(void *h, void *arg, const tether_attempt *a,
                       tether_error *err) {
    (void)a;
    int *calls = arg;
    (*calls)++;
    PGresult *r = PQexec(h, "INSERT INTO route_t VALUES (42)");
    int rc = tether_pq_error(h, r, err);
    PQclear(r);
    return rc;
}

static void test_write_as_readonly_rerouted_once(void **state) {
    (void)state;
    su_exec(primary_port, "DROP TABLE IF EXISTS route_t");
    su_exec(primary_port, "CREATE TABLE route_t (v int)");
    su_exec(primary_port, "GRANT ALL ON route_t TO PUBLIC");
    wait_same("SELECT (to_regclass('route_t') IS NOT NULL)::int");
    /* else the standby fails it as 42P01, not 25006 */
    tether_pool *p = open_pool("tether_route=read-write-split");
    int calls = 0;
    tether_error err = {0};
    /* Not marked idempotent: a re-run is allowed only because the standby
     * refused it, so nothing happened there. */
    assert_int_equal(
        tether_pool_run(p, TETHER_READONLY, insert_work, &calls, &err), 0);
    assert_int_equal(calls, 2); /* refused on the standby, then done */
    assert_int_equal(su_value(primary_port, "SELECT count(*) FROM route_t"), 1);
    tether_pool_metrics m = metrics(p);
    assert_int_equal(m.readonly_reroutes, 1);
    assert_int_equal(m.retries, 0);
    tether_pool_destroy(p);
}

/* eventually_on_standby: a read lands on the standby within 5 s. The time
 * lag errs to the primary's side for a moment when WAL arrives at a standby
 * whose last replayed transaction is old (docs/routing.md), so one read
 * right after the standby caught up may still go to the primary. */
static void eventually_on_standby(tether_pool *p) {
    for (int i = 0; i < 50; i++) {
        if (run_where(p, TETHER_READONLY, 5000).standby == 1)
            return;
        sleep_ms(100);
    }
    fail_msg("reads never went back to the standby");
}

static void test_lagging_standby_skipped(void **state) {
    (void)state;
    tether_pool *p = open_pool("tether_route=read-write-split "
                               "tether_max_standby_lag=300ms "
                               "tether_lag_recheck=100ms");
    wait_same(ROWS);
    eventually_on_standby(p);
    su_exec(standby_port, "SELECT pg_wal_replay_pause()");
    su_exec(primary_port, "INSERT INTO route_t VALUES (1)");
    sleep_ms(600); /* beyond the bound, and the verdict's 100 ms */
    tether_pool_metrics m0 = metrics(p);
    int64_t t0 = now_ms();
    for (int i = 0; i < 5; i++)
        assert_int_equal(run_where(p, TETHER_READONLY, 5000).standby, 0);
    int64_t took = now_ms() - t0;
    tether_pool_metrics m = metrics(p);
    assert_int_equal(m.reads_lagging - m0.reads_lagging, 5);
    /* Checked periodically, not per query: the first read's verdict is due
     * (600 ms old), then one lag query per 100 ms on the one connection. */
    uint64_t checks = m.lag_checks - m0.lag_checks;
    print_message("5 lagging reads in %lld ms: %llu lag queries\n",
                  (long long)took, (unsigned long long)checks);
    assert_true(checks >= 1);
    assert_true(checks <= 1 + (uint64_t)(took / 100));
    su_exec(standby_port, "SELECT pg_wal_replay_resume()");
    wait_same(ROWS);
    eventually_on_standby(p);
    tether_pool_destroy(p);
}

static void test_unrouted_pool_unchanged(void **state) {
    (void)state;
    /* The standby is named first and the target is any: a plain pool goes
     * there for every piece of work, read-only or not. */
    tether_pool *p = open_pool("");
    assert_null(tether_pool_read_side(p));
    assert_int_equal(run_where(p, TETHER_READONLY, 5000).port, standby_port);
    assert_int_equal(run_where(p, 0, 5000).port, standby_port);
    tether_pool_metrics m = metrics(p);
    assert_int_equal(m.reads_standby + m.reads_primary + m.lag_checks, 0);
    tether_pool_destroy(p);
}

/* faultproxy in front of the standby: a second standby endpoint. */
static pid_t proxy_start(int *port) {
    char target[64];
    snprintf(target, sizeof(target), "%s:%d", getenv("PGC_HOST"), standby_port);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* gone with a failed test */
        dup2(fds[1], 1);
        close(fds[0]);
        char ctl[128];
        snprintf(ctl, sizeof(ctl), "/tmp/tether-route-fp-%d.sock",
                 (int)getppid());
        unlink(ctl);
        execl(proxy_bin, proxy_bin, "serve", "--listen", "0", "--target",
              target, "--control", ctl, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    char line[64] = "";
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    assert_int_equal(sscanf(line, "port %d", port), 1);
    return pid;
}

/* Connections made, by the port they reached. */
static pthread_mutex_t ok_lock = PTHREAD_MUTEX_INITIALIZER;
static int ok_at[3], ok_ports[3];

static void count_ok(void *ctx, const tether_connect_event *ev) {
    (void)ctx;
    pthread_mutex_lock(&ok_lock);
    for (int i = 0; i < 3 && ev->phase == TETHER_PHASE_OK; i++)
        ok_at[i] += ev->port == ok_ports[i];
    pthread_mutex_unlock(&ok_lock);
}

/* The read side spreads over the standbys: with two standby endpoints
 * (the standby, and the proxy to it), its 16 connections land on both,
 * and none on the primary; the write side's only there. */
static void test_read_side_spreads(void **state) {
    (void)state;
    int pport = 0;
    pid_t px = proxy_start(&pport);
    char ci[2048];
    snprintf(ci, sizeof(ci),
             "host=%s,%s,%s port=%d,%d,%d user=%s password=%s dbname=%s "
             "tether_route=read-write-split tether_pool_min=16 "
             "tether_pool_max=16",
             getenv("PGC_HOST"), getenv("PGC_HOST"), getenv("PGC_HOST"),
             primary_port, standby_port, pport, getenv("PGC_USER"),
             getenv("PGC_PASSWORD"), getenv("PGC_DB"));
    ok_ports[0] = primary_port;
    ok_ports[1] = standby_port;
    ok_ports[2] = pport;
    memset(ok_at, 0, sizeof(ok_at));
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, count_ok, NULL, &err))
        fail_msg("pool: %s", err.message);
    tether_pool *r = tether_pool_read_side(p);
    for (int i = 0; i < 200 && (metrics(r).idle < 16 || metrics(p).idle < 16);
         i++)
        sleep_ms(50);
    pthread_mutex_lock(&ok_lock);
    int at[3] = {ok_at[0], ok_at[1], ok_at[2]};
    pthread_mutex_unlock(&ok_lock);
    print_message("connections: primary %d, standby %d, proxy to the standby "
                  "%d\n",
                  at[0], at[1], at[2]);
    assert_int_equal(metrics(r).idle, 16);
    assert_int_equal(at[0], 16);         /* the write side */
    assert_int_equal(at[1] + at[2], 16); /* the read side */
    assert_true(at[1] > 0 && at[2] > 0);
    assert_int_equal(run_where(p, TETHER_READONLY, 5000).standby, 1);
    tether_pool_destroy(p);
    kill(px, SIGTERM);
    waitpid(px, NULL, 0);
    char ctl[128];
    snprintf(ctl, sizeof(ctl), "/tmp/tether-route-fp-%d.sock", (int)getpid());
    unlink(ctl);
}

static void test_standby_stopped_reads_on_primary(void **state) {
    (void)state;
    tether_pool *p = open_pool("tether_route=read-write-split");
    assert_int_equal(run_where(p, TETHER_READONLY, 5000).standby, 1);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s stop-node %s standby >/dev/null 2>&1",
             getenv("PGC_CTL"), getenv("PGC_DIR"));
    assert_int_equal(system(cmd), 0);
    for (int i = 0; i < 5; i++) {
        int64_t t0 = now_ms();
        where w = run_where(p, TETHER_READONLY, 2000);
        int64_t took = now_ms() - t0;
        print_message("read with the standby down: port %d in %lld ms\n",
                      w.port, (long long)took);
        assert_int_equal(w.port, primary_port);
        assert_true(took < 2000);
        if (i > 0) /* the read side's breaker is open: straight there, */
            assert_true(took < 100); /* no wait for its next probe */
    }
    tether_pool_metrics m = metrics(p);
    assert_int_equal(m.reads_primary, 5);
    tether_pool_destroy(p);
}

/* A standby promoted under the read side: a read that ran on it after the
 * promotion is not counted as a read on a standby (metrics tell the
 * truth). Last: it leaves two primaries. */
static void test_promoted_standby_not_counted_as_standby(void **state) {
    (void)state;
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s start-node %s standby >/dev/null 2>&1",
             getenv("PGC_CTL"), getenv("PGC_DIR"));
    assert_int_equal(system(cmd), 0);
    tether_pool *p =
        open_pool("tether_route=read-write-split tether_read_pool_max=1");
    int64_t end = now_ms() + 10000;
    while (run_where(p, TETHER_READONLY, 5000).standby != 1 && now_ms() < end)
        sleep_ms(100); /* the read side's breaker, after the restart */
    snprintf(cmd, sizeof(cmd), "%s promote %s standby >/dev/null 2>&1",
             getenv("PGC_CTL"), getenv("PGC_DIR"));
    assert_int_equal(system(cmd), 0);
    tether_pool_metrics before = metrics(p);
    int on_standby = 0;
    for (int i = 0; i < 4; i++)
        on_standby += run_where(p, TETHER_READONLY, 5000).standby == 1;
    tether_pool_metrics m = metrics(p);
    print_message("after the promotion: 4 reads, %d on a standby by the "
                  "server's word; counted %llu on a standby, %llu on the "
                  "primary\n",
                  on_standby,
                  (unsigned long long)(m.reads_standby - before.reads_standby),
                  (unsigned long long)(m.reads_primary - before.reads_primary));
    assert_int_equal(m.reads_standby - before.reads_standby, on_standby);
    assert_int_equal(m.reads_primary - before.reads_primary, 4 - on_standby);
    tether_pool_destroy(p);
}

int main(int argc, char **argv) {
    if (argc < 2 || !getenv("PRIMARY_PORT") || !getenv("PGC_CTL")) {
        fprintf(stderr, "usage: scripts/pg-cluster run -- test_routing "
                        "FAULTPROXY\n");
        return 2;
    }
    proxy_bin = argv[1];
    primary_port = atoi(getenv("PRIMARY_PORT"));
    standby_port = atoi(getenv("STANDBY_PORT"));
    snprintf(base, sizeof(base),
             "host=%s,%s port=%d,%d user=%s password=%s dbname=%s "
             "tether_login_timeout=5s",
             getenv("PGC_HOST"), getenv("PGC_HOST"), standby_port, primary_port,
             getenv("PGC_USER"), getenv("PGC_PASSWORD"), getenv("PGC_DB"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_on_standby_writes_on_primary),
        cmocka_unit_test(test_write_as_readonly_rerouted_once),
        cmocka_unit_test(test_lagging_standby_skipped),
        cmocka_unit_test(test_unrouted_pool_unchanged),
        cmocka_unit_test(test_read_side_spreads),
        cmocka_unit_test(test_standby_stopped_reads_on_primary),
        cmocka_unit_test(test_promoted_standby_not_counted_as_standby),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
