/* test_pq.c - unit tests for the PostgreSQL driver that need no server: the
 * SQLSTATE table, the classification of libpq's connect messages (terse and
 * verbose forms, several attempts in one message), the message tether builds
 * from them, password scrubbing, the parameters object (host, hostaddr and
 * port rejected), tether_pq_error without a server, the driver's classify,
 * and connects over loopback that need no PostgreSQL: a closed port (fast,
 * refused), a listener that never answers (the budget is kept), an invalid
 * parameter value (fails at once). */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include "../support/clock.h"
#include "../support/net.h"
#include "driver.h"
#include "pq.h"
#include "tether.h"
#include "tether_pq.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define T TETHER_CLASS_TRANSIENT
#define THR TETHER_CLASS_THROTTLED
#define P TETHER_CLASS_PERMANENT

/* ---- the SQLSTATE table ----------------------------------------------- */

typedef struct state_case {
    const char *state;
    int code;
    tether_class cls;
} state_case;

static const state_case state_cases[] = {
    {"08000", TETHER_EBROKEN, T},
    {"08003", TETHER_EBROKEN, T},
    {"08006", TETHER_EBROKEN, T},
    {"08P01", TETHER_EBROKEN, T},
    {"08001", TETHER_ECONNECT, T},
    {"08004", TETHER_ECONNECT, T},
    {"53300", TETHER_ETHROTTLED, THR},
    {"53000", TETHER_ETHROTTLED, T},
    {"53100", TETHER_ETHROTTLED, T},
    {"53200", TETHER_ETHROTTLED, T},
    {"53400", TETHER_ETHROTTLED, T},
    {"57P01", TETHER_EBROKEN, T},
    {"57P02", TETHER_EBROKEN, T},
    {"57P03", TETHER_ETHROTTLED, THR},
    {"57P05", TETHER_EBROKEN, T},
    {"25P03", TETHER_EBROKEN, T},
    {"58000", TETHER_EIO, T},
    {"58030", TETHER_EIO, T},
    {"58P01", TETHER_EIO, T},
    {"40001", TETHER_ECONFLICT, T},
    {"40P01", TETHER_ECONFLICT, T},
    {"55P03", TETHER_ECONFLICT, T},
    {"25006", TETHER_EREADONLY, T},
    {"28000", TETHER_EAUTH, P},
    {"28P01", TETHER_EAUTH, P},
    {"22012", TETHER_EQUERY, P},
    {"23505", TETHER_EQUERY, P},
    {"42P01", TETHER_EQUERY, P},
    {"42601", TETHER_EQUERY, P},
    {"40002", TETHER_EQUERY, P},
    {"57014", TETHER_ETIMEDOUT, T},
    {"57P04", TETHER_EQUERY, P},
    {"55000", TETHER_EQUERY, P},
    {"25001", TETHER_EQUERY, P},
    {"XX000", TETHER_EQUERY, P},
    {"3D000", TETHER_EQUERY, P},
    /* malformed: the permanent default */
    {"", TETHER_EQUERY, P},
    {"0800", TETHER_EQUERY, P},
    {"080066", TETHER_EQUERY, P},
    {"08oo6", TETHER_EQUERY, P},
    {"40 01", TETHER_EQUERY, P},
};

static void test_sqlstate_table(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(state_cases) / sizeof(*state_cases); i++) {
        const state_case *c = &state_cases[i];
        int code = 0;
        tether_class cls = TETHER_CLASS_NONE;
        int rc = tether__pq_classify_sqlstate(c->state, &code, &cls);
        if (rc != c->code || code != c->code || cls != c->cls)
            fail_msg("SQLSTATE '%s': got %s/%s, want %s/%s", c->state,
                     tether_errname(code), tether_class_name(cls),
                     tether_errname(c->code), tether_class_name(c->cls));
    }
}

