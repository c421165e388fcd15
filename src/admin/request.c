/* request.c - the admin socket's request parser (admin.h, the protocol in
 * docs/operations.md). A request is one line: a verb, then for the verbs
 * on one pool its name (the rest of the line: a name may hold spaces), and
 * for resize the name then MIN and MAX. Bytes below 0x20 (but a final
 * carriage return) and DEL are refused. */
#include "admin.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *word;
    tether__admin_verb verb;
    int needs_name;
} verbs[] = {
    {"pools", TETHER__ADMIN_POOLS, 0},
    {"ping", TETHER__ADMIN_PING, 0},
    {"pause", TETHER__ADMIN_PAUSE, 1},
    {"pause-close-idle", TETHER__ADMIN_PAUSE_IDLE, 1},
    {"resume", TETHER__ADMIN_RESUME, 1},
    {"resize", TETHER__ADMIN_RESIZE, 1},
    {"evict", TETHER__ADMIN_EVICT, 1},
    {"reconnect", TETHER__ADMIN_RECONNECT, 1},
};

static int fail(char *why, size_t cap, const char *msg) {
    if (cap)
        snprintf(why, cap, "%s", msg);
    return -1;
}

/* A size for resize: 0 to 100000 (the keywords' range), digits only. */
static int parse_size(const char *s, size_t n, int *out) {
    if (n == 0 || n > 6)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > 100000)
        return -1;
    *out = v;
    return 0;
}

/* The start of the last space-separated word of s[0..n) (n when none). */
static size_t last_word(const char *s, size_t n) {
    size_t i = n;
    while (i > 0 && s[i - 1] != ' ')
        i--;
    return i;
}

/* resize_args splits "NAME MIN MAX" (n bytes at s): *name_len, min, max. */
static int resize_args(const char *s, size_t n, size_t *name_len,
                       tether__admin_req *r, char *why, size_t cap) {
    size_t mx = last_word(s, n);
    if (mx == 0 || mx == n)
        return fail(why, cap, "resize wants NAME MIN MAX");
    size_t mn = last_word(s, mx - 1);
    if (mn == 0 || mn == mx - 1)
        return fail(why, cap, "resize wants NAME MIN MAX");
    if (parse_size(s + mn, mx - 1 - mn, &r->min) ||
        parse_size(s + mx, n - mx, &r->max))
        return fail(why, cap,
                    "resize: MIN and MAX are whole numbers from 0 to 100000");
    if (r->max < 1 || r->min > r->max)
        return fail(why, cap, "resize: want 0 <= MIN <= MAX and MAX >= 1");
    *name_len = mn - 1;
    return 0;
}

int tether__admin_parse(const char *line, size_t n, tether__admin_req *r,
                        char *why, size_t cap) {
    memset(r, 0, sizeof(*r));
    if (n > 0 && line[n - 1] == '\r')
        n--;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            return fail(why, cap, "control character in the request");
    size_t w = 0;
    while (w < n && line[w] != ' ')
        w++;
    size_t k = 0, nverbs = sizeof(verbs) / sizeof(verbs[0]);
    while (k < nverbs &&
           !(strlen(verbs[k].word) == w && !memcmp(verbs[k].word, line, w)))
        k++;
    if (k == nverbs)
        return fail(why, cap,
                    "unknown request (want pools, ping, pause, "
                    "pause-close-idle, resume, resize, evict or reconnect)");
    r->verb = verbs[k].verb;
    if (!verbs[k].needs_name) {
        if (w != n)
            return fail(why, cap, "this request takes no argument");
        return 0;
    }
    if (w + 1 >= n)
        return fail(why, cap, "this request wants a pool name");
    const char *s = line + w + 1;
    size_t len = n - w - 1;
    if (r->verb == TETHER__ADMIN_RESIZE &&
        resize_args(s, len, &len, r, why, cap))
        return -1;
    if (len == 0)
        return fail(why, cap, "this request wants a pool name");
    if (len > TETHER_POOL_NAME_MAX)
        return fail(why, cap, "pool name too long");
    memcpy(r->name, s, len);
    r->name[len] = '\0';
    return 0;
}
