/* redis_pool.c - a pool of Redis connections through hiredis on tether's
 * TCP driver. The connection string names the servers and their ports
 * ("host=a,b port=6379|6380,6379": each host and each of its ports in
 * turn); the TCP driver connects without blocking within each attempt's
 * budget, and hands the socket to hiredis (redisConnectFd) in its setup
 * hook. The pool validates an idle connection with PING, finds one the
 * server closed by a non-blocking peek, and replaces it.
 *
 * Four threads INCR a counter 50 times each through tether_pool_run; then
 * the server kills every client but one (CLIENT KILL), four leases are
 * taken at once, and the threads INCR again: the pool finds the dead
 * connections at checkout (closed broken), makes new ones, and no INCR is
 * lost. hiredis writes with write(2): a program using it ignores SIGPIPE.
 *
 *   example_redis_pool "host=127.0.0.1 port=6380|6379"
 */
#include <tether_driver.h>

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#define THREADS 4
#define INCRS 50

/* ---- the TCP driver's hooks: hiredis over the driver's socket ---------- */

static struct timeval tv_of(int64_t ms) {
    if (ms < 0)
        ms = 5000;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};
    return tv;
}

/* A reply of the wanted type, or an error filled from the context. */
static int check_reply(redisContext *rc, redisReply *r, int type,
                       tether_error *err) {
    int ok = r && r->type == type;
    if (r && r->type == REDIS_REPLY_ERROR)
        tether_error_set(err, TETHER_EQUERY, TETHER_CLASS_PERMANENT,
                         "redis: %s", r->str);
    else if (!ok)
        tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                         "redis: %s", rc->err ? rc->errstr : "bad reply");
    if (r)
        freeReplyObject(r);
    return ok ? 0 : err ? err->code : TETHER_EBROKEN;
}

/* setup: wrap the connected socket in a hiredis context and say hello. */
static int redis_setup(void *ctx, tether_tcp_conn *c, int64_t timeout_ms,
                       tether_error *err) {
    (void)ctx;
    redisContext *rc = redisConnectFd(tether_tcp_fd(c));
    if (!rc)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "redis: no memory for a context");
    tether_tcp_set_user(c, rc); /* freed by teardown, even on failure */
    redisSetTimeout(rc, tv_of(timeout_ms));
    return check_reply(rc, redisCommand(rc, "PING"), REDIS_REPLY_STATUS, err);
}

/* validate: a PING within the pool's validation timeout. */
static int redis_validate(void *ctx, tether_tcp_conn *c, int64_t timeout_ms,
                          tether_error *err) {
    (void)ctx;
    redisContext *rc = tether_tcp_user(c);
    redisSetTimeout(rc, tv_of(timeout_ms));
    int e = check_reply(rc, redisCommand(rc, "PING"), REDIS_REPLY_STATUS, err);
    redisSetTimeout(rc, tv_of(5000));
    return e;
}

/* reset: a context that saw an I/O or protocol error cannot be reused. */
static int redis_reset(void *ctx, tether_tcp_conn *c, tether_error *err) {
    (void)ctx;
    redisContext *rc = tether_tcp_user(c);
    if (rc->err)
        return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                "redis: %s", rc->errstr);
    return 0;
}

/* teardown: redisFree closes the socket too; say so. */
static int redis_teardown(void *ctx, tether_tcp_conn *c) {
    (void)ctx;
    redisContext *rc = tether_tcp_user(c);
    if (!rc)
        return 0;
    redisFree(rc);
    return 1;
}

/* ---- the work ------------------------------------------------------------ */

/* One INCR. A failure before anything was written says not_sent, so the
 * pool may retry even this non-idempotent command. */
static int incr(void *handle, void *arg, const tether_attempt *a,
                tether_error *err) {
    (void)arg;
    redisContext *rc = tether_tcp_user(handle);
    redisSetTimeout(rc, tv_of(a->timeout_ms));
    return check_reply(rc, redisCommand(rc, "INCR tether:example"),
                       REDIS_REPLY_INTEGER, err);
}

static int kill_others(void *handle, void *arg, const tether_attempt *a,
                       tether_error *err) {
    (void)a;
    redisContext *rc = tether_tcp_user(handle);
    redisReply *r = redisCommand(rc, "CLIENT KILL TYPE normal SKIPME yes");
    if (r && r->type == REDIS_REPLY_INTEGER)
        *(long long *)arg = r->integer;
    return check_reply(rc, r, REDIS_REPLY_INTEGER, err);
}

static int read_counter(void *handle, void *arg, const tether_attempt *a,
                        tether_error *err) {
    (void)a;
    redisContext *rc = tether_tcp_user(handle);
    redisReply *r = redisCommand(rc, "GET tether:example");
    if (r && r->type == REDIS_REPLY_STRING)
        snprintf(arg, 32, "%s", r->str);
    return check_reply(rc, r, REDIS_REPLY_STRING, err);
}

