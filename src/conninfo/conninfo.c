/* conninfo.c - libpq connection strings to the registry's pool key.
 *
 * Two input forms, as libpq reads them:
 *   key=value:  keyword [A-Za-z_][A-Za-z0-9_]*, '=' with optional spaces
 *               around it, then a bare value (up to a space; backslash
 *               escapes the next byte) or a single-quoted one (\' and \\
 *               escapes; '' is the empty value);
 *   URI:        postgresql:// or postgres:// [user[:password]@]
 *               [host[:port][,host[:port]]...][/dbname][?key=value&...],
 *               every part percent-decoded, [v6 literal] hosts.
 * Both become a set of pairs (the last one of a keyword wins, as in libpq),
 * sorted by keyword and written as "k1='v1' k2='v2'": the canonical form.
 * Errors name byte positions (1-based) and, at most, a documented libpq
 * keyword: never any other input text, so never a password. */
#include "conninfo.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define URI_DELIMS ":/?,"

typedef struct parser {
    const char *s; /* the whole input */
    size_t len;
    size_t i; /* cursor */
    tether__conninfo *ci;
    tether_error *err;
    char *hosts, *ports; /* URI scratch: the host and port lists */
    int overflow;        /* the arena was too small (cannot happen) */
} parser;

/* ci_contains: ASCII case-insensitive substring test. */
static int ci_contains(const char *s, const char *sub) {
    size_t n = strlen(sub);
    for (; *s; s++) {
        size_t k = 0;
        while (k < n && s[k] && (s[k] | 0x20) == sub[k])
            k++;
        if (k == n)
            return 1;
    }
    return 0;
}

static size_t uri_prefix(const char *s) {
    if (strncmp(s, "postgresql://", 13) == 0)
        return 13;
    if (strncmp(s, "postgres://", 11) == 0)
        return 11;
    return 0;
}

