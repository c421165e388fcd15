/* test_conninfo.c - unit tests for connection-string normalization
 * (src/conninfo/conninfo.c): equivalent spellings share one key (order,
 * whitespace, quoting, escapes, URI vs key=value, duplicates, IPv6,
 * percent-decoding), different values never do, every error category with
 * a message that never echoes a password, the masked display form, the
 * keyword tables the layers register, editing a parsed set, and a
 * randomized idempotence check. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conninfo.h"
#include "pool.h"
#include "tether.h"

#include <libpq-fe.h>

#define PW "S3cr3tPw"

/* norm returns the canonical key of s in a static buffer; fails the test
 * when s does not parse. */
static const char *norm_at(const char *s, const char *file, int line) {
    static char buf[2][1024];
    static int which;
    tether_error e = {0};
    char *b = buf[which++ & 1];
    int rc = tether_registry_normalize(s, b, sizeof(buf[0]), &e);
    if (rc < 0 || (size_t)rc >= sizeof(buf[0])) {
        print_error("%s:%d: \"%s\": rc %d (%s)\n", file, line, s, rc,
                    e.message);
        _fail(file, line);
    }
    return b;
}

#define NORM(s) norm_at((s), __FILE__, __LINE__)

/* ------------------------------------------------------------------------ */
/* Equivalent spellings                                                     */
/* ------------------------------------------------------------------------ */

typedef struct same_case {
    const char *a, *b;
} same_case;

static const same_case same_cases[] = {
    /* keyword order */
    {"host=h port=1 user=u", "user=u port=1 host=h"},
    {"dbname=d user=u password=p", "password=p dbname=d user=u"},
    /* whitespace */
    {"host=h   port=1", "\thost = h\nport= 1 "},
    {"host=h", "  host\t=\r\n h  "},
    /* quoting and escapes */
    {"host='h'", "host=h"},
    {"application_name='a b'", "application_name=a\\ b"},
    {"a='it\\'s'", "a=it\\'s"},
    {"a='x\\\\y'", "a=x\\\\y"},
    {"a='\\q'", "a=q"},
    {"a=x\\", "a=x"}, /* a trailing backslash escapes nothing */
    {"a='' b=2", "b=2 a="},
    {"a='x'b=y", "a=x b=y"},
    /* URI and key=value */
    {"postgresql://u:p@h:5433/db?sslmode=require",
     "host=h port=5433 user=u password=p dbname=db sslmode=require"},
    {"postgres://u:p@h:5433/db?sslmode=require",
     "postgresql://u:p@h:5433/db?sslmode=require"},
    {"postgresql://h", "host=h"},
    /* No keyword at all: libpq's defaults (the PG* variables) */
    {"", "postgresql://"},
    {" \t\n ", "postgresql:///?"},
    {"postgresql://u@h/", "user=u host=h"},
    {"postgresql:///db", "dbname=db"},
    {"postgresql://:5432", "port=5432"},
    {"postgresql://h?application_name=", "host=h application_name=''"},
    {"postgresql://h?ssl=true", "host=h sslmode=require"},
    {"postgresql://h?a=1&", "host=h a=1"},
    {"postgresql://h1,h2", "host=h1,h2"},
    {"postgresql://h1:1,h2:2", "host=h1,h2 port=1,2"},
    {"postgresql://h1,h2:2", "host=h1,h2 port=,2"},
    {"postgresql://u:p:q@h", "user=u password=p:q host=h"},
    /* duplicate keywords: the last one wins, as in libpq */
    {"host=a host=b", "host=b"},
    {"host=a port=1 host=b", "port=1 host=b"},
    {"postgresql://u@h?user=v", "host=h user=v"},
    {"postgresql://h/db?dbname=other", "host=h dbname=other"},
    /* IPv6 literals */
    {"postgresql://[::1]:5432/db", "host=::1 port=5432 dbname=db"},
    {"postgresql://[2001:db8::1],[::1]:6000",
     "host=2001:db8::1,::1 port=,6000"},
    {"postgresql://u@[fe80::1%25eth0]", "user=u host=fe80::1%eth0"},
    /* percent-decoding */
    {"postgresql://us%40er:p%3Aw@h/d%2Fb", "user=us@er password=p:w host=h "
                                           "dbname=d/b"},
    {"postgresql://h/d%3ab", "host=h dbname=d:b"},
    {"postgresql://h/d%20b?application_name=a%26b",
     "host=h dbname='d b' application_name=a&b"},
    {"postgresql://h?a%5Fb=%27", "host=h a_b=\\'"},
    {"postgresql://h/a+b", "host=h dbname=a+b"}, /* '+' stays '+' */
};

