/* test_secrets.c - a known password must reach no output of the library,
 * and two credentials must never share a connection (scripts/pg-cluster
 * run -- test_secrets).
 *
 * Every byte the library gives back is captured: the process log sink
 * (pools, retries, breakers), the registry's log sink (evictions), every
 * connect event (host and message), every error message (parse errors,
 * connect failures against the real server with a wrong password, a
 * refused port, a server that never answers, an unknown database and user,
 * pool and registry acquires, the breaker's fast failures, query errors in
 * tether_pool_run), the Prometheus text of pools opened from strings that
 * hold the password, and the display form (the registry's pool name) of
 * every connection string. The capture is then searched for the known
 * passwords, for each half of a password with a space in it and for the
 * scratch cluster's real password ($PGC_PASSWORD).
 *
 * The second part runs many threads through one registry with four
 * credentials: the cluster's user with its password and with a wrong one,
 * and a second role (created here over the superuser's unix socket) with
 * its password and with a wrong one, each written in several forms that
 * normalize to one key. Each connection handed out is asked
 * current_user and its backend identity (pid, backend_start): a backend
 * opened for one user must never be handed to a caller of another, no
 * backend may be held by two callers at once, and a wrong password never
 * gets a connection, even with the same user's pool full of good ones.
 *
 * The third part rotates a role's password (on the server and in its
 * passfile) under a running pool and checks that tether_pool_reconnect
 * replaces every connection by one made with the new password, and that
 * the exhausted pool's message holds no password.
 *
 * Environment (from pg-cluster run): PGC_HOST, PRIMARY_PORT, PGC_USER,
 * PGC_PASSWORD, PGC_DB, PGC_CTL, PGC_DIR. */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include "../support/net.h"
#include "conninfo.h"
#include "tether.h"
#include "tether_pq.h"
#include "tether_sim.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The known password: the second role's, and a wrong one for PGC_USER. */
#define PW "S3cr3t-Pa55-XYZ"
/* A password with a space: unquoted, its second half parses as a keyword. */
#define PW_A "Sp4ce-S3cr3t"
#define PW_B "H4lf_Tw0"
#define ROLE2 "tether2"
/* A role whose password is rotated under a running pool. */
#define ROLE3 "tether3"
#define PW3_OLD "Old-R0tated-Pa55"
#define PW3_NEW "New-R0tated-Pa55"

static struct {
    const char *host, *user, *password, *db;
    int port;
} env;

/* ---- the capture ------------------------------------------------------ */

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static char *cap_buf;
static size_t cap_len, cap_size;
static int cap_items;

static void capture(const char *where, const char *text) {
    pthread_mutex_lock(&cap_lock);
    size_t need = strlen(where) + (text ? strlen(text) : 0) + 8;
    if (cap_len + need >= cap_size) {
        size_t n = (cap_size ? cap_size * 2 : 1 << 16) + need;
        char *b = realloc(cap_buf, n);
        assert_non_null(b);
        cap_buf = b;
        cap_size = n;
    }
    cap_len += (size_t)snprintf(cap_buf + cap_len, cap_size - cap_len,
                                "[%s] %s\n", where, text ? text : "(null)");
    cap_items++;
    pthread_mutex_unlock(&cap_lock);
}

static void capturef(const char *where, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void capturef(const char *where, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    capture(where, buf);
}

static void capture_err(const char *where, int rc, const tether_error *err) {
    capturef(where, "rc=%d %s: %s (%s)", rc, tether_errname(rc), err->message,
             tether_class_name(err->cls));
}

static void log_sink(void *ctx, tether_log_level level, const char *msg) {
    capturef(ctx ? (const char *)ctx : "log", "level %d: %s", (int)level, msg);
}

static void on_event(void *ctx, const tether_connect_event *ev) {
    capturef(
        ctx ? (const char *)ctx : "event", "#%d %s:%d %s %s %s role=%s: %s",
        ev->attempt, ev->host ? ev->host : "(null)", ev->port,
        tether_phase_name(ev->phase), ev->code ? tether_errname(ev->code) : "-",
        tether_class_name(ev->cls), tether_role_name(ev->role),
        ev->message ? ev->message : "(null)");
}

/* The secrets to look for: never in the captured bytes. */
static const char *secrets[8];
static int nsecrets;

/* find_secret returns the first secret in text[0, len), or NULL, with
 * *at its position. */
static const char *find_secret(const char *text, size_t len, size_t *at) {
    for (int i = 0; i < nsecrets; i++) {
        size_t n = strlen(secrets[i]);
        for (size_t j = 0; n && j + n <= len; j++)
            if (memcmp(text + j, secrets[i], n) == 0) {
                *at = j;
                return secrets[i];
            }
    }
    return NULL;
}

/* scan_capture fails the test when a secret is in the capture, showing
 * the captured line that holds it; then empties the capture. */
static void scan_capture(const char *what, int min_items) {
    pthread_mutex_lock(&cap_lock);
    size_t at = 0;
    const char *s = cap_buf ? find_secret(cap_buf, cap_len, &at) : NULL;
    char line[1024] = "";
    if (s) {
        size_t a = at, b = at;
        while (a > 0 && cap_buf[a - 1] != '\n')
            a--;
        while (b < cap_len && cap_buf[b] != '\n')
            b++;
        snprintf(line, sizeof(line), "%.*s", (int)(b - a), cap_buf + a);
    }
    int items = cap_items;
    size_t len = cap_len;
    cap_len = 0;
    cap_items = 0;
    if (cap_buf)
        cap_buf[0] = '\0';
    pthread_mutex_unlock(&cap_lock);
    print_message("%s: %d outputs, %zu bytes scanned\n", what, items, len);
    if (s)
        fail_msg("%s: secret \"%s\" found in: %s", what, s, line);
    assert_true(items >= min_items);
}

/* ---- helpers ---------------------------------------------------------- */

/* superuser_sql runs sql through psql as the superuser over the unix
 * socket (pg-cluster psql), given on stdin: no shell quoting. */
static void superuser_sql(const char *sql) {
    const char *ctl = getenv("PGC_CTL"), *dir = getenv("PGC_DIR");
    if (!ctl || !dir) {
        fprintf(stderr, "test_secrets: PGC_CTL and PGC_DIR are required\n");
        exit(2);
    }
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "bash '%s' psql '%s' primary -q -v ON_ERROR_STOP=1 >/dev/null",
             ctl, dir);
    FILE *f = popen(cmd, "w");
    if (!f || fputs(sql, f) < 0 || pclose(f) != 0) {
        fprintf(stderr, "test_secrets: superuser SQL failed: %s\n", sql);
        exit(2);
    }
}

