/* patroni_members.c - the member list of a Patroni /cluster answer
 * (docs/patroni.md, "Discovery"), read with json-c: a pure function from
 * text to members or a clear error. Every field is checked for its type;
 * an answer that is truncated, not JSON, too deep, lists more than the cap
 * or gives a member without a usable host and port is refused whole, so
 * that the last good list stays in force. Patroni 3.0.2 answers
 *   {"members": [{"name": "n1", "role": "leader", "state": "running",
 *     "api_url": "http://h:8008/patroni", "host": "h", "port": 5432,
 *     "timeline": 1, "tags": {"nofailover": true}}, {... "role": "replica",
 *     "state": "streaming", "lag": 0}], "scope": "..."}
 * where a replica's state is "running" or "streaming" and its lag (bytes)
 * may be "unknown". */
#include "discovery.h"

#include <json-c/json.h>
#include <string.h>

/* The deepest nesting accepted (the answer needs 4). */
#define MAX_DEPTH 16

static int bad(tether_error *err, const char *fmt, int i, const char *what) {
    return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT, fmt, i,
                            what);
}

/* A string field: 1 stored (cut at cap is refused), 0 absent or null, or
 * a negative error. */
static int str_field(json_object *m, const char *key, int i, char *out,
                     size_t cap, tether_error *err) {
    json_object *v;
    if (!json_object_object_get_ex(m, key, &v) || !v)
        return 0;
    if (!json_object_is_type(v, json_type_string))
        return bad(err, "patroni: member %d: \"%s\" is not a string", i + 1,
                   key);
    const char *s = json_object_get_string(v);
    size_t n = (size_t)json_object_get_string_len(v);
    if (n == 0 || n >= cap)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                "patroni: member %d: \"%s\" is empty or "
                                "longer than %zu bytes",
                                i + 1, key, cap - 1);
    for (size_t k = 0; k < n; k++)
        if ((unsigned char)s[k] < 0x20 || s[k] == 0x7f)
            return bad(err,
                       "patroni: member %d: \"%s\" holds a control "
                       "character",
                       i + 1, key);
    memcpy(out, s, n);
    out[n] = '\0';
    return 1;
}

/* An integer field: 1 stored, 0 absent or null, or a negative error. */
static int int_field(json_object *m, const char *key, int i, int64_t *out,
                     tether_error *err) {
    json_object *v;
    if (!json_object_object_get_ex(m, key, &v) || !v)
        return 0;
    if (!json_object_is_type(v, json_type_int))
        return bad(err, "patroni: member %d: \"%s\" is not an integer", i + 1,
                   key);
    *out = json_object_get_int64(v);
    return 1;
}

/* A tag that is true (a boolean, or a number not 0). */
static int tag_set(json_object *tags, const char *key) {
    json_object *v;
    if (!tags || !json_object_object_get_ex(tags, key, &v) || !v)
        return 0;
    if (json_object_is_type(v, json_type_boolean) ||
        json_object_is_type(v, json_type_int))
        return json_object_get_int64(v) != 0;
    if (json_object_is_type(v, json_type_string))
        return !strcmp(json_object_get_string(v), "true");
    return 0;
}

/* The host goes into a host list "h:p,h:p": none of its separators. */
static int host_ok(const char *h) {
    return strcspn(h, ",[] \t'\"\\=") == strlen(h);
}

static int role_of(const char *r) {
    if (!strcmp(r, "leader") || !strcmp(r, "master") || !strcmp(r, "primary"))
        return TETHER__PM_LEADER;
    if (!strcmp(r, "replica"))
        return TETHER__PM_REPLICA;
    if (!strcmp(r, "sync_standby"))
        return TETHER__PM_SYNC;
    if (!strcmp(r, "standby_leader"))
        return TETHER__PM_STANDBY_LEADER;
    return TETHER__PM_OTHER;
}

static int lag_field(json_object *m, int i, int64_t *lag, tether_error *err) {
    json_object *v;
    *lag = -1;
    if (!json_object_object_get_ex(m, "lag", &v) || !v)
        return 0;
    if (json_object_is_type(v, json_type_string))
        return 0; /* "unknown" or any word: not known */
    if (!json_object_is_type(v, json_type_int))
        return bad(err,
                   "patroni: member %d: \"%s\" is neither a number nor "
                   "\"unknown\"",
                   i + 1, "lag");
    int64_t n = json_object_get_int64(v);
    *lag = n < 0 ? -1 : n;
    return 0;
}