int tether__conninfo_secret(const char *key, const char *val) {
    if (ci_contains(key, "password") || ci_contains(key, "secret") ||
        strncmp(key, "scram_", 6) == 0 || tether__conninfo_libpq_secret(key))
        return 1;
    if (strcmp(key, "dbname") == 0 && val)
        return strchr(val, '=') != NULL || uri_prefix(val) != 0;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Errors and small helpers                                                 */
/* ------------------------------------------------------------------------ */

static int fail(parser *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* fail sets err to TETHER_ESPEC, "connection string: <message>". */
static int fail(parser *ps, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = tether__error_vset(ps->err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                "connection string: ", fmt, ap);
    va_end(ap);
    return rc;
}

/* kw_quote returns ` "key"` for a keyword libpq or tether knows, else "". */
static const char *kw_quote(const char *key, char buf[48]) {
    if (tether__conninfo_kind(key) == TETHER__KW_UNKNOWN)
        return "";
    snprintf(buf, 48, " \"%s\"", key);
    return buf;
}

/* fail_value reports a malformed value of key: for a secret keyword only
 * "bad value for <keyword>", never the value. */
static int fail_value(parser *ps, const char *key, const char *what,
                      size_t pos) {
    char q[48];
    if (tether__conninfo_secret(key, NULL)) {
        if (tether__conninfo_kind(key) != TETHER__KW_UNKNOWN)
            return fail(ps, "bad value for %s (%s)", key, what);
        return fail(ps, "bad value for a secret keyword (%s)", what);
    }
    return fail(ps, "%s in the value of keyword%s at position %zu", what,
                kw_quote(key, q), pos);
}

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
           c == '\r';
}

static int kw_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int kw_char(char c) {
    return kw_start(c) || (c >= '0' && c <= '9');
}

static int valid_keyword(const char *k) {
    if (!kw_start(*k))
        return 0;
    while (*++k)
        if (!kw_char(*k))
            return 0;
    return 1;
}

static void skip_space(parser *ps) {
    while (ps->i < ps->len && is_space(ps->s[ps->i]))
        ps->i++;
}

/* put appends c to the arena's string in progress. */
static void put(parser *ps, char c) {
    tether__conninfo *ci = ps->ci;
    if (ci->used < ci->size)
        ci->arena[ci->used++] = c;
    else
        ps->overflow = 1;
}

/* finish_str ends the arena string that started at offset start. */
static const char *finish_str(parser *ps, size_t start) {
    put(ps, '\0');
    return ps->overflow ? "" : ps->ci->arena + start;
}

/* copy_str puts s[a, b) into the arena as a string. */
static const char *copy_str(parser *ps, const char *s, size_t n) {
    size_t start = ps->ci->used;
    for (size_t k = 0; k < n; k++)
        put(ps, s[k]);
    return finish_str(ps, start);
}

static int add_pair(parser *ps, const char *key, const char *val) {
    tether__conninfo *ci = ps->ci;
    if (ci->n == ci->cap) {
        size_t cap = ci->cap ? ci->cap * 2 : 16;
        tether__kv *kv = tether__realloc(ci->kv, cap * sizeof(*kv));
        if (!kv)
            return tether_error_set(ps->err, TETHER_ENOMEM,
                                    TETHER_CLASS_PERMANENT, "out of memory");
        ci->kv = kv;
        ci->cap = cap;
    }
    ci->kv[ci->n] = (tether__kv){key, val, ci->n};
    ci->n++;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* key=value form                                                           */
/* ------------------------------------------------------------------------ */

/* read_keyword reads a keyword, the '=' and the spaces around it. */
static int read_keyword(parser *ps, const char **key) {
    char q[48];
    size_t start = ps->i;
    if (!kw_start(ps->s[ps->i]))
        return fail(ps, "bad keyword at position %zu", start + 1);
    while (ps->i < ps->len && kw_char(ps->s[ps->i]))
        ps->i++;
    char c = ps->s[ps->i];
    if (c != '=' && c != '\0' && !is_space(c))
        return fail(ps, "bad character in keyword at position %zu", ps->i + 1);
    *key = copy_str(ps, ps->s + start, ps->i - start);
    skip_space(ps);
    if (ps->s[ps->i] != '=')
        return fail(ps, "missing '=' after keyword%s at position %zu",
                    kw_quote(*key, q), start + 1);
    ps->i++;
    skip_space(ps);
    return 0;
}

static int read_quoted(parser *ps, const char *key, const char **val) {
    size_t q = ps->i++, start = ps->ci->used;
    for (;;) {
        if (ps->i >= ps->len)
            return fail_value(ps, key, "unterminated quote", q + 1);
        char c = ps->s[ps->i++];
        if (c == '\'')
            break;
        if (c == '\\') {
            if (ps->i >= ps->len)
                return fail_value(ps, key, "unterminated quote", q + 1);
            c = ps->s[ps->i++];
        }
        put(ps, c);
    }
    *val = finish_str(ps, start);
    return 0;
}

/* read_value reads a bare or quoted value (a bare one may be empty). */
static int read_value(parser *ps, const char *key, const char **val) {
    if (ps->s[ps->i] == '\'')
        return read_quoted(ps, key, val);
    size_t start = ps->ci->used;
    while (ps->i < ps->len && !is_space(ps->s[ps->i])) {
        if (ps->s[ps->i] == '\\' && ++ps->i >= ps->len)
            break; /* a trailing backslash escapes nothing (libpq) */
        put(ps, ps->s[ps->i++]);
    }
    *val = finish_str(ps, start);
    return 0;
}

static int parse_kv_form(parser *ps) {
    for (;;) {
        const char *key = NULL, *val = NULL;
        skip_space(ps);
        if (ps->i >= ps->len)
            return 0;
        int rc = read_keyword(ps, &key);
        if (rc == 0)
            rc = read_value(ps, key, &val);
        if (rc == 0)
            rc = add_pair(ps, key, val);
        if (rc != 0)
            return rc;
    }
}

/* ------------------------------------------------------------------------ */
/* URI form                                                                 */
/* ------------------------------------------------------------------------ */

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (c | 0x20) - 'a' + 10;
    return -1;
}

/* decode writes the percent-decoding of s[a, b) to dst (at most b - a
 * bytes, no NUL) and stores its length in *n. Returns 0, or the 1-based
 * position of a bad escape (not two hex digits, or %00). */
static size_t decode(const parser *ps, size_t a, size_t b, char *dst,
                     size_t *n) {
    size_t k = 0;
    for (size_t i = a; i < b; i++) {
        char c = ps->s[i];
        if (c == '%') {
            int hi = i + 2 < b ? hexval(ps->s[i + 1]) : -1;
            int lo = hi >= 0 ? hexval(ps->s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return i + 1;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        dst[k++] = c;
    }
    *n = k;
    return 0;
}

/* decode_str decodes s[a, b) into a new arena string for key's value (key
 * NULL: the string is a query keyword). */
static int decode_str(parser *ps, const char *key, size_t a, size_t b,
                      const char **out) {
    size_t n, start = ps->ci->used;
    if (ps->ci->size - start < b - a + 1) {
        ps->overflow = 1;
        *out = "";
        return 0;
    }
    size_t bad = decode(ps, a, b, ps->ci->arena + start, &n);
    if (bad && key && tether__conninfo_secret(key, NULL))
        return fail_value(ps, key, "bad percent escape in URI", bad);
    if (bad)
        return fail(ps, "bad percent escape at position %zu in URI", bad);
    ps->ci->used += n;
    *out = finish_str(ps, start);
    return 0;
}

/* uri_store decodes s[a, b) and adds it as key's value (nothing when the
 * span is empty, as libpq). */
static int uri_store(parser *ps, const char *key, size_t a, size_t b) {
    const char *val;
    if (a == b)
        return 0;
    int rc = decode_str(ps, key, a, b, &val);
    return rc ? rc : add_pair(ps, key, val);
}

/* uri_userinfo reads "user[:password]@" when an '@' comes before any '/'. */
static int uri_userinfo(parser *ps) {
    size_t a = ps->i, at = a, colon = a;
    while (at < ps->len && ps->s[at] != '@' && ps->s[at] != '/')
        at++;
    if (at >= ps->len || ps->s[at] != '@')
        return 0;
    while (colon < at && ps->s[colon] != ':')
        colon++;
    int rc = uri_store(ps, "user", a, colon);
    if (rc == 0 && colon < at)
        rc = uri_store(ps, "password", colon + 1, at);
    ps->i = at + 1;
    return rc;
}

/* uri_host_span finds the next host: [v6] or up to a delimiter. */
static int uri_host_span(parser *ps, size_t *a, size_t *b) {
    if (ps->s[ps->i] != '[') {
        *a = ps->i;
        while (ps->i < ps->len && !strchr(URI_DELIMS, ps->s[ps->i]))
            ps->i++;
        *b = ps->i;
        return 0;
    }
    *a = ++ps->i;
    while (ps->i < ps->len && ps->s[ps->i] != ']')
        ps->i++;
    if (ps->i >= ps->len)
        return fail(ps, "missing ']' after IPv6 host at position %zu in URI",
                    *a);
    if (ps->i == *a)
        return fail(ps, "empty IPv6 host at position %zu in URI", *a);
    *b = ps->i++;
    char c = ps->s[ps->i];
    if (c != '\0' && !strchr(URI_DELIMS, c))
        return fail(ps, "unexpected character at position %zu in URI",
                    ps->i + 1);
    return 0;
}

/* uri_port decodes the port after ':' into ps->ports + *pn and checks it:
 * empty, or a number in [1, 65535]. Sets *any for a non-empty port. */
static int uri_port(parser *ps, size_t *pn, int *any) {
    size_t a = ++ps->i, n;
    while (ps->i < ps->len && !strchr("/?,", ps->s[ps->i]))
        ps->i++;
    size_t bad = decode(ps, a, ps->i, ps->ports + *pn, &n);
    if (bad)
        return fail(ps, "bad percent escape at position %zu in URI", bad);
    long v = 0;
    for (size_t k = 0; k < n; k++) {
        char c = ps->ports[*pn + k];
        if (c < '0' || c > '9' || (v = v * 10 + (c - '0')) > 65535)
            return fail(ps, "bad port at position %zu in URI", a + 1);
    }
    if (n > 0 && v < 1)
        return fail(ps, "bad port at position %zu in URI", a + 1);
    *pn += n;
    *any |= n > 0;
    return 0;
}

/* uri_hosts reads host[:port][,host[:port]]... into host= and port=. */
static int uri_hosts(parser *ps) {
    size_t hn = 0, pn = 0, a = 0, b = 0, n = 0;
    int any_port = 0;
    for (;;) {
        int rc = uri_host_span(ps, &a, &b);
        if (rc != 0)
            return rc;
        size_t bad = decode(ps, a, b, ps->hosts + hn, &n);
        if (bad)
            return fail(ps, "bad percent escape at position %zu in URI", bad);
        hn += n;
        if (ps->s[ps->i] == ':' && (rc = uri_port(ps, &pn, &any_port)) != 0)
            return rc;
        if (ps->s[ps->i] != ',')
            break;
        ps->i++;
        ps->hosts[hn++] = ',';
        ps->ports[pn++] = ',';
    }
    int rc = hn ? add_pair(ps, "host", copy_str(ps, ps->hosts, hn)) : 0;
    if (rc == 0 && any_port)
        rc = add_pair(ps, "port", copy_str(ps, ps->ports, pn));
    return rc;
}

/* uri_param reads one "key=value" of the query, s[a, b). */
static int uri_param(parser *ps, size_t a, size_t b) {
    const char *eq = memchr(ps->s + a, '=', b - a);
    if (!eq)
        return fail(ps, "missing '=' in URI query parameter at position %zu",
                    a + 1);
    size_t e = (size_t)(eq - ps->s);
    if (memchr(eq + 1, '=', b - e - 1))
        return fail(ps, "extra '=' in URI query parameter at position %zu",
                    a + 1);
    const char *key = NULL, *val = NULL;
    int rc = decode_str(ps, NULL, a, e, &key);
    if (rc != 0)
        return rc;
    if (!valid_keyword(key))
        return fail(ps, "bad keyword in URI query parameter at position %zu",
                    a + 1);
    if ((rc = decode_str(ps, key, e + 1, b, &val)) != 0)
        return rc;
    if (strcmp(key, "ssl") == 0 && strcmp(val, "true") == 0)
        return add_pair(ps, "sslmode", "require"); /* libpq, for JDBC */
    return add_pair(ps, key, val);
}

static int uri_params(parser *ps) {
    while (ps->i < ps->len) {
        size_t a = ps->i;
        while (ps->i < ps->len && ps->s[ps->i] != '&')
            ps->i++;
        int rc = uri_param(ps, a, ps->i);
        if (rc != 0)
            return rc;
        if (ps->i < ps->len)
            ps->i++; /* the '&' */
    }
    return 0;
}

static int parse_uri(parser *ps, size_t prefix) {
    ps->i = prefix;
    ps->hosts = tether__malloc(2 * (ps->len + 1));
    if (!ps->hosts)
        return tether_error_set(ps->err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "out of memory");
    ps->ports = ps->hosts + ps->len + 1;
    int rc = uri_userinfo(ps);
    if (rc == 0)
        rc = uri_hosts(ps);
    if (rc == 0 && ps->s[ps->i] == '/') {
        size_t a = ++ps->i;
        while (ps->i < ps->len && ps->s[ps->i] != '?')
            ps->i++;
        rc = uri_store(ps, "dbname", a, ps->i);
    }
    if (rc == 0 && ps->s[ps->i] == '?') {
        ps->i++;
        rc = uri_params(ps);
    }
    tether__free(ps->hosts);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Parse, canonical form                                                    */
/* ------------------------------------------------------------------------ */

static int kv_cmp(const void *a, const void *b) {
    const tether__kv *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c != 0)
        return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* settle sorts the pairs by keyword and keeps the last of each keyword. */
static void settle(tether__conninfo *ci) {
    size_t out = 0;
    if (ci->n > 1)
        qsort(ci->kv, ci->n, sizeof(*ci->kv), kv_cmp);
    for (size_t i = 0; i < ci->n; i++) {
        if (i + 1 < ci->n && strcmp(ci->kv[i].key, ci->kv[i + 1].key) == 0)
            continue;
        ci->kv[out++] = ci->kv[i];
    }
    ci->n = out;
}

static int all_space(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (!is_space(s[i]))
            return 0;
    return 1;
}

/* parse_checked runs the parser on s, whose length is already checked. */
static int parse_checked(parser *ps) {
    tether__conninfo *ci = ps->ci;
    ci->size = 2 * ps->len + 16;
    ci->arena = tether__malloc(ci->size);
    if (!ci->arena)
        return tether_error_set(ps->err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "out of memory");
    size_t prefix = uri_prefix(ps->s);
    int rc = prefix ? parse_uri(ps, prefix) : parse_kv_form(ps);
    if (rc == 0 && ps->overflow)
        rc = tether_error_set(ps->err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                              "connection string: internal buffer overflow");
    if (rc != 0)
        return rc;
    settle(ci); /* no keyword at all is libpq's defaults, as "" */
    if (tether__conninfo_format(ci, 0, NULL, 0) > TETHER__CONNINFO_MAX)
        return fail(ps, "normalized form longer than %d bytes",
                    TETHER__CONNINFO_MAX);
    return 0;
}

int tether__conninfo_parse(const char *s, tether__conninfo *ci,
                           tether_error *err) {
    memset(ci, 0, sizeof(*ci));
    if (!s)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "conninfo is NULL");
    parser ps = {
        s, strnlen(s, TETHER__CONNINFO_MAX + 1), 0, ci, err, NULL, NULL, 0};
    if (ps.len > TETHER__CONNINFO_MAX)
        return fail(&ps, "longer than %d bytes", TETHER__CONNINFO_MAX);
    if (all_space(s, ps.len))
        return 0; /* "": every keyword at libpq's default */
    int rc = parse_checked(&ps);
    if (rc != 0)
        ci->n = 0;
    return rc;
}

void tether__conninfo_free(tether__conninfo *ci) {
    if (!ci)
        return;
    tether__free(ci->kv);
    tether__free(ci->arena);
    memset(ci, 0, sizeof(*ci));
}

const char *tether__conninfo_get(const tether__conninfo *ci, const char *key) {
    for (size_t i = 0; i < ci->n; i++)
        if (strcmp(ci->kv[i].key, key) == 0)
            return ci->kv[i].val;
    return NULL;
}

/* emit writes c at *n when it fits (leaving room for the NUL). */
static void emit(char *buf, size_t cap, size_t *n, char c) {
    if (*n + 1 < cap)
        buf[*n] = c;
    (*n)++;
}

static void emit_str(char *buf, size_t cap, size_t *n, const char *s) {
    while (*s)
        emit(buf, cap, n, *s++);
}

size_t tether__conninfo_format(const tether__conninfo *ci, int masked,
                               char *buf, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < ci->n; i++) {
        const tether__kv *kv = &ci->kv[i];
        const char *k = kv->key, *v = kv->val;
        if (masked && tether__conninfo_secret(k, v))
            v = TETHER__CONNINFO_MASK;
        /* A keyword neither libpq's nor tether's may be the second half of
         * an unquoted password with a space ("password=ab cd=ef"): its
         * name and value are both masked. */
        if (masked && tether__conninfo_kind(k) == TETHER__KW_UNKNOWN)
            k = v = TETHER__CONNINFO_MASK;
        if (i > 0)
            emit(buf, cap, &n, ' ');
        emit_str(buf, cap, &n, k);
        emit_str(buf, cap, &n, "='");
        for (; *v; v++) {
            if (*v == '\'' || *v == '\\')
                emit(buf, cap, &n, '\\');
            emit(buf, cap, &n, *v);
        }
        emit(buf, cap, &n, '\'');
    }
    if (cap > 0)
        buf[n < cap ? n : cap - 1] = '\0';
    return n;
}

char *tether__conninfo_dup(const tether__conninfo *ci, int masked) {
    size_t n = tether__conninfo_format(ci, masked, NULL, 0);
    char *s = tether__malloc(n + 1);
    if (s)
        tether__conninfo_format(ci, masked, s, n + 1);
    return s;
}

int tether__conninfo_keys(const char *s, char **key, char **display,
                          tether_error *err) {
    tether__conninfo ci;
    char *k = NULL, *d = NULL;
    int rc = tether__conninfo_parse(s, &ci, err);
    if (rc == 0) {
        k = key ? tether__conninfo_dup(&ci, 0) : NULL;
        d = display ? tether__conninfo_dup(&ci, 1) : NULL;
        if ((key && !k) || (display && !d))
            rc = tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                  "out of memory");
    }
    tether__conninfo_free(&ci);
    if (rc != 0) {
        tether__free(k);
        tether__free(d);
        k = d = NULL;
    }
    if (key)
        *key = k;
    if (display)
        *display = d;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Editing a parsed set                                                     */
/* ------------------------------------------------------------------------ */

/* arena_put copies s into the arena a at *used. */
static const char *arena_put(char *a, size_t *used, const char *s) {
    size_t n = strlen(s) + 1;
    memcpy(a + *used, s, n);
    *used += n;
    return a + *used - n;
}

/* rebuild makes dst hold src's pairs (dst may be src) in new storage with
 * room for one more pair and extra arena bytes; src's old storage is wiped
 * and freed when dst is src. */
static int rebuild(tether__conninfo *dst, const tether__conninfo *src,
                   size_t extra, tether_error *err) {
    size_t size = extra, used = 0;
    for (size_t i = 0; i < src->n; i++)
        size += strlen(src->kv[i].key) + strlen(src->kv[i].val) + 2;
    char *arena = tether__malloc(size ? size : 1);
    tether__kv *kv = tether__malloc((src->n + 1) * sizeof(*kv));
    if (!arena || !kv) {
        tether__free(arena);
        tether__free(kv);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "out of memory");
    }
    for (size_t i = 0; i < src->n; i++) {
        kv[i].key = arena_put(arena, &used, src->kv[i].key);
        kv[i].val = arena_put(arena, &used, src->kv[i].val);
        kv[i].seq = i;
    }
    size_t n = src->n;
    if (dst == src)
        tether__conninfo_wipe(dst);
    *dst = (tether__conninfo){kv, n, n + 1, arena, used, size ? size : 1};
    return 0;
}

int tether__conninfo_copy(tether__conninfo *dst, const tether__conninfo *src,
                          tether_error *err) {
    memset(dst, 0, sizeof(*dst));
    return rebuild(dst, src, 0, err);
}

int tether__conninfo_set(tether__conninfo *ci, const char *key, const char *val,
                         tether_error *err) {
    size_t at = 0;
    while (at < ci->n && strcmp(ci->kv[at].key, key) < 0)
        at++;
    int found = at < ci->n && strcmp(ci->kv[at].key, key) == 0;
    size_t need = strlen(key) + strlen(val) + 2;
    if ((!found && ci->n == ci->cap) || ci->size - ci->used < need) {
        int rc = rebuild(ci, ci, need, err);
        if (rc != 0)
            return rc;
    }
    if (!found) {
        memmove(ci->kv + at + 1, ci->kv + at, (ci->n - at) * sizeof(*ci->kv));
        ci->kv[at].key = arena_put(ci->arena, &ci->used, key);
        ci->kv[at].seq = ci->n++;
    }
    ci->kv[at].val = arena_put(ci->arena, &ci->used, val);
    return 0;
}

void tether__conninfo_wipe(tether__conninfo *ci) {
    if (ci && ci->arena)
        memset(ci->arena, 0, ci->size);
    tether__conninfo_free(ci);
}

/* ------------------------------------------------------------------------ */
/* Pool names (metrics labels, logs)                                        */
/* ------------------------------------------------------------------------ */

_Static_assert(TETHER_POOL_NAME_MAX == 128, "TETHER__NAME_WANT says 128");

int tether__conninfo_name_ok(const char *name) {
    size_t n = name ? strlen(name) : 0;
    int ok = n >= 1 && n <= TETHER_POOL_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)name[i] >= 0x20 && name[i] != 0x7f;
    return ok;
}

