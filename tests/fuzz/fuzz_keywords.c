/* fuzz_keywords.c - libFuzzer target for tether's connection-string
 * keywords and the host lists a provisioning callback returns: feeds
 * arbitrary bytes (as a NUL-terminated copy) to the connector's
 * configuration parser (tether__conncfg_parse: endpoints, tether_strategy,
 * target_session_attrs, durations, tether_pause, ...), the pool's
 * (tether__pool_keys_parse: tether_pool_max, tether_retry, ...) and, as a
 * provisioning answer "h:p,[v6]:p,...", to tether__conncfg_set_hosts, and
 * abort()s when an invariant breaks:
 *   - the same input always gives the same result and message, from the
 *     string and from the keyword set parsed once (tether__conncfg_from);
 *   - a routing side's set (a copy with target_session_attrs set) reads as
 *     the string with that keyword appended;
 *   - failure: a negative code (TETHER_ESPEC but for memory), a non-empty
 *     message under 200 characters that never holds the value of a secret
 *     keyword (password, sslpassword) when that value is distinctive, unless
 *     the message for the same string with that value replaced by a marker
 *     holds no marker (the value is in the message's fixed text);
 *   - connector success: at least one endpoint, ports in [0, 65535], no
 *     host with a comma, every keyword passed to the driver is libpq's,
 *     enums and durations in range;
 *   - pool success: 1 <= min <= max, durations >= 0;
 *   - provisioning success: one endpoint per item and port ("h:p|p"),
 *     the items in order, each with a non-empty host found in its item
 *     and a port in [0, 65535]; failure leaves the previous list as it
 *     was.
 * Build and run it like fuzz_conninfo (see CMakeLists.txt here), with a
 * scratch directory first so new inputs never land in the repository:
 *   build-fuzz/tests/fuzz/fuzz_keywords -max_total_time=60 /tmp/fz \
 *       tests/fuzz/corpus/keywords */
#include "connector.h"
#include "conninfo.h"
#include "pool.h"
#include "tether.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_keywords"
#include "fuzz_check.h"

/* A secret value worth looking for in messages: at least 4 bytes, in no
 * other keyword or value of ci (else it may be quoted as that one). */
static int distinctive(const tether__conninfo *ci, size_t self) {
    const char *v = ci->kv[self].val;
    if (strlen(v) < 4)
        return 0;
    for (size_t i = 0; i < ci->n; i++) {
        if (strstr(ci->kv[i].key, v))
            return 0;
        if (i != self && strstr(ci->kv[i].val, v))
            return 0;
    }
    return 1;
}

/* A parser under test: 0 or a negative code with e filled. */
typedef int (*parse_fn)(const char *s, tether_error *e);

/* echoes says whether parse's message, for ci with the value of pair i
 * replaced by a marker of the same length, holds the marker: the message
 * quotes that value, rather than a fixed text that happens to contain it
 * ("password=00ms" is in "want a duration such as 500ms"). */
static int echoes(tether__conninfo *ci, size_t i, parse_fn parse) {
    size_t n = strlen(ci->kv[i].val);
    char *marker = malloc(n + 1);
    if (!marker)
        return 1;
    /* A marker the string does not hold already (the fuzzer learns them:
     * "QzQz" in another keyword's value, quoted in its error, once passed
     * for the secret's echo). */
    static const char *const pairs[] = {"Qz", "Xj", "Vq", "Jx", "Kz", "Wq"};
    char *orig = tether__conninfo_dup(ci, 0);
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
        for (size_t j = 0; j < n; j++)
            marker[j] = pairs[p][j % 2];
        marker[n] = '\0';
        if (!orig || !strstr(orig, marker))
            break;
    }
    tether__free(orig);
    const char *saved = ci->kv[i].val;
    ci->kv[i].val = marker;
    char *s2 = tether__conninfo_dup(ci, 0);
    ci->kv[i].val = saved;
    int leak = 1;
    if (s2) {
        tether_error e = {0};
        parse(s2, &e);
        leak = strstr(e.message, marker) != NULL;
    }
    tether__free(s2);
    free(marker);
    return leak;
}

