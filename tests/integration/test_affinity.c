/* test_affinity.c - transactions across acquires (docs/pool.md,
 * "Transactions across acquires") against the real scratch cluster's
 * primary:
 *
 *   scripts/pg-cluster run -- test_affinity
 *
 * 16 threads on a pool of 4, each transaction an INSERT of three rows
 * spread over three keyed acquire/release pairs, then COMMIT; beside them
 * keyless threads check that no connection they get is inside a
 * transaction (libpq's status, txid_current_if_assigned(), now() against
 * statement_timestamp()); a killer terminates a random backend of the pool
 * every second. At the end every committed transaction's rows are there
 * exactly once, none of a transaction known to have failed, and no
 * transaction is there in part. TETHER_TEST_AFFINITY_SECONDS sets the
 * length (default 8; 30 for the long run). Also: a transaction abandoned
 * past a short tether_txn_reserve_timeout is rolled back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tether.h"

static char base[1024]; /* user, password, dbname */
static int primary_port;

#define WRITERS 16
#define CHECKERS 2
#define MAX_TXN 4000000

static PGconn *outside(void) {
    char ci[1200];
    snprintf(ci, sizeof(ci),
             "host=127.0.0.1 port=%d %s application_name=aff_outside",
             primary_port, base);
    PGconn *c = PQconnectdb(ci);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("outside connection: %s", PQerrorMessage(c));
    return c;
}

static void exec_outside(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK &&
        PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
}

static tether_pool *open_pool(const char *extra) {
    char ci[2048];
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d %s tether_pool_max=4 %s",
             primary_port, base, extra);
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, NULL, NULL, &err))
        fail_msg("pool: %s", err.message);
    return p;
}

/* What became of each transaction (by key). */
enum { T_NONE, T_COMMITTED, T_FAILED, T_DOUBT };

typedef struct run {
    tether_pool *p;
    _Atomic int stop;
    _Atomic uint64_t next_key;
    _Atomic unsigned char fate[MAX_TXN];
    _Atomic int committed, failed, doubt, lost, acquire_timeouts;
    _Atomic int checks, violations, kills;
    _Atomic int outside_txn; /* a keyed step found itself out of its
                                transaction: must stay 0 */
} run;

static run R;

/* ok runs sql on c: 1 when it succeeded. */
static int ok(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    int good = PQresultStatus(r) == PGRES_COMMAND_OK ||
               PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    return good;
}

/* One transaction in three keyed acquires. */
static void one_txn(uint64_t key) {
    char sql[256];
    for (int step = 1; step <= 3; step++) {
        tether_lease *l = NULL;
        tether_error err = {0};
        int rc = tether_pool_acquire_key(R.p, key, 3000, &l, &err);
        if (rc) {
            if (rc == TETHER_EBROKEN)
                R.lost++;
            else
                R.acquire_timeouts++;
            R.fate[key] = T_FAILED; /* nothing committed */
            R.failed++;
            return;
        }
        PGconn *c = tether_lease_handle(l);
        if (step > 1 && PQtransactionStatus(c) != PQTRANS_INTRANS)
            R.outside_txn++; /* handed back outside its transaction */
        snprintf(sql, sizeof(sql), "%sINSERT INTO aff_rows VALUES (%llu, %d)",
                 step == 1 ? "BEGIN; " : "", (unsigned long long)key, step);
        int good = ok(c, sql);
        if (good && step == 3) {
            PGresult *r = PQexec(c, "COMMIT");
            int st = PQresultStatus(r);
            PQclear(r);
            if (st == PGRES_COMMAND_OK &&
                PQtransactionStatus(c) == PQTRANS_IDLE) {
                R.fate[key] = T_COMMITTED;
                R.committed++;
            } else { /* the COMMIT's fate is unknown if the link broke */
                R.fate[key] = T_DOUBT;
                R.doubt++;
            }
            tether_lease_release(l);
            return;
        }
        if (!good) {
            R.fate[key] = T_FAILED;
            R.failed++;
            tether_lease_discard(l);
            return;
        }
        tether_lease_release(l); /* open: reserved to key */
    }
}

