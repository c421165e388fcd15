/* test_connector.c - the connector's logic on a virtual clock with a fake
 * driver whose behaviour depends on the host name: "p*" primaries, "s*"
 * standbys, "down*" refuse, "slow*" never answer, "auth*" reject the
 * password, "busy*" are out of connection slots. The real PostgreSQL
 * paths are tested in tests/integration. Also: connection-string parsing
 * and its errors, and what a failed connect says (every host and why it
 * was passed over), here and over the sim driver of tether_sim.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../support/clock.h"
#include "../support/fake_driver.h"

#include "../support/needs_pq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connector.h"
#include "tether.h"
#include "tether_sim.h"

/* ---- the fake driver ------------------------------------------------------
 */

typedef struct fconn {
    char host[32];
    int role;
    int slow;
} fconn;

static tether_vclock *vc;
static int opened, closed_count;
static int64_t back_at = -1; /* hosts "back*" refuse until then, then serve */
static int64_t vnow(void);

static int f_start(void *ctx, const tether_endpoint *ep, void **conn,
                   tether_wait *w, tether_error *err) {
    (void)ctx;
    const char *h = ep && ep->host ? ep->host : "p-default";
    if (!strncmp(h, "down", 4) ||
        (!strncmp(h, "back", 4) && (back_at < 0 || vnow() < back_at)))
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
        *w = (tether_wait){-1, 0, -1}; /* never answers */
        return TETHER_IN_PROGRESS;
    }
    return TETHER_CONNECTED;
}

static void f_close(void *conn) {
    if (conn)
        closed_count++;
    free(conn);
}
static tether_role f_role(void *conn) {
    return ((fconn *)conn)->role;
}

static const tether_driver fake = {.name = "fake",
                                   .connect_start = f_start,
                                   .close = f_close,
                                   .role = f_role,
                                   .resolve_names = 0,
                                   FAKE_DRIVER_OPS};

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

static tether_connector *make_with(const tether_driver *d, const char *conninfo,
                                   evlog *log) {
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = conninfo;
    o.driver = d;
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

static tether_connector *make(const char *conninfo, evlog *log) {
    return make_with(&fake, conninfo, log);
}

static int64_t vnow(void) {
    return tether_now_ms(tether_vclock_clock(vc));
}

/* The fake with query_role, for the role watch: host sA answers primary
 * from virtual time promote_at on; host sB's questions fail while
 * ask_fails > 0 (one each). */
static int64_t promote_at = -1;
static int asks, ask_fails;
static tether_connector *invalidate_on_ask; /* once, at the next question */
static int f_query_role(void *conn, int64_t timeout_ms, tether_error *err) {
    fconn *c = conn;
    (void)timeout_ms;
    asks++;
    if (invalidate_on_ask) { /* a pool's fatal event meanwhile */
        tether_connector_invalidate(invalidate_on_ask);
        invalidate_on_ask = NULL;
    }
    if (!strcmp(c->host, "sB") && ask_fails > 0) {
        ask_fails--;
        return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                "server closed the connection");
    }
    if (!strcmp(c->host, "sA") && promote_at >= 0 && vnow() >= promote_at)
        c->role = TETHER_ROLE_PRIMARY;
    return c->role;
}

static const tether_driver watcher = {.name = "fake",
                                      .connect_start = f_start,
                                      .close = f_close,
                                      .role = f_role,
                                      .query_role = f_query_role,
                                      FAKE_DRIVER_OPS};

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
    NEEDS_PQ_KEYWORDS();
    expect_spec_error("host=a tether_bogus=1 password=s3cret",
                      "unknown tether keyword \"tether_bogus\"");
    /* a typo of a keyword in the tables: named */
    expect_spec_error("host=a tether_pool_mx=4 password=s3cret",
                      "unknown tether keyword \"tether_pool_mx\" (did you "
                      "mean tether_pool_max? see docs/conninfo.md)");
    expect_spec_error("host=a tether_strategi=race password=s3cret",
                      "(did you mean tether_strategy?");
    /* none for a keyword that is not tether's: it may be a password's tail */
    expect_spec_error("host=a password=s3cret hots=x",
                      "a keyword is neither libpq's nor tether's (unknown "
                      "keyword; its name is not shown in case it is part of a "
                      "password)");
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
    /* Hosts past the 64th were never tried, in silence: now refused. */
    char ci[1024] = "password=s3cret host=h0";
    for (int i = 1; i < 65; i++)
        snprintf(ci + strlen(ci), sizeof(ci) - strlen(ci), ",h%d", i);
    expect_spec_error(ci, "65 hosts; at most 64");
    *strrchr(ci, ',') = '\0'; /* 64: taken */
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = ci;
    o.driver = &fake;
    tether_connector *c = NULL;
    tether_error err = {0};
    assert_int_equal(tether_connector_create(&c, &o, &err), 0);
    tether_connector_destroy(c);
}

