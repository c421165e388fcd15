/* failover.c - the failover benchmark (bench/run-failover): the time from
 * the primary's loss to the first successful write on the promoted
 * standby, minus the promotion itself. Run inside a scratch cluster:
 *
 *   scripts/pg-cluster run -- failover scripts/pg-cluster [--json]
 *
 * A writer thread inserts through a tether pool (hosts: primary, standby;
 * target read-write) as fast as it can; the primary is killed (SIGKILL to
 * the postmaster and every backend), the standby promoted, and the
 * writer's first success after the kill is compared with the promotion's
 * own duration (pg_ctl promote until the server accepts writes). */
#include <tether.h>
#include <tether_pq.h>

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int64_t loss_at, first_ok;
static _Atomic int stop;
static _Atomic long writes, failures;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int insert(void *handle, void *arg, const tether_attempt *a,
                  tether_error *err) {
    (void)arg, (void)a;
    PGresult *r = PQexec(handle, "INSERT INTO failover_bench VALUES (1)");
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK
                 ? 0
                 : tether_pq_error(handle, r, err);
    PQclear(r);
    return rc;
}

static void *writer(void *arg) {
    tether_pool *p = arg;
    while (!atomic_load(&stop)) {
        tether_error err = {0};
        /* A plain INSERT is not idempotent in general; here any number of
         * rows is fine, so the benchmark marks it so. */
        if (tether_pool_run(p, TETHER_IDEMPOTENT, insert, NULL, &err) == 0) {
            int64_t zero = 0, t = now_ms();
            if (atomic_load(&loss_at) && t > atomic_load(&loss_at))
                atomic_compare_exchange_strong(&first_ok, &zero, t);
            atomic_fetch_add(&writes, 1);
        } else {
            atomic_fetch_add(&failures, 1);
        }
    }
    return NULL;
}

static int cluster(const char *script, const char *verb, const char *node) {
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s %s %s %s >/dev/null 2>&1", script, verb,
             getenv("PGC_DIR"), node);
    return system(cmd);
}

static int setup_table(const char *ci) {
    PGconn *c = PQconnectdb(ci);
    PGresult *r = PQexec(c, "CREATE TABLE failover_bench(x int)");
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    PQfinish(c);
    return ok ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc < 2 || !getenv("PRIMARY_PORT")) {
        fprintf(stderr, "usage: scripts/pg-cluster run -- failover "
                        "PG_CLUSTER_SCRIPT [--json]\n");
        return 2;
    }
    int json = argc > 2 && !strcmp(argv[2], "--json");
    char base[512], ci[1024];
    snprintf(base, sizeof(base), "user=%s password=%s dbname=%s",
             getenv("PGC_USER"), getenv("PGC_PASSWORD"), getenv("PGC_DB"));
    snprintf(ci, sizeof(ci), "%s host=127.0.0.1 port=%s", base,
             getenv("PRIMARY_PORT"));
    if (setup_table(ci))
        return 1;
    snprintf(ci, sizeof(ci),
             "%s host=127.0.0.1,127.0.0.1 port=%s,%s "
             "target_session_attrs=read-write tether_pool_max=2 "
             "tether_retry='exponential base=10ms max=100ms attempts=1000 "
             "deadline=60s'",
             base, getenv("PRIMARY_PORT"), getenv("STANDBY_PORT"));
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, NULL, NULL, &err)) {
        fprintf(stderr, "failover: %s\n", err.message);
        return 1;
    }
    pthread_t t;
    pthread_create(&t, NULL, writer, p);
    sleep(1);
    long before = atomic_load(&writes);
    /* The loss: when every process of the primary is dead (the kill
     * command returns then); a write that completes later cannot have
     * been served by the old primary. */
    cluster(argv[1], "kill", "primary");
    int64_t loss = now_ms();
    atomic_store(&loss_at, loss);
    int64_t p0 = now_ms();
    int prc = cluster(argv[1], "promote", "");
    int64_t p1 = now_ms();
    while (!atomic_load(&first_ok) && now_ms() - loss < 60000)
        usleep(1000);
    int64_t first = atomic_load(&first_ok);
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    int64_t promo = p1 - p0, total = first - loss;
    if (json)
        printf("{\"bench\":\"failover\",\"loss_to_write_ms\":%lld,"
               "\"promotion_ms\":%lld,\"failover_ms\":%lld,"
               "\"writes_before\":%ld,\"failed_runs\":%ld,\"promote_rc\":%d}\n",
               (long long)total, (long long)promo, (long long)(total - promo),
               before, atomic_load(&failures), prc);
    else
        printf("failover: first write %lld ms after the primary's loss; "
               "promotion took %lld ms; failover = %lld ms (failed runs: "
               "%ld)\n",
               (long long)total, (long long)promo, (long long)(total - promo),
               atomic_load(&failures));
    tether_pool_destroy(p);
    return prc == 0 && first > loss ? 0 : 1;
}