static void *writer_main(void *arg) {
    (void)arg;
    while (!R.stop) {
        uint64_t key = atomic_fetch_add(&R.next_key, 1);
        if (key >= MAX_TXN)
            break;
        one_txn(key);
    }
    return NULL;
}

/* A keyless caller never gets a connection inside a transaction. */
static void *checker_main(void *arg) {
    (void)arg;
    while (!R.stop) {
        tether_lease *l = NULL;
        tether_error err = {0};
        if (tether_pool_acquire(R.p, 3000, &l, &err))
            continue;
        PGconn *c = tether_lease_handle(l);
        int bad = PQtransactionStatus(c) != PQTRANS_IDLE;
        PGresult *r = PQexec(c, "SELECT txid_current_if_assigned() IS NULL, "
                                "now() = statement_timestamp()");
        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
            bad |= strcmp(PQgetvalue(r, 0, 0), "t") != 0;
            bad |= strcmp(PQgetvalue(r, 0, 1), "t") != 0;
            R.checks++;
            R.violations += bad;
            tether_lease_release(l);
        } else {
            tether_lease_discard(l); /* killed under us */
        }
        PQclear(r);
    }
    return NULL;
}

static void *killer_main(void *arg) {
    (void)arg;
    PGconn *c = outside();
    while (!R.stop) {
        usleep(900000 + (useconds_t)(rand() % 200000));
        PGresult *r = PQexec(
            c, "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM "
               "pg_stat_activity WHERE usename = current_user AND pid <> "
               "pg_backend_pid() AND backend_type = 'client backend' AND "
               "application_name <> 'aff_outside' ORDER BY "
               "random() LIMIT 1) k");
        if (PQresultStatus(r) == PGRES_TUPLES_OK)
            R.kills += atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    PQfinish(c);
    return NULL;
}

static void test_transactions_with_kills(void **state) {
    (void)state;
    const char *env = getenv("TETHER_TEST_AFFINITY_SECONDS");
    int secs = env ? atoi(env) : 8;
    PGconn *o = outside();
    exec_outside(o, "DROP TABLE IF EXISTS aff_rows");
    exec_outside(o, "CREATE TABLE aff_rows(txn bigint, n int)");
    memset(&R, 0, sizeof(R));
    R.next_key = 1; /* key 0 is no key */
    R.p = open_pool("tether_txn_reserve_timeout=5s");
    pthread_t w[WRITERS], ch[CHECKERS], k;
    for (int i = 0; i < WRITERS; i++)
        assert_int_equal(pthread_create(&w[i], NULL, writer_main, NULL), 0);
    for (int i = 0; i < CHECKERS; i++)
        assert_int_equal(pthread_create(&ch[i], NULL, checker_main, NULL), 0);
    assert_int_equal(pthread_create(&k, NULL, killer_main, NULL), 0);
    sleep((unsigned)secs);
    R.stop = 1;
    for (int i = 0; i < WRITERS; i++)
        pthread_join(w[i], NULL);
    for (int i = 0; i < CHECKERS; i++)
        pthread_join(ch[i], NULL);
    pthread_join(k, NULL);
    tether_pool_metrics m;
    tether_pool_metrics_get(R.p, &m);
    tether_pool_destroy(R.p);

    /* Every transaction is there whole or not at all, as its fate says. */
    PGresult *r = PQexec(o, "SELECT txn, count(*), count(DISTINCT n) FROM "
                            "aff_rows GROUP BY txn");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    int present = 0, missing = 0, wrong = 0;
    static unsigned char seen[MAX_TXN];
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < PQntuples(r); i++) {
        long long txn = atoll(PQgetvalue(r, i, 0));
        int n = atoi(PQgetvalue(r, i, 1)), d = atoi(PQgetvalue(r, i, 2));
        assert_true(txn >= 0 && txn < MAX_TXN);
        seen[txn] = 1;
        present++;
        if (n != 3 || d != 3 || R.fate[txn] == T_FAILED ||
            R.fate[txn] == T_NONE) {
            print_message("txn %lld: %d rows (%d distinct), fate %d\n", txn, n,
                          d, R.fate[txn]);
            wrong++;
        }
    }
    PQclear(r);
    uint64_t keys = atomic_load(&R.next_key);
    for (uint64_t i = 0; i < keys && i < MAX_TXN; i++)
        if (R.fate[i] == T_COMMITTED && !seen[i])
            missing++;
    PQfinish(o);
    print_message(
        "affinity: %d s, %d transactions committed (%d present in all), %d "
        "failed, %d in doubt, %d lost reservations seen by their key, %d "
        "acquire timeouts; %d backends killed; %d keyless checks, %d "
        "violations; pool: %llu reservations, %llu expired, %llu lost, %llu "
        "keyless rollbacks\n",
        secs, (int)R.committed, present, (int)R.failed, (int)R.doubt,
        (int)R.lost, (int)R.acquire_timeouts, (int)R.kills, (int)R.checks,
        (int)R.violations, (unsigned long long)m.txn_reservations,
        (unsigned long long)m.txn_expired, (unsigned long long)m.txn_lost,
        (unsigned long long)m.txn_rolled_back);
    assert_int_equal(wrong, 0);
    assert_int_equal(missing, 0);
    assert_int_equal(R.violations, 0);
    assert_int_equal(R.outside_txn, 0);
    assert_true(R.checks > 0);
    assert_true(R.committed > 100);
    assert_true(m.txn_reservations > 0);
    assert_int_equal(m.txn_expired, 0); /* every step comes back at once */
    assert_true(R.kills >= secs / 2);
}