/* A keyword the string leaves out takes its PG* variable, as in libpq;
 * the string wins over the environment; "" is every default. */
static void test_parse_environment(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
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

/* The connector's configuration from a keyword set parsed already: the
 * same as from the string, the set untouched (a routing side edits a copy
 * of it, never the string again); PGPASSWORD-like environment values never
 * reach the display form. */
static void test_config_from_set(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
    static const char s[] = "host=h1,h2 port=5433 user=u password=s3cret "
                            "tether_strategy=race sslmode=disable "
                            "tether_pool_max=4";
    tether__conninfo ci, side;
    tether_error err = {0};
    tether__conncfg a, b;
    assert_int_equal(tether__conninfo_parse(s, &ci, &err), 0);
    assert_int_equal(tether__conncfg_parse(s, &a, &err), 0);
    assert_int_equal(tether__conncfg_from(&ci, 1, &b, &err), 0);
    assert_int_equal(a.neps, b.neps);
    assert_int_equal(a.strategy, b.strategy);
    assert_int_equal(a.nparams, b.nparams);
    for (int i = 0; i < a.nparams; i++) {
        assert_string_equal(a.keys[i], b.keys[i]);
        assert_string_equal(a.vals[i], b.vals[i]);
    }
    assert_string_equal(a.display, b.display);
    tether__conncfg_free(&a);
    tether__conncfg_free(&b);
    assert_int_equal(tether__conninfo_copy(&side, &ci, &err), 0);
    assert_int_equal(
        tether__conninfo_set(&side, "target_session_attrs", "standby", &err),
        0);
    setenv("PGPASSWORD", "envsecret", 1);
    assert_int_equal(tether__conncfg_from(&side, 1, &b, &err), 0);
    unsetenv("PGPASSWORD");
    assert_int_equal(b.target, TETHER_TARGET_STANDBY);
    assert_int_equal(b.strategy, TETHER_STRATEGY_RACE);
    assert_null(strstr(b.display, "s3cret"));
    assert_null(strstr(b.display, "envsecret"));
    tether__conncfg_free(&b);
    assert_null(tether__conninfo_get(&ci, "target_session_attrs"));
    /* A bad keyword in the set: the same error as from the string. */
    assert_int_equal(tether__conninfo_set(&side, "tether_bogus", "1", &err), 0);
    assert_int_equal(tether__conncfg_from(&side, 1, &b, &err), TETHER_ESPEC);
    assert_string_equal(err.message,
                        "connection string: unknown tether keyword "
                        "\"tether_bogus\" (see docs/conninfo.md)");
    tether__conncfg_free(&b);
    tether__conninfo_wipe(&side);
    tether__conninfo_free(&ci);
}

static void test_parse_keywords(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
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

/* Several ports per host: "6379|6380" is one port item; each host gives
 * one endpoint per port, in order; bad forms name the port item. */
static void test_parse_ports(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
    tether__conncfg cfg;
    tether_error err = {0};
    assert_int_equal(
        tether__conncfg_parse("host=a,b port=6379|6380,7000", &cfg, &err), 0);
    assert_int_equal(cfg.neps, 3);
    const char *hosts[] = {"a", "a", "b"};
    int ports[] = {6379, 6380, 7000}, servers[] = {0, 0, 1};
    for (int i = 0; i < 3; i++) {
        assert_string_equal(cfg.eps[i].host, hosts[i]);
        assert_int_equal(cfg.eps[i].port, ports[i]);
        assert_int_equal(cfg.eps[i].server, servers[i]);
    }
    tether__conncfg_free(&cfg);
    /* One port item for every host. */
    assert_int_equal(tether__conncfg_parse("host=a,b port=1|2", &cfg, &err), 0);
    assert_int_equal(cfg.neps, 4);
    assert_string_equal(cfg.eps[3].host, "b");
    assert_int_equal(cfg.eps[3].port, 2);
    tether__conncfg_free(&cfg);
    /* Provisioning answers take the same form after the colon. */
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(tether__conncfg_set_hosts(&cfg, "a:1|2,b", &err), 0);
    assert_int_equal(cfg.neps, 3);
    assert_int_equal(cfg.eps[1].port, 2);
    assert_int_equal(cfg.eps[2].port, 0);
    assert_int_equal(cfg.eps[2].server, 1);
    assert_int_equal(tether__conncfg_set_hosts(&cfg, "a:1||2", &err),
                     TETHER_ESPEC);
    assert_int_equal(cfg.neps, 3); /* the old list is kept */
    tether__conncfg_free(&cfg);
    const char *bad[] = {"port=1||2", "port=|1",      "port=1|",
                         "port=1|x",  "port=1|70000", "port=1|-2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char ci[64];
        snprintf(ci, sizeof(ci), "host=a password=s3cret %s", bad[i]);
        expect_spec_error(ci, "for port: want a port");
        expect_spec_error(ci, "6379|6380");
    }
    expect_spec_error("host=a,b,c port=1|2,3", "mismatched host and port");
    /* 22 hosts of 3 ports: 66 pairs, more than 64. */
    char ci[512] = "password=s3cret port=1|2|3 host=h0";
    for (int i = 1; i < 22; i++)
        snprintf(ci + strlen(ci), sizeof(ci) - strlen(ci), ",h%d", i);
    expect_spec_error(ci, "too many host-port pairs (host 22");
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

/* A host skipped as down when last tried is tried again at once when the
 * pass found nothing fitting (a restart takes under a second): no pause
 * between that pass and the next. */
static void test_skipped_host_tried_at_once(void **state) {
    (void)state;
    evlog log = {0};
    tether_connector *c = make("host=down1,s1 target_session_attrs=read-write "
                               "tether_login_timeout=2s",
                               &log);
    tether__connector_learn(c, 0, HS_DOWN, vnow());
    tether_error err = {0};
    assert_null(connect_host(c, &err));
    int role = -1;
    for (int i = 0; i < log.n && role < 0; i++)
        if (!strncmp(log.lines[i], "role s1:", 8))
            role = i;
    assert_true(role >= 0);
    assert_true(has_event(&log, "skip down1:"));
    long long t_role = -1, t_next = -1;
    sscanf(strstr(log.lines[role], "t="), "t=%lld", &t_role);
    int next = role + 1;
    while (next < log.n && strncmp(log.lines[next], "fail down1:", 11))
        next++;
    assert_true(next < log.n);
    sscanf(strstr(log.lines[next], "t="), "t=%lld", &t_next);
    print_message("%s\n%s\n", log.lines[role], log.lines[next]);
    assert_int_equal(t_next, t_role);
    tether_connector_destroy(c);
}

/* The role watch (docs/conninfo.md): a read-write connect whose passes
 * reach only standbys keeps their connections and asks them their role
 * through each pause: the one promoted is handed out within one step of
 * the promotion, without connecting again. */
static void test_role_watch(void **state) {
    (void)state;
    evlog log = {0};
    tether_connector *c =
        make_with(&watcher,
                  "host=down1,sA,sB target_session_attrs=read-write "
                  "tether_login_timeout=5s",
                  &log);
    int64_t t0 = vnow();
    promote_at = t0 + 1234;
    asks = ask_fails = 0;
    tether_error err = {0};
    assert_string_equal(connect_host(c, &err), "sA");
    int64_t took = vnow() - t0;
    print_message("promoted at 1234 ms, taken at %lld ms; %d questions, %d "
                  "connections opened\n",
                  (long long)took, asks, opened);
    assert_true(took >= 1234 && took <= 1234 + TETHER__WATCH_STEP_MS);
    assert_int_equal(opened, 2); /* sA and sB, once each */
    assert_true(has_event(&log, "ok sA:0"));
    assert_true(asks >= 2 * (1234 / 500)); /* asked through every pause */
    tether_connector_destroy(c);
    /* Not for a standby target, nor without query_role: each pass connects
     * again. */
    opened = closed_count = 0;
    promote_at = -1;
    c = make("host=down1,sA,sB target_session_attrs=read-write "
             "tether_login_timeout=1s",
             NULL);
    void *h = NULL;
    assert_int_not_equal(tether_connector_connect(c, &h, &err), 0);
    assert_true(opened > 2);
    tether_connector_destroy(c);
}

/* A watched standby's answer goes into the host cache as a fresh one's
 * does. After a pool's fatal event emptied the cache, a primary refused
 * while it restarted was skipped for tether_recheck (10 s) because the
 * watched standby, its role unlearnt, "might serve": a chaos soak had
 * writes out 9.8 s after a restart. Now it is tried at the next pass. */
static void test_watched_role_learnt(void **state) {
    (void)state;
    tether_connector *c =
        make_with(&watcher,
                  "host=back1,sA target_session_attrs=read-write "
                  "tether_login_timeout=20s",
                  NULL);
    int64_t t0 = vnow();
    back_at = t0 + 1000;
    promote_at = -1;
    invalidate_on_ask = c;
    tether_error err = {0};
    assert_string_equal(connect_host(c, &err), "back1");
    int64_t took = vnow() - t0;
    print_message("back at 1000 ms, connected at %lld ms\n", (long long)took);
    assert_null(invalidate_on_ask); /* the cache was emptied mid-connect */
    assert_true(took >= 1000 && took <= 1000 + 600);
    back_at = -1;
    tether_connector_destroy(c);
}

/* A watched connection that fails is closed, and the next pass connects
 * to its server again; nothing leaks (teardown counts). */
static void test_role_watch_broken(void **state) {
    (void)state;
    tether_connector *c =
        make_with(&watcher,
                  "host=sA,sB target_session_attrs=read-write "
                  "tether_login_timeout=5s",
                  NULL);
    promote_at = vnow() + 800;
    asks = 0;
    ask_fails = 1;
    tether_error err = {0};
    assert_string_equal(connect_host(c, &err), "sA");
    assert_int_equal(ask_fails, 0);
    assert_int_equal(opened, 3); /* sB again after its failure */
    tether_connector_destroy(c);
    /* Out of time with both still standbys: the error says so, and both
     * watched connections are closed. */
    promote_at = -1;
    int before = opened;
    c = make_with(&watcher,
                  "host=sA,sB target_session_attrs=read-write "
                  "tether_login_timeout=1s",
                  NULL);
    void *h = NULL;
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_ENOHOST);
    assert_non_null(strstr(err.message, "not read-write"));
    assert_int_equal(opened - before, 2);
    assert_int_equal(atomic_load(&c->watching), 0);
    /* The connector's share is taken (by other connects): this one
     * watches nothing, and connects again on each pass. */
    atomic_store(&c->watching, TETHER__WATCH_MAX);
    before = opened;
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_ENOHOST);
    assert_true(opened - before > 2);
    assert_int_equal(atomic_load(&c->watching), TETHER__WATCH_MAX);
    atomic_store(&c->watching, 0);
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

static int seq_provisions;
static int provide_seq(void *ctx, char *buf, size_t cap) {
    (void)ctx;
    seq_provisions++;
    snprintf(buf, cap, "%s", "down2:1|2,p9:3|4");
    return 0;
}

/* Sequential: every host and each of its ports in turn; when a pass is
 * exhausted the provisioning callback refreshes the list for the next. */
static void test_sequential_provisioning(void **state) {
    (void)state;
    evlog log = {0};
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    /* An explicit pause: passes go on (by default a connect that nothing
     * answered ends after one pass, and the next connect uses the new
     * list: test_sequential_provisioning_default). */
    o.conninfo = "host=down1 port=5|6 tether_strategy=sequential "
                 "tether_pause='exponential base=100ms max=2s'";
    o.driver = &fake;
    o.clock = tether_vclock_clock(vc);
    o.provision = provide_seq;
    o.on_event = on_event;
    o.event_ctx = &log;
    o.seed = 5;
    tether_connector *c = NULL;
    tether_error err = {0};
    seq_provisions = 0;
    assert_int_equal(tether_connector_create(&c, &o, &err), 0);
    const char *h = connect_host(c, &err);
    assert_non_null(h);
    assert_string_equal(h, "p9");
    for (int i = 0; i < log.n; i++)
        print_message("%s\n", log.lines[i]);
    assert_int_equal(seq_provisions, 1);
    const char *want[] = {"fail down1:5", "fail down1:6", "provision", "pause",
                          "fail down2:1", "fail down2:2", "ok p9:3"};
    assert_int_equal(log.n, 7);
    for (int i = 0; i < 7; i++)
        if (strncmp(log.lines[i], want[i], strlen(want[i])))
            fail_msg("event %d: \"%s\", want \"%s\"", i, log.lines[i], want[i]);
    tether_connector_destroy(c);
}

/* With the default pause, a pass nothing answered ends the connect, but
 * the list is refreshed first: the next connect tries the new one. */
static void test_sequential_provisioning_default(void **state) {
    (void)state;
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = "host=down1 port=5|6 tether_strategy=sequential";
    o.driver = &fake;
    o.clock = tether_vclock_clock(vc);
    o.provision = provide_seq;
    o.seed = 5;
    tether_connector *c = NULL;
    tether_error err = {0};
    seq_provisions = 0;
    assert_int_equal(tether_connector_create(&c, &o, &err), 0);
    assert_null(connect_host(c, &err));
    assert_int_equal(seq_provisions, 1);
    const char *h = connect_host(c, &err);
    assert_non_null(h);
    assert_string_equal(h, "p9");
    tether_connector_destroy(c);
}

/* ---- what a failed connect says -------------------------------------------
 */

/* fails connects with c and returns the error's message (static). */
static const char *fail_msg_of(tether_connector *c, int want) {
    static tether_error err;
    void *h = NULL;
    int rc = tether_connector_connect(c, &h, &err);
    if (rc != want)
        fail_msg("connect: %s, want %s: %s", tether_errname(rc),
                 tether_errname(want), err.message);
    assert_true(strlen(err.message) < TETHER_MSG_MAX);
    print_message("%s\n", err.message);
    return err.message;
}

static void expect_in(const char *msg, const char *needle) {
    if (!strstr(msg, needle))
        fail_msg("message \"%s\" lacks \"%s\"", msg, needle);
}

/* A connector over the sim driver (every host is the same simulated
 * server) on the virtual clock. */
static tether_connector *make_sim(const char *conninfo, tether_sim *sim) {
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = conninfo;
    o.driver = tether_driver_sim();
    o.driver_ctx = sim;
    o.clock = tether_vclock_clock(vc);
    o.seed = 5;
    tether_connector *c = NULL;
    tether_error err = {0};
    if (tether_connector_create(&c, &o, &err))
        fail_msg("create: %s", err.message);
    return c;
}

static tether_sim *make_simdb(double timeout_rate) {
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    so.clock = tether_vclock_clock(vc);
    so.timeout_rate = timeout_rate;
    so.seed = 9;
    tether_sim *sim = NULL;
    tether_error err = {0};
    if (tether_sim_create(&sim, &so, &err))
        fail_msg("sim: %s", err.message);
    return sim;
}

/* Without tether_pause: a pass that reached no server ends the connect at
 * once (the pool's breaker paces the next); a busy server is tried again
 * after 2-4 s, then 4-8 s, within the login timeout; with a pause set,
 * passes repeat as it says. */
static void test_default_pause_by_outcome(void **state) {
    (void)state;
    tether_sim *sim = make_simdb(0);
    tether_sim_set_down(sim, 1);
    tether_connector *c = make_sim("host=db1,db2", sim);
    tether_error err = {0};
    void *h = NULL;
    int64_t t0 = tether_now_ms(tether_vclock_clock(vc));
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_ECONNECT);
    assert_int_equal(err.attempts, 2); /* one pass over both hosts */
    assert_int_equal(tether_now_ms(tether_vclock_clock(vc)) - t0, 0);
    tether_connector_destroy(c);
    c = make_sim("host=db1 tether_login_timeout=3s "
                 "tether_pause='fixed base=500ms jitter=none'",
                 sim);
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_ECONNECT);
    assert_int_equal(err.attempts, 6); /* t = 0, 0.5 ... 2.5 s */
    tether_connector_destroy(c);
    /* Busy twice, then admitted: after 2-4 s and 4-8 s. */
    tether_sim_set_down(sim, 0);
    tether_sim_fail_next(sim, 2, TETHER_ETHROTTLED, TETHER_CLASS_THROTTLED);
    c = make_sim("host=db1", sim);
    t0 = tether_now_ms(tether_vclock_clock(vc));
    assert_int_equal(tether_connector_connect(c, &h, &err), 0);
    int64_t took = tether_now_ms(tether_vclock_clock(vc)) - t0;
    assert_true(took >= 6000 && took <= 12000);
    tether_connector_close(c, h);
    tether_connector_destroy(c);
    /* Busy past the login timeout: it ends when the next pause would. */
    tether_sim_fail_next(sim, 10, TETHER_ETHROTTLED, TETHER_CLASS_THROTTLED);
    c = make_sim("host=db1 tether_login_timeout=5s", sim);
    assert_int_equal(tether_connector_connect(c, &h, &err), TETHER_ETHROTTLED);
    assert_true(err.attempts >= 1 && err.attempts <= 2);
    assert_true(err.elapsed_ms < 5000);
    tether_connector_destroy(c);
    tether_connector_destroy(make_sim("host=db1", sim)); /* nothing leaks */
    tether_sim_destroy(sim);
}

