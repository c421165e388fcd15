/* test_patroni_add_replica.c - a replica added to a real Patroni cluster
 * (scripts/patroni-cluster) while tether reads through discovery serves
 * reads within one refresh interval and a margin (docs/patroni.md, "A
 * replica added while the workload runs"): a connector with
 * tether_patroni (refresh 1 s; TEST_PATRONI_REFRESH overrides, e.g. 1h to
 * see the test fail), target standby, strategy random, opens a connection
 * per read every 50 ms; add-replica joins a fourth node; a read must reach
 * it within 1.1 x the interval (the jittered wait) + 3 s of add-replica's
 * return (the node streams by then, and /cluster shows it running).
 * Beside it, a routing pool (read side of 4, kept full by
 * tether_pool_min=4) reads every 10 ms from two threads: its kept
 * connections must move their share to the new node by the same bound
 * (the rebalance, same page).
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
static tether_pool *pool;
static atomic_int stop;

/* The reads of one client: when, and the server's port. */
typedef struct readlog {
    pthread_mutex_t lock;
    int n, errors;
    struct {
        int64_t t;
        int port;
    } r[MAX_READS];
} readlog;
static readlog by_connect = {.lock = PTHREAD_MUTEX_INITIALIZER};
static readlog by_pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* record logs h's answer to "which port", or an error. */
static void record(readlog *l, PGconn *h) {
    PGresult *r = PQexec(h, "SELECT inet_server_port()");
    pthread_mutex_lock(&l->lock);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        if (l->n < MAX_READS) {
            l->r[l->n].t = now_ms();
            l->r[l->n++].port = atoi(PQgetvalue(r, 0, 0));
        }
    } else {
        l->errors++;
    }
    pthread_mutex_unlock(&l->lock);
    PQclear(r);
}

static void failed(readlog *l) {
    pthread_mutex_lock(&l->lock);
    l->errors++;
    pthread_mutex_unlock(&l->lock);
}

/* A connection of its own per read, every 50 ms. */
static void *connect_reader(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        void *h = NULL;
        tether_error err = {0};
        if (tether_connector_connect(conn, &h, &err) == 0) {
            record(&by_connect, h);
            tether_connector_close(conn, h);
        } else {
            failed(&by_connect);
        }
        sleep_ms(50);
    }
    return NULL;
}

static int pool_read(void *h, void *arg, const tether_attempt *a,
                     tether_error *err) {
    (void)arg, (void)a, (void)err;
    record(&by_pool, h);
    return 0;
}

/* Reads through the routing pool, every 10 ms. */
static void *pool_reader(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        tether_error err = {0};
        if (tether_pool_run_for(pool, TETHER_READONLY | TETHER_IDEMPOTENT, 5000,
                                pool_read, NULL, &err))
            failed(&by_pool);
        sleep_ms(10);
    }
    return NULL;
}

/* The first read of l by port at or after since (-1: none). */
static int64_t first_read(readlog *l, int port, int64_t since) {
    int64_t t = -1;
    pthread_mutex_lock(&l->lock);
    for (int i = 0; i < l->n && t < 0; i++)
        if (l->r[i].port == port && l->r[i].t >= since)
            t = l->r[i].t;
    pthread_mutex_unlock(&l->lock);
    return t;
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
    char base[1024], ci[1200], pci[1200];
    snprintf(base, sizeof(base),
             "host=%s port=%s user=%s password=%s dbname=%s sslmode=disable "
             "gssencmode=disable connect_timeout=2 tether_patroni=%s "
             "tether_patroni_refresh=%s",
             first, colon + 1, getenv("PATRONI_USER"),
             getenv("PATRONI_PASSWORD"), getenv("PATRONI_DB"), rest, refresh);
    snprintf(ci, sizeof(ci),
             "%s target_session_attrs=standby tether_strategy=random", base);
    snprintf(pci, sizeof(pci),
             "%s tether_route=read-write-split tether_read_pool_max=4 "
             "tether_pool_min=4",
             base);
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = ci;
    tether_error err = {0};
    assert_int_equal(tether_connector_create(&conn, &o, &err), 0);
    assert_int_equal(tether_pool_open(&pool, pci, NULL, NULL, &err), 0);
    pthread_t th[3];
    assert_int_equal(pthread_create(&th[0], NULL, connect_reader, NULL), 0);
    for (int i = 1; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, pool_reader, NULL), 0);
    sleep_ms(1500);
    assert_true(by_connect.n > 0 && by_pool.n > 0);

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
    int64_t seen = -1, pseen = -1;
    while ((seen < 0 || pseen < 0) && now_ms() < deadline) {
        sleep_ms(20);
        seen = first_read(&by_connect, port, t_add);
        pseen = first_read(&by_pool, port, t_add);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    tether_pool_metrics m, mr;
    tether_pool_metrics_get(tether_pool_read_side(pool), &m);
    tether_pool_metrics_get(pool, &mr);
    /* Where the pool's reads went after the add, for a failure's reader. */
    char ports[256] = "";
    {
        int pv[8] = {0}, pc[8] = {0}, np = 0;
        pthread_mutex_lock(&by_pool.lock);
        for (int i = 0; i < by_pool.n; i++) {
            if (by_pool.r[i].t < t_ret)
                continue;
            int k = 0;
            while (k < np && pv[k] != by_pool.r[i].port)
                k++;
            if (k == np && np < 8)
                pv[np++] = by_pool.r[i].port;
            if (k < np)
                pc[k]++;
        }
        pthread_mutex_unlock(&by_pool.lock);
        size_t len = 0;
        for (int k = 0; k < np && len < sizeof(ports); k++)
            len += (size_t)snprintf(ports + len, sizeof(ports) - len, " %d:%d",
                                    pv[k], pc[k]);
    }
    printf("pool reads after the add, by port:%s; reads lagging %llu, on "
           "the primary %llu\n",
           ports, (unsigned long long)mr.reads_lagging,
           (unsigned long long)mr.reads_primary);
    printf("add-replica: %s (port %d) joined in %lld ms; first read by it "
           "%lld ms after add-replica returned on a connection per read "
           "(%d reads, %d failed), %lld ms through the pool (%d reads, %d "
           "failed; %llu connections moved) (refresh %s)\n",
           name, port, (long long)(t_ret - t_add),
           seen < 0 ? -1LL : (long long)(seen - t_ret), by_connect.n,
           by_connect.errors, pseen < 0 ? -1LL : (long long)(pseen - t_ret),
           by_pool.n, by_pool.errors, (unsigned long long)m.rebalanced,
           refresh);
    tether_pool_destroy(pool);
    tether_connector_destroy(conn);
    if (seen < 0 || pseen < 0)
        fail_msg("no read %s reached the new replica %s within %lld ms of "
                 "add-replica's return",
                 seen < 0 ? "on a connection per read" : "through the pool",
                 name, (long long)(deadline - t_ret));
    assert_int_equal(by_connect.errors, 0);
    assert_int_equal(by_pool.errors, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_added_replica_serves_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
