/* test_patroni_discovery.c - discovery from Patroni (docs/patroni.md,
 * "Discovery") against a real PostgreSQL primary and streaming standby
 * (scripts/pg-cluster) that the fake REST server of
 * tests/support/fake_patroni.h describes as a Patroni cluster would: a
 * routing pool whose connection string names no reachable host finds the
 * primary and the standby from the member list, writes go to the leader
 * and reads to the replica; then the primary stops and the standby is
 * promoted, the REST answer says so, and writes reach the new leader
 * within a trigger's delay, though the refresh interval is an hour.
 *
 *   scripts/pg-cluster run -- test_patroni_discovery */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../support/fake_patroni.h"
#include "../support/logbuf.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tether.h"
#include "tether_pq.h"

static int primary_port, standby_port;
static char auth[256]; /* user, password, dbname */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void cluster_cmd(const char *verb, const char *node) {
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s %s %s %s >/dev/null 2>&1", getenv("PGC_CTL"),
             verb, getenv("PGC_DIR"), node);
    if (system(cmd) != 0)
        fail_msg("cluster command failed: %s", cmd);
}

/* The /cluster answer for a leader on port lp and a replica on rp (0: no
 * replica; the old leader then is listed as stopped on op, when op). */
static const char *answer(int lp, int rp, int op) {
    static char buf[1024];
    int n = snprintf(buf, sizeof(buf),
                     "{\"members\": [{\"name\": \"pg-%d\", \"role\": "
                     "\"leader\", \"state\": \"running\", \"api_url\": "
                     "\"http://127.0.0.1:8008/patroni\", \"host\": "
                     "\"127.0.0.1\", \"port\": %d, \"timeline\": 1}",
                     lp, lp);
    if (rp)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n,
                      ", {\"name\": \"pg-%d\", \"role\": \"replica\", "
                      "\"state\": \"streaming\", \"host\": \"127.0.0.1\", "
                      "\"port\": %d, \"timeline\": 1, \"lag\": 0}",
                      rp, rp);
    if (op)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n,
                      ", {\"name\": \"pg-%d\", \"role\": \"replica\", "
                      "\"state\": \"stopped\", \"host\": \"127.0.0.1\", "
                      "\"port\": %d, \"timeline\": 1, \"lag\": \"unknown\"}",
                      op, op);
    snprintf(buf + n, sizeof(buf) - (size_t)n, "], \"scope\": \"t\"}");
    return buf;
}

typedef struct where {
    int port;
    int standby;
} where;

static int where_work(void *h, void *arg, const tether_attempt *a,
                      tether_error *err) {
    (void)a;
    where *w = arg;
    PGresult *r =
        PQexec(h, "SELECT inet_server_port(), pg_is_in_recovery()::int");
    int rc = tether_pq_error(h, r, err);
    if (rc == 0) {
        w->port = atoi(PQgetvalue(r, 0, 0));
        w->standby = atoi(PQgetvalue(r, 0, 1));
    }
    PQclear(r);
    return rc;
}

static void test_discovery_and_promotion(void **state) {
    (void)state;
    fake_patroni *f = fake_patroni_start(answer(primary_port, standby_port, 0));
    char url[64], ci[1024];
    fake_patroni_url(f, url, sizeof(url));
    /* Port 1 on loopback: nothing listens; only discovery can help. */
    snprintf(ci, sizeof(ci),
             "host=127.0.0.1 port=1 %s tether_patroni=%s "
             "tether_patroni_refresh=1h tether_route=read-write-split "
             "tether_login_timeout=5s tether_retry='exponential base=50ms "
             "max=500ms attempts=100'",
             auth, url);
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, NULL, NULL, &err))
        fail_msg("open: %s", err.message);
    where w = {0, -1};
    assert_int_equal(
        tether_pool_run_for(p, TETHER_IDEMPOTENT, 5000, where_work, &w, &err),
        0);
    assert_int_equal(w.port, primary_port);
    assert_int_equal(w.standby, 0);
    w = (where){0, -1};
    assert_int_equal(
        tether_pool_run_for(p, TETHER_READONLY, 5000, where_work, &w, &err), 0);
    assert_int_equal(w.port, standby_port);
    assert_int_equal(w.standby, 1);

    /* The leader goes; the replica is promoted; Patroni's answer says so
     * from then on. The write side's list names the replica after the
     * leader (a successor): the connect reaches it as a primary, and that,
     * like the failed connect, has Patroni asked again at once (in the
     * background), not at the hour's interval. */
    cluster_cmd("stop-node", "primary");
    cluster_cmd("promote", "standby");
    fake_patroni_set(f, answer(standby_port, 0, primary_port), FP_OK);
    int req0 = atomic_load(&f->requests);
    int64_t t0 = now_ms();
    w = (where){0, -1};
    int rc =
        tether_pool_run_for(p, TETHER_IDEMPOTENT, 10000, where_work, &w, &err);
    int64_t gap = now_ms() - t0;
    if (rc)
        fail_msg("write after the promotion: %s", err.message);
    print_message("promotion: first write on the new leader %lld ms after "
                  "the REST answer changed (%d REST requests)\n",
                  (long long)gap, atomic_load(&f->requests) - req0);
    assert_int_equal(w.port, standby_port);
    assert_int_equal(w.standby, 0);
    assert_true(gap < 3000);
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    for (int i = 0; i < 100 && m.patroni_requests < 2; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        tether_pool_metrics_get(p, &m);
    }
    assert_true(m.patroni_kicks >= 1);
    assert_true(m.patroni_requests >= 2 && m.patroni_requests <= 10);
    tether_pool_destroy(p);
    fake_patroni_stop(f);
}

int main(void) {
    if (!getenv("PRIMARY_PORT") || !getenv("PGC_CTL")) {
        fprintf(stderr,
                "usage: scripts/pg-cluster run -- test_patroni_discovery\n");
        return 2;
    }
    primary_port = atoi(getenv("PRIMARY_PORT"));
    standby_port = atoi(getenv("STANDBY_PORT"));
    snprintf(auth, sizeof(auth), "user=%s password=%s dbname=%s",
             getenv("PGC_USER"), getenv("PGC_PASSWORD"), getenv("PGC_DB"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discovery_and_promotion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
