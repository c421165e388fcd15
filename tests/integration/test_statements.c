/* test_statements.c - statements with deadlines (docs/statements.md)
 * against the real scratch cluster's primary:
 *
 *   scripts/pg-cluster run -- test_statements FAULTPROXY
 *
 * A statement that outruns its deadline returns TETHER_ETIMEDOUT by the
 * deadline plus a few milliseconds; the server-side statement is cancelled
 * (pg_stat_activity shows it gone) and the connection comes back to the
 * pool (the same backend PID next time), never handed out while the
 * cancel is in flight (a pool of one: the next caller waits for it). The
 * deadline defaults to the tether_pool_run attempt's. A transaction's
 * statement cut by its deadline is rolled back. The server's own
 * statement_timeout (57014) is a timeout that idempotent work retries.
 * Through a faultproxy in blackhole mode the call still returns by its
 * deadline and the connection is closed after the drain bound. A
 * deadline is kept by a timer a connection keeps between its statements,
 * or without descriptors to spare by a timed poll(). Declared
 * statements: prepared once per connection, again when the server or a
 * clear lost them; under load (four threads of idempotent work), no error
 * reaches the work through a tether_pool_clear, DEALLOCATE ALL in and out
 * of a transaction block, and a failover. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../support/clock.h"
#include "../support/faultproxy.h"
#include "../support/thread_time.h"
#include "tether.h"
#include "tether_pq.h"

static char base[1024]; /* user, password, dbname */
static int primary_port;
static const char *proxy_bin;

/* How late a timed-out call may return, in time its thread was blocked
 * (tests/support/thread_time.h: a busy machine's run queue is not the
 * code's); the wall clock is printed beside it. */
#define LATE_MS 20.0

/* check_late asserts that a call of [a, b] with deadline_ms kept it. */
static void check_late(const thread_time *a, const thread_time *b,
                       double deadline_ms, const char *what) {
    double wall = thread_time_elapsed_ms(a, b);
    double slept = thread_time_slept_ms(a, b);
    print_message("%s: %.1f ms (blocked %.1f ms), deadline %.0f ms\n", what,
                  wall, slept, deadline_ms);
    assert_true(wall >= deadline_ms - 1);
    assert_true(slept <= deadline_ms + LATE_MS);
}

static tether_pool *open_pool(int port, const char *extra) {
    char ci[2048];
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d %s tether_pool_max=1 %s",
             port, base, extra);
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, NULL, NULL, &err))
        fail_msg("pool: %s", err.message);
    return p;
}

/* A plain libpq session on the primary, for looking from outside. */
static PGconn *outside(void) {
    char ci[1200];
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d %s", primary_port, base);
    PGconn *c = PQconnectdb(ci);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("outside connection: %s", PQerrorMessage(c));
    return c;
}

static long long value_of(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    long long v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0)
        v = atoll(PQgetvalue(r, 0, 0));
    else
        print_message("%s: %s\n", sql, PQerrorMessage(c));
    PQclear(r);
    return v;
}

/* How many sessions run a statement containing tag, seen from outside. */
static long long running(const char *tag) {
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
             "AND query LIKE '%%%s%%' AND pid <> pg_backend_pid()",
             tag);
    PGconn *c = outside();
    long long n = value_of(c, sql);
    PQfinish(c);
    return n;
}

static long long backend_pid(tether_pool *p) {
    tether_lease *l = NULL;
    tether_error err = {0};
    if (tether_pool_acquire(p, 5000, &l, &err))
        fail_msg("acquire: %s", err.message);
    PGresult *r = NULL;
    long long pid = -1;
    if (tether_pq_exec(tether_pq_conn(l), "SELECT pg_backend_pid()", 2000, &r,
                       &err) == 0)
        pid = atoll(PQgetvalue(r, 0, 0));
    else
        print_message("pid: %s\n", err.message);
    PQclear(r);
    tether_lease_release(l);
    return pid;
}

/* The work of a run: one statement with the run's deadline. */
static int sleep_work(void *h, void *arg, const tether_attempt *a,
                      tether_error *err) {
    (void)a;
    PGresult *r = NULL;
    int rc =
        tether_pq_exec(h, (const char *)arg, TETHER_PQ_RUN_DEADLINE, &r, err);
    PQclear(r);
    return rc;
}

/* 1. A lease: the explicit deadline; the connection is busy until released,
 * then drained and reused; the statement is gone from the server. */
