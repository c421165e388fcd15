/* test_pq_driver.c - the PostgreSQL driver against a real primary and
 * standby (scripts/pg-cluster run -- test_pq_driver): connect through
 * tether__driver_connect, roles, validate (and its budget on a stopped
 * backend), reset after BEGIN, after a failed statement, with DISCARD ALL,
 * with a query still running; tether_pq_error's SQLSTATE table on real
 * errors; connect failures (wrong password, unknown database, closed port,
 * too many clients); pg_terminate_backend seen by alive(); a 1 ms budget.
 * With TETHER_TEST_PROMOTE=1 (a cluster of its own), the standby is promoted
 * last and its connection must report the role change.
 *
 * Environment: PRIMARY_PORT (required, else the test is skipped), STANDBY_PORT,
 * PGC_HOST (127.0.0.1), PGC_USER (tether), PGC_PASSWORD (tether-secret),
 * PGC_DB (tetherdb); PGC_CTL and PGC_DIR for the promotion. */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include "../support/clock.h"
#include "../support/net.h"
#include "../support/thread_time.h"
#include "driver.h"
#include "pq.h"
#include "tether.h"
#include "tether_pq.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct {
    const char *host, *user, *password, *db;
    int primary, standby;
} env;

#define DRV tether_driver_pq()

/* ---- helpers ---------------------------------------------------------- */

static const char *getenv_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

static tether__pq_params *params(const char *password, const char *db) {
    const char *keys[] = {"user", "password", "dbname", "application_name"};
    const char *vals[] = {env.user, password, db, "test_pq_driver"};
    tether__pq_params *p = NULL;
    tether_error err;
    if (tether__pq_params_create(&p, keys, vals, 4, &err))
        fail_msg("params: %s", err.message);
    return p;
}

/* try_connect connects to port within budget_ms; returns the rc. */
static int try_connect(const tether__pq_params *p, int port, int64_t budget_ms,
                       void **conn, tether_error *err) {
    tether_endpoint ep = {env.host, NULL, port, -1};
    tether_error_clear(err);
    return tether__driver_connect(DRV, (void *)p, &ep, budget_ms, NULL, conn,
                                  err);
}

/* The shared parameters (right password) for the tests' connections. */
static tether__pq_params *good;

/* open_conn connects or fails the test; it waits out a refusal for too many
 * clients (backends of closed connections may still be exiting). */
static void *open_conn(int port) {
    void *conn = NULL;
    tether_error err;
    double t0 = now_ms_f();
    int rc;
    while ((rc = try_connect(good, port, 10000, &conn, &err)) ==
               TETHER_ETHROTTLED &&
           now_ms_f() - t0 < 3000)
        usleep(10000);
    if (rc)
        fail_msg("connect to %d: %s (%s)", port, err.message,
                 tether_errname(rc));
    return conn;
}

static PGconn *pg(void *conn) {
    return DRV->handle(conn);
}

