/* test_patroni_members.c - the member-list parser of discovery from
 * Patroni (src/discovery/patroni_members.c, docs/patroni.md "Discovery"):
 * answers as Patroni 3.0.2 gives them (a replica's state "running" or
 * "streaming", a lag in bytes or "unknown", tags), and every hostile
 * answer refused with a clear error: truncated, not JSON, wrong types,
 * 10,000 members, a bad host or port, too deep, too big. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery.h"
#include "tether.h"

#define CAP TETHER__PATRONI_MAX_MEMBERS

/* What Patroni 3.0.2 answers for a leader and two replicas (one streaming,
 * one running with an unknown lag, tagged), with the fields it adds. */
static const char patroni_302[] =
    "{\"members\": [{\"name\": \"pg1\", \"role\": \"leader\", \"state\": "
    "\"running\", \"api_url\": \"http://127.0.0.1:8008/patroni\", \"host\": "
    "\"127.0.0.1\", \"port\": 5432, \"timeline\": 3}, {\"name\": \"pg2\", "
    "\"role\": \"replica\", \"state\": \"streaming\", \"api_url\": "
    "\"http://127.0.0.1:8009/patroni\", \"host\": \"127.0.0.1\", \"port\": "
    "5433, \"timeline\": 3, \"lag\": 0}, {\"name\": \"pg3\", \"role\": "
    "\"replica\", \"state\": \"running\", \"api_url\": "
    "\"http://127.0.0.1:8010/patroni\", \"host\": \"::1\", \"port\": 5434, "
    "\"timeline\": 3, \"lag\": \"unknown\", \"tags\": {\"nofailover\": true, "
    "\"noloadbalance\": true}, \"pending_restart\": true}], \"scope\": "
    "\"demo\", \"scheduled_switchover\": {\"at\": \"x\"}}\n";

static int parse(const char *s, tether__member *m, int *n, tether_error *e) {
    memset(e, 0, sizeof(*e));
    return tether__patroni_parse(s, strlen(s), m, CAP, n, e);
}

static void test_patroni_302(void **state) {
    (void)state;
    tether__member m[CAP];
    int n = -1;
    tether_error e;
    assert_int_equal(parse(patroni_302, m, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_string_equal(m[0].name, "pg1");
    assert_int_equal(m[0].role, TETHER__PM_LEADER);
    assert_true(m[0].running);
    assert_int_equal(m[0].port, 5432);
    assert_int_equal(m[0].lag, -1);
    assert_int_equal(m[0].timeline, 3);
    assert_int_equal(m[1].role, TETHER__PM_REPLICA);
    assert_true(m[1].running); /* "streaming" */
    assert_int_equal(m[1].lag, 0);
    assert_false(m[1].noloadbalance);
    assert_string_equal(m[2].host, "::1");
    assert_true(m[2].running);      /* "running" */
    assert_int_equal(m[2].lag, -1); /* "unknown" */
    assert_true(m[2].nofailover);
    assert_true(m[2].noloadbalance);
}

static void test_roles_and_states(void **state) {
    (void)state;
    tether__member m[CAP];
    int n;
    tether_error e;
    const char *s =
        "{\"members\":[{\"name\":\"a\",\"role\":\"sync_standby\",\"state\":"
        "\"streaming\",\"host\":\"h\",\"port\":1,\"lag\":12345},"
        "{\"name\":\"b\",\"role\":\"standby_leader\",\"state\":\"running\","
        "\"host\":\"h\",\"port\":2},{\"name\":\"c\",\"role\":\"replica\","
        "\"state\":\"stopped\",\"host\":\"h\",\"port\":3},{\"name\":\"d\","
        "\"role\":\"uninitialized\",\"host\":\"h\",\"port\":4,\"lag\":null,"
        "\"tags\":{\"noloadbalance\":false,\"clonefrom\":true}},{\"name\":"
        "\"e\",\"role\":\"master\",\"state\":\"running\",\"host\":\"h\","
        "\"port\":5}]}";
    assert_int_equal(parse(s, m, &n, &e), 0);
    assert_int_equal(n, 5);
    assert_int_equal(m[0].role, TETHER__PM_SYNC);
    assert_int_equal(m[0].lag, 12345);
    assert_int_equal(m[1].role, TETHER__PM_STANDBY_LEADER);
    assert_false(m[2].running);
    assert_int_equal(m[3].role, TETHER__PM_OTHER);
    assert_false(m[3].noloadbalance);
    assert_int_equal(m[4].role, TETHER__PM_LEADER);
}

/* Each hostile answer is refused, with a message that says what. */
static void test_hostile(void **state) {
    (void)state;
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"", "empty"},
        {"{\"members\": [{\"name\": \"pg1\", \"role\": \"lea", "truncated"},
        {"{\"members\": [", "truncated"},
        {"<html>502 Bad Gateway</html>", "not JSON"},
        {"[1,2,3]", "not a JSON object"},
        {"{\"scope\":\"x\"}", "no \"members\" array"},
        {"{\"members\":{\"a\":1}}", "no \"members\" array"},
        {"{\"members\":[]}", "no members"},
        {"{\"members\":[42]}", "member 1 is not an object"},
        {"{\"members\":[{\"name\":1,\"host\":\"h\",\"port\":1}]}",
         "member 1: \"name\" is not a string"},
        {"{\"members\":[{\"name\":\"a\",\"port\":1}]}",
         "member 1 has no \"host\""},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h\"}]}",
         "member 1 has no \"port\""},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h\",\"port\":\"5432\"}]}",
         "\"port\" is not an integer"},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h\",\"port\":0}]}",
         "not in [1, 65535]"},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h\",\"port\":70000}]}",
         "not in [1, 65535]"},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h,evil\",\"port\":1}]}",
         "comma"},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"\",\"port\":1}]}", "empty"},
        {"{\"members\":[{\"name\":\"a\\u0000b\",\"host\":\"h\",\"port\":1}]}",
         "control character"},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h\",\"port\":1,\"lag\":"
         "{}}]}",
         "\"lag\" is neither a number"},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h\",\"port\":1,\"role\":"
         "true}]}",
         "\"role\" is not a string"},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h\",\"port\":1,\"tags\":"
         "[1]}]}",
         "\"tags\" is not an object"},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h\",\"port\":1,"
         "\"timeline\":\"3\"}]}",
         "\"timeline\" is not an integer"},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h\",\"port\":1}]} trailing",
         "bytes after its JSON"},
        {"{\"members\":[{\"name\":\"a\",\"host\":\"h\",\"port\":1,\"x\":"
         "[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]}]}",
         "not JSON"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tether__member m[CAP];
        int n = -1;
        tether_error e;
        size_t len = strlen(cases[i].text);
        memset(&e, 0, sizeof(e));
        int rc = tether__patroni_parse(cases[i].text, len, m, CAP, &n, &e);
        if (rc != TETHER_ESPEC || !strstr(e.message, cases[i].says))
            fail_msg("case %zu: rc %d, message \"%s\" (want \"%s\")", i, rc,
                     e.message, cases[i].says);
        assert_int_equal(n, 0);
        assert_int_equal(e.cls, TETHER_CLASS_TRANSIENT);
    }
}