/* The conninfo of the scratch primary as user with password. */
static void conn_kv(char *buf, size_t cap, const char *user, const char *pw,
                    const char *extra) {
    snprintf(buf, cap, "host=%s port=%d user=%s password=%s dbname=%s %s",
             env.host, env.port, user, pw, env.db, extra ? extra : "");
}

/* connect_once runs one connector connect on conninfo, capturing the
 * create error or the events and the outcome. Returns the connect's rc. */
static int connect_once(const char *where, const char *conninfo) {
    tether_connector_opts o;
    tether_connector_opts_init(&o);
    o.conninfo = conninfo;
    o.on_event = on_event;
    o.event_ctx = (void *)where;
    o.log = log_sink;
    o.log_ctx = (void *)where;
    tether_connector *c = NULL;
    tether_error err = {0};
    int rc = tether_connector_create(&c, &o, &err);
    if (rc != 0) {
        capture_err(where, rc, &err);
        return rc;
    }
    void *h = NULL;
    rc = tether_connector_connect(c, &h, &err);
    capture_err(where, rc, &err);
    tether_connector_close(c, h);
    tether_connector_destroy(c);
    return rc;
}

/* capture_display captures conninfo's display form (the registry's pool
 * name) when it parses. */
static void capture_display(const char *conninfo) {
    char *display = NULL;
    tether_error err = {0};
    if (tether__conninfo_keys(conninfo, NULL, &display, &err) == 0)
        capture("display", display);
    else
        capture_err("display", TETHER_ESPEC, &err);
    free(display);
}

/* capture_metrics captures p's Prometheus text. */
static void capture_metrics(const char *where, tether_pool *p) {
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t n = tether_pool_metrics_prometheus(p, buf, cap);
    assert_true(n > 0 && n < cap);
    assert_non_null(strstr(buf, "tether_pool_"));
    capture(where, buf);
    free(buf);
}

/* ---- the scanner itself ----------------------------------------------- */

/* Each secret planted in the capture is found: the checks below can fail. */
/* Each test starts with an empty capture. */
static int empty_capture(void **state) {
    (void)state;
    pthread_mutex_lock(&cap_lock);
    cap_len = 0;
    cap_items = 0;
    pthread_mutex_unlock(&cap_lock);
    return 0;
}

static void test_scanner_finds_a_planted_secret(void **state) {
    (void)state;
    for (int i = 0; i < nsecrets; i++) {
        capturef("plant", "nothing here");
        capturef("plant", "pool host='h' password='%s' user='u'", secrets[i]);
        size_t at = 0;
        pthread_mutex_lock(&cap_lock);
        const char *s = find_secret(cap_buf, cap_len, &at);
        cap_len = 0;
        cap_items = 0;
        pthread_mutex_unlock(&cap_lock);
        assert_non_null(s);
        assert_string_equal(s, secrets[i]);
    }
}

/* ---- connection strings: parse errors, display forms, pool names ------ */

