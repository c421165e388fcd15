/* test_tcp.c - the TCP driver (src/drivers/tcp.c) against real sockets on
 * loopback: connects to listening ports and refusals from closed ones,
 * several ports per host in turn, the provisioning callback refreshing the
 * list between passes (sequential, streaming), the peek that finds a
 * connection the server closed, the caller's setup/validate/reset/teardown
 * hooks (run by a pool), socket options, a Unix-domain socket, and the
 * errors of a bad endpoint or a driver keyword. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../support/needs_pq.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../support/net.h"
#include "tether.h"
#include "tether_driver.h"

/* ---- loopback servers -------------------------------------------------- */

/* Accept one connection within 2 s (-1 when none came). */
static int accept_one(int lfd) {
    struct pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, 2000) != 1)
        return -1;
    return accept(lfd, NULL, NULL);
}

/* ---- events ------------------------------------------------------------ */

typedef struct evlog {
    char lines[32][96];
    int n;
} evlog;

static void on_event(void *ctx, const tether_connect_event *ev) {
    evlog *l = ctx;
    if (l->n < 32)
        snprintf(l->lines[l->n++], 96, "%s %s:%d %s",
                 tether_phase_name(ev->phase), ev->host, ev->port,
                 ev->code ? tether_errname(ev->code) : "");
}

static tether_connector *make(const char *ci, tether_tcp *t, evlog *log,
                              tether_error *err) {
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = ci;
    o.driver = tether_driver_tcp();
    o.driver_ctx = t;
    o.on_event = log ? on_event : NULL;
    o.event_ctx = log;
    tether_connector *c = NULL;
    int rc = tether_connector_create(&c, &o, err);
    return rc ? NULL : c;
}

/* ---- tests ------------------------------------------------------------- */

/* Each host and each of its ports in turn: refused ports fail
 * (transient), the first listening one connects. */
static void test_ports_in_turn(void **state) {
    (void)state;
    int live, lfd = loopback_listener(&live);
    int d1 = closed_port(), d2 = closed_port();
    char ci[256];
    snprintf(ci, sizeof(ci),
             "host=127.0.0.1,localhost port=%d|%d,%d tether_login_timeout=5s",
             d1, d2, live);
    evlog log = {0};
    tether_error err = {0};
    tether_connector *c = make(ci, NULL, &log, &err);
    if (!c)
        fail_msg("create: %s", err.message);
    void *h = NULL;
    assert_int_equal(tether_connector_connect(c, &h, &err), 0);
    assert_int_equal(err.attempts, 3);
    char want[3][64];
    snprintf(want[0], 64, "fail 127.0.0.1:%d TETHER_ECONNECT", d1);
    snprintf(want[1], 64, "fail 127.0.0.1:%d TETHER_ECONNECT", d2);
    snprintf(want[2], 64, "ok localhost:%d", live);
    assert_int_equal(log.n, 3);
    for (int i = 0; i < 3; i++)
        if (strncmp(log.lines[i], want[i], strlen(want[i])))
            fail_msg("event %d \"%s\", want \"%s\"", i, log.lines[i], want[i]);
    tether_tcp_conn *tc = h;
    char peer[64];
    assert_int_equal(tether_tcp_peer(tc, peer, sizeof(peer)), live);
    char wantpeer[64];
    snprintf(wantpeer, sizeof(wantpeer), "localhost:%d", live);
    assert_string_equal(peer, wantpeer);
    int sfd = accept_one(lfd);
    assert_true(sfd >= 0);
    /* the socket is real and blocking: a byte goes through */
    assert_int_equal(write(tether_tcp_fd(tc), "x", 1), 1);
    char b;
    assert_int_equal(read(sfd, &b, 1), 1);
    tether_connector_close(c, h);
    close(sfd);
    close(lfd);
    tether_connector_destroy(c);
}

/* Every port refused: a transient TETHER_ECONNECT that names them. */
static void test_refused(void **state) {
    (void)state;
    int d1 = closed_port();
    char ci[256];
    snprintf(ci, sizeof(ci),
             "host=127.0.0.1 port=%d tether_login_timeout=300ms "
             "tether_pause='fixed base=100ms jitter=none'",
             d1);
    tether_error err = {0};
    tether_connector *c = make(ci, NULL, NULL, &err);
    assert_non_null(c);
    void *h = NULL;
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_ECONNECT);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    char port[16];
    snprintf(port, sizeof(port), ":%d", d1);
    if (!strstr(err.message, port) || !strstr(err.message, "refused"))
        fail_msg("message \"%s\"", err.message);
    assert_true(err.attempts >= 2); /* passes go on until the timeout */
    tether_connector_destroy(c);
}

