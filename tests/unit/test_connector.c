/* test_connector.c - the connector's logic on a virtual clock with a fake
 * driver whose behaviour depends on the host name: "p*" primaries, "s*"
 * standbys, "down*" refuse, "slow*" never answer, "auth*" reject the
 * password, "busy*" are out of connection slots. The real PostgreSQL
 * paths are tested in tests/integration. Also: connection-string parsing
 * and its errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connector.h"
#include "tether.h"
#include "tether_sim.h"

#define MS 1000000LL

/* ---- the fake driver ------------------------------------------------------
 */

typedef struct fconn {
    char host[32];
    int role;
    int slow;
} fconn;

static tether_vclock *vc;
static int opened, closed_count;

static int f_start(void *ctx, const tether__endpoint *ep, void **conn,
                   tether__wait *w, tether_error *err) {
    (void)ctx;
    const char *h = ep && ep->host ? ep->host : "p-default";
    if (!strncmp(h, "down", 4))
        return tether_error_set(err, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT,
                                "connection refused (%s)", h);
    if (!strncmp(h, "auth", 4))
        return tether_error_set(err, TETHER_EAUTH, TETHER_CLASS_PERMANENT,
                                "password authentication failed for user "
                                "\"app\"");
    if (!strncmp(h, "busy", 4))
        return tether_error_set(err, TETHER_ETHROTTLED, TETHER_CLASS_THROTTLED,
                                "sorry, too many clients already");
    fconn *c = calloc(1, sizeof(*c));
    snprintf(c->host, sizeof(c->host), "%s", h);
    c->role = h[0] == 's' && strncmp(h, "slow", 4) ? TETHER_ROLE_STANDBY
                                                   : TETHER_ROLE_PRIMARY;
    *conn = c;
    opened++;
    if (!strncmp(h, "slow", 4)) {
        *w = (tether__wait){-1, 0, -1}; /* never answers */
        return TETHER__IN_PROGRESS;
    }
    return TETHER__CONNECTED;
}

static int f_poll(void *conn, tether__wait *w, tether_error *err) {
    (void)conn;
    (void)err;
    *w = (tether__wait){-1, 0, -1};
    return TETHER__IN_PROGRESS;
}
static int f_alive(void *conn, int probe) {
    (void)probe;
    return conn != NULL;
}
static int f_validate(void *conn, int64_t t, tether_error *err) {
    (void)conn, (void)t, (void)err;
    return 0;
}
static int f_reset(void *conn, const char *q, tether_error *err) {
    (void)conn, (void)q, (void)err;
    return 0;
}
static void f_close(void *conn) {
    if (conn)
        closed_count++;
    free(conn);
}
static void f_classify(void *conn, tether_error *err) {
    (void)conn;
    if (err->cls == TETHER_CLASS_NONE)
        err->cls = TETHER_CLASS_TRANSIENT;
}
static void *f_handle(void *conn) {
    return conn;
}
static tether_role f_role(void *conn) {
    return ((fconn *)conn)->role;
}

static const tether_driver fake = {.name = "fake",
                                   .connect_start = f_start,
                                   .connect_poll = f_poll,
                                   .alive = f_alive,
                                   .validate = f_validate,
                                   .reset = f_reset,
                                   .close = f_close,
                                   .classify = f_classify,
                                   .handle = f_handle,
                                   .role = f_role,
                                   .resolve_names = 0};

/* ---- helpers ---------------------------------------------------------------
 */

typedef struct evlog {
    char lines[64][96];
    int n;
} evlog;

static void on_event(void *ctx, const tether_connect_event *ev) {
    evlog *l = ctx;
    if (l->n < 64)
        snprintf(l->lines[l->n++], 96, "%s %s:%d t=%lld b=%lld code=%d",
                 tether_phase_name(ev->phase), ev->host, ev->port,
                 (long long)ev->elapsed_ms, (long long)ev->budget_ms, ev->code);
}

static int has_event(const evlog *l, const char *prefix) {
    for (int i = 0; i < l->n; i++)
        if (!strncmp(l->lines[i], prefix, strlen(prefix)))
            return 1;
    return 0;
}

static tether_connector *make(const char *conninfo, evlog *log) {
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = conninfo;
    o.driver = &fake;
    o.clock = tether_vclock_clock(vc);
    o.seed = 7;
    o.on_event = log ? on_event : NULL;
    o.event_ctx = log;
    tether_connector *c = NULL;
    tether_error err = {0};
    if (tether_connector_create(&c, &o, &err))
        fail_msg("create: %s", err.message);
    return c;
}