static const char *const bad_strings[] = {
    "host=h password=" PW " bogus",
    "host=h password='" PW,
    "host=h password='" PW "\\",
    "password=" PW " host=h port",
    "password=" PW " host='h",
    "password=" PW " =x",
    "password=" PW " h-st=x",
    "host=h password=" PW_A " " PW_B,
    "host=h password=" PW_A " " PW_B "=1",
    "host=h password=" PW_A " " PW_B "-x=1",
    "host=h password=" PW " tether_pool_max=abc",
    "host=h password=" PW " tether_pool_min=5 tether_pool_max=2",
    "host=h password=" PW " tether_strategy=bogus",
    "host=h password=" PW " tether_login_timeout=forever",
    "host=h password=" PW " tether_retry='exponential base=x'",
    "host=h password=" PW " tether_breaker='bogus'",
    "host=h password=" PW " tether_unknown=1",
    "host=a,b port=1,2,3 password=" PW,
    "host=h port=notaport password=" PW,
    "postgresql://u:" PW "%zz@h/d",
    "postgresql://u:" PW "@h:notaport/d",
    "postgresql://u:" PW "@[::1/d",
    "postgresql://u:" PW "@h/d?password=" PW "%",
    "postgresql://u:" PW "@h/d?a=b=c",
    "postgresql://u:" PW "@h/d?tether_pool_max=abc",
    "postgres://u@h/d?password=" PW "&" PW_B,
    "dbname='host=h password=" PW "' tether_pool_max=abc",
    "dbname=postgresql://u:" PW "@h/d tether_strategy=bogus",
    "password=" PW " " PW,
    "'" PW "'",
    PW,
};

static const char *const good_strings[] = {
    "host=h user=u password=" PW " dbname=d",
    "host=h user=u password='" PW "' dbname=d",
    "host=h user=u password=" PW " password=" PW " dbname=d",
    "postgresql://u:" PW "@h:5432/d",
    "postgres://u@h/d?password=" PW,
    "postgresql://u:S3cr3t%2DPa55%2DXYZ@h/d",
    "host=h sslpassword=" PW,
    "host=h PASSWORD=" PW,
    "host=h my_secret=" PW,
    "host=h scram_client_key=" PW,
    "host=h dbname='host=h2 password=" PW "'",
    "host=h dbname=postgresql://u:" PW "@h2/d",
    "host=h password='" PW_A " " PW_B "'",
    "host=h password=" PW_A "\\ " PW_B,
    "postgresql://u:" PW_A "%20" PW_B "@h/d",
};

/* Every malformed string is refused with a message naming no secret, by
 * each entry point; every well-formed one shows no secret in its display
 * form nor in its pool's name (the Prometheus label). */
static void test_conninfo_errors_and_names(void **state) {
    (void)state;
    tether_error err;
    for (size_t i = 0; i < sizeof(bad_strings) / sizeof(*bad_strings); i++) {
        const char *s = bad_strings[i];
        char key[512];
        err = (tether_error){0};
        int rc = tether_registry_normalize(s, key, sizeof(key), &err);
        if (rc < 0)
            capture_err("normalize", rc, &err);
        capture_display(s);
        tether_pool *p = NULL;
        err = (tether_error){0};
        rc = tether_pool_open(&p, s, on_event, "open-event", &err);
        if (rc == 0) {
            fail_msg("bad string %zu opened a pool", i);
            tether_pool_destroy(p);
        }
        capture_err("pool_open", rc, &err);
        tether_connector_opts co;
        tether_connector_opts_init(&co);
        co.conninfo = s;
        tether_connector *c = NULL;
        err = (tether_error){0};
        rc = tether_connector_create(&c, &co, &err);
        tether_connector_destroy(c);
        if (rc != 0)
            capture_err("connector_create", rc, &err);
    }
    /* Over 64 KiB, with the password at the start and at the end. */
    size_t n = 70000;
    char *big = malloc(n + 64);
    assert_non_null(big);
    int k = snprintf(big, n + 64, "password=" PW " application_name=");
    memset(big + k, 'a', n - (size_t)k);
    snprintf(big + n, 64, " password=" PW);
    err = (tether_error){0};
    int rc = tether_registry_normalize(big, NULL, 0, &err);
    assert_int_equal(rc, TETHER_ESPEC);
    capture_err("normalize-long", rc, &err);
    tether_pool *p = NULL;
    rc = tether_pool_open(&p, big, NULL, NULL, &err);
    assert_int_not_equal(rc, 0);
    capture_err("pool_open-long", rc, &err);
    free(big);

    for (size_t i = 0; i < sizeof(good_strings) / sizeof(*good_strings); i++) {
        const char *s = good_strings[i];
        capture_display(s);
        p = NULL;
        err = (tether_error){0};
        rc = tether_pool_open(&p, s, on_event, "open-event", &err);
        if (rc != 0) { /* a keyword libpq does not know (my_secret...) */
            capture_err("pool_open", rc, &err);
            continue;
        }
        capture_metrics("prometheus", p);
        tether_pool_destroy(p);
    }
    scan_capture("connection strings", 90);
}

/* ---- connect failures against the real server ------------------------- */