static void test_same(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(same_cases) / sizeof(same_cases[0]); i++) {
        const char *a = NORM(same_cases[i].a), *b = NORM(same_cases[i].b);
        if (strcmp(a, b) != 0) {
            print_error("\"%s\" -> \"%s\"\n\"%s\" -> \"%s\"\n", same_cases[i].a,
                        a, same_cases[i].b, b);
            fail();
        }
    }
}

/* test_canonical pins the exact canonical form. */
static void test_canonical(void **state) {
    (void)state;
    assert_string_equal(NORM("postgresql://u:p@h:5433/db?sslmode=require"),
                        "dbname='db' host='h' password='p' port='5433' "
                        "sslmode='require' user='u'");
    assert_string_equal(NORM("b=2  a='x y' c=it\\'s d='\\\\'"),
                        "a='x y' b='2' c='it\\'s' d='\\\\'");
    assert_string_equal(NORM("host=''"), "host=''");
    assert_string_equal(NORM("postgresql://[::1]"), "host='::1'");
    assert_string_equal(NORM("a=\xc3\xa9t\xc3\xa9"), "a='\xc3\xa9t\xc3\xa9'");
}

/* ------------------------------------------------------------------------ */
/* Different values never share a key                                       */
/* ------------------------------------------------------------------------ */

static const char *const base_kv =
    "host=h port=5432 user=u password=p dbname=d sslmode=require";

static const char *const differ_from_base[] = {
    "host=h port=5432 user=v password=p dbname=d sslmode=require",
    "host=h port=5432 user=u password=q dbname=d sslmode=require",
    "host=h port=5432 user=u password='' dbname=d sslmode=require",
    "host=h port=5432 user=u dbname=d sslmode=require",
    "host=g port=5432 user=u password=p dbname=d sslmode=require",
    "host=h port=5433 user=u password=p dbname=d sslmode=require",
    "host=h port=5432 user=u password=p dbname=e sslmode=require",
    "host=h port=5432 user=u password=p dbname=d sslmode=disable",
    "host=h port=5432 user=u password=p dbname=d",
    "host=h port=5432 user=U password=p dbname=d sslmode=require",
    "host=h port=5432 user=u password=P dbname=d sslmode=require",
    "HOST=h port=5432 user=u password=p dbname=d sslmode=require",
    "host=h port=5432 user=u password=p dbname=d sslmode=require a=1",
    "host=h port=5432 user=u password='p ' dbname=d sslmode=require",
    "postgresql://u:p@h:5432/d?sslmode=require&application_name=x",
};

