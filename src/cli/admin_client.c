/* admin_client.c - the client side of the admin socket for `tether top`
 * and `tether ctl` (docs/operations.md): connect, send one request line,
 * read the one-line answer within a timeout; and a small JSON reader for
 * the pools document (cli.h). */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_admin_connect(const char *path, char *why, size_t cap) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!*path || strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(why, cap, "bad socket path (1 to %zu bytes)",
                 sizeof(sa.sun_path) - 1);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        snprintf(why, cap, "cannot connect to %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

char *cli_admin_request(int fd, const char *req, int timeout_ms, char *why,
                        size_t cap) {
    size_t n = strlen(req), off = 0;
    while (off < n) {
        ssize_t k = send(fd, req + off, n - off, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            snprintf(why, cap, "send: %s", strerror(errno));
            return NULL;
        }
        off += (size_t)k;
    }
    size_t len = 0, size = 4096;
    char *buf = malloc(size);
    int64_t end = now_ms() + timeout_ms;
    while (buf) {
        int64_t left = end - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int k = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            snprintf(why, cap, "no answer within %d ms", timeout_ms);
            break;
        }
        if (len + 1 >= size) {
            char *b = realloc(buf, size * 2);
            if (!b)
                break;
            buf = b;
            size *= 2;
        }
        ssize_t r = recv(fd, buf + len, size - len - 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(why, cap, "the process closed the socket%s%s",
                     r < 0 ? ": " : "", r < 0 ? strerror(errno) : "");
            break;
        }
        len += (size_t)r;
        char *nl = memchr(buf, '\n', len);
        if (nl) {
            *nl = '\0';
            return buf;
        }
    }
    free(buf);
    return NULL;
}

/* ---- a small JSON reader ------------------------------------------------- */

typedef struct reader {
    const char *s;
    cli_json *nodes;
    int n, cap;
} reader;

static void skip_ws(reader *r) {
    while (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r')
        r->s++;
}

static int new_node(reader *r, int type) {
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        cli_json *q = realloc(r->nodes, sizeof(*q) * (size_t)cap);
        if (!q)
            return -1;
        r->nodes = q;
        r->cap = cap;
    }
    memset(&r->nodes[r->n], 0, sizeof(r->nodes[0]));
    r->nodes[r->n].type = type;
    r->nodes[r->n].next = r->nodes[r->n].child = -1;
    return r->n++;
}

/* A string into dst (cap bytes, cut); \u escapes become '?' but for ASCII. */
static int read_str(reader *r, char *dst, size_t cap) {
    if (*r->s != '"')
        return -1;
    r->s++;
    size_t j = 0;
    while (*r->s && *r->s != '"') {
        char c = *r->s++;
        if (c == '\\') {
            c = *r->s++;
            if (c == 'u') {
                unsigned v = 0;
                for (int i = 0; i < 4; i++, r->s++) {
                    char h = *r->s;
                    if (!h)
                        return -1;
                    v = v * 16 + (unsigned)(h <= '9'   ? h - '0'
                                            : h <= 'F' ? h - 'A' + 10
                                                       : h - 'a' + 10);
                }
                c = v >= 0x20 && v < 0x7f ? (char)v : '?';
            } else if (c == 'n' || c == 't' || c == 'r') {
                c = ' ';
            } else if (!c) {
                return -1;
            }
        }
        if (j + 1 < cap)
            dst[j++] = c;
    }
    if (*r->s != '"')
        return -1;
    r->s++;
    if (cap)
        dst[j] = '\0';
    return 0;
}

static int read_value(reader *r, int depth);

/* Members of an object or elements of an array, linked as children. */
static int read_list(reader *r, int me, char close, int depth) {
    int last = -1;
    r->s++;
    skip_ws(r);
    if (*r->s == close) {
        r->s++;
        return 0;
    }
    for (;;) {
        skip_ws(r);
        char key[64] = "";
        if (close == '}') {
            if (read_str(r, key, sizeof(key)))
                return -1;
            skip_ws(r);
            if (*r->s++ != ':')
                return -1;
        }
        int v = read_value(r, depth + 1);
        if (v < 0)
            return -1;
        memcpy(r->nodes[v].key, key, sizeof(key));
        if (last < 0)
            r->nodes[me].child = v;
        else
            r->nodes[last].next = v;
        last = v;
        skip_ws(r);
        if (*r->s == ',') {
            r->s++;
            continue;
        }
        if (*r->s++ != close)
            return -1;
        return 0;
    }
}

static int read_value(reader *r, int depth) {
    skip_ws(r);
    if (depth > 16)
        return -1;
    char c = *r->s;
    int me;
    if (c == '{' || c == '[') {
        me = new_node(r, c == '{' ? CLI_JSON_OBJECT : CLI_JSON_ARRAY);
        if (me < 0 || read_list(r, me, c == '{' ? '}' : ']', depth))
            return -1;
        return me;
    }
    if (c == '"') {
        me = new_node(r, CLI_JSON_STRING);
        if (me < 0 || read_str(r, r->nodes[me].str, sizeof(r->nodes[me].str)))
            return -1;
        return me;
    }
    if (!strncmp(r->s, "true", 4) || !strncmp(r->s, "false", 5)) {
        me = new_node(r, CLI_JSON_BOOL);
        if (me < 0)
            return -1;
        r->nodes[me].num = c == 't';
        r->s += c == 't' ? 4 : 5;
        return me;
    }
    if (!strncmp(r->s, "null", 4)) {
        r->s += 4;
        return new_node(r, CLI_JSON_NULL);
    }
    char *end;
    double v = strtod(r->s, &end);
    if (end == r->s)
        return -1;
    r->s = end;
    me = new_node(r, CLI_JSON_NUMBER);
    if (me >= 0)
        r->nodes[me].num = v;
    return me;
}

cli_json *cli_json_parse(const char *text) {
    reader r = {.s = text};
    int root = read_value(&r, 0);
    skip_ws(&r);
    if (root != 0 || *r.s) {
        free(r.nodes);
        return NULL;
    }
    return r.nodes;
}

const cli_json *cli_json_get(const cli_json *doc, const cli_json *obj,
                             const char *key) {
    if (!obj)
        return NULL;
    for (int i = obj->child; i >= 0; i = doc[i].next)
        if (!strcmp(doc[i].key, key))
            return &doc[i];
    return NULL;
}

const cli_json *cli_json_at(const cli_json *doc, const cli_json *arr, int i) {
    if (!arr)
        return NULL;
    int k = arr->child;
    for (; k >= 0 && i > 0; i--)
        k = doc[k].next;
    return k >= 0 ? &doc[k] : NULL;
}

double cli_json_num(const cli_json *doc, const cli_json *obj, const char *key,
                    double dflt) {
    const cli_json *v = cli_json_get(doc, obj, key);
    return v && (v->type == CLI_JSON_NUMBER || v->type == CLI_JSON_BOOL)
               ? v->num
               : dflt;
}

const char *cli_json_text(const cli_json *doc, const cli_json *obj,
                          const char *key) {
    const cli_json *v = cli_json_get(doc, obj, key);
    return v && v->type == CLI_JSON_STRING ? v->str : NULL;
}