static void test_sqlstate_null(void **state) {
    (void)state;
    tether_class cls = TETHER_CLASS_NONE;
    assert_int_equal(tether__pq_classify_sqlstate(NULL, NULL, &cls),
                     TETHER_EQUERY);
    assert_int_equal(cls, P);
    /* out pointers may be NULL */
    assert_int_equal(tether__pq_classify_sqlstate("40001", NULL, NULL),
                     TETHER_ECONFLICT);
}

/* ---- connect messages ------------------------------------------------- */

typedef struct msg_case {
    const char *libpq; /* PQerrorMessage after a failed connect */
    int code;
    tether_class cls;
    const char *state;
    const char *message; /* what tether builds, exactly */
} msg_case;

#define AT "connection to server at \"127.0.0.1\", port 5432 failed: "
#define OUT "connect to db1:5432 failed: "

static const msg_case msg_cases[] = {
    {AT "FATAL:  sorry, too many clients already\n", TETHER_ETHROTTLED, THR,
     "53300", OUT "FATAL:  sorry, too many clients already"},
    {AT "FATAL:  53300: remaining connection slots are reserved for "
        "non-replication superuser connections\nLOCATION:  InitPostgres, "
        "postinit.c:1009\n",
     TETHER_ETHROTTLED, THR, "53300",
     OUT "FATAL:  remaining connection slots are reserved for "
         "non-replication superuser connections"},
    {AT "FATAL:  remaining connection slots are reserved for roles with the "
        "SUPERUSER attribute\n",
     TETHER_ETHROTTLED, THR, "53300",
     OUT "FATAL:  remaining connection slots are reserved for roles with the "
         "SUPERUSER attribute"},
    {AT "FATAL:  too many connections for role \"app\"\n", TETHER_ETHROTTLED,
     THR, "53300", OUT "FATAL:  too many connections for role \"app\""},
    {AT "FATAL:  the database system is starting up\n", TETHER_ETHROTTLED, THR,
     "57P03", OUT "FATAL:  the database system is starting up"},
    {AT "FATAL:  the database system is shutting down\n", TETHER_ETHROTTLED,
     THR, "57P03", OUT "FATAL:  the database system is shutting down"},
    {AT "FATAL:  the database system is in recovery mode\n", TETHER_ETHROTTLED,
     THR, "57P03", OUT "FATAL:  the database system is in recovery mode"},
    {AT "FATAL:  the database system is not yet accepting connections\n"
        "DETAIL:  Consistent recovery state has not been yet reached.\n",
     TETHER_ETHROTTLED, THR, "57P03",
     OUT "FATAL:  the database system is not yet accepting connections"},
    {AT "FATAL:  57P03: the database system is not accepting connections\n"
        "DETAIL:  Hot standby mode is disabled.\n",
     TETHER_ETHROTTLED, THR, "57P03",
     OUT "FATAL:  the database system is not accepting connections"},
    {AT "FATAL:  password authentication failed for user \"tether\"\n",
     TETHER_EAUTH, P, "28P01",
     OUT "FATAL:  password authentication failed for user \"tether\""},
    {AT "FATAL:  28P01: password authentication failed for user \"bob\"\n"
        "LOCATION:  auth_failed, auth.c:326\n",
     TETHER_EAUTH, P, "28P01",
     OUT "FATAL:  password authentication failed for user \"bob\""},
    {AT "FATAL:  no pg_hba.conf entry for host \"10.0.0.1\", user \"u\", "
        "database \"d\", no encryption\n",
     TETHER_EAUTH, P, "28000",
     OUT "FATAL:  no pg_hba.conf entry for host \"10.0.0.1\", user \"u\", "
         "database \"d\", no encryption"},
    {AT "fe_sendauth: no password supplied\n", TETHER_EAUTH, P, "28P01",
     OUT "fe_sendauth: no password supplied"},
    {AT "FATAL:  Ident authentication failed for user \"x\"\n", TETHER_EAUTH, P,
     "28000", OUT "FATAL:  Ident authentication failed for user \"x\""},
    {AT "FATAL:  database \"nope\" does not exist\n", TETHER_ECONNECT, P,
     "3D000", OUT "FATAL:  database \"nope\" does not exist"},
    {AT "FATAL:  3D000: database \"nope\" does not exist\nLOCATION:  "
        "InitPostgres, postinit.c:885\n",
     TETHER_ECONNECT, P, "3D000",
     OUT "FATAL:  database \"nope\" does not exist"},
    {AT "FATAL:  role \"ghost\" does not exist\n", TETHER_ECONNECT, P, "28000",
     OUT "FATAL:  role \"ghost\" does not exist"},
    {AT "FATAL:  28000: role \"ghost\" does not exist\n", TETHER_ECONNECT, P,
     "28000", OUT "FATAL:  role \"ghost\" does not exist"},
    {AT "FATAL:  57P01: terminating connection due to administrator "
        "command\n",
     TETHER_ECONNECT, T, "57P01",
     OUT "FATAL:  terminating connection due to administrator command"},
    {AT "Connection refused\n\tIs the server running on that host and "
        "accepting TCP/IP connections?\n",
     TETHER_ECONNECT, T, "08001", OUT "Connection refused"},
    {"could not connect to server: Connection refused\n\tIs the server "
     "running on host \"db1\" (10.0.0.1) and accepting\n",
     TETHER_ECONNECT, T, "08001",
     OUT "could not connect to server: Connection refused"},
    {"could not translate host name \"nope.invalid\" to address: Name or "
     "service not known\n",
     TETHER_ERESOLVE, T, "",
     OUT "could not translate host name \"nope.invalid\" to address: Name or "
         "service not known"},
    {AT "server closed the connection unexpectedly\n\tThis probably means the "
        "server terminated abnormally\n\tbefore or while processing the "
        "request.\n",
     TETHER_ECONNECT, T, "08006",
     OUT "server closed the connection unexpectedly"},
    {"timeout expired\n", TETHER_ECONNECT, T, "08001", OUT "timeout expired"},
    {AT "Connection timed out\n", TETHER_ECONNECT, T, "08001",
     OUT "Connection timed out"},
    {"invalid connection option \"usr\"\n", TETHER_ESPEC, P, "",
     OUT "invalid connection option \"usr\""},
    {"invalid sslmode value: \"maybe\"\n", TETHER_ESPEC, P, "",
     OUT "invalid sslmode value: \"maybe\""},
    {"invalid integer value \"x\" for connection option \"keepalives\"\n",
     TETHER_ESPEC, P, "",
     OUT "invalid integer value \"x\" for connection option \"keepalives\""},
    {AT "server does not support SSL, but SSL was required\n", TETHER_ECONNECT,
     P, "", OUT "server does not support SSL, but SSL was required"},
    {AT "session is read-only\n", TETHER_EREADONLY, T, "",
     OUT "session is read-only"},
    {AT "server is not in hot standby mode\n", TETHER_ENOHOST, T, "",
     OUT "server is not in hot standby mode"},
    {"connection to server on socket \"/tmp/.s.PGSQL.5432\" failed: No such "
     "file or directory\n\tIs the server running locally?\n",
     TETHER_ECONNECT, T, "", OUT "No such file or directory"},
    /* two attempts (localhost's two addresses): the auth failure decides
     * and names the line */
    {"connection to server at \"localhost\" (::1), port 5432 failed: "
     "Connection refused\n\tIs the server running on that host?\n"
     "connection to server at \"localhost\" (127.0.0.1), port 5432 failed: "
     "FATAL:  password authentication failed for user \"u\"\n",
     TETHER_EAUTH, P, "28P01",
     OUT "FATAL:  password authentication failed for user \"u\""},
    {"", TETHER_ECONNECT, T, "", OUT "connection failed"},
};