static int64_t vnow(void) {
    return tether_now_ms(tether_vclock_clock(vc));
}

static const char *connect_host(tether_connector *c, tether_error *err) {
    void *h = NULL;
    int rc = tether_connector_connect(c, &h, err);
    if (rc)
        return NULL;
    static char host[32];
    snprintf(host, sizeof(host), "%s", ((fconn *)h)->host);
    tether_connector_close(c, h);
    return host;
}

static int setup(void **state) {
    (void)state;
    vc = tether_vclock_create(1000 * MS);
    opened = closed_count = 0;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tether_vclock_destroy(vc);
    assert_int_equal(opened, closed_count); /* nothing leaked */
    return 0;
}

/* ---- parsing ---------------------------------------------------------------
 */

static void expect_spec_error(const char *ci, const char *needle) {
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = ci;
    o.driver = &fake;
    tether_connector *c = NULL;
    tether_error err = {0};
    assert_int_equal(tether_connector_create(&c, &o, &err), TETHER_ESPEC);
    assert_null(c);
    if (!strstr(err.message, needle))
        fail_msg("message \"%s\" lacks \"%s\"", err.message, needle);
    assert_null(strstr(err.message, "s3cret"));
}

static void test_parse_errors(void **state) {
    (void)state;
    expect_spec_error("host=a tether_bogus=1 password=s3cret",
                      "unknown tether keyword \"tether_bogus\"");
    expect_spec_error("host=a,b,c port=1,2 password=s3cret",
                      "mismatched host and port counts (3 hosts");
    expect_spec_error("host=a tether_strategy=zigzag password=s3cret",
                      "tether_strategy");
    expect_spec_error("host=a target_session_attrs=writer", "writer");
    expect_spec_error("host=a tether_login_timeout=15 password=s3cret",
                      "tether_login_timeout");
    expect_spec_error("host=a port=99999", "port");
    expect_spec_error("password=s3cret frobnicate=1", "unknown keyword");
    /* The tail of an unquoted password with a space is never echoed. */
    expect_spec_error("host=a password=abc s3cret=x", "unknown keyword");
    expect_spec_error("host='a password=s3cret", "position");
}

/* A keyword the string leaves out takes its PG* variable, as in libpq;
 * the string wins over the environment; "" is every default. */
static void test_parse_environment(void **state) {
    (void)state;
    tether__conncfg cfg;
    setenv("PGHOST", "e1,e2", 1);
    setenv("PGPORT", "6001,6002", 1);
    setenv("PGTARGETSESSIONATTRS", "read-write", 1);
    setenv("PGCONNECT_TIMEOUT", "4", 1);
    assert_int_equal(tether__conncfg_parse("", &cfg, NULL), 0);
    assert_int_equal(cfg.neps, 2);
    assert_string_equal(cfg.eps[1].host, "e2");
    assert_int_equal(cfg.eps[1].port, 6002);
    assert_int_equal(cfg.target, TETHER_TARGET_READ_WRITE);
    assert_int_equal(cfg.attempt_timeout_ms, 4000);
    tether__conncfg_free(&cfg);
    assert_int_equal(tether__conncfg_parse("host=s port=7 "
                                           "target_session_attrs=standby",
                                           &cfg, NULL),
                     0);
    assert_int_equal(cfg.neps, 1);
    assert_string_equal(cfg.eps[0].host, "s");
    assert_int_equal(cfg.eps[0].port, 7);
    assert_int_equal(cfg.target, TETHER_TARGET_STANDBY);
    tether__conncfg_free(&cfg);
    unsetenv("PGHOST");
    unsetenv("PGPORT");
    unsetenv("PGTARGETSESSIONATTRS");
    unsetenv("PGCONNECT_TIMEOUT");
    assert_int_equal(tether__conncfg_parse("", &cfg, NULL), 0);
    assert_int_equal(cfg.neps, 1);
    assert_null(cfg.eps[0].host); /* libpq's default: the socket */
    assert_int_equal(cfg.target, TETHER_TARGET_ANY);
    tether__conncfg_free(&cfg);
}