/* A provisioning service: its answer, and how often it was asked. */
typedef struct provider {
    char answer[128];
    int calls;
} provider;

static int provide(void *ctx, char *buf, size_t cap) {
    provider *pv = ctx;
    pv->calls++;
    snprintf(buf, cap, "%s", pv->answer);
    return 0;
}

/* When a pass over the list is exhausted, the provisioning callback
 * refreshes it: sequential asks between passes, streaming first and
 * between passes. The new list's server has a closed and a listening
 * port, tried in turn. */
static void test_provisioning(void **state) {
    (void)state;
    int live, lfd = loopback_listener(&live);
    int d1 = closed_port(), d2 = closed_port();
    const char *strategies[] = {"sequential", "streaming"};
    for (int k = 0; k < 2; k++) {
        provider pv = {"", 0};
        snprintf(pv.answer, sizeof(pv.answer), "localhost:%d|%d", d2, live);
        char ci[256];
        snprintf(ci, sizeof(ci),
                 "host=127.0.0.1 port=%d tether_strategy=%s "
                 "tether_pause='fixed base=50ms jitter=none' "
                 "tether_login_timeout=20s",
                 d1, strategies[k]);
        evlog log = {0};
        tether_connector_opts o;
        tether_connector_opts_init(&o);
        o.conninfo = ci;
        o.driver = tether_driver_tcp();
        o.on_event = on_event;
        o.event_ctx = &log;
        o.provision = provide;
        o.provision_ctx = &pv;
        tether_connector *c = NULL;
        tether_error err = {0};
        assert_int_equal(tether_connector_create(&c, &o, &err), 0);
        void *h = NULL;
        if (tether_connector_connect(c, &h, &err))
            fail_msg("%s: %s", strategies[k], err.message);
        assert_int_equal(pv.calls, 1);
        char want[4][64];
        int n = 0;
        if (k == 0) /* sequential: the string's list first */
            snprintf(want[n++], 64, "fail 127.0.0.1:%d", d1);
        snprintf(want[n++], 64, "provision (default):0");
        snprintf(want[n++], 64, "fail localhost:%d", d2);
        snprintf(want[n++], 64, "ok localhost:%d", live);
        int j = 0; /* the wanted events in order, pauses between them */
        for (int i = 0; i < log.n && j < n; i++)
            if (!strncmp(log.lines[i], want[j], strlen(want[j])))
                j++;
            else if (strncmp(log.lines[i], "pause", 5))
                fail_msg("%s: event %d \"%s\", want \"%s\"", strategies[k], i,
                         log.lines[i], want[j]);
        assert_int_equal(j, n);
        tether_connector_close(c, h);
        tether_connector_destroy(c);
    }
    close(lfd);
}

/* What the hooks saw. */
typedef struct hooks {
    int setups, validates, resets, teardowns, fail_reset;
    int64_t setup_timeout;
} hooks;

static int h_setup(void *ctx, tether_tcp_conn *c, int64_t t,
                   tether_error *err) {
    hooks *h = ctx;
    h->setups++;
    h->setup_timeout = t;
    tether_tcp_set_user(c, h);
    return 0;
}
static int h_validate(void *ctx, tether_tcp_conn *c, int64_t t,
                      tether_error *err) {
    hooks *h = ctx;
    assert_ptr_equal(tether_tcp_user(c), h);
    h->validates++;
    return 0;
}
static int h_reset(void *ctx, tether_tcp_conn *c, tether_error *err) {
    hooks *h = ctx;
    h->resets++;
    if (h->fail_reset)
        return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                "reset failed");
    return 0;
}
static int h_teardown(void *ctx, tether_tcp_conn *c) {
    hooks *h = ctx;
    h->teardowns++;
    return 0;
}