/* check_failure: rc and e are a proper failure of parsing s (with parse),
 * and e names no distinctive secret of s. */
static void check_failure(const char *s, int rc, const tether_error *e,
                          parse_fn parse) {
    CHECK(rc < 0 && e->code == rc);
    CHECK(rc == TETHER_ESPEC || rc == TETHER_ENOMEM);
    size_t len = strnlen(e->message, sizeof(e->message));
    CHECK(len > 0 && len < 200);
    tether__conninfo ci;
    if (tether__conninfo_parse(s, &ci, NULL) == 0)
        for (size_t i = 0; i < ci.n; i++)
            if (tether__conninfo_libpq_secret(ci.kv[i].key) &&
                distinctive(&ci, i))
                CHECK(strstr(e->message, ci.kv[i].val) == NULL ||
                      !echoes(&ci, i, parse));
    tether__conninfo_free(&ci);
}

static void check_eps(const tether__ep *eps, int n) {
    CHECK(n >= 1 && eps != NULL);
    for (int i = 0; i < n; i++) {
        CHECK(eps[i].port >= 0 && eps[i].port <= 65535);
        CHECK(!eps[i].host || !strchr(eps[i].host, ','));
        CHECK(!eps[i].hostaddr || !strchr(eps[i].hostaddr, ','));
    }
}

static void check_conncfg(const tether__conncfg *c) {
    check_eps(c->eps, c->neps);
    CHECK(c->nparams >= 0);
    for (int i = 0; i < c->nparams; i++)
        CHECK(tether__conninfo_kind(c->keys[i]) == TETHER__KW_LIBPQ);
    CHECK((unsigned)c->strategy <= TETHER_STRATEGY_RACE);
    CHECK((unsigned)c->target <= TETHER_TARGET_PREFER_PRIMARY);
    CHECK(c->login_timeout_ms >= -1 && c->attempt_timeout_ms >= 0);
    CHECK(c->recheck_ms >= 0 && c->race_delay_ms >= 0);
    CHECK(tether_backoff_validate(&c->pause, NULL) == 0);
    CHECK(c->display != NULL);
}

static int parse_conncfg(const char *s, tether_error *e) {
    tether__conncfg c;
    int rc = tether__conncfg_parse(s, &c, e);
    tether__conncfg_free(&c);
    return rc;
}

static int parse_pool(const char *s, tether_error *e) {
    tether__pool_keys k;
    int rc = tether__pool_keys_parse(s, &k, e);
    tether__pool_keys_free(&k);
    return rc;
}

/* same_cfg: a and b are the same configuration. */
static void same_cfg(const tether__conncfg *a, const tether__conncfg *b) {
    CHECK(a->neps == b->neps && a->nparams == b->nparams);
    CHECK(a->strategy == b->strategy && a->target == b->target);
    CHECK(a->attempt_timeout_ms == b->attempt_timeout_ms);
    for (int i = 0; i < a->nparams; i++)
        CHECK(!strcmp(a->keys[i], b->keys[i]) &&
              !strcmp(a->vals[i], b->vals[i]));
    CHECK(strcmp(a->display, b->display) == 0);
}

/* side: a routing side's keyword set (a copy of ci with
 * target_session_attrs set) reads as ci's string with the keyword
 * appended did, when it was formatted and parsed again. */
static void side(const tether__conninfo *ci) {
    tether__conninfo cp;
    tether__conncfg a, b;
    tether_error ea = {0}, eb = {0};
    CHECK(tether__conninfo_copy(&cp, ci, NULL) == 0);
    CHECK(tether__conninfo_set(&cp, "target_session_attrs", "standby", NULL) ==
          0);
    char *base = tether__conninfo_dup(ci, 0);
    CHECK(base != NULL);
    size_t n = strlen(base) + 40;
    char *str = malloc(n);
    CHECK(str != NULL);
    snprintf(str, n, "%s target_session_attrs=standby", base);
    int rc = tether__conncfg_from(&cp, 1, &a, &ea);
    CHECK(tether__conncfg_parse(str, &b, &eb) == rc);
    if (rc == 0)
        same_cfg(&a, &b);
    else
        CHECK(strcmp(ea.message, eb.message) == 0);
    tether__conncfg_free(&a);
    tether__conncfg_free(&b);
    tether__conninfo_free(&cp);
    free(base);
    free(str);
}