static void test_parse_keywords(void **state) {
    (void)state;
    tether__conncfg cfg;
    tether_error err = {0};
    assert_int_equal(
        tether__conncfg_parse(
            "postgresql://app:s3cret@h1:5433,h2/db?target_session_attrs="
            "read-write&tether_strategy=mirroring&tether_login_timeout=20s"
            "&connect_timeout=3&tether_pool_max=16&sslmode=disable"
            "&tether_probe_idle=0&tether_barge_limit_us=2500",
            &cfg, &err),
        0);
    assert_int_equal(cfg.neps, 2);
    assert_string_equal(cfg.eps[0].host, "h1");
    assert_int_equal(cfg.eps[0].port, 5433);
    assert_string_equal(cfg.eps[1].host, "h2");
    assert_int_equal(cfg.strategy, TETHER_STRATEGY_MIRRORING);
    assert_int_equal(cfg.target, TETHER_TARGET_READ_WRITE);
    assert_int_equal(cfg.login_timeout_ms, 20000);
    assert_int_equal(cfg.attempt_timeout_ms, 3000);
    /* libpq gets the rest, none of tether's keywords (the pool's are
     * accepted and left to tether_pool_open). */
    int saw_password = 0;
    for (int i = 0; i < cfg.nparams; i++) {
        assert_true(strncmp(cfg.keys[i], "tether_", 7) != 0);
        assert_true(strcmp(cfg.keys[i], "host") != 0);
        assert_true(strcmp(cfg.keys[i], "target_session_attrs") != 0);
        saw_password |= !strcmp(cfg.keys[i], "password");
    }
    assert_true(saw_password);
    assert_null(strstr(cfg.display, "s3cret"));
    tether__conncfg_free(&cfg);
    /* One port for every host; infinite login timeout. */
    assert_int_equal(tether__conncfg_parse("host=a,b,c port=6000 "
                                           "tether_login_timeout=inf",
                                           &cfg, &err),
                     0);
    assert_int_equal(cfg.eps[2].port, 6000);
    assert_int_equal(cfg.login_timeout_ms, -1);
    tether__conncfg_free(&cfg);
}

/* ---- strategies ------------------------------------------------------------
 */

static void test_sequential_skips_refused(void **state) {
    (void)state;
    evlog log = {0};
    tether_connector *c = make("host=down1,p1 port=5432", &log);
    tether_error err = {0};
    assert_string_equal(connect_host(c, &err), "p1");
    assert_true(has_event(&log, "fail down1:5432"));
    assert_true(has_event(&log, "ok p1:5432"));
    /* Next time the cache skips the known-down host. */
    log.n = 0;
    assert_string_equal(connect_host(c, &err), "p1");
    assert_true(has_event(&log, "skip down1:5432"));
    tether_connector_destroy(c);
}

static void test_mirroring_budget_and_partner(void **state) {
    (void)state;
    evlog log = {0};
    tether_connector *c = make("host=slow1,p2 tether_strategy=mirroring "
                               "tether_login_timeout=15s",
                               &log);
    tether_error err = {0};
    int64_t t0 = vnow();
    assert_string_equal(connect_host(c, &err), "p2");
    /* The principal got exactly 8 % of 15 s, then the partner answered. */
    assert_int_equal(vnow() - t0, 1200);
    assert_true(has_event(&log, "fail slow1:0 t=1200 b=1200"));
    assert_true(has_event(&log, "ok p2:0 t=1200"));
    tether_connector_destroy(c);
}

static void test_login_timeout_exact(void **state) {
    (void)state;
    tether_connector *c = make("host=slow1,slow2 tether_login_timeout=3s "
                               "tether_pause='fixed base=100ms jitter=none'",
                               NULL);
    tether_error err = {0};
    int64_t t0 = vnow();
    void *h = NULL;
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_ETIMEDOUT);
    assert_int_equal(vnow() - t0, 3000); /* never past the login timeout */
    assert_int_equal(err.elapsed_ms, 3000);
    tether_connector_destroy(c);
}