static int member(json_object *m, int i, tether__member *out,
                  tether_error *err) {
    memset(out, 0, sizeof(*out));
    if (!json_object_is_type(m, json_type_object))
        return bad(err, "patroni: member %d is not an object%s", i + 1, "");
    char role[32] = "", state[32] = "";
    int rc;
    if ((rc = str_field(m, "name", i, out->name, sizeof(out->name), err)) <= 0)
        return rc ? rc
                  : bad(err, "patroni: member %d has no \"%s\"", i + 1, "name");
    if ((rc = str_field(m, "host", i, out->host, sizeof(out->host), err)) <= 0)
        return rc ? rc
                  : bad(err, "patroni: member %d has no \"%s\"", i + 1, "host");
    if (!host_ok(out->host))
        return bad(err,
                   "patroni: member %d: \"%s\" holds a comma, bracket, "
                   "quote or space",
                   i + 1, "host");
    int64_t port = 0;
    if ((rc = int_field(m, "port", i, &port, err)) <= 0)
        return rc ? rc
                  : bad(err, "patroni: member %d has no \"%s\"", i + 1, "port");
    if (port < 1 || port > 65535)
        return bad(err, "patroni: member %d: \"%s\" is not in [1, 65535]",
                   i + 1, "port");
    out->port = (int)port;
    if ((rc = str_field(m, "role", i, role, sizeof(role), err)) < 0)
        return rc;
    out->role = role_of(role);
    if ((rc = str_field(m, "state", i, state, sizeof(state), err)) < 0)
        return rc;
    out->running = !strcmp(state, "running") || !strcmp(state, "streaming");
    if ((rc = lag_field(m, i, &out->lag, err)) < 0)
        return rc;
    if ((rc = int_field(m, "timeline", i, &out->timeline, err)) < 0)
        return rc;
    json_object *tags = NULL;
    if (json_object_object_get_ex(m, "tags", &tags) && tags &&
        !json_object_is_type(tags, json_type_object))
        return bad(err, "patroni: member %d: \"%s\" is not an object", i + 1,
                   "tags");
    out->nofailover = tag_set(tags, "nofailover");
    out->noloadbalance = tag_set(tags, "noloadbalance");
    return 0;
}

/* parse_json parses the whole of text into *root, or gives the error. */
static int parse_json(const char *text, size_t len, json_object **root,
                      tether_error *err) {
    *root = NULL;
    if (len > TETHER__PATRONI_MAX_BODY)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                "patroni: answer of %zu bytes; at most %d", len,
                                TETHER__PATRONI_MAX_BODY);
    json_tokener *tok = json_tokener_new_ex(MAX_DEPTH);
    if (!tok)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_TRANSIENT,
                                "patroni: out of memory");
    json_object *o = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!o || je != json_tokener_success) {
        json_object_put(o);
        if (je == json_tokener_continue || je == json_tokener_success)
            return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                    "patroni: the answer is truncated (JSON "
                                    "ends after %zu bytes)",
                                    len);
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                "patroni: the answer is not JSON (%s, near "
                                "byte %zu)",
                                json_tokener_error_desc(je), end);
    }
    for (size_t k = end; k < len; k++)
        if (!strchr(" \t\r\n", text[k])) {
            json_object_put(o);
            return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                    "patroni: the answer has bytes after its "
                                    "JSON (from byte %zu)",
                                    end);
        }
    *root = o;
    return 0;
}

int tether__patroni_parse(const char *text, size_t len, tether__member *out,
                          int cap, int *n, tether_error *err) {
    *n = 0;
    if (!text || len == 0)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                                "patroni: the answer is empty");
    json_object *root, *members;
    int rc = parse_json(text, len, &root, err);
    if (rc)
        return rc;
    if (!json_object_is_type(root, json_type_object))
        rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                              "patroni: the answer is not a JSON object");
    else if (!json_object_object_get_ex(root, "members", &members) ||
             !json_object_is_type(members, json_type_array))
        rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                              "patroni: the answer has no \"members\" array");
    if (rc) {
        json_object_put(root);
        return rc;
    }
    size_t count = json_object_array_length(members);
    if (count == 0)
        rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                              "patroni: the answer lists no members");
    else if (count > (size_t)cap)
        rc = tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_TRANSIENT,
                              "patroni: the answer lists %zu members; at "
                              "most %d",
                              count, cap);
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc =
            member(json_object_array_get_idx(members, i), (int)i, &out[i], err);
    json_object_put(root);
    if (rc == 0)
        *n = (int)count;
    return rc;
}