#define PASSWORD "Pw-n0t-in-messages"

/* Each reason with the sim driver: refused, timed out, too many
 * connections, login rejected; every host named, never the password. */
/* tether_patroni in a build without Patroni support (TETHER_PATRONI off,
 * or libcurl/json-c not found) is a clear TETHER_ESPEC; in a build with
 * it, a bad URL is (docs/patroni.md, "Build"). */
static void test_patroni_keyword(void **state) {
    (void)state;
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.driver = &fake;
    o.conninfo = "host=p1 tether_patroni=http://127.0.0.1:1";
    tether_connector *c = NULL;
    tether_error err = {0};
#ifdef TETHER_HAVE_PATRONI
    o.conninfo = "host=p1 tether_patroni=gopher://127.0.0.1:1";
    assert_int_equal(tether_connector_create(&c, &o, &err), TETHER_ESPEC);
    assert_non_null(strstr(err.message, "bad value for tether_patroni"));
#else
    assert_int_equal(tether_connector_create(&c, &o, &err), TETHER_ESPEC);
    assert_non_null(strstr(err.message, "tether_patroni: this tether was "
                                        "built without Patroni support"));
#endif
    assert_null(c);
}

static void test_error_reasons_sim(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
    tether_sim *sim = make_simdb(0);
    tether_connector *c = make_sim(
        "host=db1,db2 port=5432 password=" PASSWORD " tether_login_timeout=1s "
        "tether_pause='fixed base=200ms jitter=none'",
        sim);
    tether_sim_set_down(sim, 1);
    const char *m = fail_msg_of(c, TETHER_ECONNECT);
    expect_in(m, "could not connect after 10 attempts in 800 ms: ");
    expect_in(m, ": db1:5432 refused; db2:5432 refused");
    assert_null(strstr(m, PASSWORD));
    tether_connector_destroy(c);
    tether_sim_set_down(sim, 0);

    /* One pass: the first host out of slots, the second rejects the
     * login (permanent: the loop ends after the pass). */
    c = make_sim("host=db1,db2 port=5432 password=" PASSWORD, sim);
    tether_sim_fail_next(sim, 1, TETHER_ETHROTTLED, TETHER_CLASS_THROTTLED);
    tether_sim_fail_next(sim, 1, TETHER_EAUTH, TETHER_CLASS_PERMANENT);
    m = fail_msg_of(c, TETHER_EAUTH);
    expect_in(m, "could not connect after 2 attempts in 0 ms: ");
    expect_in(m, "db1:5432 has too many connections; db2:5432 rejected the "
                 "login: authentication failed");
    assert_null(strstr(m, PASSWORD));
    tether_connector_destroy(c);
    tether_sim_destroy(sim);

    /* Connects that never answer: each attempt's budget is named. */
    sim = make_simdb(1.0);
    c = make_sim("host=db1,db2 port=5432 tether_attempt_timeout=300ms "
                 "tether_login_timeout=1s "
                 "tether_pause='fixed base=100ms jitter=none'",
                 sim);
    m = fail_msg_of(c, TETHER_ETIMEDOUT);
    expect_in(m, "db1:5432 timed out after 300 ms; db2:5432 timed out");
    tether_connector_destroy(c);
    tether_sim_destroy(sim);
}