static void test_connect_failures(void **state) {
    (void)state;
    char ci[1024], extra[256];
    /* Wrong password, in both forms and quoted. */
    conn_kv(ci, sizeof(ci), env.user, PW, NULL);
    assert_int_equal(connect_once("wrong-password", ci), TETHER_EAUTH);
    conn_kv(ci, sizeof(ci), env.user, "'" PW_A " " PW_B "'", NULL);
    assert_int_equal(connect_once("wrong-password-space", ci), TETHER_EAUTH);
    snprintf(ci, sizeof(ci), "postgresql://%s:%s@%s:%d/%s", env.user, PW,
             env.host, env.port, env.db);
    assert_int_equal(connect_once("wrong-password-uri", ci), TETHER_EAUTH);
    /* The right password, a wrong database; a user that does not exist. */
    conn_kv(ci, sizeof(ci), env.user, env.password, "dbname=nosuchdb");
    assert_int_not_equal(connect_once("no-database", ci), 0);
    conn_kv(ci, sizeof(ci), "nosuchuser", PW, NULL);
    assert_int_equal(connect_once("no-user", ci), TETHER_EAUTH);
    /* The password inside a nested dbname. */
    snprintf(ci, sizeof(ci),
             "dbname='host=%s port=%d user=%s password=" PW " dbname=%s'",
             env.host, env.port, env.user, env.db);
    assert_int_not_equal(connect_once("nested-dbname", ci), 0);
    /* Refused; then refused and wrong password over two hosts. */
    int closed = closed_port();
    /* A pause set: passes repeat (the default ends after one that reached
     * no server), so several attempts are reported and scanned. */
    snprintf(extra, sizeof(extra),
             "port=%d tether_login_timeout=1s tether_pause='fixed base=200ms'",
             closed);
    conn_kv(ci, sizeof(ci), env.user, PW, extra);
    assert_int_not_equal(connect_once("refused", ci), 0);
    snprintf(ci, sizeof(ci),
             "host=%s,%s port=%d,%d user=%s password=" PW
             " dbname=%s tether_login_timeout=2s",
             env.host, env.host, closed, env.port, env.user, env.db);
    assert_int_not_equal(connect_once("refused-then-auth", ci), 0);
    /* A server that never answers: the attempt and login timeouts. */
    /* A loopback listener that never accepts: a connect reaches the
     * accept queue and the startup packet is never answered. */
    int silent;
    int fd = loopback_listener(&silent);
    snprintf(extra, sizeof(extra),
             "port=%d tether_attempt_timeout=300ms tether_login_timeout=900ms",
             silent);
    conn_kv(ci, sizeof(ci), env.user, PW, extra);
    assert_int_not_equal(connect_once("silent", ci), 0);
    snprintf(extra, sizeof(extra),
             "port=%d connect_timeout=1 tether_login_timeout=1500ms", silent);
    conn_kv(ci, sizeof(ci), env.user, PW, extra);
    assert_int_not_equal(connect_once("silent-connect-timeout", ci), 0);
    close(fd);
    /* libpq refuses a value; the server refuses an option. */
    conn_kv(ci, sizeof(ci), env.user, PW, "sslmode=bogus");
    assert_int_not_equal(connect_once("bad-sslmode", ci), 0);
    conn_kv(ci, sizeof(ci), env.user, env.password,
            "options='-c no_such_setting=1'");
    assert_int_not_equal(connect_once("bad-options", ci), 0);
    conn_kv(ci, sizeof(ci), env.user, env.password, "sslmode=require");
    assert_int_not_equal(connect_once("no-ssl", ci), 0);
    scan_capture("connect failures", 30);
}

/* ---- pools: background connects, breaker, run(), queries, leaks ------- */

static int work_sql(void *handle, void *arg, const tether_attempt *a,
                    tether_error *err) {
    (void)a;
    PGresult *r = PQexec(handle, arg);
    int rc = PQresultStatus(r) == PGRES_TUPLES_OK ||
                     PQresultStatus(r) == PGRES_COMMAND_OK
                 ? 0
                 : tether_pq_error(handle, r, err);
    PQclear(r);
    return rc;
}

static int work_transient(void *handle, void *arg, const tether_attempt *a,
                          tether_error *err) {
    (void)handle;
    (void)arg;
    (void)a;
    return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                            "simulated transient failure");
}