static tether_tcp *make_tcp(hooks *h) {
    tether_tcp_opts o;
    tether_tcp_opts_init(&o);
    assert_int_equal(o.nodelay, 1);
    assert_int_equal(o.keepalive, 1);
    assert_int_equal(o.nonblocking, 0);
    o.setup = h_setup;
    o.validate = h_validate;
    o.reset = h_reset;
    o.teardown = h_teardown;
    o.ctx = h;
    tether_tcp *t = NULL;
    assert_int_equal(tether_tcp_create(&t, &o, NULL), 0);
    return t;
}

static tether_pool *make_pool(tether_connector *c) {
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    po.connector = c;
    po.max_size = 1;
    po.probe_idle_ms = 0;    /* peek on every checkout */
    po.validate_idle_ms = 0; /* and validate every time */
    po.use_breaker = 0;
    tether_pool *p = NULL;
    assert_int_equal(tether_pool_create(&p, &po, NULL), 0);
    return p;
}

/* The pool runs the hooks; the peek finds a connection the server closed
 * and the pool makes a new one; a failed reset discards. */
static void test_pool_hooks_and_peek(void **state) {
    (void)state;
    int live, lfd = loopback_listener(&live);
    char ci[128];
    snprintf(ci, sizeof(ci),
             "host=127.0.0.1 port=%d tether_attempt_timeout=700ms", live);
    hooks h = {0};
    tether_tcp *t = make_tcp(&h);
    tether_error err = {0};
    tether_connector *c = make(ci, t, NULL, &err);
    assert_non_null(c);
    tether_pool *p = make_pool(c);
    tether_lease *l = NULL;
    assert_int_equal(tether_pool_acquire(p, 2000, &l, &err), 0);
    assert_int_equal(h.setups, 1);
    assert_true(h.setup_timeout > 0 && h.setup_timeout <= 700);
    int s1 = accept_one(lfd);
    assert_true(s1 >= 0);
    tether_lease_release(l);
    assert_int_equal(h.resets, 1);
    /* reused: peeked, validated (idle longer than 0 ms by the pool's
     * 10 ms ticks), the same connection */
    usleep(30000);
    assert_int_equal(tether_pool_acquire(p, 2000, &l, &err), 0);
    assert_int_equal(h.setups, 1);
    assert_true(h.validates >= 1);
    tether_lease_release(l);
    /* the server hangs up while the connection is idle */
    close(s1);
    usleep(20000);
    assert_int_equal(tether_pool_acquire(p, 2000, &l, &err), 0);
    assert_int_equal(h.setups, 2); /* a new connection */
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    assert_int_equal(m.created, 2);
    assert_int_equal(m.closed_broken, 1); /* by the peek, before validate */
    assert_int_equal(m.closed_validation, 0);
    int s2 = accept_one(lfd);
    assert_true(s2 >= 0);
    h.fail_reset = 1;
    tether_lease_release(l); /* reset fails: discarded */
    tether_pool_metrics_get(p, &m);
    assert_int_equal(m.closed_reset, 1);
    assert_int_equal(m.total, 0);
    tether_pool_destroy(p);
    assert_int_equal(h.teardowns, 2); /* every connection, once */
    tether_connector_destroy(c);
    tether_tcp_destroy(t);
    close(s2);
    close(lfd);
}

/* A host starting with / is a Unix-domain socket path. */
static void test_unix_socket(void **state) {
    (void)state;
    char path[64];
    snprintf(path, sizeof(path), "/tmp/tether-tcp-%d.sock", (int)getpid());
    unlink(path);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 4), 0);
    char ci[128];
    snprintf(ci, sizeof(ci), "host=%s", path);
    tether_error err = {0};
    tether_connector *c = make(ci, NULL, NULL, &err);
    assert_non_null(c);
    void *h = NULL;
    if (tether_connector_connect(c, &h, &err))
        fail_msg("connect: %s", err.message);
    char peer[64];
    assert_int_equal(tether_tcp_peer(h, peer, sizeof(peer)), 0);
    assert_string_equal(peer, path);
    tether_connector_close(c, h);
    tether_connector_destroy(c);
    close(lfd);
    unlink(path);
}