static int del_counter(void *handle, void *arg, const tether_attempt *a,
                       tether_error *err) {
    (void)arg, (void)a;
    redisContext *rc = tether_tcp_user(handle);
    return check_reply(rc, redisCommand(rc, "DEL tether:example"),
                       REDIS_REPLY_INTEGER, err);
}

typedef struct worker {
    tether_pool *pool;
    int failures;
    char last[TETHER_MSG_MAX];
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int i = 0; i < INCRS; i++) {
        tether_error err = {0};
        if (tether_pool_run(w->pool, 0, incr, NULL, &err) != 0) {
            w->failures++;
            snprintf(w->last, sizeof(w->last), "%s", err.message);
        }
    }
    return NULL;
}

/* THREADS threads, INCRS each; returns the failures. */
static int round_of_incrs(tether_pool *pool) {
    pthread_t t[THREADS];
    worker w[THREADS];
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){pool, 0, ""};
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        failures += w[i].failures;
        if (w[i].failures)
            fprintf(stderr, "INCR failed: %s\n", w[i].last);
    }
    return failures;
}

/* Connect attempts, on stdout: each host and port in turn. */
static void show(void *ctx, const tether_connect_event *ev) {
    (void)ctx;
    if (ev->phase == TETHER_PHASE_FAIL || ev->phase == TETHER_PHASE_OK)
        printf("connect %s:%d %s%s%s\n", ev->host, ev->port,
               tether_phase_name(ev->phase), ev->code ? ": " : "", ev->message);
    fflush(stdout);
}

/* Hold THREADS leases at once, then give them back: every connection of
 * the pool is checked out (and a dead one replaced). */
static int hold_all(tether_pool *pool, tether_error *err) {
    tether_lease *l[THREADS];
    int n = 0, rc = 0;
    while (n < THREADS && rc == 0)
        if ((rc = tether_pool_acquire(pool, 5000, &l[n], err)) == 0)
            n++;
    while (n > 0)
        tether_lease_release(l[--n]);
    return rc;
}

static int report(tether_pool *pool, const char *what) {
    char value[32] = "";
    tether_error err = {0};
    if (tether_pool_run(pool, TETHER_IDEMPOTENT, read_counter, value, &err)) {
        fprintf(stderr, "GET failed: %s\n", err.message);
        return 1;
    }
    tether_pool_metrics m;
    tether_pool_metrics_get(pool, &m);
    printf("%s: counter %s, connections made %llu, closed broken %llu\n", what,
           value, (unsigned long long)m.created,
           (unsigned long long)m.closed_broken);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CONNINFO (host=H port=P|P...)\n", argv[0]);
        return 2;
    }
    tether_tcp_opts to;
    tether_tcp_opts_init(&to);
    to.setup = redis_setup;
    to.validate = redis_validate;
    to.reset = redis_reset;
    to.teardown = redis_teardown;
    tether_tcp *tcp = NULL;
    tether_error err = {0};
    signal(SIGPIPE, SIG_IGN);
    if (tether_tcp_create(&tcp, &to, &err)) {
        fprintf(stderr, "tcp driver: %s\n", err.message);
        return 1;
    }

    tether_connector_opts co;
    tether_connector_opts_init(&co);
    co.conninfo = argv[1];
    co.driver = tether_driver_tcp();
    co.driver_ctx = tcp;
    co.on_event = show;
    tether_connector *conn = NULL;
    if (tether_connector_create(&conn, &co, &err)) {
        fprintf(stderr, "bad connection string: %s\n", err.message);
        tether_tcp_destroy(tcp);
        return 2;
    }
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    po.connector = conn;
    po.name = "redis";
    po.max_size = THREADS;
    po.probe_idle_ms = 0; /* peek on every checkout */
    tether_pool *pool = NULL;
    int rc = tether_pool_create(&pool, &po, &err);
    if (rc == 0)
        rc = tether_pool_run(pool, TETHER_IDEMPOTENT, del_counter, NULL, &err);
    if (rc == 0)
        rc = hold_all(pool, &err);
    if (rc == 0) {
        int failed = round_of_incrs(pool);
        rc = report(pool, "after 200 INCR") || failed;
    }
    long long killed = 0;
    if (rc == 0)
        rc = tether_pool_run(pool, 0, kill_others, &killed, &err);
    if (rc == 0) {
        printf("CLIENT KILL closed %lld connections\n", killed);
        rc = hold_all(pool, &err);
    }
    if (rc == 0)
        rc = report(pool, "after CLIENT KILL, 4 leases at once");
    if (rc == 0) {
        int failed = round_of_incrs(pool);
        rc = report(pool, "after 400 INCR") || failed;
    }
    if (rc && err.code)
        fprintf(stderr, "failed: %s\n", err.message);
    tether_pool_destroy(pool);
    tether_connector_destroy(conn);
    tether_tcp_destroy(tcp);
    return rc ? 1 : 0;
}