static void test_deadline_on_lease(void **state) {
    (void)state;
    tether_pool *p = open_pool(primary_port, "");
    long long pid = backend_pid(p);
    tether_pq_stats s0, s1;
    tether_pq_stats_get(&s0);
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    PGconn *pg = tether_pq_conn(l);
    PGresult *r = NULL;
    thread_time t0 = thread_time_start();
    int rc =
        tether_pq_exec(pg, "SELECT pg_sleep(10) /* lease */", 200, &r, &err);
    thread_time t1 = thread_time_stop();
    print_message("lease: %s: %s\n", tether_errname(rc), err.message);
    assert_int_equal(rc, TETHER_ETIMEDOUT);
    assert_null(r);
    assert_int_equal(err.not_sent, 0);
    assert_non_null(strstr(err.message, "may have been applied"));
    check_late(&t0, &t1, 200, "lease");
    rc = tether_pq_exec(pg, "SELECT 1", 1000, &r, &err);
    assert_int_equal(rc, TETHER_ESTATE); /* still busy: not reused */
    assert_int_equal(running("lease"), 1);
    tether_lease_release(l);
    assert_int_equal(backend_pid(p), pid); /* waited for it: a pool of 1 */
    assert_int_equal(running("lease"), 0);
    tether_pq_stats_get(&s1);
    assert_int_equal(s1.timeouts - s0.timeouts, 1);
    assert_int_equal(s1.cancels_sent - s0.cancels_sent, 1);
    assert_int_equal(s1.reused_after_cancel - s0.reused_after_cancel, 1);
    tether_pool_destroy(p);
}

/* 2. Inside run(): the statement ends with the attempt's time. */
static void test_run_deadline(void **state) {
    (void)state;
    tether_pool *p = open_pool(primary_port, "");
    long long pid = backend_pid(p);
    tether_error err = {0};
    thread_time t0 = thread_time_start();
    int rc = tether_pool_run_for(p, 0, 300, sleep_work,
                                 "SELECT pg_sleep(10) /* run */", &err);
    thread_time t1 = thread_time_stop();
    print_message("run: %s: %s\n", tether_errname(rc), err.message);
    assert_int_equal(rc, TETHER_ETIMEDOUT);
    check_late(&t0, &t1, 300, "run");
    assert_int_equal(backend_pid(p), pid);
    assert_int_equal(running("run"), 0);
    tether_pool_destroy(p);
}

/* 3. A statement in a transaction block: cut, then rolled back. */
static void test_transaction_rolled_back(void **state) {
    (void)state;
    PGconn *o = outside();
    PQclear(PQexec(o, "DROP TABLE IF EXISTS stmt_t; CREATE TABLE stmt_t(x "
                      "int)"));
    tether_pool *p = open_pool(primary_port, "");
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    PGconn *pg = tether_pq_conn(l);
    PGresult *r = NULL;
    assert_int_equal(tether_pq_exec(pg, "BEGIN", 1000, &r, &err), 0);
    PQclear(r);
    int rc = tether_pq_exec(
        pg, "INSERT INTO stmt_t SELECT 1 FROM pg_sleep(10) /* txn */", 150, &r,
        &err);
    assert_int_equal(rc, TETHER_ETIMEDOUT);
    assert_non_null(strstr(err.message, "rolled back"));
    tether_lease_release(l);
    assert_true(backend_pid(p) > 0); /* after the drain */
    assert_int_equal(value_of(o, "SELECT count(*) FROM stmt_t"), 0);
    PQclear(PQexec(o, "DROP TABLE stmt_t"));
    PQfinish(o);
    tether_pool_destroy(p);
}

/* The work of test_statement_timeout: the first attempt meets the server's
 * statement_timeout, later ones do not. */
static int timeout_work(void *h, void *arg, const tether_attempt *a,
                        tether_error *err) {
    int *calls = arg;
    (*calls)++;
    PGresult *r = NULL;
    const char *sql = a->number == 1 ? "SET statement_timeout = 50; "
                                       "SELECT pg_sleep(1)"
                                     : "RESET statement_timeout; SELECT 1";
    int rc = tether_pq_exec(h, sql, TETHER_PQ_RUN_DEADLINE, &r, err);
    PQclear(r);
    return rc;
}

/* 4. The server's statement_timeout (57014) is a timeout: transient, and
 * idempotent work is retried; other work is not. */
static void test_statement_timeout(void **state) {
    (void)state;
    tether_pool *p = open_pool(primary_port, "");
    int calls = 0;
    tether_error err = {0};
    assert_int_equal(
        tether_pool_run(p, TETHER_IDEMPOTENT, timeout_work, &calls, &err), 0);
    assert_int_equal(calls, 2);
    calls = 0;
    int rc = tether_pool_run(p, 0, timeout_work, &calls, &err);
    print_message("57014: %s %s %s\n", tether_errname(rc), err.sqlstate,
                  err.message);
    assert_int_equal(rc, TETHER_ETIMEDOUT);
    assert_string_equal(err.sqlstate, "57014");
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_int_equal(calls, 1);
    tether_pool_destroy(p);
}