static void check_msg_case(const msg_case *c) {
    tether_error err;
    memset(&err, 0x5a, sizeof(err));
    int rc = tether__pq_connect_error("db1:5432", c->libpq, NULL, &err);
    if (rc != c->code || err.code != c->code || err.cls != c->cls ||
        strcmp(err.sqlstate, c->state) != 0 ||
        strcmp(err.message, c->message) != 0 || err.not_sent != 1)
        fail_msg("for %s\n got %s/%s/'%s' \"%s\" not_sent=%d\nwant %s/%s/'%s' "
                 "\"%s\"",
                 c->libpq, tether_errname(err.code), tether_class_name(err.cls),
                 err.sqlstate, err.message, err.not_sent,
                 tether_errname(c->code), tether_class_name(c->cls), c->state,
                 c->message);
}

static void test_connect_messages(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(msg_cases) / sizeof(*msg_cases); i++)
        check_msg_case(&msg_cases[i]);
}

static void test_connect_classify_line(void **state) {
    (void)state;
    int code;
    tether_class cls;
    char st[6];
    const char *line = NULL;
    size_t len = 0;
    const char *msg = "first\nsecond: too many clients already\nthird";
    tether__pq_classify_connect(msg, &code, &cls, st, &line, &len);
    assert_int_equal(code, TETHER_ETHROTTLED);
    assert_ptr_equal(line, msg + 6);
    assert_int_equal(len, strlen("second: too many clients already"));
    /* NULL message, NULL outs */
    assert_int_equal(
        tether__pq_classify_connect(NULL, NULL, NULL, NULL, NULL, NULL),
        TETHER_ECONNECT);
    /* err NULL: the code is still returned */
    assert_int_equal(
        tether__pq_connect_error("h:1", "FATAL:  28P01: x", NULL, NULL),
        TETHER_EAUTH);
}