/* A transaction abandoned past the bound is rolled back by the pool; its
 * key's next acquire says so. */
static void test_bound(void **state) {
    (void)state;
    PGconn *o = outside();
    exec_outside(o, "DROP TABLE IF EXISTS aff_bound");
    exec_outside(o, "CREATE TABLE aff_bound(x int)");
    tether_pool *p = open_pool("tether_txn_reserve_timeout=300ms");
    tether_lease *l = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire_key(p, 99, 3000, &l, &err), 0);
    assert_true(ok(tether_lease_handle(l), "BEGIN; INSERT INTO aff_bound "
                                           "VALUES (1)"));
    tether_lease_release(l);
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    assert_int_equal(m.txn_reserved, 1);
    int waited = 0;
    do {
        usleep(50000);
        tether_pool_metrics_get(p, &m);
    } while (m.txn_expired == 0 && (waited += 50) < 3000);
    print_message("bound 300 ms: expired after %d ms\n", waited);
    assert_int_equal(m.txn_expired, 1);
    assert_true(waited >= 250);
    assert_int_equal(tether_pool_acquire_key(p, 99, 3000, &l, &err),
                     TETHER_EBROKEN);
    print_message("the key's next acquire: %s\n", err.message);
    PGresult *r = PQexec(o, "SELECT count(*) FROM aff_bound");
    assert_string_equal(PQgetvalue(r, 0, 0), "0");
    PQclear(r);
    /* The connection came back clean. */
    assert_int_equal(tether_pool_acquire(p, 3000, &l, &err), 0);
    assert_int_equal(PQtransactionStatus(tether_lease_handle(l)), PQTRANS_IDLE);
    tether_lease_release(l);
    tether_pool_destroy(p);
    PQfinish(o);
}

int main(void) {
    if (!getenv("PRIMARY_PORT")) {
        fprintf(stderr, "usage: scripts/pg-cluster run -- test_affinity\n");
        return 0;
    }
    primary_port = atoi(getenv("PRIMARY_PORT"));
    snprintf(base, sizeof(base), "user=%s password=%s dbname=%s",
             getenv("PGC_USER"), getenv("PGC_PASSWORD"), getenv("PGC_DB"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_transactions_with_kills),
    };
    return cmocka_run_group_tests_name("affinity", tests, NULL, NULL);
}
