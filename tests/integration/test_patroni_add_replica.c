/* test_patroni_add_replica.c - a replica added to a real Patroni cluster
 * (scripts/patroni-cluster) while tether reads through discovery serves
 * reads within one refresh interval and a margin (docs/patroni.md, "A
 * replica added while the workload runs"): a connector with
 * tether_patroni (refresh 1 s; TEST_PATRONI_REFRESH overrides, e.g. 1h to
 * see the test fail), target standby, strategy random, opens a connection
 * per read every 50 ms; add-replica joins a fourth node; a read must reach
 * it within 1.1 x the interval (the jittered wait) + 3 s of add-replica's
 * return (the node streams by then, and /cluster shows it running). A
 * pool's kept connections do not move (the same page): this checks what
 * new connections see.
 *
 *   scripts/patroni-cluster run -- test_patroni_add_replica */
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

#include "tether.h"
#include "tether_pq.h"

#define MAX_READS 20000

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static tether_connector *conn;
static atomic_int stop;
static struct {
    int64_t t;
    int port;
} reads[MAX_READS];
static atomic_int nreads, nerrors;

static void *reader(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        void *h = NULL;
        tether_error err = {0};
        if (tether_connector_connect(conn, &h, &err) == 0) {
            PGresult *r = PQexec(h, "SELECT inet_server_port()");
            if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
                int i = atomic_load(&nreads);
                if (i < MAX_READS) {
                    reads[i].t = now_ms();
                    reads[i].port = atoi(PQgetvalue(r, 0, 0));
                    atomic_store(&nreads, i + 1);
                }
            } else {
                atomic_fetch_add(&nerrors, 1);
            }
            PQclear(r);
            tether_connector_close(conn, h);
        } else {
            atomic_fetch_add(&nerrors, 1);
        }
        sleep_ms(50);
    }
    return NULL;
}

/* The first read by port at or after since (-1: none). */
static int64_t first_read(int port, int64_t since) {
    int n = atomic_load(&nreads);
    for (int i = 0; i < n; i++)
        if (reads[i].port == port && reads[i].t >= since)
            return reads[i].t;
    return -1;
}

static void test_added_replica_serves_reads(void **state) {
    (void)state;
    const char *hosts = getenv("PATRONI_HOSTS"), *rest = getenv("PATRONI_REST");
    const char *ctl = getenv("PATRONI_CTL"), *dir = getenv("PATRONI_DIR");
    assert_non_null(hosts);
    assert_non_null(rest);
    assert_non_null(ctl);
    assert_non_null(dir);
    const char *refresh = getenv("TEST_PATRONI_REFRESH");
    if (!refresh || !*refresh)
        refresh = "1s";
    char first[128];
    snprintf(first, sizeof(first), "%s", hosts);
    first[strcspn(first, ",")] = '\0';
    char *colon = strrchr(first, ':');
    assert_non_null(colon);
    *colon = '\0';
    char ci[2048];
    snprintf(ci, sizeof(ci),
             "host=%s port=%s user=%s password=%s dbname=%s sslmode=disable "
             "gssencmode=disable connect_timeout=2 "
             "target_session_attrs=standby tether_strategy=random "
             "tether_patroni=%s tether_patroni_refresh=%s",
             first, colon + 1, getenv("PATRONI_USER"),
             getenv("PATRONI_PASSWORD"), getenv("PATRONI_DB"), rest, refresh);
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = ci;
    tether_error err = {0};
    assert_int_equal(tether_connector_create(&conn, &o, &err), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, reader, NULL), 0);
    sleep_ms(1500);
    assert_true(atomic_load(&nreads) > 0);

    char cmd[2048], line[512] = "";
    snprintf(cmd, sizeof(cmd), "'%s' add-replica '%s' 2>/dev/null", ctl, dir);
    int64_t t_add = now_ms();
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(line, sizeof(line), p))
        if (!strncmp(line, "node", 4))
            break;
    int st = pclose(p);
    int64_t t_ret = now_ms();
    char name[32];
    int port = 0;
    assert_int_equal(sscanf(line, "%31s 127.0.0.1:%d", name, &port), 2);
    assert_int_equal(st, 0);
    int64_t interval = 0;
    assert_int_equal(tether_duration_parse(refresh, &interval), 0);
    if (interval > 60000) /* TEST_PATRONI_REFRESH=1h: show the failure */
        interval = 1000;
    int64_t deadline = t_ret + interval * 11 / 10 + 3000;
    int64_t seen;
    while ((seen = first_read(port, t_add)) < 0 && now_ms() < deadline)
        sleep_ms(20);
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    printf("add-replica: %s (port %d) joined in %lld ms; first read by it "
           "%lld ms after add-replica returned (refresh %s; %d reads, %d "
           "failed)\n",
           name, port, (long long)(t_ret - t_add),
           seen < 0 ? -1LL : (long long)(seen - t_ret), refresh,
           atomic_load(&nreads), atomic_load(&nerrors));
    tether_connector_destroy(conn);
    if (seen < 0)
        fail_msg("no read reached the new replica %s within %lld ms of "
                 "add-replica's return",
                 name, (long long)(deadline - t_ret));
    assert_int_equal(atomic_load(&nerrors), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_added_replica_serves_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
