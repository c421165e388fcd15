/* test_discovery.c - discovery from Patroni (src/discovery,
 * src/connector/discover.c; docs/patroni.md "Discovery") against the fake
 * REST server of tests/support/fake_patroni.h, with a fake driver whose
 * servers' roles the test sets by host name: the write side follows the
 * leader, a replica added is used within one refresh, replicas tagged
 * noloadbalance or lagging are left out, every endpoint down keeps the
 * last list (logged once), none ever known uses the string's hosts, a
 * burst of triggers stays within the rate limit, and every hostile answer
 * (hang, trickle, redirect, truncation, huge body, 10,000 members, wrong
 * types, an error status) leaves the last good list in force. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../support/fake_driver.h"
#include "../support/fake_patroni.h"
#include "../support/logbuf.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "connector.h"
#include "pool.h"
#include "tether.h"

/* ---- a driver whose servers' roles the test sets ------------------------- */

static pthread_mutex_t roles_lock = PTHREAD_MUTEX_INITIALIZER;
static char role_of[8][16]; /* "n1" .. "n7": "p", "s" or "down" */
static char last_host[64];
static _Atomic int connects;

static void set_role(int i, const char *r) {
    pthread_mutex_lock(&roles_lock);
    snprintf(role_of[i], sizeof(role_of[i]), "%s", r);
    pthread_mutex_unlock(&roles_lock);
}

typedef struct fconn {
    int role;
    int node; /* n1..n7: 1..7; else 0 */
} fconn;

static int f_start(void *ctx, const tether_endpoint *ep, void **conn,
                   tether_wait *w, tether_error *err) {
    (void)ctx, (void)w;
    const char *h = ep && ep->host ? ep->host : "(default)";
    atomic_fetch_add(&connects, 1);
    pthread_mutex_lock(&roles_lock);
    snprintf(last_host, sizeof(last_host), "%s:%d", h, ep ? ep->port : 0);
    char r[16] = "down";
    if (h[0] == 'n' && h[1] >= '1' && h[1] <= '7' && !h[2])
        snprintf(r, sizeof(r), "%s", role_of[h[1] - '0']);
    else if (!strncmp(h, "fallback", 8))
        snprintf(r, sizeof(r), "p");
    pthread_mutex_unlock(&roles_lock);
    if (!strcmp(r, "down") || !r[0])
        return tether_error_set(err, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT,
                                "connection refused (%s)", h);
    fconn *c = calloc(1, sizeof(*c));
    c->role = r[0] == 'p' ? TETHER_ROLE_PRIMARY : TETHER_ROLE_STANDBY;
    c->node = h[0] == 'n' ? h[1] - '0' : 0;
    *conn = c;
    return TETHER_CONNECTED;
}
static void f_close(void *conn) {
    free(conn);
}
static tether_role f_role(void *conn) {
    return ((fconn *)conn)->role;
}

static const tether_driver fake = {.name = "fake",
                                   .connect_start = f_start,
                                   .close = f_close,
                                   .role = f_role,
                                   FAKE_DRIVER_OPS};

/* ---- helpers ---------------------------------------------------------------
 */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A /cluster answer: each member "name:role:state:lag[:nolb]" (role l, r,
 * s; lag -1 "unknown"), host = name, port 5432. */
static char *cluster(const char *const *m) {
    static char buf[8192];
    size_t len = (size_t)snprintf(buf, sizeof(buf), "{\"members\": [");
    for (int i = 0; m[i]; i++) {
        char name[16], role, state[16];
        int lag = 0, nolb = 0;
        sscanf(m[i], "%15[^:]:%c:%15[^:]:%d:%d", name, &role, state, &lag,
               &nolb);
        char lagtxt[32];
        if (lag < 0)
            snprintf(lagtxt, sizeof(lagtxt), "\"unknown\"");
        else
            snprintf(lagtxt, sizeof(lagtxt), "%d", lag);
        len += (size_t)snprintf(
            buf + len, sizeof(buf) - len,
            "%s{\"name\": \"%s\", \"role\": \"%s\", \"state\": \"%s\", "
            "\"api_url\": \"http://127.0.0.1:8008/patroni\", \"host\": "
            "\"%s\", \"port\": 5432, \"timeline\": 1%s%s%s}",
            i ? ", " : "", name,
            role == 'l'   ? "leader"
            : role == 's' ? "sync_standby"
                          : "replica",
            state, name,
            role == 'l' ? "" : ", \"lag\": ", role == 'l' ? "" : lagtxt,
            nolb ? ", \"tags\": {\"noloadbalance\": true}" : "");
    }
    snprintf(buf + len, sizeof(buf) - len, "], \"scope\": \"test\"}");
    return buf;
}