/* Bad endpoints and driver keywords: clear, permanent errors. */
static void test_errors(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
    tether_error err = {0};
    /* no driver_ctx: driver keywords are refused by name */
    assert_null(make("host=127.0.0.1 port=1 dbname=app", NULL, NULL, &err));
    assert_int_equal(err.code, TETHER_ESPEC);
    if (!strstr(err.message, "\"dbname\""))
        fail_msg("message \"%s\"", err.message);
    /* a host without a port; libpq's PGPORT is not the TCP driver's */
    setenv("PGPORT", "5432", 1);
    tether_connector *c =
        make("host=127.0.0.1 tether_login_timeout=1s", NULL, NULL, &err);
    unsetenv("PGPORT");
    assert_non_null(c);
    void *h = NULL;
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_EINVAL);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    if (!strstr(err.message, "has no port"))
        fail_msg("message \"%s\"", err.message);
    tether_connector_destroy(c);
    /* a setup hook's failure is the connect's */
    int live, lfd = loopback_listener(&live);
    char ci[128];
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d", live);
    tether_tcp_opts o;
    tether_tcp_opts_init(&o);
    o.setup = NULL;
    tether_tcp *t = NULL;
    assert_int_equal(tether_tcp_create(&t, &o, NULL), 0);
    c = make(ci, t, NULL, &err);
    assert_int_equal(tether_connector_connect(c, &h, &err), 0);
    tether_connector_close(c, h);
    tether_connector_destroy(c);
    tether_tcp_destroy(t);
    close(lfd);
}

static int refuse_setup(void *ctx, tether_tcp_conn *c, int64_t t,
                        tether_error *err) {
    return tether_error_set(err, TETHER_EAUTH, TETHER_CLASS_PERMANENT,
                            "the greeting was wrong");
}

static void test_setup_fails(void **state) {
    (void)state;
    int live, lfd = loopback_listener(&live);
    char ci[128];
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d", live);
    tether_tcp_opts o;
    tether_tcp_opts_init(&o);
    o.setup = refuse_setup;
    tether_tcp *t = NULL;
    assert_int_equal(tether_tcp_create(&t, &o, NULL), 0);
    tether_error err = {0};
    tether_connector *c = make(ci, t, NULL, &err);
    void *h = NULL;
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_EAUTH);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    assert_int_equal(err.attempts, 1); /* permanent: one pass */
    if (!strstr(err.message, "the greeting was wrong"))
        fail_msg("message \"%s\"", err.message);
    tether_connector_destroy(c);
    tether_tcp_destroy(t);
    close(lfd);
}

/* Defaults: TCP_NODELAY, SO_KEEPALIVE, a blocking socket; nonblocking
 * leaves O_NONBLOCK. A pool without a connector has no endpoint. */
static void test_socket_options(void **state) {
    (void)state;
    int live, lfd = loopback_listener(&live);
    char ci[128];
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d", live);
    for (int nb = 0; nb <= 1; nb++) {
        tether_tcp_opts o;
        tether_tcp_opts_init(&o);
        o.nonblocking = nb;
        tether_tcp *t = NULL;
        assert_int_equal(tether_tcp_create(&t, &o, NULL), 0);
        tether_error err = {0};
        tether_connector *c = make(ci, t, NULL, &err);
        void *h = NULL;
        assert_int_equal(tether_connector_connect(c, &h, &err), 0);
        int fd = tether_tcp_fd(h), v = 0;
        socklen_t len = sizeof(v);
        assert_int_equal((fcntl(fd, F_GETFL) & O_NONBLOCK) != 0, nb);
        assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len), 0);
        assert_true(v != 0);
        assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &len), 0);
        assert_true(v != 0);
        tether_connector_close(c, h);
        tether_connector_destroy(c);
        tether_tcp_destroy(t);
    }
    close(lfd);
    /* the TCP driver needs an endpoint: a pool without a connector */
    tether_tcp *t = NULL;
    assert_int_equal(tether_tcp_create(&t, NULL, NULL), 0);
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    po.driver = tether_driver_tcp();
    po.driver_ctx = t;
    po.use_breaker = 0;
    tether_pool *p = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_create(&p, &po, &err), 0);
    tether_lease *l = NULL;
    assert_int_equal(tether_pool_acquire(p, 500, &l, &err), TETHER_EINVAL);
    if (!strstr(err.message, "no endpoint"))
        fail_msg("message \"%s\"", err.message);
    tether_pool_destroy(p);
    tether_tcp_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ports_in_turn),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_provisioning),
        cmocka_unit_test(test_pool_hooks_and_peek),
        cmocka_unit_test(test_unix_socket),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_setup_fails),
        cmocka_unit_test(test_socket_options),
    };
    return cmocka_run_group_tests_name("tcp", tests, NULL, NULL);
}