/* 5. Parameters, and bad input. */
static void test_params_and_input(void **state) {
    (void)state;
    tether_pool *p = open_pool(primary_port, "");
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    const char *vals[] = {"41"};
    tether_pq_params pp = {1, NULL, vals, NULL, NULL, 0};
    PGresult *r = NULL;
    assert_int_equal(tether_pq_exec_params(tether_pq_conn(l),
                                           "SELECT $1::int + 1", &pp, 1000, &r,
                                           &err),
                     0);
    assert_string_equal(PQgetvalue(r, 0, 0), "42");
    PQclear(r);
    assert_int_equal(
        tether_pq_exec(tether_pq_conn(l), "SELEC 1", 1000, &r, &err),
        TETHER_EQUERY);
    assert_string_equal(err.sqlstate, "42601");
    assert_null(r);
    PGconn *o = outside(); /* not a connection of tether's */
    assert_int_equal(tether_pq_exec(o, "SELECT 1", 1000, &r, &err),
                     TETHER_EINVAL);
    assert_non_null(strstr(err.message, "not a connection of tether"));
    PQfinish(o);
    tether_lease_release(l);
    tether_pool_destroy(p);
}

/* The declared statement's answer on l (-1: failed, err says why). */
static long long run_declared(tether_lease *l, const tether_pq_stmt *st,
                              const char *arg, int64_t timeout_ms,
                              tether_error *err) {
    const char *vals[] = {arg};
    tether_pq_params pp = {1, NULL, vals, NULL, NULL, 0};
    PGresult *r = NULL;
    long long v = -1;
    if (tether_pq_exec_prepared(tether_pq_conn(l), st, &pp, timeout_ms, &r,
                                err) == 0)
        v = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* A value of sql on l (-1: failed). */
static long long lease_value(tether_lease *l, const char *sql) {
    PGresult *r = NULL;
    tether_error err = {0};
    long long v = -1;
    if (tether_pq_exec(tether_pq_conn(l), sql, 2000, &r, &err) == 0 &&
        PQntuples(r) > 0)
        v = atoll(PQgetvalue(r, 0, 0));
    else
        print_message("%s: %s\n", sql, err.message);
    PQclear(r);
    return v;
}

#define PREPARED                                                               \
    "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE "             \
    "'\\_\\_tether\\_%'"

/* 7. A declared statement: prepared once per connection, again after a
 * server-side DEALLOCATE ALL (no error reaches the caller), a clear, a
 * DISCARD ALL reset; inside a transaction the loss is a transient error. */
static void test_declared(void **state) {
    (void)state;
    tether_pool *p = open_pool(primary_port, "");
    tether_pq_stmt *st = NULL;
    tether_error err = {0};
    Oid types[] = {23}; /* int4 */
    assert_int_equal(tether_pq_declare("plus one", "SELECT $1::int + 1", 1,
                                       types, &st, &err),
                     0);
    tether_lease *l = NULL;
    tether_pq_stats s0, s1;
    tether_pq_stats_get(&s0);
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    assert_int_equal(run_declared(l, st, "41", 1000, &err), 42);
    assert_int_equal(lease_value(l, PREPARED), 1);
    long long t1 = lease_value(
        l, "SELECT extract(epoch FROM prepare_time) * 1e6 FROM "
           "pg_prepared_statements WHERE name LIKE '\\_\\_tether\\_%'");
    assert_int_equal(run_declared(l, st, "1", 1000, &err), 2);
    assert_int_equal(
        lease_value(l, "SELECT extract(epoch FROM prepare_time) * 1e6 FROM "
                       "pg_prepared_statements WHERE name LIKE "
                       "'\\_\\_tether\\_%'"),
        t1); /* not prepared again */
    tether_pq_stats_get(&s1);
    assert_int_equal(s1.prepares - s0.prepares, 1);
    assert_true(lease_value(l, "DEALLOCATE ALL; SELECT 0") == 0);
    assert_int_equal(run_declared(l, st, "2", 1000, &err), 3);
    assert_int_equal(lease_value(l, PREPARED), 1);
    tether_pq_stats_get(&s1);
    assert_int_equal(s1.reprepares - s0.reprepares, 1);
    assert_int_equal(s1.prepares - s0.prepares, 2);
    /* Inside a transaction block: the loss aborts it; transient. */
    assert_true(lease_value(l, "BEGIN; DEALLOCATE ALL; SELECT 0") == 0);
    assert_int_equal(run_declared(l, st, "2", 1000, &err), -1);
    assert_string_equal(err.sqlstate, "26000");
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    tether_lease_release(l); /* rolled back */
    tether_pool_clear(p);
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    assert_int_equal(run_declared(l, st, "3", 1000, &err), 4);
    tether_lease_release(l);
    tether_pq_stmt_destroy(st);
    tether_pool_destroy(p);
}

/* 8. More declared statements than a connection keeps: the least recently
 * used are deallocated, and all of them still run; with DISCARD ALL as the
 * reset query, each lease prepares again. */
static void test_declared_bounded(void **state) {
    (void)state;
    tether_pool *p =
        open_pool(primary_port, "tether_reset_query='DISCARD ALL'");
    enum { N = 40 };
    tether_pq_stmt *st[N];
    tether_error err = {0};
    for (int i = 0; i < N; i++) {
        char sql[64];
        snprintf(sql, sizeof(sql), "SELECT $1::int + %d", i);
        assert_int_equal(tether_pq_declare(NULL, sql, 1, NULL, &st[i], &err),
                         0);
    }
    tether_lease *l = NULL;
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++)
            assert_int_equal(run_declared(l, st[i], "100", 1000, &err),
                             100 + i);
    long long kept = lease_value(l, PREPARED);
    print_message("declared: %d statements, %lld kept\n", N, kept);
    assert_true(kept <= 32 && kept > 0);
    tether_lease_release(l); /* DISCARD ALL */
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    assert_int_equal(lease_value(l, PREPARED), 0);
    assert_int_equal(run_declared(l, st[0], "1", 1000, &err), 1);
    tether_lease_release(l);
    for (int i = 0; i < N; i++)
        tether_pq_stmt_destroy(st[i]);
    tether_pool_destroy(p);
}