/* An attempt the login deadline cut short does not hide what an earlier
 * one found: servers that connect in 300 ms but cannot say their role (the
 * sim driver has none), and a login timeout that leaves db2's second try
 * 50 ms. */
static void test_error_cut_by_deadline(void **state) {
    (void)state;
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    so.clock = tether_vclock_clock(vc);
    so.connect_latency_ms = 300;
    tether_sim *sim = NULL;
    tether_error err = {0};
    assert_int_equal(tether_sim_create(&sim, &so, &err), 0);
    tether_connector *c =
        make_sim("host=db1,db2 port=5432 target_session_attrs=read-write "
                 "tether_login_timeout=1050ms "
                 "tether_pause='fixed base=100ms jitter=none'",
                 sim);
    const char *m = fail_msg_of(c, TETHER_ENOHOST);
    expect_in(m, "no read-write server after 4 attempts in 1050 ms: "
                 "db1:5432 did not tell its role, wanted read-write; "
                 "db2:5432 did not tell its role, wanted read-write");
    /* Nor does it mark db2 down: the next connect tries it again. */
    m = fail_msg_of(c, TETHER_ENOHOST);
    assert_null(strstr(m, "skipped"));
    tether_connector_destroy(c);
    tether_sim_destroy(sim);
}

/* The failover case: the old primary refuses, the standby answers but is
 * read-only. Both are named, each with its reason, and the target. */