/* ---- scrubbing -------------------------------------------------------- */

typedef struct scrub_case {
    const char *in;
    const char *password;
    const char *out;
    int count;
} scrub_case;

static const scrub_case scrub_cases[] = {
    {"bad value password=hunter2 for x", NULL, "bad value password=*** for x",
     1},
    {"password = 'se cret' host=x", NULL, "password = *** host=x", 1},
    {"PASSWORD='a\\'b c' user=u", NULL, "PASSWORD=*** user=u", 1},
    {"ALTER ROLE x PASSWORD 'topsecret'", NULL, "ALTER ROLE x PASSWORD ***", 1},
    {"postgresql://bob:s3cret@db:5432/app", NULL,
     "postgresql://bob:***@db:5432/app", 1},
    {"postgres://bob@db/app and postgres://a:b@c/d", NULL,
     "postgres://bob@db/app and postgres://a:***@c/d", 1},
    {"password authentication failed for user \"x\"", NULL,
     "password authentication failed for user \"x\"", 0},
    {"password=", NULL, "password=", 0},
    {"the secret is tether-secret!", "tether-secret", "the secret is ***!", 1},
    {"x=sekrit y=sekrit", "sekrit", "x=*** y=***", 2},
    {"password=ab ab", "ab", "password=*** ab", 1}, /* too short: literal off */
    {"user=u password=p1 password=p2", NULL, "user=u password=*** password=***",
     2},
};

static void test_scrub(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(scrub_cases) / sizeof(*scrub_cases); i++) {
        const scrub_case *c = &scrub_cases[i];
        char buf[128];
        snprintf(buf, sizeof(buf), "%s", c->in);
        int n = tether__pq_scrub(buf, sizeof(buf), c->password);
        if (strcmp(buf, c->out) != 0 || n != c->count)
            fail_msg("scrub '%s': got '%s' (%d), want '%s' (%d)", c->in, buf, n,
                     c->out, c->count);
    }
}

static void test_scrub_tight_buffer(void **state) {
    (void)state;
    char buf[12] = "password=ab"; /* full: the stars need one more byte */
    assert_int_equal(tether__pq_scrub(buf, sizeof(buf), NULL), 1);
    assert_string_equal(buf, "password=**");
    char one[11] = "password=a";
    tether__pq_scrub(one, sizeof(one), NULL);
    assert_string_equal(one, "password=*");
    assert_int_equal(tether__pq_scrub(NULL, 10, NULL), 0);
}

