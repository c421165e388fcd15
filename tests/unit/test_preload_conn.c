/* test_preload_conn.c - unit tests for the preload's connection strings
 * (src/preload/conn.c): PQconnectdbParams arrays and PQsetdbLogin
 * arguments rendered by libpq's rules (empty values skipped, later
 * keywords win, quoting, a dbname connection string expanded in place, a
 * URI refused), the pooled form (the environment's defaults added only
 * where the program set none), the masked display form, the libpq-only
 * form, and what is never pooled (replication, no TETHER_PRELOAD_MATCH,
 * unparsable), the pool's key (what libpq would take from the environment
 * in it, never a secret in clear) and the scan for custom settings
 * (scan.c). The environment is set before the first call (read once). */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdlib.h>
#include <string.h>

#include "preload.h"

#define PW "S3cr3tPw"

static void test_params(void **state) {
    (void)state;
    const char *k[] = {"host", "port", "application_name", "user", "password",
                       "host", NULL};
    const char *v[] = {"h1", "5432", "", "bob", "it's\\" PW, "h2", NULL};
    char *s = tether__preload_conn_from_params(k, v, 0);
    assert_non_null(s);
    assert_string_equal(s, "host='h1' port='5432' user='bob' "
                           "password='it\\'s\\\\" PW "' host='h2'");
    free(s);
    tether__preload_conn c;
    s = tether__preload_conn_from_params(k, v, 0);
    v[1] = NULL; /* the string is a copy */
    k[3] = "dbname";
    v[3] = "app";
    char *s2 = tether__preload_conn_from_params(k, v, 0);
    assert_int_equal(tether__preload_conn_prepare(s2, &c), 0);
    free(s);
    free(s2);
    assert_non_null(strstr(c.pooled, "host='h2'")); /* the later one won */
    assert_null(strstr(c.pooled, "'h1'"));
    tether__preload_conn_free(&c);
}

static void test_params_expand(void **state) {
    (void)state;
    const char *k[] = {"port", "dbname", "user", NULL};
    const char *v[] = {"1", "host=a port=2 dbname=app", "u", NULL};
    char *s = tether__preload_conn_from_params(k, v, 1);
    assert_string_equal(s, "port='1' host=a port=2 dbname=app user='u'");
    free(s);
    s = tether__preload_conn_from_params(k, v,
                                         0); /* not expanded: a plain value */
    assert_string_equal(s, "port='1' dbname='host=a port=2 dbname=app' "
                           "user='u'");
    free(s);
    const char *vu[] = {"1", "postgresql://a/app", "u", NULL};
    assert_null(tether__preload_conn_from_params(k, vu, 1));
    s = tether__preload_conn_from_params(k, vu, 0);
    assert_non_null(s);
    free(s);
}

static void test_setdb(void **state) {
    (void)state;
    char *s = tether__preload_conn_from_setdb("h", NULL, "",
                                              "dbname=app port=9", "u", PW);
    assert_string_equal(s, "dbname=app port=9 host='h' user='u' "
                           "password='" PW "'");
    free(s);
    s = tether__preload_conn_from_setdb(NULL, "7", NULL, "app", NULL, NULL);
    assert_string_equal(s, "dbname='app' port='7'");
    free(s);
    assert_null(tether__preload_conn_from_setdb(
        NULL, NULL, NULL, "postgres://h/app", NULL, NULL));
    s = tether__preload_conn_from_setdb(NULL, NULL, NULL, NULL, NULL, NULL);
    assert_string_equal(s, "");
    free(s);
}

static void test_prepare_defaults(void **state) {
    (void)state;
    tether__preload_conn c;
    assert_int_equal(tether__preload_conn_prepare(
                         "host=h dbname=app user=u password=" PW, &c),
                     0);
    assert_non_null(c.pooled);
    assert_non_null(strstr(c.pooled, "tether_pool_max='7'")); /* env */
    assert_non_null(strstr(c.pooled, "tether_idle_timeout='1s'"));
    /* The preload resets (giveback.c), keeping prepared statements: the
     * pool's own reset only rolls back. */
    assert_non_null(strstr(c.pooled, "tether_reset_query=''"));
    assert_int_equal(c.own_reset, 1);
    assert_int_equal(c.keep_prepared, 1); /* TETHER_PRELOAD_KEEP_PREPARED */
    assert_non_null(strstr(c.pooled, "tether_acquire_timeout='30s'"));
    assert_non_null(strstr(c.pooled, "password='" PW "'"));
    assert_null(strstr(c.display, PW));
    assert_non_null(strstr(c.display, "password='***'"));
    assert_null(c.libpq); /* no tether keywords to take out */
    tether__preload_conn_free(&c);
}