/* The refresher logs from its thread: the buffer is read under a lock. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void locked_capture(void *ctx, tether_log_level level, const char *msg) {
    pthread_mutex_lock(&log_lock);
    logbuf_capture(ctx, level, msg);
    pthread_mutex_unlock(&log_lock);
}

static tether_connector *make(const char *conninfo, logbuf *log,
                              tether_error *err) {
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = conninfo;
    o.driver = &fake;
    o.log = log ? locked_capture : NULL;
    o.log_ctx = log;
    tether_connector *c = NULL;
    tether_error e = {0};
    int rc = tether_connector_create(&c, &o, err ? err : &e);
    if (rc && !err)
        fail_msg("connector: %s", e.message);
    return c;
}

/* follow starts a fake REST server answering members m and a connector
 * following it: "host=fallback tether_patroni=URL " and the keywords. */
static tether_connector *follow(fake_patroni **f, const char *const *m,
                                const char *keywords, logbuf *log) {
    *f = fake_patroni_start(cluster(m));
    char ci[320], url[64];
    fake_patroni_url(*f, url, sizeof(url));
    snprintf(ci, sizeof(ci), "host=fallback tether_patroni=%s %s", url,
             keywords);
    return make(ci, log, NULL);
}

/* pool_on makes a pool over c (size n: min and max; 0: the defaults),
 * logging into log (may be NULL). */
static tether_pool *pool_on(tether_connector *c, int n, logbuf *log) {
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    po.connector = c;
    po.log = log ? locked_capture : NULL;
    po.log_ctx = log;
    if (n)
        po.min_size = po.max_size = n;
    tether_pool *p = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_create(&p, &po, &err), 0);
    return p;
}

/* The host list the connector would try now, "h:p,h:p". */
static void hosts_of(tether_connector *c, char *buf, size_t cap) {
    tether__connector_sync(c);
    pthread_mutex_lock(&c->lock);
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->cfg.neps && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s:%d", i ? "," : "",
                                c->cfg.eps[i].host ? c->cfg.eps[i].host : "",
                                c->cfg.eps[i].port);
    pthread_mutex_unlock(&c->lock);
}

/* wait_hosts waits up to ms for c's list to become want; returns the time
 * it took, or -1. */
static int64_t wait_hosts(tether_connector *c, const char *want, int ms) {
    int64_t t0 = now_ms();
    char got[512];
    do {
        hosts_of(c, got, sizeof(got));
        if (!strcmp(got, want))
            return now_ms() - t0;
        sleep_ms(10);
    } while (now_ms() - t0 < ms);
    fail_msg("hosts \"%s\", want \"%s\" within %d ms", got, want, ms);
    return -1;
}

static tether__disc_stats stats(tether_connector *c) {
    tether__disc_stats s;
    assert_true(tether__connector_disc_stats(c, &s));
    return s;
}

static int count(const char *text, const char *needle) {
    int n = 0;
    pthread_mutex_lock(&log_lock);
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    pthread_mutex_unlock(&log_lock);
    return n;
}

static void roles(const char *r1, const char *r2, const char *r3) {
    set_role(1, r1);
    set_role(2, r2);
    set_role(3, r3);
}

/* promote_later makes n2 a primary and changes the fake's answer to n2 as
 * the leader after 700 ms. */
static void *promote_later(void *arg) {
    static const char *const after[] = {"n2:l:running:0", NULL};
    sleep_ms(700);
    set_role(2, "p");
    fake_patroni_set(arg, cluster(after), FP_OK);
    return NULL;
}

/* ---- tests -----------------------------------------------------------------
 */