static void test_error_refused_and_wrong_role(void **state) {
    (void)state;
    tether_connector *c = make("host=down1,s1 port=5432 "
                               "target_session_attrs=read-write "
                               "tether_login_timeout=2s "
                               "tether_pause='fixed base=500ms jitter=none'",
                               NULL);
    const char *m = fail_msg_of(c, TETHER_ECONNECT);
    expect_in(m, "no read-write server after 8 attempts in 1500 ms: "
                 "down1:5432 refused; s1:5432 is a standby (read-only), "
                 "not read-write");
    tether_connector_destroy(c);
    /* Of the wrong role alone. */
    c = make("host=p1,p2 target_session_attrs=standby "
             "tether_login_timeout=1s",
             NULL);
    m = fail_msg_of(c, TETHER_ENOHOST);
    expect_in(m, "no standby server after ");
    expect_in(m, "p1 is a primary, not standby; p2 is a primary, not standby");
    tether_connector_destroy(c);
}

/* A host the cache skipped says so (and a tried host is not shown as
 * skipped). */
static void test_error_skipped(void **state) {
    (void)state;
    tether_connector *c = make("host=down1,busy1 port=5432 "
                               "tether_login_timeout=1s "
                               "tether_pause='fixed base=400ms jitter=none'",
                               NULL);
    const char *m = fail_msg_of(c, TETHER_ETHROTTLED);
    expect_in(m, "down1:5432 refused; busy1:5432 has too many connections");
    /* Within the recheck interval: down1 is known down. */
    m = fail_msg_of(c, TETHER_ETHROTTLED);
    expect_in(m, "down1:5432 skipped: down when last tried; busy1:5432 has "
                 "too many connections");
    tether_connector_destroy(c);
}