static void test_prepare_own_keywords(void **state) {
    (void)state;
    tether__preload_conn c;
    assert_int_equal(
        tether__preload_conn_prepare("postgresql://u@h/app?tether_pool_max=3"
                                     "&tether_reset_query=none&sslmode=disable",
                                     &c),
        0);
    assert_non_null(c.pooled);
    assert_non_null(strstr(c.pooled, "tether_pool_max='3'"));
    assert_null(strstr(c.pooled, "tether_pool_max='7'"));
    assert_null(strstr(c.pooled, "tether_reset_query=''"));
    assert_int_equal(c.own_reset, 0); /* the program's own reset: the pool's */
    assert_int_equal(c.keep_prepared, 0);
    assert_non_null(c.libpq); /* for a pass-through: libpq's keys only */
    assert_null(strstr(c.libpq, "tether_"));
    assert_non_null(strstr(c.libpq, "sslmode='disable'"));
    tether__preload_conn_free(&c);
}

static void test_not_pooled(void **state) {
    (void)state;
    tether__preload_conn c;
    assert_int_equal(
        tether__preload_conn_prepare("dbname=app replication=database", &c), 0);
    assert_null(c.pooled);
    tether__preload_conn_free(&c);
    assert_int_equal(
        tether__preload_conn_prepare("dbname=app replication=false", &c), 0);
    assert_non_null(c.pooled);
    tether__preload_conn_free(&c);
    assert_int_equal(tether__preload_conn_prepare("dbname=nomatch", &c), 0);
    assert_null(c.pooled); /* TETHER_PRELOAD_MATCH */
    assert_non_null(c.display);
    tether__preload_conn_free(&c);
    assert_int_equal(tether__preload_conn_prepare("dbname=other host=x", &c),
                     0);
    assert_non_null(c.pooled); /* the second pattern */
    tether__preload_conn_free(&c);
    assert_int_equal(tether__preload_conn_prepare("dbname='app", &c), -1);
    assert_null(c.pooled);
}

/* key_of: the key of conninfo under the current environment (malloc'd). */
static char *key_of(const char *conninfo) {
    tether__preload_conn c;
    assert_int_equal(tether__preload_conn_prepare(conninfo, &c), 0);
    assert_non_null(c.key);
    char *k = strdup(c.key);
    tether__preload_conn_free(&c);
    return k;
}

static void test_key_environment(void **state) {
    (void)state;
    const char *ci = "host=h dbname=app";
    setenv("PGUSER", "alice", 1);
    setenv("PGPASSWORD", PW, 1);
    char *a = key_of(ci);
    assert_null(strstr(a, PW)); /* hashed, never in clear */
    assert_non_null(strstr(a, "user='alice'"));
    char *a2 = key_of(ci);
    assert_string_equal(a, a2); /* the same environment: the same pool */
    setenv("PGUSER", "bob", 1);
    char *b = key_of(ci);
    setenv("PGPASSWORD", PW "x", 1);
    char *c = key_of(ci);
    setenv("PGOPTIONS", "-c search_path=s2", 1);
    char *d = key_of(ci);
    assert_string_not_equal(a, b);
    assert_string_not_equal(b, c);
    assert_string_not_equal(c, d);
    char *e = key_of("host=h dbname=app user=alice password=" PW);
    assert_null(strstr(e, PW));
    unsetenv("PGOPTIONS");
    unsetenv("PGPASSWORD");
    unsetenv("PGUSER");
    free(a), free(a2), free(b), free(c), free(d), free(e);
}

static void test_key_unknown(void **state) {
    (void)state;
    tether__preload_conn c;
    setenv("PGSERVICE", "svc", 1); /* a service file: not read, not pooled */
    assert_int_equal(tether__preload_conn_prepare("host=h dbname=app", &c), 0);
    assert_null(c.pooled);
    tether__preload_conn_free(&c);
    unsetenv("PGSERVICE");
    setenv("PGTZ", "UTC", 1); /* sent outside the string */
    assert_int_equal(tether__preload_conn_prepare("host=h dbname=app", &c), 0);
    assert_null(c.pooled);
    tether__preload_conn_free(&c);
    unsetenv("PGTZ");
    setenv("PGPASSFILE", "/", 1); /* a password file that cannot be read */
    assert_int_equal(tether__preload_conn_prepare("host=h dbname=app", &c), 0);
    assert_null(c.pooled);
    tether__preload_conn_free(&c);
    unsetenv("PGPASSFILE");
}

static void test_scan_custom(void **state) {
    (void)state;
    assert_true(tether__preload_sql_sets_custom("SET myapp.tenant = 'a'"));
    assert_true(
        tether__preload_sql_sets_custom("select 1; set session \"My\".x to 1"));
    assert_true(tether__preload_sql_sets_custom("SET LOCAL a . b = 1"));
    assert_true(
        tether__preload_sql_sets_custom("SELECT pg_catalog.set_config('a.b', "
                                        "'x', false)"));
    assert_false(tether__preload_sql_sets_custom("SET work_mem = '1MB'"));
    assert_false(
        tether__preload_sql_sets_custom("SET SESSION search_path = a"));
    assert_false(tether__preload_sql_sets_custom("SELECT offset_x.y FROM t"));
    assert_false(tether__preload_sql_sets_custom("UPDATE t SET x = 1"));
    assert_false(tether__preload_sql_sets_custom(NULL));
}