static void test_differ(void **state) {
    (void)state;
    char base[1024];
    snprintf(base, sizeof(base), "%s", NORM(base_kv));
    assert_string_equal(base,
                        NORM("postgresql://u:p@h:5432/d?sslmode=require"));
    size_t n = sizeof(differ_from_base) / sizeof(differ_from_base[0]);
    for (size_t i = 0; i < n; i++) {
        char k[1024];
        snprintf(k, sizeof(k), "%s", NORM(differ_from_base[i]));
        if (strcmp(k, base) == 0) {
            print_error("\"%s\" shares the key of the base\n",
                        differ_from_base[i]);
            fail();
        }
        for (size_t j = i + 1; j < n; j++)
            assert_string_not_equal(NORM(differ_from_base[j]), k);
    }
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

#define NSUBS 3

typedef struct bad_case {
    const char *s;
    const char *subs[NSUBS]; /* the message must hold each */
} bad_case;

static const bad_case bad_cases[] = {
    {"host", {"missing '='", "\"host\"", "position 1"}},
    {"host=a port", {"missing '='", "\"port\"", "position 8"}},
    {"host=a frob", {"missing '='", "position 8"}},
    {"1host=a", {"bad keyword", "position 1"}},
    {"=a", {"bad keyword", "position 1"}},
    {"host=a 'b'=c", {"bad keyword", "position 8"}},
    {"ho-st=a", {"bad character in keyword", "position 3"}},
    {"host='abc", {"unterminated quote", "\"host\"", "position 6"}},
    {"host='abc\\", {"unterminated quote", "position 6"}},
    {"password='" PW, {"bad value for password"}},
    {"password='" PW "\\'", {"bad value for password"}},
    {"sslpassword='" PW, {"bad value for sslpassword"}},
    {"PassWord='" PW, {"bad value for a secret keyword"}},
    {"password=S3cr3t Pw8x host=x", {"missing '='", "position 17"}},
    {"postgresql://u:S3cr%zz3tPw@h", {"bad value for password", "URI"}},
    {"postgresql://u:" PW "%0@h", {"bad value for password"}},
    {"postgresql://u:" PW "%00@h", {"bad value for password"}},
    {"postgresql://h?password=" PW "%g1", {"bad value for password"}},
    {"postgresql://u:" PW "@h:99999", {"bad port", "position 27"}},
    {"postgresql://u:" PW "/x@h:5432", {"bad port", "position 16"}},
    {"postgresql://h:abc", {"bad port", "position 16"}},
    {"postgresql://h:0", {"bad port"}},
    {"postgresql://h:65536", {"bad port"}},
    {"postgresql://h:1%", {"bad percent escape", "position 17"}},
    {"postgresql://h/db%4", {"bad percent escape", "position 18"}},
    {"postgresql://h/db%00", {"bad percent escape"}},
    {"postgresql://h%zz", {"bad percent escape", "position 15"}},
    {"postgresql://u%@h", {"bad percent escape", "position 15"}},
    {"postgresql://[::1", {"missing ']'", "position 14"}},
    {"postgresql://[]", {"empty IPv6 host"}},
    {"postgresql://[::1]x", {"unexpected character", "position 19"}},
    {"postgresql://h?sslmode", {"missing '='", "position 16"}},
    {"postgresql://h?a=1&&b=2", {"missing '='", "position 20"}},
    {"postgresql://h?a=b=c", {"extra '='", "position 16"}},
    {"postgresql://h?-a=b", {"bad keyword", "position 16"}},
    {"postgresql://h?=b", {"bad keyword"}},
    {"postgresql://h?a%=b", {"bad percent escape"}},
};

static void check_bad(const bad_case *c) {
    tether_error e;
    char buf[64] = "untouched";
    memset(&e, 0x5a, sizeof(e));
    int rc = tether_registry_normalize(c->s, buf, sizeof(buf), &e);
    size_t len = strnlen(e.message, sizeof(e.message));
    int ok = rc == TETHER_ESPEC && e.code == TETHER_ESPEC &&
             e.cls == TETHER_CLASS_PERMANENT && len > 0 && len < 200 &&
             buf[0] == '\0' && !strstr(e.message, PW) &&
             !strstr(e.message, "S3cr") && !strstr(e.message, "Pw8x");
    for (int i = 0; ok && i < NSUBS && c->subs[i]; i++)
        ok = strstr(e.message, c->subs[i]) != NULL;
    if (!ok) {
        print_error("\"%s\": rc %d message \"%s\"\n", c->s, rc, e.message);
        fail();
    }
    assert_int_equal(tether_registry_normalize(c->s, NULL, 0, NULL), rc);
}

static void test_errors(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++)
        check_bad(&bad_cases[i]);
}