/* Many hosts: as many as fit, then how many more; for names of many
 * lengths, never one host fewer than would fit with that tail. */
static void test_error_many_hosts_truncated(void **state) {
    (void)state;
    for (int pad = 0; pad <= 40; pad++) {
        char ci[4096] = "host=", name[128];
        for (int i = 0; i < 20; i++)
            snprintf(ci + strlen(ci), sizeof(ci) - strlen(ci),
                     "%sdown-%02d.%.*s.example", i ? "," : "", i, pad,
                     "a-rather-long-domain-name-that-goes-on-and-on");
        strcat(ci, " port=5432 tether_login_timeout=100ms");
        tether_connector *c = make(ci, NULL);
        const char *m = fail_msg_of(c, TETHER_ECONNECT);
        int shown = 0;
        for (const char *p = m; (p = strstr(p, " refused")); p++)
            shown++;
        assert_true(shown >= 2 && shown < 20);
        char tail[64], next_tail[64];
        snprintf(tail, sizeof(tail), "; ... and %d more", 20 - shown);
        snprintf(next_tail, sizeof(next_tail), "; ... and %d more", 19 - shown);
        assert_string_equal(m + strlen(m) - strlen(tail), tail);
        snprintf(name, sizeof(name), "; down-%02d.%.*s.example:5432 refused",
                 shown, pad, "a-rather-long-domain-name-that-goes-on-and-on");
        assert_true(strlen(m) - strlen(tail) + strlen(name) +
                        (shown < 19 ? strlen(next_tail) : 0) >=
                    TETHER_MSG_MAX);
        expect_in(m, "down-00.");
        tether_connector_destroy(c);
    }
}