static void test_pool_paths(void **state) {
    (void)state;
    char ci[1024];
    tether_error err = {0};
    tether_pool *p = NULL;
    /* A wrong password with tether_pool_min: the background connects fail
     * (logged), acquires fail, then the breaker fails them fast. */
    conn_kv(ci, sizeof(ci), env.user, PW,
            "tether_pool_min=2 tether_acquire_timeout=3s");
    assert_int_equal(tether_pool_open(&p, ci, on_event, "pool-event", &err), 0);
    for (int i = 0; i < 4; i++) {
        tether_lease *l = NULL;
        int rc = tether_pool_acquire(p, 3000, &l, &err);
        assert_int_not_equal(rc, 0);
        capture_err("pool-acquire", rc, &err);
        rc = tether_pool_run(p, TETHER_IDEMPOTENT, work_sql, "SELECT 1", &err);
        assert_int_not_equal(rc, 0);
        capture_err("pool-run", rc, &err);
    }
    capture_metrics("prometheus-wrong", p);
    tether_pool_destroy(p);

    /* The second role's password, in a URI: queries that fail, work that
     * fails transiently (retried, logged), a leak report. */
    snprintf(ci, sizeof(ci),
             "postgresql://%s:%s@%s:%d/%s?tether_leak_threshold=100ms&"
             "tether_retry=exponential%%20base%%3D1ms%%20attempts%%3D3",
             ROLE2, PW, env.host, env.port, env.db);
    capture_display(ci);
    p = NULL;
    if (tether_pool_open(&p, ci, on_event, "pool-event", &err) != 0)
        fail_msg("%s", err.message);
    int rc =
        tether_pool_run(p, TETHER_IDEMPOTENT, work_sql, "SELECT 1/0", &err);
    assert_int_not_equal(rc, 0);
    capture_err("pool-run-query", rc, &err);
    rc = tether_pool_run(p, TETHER_IDEMPOTENT, work_sql,
                         "SELECT * FROM no_such_table", &err);
    assert_int_not_equal(rc, 0);
    capture_err("pool-run-query", rc, &err);
    rc = tether_pool_run(p, TETHER_IDEMPOTENT, work_transient, NULL, &err);
    assert_int_not_equal(rc, 0);
    capture_err("pool-run-transient", rc, &err);
    tether_lease *l = NULL;
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    PGresult *r = PQexec(tether_pq_conn(l), "SELECT current_user");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(r, 0, 0), ROLE2);
    PQclear(r);
    tether_pool_metrics m;
    for (int i = 0; i < 100; i++) { /* the housekeeper reports the leak */
        tether_pool_metrics_get(p, &m);
        if (m.leaks > 0)
            break;
        usleep(50000);
    }
    assert_true(m.leaks > 0);
    tether_lease_release(l);
    capture_metrics("prometheus-good", p);
    assert_int_equal(tether_pool_close(p, 5000, &err), 0);
    rc = tether_pool_acquire(p, 100, &l, &err);
    capture_err("pool-acquire-closed", rc, &err);
    tether_pool_destroy(p);
    scan_capture("pools", 15);
}

/* ---- a rolling reconnect after a password change (docs/pool.md,
 * "Operating a pool at runtime") ------------------------------------------ */

static void write_passfile(const char *path, const char *pw) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "*:*:*:%s:%s\n", ROLE3, pw);
    assert_int_equal(fclose(f), 0);
}