/* A member list of 10,000 entries: refused whole, the count named. */
static void test_too_many(void **state) {
    (void)state;
    size_t cap = 10000 * 64 + 64, len = 0;
    char *s = malloc(cap);
    len += (size_t)snprintf(s, cap, "{\"members\":[");
    for (int i = 0; i < 10000; i++)
        len += (size_t)snprintf(s + len, cap - len,
                                "%s{\"name\":\"n%d\",\"host\":\"h\",\"port\":"
                                "%d}",
                                i ? "," : "", i, 1 + i % 60000);
    len += (size_t)snprintf(s + len, cap - len, "]}");
    tether__member m[CAP];
    int n = -1;
    tether_error e = {0};
    assert_int_equal(tether__patroni_parse(s, len, m, CAP, &n, &e),
                     TETHER_ESPEC);
    assert_non_null(strstr(e.message, "10000 members; at most 64"));
    /* The cap itself is fine. */
    len = (size_t)snprintf(s, cap, "{\"members\":[");
    for (int i = 0; i < CAP; i++)
        len += (size_t)snprintf(s + len, cap - len,
                                "%s{\"name\":\"n%d\",\"host\":\"h%d\","
                                "\"port\":5432}",
                                i ? "," : "", i, i);
    len += (size_t)snprintf(s + len, cap - len, "]}");
    assert_int_equal(tether__patroni_parse(s, len, m, CAP, &n, &e), 0);
    assert_int_equal(n, CAP);
    free(s);
}

/* A body over the size cap is refused before it is parsed. */
static void test_too_big(void **state) {
    (void)state;
    size_t len = TETHER__PATRONI_MAX_BODY + 1;
    char *s = malloc(len);
    memset(s, ' ', len);
    tether__member m[CAP];
    int n;
    tether_error e = {0};
    assert_int_equal(tether__patroni_parse(s, len, m, CAP, &n, &e),
                     TETHER_ESPEC);
    assert_non_null(strstr(e.message, "at most 1048576"));
    free(s);
}

/* The text need not end with a NUL: only len bytes are read. */
static void test_not_terminated(void **state) {
    (void)state;
    const char *s = "{\"members\":[{\"name\":\"a\",\"host\":\"h\",\"port\":1}]}"
                    "GARBAGE";
    size_t len = strlen(s) - 7;
    tether__member m[CAP];
    int n;
    tether_error e = {0};
    assert_int_equal(tether__patroni_parse(s, len, m, CAP, &n, &e), 0);
    assert_int_equal(n, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patroni_302),
        cmocka_unit_test(test_roles_and_states),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_too_many),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_not_terminated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