/* 9. A declared statement past its deadline drains like any other; the
 * connection then runs it again. */
static void test_declared_timeout(void **state) {
    (void)state;
    tether_pool *p = open_pool(primary_port, "");
    long long pid = backend_pid(p);
    tether_pq_stmt *st = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pq_declare("sleep",
                                       "SELECT 1 FROM "
                                       "pg_sleep($1::float8)",
                                       1, NULL, &st, &err),
                     0);
    tether_lease *l = NULL;
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    thread_time t0 = thread_time_start();
    assert_int_equal(run_declared(l, st, "10", 200, &err), -1);
    thread_time t1 = thread_time_stop();
    assert_int_equal(err.code, TETHER_ETIMEDOUT);
    check_late(&t0, &t1, 200, "declared");
    tether_lease_release(l);
    assert_int_equal(backend_pid(p), pid);
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    /* The Prepare of the round that timed out ran: inside a transaction
     * block the statement must not be prepared again (42P05 would abort
     * the transaction). */
    PGresult *r = NULL;
    assert_int_equal(tether_pq_exec(tether_pq_conn(l), "BEGIN", 1000, &r, &err),
                     0);
    PQclear(r);
    assert_int_equal(run_declared(l, st, "0", 1000, &err), 1);
    assert_int_equal(
        tether_pq_exec(tether_pq_conn(l), "COMMIT", 1000, &r, &err), 0);
    PQclear(r);
    assert_int_equal(run_declared(l, st, "0", 1000, &err), 1);
    assert_int_equal(run_declared(l, st, "0", 1000, &err), 1);
    /* Prepared here now: the Execute alone, outside pipeline mode, times
     * out, drains and is reused the same way. */
    t0 = thread_time_start();
    assert_int_equal(run_declared(l, st, "10", 200, &err), -1);
    t1 = thread_time_stop();
    assert_int_equal(err.code, TETHER_ETIMEDOUT);
    check_late(&t0, &t1, 200, "declared, prepared already");
    tether_lease_release(l);
    assert_int_equal(backend_pid(p), pid);
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    assert_int_equal(run_declared(l, st, "0", 1000, &err), 1);
    tether_lease_release(l);
    tether_pq_stmt_destroy(st);
    tether_pool_destroy(p);
}

/* The work of test_declared_routed: the declared statement, which tells
 * whether it ran on a standby. */
typedef struct routed {
    const tether_pq_stmt *st;
    int standby; /* the last run's answer */
} routed;

static int recovery_work(void *h, void *arg, const tether_attempt *a,
                         tether_error *err) {
    (void)a;
    routed *x = arg;
    PGresult *r = NULL;
    int rc = tether_pq_exec_prepared(h, x->st, NULL, TETHER_PQ_RUN_DEADLINE, &r,
                                     err);
    if (rc == 0)
        x->standby = !strcmp(PQgetvalue(r, 0, 0), "t");
    PQclear(r);
    return rc;
}

/* open_routed opens a read/write routing pool over the primary and the
 * standby, with *st the declared statement "role" (pg_is_in_recovery). */
static tether_pool *open_routed(tether_pq_stmt **st) {
    char ci[2048];
    snprintf(ci, sizeof(ci),
             "host=127.0.0.1,127.0.0.1 port=%d,%s %s "
             "tether_route=read-write-split tether_pool_max=2",
             primary_port, getenv("STANDBY_PORT"), base);
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, NULL, NULL, &err))
        fail_msg("pool: %s", err.message);
    assert_int_equal(tether_pq_declare("role", "SELECT pg_is_in_recovery()", 0,
                                       NULL, st, &err),
                     0);
    return p;
}

/* 10. Through the read/write router, the same declared statement runs on
 * either side. */