/* The keywords' errors name the keyword; the defaults apply. */
static void test_keywords(void **state) {
    (void)state;
    static const struct {
        const char *conninfo, *says;
    } bad[] = {
        {"tether_patroni=ftp://h:8008", "bad value for tether_patroni"},
        {"tether_patroni=http://", "bad value for tether_patroni"},
        {"tether_patroni=http://:8008", "bad value for tether_patroni"},
        {"tether_patroni='http://h:1,'", "endpoint 2"},
        {"tether_patroni=http://user:secret@h:8008", "credentials"},
        {"tether_patroni=http://h:8008/x?y=1", "bad value for tether_patroni"},
        {"tether_patroni='http://a,http://b,http://c,http://d,http://e,"
         "http://f,http://g,http://h,http://i'",
         "more than 8"},
        {"tether_patroni=http://h tether_patroni_refresh=1ms",
         "tether_patroni_refresh"},
        {"tether_patroni=http://h tether_patroni_refresh=soon",
         "tether_patroni_refresh"},
        {"tether_patroni=http://h tether_patroni_timeout=5m",
         "tether_patroni_timeout"},
        {"tether_patroni_tmeout=1s", "did you mean tether_patroni_timeout"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tether_error err = {0};
        tether_connector *c = make(bad[i].conninfo, NULL, &err);
        if (c || err.code != TETHER_ESPEC || !strstr(err.message, bad[i].says))
            fail_msg("case %zu: \"%s\" (want \"%s\")", i, err.message,
                     bad[i].says);
        assert_null(strstr(err.message, "secret"));
    }
    tether__conncfg cfg;
    tether_error err = {0};
    assert_int_equal(
        tether__conncfg_parse("host=x tether_patroni=' http://a:1/ , "
                              "https://b:2'",
                              &cfg, &err),
        0);
    assert_string_equal(cfg.patroni.urls, "http://a:1,https://b:2");
    assert_int_equal(cfg.patroni.refresh_ms, 5000);
    assert_int_equal(cfg.patroni.timeout_ms, 1000);
    tether__conncfg_free(&cfg);
}

/* The write side follows the leader: a switchover in the list moves it,
 * and a connect that finds the old leader demoted asks Patroni at once. */
static void test_leader_follows(void **state) {
    (void)state;
    static const char *const before[] = {"n1:l:running:0", "n2:r:streaming:0",
                                         "n3:r:running:0", NULL};
    static const char *const after[] = {"n1:r:running:0", "n2:l:running:0",
                                        "n3:r:streaming:0", NULL};
    roles("p", "s", "s");
    fake_patroni *f;
    logbuf log = {0};
    tether_connector *c =
        follow(&f, before,
               "tether_patroni_refresh=1h target_session_attrs=read-write "
               "tether_login_timeout=5s",
               &log);
    char hosts[256];
    hosts_of(c, hosts, sizeof(hosts)); /* the first answer came at create */
    /* The leader, then the replicas Patroni may promote (watched by a
     * connect that finds the leader gone: test_connector.c). */
    assert_string_equal(hosts, "n1:5432,n2:5432,n3:5432");
    void *h = NULL;
    tether_error err = {0};
    assert_int_equal(tether_connector_connect(c, &h, &err), 0);
    assert_string_equal(last_host, "n1:5432");
    tether_connector_close(c, h);
    /* A switchover: n2 leads; the list is read again only on the trigger
     * (the interval is an hour): the connect to n1 finds a standby and
     * goes on to n2, a primary where the list said replica. Either tells
     * the connector that the list is stale: it asks Patroni at once (in
     * the background). */
    roles("s", "p", "s");
    fake_patroni_set(f, cluster(after), FP_OK);
    int req0 = atomic_load(&f->requests);
    int64_t t0 = now_ms();
    assert_int_equal(tether_connector_connect(c, &h, &err), 0);
    int64_t took = now_ms() - t0;
    assert_string_equal(last_host, "n2:5432");
    tether_connector_close(c, h);
    print_message("switchover: the connect reached the new leader in %lld "
                  "ms\n",
                  (long long)took);
    assert_true(took < 2000);
    for (int i = 0; i < 200 && atomic_load(&f->requests) == req0; i++)
        sleep_ms(10);
    assert_true(atomic_load(&f->requests) > req0);
    assert_true(stats(c).kicks >= 1);
    /* The refresh that trigger asked for comes in the background. */
    wait_hosts(c, "n2:5432,n1:5432,n3:5432", 2000);
    /* The refresher logs the new leader after publishing the list, which
     * a connect's pause wakes on: the line may come a moment after. */
    for (int i = 0; i < 200 && count(log.text, "leader n2") == 0; i++)
        sleep_ms(10);
    assert_true(count(log.text, "leader n2") >= 1);
    tether_connector_destroy(c);
    fake_patroni_stop(f);
}

/* A failover: the leader refuses, and Patroni names the new one only later
 * (its TTL); the connect keeps passing over the list it gives until then,
 * within its login timeout, instead of ending at the first refusal. */
static void test_failover_waits_for_list(void **state) {
    (void)state;
    static const char *const before[] = {"n1:l:running:0", "n2:r:running:0",
                                         NULL};
    roles("down", "s", "s");
    fake_patroni *f;
    tether_connector *c =
        follow(&f, before,
               "tether_patroni_refresh=1h target_session_attrs=read-write "
               "tether_login_timeout=5s",
               NULL);
    pthread_t t;
    pthread_create(&t, NULL, promote_later, f);
    void *h = NULL;
    tether_error err = {0};
    int64_t t0 = now_ms();
    int rc = tether_connector_connect(c, &h, &err);
    int64_t took = now_ms() - t0;
    pthread_join(t, NULL);
    if (rc)
        fail_msg("connect: %s", err.message);
    assert_string_equal(last_host, "n2:5432");
    tether_connector_close(c, h);
    print_message("failover: connected to the new leader %lld ms after the "
                  "connect began (the list changed at 700 ms; %d REST "
                  "requests)\n",
                  (long long)took, atomic_load(&f->requests));
    assert_true(took >= 700 && took < 700 + 1500);
    assert_true(atomic_load(&f->requests) <= 2 + (int)(took / 500));
    tether_connector_destroy(c);
    fake_patroni_stop(f);
}

/* The read side: running replicas within the lag bound, not tagged
 * noloadbalance; a replica added is in the list within one refresh. */
static void test_replicas(void **state) {
    (void)state;
    static const char *const two[] = {"n1:l:running:0", "n2:r:streaming:0",
                                      "n3:r:running:0:1", "n4:r:stopped:0",
                                      NULL};
    static const char *const three[] = {
        "n1:l:running:0", "n2:r:streaming:0",   "n3:r:running:0:1",
        "n4:r:stopped:0", "n5:s:streaming:100", NULL};
    fake_patroni *f;
    tether_connector *c = follow(
        &f, two, "tether_patroni_refresh=300ms target_session_attrs=standby",
        NULL);
    char hosts[256];
    hosts_of(c, hosts, sizeof(hosts));
    assert_string_equal(hosts, "n2:5432");
    fake_patroni_set(f, cluster(three), FP_OK);
    int64_t took = wait_hosts(c, "n2:5432,n5:5432", 1000);
    print_message("replica added: in the list after %lld ms (refresh "
                  "300 ms, drawn from 270-330)\n",
                  (long long)took);
    assert_true(took <= 330 + 300); /* one refresh, and slack for load */
    /* A lag bound (the routing pool's read side): n5, 100 bytes behind,
     * goes; with none left, the leader stands in (the read goes to the
     * primary). */
    tether__connector_set_lag_bytes(c, 50);
    hosts_of(c, hosts, sizeof(hosts));
    assert_string_equal(hosts, "n2:5432");
    static const char *const lagging[] = {"n1:l:running:0", "n2:r:running:-1",
                                          "n5:r:streaming:100", NULL};
    fake_patroni_set(f, cluster(lagging), FP_OK);
    wait_hosts(c, "n1:5432", 1000);
    tether_connector_destroy(c);
    /* prefer-standby: the replicas, then the leader. */
    char ci[256], url[64];
    fake_patroni_url(f, url, sizeof(url));
    snprintf(ci, sizeof(ci),
             "host=fallback tether_patroni=%s tether_patroni_refresh=1h "
             "target_session_attrs=prefer-standby",
             url);
    fake_patroni_set(f, cluster(three), FP_OK);
    c = make(ci, NULL, NULL);
    hosts_of(c, hosts, sizeof(hosts));
    assert_string_equal(hosts, "n2:5432,n5:5432,n1:5432");
    tether_connector_destroy(c);
    fake_patroni_stop(f);
}

/* Every endpoint down: the last list stays, said once in the log; back
 * up, said once more. Two endpoints: the first down, the second answers. */
static void test_endpoints_down(void **state) {
    (void)state;
    static const char *const m[] = {"n1:l:running:0", "n2:r:running:0", NULL};
    fake_patroni *a = fake_patroni_start(cluster(m));
    fake_patroni *b = fake_patroni_start(cluster(m));
    char ci[320], ua[64], ub[64];
    fake_patroni_url(a, ua, sizeof(ua));
    fake_patroni_url(b, ub, sizeof(ub));
    snprintf(ci, sizeof(ci),
             "host=fallback tether_patroni='%s,%s' "
             "tether_patroni_refresh=100ms tether_patroni_timeout=200ms",
             ua, ub);
    logbuf log = {0};
    fake_patroni_down(a);
    tether_connector *c = make(ci, &log, NULL);
    char hosts[256];
    hosts_of(c, hosts, sizeof(hosts));
    assert_string_equal(hosts, "n1:5432,n2:5432");
    fake_patroni_down(b);
    sleep_ms(700); /* several refreshes, each failing on both */
    hosts_of(c, hosts, sizeof(hosts));
    assert_string_equal(hosts, "n1:5432,n2:5432");
    tether__disc_stats s = stats(c);
    assert_true(s.failures >= 4);
    assert_true(s.age_ms >= 500);
    assert_int_equal(count(log.text, "keeping the last known list"), 1);
    fake_patroni_up(b);
    int64_t t1 = now_ms();
    while (count(log.text, "the REST API answers again") == 0 &&
           now_ms() - t1 < 2000)
        sleep_ms(10);
    assert_int_equal(count(log.text, "the REST API answers again"), 1);
    assert_true(stats(c).age_ms < 1000);
    tether_connector_destroy(c);
    fake_patroni_stop(a);
    fake_patroni_stop(b);
}

/* None ever known: the connection string's hosts serve, said once. */
static void test_never_known(void **state) {
    (void)state;
    fake_patroni *a = fake_patroni_start("{}");
    char ci[256], ua[64];
    fake_patroni_url(a, ua, sizeof(ua));
    fake_patroni_down(a);
    snprintf(ci, sizeof(ci),
             "host=fallback1,fallback2 tether_patroni=%s "
             "tether_patroni_refresh=100ms tether_patroni_timeout=100ms",
             ua);
    logbuf log = {0};
    tether_connector *c = make(ci, &log, NULL);
    sleep_ms(350);
    char hosts[256];
    hosts_of(c, hosts, sizeof(hosts));
    assert_string_equal(hosts, "fallback1:0,fallback2:0");
    void *h = NULL;
    tether_error err = {0};
    assert_int_equal(tether_connector_connect(c, &h, &err), 0);
    tether_connector_close(c, h);
    assert_int_equal(count(log.text, "using the connection string's hosts"), 1);
    assert_int_equal(stats(c).age_ms, -1);
    tether_connector_destroy(c);
    fake_patroni_stop(a);
}

typedef struct burst {
    tether_connector *c;
    int64_t until;
} burst;

static void *kicker(void *arg) {
    burst *b = arg;
    while (now_ms() < b->until) {
        tether__connector_kick(b->c);
        tether_connector_invalidate(b->c);
    }
    return NULL;
}

/* A burst of triggers from 4 threads for 2 s: the requests stay within
 * one per TETHER__PATRONI_MIN_GAP_MS (plus the first), and connectors of
 * the same endpoints share one refresher. */
static void test_rate_limit(void **state) {
    (void)state;
    static const char *const m[] = {"n1:l:running:0", NULL};
    fake_patroni *f = fake_patroni_start(cluster(m));
    char ci[256], url[64];
    fake_patroni_url(f, url, sizeof(url));
    snprintf(ci, sizeof(ci),
             "host=fallback tether_patroni=%s tether_patroni_refresh=1h", url);
    tether_connector *c = make(ci, NULL, NULL);
    tether_connector *c2 = make(ci, NULL, NULL); /* shares c's */
    assert_ptr_equal(c->disc, c2->disc);
    { /* several endpoints: shared too (the key is the whole list) */
        char ci2[320];
        snprintf(ci2, sizeof(ci2),
                 "host=fallback tether_patroni='%s,http://127.0.0.1:1' "
                 "tether_patroni_refresh=1h",
                 url);
        tether_connector *d1 = make(ci2, NULL, NULL);
        tether_connector *d2 = make(ci2, NULL, NULL);
        assert_ptr_equal(d1->disc, d2->disc);
        assert_ptr_not_equal(d1->disc, c->disc);
        tether_connector_destroy(d2);
        tether_connector_destroy(d1);
    }
    int req0 = atomic_load(&f->requests);
    assert_int_equal(req0, 2); /* c's first, d1's first */
    int64_t t0 = now_ms();
    burst b = {c, t0 + 2000};
    burst b2 = {c2, t0 + 2000};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, kicker, i % 2 ? &b : &b2);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    sleep_ms(600); /* a kick held back lands now */
    int64_t span = now_ms() - t0;
    int made = atomic_load(&f->requests) - req0;
    int bound = (int)(span / TETHER__PATRONI_MIN_GAP_MS) + 1;
    print_message("burst of triggers over %lld ms: %d REST requests (bound "
                  "%d)\n",
                  (long long)span, made, bound);
    assert_true(made >= 2 && made <= bound);
    tether_connector_destroy(c2);
    tether_connector_destroy(c);
    fake_patroni_stop(f);
}