static void exec_ok(void *conn, const char *sql) {
    PGresult *r = PQexec(pg(conn), sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
}

/* exec_err runs sql, which must fail, and returns tether_pq_error's code. */
static int exec_err(void *conn, const char *sql, tether_error *err) {
    PGresult *r = PQexec(pg(conn), sql);
    int rc = tether_pq_error(pg(conn), r, err);
    PQclear(r);
    return rc;
}

/* scalar runs sql and copies the first value into buf. */
static void scalar(void *conn, const char *sql, char *buf, size_t cap) {
    PGresult *r = PQexec(pg(conn), sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    snprintf(buf, cap, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
}

/* ---- connect and roles ------------------------------------------------ */

static void test_connect_primary(void **state) {
    (void)state;
    void *conn = open_conn(env.primary);
    tether_error err;
    assert_int_equal(PQstatus(pg(conn)), CONNECTION_OK);
    /* Users get libpq's usual blocking mode, before and after the driver's
     * own (non-blocking) round trips. */
    assert_int_equal(PQisnonblocking(pg(conn)), 0);
    assert_int_equal(DRV->role(conn), TETHER_ROLE_PRIMARY);
    assert_int_equal(DRV->alive(conn, 1), 1);
    assert_int_equal(DRV->validate(conn, 5000, &err), 0);
    assert_int_equal(DRV->validate(conn, 5000, NULL), 0);
    assert_int_equal(PQisnonblocking(pg(conn)), 0);
    assert_int_equal(tether__pq_query_role(conn, 5000, &err),
                     TETHER_ROLE_PRIMARY);
    assert_int_equal(DRV->alive(conn, 1), 1);
    char label[64];
    snprintf(label, sizeof(label), "%s:%d", env.host, env.primary);
    assert_string_equal(tether__pq_label(conn), label);
    exec_ok(conn, "SELECT 1"); /* the handle works for the user */
    DRV->close(conn);
}

static void test_standby_role(void **state) {
    (void)state;
    if (!env.standby) {
        printf("    (skipped: STANDBY_PORT is not set)\n");
        return;
    }
    void *conn = open_conn(env.standby);
    tether_error err;
    assert_int_equal(DRV->role(conn), TETHER_ROLE_STANDBY);
    assert_int_equal(tether__pq_query_role(conn, 5000, &err),
                     TETHER_ROLE_STANDBY);
    assert_int_equal(DRV->validate(conn, 5000, &err), 0);
    /* a write on a standby: read-only, transient (re-route to a primary) */
    assert_int_equal(exec_err(conn, "CREATE TABLE t_pq_ro (x int)", &err),
                     TETHER_EREADONLY);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_string_equal(err.sqlstate, "25006");
    assert_int_equal(DRV->reset(conn, NULL, &err), 0);
    DRV->close(conn);
}

/* ---- reset ------------------------------------------------------------ */

static void test_reset_after_begin(void **state) {
    (void)state;
    void *conn = open_conn(env.primary);
    tether_error err;
    exec_ok(conn, "BEGIN");
    exec_ok(conn, "CREATE TEMP TABLE t_pq_reset (x int)");
    assert_int_equal(PQtransactionStatus(pg(conn)), PQTRANS_INTRANS);
    assert_int_equal(DRV->reset(conn, NULL, &err), TETHER_ROLLED_BACK);
    assert_int_equal(PQtransactionStatus(pg(conn)), PQTRANS_IDLE);
    char v[16];
    scalar(conn, "SELECT count(*) FROM pg_class WHERE relname = 't_pq_reset'",
           v, sizeof(v));
    assert_string_equal(v, "0");                       /* rolled back */
    assert_int_equal(DRV->reset(conn, NULL, &err), 0); /* idle: nothing */
    DRV->close(conn);
}

static void test_reset_after_failed_statement(void **state) {
    (void)state;
    void *conn = open_conn(env.primary);
    tether_error err;
    exec_ok(conn, "BEGIN");
    assert_int_equal(exec_err(conn, "SELECT 1/0", &err), TETHER_EQUERY);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    assert_string_equal(err.sqlstate, "22012");
    assert_string_equal(err.message, "division by zero");
    assert_int_equal(err.not_sent, 0);
    assert_int_equal(PQtransactionStatus(pg(conn)), PQTRANS_INERROR);
    assert_int_equal(DRV->reset(conn, NULL, &err), TETHER_ROLLED_BACK);
    assert_int_equal(PQtransactionStatus(pg(conn)), PQTRANS_IDLE);
    exec_ok(conn, "SELECT 1");
    DRV->close(conn);
}

static void test_reset_query_discard_all(void **state) {
    (void)state;
    void *conn = open_conn(env.primary);
    tether_error err;
    char v[32];
    exec_ok(conn, "SET work_mem = '1234kB'");
    exec_ok(conn, "SET application_name = 'dirty'");
    assert_string_equal(PQparameterStatus(pg(conn), "application_name"),
                        "dirty");
    assert_int_equal(DRV->reset(conn, "DISCARD ALL", &err), 0);
    scalar(conn, "SHOW work_mem", v, sizeof(v));
    assert_string_not_equal(v, "1234kB");
    assert_string_equal(PQparameterStatus(pg(conn), "application_name"),
                        "test_pq_driver");
    /* a reset query that fails: the session state is unknown */
    assert_true(DRV->reset(conn, "SELEC 1", &err) < 0);
    assert_string_equal(err.sqlstate, "42601");
    DRV->close(conn);
}

static void test_reset_with_query_running(void **state) {
    (void)state;
    void *conn = open_conn(env.primary);
    tether_error err;
    assert_int_equal(PQsendQuery(pg(conn), "SELECT pg_sleep(1)"), 1);
    assert_int_equal(DRV->reset(conn, NULL, &err), TETHER_EBROKEN);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(DRV->validate(conn, 1000, &err), TETHER_EBROKEN);
    DRV->close(conn); /* at once: no wait for the sleep */
}

/* ---- tether_pq_error on real errors ----------------------------------- */

static void test_pq_error_table(void **state) {
    (void)state;
    void *a = open_conn(env.primary), *b = open_conn(env.primary);
    tether_error err;
    assert_int_equal(exec_err(a, "SELEC 1", &err), TETHER_EQUERY);
    assert_string_equal(err.sqlstate, "42601");
    exec_ok(a, "BEGIN READ ONLY");
    assert_int_equal(exec_err(a, "CREATE TABLE t_pq_x (x int)", &err),
                     TETHER_EREADONLY);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    exec_ok(a, "ROLLBACK");
    /* lock_not_available: b holds an advisory lock a cannot get in time */
    exec_ok(b, "SELECT pg_advisory_lock(4242)");
    exec_ok(a, "SET lock_timeout = '20ms'");
    assert_int_equal(exec_err(a, "SELECT pg_advisory_lock(4242)", &err),
                     TETHER_ECONFLICT);
    assert_string_equal(err.sqlstate, "55P03");
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    exec_ok(b, "SELECT pg_advisory_unlock(4242)");
    /* a successful result is no error */
    PGresult *r = PQexec(pg(a), "SELECT 1");
    assert_int_equal(tether_pq_error(pg(a), r, &err), 0);
    PQclear(r);
    DRV->close(a);
    DRV->close(b);
}

/* ---- connect failures ------------------------------------------------- */

static void test_wrong_password(void **state) {
    (void)state;
    const char *bad = "wrong-Pa55word-xyz";
    tether__pq_params *p = params(bad, env.db);
    void *conn;
    tether_error err;
    int rc = try_connect(p, env.primary, 10000, &conn, &err);
    assert_int_equal(rc, TETHER_EAUTH);
    assert_null(conn);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    assert_int_equal(err.not_sent, 1);
    assert_string_equal(err.sqlstate, "28P01");
    char user[64];
    snprintf(user, sizeof(user), "\"%s\"", env.user);
    assert_non_null(strstr(err.message, user));
    assert_non_null(strstr(err.message, "password authentication failed"));
    assert_null(strstr(err.message, bad));
    assert_null(strstr(err.message, env.password));
    char head[64];
    snprintf(head, sizeof(head), "connect to %s:%d failed: ", env.host,
             env.primary);
    assert_memory_equal(err.message, head, strlen(head));
    tether__pq_params_destroy(p);
}

static void test_unknown_database(void **state) {
    (void)state;
    tether__pq_params *p = params(env.password, "no_such_db_pq");
    void *conn;
    tether_error err;
    int rc = try_connect(p, env.primary, 10000, &conn, &err);
    assert_int_equal(rc, TETHER_ECONNECT);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    assert_string_equal(err.sqlstate, "3D000");
    assert_non_null(strstr(err.message, "no_such_db_pq"));
    tether__pq_params_destroy(p);
}

static void test_closed_port(void **state) {
    (void)state;
    void *conn;
    tether_error err;
    double t0 = now_ms_f();
    int rc = try_connect(good, closed_port(), 5000, &conn, &err);
    double took = now_ms_f() - t0;
    assert_int_equal(rc, TETHER_ECONNECT);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(err.not_sent, 1);
    assert_non_null(strstr(err.message, "Connection refused"));
    if (took > 500)
        fail_msg("refused connect took %.1f ms", took);
}

static void test_too_many_clients(void **state) {
    (void)state;
    void *conns[200];
    int n = 0, rc = 0;
    tether_error err;
    while (n < 200 &&
           (rc = try_connect(good, env.primary, 10000, &conns[n], &err)) == 0)
        n++;
    for (int i = 0; i < n; i++)
        DRV->close(conns[i]);
    if (rc == 0)
        fail_msg("200 connections and no refusal");
    printf("    refused after %d connections: %s\n", n, err.message);
    assert_int_equal(rc, TETHER_ETHROTTLED);
    assert_int_equal(err.cls, TETHER_CLASS_THROTTLED);
    assert_string_equal(err.sqlstate, "53300");
    assert_int_equal(err.not_sent, 1);
}

/* ---- alive, validate budgets ------------------------------------------ */

/* gone waits (up to 3 s) until backend pid has left pg_stat_activity, as
 * seen on conn: it has sent its FATAL to its client by then. */
static void gone(void *conn, int pid) {
    char sql[96], v[8] = "";
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_stat_activity WHERE pid = %d", pid);
    double t0 = now_ms_f();
    for (;;) {
        scalar(conn, sql, v, sizeof(v));
        if (strcmp(v, "0") == 0 || now_ms_f() - t0 > 3000)
            break;
        usleep(2000);
    }
    assert_string_equal(v, "0");
}

/* The first liveness check after the server's FATAL must see it: a
 * connection is checked once before it is handed out, and the message
 * sitting unread in the socket (libpq's PQconsumeInput reads but does not
 * parse) must not pass for a live connection. */
static void test_terminate_backend(void **state) {
    (void)state;
    void *a = open_conn(env.primary), *b = open_conn(env.primary);
    char sql[96], v[8];
    int pid = PQbackendPID(pg(a));
    snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d)", pid);
    assert_int_equal(DRV->alive(a, 1), 1);
    scalar(b, sql, v, sizeof(v));
    assert_string_equal(v, "t");
    gone(b, pid);
    /* 57P01 (admin shutdown, also pg_terminate_backend's): not alive, and
     * the pool should clear */
    assert_int_equal(DRV->alive(a, 1), TETHER_FATAL_SEEN);
    tether_error err;
    assert_int_equal(exec_err(a, "SELECT 1", &err), TETHER_EBROKEN);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    /* 57P01 (admin shutdown) was seen: reset asks the pool to clear */
    assert_int_equal(DRV->reset(a, NULL, &err), TETHER_FATAL);
    DRV->close(a);
    DRV->close(b);
}

/* stop_backend SIGSTOPs conn's backend when it is a local postgres; 0 when
 * that is not possible (remote server, other user). */
static int stop_backend(void *conn, int sig) {
    char path[64], comm[32] = "";
    int pid = PQbackendPID(pg(conn));
    if (strcmp(env.host, "127.0.0.1") != 0 && strcmp(env.host, "localhost"))
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(comm, sizeof(comm), f) && strncmp(comm, "postgres", 8) == 0;
    fclose(f);
    return ok && kill(pid, sig) == 0;
}

/* check_budget judges a round trip given budget_ms against a stopped
 * backend: it timed out, never before its budget, and its thread slept no
 * longer than the budget (time then spent waiting for a CPU is the
 * scheduler's: tests/support/thread_time.h). Without the budget it would
 * wait for the stopped backend for ever; 5 s tells one from the other. */
static void check_budget(const char *what, int rc, int64_t budget_ms,
                         const thread_time *t0, const thread_time *t1) {
    double took = thread_time_elapsed_ms(t0, t1);
    double slept = thread_time_slept_ms(t0, t1);
    printf("    %s: %s after %.2f ms (slept %.2f ms) of %lld\n", what,
           tether_errname(rc), took, slept, (long long)budget_ms);
    assert_int_equal(rc, TETHER_ETIMEDOUT);
    assert_true(took >= (double)budget_ms);
    assert_true(slept <= (double)budget_ms + THREAD_TIME_SLACK_MS);
    assert_true(took < 5000.0);
}

static void test_validate_budget(void **state) {
    (void)state;
    void *conn = open_conn(env.primary);
    void *conn2 = open_conn(env.primary);
    if (!stop_backend(conn, SIGSTOP) || !stop_backend(conn2, SIGSTOP)) {
        stop_backend(conn, SIGCONT);
        printf("    (skipped: cannot stop the backend process)\n");
        DRV->close(conn);
        DRV->close(conn2);
        return;
    }
    tether_error err;
    thread_time t0 = thread_time_start();
    int rc = DRV->validate(conn, 50, &err);
    thread_time t1 = thread_time_stop();
    thread_time t2 = thread_time_start();
    int rc2 = tether__pq_query_role(conn2, 30, NULL);
    thread_time t3 = thread_time_stop();
    stop_backend(conn2, SIGCONT);
    stop_backend(conn, SIGCONT);
    check_budget("validate", rc, 50, &t0, &t1);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(DRV->alive(conn, 1),
                     0); /* a query is in flight: discard */
    check_budget("role query", rc2, 30, &t2, &t3);
    DRV->close(conn);
    DRV->close(conn2);
}

static void test_budget_1ms(void **state) {
    (void)state;
    int ok = 0, timeouts = 0;
    for (int i = 0; i < 50; i++) {
        void *conn;
        tether_error err;
        thread_time t0 = thread_time_start();
        int rc = try_connect(good, env.primary, 1, &conn, &err);
        thread_time t1 = thread_time_stop();
        if (rc == 0) {
            ok++;
            DRV->close(conn);
            continue;
        }
        if (rc != TETHER_ETIMEDOUT)
            fail_msg("1 ms budget: %s (%s)", err.message, tether_errname(rc));
        double took = thread_time_elapsed_ms(&t0, &t1);
        double slept = thread_time_slept_ms(&t0, &t1);
        if (took < 1.0 || slept > 1.0 + THREAD_TIME_SLACK_MS || took >= 5000)
            fail_msg("1 ms budget: ETIMEDOUT after %.3f ms (slept %.3f ms)",
                     took, slept);
        timeouts++;
    }
    printf("    1 ms budget: %d connected, %d timed out\n", ok, timeouts);
}

/* ---- role change (own cluster only) ----------------------------------- */

static void test_promotion_marks_fatal(void **state) {
    (void)state;
    const char *ctl = getenv("PGC_CTL"), *dir = getenv("PGC_DIR");
    if (!env.standby || !ctl || !dir ||
        strcmp(getenv_or("TETHER_TEST_PROMOTE", "0"), "1") != 0) {
        printf("    (skipped: set TETHER_TEST_PROMOTE=1 with a cluster of "
               "this test's own)\n");
        return;
    }
    void *conn = open_conn(env.standby);
    tether_error err;
    char cmd[512];
    assert_int_equal(DRV->role(conn), TETHER_ROLE_STANDBY);
    snprintf(cmd, sizeof(cmd), "'%s' promote '%s' >/dev/null 2>&1", ctl, dir);
    assert_int_equal(system(cmd), 0);
    /* The report comes with a statement's answer; reset compares once per
     * 10 ms tick, so the reset after a 20 ms pause must see it. */
    double t0 = now_ms_f();
    int rc = 0;
    while (rc != TETHER_FATAL && now_ms_f() - t0 < 10000) {
        assert_int_equal(exec_err(conn, "SELECT 1", &err), 0);
        usleep(20000);
        rc = DRV->reset(conn, NULL, &err);
    }
    printf("    reset() == TETHER_FATAL %.0f ms after the promotion\n",
           now_ms_f() - t0);
    assert_int_equal(rc, TETHER_FATAL);
    assert_int_equal(DRV->role(conn), TETHER_ROLE_PRIMARY);
    /* up, not broken, but never to be handed out again */
    assert_int_equal(DRV->alive(conn, 1), TETHER_FATAL_SEEN);
    assert_int_equal(DRV->validate(conn, 5000, &err), 0);
    assert_int_equal(DRV->reset(conn, NULL, &err), TETHER_FATAL);
    DRV->close(conn);
}

int main(void) {
    const char *primary = getenv("PRIMARY_PORT");
    if (!primary || !*primary) {
        printf("test_pq_driver: skipped: PRIMARY_PORT is not set (run it "
               "through scripts/pg-cluster run -- ...)\n");
        return 0;
    }
    env.primary = atoi(primary);
    env.standby = atoi(getenv_or("STANDBY_PORT", "0"));
    env.host = getenv_or("PGC_HOST", "127.0.0.1");
    env.user = getenv_or("PGC_USER", "tether");
    env.password = getenv_or("PGC_PASSWORD", "tether-secret");
    env.db = getenv_or("PGC_DB", "tetherdb");
    good = params(env.password, env.db);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connect_primary),
        cmocka_unit_test(test_standby_role),
        cmocka_unit_test(test_reset_after_begin),
        cmocka_unit_test(test_reset_after_failed_statement),
        cmocka_unit_test(test_reset_query_discard_all),
        cmocka_unit_test(test_reset_with_query_running),
        cmocka_unit_test(test_pq_error_table),
        cmocka_unit_test(test_wrong_password),
        cmocka_unit_test(test_unknown_database),
        cmocka_unit_test(test_closed_port),
        cmocka_unit_test(test_too_many_clients),
        cmocka_unit_test(test_terminate_backend),
        cmocka_unit_test(test_validate_budget),
        cmocka_unit_test(test_budget_1ms),
        cmocka_unit_test(test_promotion_marks_fatal),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    tether__pq_params_destroy(good);
    return failed;
}