static void test_declared_routed(void **state) {
    (void)state;
    tether_pq_stmt *st = NULL;
    tether_pool *p = open_routed(&st);
    tether_error err = {0};
    int on_standby = 0; /* the first reads may go to the primary while
                           the read side connects (docs/routing.md) */
    routed x = {st, -1};
    for (int i = 0; i < 10; i++) {
        assert_int_equal(tether_pool_run(p, TETHER_IDEMPOTENT | TETHER_READONLY,
                                         recovery_work, &x, &err),
                         0);
        on_standby += x.standby;
        assert_int_equal(
            tether_pool_run(p, TETHER_IDEMPOTENT, recovery_work, &x, &err), 0);
        assert_int_equal(x.standby, 0);
    }
    print_message("routed: %d of 10 reads on the standby\n", on_standby);
    assert_true(on_standby > 0);
    tether_pool_destroy(p);
    tether_pq_stmt_destroy(st);
}

/* The work of test_declared_failover: the declared statement once. */
static int plus_work(void *h, void *arg, const tether_attempt *a,
                     tether_error *err) {
    (void)a;
    const char *vals[] = {"41"};
    tether_pq_params pp = {1, NULL, vals, NULL, NULL, 0};
    PGresult *r = NULL;
    int rc =
        tether_pq_exec_prepared(h, arg, &pp, TETHER_PQ_RUN_DEADLINE, &r, err);
    if (rc == 0 && strcmp(PQgetvalue(r, 0, 0), "42") != 0)
        rc = tether_error_set(err, TETHER_EFAILED, TETHER_CLASS_PERMANENT,
                              "wrong answer %s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

/* ---- idempotent work under load: threads loop tether_pool_run of the
 * declared statement while the test clears the pool, deallocates on the
 * server, or fails over; every error that reaches the work is counted. */

enum { LOAD_THREADS = 4 };

typedef struct load {
    tether_pool *p;
    const tether_pq_stmt *st;
    atomic_int stop;
    atomic_int dealloc_left; /* runs still to DEALLOCATE ALL first */
    atomic_int in_txn;       /* ... inside a transaction block */
    atomic_llong ok, errors, deallocs;
    pthread_mutex_t lock;
    char first_error[256];
    pthread_t tid[LOAD_THREADS];
} load;

/* A statement of the work's own, without a result it keeps. */
static int load_exec(PGconn *c, const char *sql, tether_error *err) {
    PGresult *r = NULL;
    int rc = tether_pq_exec(c, sql, TETHER_PQ_RUN_DEADLINE, &r, err);
    PQclear(r);
    return rc;
}

/* The work: the declared statement (in a transaction block when the test
 * asks for it), after a DEALLOCATE ALL of the work's own when one is
 * due: the server then no longer has the statement the connection
 * prepared. */
static int load_work(void *h, void *arg, const tether_attempt *a,
                     tether_error *err) {
    (void)a;
    load *x = arg;
    int txn = atomic_load(&x->in_txn), rc = 0;
    int dealloc = atomic_fetch_sub(&x->dealloc_left, 1) > 0;
    if (txn)
        rc = load_exec(h, "BEGIN", err);
    if (!rc && dealloc) {
        rc = load_exec(h, "DEALLOCATE ALL", err);
        atomic_fetch_add(&x->deallocs, !rc);
    }
    const char *vals[] = {"41"};
    tether_pq_params pp = {1, NULL, vals, NULL, NULL, 0};
    PGresult *r = NULL;
    if (!rc)
        rc = tether_pq_exec_prepared(h, x->st, &pp, TETHER_PQ_RUN_DEADLINE, &r,
                                     err);
    if (!rc && strcmp(PQgetvalue(r, 0, 0), "42") != 0)
        rc = tether_error_set(err, TETHER_EFAILED, TETHER_CLASS_PERMANENT,
                              "wrong answer %s", PQgetvalue(r, 0, 0));
    PQclear(r);
    if (!rc && txn)
        rc = load_exec(h, "COMMIT", err);
    return rc;
}

static void *load_thread(void *arg) {
    load *x = arg;
    while (!atomic_load(&x->stop)) {
        tether_error err = {0};
        if (tether_pool_run(x->p, TETHER_IDEMPOTENT, load_work, x, &err) == 0) {
            atomic_fetch_add(&x->ok, 1);
            continue;
        }
        pthread_mutex_lock(&x->lock);
        if (atomic_fetch_add(&x->errors, 1) == 0)
            snprintf(x->first_error, sizeof(x->first_error), "%s", err.message);
        pthread_mutex_unlock(&x->lock);
    }
    return NULL;
}

static void load_start(load *x, tether_pool *p, const tether_pq_stmt *st) {
    memset(x, 0, sizeof(*x));
    x->p = p;
    x->st = st;
    pthread_mutex_init(&x->lock, NULL);
    for (int i = 0; i < LOAD_THREADS; i++)
        assert_int_equal(pthread_create(&x->tid[i], NULL, load_thread, x), 0);
}

/* load_wait waits until n more runs succeeded (up to 30 s). */
static void load_wait(load *x, long long n, const char *what) {
    long long target = atomic_load(&x->ok) + n;
    int64_t t0 = now_ms();
    while (atomic_load(&x->ok) < target && now_ms() - t0 < 30000)
        sleep_ms(2);
    if (atomic_load(&x->ok) < target)
        fail_msg("%s: %lld runs, want %lld; %lld errors (%s)", what,
                 (long long)atomic_load(&x->ok), target,
                 (long long)atomic_load(&x->errors), x->first_error);
}

/* load_stop stops the threads; fails when an error reached the work. */
static void load_stop(load *x, const char *what) {
    atomic_store(&x->stop, 1);
    for (int i = 0; i < LOAD_THREADS; i++)
        pthread_join(x->tid[i], NULL);
    print_message("%s: %lld runs, %lld errors%s%s\n", what,
                  (long long)atomic_load(&x->ok),
                  (long long)atomic_load(&x->errors),
                  x->first_error[0] ? ", the first: " : "", x->first_error);
    assert_int_equal(atomic_load(&x->errors), 0);
    pthread_mutex_destroy(&x->lock);
}

/* 12. Under load, no error reaches idempotent work through a
 * tether_pool_clear (the connections in use are replaced: the new ones
 * prepare again), a server-side DEALLOCATE ALL (prepared again in the same
 * call) and one inside a transaction block (a transient 26000, run again
 * by tether_pool_run). */
static void test_declared_under_load(void **state) {
    (void)state;
    tether_pool *p = NULL;
    char ci[2048];
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d %s tether_pool_max=4",
             primary_port, base);
    tether_error err = {0};
    if (tether_pool_open(&p, ci, NULL, NULL, &err))
        fail_msg("pool: %s", err.message);
    tether_pq_stmt *st = NULL;
    assert_int_equal(
        tether_pq_declare("plus", "SELECT $1::int + 1", 1, NULL, &st, &err), 0);
    load x;
    tether_pq_stats s0, s1, s2, s3;
    tether_pool_metrics m0, m1;
    load_start(&x, p, st);
    load_wait(&x, 200, "warm-up");
    tether_pq_stats_get(&s0);
    tether_pool_metrics_get(p, &m0);
    tether_pool_clear(p);
    load_wait(&x, 500, "after the clear");
    tether_pq_stats_get(&s1);
    tether_pool_metrics_get(p, &m1);
    print_message("clear: %llu connections closed, %llu prepares after it\n",
                  (unsigned long long)(m1.closed_cleared - m0.closed_cleared),
                  (unsigned long long)(s1.prepares - s0.prepares));
    assert_true(m1.closed_cleared > m0.closed_cleared);
    assert_true(s1.prepares > s0.prepares);
    atomic_store(&x.dealloc_left, 8);
    while (atomic_load(&x.dealloc_left) > 0)
        sleep_ms(2);
    load_wait(&x, 200, "after DEALLOCATE ALL");
    tether_pq_stats_get(&s2);
    print_message("DEALLOCATE ALL: %lld, %llu prepared again\n",
                  (long long)atomic_load(&x.deallocs),
                  (unsigned long long)(s2.reprepares - s1.reprepares));
    assert_true(s2.reprepares - s1.reprepares >= 1);
    tether_pool_metrics_get(p, &m0);
    long long before = atomic_load(&x.deallocs);
    atomic_store(&x.in_txn, 1);
    atomic_store(&x.dealloc_left, 8);
    while (atomic_load(&x.dealloc_left) > 0)
        sleep_ms(2);
    load_wait(&x, 200, "after DEALLOCATE ALL in a transaction");
    tether_pq_stats_get(&s3);
    tether_pool_metrics_get(p, &m1);
    print_message("DEALLOCATE ALL in a transaction: %lld, %llu prepared "
                  "again, %llu runs retried\n",
                  atomic_load(&x.deallocs) - before,
                  (unsigned long long)(s3.reprepares - s2.reprepares),
                  (unsigned long long)(m1.retries - m0.retries));
    assert_true(m1.retries > m0.retries); /* the 26000s were run again */
    load_stop(&x, "clear, DEALLOCATE ALL");
    tether_pool_destroy(p);
    tether_pq_stmt_destroy(st);
}

static void cluster(const char *verb, const char *node) {
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s %s %s %s >/dev/null 2>&1", getenv("PGC_CTL"),
             verb, getenv("PGC_DIR"), node);
    if (system(cmd) != 0)
        fail_msg("cluster command failed: %s", cmd);
}