/* connector: the connector's reading of s, from the string and from the
 * keyword set parsed once: the same result and message. */
static void connector(const char *s) {
    tether__conninfo ci;
    tether__conncfg a, b;
    tether_error ea, eb;
    memset(&ea, 0x5a, sizeof(ea));
    memset(&eb, 0, sizeof(eb));
    int rc = tether__conncfg_parse(s, &a, &ea);
    int prc = tether__conninfo_parse(s, &ci, NULL);
    if (prc == 0)
        CHECK(tether__conncfg_from(&ci, 1, &b, &eb) == rc);
    else
        CHECK(tether__conncfg_parse(s, &b, &eb) == rc);
    if (rc == 0) {
        check_conncfg(&a);
        same_cfg(&a, &b);
    } else {
        check_failure(s, rc, &ea, parse_conncfg);
        CHECK(strcmp(ea.message, eb.message) == 0);
    }
    if (prc == 0)
        side(&ci);
    tether__conninfo_free(&ci);
    tether__conncfg_free(&a);
    tether__conncfg_free(&b);
}

/* pool: the pool's reading of s. */
static void pool(const char *s) {
    tether__pool_keys k;
    tether_error e;
    memset(&e, 0x5a, sizeof(e));
    int rc = tether__pool_keys_parse(s, &k, &e);
    if (rc == 0) {
        const tether_pool_opts *o = &k.o;
        CHECK(o->max_size >= 1 && o->min_size >= 0);
        CHECK(o->min_size <= o->max_size);
        CHECK(o->acquire_timeout_ms >= -1 && o->idle_timeout_ms >= 0);
        CHECK(o->max_lifetime_ms >= 0 && o->validate_idle_ms >= 0);
        /* named by tether_pool_name or the first host; none: the pool's
         * own default ("pool-N") at create */
        CHECK(o->name == NULL || tether__conninfo_name_ok(o->name));
    } else {
        check_failure(s, rc, &e, parse_pool);
    }
    tether__pool_keys_free(&k);
}

/* item_has: item i of the comma list s contains host. */
static int item_has(const char *s, int i, const char *host) {
    while (i-- > 0)
        s = strchr(s, ',') + 1;
    size_t n = strcspn(s, ",");
    for (const char *p = s; p + strlen(host) <= s + n; p++)
        if (strncmp(p, host, strlen(host)) == 0)
            return 1;
    return 0;
}

/* provision: s as a provisioning callback's answer. */
static void provision(const char *s) {
    tether__conncfg c;
    memset(&c, 0, sizeof(c));
    CHECK(tether__conncfg_set_hosts(&c, "before:1", NULL) == 0);
    const tether__ep *old = c.eps;
    tether_error e;
    memset(&e, 0x5a, sizeof(e));
    int rc = tether__conncfg_set_hosts(&c, s, &e);
    if (rc == 0) {
        int items = 1;
        for (const char *p = s; *p; p++)
            items += *p == ',';
        CHECK(c.neps >= items); /* an item "h:p|p" gives one per port */
        check_eps(c.eps, c.neps);
        for (int i = 0; i < c.neps; i++) {
            CHECK(c.eps[i].host && *c.eps[i].host);
            CHECK(c.eps[i].server >= 0 && c.eps[i].server < items);
            CHECK(i == 0 || c.eps[i].server == c.eps[i - 1].server ||
                  c.eps[i].server == c.eps[i - 1].server + 1);
            CHECK(item_has(s, c.eps[i].server, c.eps[i].host));
        }
        CHECK(c.eps[c.neps - 1].server == items - 1);
    } else {
        CHECK(rc < 0 && e.code == rc);
        size_t len = strnlen(e.message, sizeof(e.message));
        CHECK(len > 0 && len < 200);
        CHECK(c.eps == old && c.neps == 1 && c.eps[0].port == 1);
        CHECK(strcmp(c.eps[0].host, "before") == 0);
    }
    tether__conncfg_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    connector(s);
    pool(s);
    provision(s);
    free(s);
    return 0;
}