static void test_roles(void **state) {
    (void)state;
    tether_error err = {0};
    tether_connector *c =
        make("host=s1,p1 target_session_attrs=read-write", NULL);
    assert_string_equal(connect_host(c, &err), "p1");
    tether_connector_destroy(c);
    c = make("host=p1,s1 target_session_attrs=standby", NULL);
    assert_string_equal(connect_host(c, &err), "s1");
    tether_connector_destroy(c);
    c = make("host=p1,p2 target_session_attrs=prefer-standby", NULL);
    assert_string_equal(connect_host(c, &err), "p1"); /* the fallback */
    tether_connector_destroy(c);
    c = make("host=p1,s1,s2 target_session_attrs=prefer-standby", NULL);
    assert_string_equal(connect_host(c, &err), "s1");
    tether_connector_destroy(c);
    c = make("host=p1,p2 target_session_attrs=standby "
             "tether_login_timeout=2s",
             NULL);
    void *h = NULL;
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_ENOHOST);
    assert_non_null(strstr(err.message, "not standby"));
    tether_connector_destroy(c);
}

static void test_permanent_error_stops_after_one_pass(void **state) {
    (void)state;
    evlog log = {0};
    tether_connector *c = make("host=auth1", &log);
    tether_error err = {0};
    void *h = NULL;
    int64_t t0 = vnow();
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_EAUTH);
    assert_int_equal(err.cls, TETHER_CLASS_PERMANENT);
    assert_int_equal(err.attempts, 1);
    assert_int_equal(vnow() - t0, 0); /* at once, no retry */
    tether_connector_destroy(c);
}

static void test_throttled_backs_off(void **state) {
    (void)state;
    tether_connector *c = make("host=busy1 tether_login_timeout=2s "
                               "tether_pause='fixed base=500ms jitter=none'",
                               NULL);
    tether_error err = {0};
    void *h = NULL;
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_ETHROTTLED);
    /* t = 0, 500, 1000, 1500: four tries, pauses between them. */
    assert_int_equal(err.attempts, 4);
    tether_connector_destroy(c);
}

static void test_round_robin_and_random(void **state) {
    (void)state;
    tether_error err = {0};
    tether_connector *c =
        make("host=p1,p2,p3 tether_strategy=round-robin", NULL);
    assert_string_equal(connect_host(c, &err), "p1");
    assert_string_equal(connect_host(c, &err), "p2");
    assert_string_equal(connect_host(c, &err), "p3");
    assert_string_equal(connect_host(c, &err), "p1");
    tether_connector_destroy(c);
    c = make("host=p1,p2,p3,p4 tether_strategy=random", NULL);
    int seen[5] = {0};
    for (int i = 0; i < 40; i++)
        seen[connect_host(c, &err)[1] - '0']++;
    for (int i = 1; i <= 4; i++)
        assert_true(seen[i] > 0);
    tether_connector_destroy(c);
}

static void test_race_staggered(void **state) {
    (void)state;
    evlog log = {0};
    tether_connector *c = make("host=slow1,p2,p3 tether_strategy=race "
                               "tether_race_delay=250ms",
                               &log);
    tether_error err = {0};
    int64_t t0 = vnow();
    assert_string_equal(connect_host(c, &err), "p2");
    assert_int_equal(vnow() - t0, 250);     /* the second starts 250 ms later */
    assert_true(!has_event(&log, "ok p3")); /* never started */
    tether_connector_destroy(c);
}

static int provisions;
static int provide(void *ctx, char *buf, size_t cap) {
    (void)ctx;
    provisions++;
    snprintf(buf, cap, "%s", provisions == 1 ? "down9:1,p7:5433" : "p8");
    return 0;
}

static void test_provisioning(void **state) {
    (void)state;
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = "host=down1 tether_strategy=streaming "
                 "tether_login_timeout=5m";
    o.driver = &fake;
    o.clock = tether_vclock_clock(vc);
    o.provision = provide;
    o.seed = 3;
    tether_connector *c = NULL;
    tether_error err = {0};
    provisions = 0;
    assert_int_equal(tether_connector_create(&c, &o, &err), 0);
    void *h = NULL;
    assert_int_equal(tether_connector_connect(c, &h, &err), 0);
    assert_string_equal(((fconn *)h)->host, "p7");
    assert_int_equal(provisions, 1);
    tether_connector_close(c, h);
    tether_connector_destroy(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_parse_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_keywords, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_environment, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sequential_skips_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_mirroring_budget_and_partner,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_login_timeout_exact, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_roles, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_permanent_error_stops_after_one_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_throttled_backs_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_round_robin_and_random, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_race_staggered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_provisioning, setup, teardown),
    };
    return cmocka_run_group_tests_name("connector", tests, NULL, NULL);
}