int tether__conninfo_name_check(const char *key, const char *name,
                                tether_error *err) {
    if (tether__conninfo_name_ok(name))
        return 0;
    return tether__conninfo_bad_value(key, name, TETHER__NAME_WANT, err);
}

/* The first item of a comma-separated list value, or NULL when empty. */
static const char *first_item(const tether__conninfo *ci, const char *key,
                              int *len) {
    const char *v = tether__conninfo_get(ci, key);
    /* a port item may list several ports ("6379|6380"): the first */
    size_t n = v ? strcspn(v, strcmp(key, "port") ? "," : ",|") : 0;
    *len = n > 255 ? 255 : (int)n;
    return n ? v : NULL;
}

/* name_fit cuts s to TETHER_POOL_NAME_MAX bytes, not inside a UTF-8
 * sequence, and turns control bytes into '?'. */
static void name_fit(char *s) {
    size_t n = strlen(s);
    if (n > TETHER_POOL_NAME_MAX) {
        size_t cut = TETHER_POOL_NAME_MAX;
        while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
            cut--;
        /* found by fuzz_keywords: bytes that are all continuations (not
         * UTF-8) left an empty name: cut them where the limit is */
        s[cut ? cut : TETHER_POOL_NAME_MAX] = '\0';
    }
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

int tether__conninfo_pool_name(const tether__conninfo *ci, char **out,
                               tether_error *err) {
    *out = NULL;
    const char *set = tether__conninfo_get(ci, "tether_pool_name");
    int rc =
        set ? tether__conninfo_name_check("tether_pool_name", set, err) : 0;
    int hn, pn, un, dn;
    const char *h = first_item(ci, "host", &hn);
    if (!h)
        h = first_item(ci, "hostaddr", &hn);
    if (rc || (!set && !h))
        return rc;
    const char *port = first_item(ci, "port", &pn);
    const char *user = tether__conninfo_get(ci, "user");
    const char *db = tether__conninfo_get(ci, "dbname");
    if (db && tether__conninfo_secret("dbname", db))
        db = NULL; /* a nested connection string may hold a password */
    un = user ? (int)strnlen(user, 255) : 0;
    dn = db ? (int)strnlen(db, 255) : 0;
    int v6 = h && memchr(h, ':', (size_t)hn) != NULL;
    char buf[1100];
    if (set)
        snprintf(buf, sizeof(buf), "%s", set);
    else
        snprintf(buf, sizeof(buf), "%.*s%s%s%.*s%s%s%.*s%s%.*s", un,
                 user ? user : "", un ? "@" : "", v6 ? "[" : "", hn, h,
                 v6 ? "]" : "", port ? ":" : "", pn, port ? port : "",
                 dn ? "/" : "", dn, db ? db : "");
    name_fit(buf);
    if (!(*out = tether__strdup(buf)))
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "out of memory");
    return 0;
}