/* 11. A failover (the standby promoted, the primary stopped): the new
 * primary's connections prepare the declared statement; no error reaches
 * idempotent work, run one at a time and by four threads throughout.
 * Last: the cluster has no standby afterwards. */
static void test_declared_failover(void **state) {
    (void)state;
    if (!getenv("TETHER_TEST_PROMOTE") || !getenv("PGC_CTL")) {
        print_message("skipped: set TETHER_TEST_PROMOTE=1 with a cluster of "
                      "the test's own\n");
        return;
    }
    char ci[2048];
    snprintf(ci, sizeof(ci),
             "host=127.0.0.1,127.0.0.1 port=%d,%s %s "
             "target_session_attrs=read-write tether_pool_max=4 "
             "tether_breaker='breaker failures=100'",
             primary_port, getenv("STANDBY_PORT"), base);
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, NULL, NULL, &err))
        fail_msg("pool: %s", err.message);
    tether_pq_stmt *st = NULL;
    assert_int_equal(
        tether_pq_declare("plus", "SELECT $1::int + 1", 1, NULL, &st, &err), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(
            tether_pool_run(p, TETHER_IDEMPOTENT, plus_work, st, &err), 0);
    load x;
    load_start(&x, p, st);
    load_wait(&x, 200, "before the failover");
    tether_pq_stats s0, s1;
    tether_pq_stats_get(&s0);
    tether_pool_metrics m0, m1;
    tether_pool_metrics_get(p, &m0);
    cluster("promote", "");
    load_wait(&x, 50, "after the promotion");
    cluster("stop-node", "primary");
    load_wait(&x, 200, "after the failover");
    load_stop(&x, "failover");
    tether_pool_metrics_get(p, &m1);
    print_message("failover: %llu runs retried, %llu connections closed "
                  "broken\n",
                  (unsigned long long)(m1.retries - m0.retries),
                  (unsigned long long)(m1.closed_broken - m0.closed_broken));
    for (int i = 0; i < 20; i++) {
        int rc = tether_pool_run(p, TETHER_IDEMPOTENT, plus_work, st, &err);
        if (rc)
            fail_msg("run %d after the failover: %s", i, err.message);
    }
    tether_pq_stats_get(&s1);
    print_message("failover: %llu prepares on the new primary\n",
                  (unsigned long long)(s1.prepares - s0.prepares));
    assert_true(s1.prepares - s0.prepares >= 1);
    tether_pool_destroy(p);
    tether_pq_stmt_destroy(st);
}

