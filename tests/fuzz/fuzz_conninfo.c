/* fuzz_conninfo.c - libFuzzer target for connection-string normalization
 * (src/conninfo/conninfo.c): feeds arbitrary bytes (as a NUL-terminated
 * copy) to tether_registry_normalize and the internal parser, and abort()s
 * when an invariant breaks:
 *   - the same input always gives the same result, and the sizing call
 *     (NULL, 0) agrees with the real one;
 *   - failure: TETHER_ESPEC, class permanent, a non-empty message under 200
 *     characters whose only quoted ("...") text is a keyword libpq or
 *     tether knows, so no input value (no password) is ever echoed;
 *   - success: the key is at most TETHER__CONNINFO_MAX bytes and
 *     normalize(key) == key;
 *   - the masked display form parses back to the same keywords and values
 *     except that every secret value reads "***", and a secret value that
 *     appears nowhere else in the pairs never appears in the display;
 *   - a copy of the parsed set formats as the key, and the copy with a
 *     keyword set formats as the key with that keyword appended does (a
 *     routing side's edit, src/pool/open.c).
 * Build it through CMakeLists.txt here (it links every layer: the keyword
 * tables the connector, the pool and the pq driver register are known),
 * then run it with a scratch directory first so new inputs never land in the
 * repository: */
// clang-format off
// build-fuzz/tests/fuzz/fuzz_conninfo -max_total_time=60 /tmp/fz tests/fuzz/corpus/conninfo
// clang-format on
#include "conninfo.h"
#include "tether.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_conninfo"
#include "fuzz_check.h"

/* check_message: every "..." span of msg is a keyword libpq or tether
 * knows (never input text that might be a password). */
static void check_message(const char *msg) {
    const char *p = msg;
    while ((p = strchr(p, '"')) != NULL) {
        const char *end = strchr(p + 1, '"');
        CHECK(end != NULL);
        char kw[64];
        size_t n = (size_t)(end - p - 1);
        CHECK(n > 0 && n < sizeof(kw));
        memcpy(kw, p + 1, n);
        kw[n] = '\0';
        CHECK(tether__conninfo_kind(kw) != TETHER__KW_UNKNOWN);
        p = end + 1;
    }
}

static void check_failure(int rc, const tether_error *e) {
    CHECK(rc == TETHER_ESPEC);
    CHECK(e->code == TETHER_ESPEC && e->cls == TETHER_CLASS_PERMANENT);
    size_t len = strnlen(e->message, sizeof(e->message));
    CHECK(len > 0 && len < 200);
    check_message(e->message);
}

/* unique_secret: v is distinctive (no quote, backslash, space, '=', '*',
 * at least 4 bytes) and occurs in no other keyword or value of ci. */
static int unique_secret(const tether__conninfo *ci, size_t self) {
    const char *v = ci->kv[self].val;
    if (strlen(v) < 4 || strpbrk(v, "'\\ =*"))
        return 0;
    for (size_t i = 0; i < ci->n; i++) {
        if (strstr(ci->kv[i].key, v))
            return 0;
        if (i != self && strstr(ci->kv[i].val, v))
            return 0;
    }
    return 1;
}

/* check_display: the display form of ci hides every secret value. */
static void check_display(const tether__conninfo *ci) {
    size_t n = tether__conninfo_format(ci, 1, NULL, 0);
    char *d = malloc(n + 1);
    CHECK(d != NULL);
    CHECK(tether__conninfo_format(ci, 1, d, n + 1) == n);
    if (n > TETHER__CONNINFO_MAX) { /* masks may lengthen it a little */
        free(d);
        return;
    }
    /* A keyword neither libpq's nor tether's is masked, name and value
     * (the tail of an unquoted password with a space): its display does
     * not round-trip; it must not show. */
    int unknown = 0;
    for (size_t i = 0; i < ci->n; i++)
        if (tether__conninfo_kind(ci->kv[i].key) == TETHER__KW_UNKNOWN) {
            unknown = 1;
            if (unique_secret(ci, i))
                CHECK(strstr(d, ci->kv[i].val) == NULL);
        }
    if (unknown) {
        free(d);
        return;
    }
    tether__conninfo back;
    CHECK(tether__conninfo_parse(d, &back, NULL) == 0);
    CHECK(back.n == ci->n);
    for (size_t i = 0; i < ci->n; i++) {
        const tether__kv *a = &ci->kv[i], *b = &back.kv[i];
        CHECK(strcmp(a->key, b->key) == 0);
        if (tether__conninfo_secret(a->key, a->val)) {
            CHECK(strcmp(b->val, TETHER__CONNINFO_MASK) == 0);
            if (unique_secret(ci, i))
                CHECK(strstr(d, a->val) == NULL);
        } else {
            CHECK(strcmp(a->val, b->val) == 0);
        }
    }
    tether__conninfo_free(&back);
    free(d);
}

/* check_edit: a copy of ci formats as key; with target_session_attrs set,
 * as key with that keyword appended normalizes. */
static void check_edit(const tether__conninfo *ci, const char *key) {
    static const char extra[] = " target_session_attrs=standby";
    tether__conninfo cp;
    CHECK(tether__conninfo_copy(&cp, ci, NULL) == 0);
    char *a = tether__conninfo_dup(&cp, 0);
    CHECK(a != NULL && strcmp(a, key) == 0);
    CHECK(tether__conninfo_set(&cp, "target_session_attrs", "standby", NULL) ==
          0);
    char *b = tether__conninfo_dup(&cp, 0);
    size_t n = strlen(key) + sizeof(extra);
    char *appended = malloc(n), *want = malloc(n + 8);
    CHECK(b != NULL && appended != NULL && want != NULL);
    snprintf(appended, n, "%s%s", key, extra);
    int wn = tether_registry_normalize(appended, want, n + 8, NULL);
    if (wn >= 0) /* not past TETHER__CONNINFO_MAX */
        CHECK(strcmp(want, b) == 0);
    free(a);
    free(b);
    free(appended);
    free(want);
    tether__conninfo_free(&cp);
}

/* check_success: key (length n) is canonical and the display is safe. */
static void check_success(const char *s, const char *key, int n) {
    CHECK(n >= 0 && n <= TETHER__CONNINFO_MAX);
    CHECK(strlen(key) == (size_t)n);
    char *again = malloc((size_t)n + 1);
    CHECK(again != NULL);
    CHECK(tether_registry_normalize(key, again, (size_t)n + 1, NULL) == n);
    CHECK(strcmp(again, key) == 0);
    free(again);
    tether__conninfo ci;
    char *k = NULL;
    CHECK(tether__conninfo_parse(s, &ci, NULL) == 0);
    check_display(&ci);
    check_edit(&ci, key);
    tether__conninfo_free(&ci);
    CHECK(tether__conninfo_keys(s, &k, NULL, NULL) == 0);
    CHECK(strcmp(k, key) == 0);
    free(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    tether_error e1, e2;
    memset(&e1, 0x5a, sizeof(e1));
    int n = tether_registry_normalize(s, NULL, 0, &e1);
    if (n < 0) {
        check_failure(n, &e1);
        CHECK(tether_registry_normalize(s, NULL, 0, &e2) == n);
        CHECK(strcmp(e1.message, e2.message) == 0);
    } else {
        char *key = malloc((size_t)n + 1);
        CHECK(key != NULL);
        CHECK(tether_registry_normalize(s, key, (size_t)n + 1, &e2) == n);
        check_success(s, key, n);
        free(key);
    }
    free(s);
    return 0;
}