/* Each hostile answer: an error, the last good list stays in force, the
 * refresher goes on (a hang costs one deadline). */
static void test_hostile_answers(void **state) {
    (void)state;
    static const char *const good[] = {"n1:l:running:0", "n2:r:running:0",
                                       NULL};
    static const char *const other[] = {"n3:l:running:0", NULL};
    char many[10000 * 40 + 64];
    size_t len = (size_t)snprintf(many, sizeof(many), "{\"members\":[");
    for (int i = 0; i < 10000; i++)
        len += (size_t)snprintf(many + len, sizeof(many) - len,
                                "%s{\"name\":\"m%d\",\"host\":\"h\","
                                "\"port\":1}",
                                i ? "," : "", i);
    snprintf(many + len, sizeof(many) - len, "]}");
    char wrong[] = "{\"members\":[{\"name\":\"n3\",\"host\":5,\"port\":1}]}";
    static const struct {
        int mode;
        int body; /* 0 other's list, 1 10,000 members, 2 wrong types */
        const char *says;
    } cases[] = {
        {FP_HANG, 0, "no whole answer within"},
        {FP_TRICKLE, 0, "no whole answer within"},
        {FP_REDIRECT, 0, "redirects are not followed"},
        {FP_TRUNCATE, 0, "patroni"},
        {FP_HUGE, 0, "larger than 1048576"},
        {FP_OK, 1, "10000 members; at most 64"},
        {FP_OK, 2, "\"host\" is not a string"},
        {FP_STATUS500, 0, "answered 503"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fake_patroni *f;
        logbuf log = {0};
        tether_connector *c = follow(
            &f, good,
            "tether_patroni_refresh=100ms tether_patroni_timeout=300ms", &log);
        char hosts[256];
        wait_hosts(c, "n1:5432,n2:5432", 1000);
        fake_patroni_set(f,
                         cases[i].body == 1   ? many
                         : cases[i].body == 2 ? wrong
                                              : cluster(other),
                         cases[i].mode);
        /* two failed refreshes, 100 ms apart when quiet: an ASan build at
         * load 21 saw one in 3 s with the 10,000-member answer */
        uint64_t fails0 = stats(c).failures;
        int64_t t0 = now_ms();
        while (stats(c).failures < fails0 + 2 && now_ms() - t0 < 10000)
            sleep_ms(10);
        hosts_of(c, hosts, sizeof(hosts));
        if (strcmp(hosts, "n1:5432,n2:5432") ||
            stats(c).failures < fails0 + 2 ||
            count(log.text, cases[i].says) < 1)
            fail_msg("case %zu: hosts %s, %llu failures, log: %s", i, hosts,
                     (unsigned long long)(stats(c).failures - fails0),
                     log.text);
        tether_connector_destroy(c);
        fake_patroni_stop(f);
    }
}

/* A write refused as read-only (25006, TETHER_EREADONLY): the pool clears
 * and invalidates its connector, which asks Patroni again at once. */
static int readonly_work(void *h, void *arg, const tether_attempt *a,
                         tether_error *err) {
    (void)h, (void)arg, (void)a;
    return tether_error_set(err, TETHER_EREADONLY, TETHER_CLASS_TRANSIENT,
                            "cannot execute INSERT in a read-only "
                            "transaction");
}

static void test_readonly_kicks(void **state) {
    (void)state;
    static const char *const m[] = {"n1:l:running:0", "n2:r:running:0", NULL};
    roles("p", "s", "s");
    fake_patroni *f;
    tether_connector *c = follow(
        &f, m, "tether_patroni_refresh=1h target_session_attrs=read-write",
        NULL);
    tether_pool *p = pool_on(c, 0, NULL);
    sleep_ms(600); /* past the rate limit's gap since the first answer */
    int req0 = atomic_load(&f->requests);
    uint64_t kicks0 = stats(c).kicks;
    tether_error err = {0};
    assert_int_equal(tether_pool_run_for(p, 0, 1000, readonly_work, NULL, &err),
                     TETHER_EREADONLY);
    int64_t t0 = now_ms();
    while (atomic_load(&f->requests) == req0 && now_ms() - t0 < 1000)
        sleep_ms(5);
    print_message("25006: Patroni asked again %lld ms later\n",
                  (long long)(now_ms() - t0));
    assert_true(stats(c).kicks > kicks0);
    assert_true(atomic_load(&f->requests) > req0);
    assert_true(now_ms() - t0 < 500);
    tether_pool_destroy(p);
    tether_connector_destroy(c);
    fake_patroni_stop(f);
}

/* per_node counts p's n connections by node (all idle: leased, counted,
 * released). */
static void per_node(tether_pool *p, int n, int count[8]) {
    tether_lease *l[16];
    tether_error err = {0};
    memset(count, 0, 8 * sizeof(int));
    for (int i = 0; i < n; i++) {
        assert_int_equal(tether_pool_acquire(p, 1000, &l[i], &err), 0);
        count[((fconn *)tether_lease_handle(l[i]))->node]++;
    }
    for (int i = 0; i < n; i++)
        tether_lease_release(l[i]);
}

/* A caller that takes a lease every millisecond: the node of its last. */
typedef struct busy {
    tether_pool *p;
    atomic_int stop, last_node, on_new; /* leases on n4 */
} busy;

static void *busy_main(void *arg) {
    busy *b = arg;
    while (!atomic_load(&b->stop)) {
        tether_lease *l;
        tether_error err = {0};
        if (tether_pool_acquire(b->p, 1000, &l, &err) == 0) {
            int node = ((fconn *)tether_lease_handle(l))->node;
            atomic_store(&b->last_node, node);
            if (node == 4)
                atomic_fetch_add(&b->on_new, 1);
            tether_lease_release(l);
        }
        sleep_ms(1);
    }
    return NULL;
}

/* A replica added: a full pool over the replicas (random spread) moves the
 * new server's share of its connections there within a refresh and a few
 * housekeeping passes, and no more; a busy caller's connection is among
 * them (it then works on the new server); leases held are not taken. */
static void test_rebalance(void **state) {
    (void)state;
    static const char *const two[] = {"n1:l:running:0", "n2:r:running:0",
                                      "n3:r:running:0", NULL};
    static const char *const three[] = {"n1:l:running:0", "n2:r:running:0",
                                        "n3:r:running:0", "n4:r:running:0",
                                        NULL};
    roles("p", "s", "s");
    set_role(4, "s");
    fake_patroni *f;
    logbuf log = {0};
    tether_connector *c = follow(&f, two,
                                 "tether_patroni_refresh=200ms "
                                 "target_session_attrs=standby "
                                 "tether_strategy=random",
                                 &log);
    tether_pool *p = pool_on(c, 6, &log);
    tether_pool_metrics m;
    int64_t t0 = now_ms();
    do { /* filled to min_size in the background */
        sleep_ms(10);
        tether_pool_metrics_get(p, &m);
    } while (m.idle < 6 && now_ms() - t0 < 3000);
    int count[8];
    per_node(p, 6, count);
    assert_int_equal(count[2] + count[3], 6);
    tether_lease *held;
    tether_error err = {0};
    assert_int_equal(tether_pool_acquire(p, 1000, &held, &err), 0);
    busy b = {.p = p};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, busy_main, &b), 0);
    sleep_ms(150);
    fake_patroni_set(f, cluster(three), FP_OK);
    t0 = now_ms();
    do { /* 6 of 3 servers: round(6 / 3) = 2 move, one a pass */
        sleep_ms(10);
        tether_pool_metrics_get(p, &m);
    } while ((m.rebalanced < 2 || m.creating > 0 || m.total < 6) &&
             now_ms() - t0 < 3000);
    print_message("replica added: 2 connections moved after %lld ms "
                  "(refresh 200 ms)\n",
                  (long long)(now_ms() - t0));
    sleep_ms(50);
    atomic_store(&b.stop, 1);
    pthread_join(th, NULL);
    print_message("the busy caller: %d leases on the new server, the last "
                  "on n%d\n",
                  atomic_load(&b.on_new), atomic_load(&b.last_node));
    assert_int_equal(atomic_load(&b.last_node), 4);
    assert_int_equal(m.rebalanced, 2);
    assert_int_equal(m.total, 6);
    tether_lease_release(held);
    sleep_ms(300); /* no more moves */
    tether_pool_metrics_get(p, &m);
    assert_int_equal(m.rebalanced, 2);
    per_node(p, 6, count);
    assert_int_equal(count[4], 2);
    assert_int_equal(count[2] + count[3], 4);
    assert_int_equal(count[1], 0);
    pthread_mutex_lock(&log_lock);
    assert_non_null(strstr(log.text, "moving 2 of 6 connections"));
    pthread_mutex_unlock(&log_lock);
    tether_pool_destroy(p);
    tether_connector_destroy(c);
    fake_patroni_stop(f);
}