static void test_too_long(void **state) {
    (void)state;
    size_t n = TETHER__CONNINFO_MAX + 1;
    char *s = malloc(n + 1);
    assert_non_null(s);
    memcpy(s, "a=", 2);
    memset(s + 2, 'x', n - 2);
    s[n] = '\0';
    tether_error e = {0};
    assert_int_equal(tether_registry_normalize(s, NULL, 0, &e), TETHER_ESPEC);
    assert_non_null(strstr(e.message, "longer than"));
    /* at the limit it parses: a='xxx...x' */
    n = TETHER__CONNINFO_MAX;
    memcpy(s, "a='", 3);
    memset(s + 3, 'x', n - 4);
    s[n - 1] = '\'';
    s[n] = '\0';
    assert_int_equal(tether_registry_normalize(s, NULL, 0, &e), (int)n);
    /* a=x'''...: every quote gets escaped, doubling the canonical form */
    memcpy(s, "a=x", 3);
    memset(s + 3, '\'', n - 3);
    assert_int_equal(tether_registry_normalize(s, NULL, 0, &e), TETHER_ESPEC);
    assert_non_null(strstr(e.message, "normalized form longer"));
    free(s);
}

static void test_args(void **state) {
    (void)state;
    char buf[16];
    tether_error e = {0};
    assert_int_equal(tether_registry_normalize(NULL, buf, sizeof(buf), &e),
                     TETHER_EINVAL);
    assert_int_equal(tether_registry_normalize("host=h", NULL, 4, &e),
                     TETHER_EINVAL);
    /* sizing call, then truncation like snprintf */
    assert_int_equal(tether_registry_normalize("host=h", NULL, 0, NULL), 8);
    assert_int_equal(tether_registry_normalize("host=h", buf, 5, NULL), 8);
    assert_string_equal(buf, "host");
    assert_int_equal(tether_registry_normalize("host=h", buf, 9, NULL), 8);
    assert_string_equal(buf, "host='h'");
}

/* ------------------------------------------------------------------------ */
/* Display form and the internal API                                        */
/* ------------------------------------------------------------------------ */

static char *display(const char *s) {
    char *d = NULL;
    assert_int_equal(tether__conninfo_keys(s, NULL, &d, NULL), 0);
    assert_non_null(d);
    return d;
}

static void test_display(void **state) {
    (void)state;
    static const char *const with_pw[] = {
        "host=h user=u password=" PW,
        "postgresql://u:" PW "@h/db",
        "postgresql://u@h/db?password=" PW,
        "host=h sslpassword='" PW "'",
        "host=h PASSWORD=" PW,
        "host=h dbname='postgresql://u:" PW "@h/db'",
        "host=h dbname='host=x password=" PW "'",
        "host=h scram_client_key=" PW,
    };
    for (size_t i = 0; i < sizeof(with_pw) / sizeof(with_pw[0]); i++) {
        char *d = display(with_pw[i]);
        assert_null(strstr(d, PW));
        assert_non_null(strstr(d, "='***'"));
        assert_non_null(strstr(d, "host='h'"));
        free(d);
    }
    char *d = display("user=u password=" PW " host=h");
    assert_string_equal(d, "host='h' password='***' user='u'");
    free(d);
    d = display("postgresql://u@h/db"); /* nothing to mask: the key */
    assert_string_equal(d, NORM("postgresql://u@h/db"));
    free(d);
    d = display("dbname=plain host=h");
    assert_string_equal(d, "dbname='plain' host='h'");
    free(d);
    /* An unquoted password with a space: its tail parses as a keyword
     * neither libpq nor tether knows, masked name and value. */
    d = display("host=h password=ab cd=ef");
    assert_string_equal(d, "***='***' host='h' password='***'");
    free(d);
}