/* The backend's pid and user of l's connection ("pid user"). */
static void backend_of(tether_lease *l, char *buf, size_t cap) {
    PGresult *r =
        PQexec(tether_pq_conn(l), "SELECT pg_backend_pid(), current_user");
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("backend_of: %s", PQresultErrorMessage(r));
    snprintf(buf, cap, "%s %s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
    PQclear(r);
}

/* The password is rotated on the server and in the passfile while a pool
 * holds connections: they live on (authentication happens at connect),
 * and tether_pool_reconnect replaces each one, the idle at once and the
 * leased one at its release, by a connection made with the new password.
 * The exhausted pool's message names no password. */
static void test_reconnect_after_password_change(void **state) {
    (void)state;
    char pf[] = "/tmp/tether-passfile-XXXXXX";
    int fd = mkstemp(pf);
    assert_true(fd >= 0);
    close(fd); /* mkstemp made it 0600, as libpq wants */
    write_passfile(pf, PW3_OLD);
    char ci[1024];
    snprintf(ci, sizeof(ci),
             "host=%s port=%d user=" ROLE3 " dbname=%s passfile=%s "
             "tether_pool_max=2 tether_pool_name=rotated "
             "tether_leak_threshold=1h",
             env.host, env.port, env.db, pf);
    tether_pool *p = NULL;
    tether_error err = {0};
    if (tether_pool_open(&p, ci, on_event, "pool-event", &err) != 0)
        fail_msg("%s", err.message);
    tether_lease *l1 = NULL, *l2 = NULL, *l = NULL;
    char b1[64], b2[64], b[64];
    assert_int_equal(tether_pool_acquire(p, 5000, &l1, &err), 0);
    assert_int_equal(tether_pool_acquire(p, 5000, &l2, &err), 0);
    backend_of(l1, b1, sizeof(b1));
    backend_of(l2, b2, sizeof(b2));
    tether_lease_release(l1); /* idle; l2 stays leased */
    superuser_sql("ALTER ROLE " ROLE3 " PASSWORD '" PW3_NEW "';\n");
    write_passfile(pf, PW3_NEW);
    /* No reconnect yet: the old session is reused. */
    assert_int_equal(tether_pool_acquire(p, 5000, &l, &err), 0);
    backend_of(l, b, sizeof(b));
    assert_string_equal(b, b1);
    tether_lease_release(l);
    assert_int_equal(tether_pool_reconnect(p), 0);
    backend_of(l2, b, sizeof(b)); /* the leased one works until released */
    assert_string_equal(b, b2);
    tether_lease_release(l2);
    /* Both connections now are new ones, made with the new password. */
    assert_int_equal(tether_pool_acquire(p, 5000, &l1, &err), 0);
    assert_int_equal(tether_pool_acquire(p, 5000, &l2, &err), 0);
    backend_of(l1, b, sizeof(b));
    assert_string_not_equal(b, b1);
    assert_string_not_equal(b, b2);
    assert_non_null(strstr(b, " " ROLE3));
    backend_of(l2, b, sizeof(b));
    assert_string_not_equal(b, b1);
    assert_string_not_equal(b, b2);
    tether_pool_metrics m;
    tether_pool_metrics_get(p, &m);
    assert_int_equal(m.reconnects, 1);
    assert_int_equal(m.closed_cleared, 2);
    /* Exhausted: the message names the site, and no password. */
    int rc = tether_pool_acquire(p, 100, &l, &err);
    assert_int_equal(rc, TETHER_ETIMEDOUT);
    assert_int_equal(err.cls, TETHER_CLASS_THROTTLED);
    assert_non_null(strstr(err.message, "pool rotated: no connection"));
    assert_non_null(strstr(err.message, "test_secrets.c:"));
    capture_err("pool-exhausted", rc, &err);
    capture_metrics("prometheus-rotated", p);
    tether_lease_release(l1);
    tether_lease_release(l2);
    tether_pool_destroy(p);
    unlink(pf);
    scan_capture("reconnect", 2);
}

/* ---- the registry: errors and eviction messages ----------------------- */

static void test_registry_paths(void **state) {
    (void)state;
    tether_vclock *vc = tether_vclock_create(0);
    tether_registry_opts ro;
    tether_registry_opts_init(&ro);
    ro.pool.clock = tether_vclock_clock(vc);
    ro.pool.log = log_sink;
    ro.pool.log_ctx = "registry-log";
    ro.evict_idle_ms = 1000;
    tether_registry *reg = NULL;
    tether_error err = {0};
    assert_int_equal(tether_registry_create(&reg, &ro, &err), 0);
    char good[1024], wrong[1024];
    snprintf(good, sizeof(good), "postgresql://%s:%s@%s:%d/%s", ROLE2, PW,
             env.host, env.port, env.db);
    conn_kv(wrong, sizeof(wrong), env.user, PW, NULL);
    tether_lease *l = NULL;
    assert_int_equal(tether_registry_acquire(reg, good, 5000, &l, &err), 0);
    tether_lease_release(l);
    for (int i = 0; i < 3; i++) {
        int rc = tether_registry_acquire(reg, wrong, 5000, &l, &err);
        assert_int_not_equal(rc, 0);
        capture_err("registry-acquire", rc, &err);
    }
    for (size_t i = 0; i < sizeof(bad_strings) / sizeof(*bad_strings); i++) {
        int rc = tether_registry_acquire(reg, bad_strings[i], 0, &l, &err);
        assert_int_not_equal(rc, 0);
        capture_err("registry-acquire-bad", rc, &err);
    }
    assert_int_equal(tether_registry_count(reg), 2);
    /* Both pools idle: evicted, each logged by its display name. */
    for (int i = 0; i < 4 && tether_registry_count(reg) > 0; i++)
        tether_vclock_advance(vc, INT64_C(1000000000));
    assert_int_equal(tether_registry_count(reg), 0);
    tether_registry_destroy(reg);
    tether_vclock_destroy(vc);
    pthread_mutex_lock(&cap_lock);
    int evictions = 0;
    for (const char *s = cap_buf; (s = strstr(s, "closing idle pool")); s++)
        evictions++;
    pthread_mutex_unlock(&cap_lock);
    assert_int_equal(evictions, 2);
    scan_capture("registry", 10);
}

/* A registry whose template has a driver (the sim) names each pool by the
 * display form and logs it on eviction: no secret, also for a password
 * with a space left unquoted, whose second half parses as a keyword. */
static const char *const template_strings[] = {
    "host=h password=" PW_A " " PW_B "=1",
    "host=h password=" PW_A " " PW_B "=" PW_A,
    "host=h password=" PW " x=1",
    "postgresql://u:" PW "@h/d?" PW_B "=1",
};

static void test_registry_template_names(void **state) {
    (void)state;
    tether_vclock *vc = tether_vclock_create(0);
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    so.clock = tether_vclock_clock(vc);
    tether_sim *sim = NULL;
    assert_int_equal(tether_sim_create(&sim, &so, NULL), 0);
    tether_registry_opts ro;
    tether_registry_opts_init(&ro);
    ro.pool.driver = tether_driver_sim();
    ro.pool.driver_ctx = sim;
    ro.pool.clock = tether_vclock_clock(vc);
    ro.pool.log = log_sink;
    ro.pool.log_ctx = "registry-sim-log";
    ro.evict_idle_ms = 1000;
    tether_registry *reg = NULL;
    tether_error err = {0};
    assert_int_equal(tether_registry_create(&reg, &ro, &err), 0);
    const size_t ng = sizeof(good_strings) / sizeof(*good_strings);
    const size_t nt = sizeof(template_strings) / sizeof(*template_strings);
    for (size_t i = 0; i < ng + nt; i++) {
        const char *s = i < ng ? good_strings[i] : template_strings[i - ng];
        tether_lease *l = NULL;
        int rc = tether_registry_acquire(reg, s, 1000, &l, &err);
        if (rc != 0)
            fail_msg("acquire %zu: %s", i, err.message);
        tether_lease_release(l);
        capture_display(s);
    }
    int pools = tether_registry_count(reg);
    for (int i = 0; i < 4 && tether_registry_count(reg) > 0; i++)
        tether_vclock_advance(vc, INT64_C(1000000000));
    assert_int_equal(tether_registry_count(reg), 0);
    tether_registry_destroy(reg);
    tether_sim_destroy(sim);
    tether_vclock_destroy(vc);
    assert_true(pools >= 10);
    scan_capture("registry pool names", 2 * pools);
}

/* ---- two credentials never share a connection ------------------------- */

enum { CRED_GOOD1, CRED_GOOD2, CRED_WRONG1, CRED_WRONG2, NCRED };
enum { NFORMS = 3, NTHREADS = 8, ITERS = 150, MAXBACKENDS = 512 };

/* A credential: the user it must log in as (NULL: it must never log in),
 * and several spellings of its connection string (one registry key). */
static struct cred {
    const char *user;
    char forms[NFORMS][512];
    atomic_int ok, failed, wrong_user;
} creds[NCRED];

/* Every backend seen: (pid, backend_start) -> user, and who holds it. */
static struct backend {
    int pid;
    char start[64];
    char user[64];
    int held;
} backends[MAXBACKENDS];
static int nbackends;
static pthread_mutex_t be_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int shared_backends, double_holds, reg_errors;

static void make_forms(struct cred *c, const char *user, const char *pw) {
    const char *pool = "tether_pool_max=3";
    snprintf(c->forms[0], sizeof(c->forms[0]),
             "host=%s port=%d user=%s password=%s dbname=%s %s", env.host,
             env.port, user, pw, env.db, pool);
    snprintf(c->forms[1], sizeof(c->forms[1]),
             "%s  dbname=%s password='%s' user=%s port=%d host=%s", pool,
             env.db, pw, user, env.port, env.host);
    snprintf(c->forms[2], sizeof(c->forms[2]),
             "postgresql://%s@%s:%d/%s?password=%s&%s", user, env.host,
             env.port, env.db, pw, pool);
}

/* hold marks the backend (pid, start) held by a caller of user. */
static void hold(const char *pid, const char *start, const char *user, int on) {
    pthread_mutex_lock(&be_lock);
    int i = 0, p = atoi(pid);
    while (i < nbackends &&
           !(backends[i].pid == p && !strcmp(backends[i].start, start)))
        i++;
    if (i == nbackends) {
        assert_true(nbackends < MAXBACKENDS);
        backends[i].pid = p;
        snprintf(backends[i].start, sizeof(backends[i].start), "%s", start);
        snprintf(backends[i].user, sizeof(backends[i].user), "%s", user);
        nbackends++;
    }
    if (strcmp(backends[i].user, user) != 0)
        atomic_fetch_add(&shared_backends, 1);
    if (on && backends[i].held++ > 0)
        atomic_fetch_add(&double_holds, 1);
    if (!on)
        backends[i].held--;
    pthread_mutex_unlock(&be_lock);
}

typedef struct worker {
    tether_registry *reg;
    unsigned seed;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    for (int i = 0; i < ITERS; i++) {
        struct cred *c = &creds[rand_r(&w->seed) % NCRED];
        const char *ci = c->forms[rand_r(&w->seed) % NFORMS];
        tether_lease *l = NULL;
        tether_error err = {0};
        int rc = tether_registry_acquire(w->reg, ci, 10000, &l, &err);
        if (rc != 0) {
            atomic_fetch_add(&c->failed, 1);
            capture_err("concurrent-acquire", rc, &err);
            if (c->user && rc != TETHER_ETIMEDOUT)
                atomic_fetch_add(&reg_errors, 1);
            continue;
        }
        atomic_fetch_add(&c->ok, 1);
        PGresult *r = PQexec(tether_pq_conn(l),
                             "SELECT current_user, pg_backend_pid(), "
                             "backend_start::text FROM pg_stat_activity "
                             "WHERE pid = pg_backend_pid()");
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
            capturef("concurrent-query", "%s",
                     PQerrorMessage(tether_pq_conn(l)));
            atomic_fetch_add(&reg_errors, 1);
            PQclear(r);
            tether_lease_discard(l);
            continue;
        }
        const char *user = PQgetvalue(r, 0, 0);
        if (!c->user || strcmp(user, c->user) != 0)
            atomic_fetch_add(&c->wrong_user, 1);
        hold(PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2), user, 1);
        usleep((useconds_t)(rand_r(&w->seed) % 2000));
        hold(PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2), user, 0);
        PQclear(r);
        if (rand_r(&w->seed) % 10 == 0)
            tether_lease_discard(l); /* new backends all along */
        else
            tether_lease_release(l);
        if (i == ITERS / 2 && w->seed % 4 == 0)
            tether_registry_clear_all(w->reg);
    }
    return NULL;
}