/* The race strategy names its hosts too, those still silent at the
 * deadline as timed out. */
static void test_error_race(void **state) {
    (void)state;
    tether_connector *c = make("host=down1,s1,slow1 port=5432 "
                               "tether_strategy=race tether_race_delay=100ms "
                               "target_session_attrs=primary "
                               "tether_login_timeout=1s",
                               NULL);
    const char *m = fail_msg_of(c, TETHER_ECONNECT);
    expect_in(m, "no primary server after ");
    expect_in(m, "down1:5432 refused; s1:5432 is a standby (read-only), not "
                 "primary; slow1:5432 timed out after ");
    tether_connector_destroy(c);
}

/* Through a pool: the first acquire's error names every host; then the
 * blocking-period breaker is open, and its error says so, when it probes
 * next, and still names the hosts. */
static void test_error_pool_breaker(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
    tether_sim *sim = make_simdb(0);
    tether_sim_set_down(sim, 1);
    tether_connector *c = make_sim("host=db1,db2 port=5432 password=" PASSWORD
                                   " tether_login_timeout=1s",
                                   sim);
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    po.connector = c;
    po.clock = tether_vclock_clock(vc);
    po.max_size = 2;
    po.breaker.jitter = 0; /* a 1 s open period, exactly */
    tether_pool *p = NULL;
    tether_error err = {0};
    assert_int_equal(tether_pool_create(&p, &po, &err), 0);
    tether_lease *l = NULL;
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), TETHER_ECONNECT);
    expect_in(err.message, "db1:5432 refused; db2:5432 refused");
    tether_vclock_advance(vc, 600 * MS);
    /* A deadline before the probe: the breaker's error at once. */
    assert_int_equal(tether_pool_acquire(p, 300, &l, &err), TETHER_EOPEN);
    print_message("%s\n", err.message);
    assert_int_equal(err.cause, TETHER_ECONNECT);
    expect_in(err.message, "circuit breaker is open, next probe in 400 ms; "
                           "last failure: TETHER_ECONNECT: could not connect");
    expect_in(err.message, "db1:5432 refused; db2:5432 refused");
    assert_null(strstr(err.message, PASSWORD));
    tether_pool_destroy(p);
    tether_connector_destroy(c);
    /* A failure too long to follow the breaker's words whole is cut with
     * "...", the breaker's words kept. */
    c = make_sim("host=db-01.a-rather-long-domain-name.example,"
                 "db-02.a-rather-long-domain-name.example,"
                 "db-03.a-rather-long-domain-name.example port=5432 "
                 "tether_login_timeout=1s",
                 sim);
    po.connector = c;
    assert_int_equal(tether_pool_create(&p, &po, &err), 0);
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), TETHER_ECONNECT);
    assert_true(strlen(err.message) > 200);
    assert_int_equal(tether_pool_acquire(p, 500, &l, &err), TETHER_EOPEN);
    print_message("%s\n", err.message);
    assert_int_equal(strlen(err.message), TETHER_MSG_MAX - 1);
    expect_in(err.message, "circuit breaker is open, next probe in 1000 ms; ");
    assert_string_equal(err.message + TETHER_MSG_MAX - 4, "...");
    tether_pool_destroy(p);
    tether_connector_destroy(c);
    tether_sim_destroy(sim);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_parse_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_from_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_keywords, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_ports, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_environment, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_skipped_host_tried_at_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sequential_skips_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_role_watch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_role_watch_broken, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_watched_role_learnt, setup,
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
        cmocka_unit_test_setup_teardown(test_default_pause_by_outcome, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_round_robin_and_random, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_race_staggered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_provisioning, setup, teardown),
        cmocka_unit_test_setup_teardown(test_patroni_keyword, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sequential_provisioning, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sequential_provisioning_default,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_reasons_sim, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_error_cut_by_deadline, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_error_refused_and_wrong_role,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_many_hosts_truncated, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_error_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_pool_breaker, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("connector", tests, NULL, NULL);
}