static void test_internal(void **state) {
    (void)state;
    tether__conninfo ci;
    tether_error e = {0};
    assert_int_equal(
        tether__conninfo_parse("postgresql://u:p@[::1]:7/d?a=1&a=2", &ci, &e),
        0);
    assert_int_equal(ci.n, 6);
    assert_string_equal(tether__conninfo_get(&ci, "host"), "::1");
    assert_string_equal(tether__conninfo_get(&ci, "port"), "7");
    assert_string_equal(tether__conninfo_get(&ci, "a"), "2");
    assert_null(tether__conninfo_get(&ci, "sslmode"));
    for (size_t i = 1; i < ci.n; i++)
        assert_true(strcmp(ci.kv[i - 1].key, ci.kv[i].key) < 0);
    tether__conninfo_free(&ci);
    assert_int_equal(tether__conninfo_parse("x", &ci, &e), TETHER_ESPEC);
    tether__conninfo_free(&ci);
    char *k = (char *)1, *d = (char *)1;
    assert_int_equal(tether__conninfo_keys("x", &k, &d, NULL), TETHER_ESPEC);
    assert_null(k);
    assert_null(d);
    assert_true(tether__conninfo_known("sslmode"));
    assert_false(tether__conninfo_known("SSLMODE"));
    assert_false(tether__conninfo_known("ssl")); /* URI-only alias */
    assert_true(tether__conninfo_secret("oauth_client_secret", "x"));
    assert_true(tether__conninfo_secret("password", "x"));
    assert_false(tether__conninfo_secret("passfile", "x"));
    assert_false(tether__conninfo_secret("dbname", "db"));
}

/* ------------------------------------------------------------------------ */
/* Randomized: normalize(normalize(x)) == normalize(x)                      */
/* ------------------------------------------------------------------------ */

static void random_string(char *s, size_t n, unsigned *seed) {
    static const char *const atoms[] = {"host",
                                        "port",
                                        "user",
                                        "password",
                                        "=",
                                        " ",
                                        "'",
                                        "\\",
                                        "a",
                                        "1",
                                        "postgresql://",
                                        "@",
                                        ":",
                                        "/",
                                        "?",
                                        "&",
                                        "%41",
                                        "%",
                                        "[",
                                        "]",
                                        ",",
                                        "\t",
                                        "x_y",
                                        "\xff",
                                        "''"};
    size_t natoms = sizeof(atoms) / sizeof(atoms[0]), len = 0;
    int count = 1 + (int)(rand_r(seed) % 12);
    for (int i = 0; i < count; i++) {
        const char *a = atoms[rand_r(seed) % natoms];
        size_t al = strlen(a);
        if (len + al + 1 > n)
            break;
        memcpy(s + len, a, al);
        len += al;
    }
    s[len] = '\0';
}

/* The known keywords are the linked libpq's own, and its secrets masked. */
static void test_libpq_keywords(void **state) {
    (void)state;
    PQconninfoOption *opts = PQconndefaults();
    assert_non_null(opts);
    int n = 0, secrets = 0;
    for (PQconninfoOption *o = opts; o->keyword; o++, n++) {
        assert_true(tether__conninfo_known(o->keyword));
        tether__kw_kind k = tether__conninfo_kind(o->keyword);
        if (strcmp(o->keyword, "host") && strcmp(o->keyword, "hostaddr") &&
            strcmp(o->keyword, "port") &&
            strcmp(o->keyword, "target_session_attrs") &&
            strcmp(o->keyword, "connect_timeout"))
            assert_int_equal(k, TETHER__KW_LIBPQ);
        else
            assert_true(k == TETHER__KW_ENDPOINT || k == TETHER__KW_CONNECTOR);
        if (o->dispchar && o->dispchar[0] == '*') {
            assert_true(tether__conninfo_secret(o->keyword, "x"));
            secrets++;
        }
    }
    PQconninfoFree(opts);
    assert_true(n > 20);
    assert_true(secrets >= 1); /* password */
    /* A keyword newer than this libpq is not libpq's here. */
    assert_false(tether__conninfo_known("tether_pool_max"));
    assert_false(tether__conninfo_known("no_such_libpq_keyword"));
}