/* A pool over a connector with discovery exports its counters. */
static void test_pool_metrics(void **state) {
    (void)state;
    static const char *const m[] = {"n1:l:running:0", "n2:r:running:0", NULL};
    roles("p", "s", "s");
    fake_patroni *f;
    tether_connector *c = follow(
        &f, m, "tether_patroni_refresh=1h target_session_attrs=read-write",
        NULL);
    tether_pool *p = pool_on(c, 0, NULL);
    tether_pool_metrics pm;
    tether_pool_metrics_get(p, &pm);
    assert_int_equal(pm.patroni_requests, 1);
    assert_int_equal(pm.patroni_failures, 0);
    assert_int_equal(pm.patroni_members, 2);
    assert_true(pm.patroni_age_ms >= 0 && pm.patroni_age_ms < 1000);
    char buf[32768];
    tether_pool_metrics_prometheus(p, buf, sizeof(buf));
    assert_non_null(strstr(buf, "tether_pool_patroni_members{pool=\""));
    assert_non_null(strstr(buf, "tether_pool_patroni_requests_total{"));
    tether_pool_destroy(p);
    tether_connector_destroy(c);
    fake_patroni_stop(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keywords),
        cmocka_unit_test(test_leader_follows),
        cmocka_unit_test(test_failover_waits_for_list),
        cmocka_unit_test(test_replicas),
        cmocka_unit_test(test_endpoints_down),
        cmocka_unit_test(test_never_known),
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_hostile_answers),
        cmocka_unit_test(test_readonly_kicks),
        cmocka_unit_test(test_pool_metrics),
        cmocka_unit_test(test_rebalance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