static void test_scan_clean(void **state) {
    (void)state;
    assert_true(tether__preload_sql_clean("SELECT abalance FROM "
                                          "pgbench_accounts WHERE aid = 7;"));
    assert_true(tether__preload_sql_clean("  select 41 + 1 as answer;  \n"));
    assert_true(
        tether__preload_sql_clean("BEGIN ISOLATION LEVEL SERIALIZABLE"));
    assert_true(tether__preload_sql_clean("commit"));
    assert_true(tether__preload_sql_clean("ROLLBACK TO SAVEPOINT a"));
    assert_true(tether__preload_sql_clean("SELECT x FROM intolerant"));
    /* a function, a write, a second statement, anything else */
    assert_false(tether__preload_sql_clean("SELECT pg_advisory_lock(1)"));
    assert_false(tether__preload_sql_clean("SELECT 1 AS x INTO TEMP t"));
    assert_false(tether__preload_sql_clean("select 1 into\tt"));
    assert_false(tether__preload_sql_clean("SELECT 1; SET work_mem = '2MB'"));
    assert_false(tether__preload_sql_clean("BEGIN; SET x = 1"));
    assert_false(tether__preload_sql_clean("SET work_mem = '1MB'"));
    assert_false(tether__preload_sql_clean("selected"));
    assert_false(tether__preload_sql_clean("LISTEN c"));
    assert_false(tether__preload_sql_clean("PREPARE TRANSACTION 'x'"));
    assert_false(tether__preload_sql_clean("WITH a AS (SELECT 1) SELECT 1"));
    assert_false(tether__preload_sql_clean(""));
    assert_false(tether__preload_sql_clean(NULL));
}

/* The last pooled string's outcome is reused only while the environment's
 * PG variables are the same: a change, even in place (putenv), is seen. */
static void test_memo_environment(void **state) {
    (void)state;
    const char *s = "host=h dbname=app user=u password=pw";
    tether__preload_conn a, b;
    unsetenv("PGAPPNAME");
    assert_int_equal(tether__preload_conn_prepare(s, &a), 0);
    assert_non_null(a.key);
    assert_int_equal(tether__preload_conn_prepare(s, &b), 0);
    assert_string_equal(a.key, b.key);
    tether__preload_conn_free(&b);
    static char app[] = "PGAPPNAME=one";
    putenv(app);
    assert_int_equal(tether__preload_conn_prepare(s, &b), 0);
    assert_non_null(strstr(b.key, "application_name='one'"));
    tether__preload_conn_free(&b);
    app[10] = 't'; /* PGAPPNAME=tne, changed in place */
    assert_int_equal(tether__preload_conn_prepare(s, &b), 0);
    assert_non_null(strstr(b.key, "application_name='tne'"));
    tether__preload_conn_free(&b);
    unsetenv("PGAPPNAME");
    assert_int_equal(tether__preload_conn_prepare(s, &b), 0);
    assert_string_equal(a.key, b.key);
    tether__preload_conn_free(&b);
    assert_int_equal(
        tether__preload_conn_prepare("host=h dbname=other password=pw", &b), 0);
    assert_string_not_equal(a.key, b.key);
    tether__preload_conn_free(&b);
    tether__preload_conn_free(&a);
}

/* The arrays' string is kept per thread and rendered again when a key or
 * a value changes (a value changed in place too). */
static void test_params_memo(void **state) {
    (void)state;
    char host[] = "h1";
    const char *k[] = {"host", "dbname", "user", NULL};
    const char *v[] = {host, "app", NULL, NULL};
    char *a = tether__preload_conn_from_params(k, v, 0);
    char *b = tether__preload_conn_from_params(k, v, 0);
    assert_string_equal(a, "host='h1' dbname='app'");
    assert_string_equal(a, b);
    free(b);
    host[1] = '2'; /* the same array, another value */
    b = tether__preload_conn_from_params(k, v, 0);
    assert_string_equal(b, "host='h2' dbname='app'");
    free(b);
    v[2] = "u";
    b = tether__preload_conn_from_params(k, v, 0);
    assert_string_equal(b, "host='h2' dbname='app' user='u'");
    free(b);
    k[2] = NULL; /* fewer keys */
    b = tether__preload_conn_from_params(k, v, 0);
    assert_string_equal(b, "host='h2' dbname='app'");
    free(b);
    free(a);
}

int main(void) {
    setenv("TETHER_PRELOAD_POOL_MAX", "7", 1);
    setenv("TETHER_PRELOAD_MATCH", "*dbname='app'*|*dbname='other'*", 1);
    unsetenv("TETHER_PRELOAD");
    unsetenv("TETHER_PRELOAD_RESET_QUERY");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_params_expand),
        cmocka_unit_test(test_setdb),
        cmocka_unit_test(test_prepare_defaults),
        cmocka_unit_test(test_prepare_own_keywords),
        cmocka_unit_test(test_not_pooled),
        cmocka_unit_test(test_key_environment),
        cmocka_unit_test(test_key_unknown),
        cmocka_unit_test(test_scan_custom),
        cmocka_unit_test(test_scan_clean),
        cmocka_unit_test(test_memo_environment),
        cmocka_unit_test(test_params_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