/* Each tether keyword belongs to one layer; libpq's go to the driver. */
static void test_kinds(void **state) {
    (void)state;
    assert_int_equal(tether__conninfo_kind("host"), TETHER__KW_ENDPOINT);
    assert_int_equal(tether__conninfo_kind("sslmode"), TETHER__KW_LIBPQ);
    assert_int_equal(tether__conninfo_kind("target_session_attrs"),
                     TETHER__KW_CONNECTOR);
    assert_int_equal(tether__conninfo_kind("tether_strategy"),
                     TETHER__KW_CONNECTOR);
    assert_int_equal(tether__conninfo_kind("tether_pool_max"), TETHER__KW_POOL);
    assert_int_equal(tether__conninfo_kind("tether_pool_name"),
                     TETHER__KW_POOL);
    assert_int_equal(tether__conninfo_kind("tether_bogus"), TETHER__KW_UNKNOWN);
    assert_int_equal(tether__conninfo_kind("frobnicate"), TETHER__KW_UNKNOWN);
    const char *k;
    int npool = 0;
    for (size_t i = 0; (k = tether__conninfo_keyword(TETHER__KW_POOL, i)); i++)
        npool += strncmp(k, "tether_", 7) == 0;
    assert_int_equal(npool, 25); /* 15 + 5 of read/write routing + drain
                                  + txn_reserve_timeout + pool_max_limit
                                  + the admin socket's (src/admin)
                                  + pool_limit */
}

/* rank: the order tether__keyword_at lists the kinds in. */
static int rank(tether__kw_kind k) {
    return k == TETHER__KW_LIBPQ ? 9 : (int)k;
}

/* Every registered keyword is listed once, with its layer and a line of
 * description: tether's first, then libpq's that no tether table claims. */
static void test_keyword_list(void **state) {
    (void)state;
    tether__kwinfo kw, prev = {0};
    int n = 0, libpq = 0, seen_host = 0, seen_pool_max = 0;
    for (size_t i = 0; tether__keyword_at(i, &kw) == 0; i++, n++) {
        assert_non_null(kw.name);
        assert_non_null(kw.layer);
        assert_non_null(kw.desc);
        assert_int_equal(tether__conninfo_kind(kw.name), kw.kind);
        if (kw.kind != TETHER__KW_LIBPQ) { /* one line, said by tether */
            assert_true(strlen(kw.desc) > 10 && strlen(kw.desc) < 80);
            assert_null(strchr(kw.desc, '\n'));
        }
        if (prev.name) /* the kinds in order: tether's, then libpq's */
            assert_true(rank(prev.kind) <= rank(kw.kind));
        for (size_t j = 0; j < i; j++) { /* no keyword twice */
            tether__kwinfo other;
            assert_int_equal(tether__keyword_at(j, &other), 0);
            assert_string_not_equal(other.name, kw.name);
        }
        libpq += kw.kind == TETHER__KW_LIBPQ;
        if (!strcmp(kw.name, "host")) {
            seen_host = 1;
            assert_int_equal(kw.kind, TETHER__KW_ENDPOINT);
            assert_string_equal(kw.layer, "connector");
        }
        if (!strcmp(kw.name, "tether_pool_max")) {
            seen_pool_max = 1;
            assert_string_equal(kw.layer, "pool");
        }
        if (kw.kind == TETHER__KW_LIBPQ)
            assert_string_equal(kw.layer, "libpq");
        prev = kw;
    }
    assert_true(seen_host && seen_pool_max);
    assert_true(libpq > 15);
    /* endpoint, connector, discovery (src/discovery), pool (the admin
     * socket's too) */
    assert_int_equal(n - libpq, 3 + 9 + 3 + 25);
    assert_int_equal(tether__keyword_at((size_t)n, &kw), -1);
    /* The public list is the same one. */
    tether_keyword pub;
    for (size_t i = 0; i < (size_t)n; i++) {
        assert_int_equal(tether_conninfo_keyword(i, &pub), 0);
        assert_int_equal(tether__keyword_at(i, &kw), 0);
        assert_string_equal(pub.name, kw.name);
        assert_string_equal(pub.reader, kw.layer);
        assert_string_equal(pub.desc, kw.desc);
    }
    assert_int_equal(tether_conninfo_keyword((size_t)n, &pub), TETHER_EINVAL);
    assert_int_equal(tether_conninfo_keyword(0, NULL), TETHER_EINVAL);
    /* A table registered twice is listed once. */
    static const tether__keydef defs[] = {
        TETHER__KD_SELF("test_only_keyword", "a keyword of this test"),
        TETHER__KD_END};
    static const tether__kwtable t = {
        .layer = "test", .kind = TETHER__KW_POOL, .defs = defs};
    assert_int_equal(tether__keywords_register(&t), 0);
    assert_int_equal(tether__keywords_register(&t), 0);
    assert_int_equal(tether__conninfo_kind("test_only_keyword"),
                     TETHER__KW_POOL);
    /* Another table's keyword of the pool's kind: the pool leaves it. */
    tether__pool_keys pk;
    assert_int_equal(
        tether__pool_keys_parse("host=h test_only_keyword=1", &pk, NULL), 0);
    tether__pool_keys_free(&pk);
    int after = 0;
    while (tether__keyword_at((size_t)after, &kw) == 0)
        after++;
    assert_int_equal(after, n + 1);
}