/* 6. A blackholed server: the call returns by its deadline, the cancel
 * cannot connect, and the connection is closed after the drain bound. */
static void test_blackhole(void **state) {
    (void)state;
    proxy px;
    proxy_start(&px, proxy_bin, primary_port, "stmt");
    tether_pool *p = open_pool(px.port, "tether_drain_timeout=300ms");
    assert_true(backend_pid(p) > 0);
    tether_pq_stats s0, s1;
    tether_pq_stats_get(&s0);
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    proxy_mode(&px, "blackhole");
    PGresult *r = NULL;
    thread_time t0 = thread_time_start();
    int rc = tether_pq_exec(tether_pq_conn(l), "SELECT 1", 200, &r, &err);
    thread_time t1 = thread_time_stop();
    assert_int_equal(rc, TETHER_ETIMEDOUT);
    check_late(&t0, &t1, 200, "blackhole");
    t0 = thread_time_start();
    tether_lease_release(l);
    t1 = thread_time_stop();
    check_late(&t0, &t1, 0, "release"); /* the caller is not held */
    tether_pool_metrics m;
    for (int i = 0; i < 100; i++) { /* the drain gives up after 300 ms */
        tether_pool_metrics_get(p, &m);
        if (m.total == 0)
            break;
        sleep_ms(10);
    }
    assert_int_equal(m.total, 0);
    tether_pq_stats_get(&s1);
    assert_int_equal(s1.discarded_after_cancel - s0.discarded_after_cancel, 1);
    assert_int_equal(s1.cancels_failed - s0.cancels_failed, 1);
    tether_pool_destroy(p);
    proxy_stop(&px);
}

/* A read's work: whether it runs on a standby, then a sleep on the run's
 * deadline. */
static int standby_sleep_work(void *h, void *arg, const tether_attempt *a,
                              tether_error *err) {
    routed *x = arg;
    int rc = recovery_work(h, x, a, err);
    if (rc == 0)
        rc = sleep_work(h, "SELECT pg_sleep(10) /* routed */", a, err);
    return rc;
}

/* Through the router, a read's statements on the standby default to the
 * run's deadline as on the primary. */
static void test_routed_deadline(void **state) {
    (void)state;
    tether_pq_stmt *st = NULL;
    tether_pool *p = open_routed(&st);
    tether_error err = {0};
    routed x = {st, 0};
    for (int i = 0; i < 100 && !x.standby; i++) { /* the read side is up */
        assert_int_equal(tether_pool_run(p, TETHER_IDEMPOTENT | TETHER_READONLY,
                                         recovery_work, &x, &err),
                         0);
        if (!x.standby)
            sleep_ms(20);
    }
    assert_true(x.standby);
    x.standby = 0;
    thread_time t0 = thread_time_start();
    int rc = tether_pool_run_for(p, TETHER_READONLY, 300, standby_sleep_work,
                                 &x, &err);
    thread_time t1 = thread_time_stop();
    print_message("routed: %s (on the standby: %d): %s\n", tether_errname(rc),
                  x.standby, err.message);
    assert_int_equal(rc, TETHER_ETIMEDOUT);
    assert_true(x.standby);
    check_late(&t0, &t1, 300, "routed");
    tether_pool_destroy(p);
    tether_pq_stmt_destroy(st);
}