static void test_connect_error_never_shows_password(void **state) {
    (void)state;
    tether_error err;
    const char *pw = "sekrit-9";
    tether__pq_connect_error("h:1", "FATAL:  password=sekrit-9 bad: sekrit-9",
                             pw, &err);
    assert_null(strstr(err.message, "sekrit"));
    /* a long line with the password across the cut at TETHER_MSG_MAX */
    char msg[600];
    int n = snprintf(msg, sizeof(msg), "FATAL:  ");
    while (n < 230)
        msg[n++] = 'x';
    snprintf(msg + n, sizeof(msg) - (size_t)n, " tether-secret-long tail");
    tether__pq_connect_error("h:1", msg, "tether-secret-long", &err);
    assert_null(strstr(err.message, "tether-sec"));
    assert_int_equal(strlen(err.message), TETHER_MSG_MAX - 1);
}

/* ---- parameters ------------------------------------------------------- */

static int make_params(const char *key, const char *val, tether_error *err) {
    const char *keys[] = {"user", key};
    const char *vals[] = {"u", val};
    tether__pq_params *p = NULL;
    int rc = tether__pq_params_create(&p, keys, vals, 2, err);
    tether__pq_params_destroy(p);
    return rc;
}

static void test_params_reject_endpoint_keys(void **state) {
    (void)state;
    const char *bad[] = {"host", "hostaddr", "port", "PORT", "Host"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        tether_error err;
        assert_int_equal(make_params(bad[i], "x", &err), TETHER_EINVAL);
        assert_int_equal(err.cls, P);
        assert_non_null(strstr(err.message, bad[i]));
    }
    tether_error err;
    assert_int_equal(make_params("usr", "x", &err), TETHER_EINVAL);
    assert_non_null(strstr(err.message, "\"usr\""));
    assert_int_equal(make_params(NULL, "x", &err), TETHER_EINVAL);
    assert_int_equal(make_params("", "x", &err), TETHER_EINVAL);
}

static void test_params_copy(void **state) {
    (void)state;
    char user[] = "alice";
    const char *keys[] = {"user", "password", "dbname", "application_name",
                          "dbname"};
    const char *vals[] = {user, "pw", "first", NULL, "second"};
    tether__pq_params *p = NULL;
    tether_error err;
    assert_int_equal(tether__pq_params_create(&p, keys, vals, 5, &err), 0);
    user[0] = 'X'; /* copied */
    assert_string_equal(tether__pq_params_get(p, "user"), "alice");
    assert_string_equal(tether__pq_params_get(p, "password"), "pw");
    assert_string_equal(tether__pq_params_get(p, "dbname"), "second");
    assert_null(tether__pq_params_get(p, "application_name")); /* NULL value */
    assert_null(tether__pq_params_get(p, "sslmode"));
    assert_null(tether__pq_params_get(NULL, "user"));
    tether__pq_params_destroy(p);
    tether__pq_params_destroy(NULL);
    assert_int_equal(tether__pq_params_create(&p, NULL, NULL, 0, &err), 0);
    tether__pq_params_destroy(p);
    assert_int_equal(tether__pq_params_create(NULL, keys, vals, 1, &err),
                     TETHER_EINVAL);
    assert_int_equal(tether__pq_params_create(&p, keys, vals, -1, &err),
                     TETHER_EINVAL);
    assert_int_equal(tether__pq_params_create(&p, NULL, vals, 1, &err),
                     TETHER_EINVAL);
}

/* ---- tether_pq_error and classify ------------------------------------- */