/* A parsed set is edited in place: a copy with a keyword set formats as
 * the string with that keyword appended would parse. */
static void test_edit(void **state) {
    (void)state;
    tether__conninfo ci, cp;
    tether_error e = {0};
    assert_int_equal(tether__conninfo_parse("postgresql://u:" PW
                                            "@h1,h2/db?target_session_attrs="
                                            "any&sslmode=disable",
                                            &ci, &e),
                     0);
    assert_int_equal(tether__conninfo_copy(&cp, &ci, &e), 0);
    assert_int_equal(
        tether__conninfo_set(&cp, "target_session_attrs", "standby", &e), 0);
    assert_int_equal(tether__conninfo_set(&cp, "tether_strategy", "random", &e),
                     0);
    assert_int_equal(tether__conninfo_set(&cp, "application_name",
                                          "a 'quoted' \\ value", &e),
                     0);
    char *got = tether__conninfo_dup(&cp, 0);
    char want[512];
    snprintf(want, sizeof(want), "%s",
             NORM("postgresql://u:" PW "@h1,h2/db?target_session_attrs=any&"
                  "sslmode=disable&target_session_attrs=standby&"
                  "tether_strategy=random&application_name=a%20'quoted'%20%5C%"
                  "20value"));
    assert_string_equal(got, want);
    free(got);
    /* The original is untouched. */
    assert_string_equal(tether__conninfo_get(&ci, "target_session_attrs"),
                        "any");
    assert_null(tether__conninfo_get(&ci, "tether_strategy"));
    /* Many keywords added to an empty set: it grows. */
    tether__conninfo empty;
    assert_int_equal(tether__conninfo_parse("", &empty, &e), 0);
    for (int i = 0; i < 40; i++) {
        char k[32];
        snprintf(k, sizeof(k), "k%02d", 39 - i);
        assert_int_equal(tether__conninfo_set(&empty, k, "v", &e), 0);
    }
    assert_int_equal(empty.n, 40);
    for (size_t i = 1; i < empty.n; i++) /* kept in keyword order */
        assert_true(strcmp(empty.kv[i - 1].key, empty.kv[i].key) < 0);
    tether__conninfo_wipe(&empty);
    tether__conninfo_wipe(&cp);
    tether__conninfo_free(&ci);
}

static void test_random_idempotent(void **state) {
    (void)state;
    unsigned seed = 12345;
    int valid = 0;
    for (int i = 0; i < 50000; i++) {
        char s[256], k1[1024], k2[1024];
        random_string(s, sizeof(s), &seed);
        int n = tether_registry_normalize(s, k1, sizeof(k1), NULL);
        if (n < 0)
            continue;
        valid++;
        assert_true(n < (int)sizeof(k1));
        assert_int_equal(tether_registry_normalize(k1, k2, sizeof(k2), NULL),
                         n);
        assert_string_equal(k1, k2);
    }
    assert_true(valid > 1000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same),
        cmocka_unit_test(test_canonical),
        cmocka_unit_test(test_differ),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_display),
        cmocka_unit_test(test_internal),
        cmocka_unit_test(test_libpq_keywords),
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_keyword_list),
        cmocka_unit_test(test_edit),
        cmocka_unit_test(test_random_idempotent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