/* exec_on runs sql on l within timeout_ms: its code. */
static int exec_on(tether_lease *l, const char *sql, int64_t timeout_ms) {
    PGresult *r = NULL;
    tether_error err = {0};
    int rc = tether_pq_exec(tether_pq_conn(l), sql, timeout_ms, &r, &err);
    if (rc)
        print_message("%s: %s: %s\n", sql, tether_errname(rc), err.message);
    PQclear(r);
    return rc;
}

/* timed_out_on asserts that a pg_sleep(10) tagged tag on l ends with
 * TETHER_ETIMEDOUT by its deadline of ms. */
static void timed_out_on(tether_lease *l, const char *tag, int64_t ms) {
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT pg_sleep(10) /* %s */", tag);
    thread_time t0 = thread_time_start();
    int rc = exec_on(l, sql, ms);
    thread_time t1 = thread_time_stop();
    assert_int_equal(rc, TETHER_ETIMEDOUT);
    check_late(&t0, &t1, (double)ms, tag);
}

static int open_fds(void) {
    int n = 0;
    for (int fd = 0; fd < 4096; fd++)
        n += fcntl(fd, F_GETFD) != -1;
    return n;
}

/* The wait's timer (pq_stmt.c, "waiting until a deadline"): set for an
 * earlier deadline, it fires during a later statement, which goes on; a
 * deadline earlier than the one it is set for sets it again; one that
 * fired while the connection was idle does not cut the next statement.
 * Its two descriptors go with the connection. */
static void test_deadline_timer(void **state) {
    (void)state;
    int fds = open_fds();
    tether_pool *p = open_pool(primary_port, "");
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    /* Bounds loose enough for a loaded sanitizer build: only their order
     * matters. */
    assert_int_equal(exec_on(l, "SELECT 1", 200), 0); /* set for +200 ms */
    assert_int_equal(exec_on(l, "SELECT pg_sleep(0.3)", 2000), 0);
    assert_int_equal(exec_on(l, "SELECT 1", 5000), 0); /* stays at +2 s */
    timed_out_on(l, "timer earlier", 150);
    tether_lease_release(l); /* drained: a pool of one waits for it */
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    assert_int_equal(exec_on(l, "SELECT 1", 200), 0);
    sleep_ms(300); /* it fires while idle */
    assert_int_equal(exec_on(l, "SELECT pg_sleep(0.1)", 2000), 0);
    tether_lease_release(l);
    tether_pool_destroy(p);
    assert_int_equal(open_fds(), fds);
}

/* Without descriptors to spare (RLIMIT_NOFILE at the lowest free one), a
 * deadline is kept by a timed poll() instead. */
static void test_deadline_no_fds(void **state) {
    (void)state;
    tether_pool *p = open_pool(primary_port, "");
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    struct rlimit was, now;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
    int lowest = open("/dev/null", O_RDONLY);
    assert_true(lowest >= 0);
    close(lowest);
    now = was;
    now.rlim_cur = (rlim_t)lowest;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &now), 0);
    int spare = open("/dev/null", O_RDONLY);
    int rc = exec_on(l, "SELECT 1", 1000);
    if (rc == 0)
        timed_out_on(l, "no fds", 150);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
    assert_int_equal(spare, -1); /* the limit did bite */
    assert_int_equal(rc, 0);
    tether_lease_release(l);
    tether_pool_destroy(p);
}

int main(int argc, char **argv) {
    if (argc < 2 || !getenv("PRIMARY_PORT")) {
        fprintf(stderr, "usage: scripts/pg-cluster run -- test_statements "
                        "FAULTPROXY\n");
        return getenv("PRIMARY_PORT") ? 2 : 0;
    }
    proxy_bin = argv[1];
    primary_port = atoi(getenv("PRIMARY_PORT"));
    snprintf(base, sizeof(base), "user=%s password=%s dbname=%s",
             getenv("PGC_USER"), getenv("PGC_PASSWORD"), getenv("PGC_DB"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadline_on_lease),
        cmocka_unit_test(test_run_deadline),
        cmocka_unit_test(test_transaction_rolled_back),
        cmocka_unit_test(test_statement_timeout),
        cmocka_unit_test(test_params_and_input),
        cmocka_unit_test(test_blackhole),
        cmocka_unit_test(test_deadline_timer),
        cmocka_unit_test(test_deadline_no_fds),
        cmocka_unit_test(test_declared),
        cmocka_unit_test(test_declared_bounded),
        cmocka_unit_test(test_declared_timeout),
        cmocka_unit_test(test_declared_routed),
        cmocka_unit_test(test_routed_deadline),
        cmocka_unit_test(test_declared_under_load),
        cmocka_unit_test(test_declared_failover), /* last: promotes */
    };
    return cmocka_run_group_tests_name("statements", tests, NULL, NULL);
}