static void test_pq_error_without_server(void **state) {
    (void)state;
    tether_error err;
    assert_int_equal(tether_pq_error(NULL, NULL, &err), TETHER_EBROKEN);
    assert_int_equal(err.cls, T);
    assert_int_equal(err.not_sent, 0);
    PGresult *ok = PQmakeEmptyPGresult(NULL, PGRES_COMMAND_OK);
    err.code = TETHER_EFAILED;
    assert_int_equal(tether_pq_error(NULL, ok, &err), 0);
    assert_int_equal(err.code, 0);
    PQclear(ok);
    PGresult *bad = PQmakeEmptyPGresult(NULL, PGRES_FATAL_ERROR);
    assert_int_equal(tether_pq_error(NULL, bad, &err), TETHER_EBROKEN);
    assert_int_equal(tether_pq_error(NULL, bad, NULL), TETHER_EBROKEN);
    PQclear(bad);
}

static void classify_one(int code, tether_class preset, const char *st,
                         tether_class want) {
    tether_error err = {0};
    err.code = code;
    err.cls = preset;
    snprintf(err.sqlstate, sizeof(err.sqlstate), "%s", st);
    tether_driver_pq()->classify(NULL, &err);
    if (err.cls != want)
        fail_msg("classify %s/%s/'%s': got %s, want %s", tether_errname(code),
                 tether_class_name(preset), st, tether_class_name(err.cls),
                 tether_class_name(want));
}

static void test_classify(void **state) {
    (void)state;
    classify_one(TETHER_EQUERY, P, "40001", T); /* the SQLSTATE decides */
    classify_one(TETHER_EBROKEN, T, "53300", THR);
    classify_one(TETHER_EQUERY, T, "42601", P);
    classify_one(TETHER_EBROKEN, P, "", P); /* a class already set stays */
    classify_one(TETHER_ECONNECT, TETHER_CLASS_NONE, "", T);
    classify_one(TETHER_ETIMEDOUT, TETHER_CLASS_NONE, "", T);
    classify_one(TETHER_EBROKEN, TETHER_CLASS_NONE, "", T);
    classify_one(TETHER_ERESOLVE, TETHER_CLASS_NONE, "", T);
    classify_one(TETHER_ETHROTTLED, TETHER_CLASS_NONE, "", THR);
    classify_one(TETHER_EAUTH, TETHER_CLASS_NONE, "", P);
    classify_one(TETHER_EQUERY, TETHER_CLASS_NONE, "", P);
    tether_driver_pq()->classify(NULL, NULL);
}

static void test_driver_table(void **state) {
    (void)state;
    const tether_driver *d = tether_driver_pq();
    assert_string_equal(d->name, "pq");
    assert_non_null(d->connect_start);
    assert_non_null(d->connect_poll);
    assert_non_null(d->alive);
    assert_non_null(d->validate);
    assert_non_null(d->reset);
    assert_non_null(d->close);
    assert_non_null(d->classify);
    assert_non_null(d->handle);
    assert_non_null(d->role);
    d->close(NULL);
    assert_null(d->handle(NULL));
    tether_error err;
    assert_int_equal(tether__pq_query_role(NULL, 10, &err), TETHER_EINVAL);
}

/* ---- loopback connects (no PostgreSQL needed) ------------------------- */

static tether__pq_params *test_params(void) {
    const char *keys[] = {"user", "password", "dbname", "sslmode"};
    const char *vals[] = {"u", "pw-never-shown", "d", "disable"};
    tether__pq_params *p = NULL;
    tether_error err;
    if (tether__pq_params_create(&p, keys, vals, 4, &err))
        fail_msg("params: %s", err.message);
    return p;
}

static void test_connect_refused(void **state) {
    (void)state;
    tether__pq_params *p = test_params();
    int port = closed_port();
    /* a host name with hostaddr: libpq does no DNS, the label keeps it */
    tether_endpoint ep = {"db.invalid", "127.0.0.1", port, -1};
    void *conn = (void *)1;
    tether_error err;
    int64_t t0 = now_ms();
    int rc = tether__driver_connect(tether_driver_pq(), p, &ep, 5000, NULL,
                                    &conn, &err);
    int64_t took = now_ms() - t0;
    assert_int_equal(rc, TETHER_ECONNECT);
    assert_null(conn);
    assert_int_equal(err.cls, T);
    assert_int_equal(err.not_sent, 1);
    assert_string_equal(err.sqlstate, "08001");
    char want[96];
    snprintf(want, sizeof(want),
             "connect to db.invalid:%d failed: Connection refused", port);
    assert_string_equal(err.message, want);
    assert_true(took < 1000);
    tether__pq_params_destroy(p);
}