static void test_two_credentials_never_share(void **state) {
    (void)state;
    creds[CRED_GOOD1].user = env.user;
    make_forms(&creds[CRED_GOOD1], env.user, env.password);
    creds[CRED_GOOD2].user = ROLE2;
    make_forms(&creds[CRED_GOOD2], ROLE2, PW);
    creds[CRED_WRONG1].user = NULL; /* the same user, a wrong password */
    make_forms(&creds[CRED_WRONG1], env.user, PW);
    creds[CRED_WRONG2].user = NULL; /* the second role, the other's password */
    make_forms(&creds[CRED_WRONG2], ROLE2, env.password);

    tether_registry_opts ro;
    tether_registry_opts_init(&ro);
    tether_registry *reg = NULL;
    tether_error err = {0};
    assert_int_equal(tether_registry_create(&reg, &ro, &err), 0);
    /* The good pools first hold idle connections, so that a wrong password
     * would have something to be handed. */
    for (int c = CRED_GOOD1; c <= CRED_GOOD2; c++) {
        tether_lease *l = NULL;
        assert_int_equal(
            tether_registry_acquire(reg, creds[c].forms[0], 10000, &l, &err),
            0);
        tether_lease_release(l);
    }
    pthread_t t[NTHREADS];
    worker w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){reg, 0x5eed0000u + (unsigned)i};
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    int pools = tether_registry_count(reg);
    tether_registry_destroy(reg);

    int users[2] = {0, 0};
    for (int i = 0; i < nbackends; i++)
        users[strcmp(backends[i].user, env.user) != 0]++;
    print_message("two credentials: %d threads x %d acquires, %d pools, "
                  "%d backends (%d %s, %d %s)\n",
                  NTHREADS, ITERS, pools, nbackends, users[0], env.user,
                  users[1], ROLE2);
    for (int c = 0; c < NCRED; c++)
        print_message("  credential %d (%s): %d served, %d refused, %d as "
                      "another user\n",
                      c, creds[c].user ? creds[c].user : "wrong password",
                      atomic_load(&creds[c].ok), atomic_load(&creds[c].failed),
                      atomic_load(&creds[c].wrong_user));
    assert_int_equal(atomic_load(&shared_backends), 0);
    assert_int_equal(atomic_load(&double_holds), 0);
    assert_int_equal(atomic_load(&reg_errors), 0);
    for (int c = 0; c < NCRED; c++) {
        assert_int_equal(atomic_load(&creds[c].wrong_user), 0);
        if (creds[c].user)
            assert_true(atomic_load(&creds[c].ok) > 0);
        else
            assert_int_equal(atomic_load(&creds[c].ok), 0);
        assert_true(atomic_load(&creds[c].ok) + atomic_load(&creds[c].failed) >
                    0);
    }
    assert_true(users[0] > 0 && users[1] > 0);
    assert_int_equal(pools, NCRED); /* the spellings share one key each */
    scan_capture("two credentials", 1);
}

