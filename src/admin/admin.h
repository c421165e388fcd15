/* admin.h - the admin socket (docs/operations.md): a Unix socket serving a
 * line protocol that lists the process's live pools (live.h) as one JSON
 * document and pauses, resumes, resizes, evicts and reconnects them. The
 * layer above the pool and the registry: request.c parses a request,
 * report.c answers it, server.c holds the sockets and the one thread. */
#ifndef TETHER_ADMIN_H
#define TETHER_ADMIN_H

#include "tether.h"

#include <stddef.h>

/* The longest request line, its newline included: a longer one is refused
 * and the client closed. */
#define TETHER__ADMIN_LINE_MAX 4096

/* What a request asks. */
typedef enum tether__admin_verb {
    TETHER__ADMIN_POOLS = 1,  /* pools: the JSON document */
    TETHER__ADMIN_PING,       /* ping: ok */
    TETHER__ADMIN_PAUSE,      /* pause NAME */
    TETHER__ADMIN_PAUSE_IDLE, /* pause-close-idle NAME */
    TETHER__ADMIN_RESUME,     /* resume NAME */
    TETHER__ADMIN_RESIZE,     /* resize NAME MIN MAX */
    TETHER__ADMIN_EVICT,      /* evict NAME */
    TETHER__ADMIN_RECONNECT   /* reconnect NAME */
} tether__admin_verb;

/* A parsed request. */
typedef struct tether__admin_req {
    tether__admin_verb verb;
    char name[TETHER_POOL_NAME_MAX + 1]; /* the pool, "" for pools/ping */
    int min, max;                        /* resize */
} tether__admin_req;

/* tether__admin_parse parses one request line of n bytes (without its
 * newline; a trailing carriage return is allowed) into *r. Returns 0, or -1
 * with why (cap bytes, NUL-terminated) saying what is wrong; why never
 * quotes the request. */
int tether__admin_parse(const char *line, size_t n, tether__admin_req *r,
                        char *why, size_t cap);

/* A growing output buffer; a failed growth sets oom and drops the rest. */
typedef struct tether__admin_buf {
    char *p;
    size_t len, cap;
    int oom;
} tether__admin_buf;

void tether__admin_put(tether__admin_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* tether__admin_answer appends the answer to r to b: the pools document
 * (one line of JSON), or "ok ..." or "error: ...", each ending in a
 * newline. */
void tether__admin_answer(const tether__admin_req *r, tether__admin_buf *b);

#endif