static void test_connect_label_forms(void **state) {
    (void)state;
    tether__pq_params *p = test_params();
    int port = closed_port();
    tether_endpoint ep = {NULL, "127.0.0.1", port, -1};
    void *conn;
    tether_error err;
    char want[64];
    tether__driver_connect(tether_driver_pq(), p, &ep, 5000, NULL, &conn, &err);
    snprintf(want, sizeof(want), "connect to 127.0.0.1:%d failed: ", port);
    assert_memory_equal(err.message, want, strlen(want));
    ep = (tether_endpoint){NULL, "::1", port, -1};
    tether__driver_connect(tether_driver_pq(), p, &ep, 5000, NULL, &conn, &err);
    snprintf(want, sizeof(want), "connect to [::1]:%d failed: ", port);
    assert_memory_equal(err.message, want, strlen(want));
    assert_int_equal(err.code, TETHER_ECONNECT);
    tether__pq_params_destroy(p);
}

static void test_connect_budget_blackhole(void **state) {
    (void)state;
    tether__pq_params *p = test_params();
    int port;
    int fd =
        loopback_listener(&port); /* accepts the TCP handshake, never answers */
    tether_endpoint ep = {"127.0.0.1", NULL, port, -1};
    for (int budget = 20; budget <= 100; budget += 80) {
        void *conn;
        tether_error err;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int rc = tether__driver_connect(tether_driver_pq(), p, &ep, budget,
                                        NULL, &conn, &err);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double took = (double)(b.tv_sec - a.tv_sec) * 1e3 +
                      (double)(b.tv_nsec - a.tv_nsec) / 1e6;
        assert_int_equal(rc, TETHER_ETIMEDOUT);
        assert_int_equal(err.cls, T);
        assert_null(conn);
        /* driver.c keeps budgets on a whole-millisecond clock: allow the
         * sub-millisecond rounding below, a scheduling slack above */
        if (took < budget - 1.0 || took > budget + 100.0)
            fail_msg("budget %d ms: took %.3f ms", budget, took);
    }
    close(fd);
    tether__pq_params_destroy(p);
}

static void test_connect_bad_value_fails_at_once(void **state) {
    (void)state;
    const char *keys[] = {"sslmode", "password"};
    const char *vals[] = {"maybe", "pw-never-shown"};
    tether__pq_params *p = NULL;
    tether_error err;
    assert_int_equal(tether__pq_params_create(&p, keys, vals, 2, &err), 0);
    tether_endpoint ep = {"127.0.0.1", NULL, 1, -1};
    void *conn = (void *)1;
    tether_wait w = {-1, 0, -1};
    int rc = tether_driver_pq()->connect_start(p, &ep, &conn, &w, &err);
    assert_int_equal(rc, TETHER_ESPEC);
    assert_null(conn);
    assert_int_equal(err.cls, P);
    assert_non_null(strstr(err.message, "sslmode"));
    assert_null(strstr(err.message, "pw-never"));
    tether__pq_params_destroy(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sqlstate_table),
        cmocka_unit_test(test_sqlstate_null),
        cmocka_unit_test(test_connect_messages),
        cmocka_unit_test(test_connect_classify_line),
        cmocka_unit_test(test_scrub),
        cmocka_unit_test(test_scrub_tight_buffer),
        cmocka_unit_test(test_connect_error_never_shows_password),
        cmocka_unit_test(test_params_reject_endpoint_keys),
        cmocka_unit_test(test_params_copy),
        cmocka_unit_test(test_pq_error_without_server),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_driver_table),
        cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_connect_label_forms),
        cmocka_unit_test(test_connect_budget_blackhole),
        cmocka_unit_test(test_connect_bad_value_fails_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