/* ---- main ------------------------------------------------------------- */

int main(void) {
    if (!getenv("PRIMARY_PORT")) {
        fprintf(stderr, "usage: scripts/pg-cluster run -- test_secrets\n");
        return 2;
    }
    env.host = getenv("PGC_HOST") ? getenv("PGC_HOST") : "127.0.0.1";
    env.port = atoi(getenv("PRIMARY_PORT"));
    env.user = getenv("PGC_USER") ? getenv("PGC_USER") : "tether";
    env.password =
        getenv("PGC_PASSWORD") ? getenv("PGC_PASSWORD") : "tether-secret";
    env.db = getenv("PGC_DB") ? getenv("PGC_DB") : "tetherdb";
    secrets[nsecrets++] = PW;
    secrets[nsecrets++] = PW_A;
    secrets[nsecrets++] = PW_B;
    secrets[nsecrets++] = env.password;
    secrets[nsecrets++] = "S3cr3t%2DPa55"; /* PW percent-encoded */
    secrets[nsecrets++] = PW3_OLD;
    secrets[nsecrets++] = PW3_NEW;
    tether_set_log(log_sink, "process-log", TETHER_LOG_DEBUG);
    /* A second login role; the database's CONNECT is PUBLIC's. */
    superuser_sql("DROP ROLE IF EXISTS " ROLE2 ";\n"
                  "CREATE ROLE " ROLE2 " LOGIN PASSWORD '" PW "';\n"
                  "DROP ROLE IF EXISTS " ROLE3 ";\n"
                  "CREATE ROLE " ROLE3 " LOGIN PASSWORD '" PW3_OLD "';\n");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_scanner_finds_a_planted_secret,
                               empty_capture),
        cmocka_unit_test_setup(test_conninfo_errors_and_names, empty_capture),
        cmocka_unit_test_setup(test_connect_failures, empty_capture),
        cmocka_unit_test_setup(test_pool_paths, empty_capture),
        cmocka_unit_test_setup(test_registry_paths, empty_capture),
        cmocka_unit_test_setup(test_registry_template_names, empty_capture),
        cmocka_unit_test_setup(test_two_credentials_never_share, empty_capture),
        cmocka_unit_test_setup(test_reconnect_after_password_change,
                               empty_capture),
    };
    int rc = cmocka_run_group_tests_name("secrets", tests, NULL, NULL);
    tether_set_log(NULL, NULL, TETHER_LOG_ERROR);
    free(cap_buf);
    return rc;
}
