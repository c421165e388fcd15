/* fuzz_server.c - libFuzzer target for what tether parses from the bytes a
 * server sends. A fake server on a Unix socket answers the pq driver's real
 * libpq connection (tether_driver_pq(): connect_start/connect_poll, alive,
 * validate, reset, query_role, role) with the fuzzer's bytes: libpq parses
 * the wire protocol, and tether reads what libpq hands it: the parameter
 * reports (in_hot_standby, default_transaction_read_only) at connect and
 * while idle, FATAL and shutdown notices that arrive while idle (the
 * liveness probe), error fields and messages of failed connects and
 * queries (classification, scrubbing), the role query's answer.
 *
 * Input: one flags byte, then up to five chunks, each a 2-byte
 * little-endian length and that many bytes (the last one takes what is
 * left), written by the server at these points:
 *   0  after AuthenticationOk, while connecting (flag 1 appends canned
 *      in_hot_standby=off, default_transaction_read_only=off,
 *      BackendKeyData and ReadyForQuery)
 *   1  while the connection is idle, then alive(probe) and role()
 *   2  as the answer to validate()'s empty query
 *   3  as the answer to reset() (ROLLBACK when a transaction is open, and
 *      "SET x" when flag 8 is set)
 *   4  as the answer to query_role()'s SELECT pg_is_in_recovery()
 * Flag 2 hangs up (the server's write side) after chunk 1; flag 4 appends
 * ReadyForQuery(idle) to chunks 2-4. When libpq waits for bytes while
 * connecting and none are left, or an answer holds fewer ReadyForQuery
 * than the queries it answers, the server hangs up, so nothing waits out
 * a budget; with flag 16 it stays for validate and query_role, whose
 * round trips then time out after 1 ms. Message lengths above 64 KiB are cut to
 * 64 KiB (put_chunk).
 *
 * Invariants (abort() on a break):
 *   - every call returns one of its documented values; a failure fills the
 *     error with the same code, a class and a non-empty message; a failed
 *     connect is not_sent;
 *   - role() agrees with the in_hot_standby the server reported;
 *   - a probe that says alive (1) was not shown a role change: the
 *     in_hot_standby (else default_transaction_read_only) libpq now holds
 *     is the one reported at connect;
 *   - once a probe says dead or fatal, no later probe says alive.
 * Build it like the others (see CMakeLists.txt here) and run it with a
 * scratch directory first:
 *   build-fuzz/tests/fuzz/fuzz_server -max_total_time=60 /tmp/fz \
 *       tests/fuzz/corpus/server
 * tests/fuzz/server_seeds.py writes the committed seeds. */
#include "driver.h"
#include "pq.h"
#include "tether.h"
#include "tether_pq.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define FUZZ_NAME "fuzz_server"
#include "fuzz_check.h"

#define PORT 5432
#define NCHUNKS 5
#define ROUND_TRIP_MS 1

enum {
    F_STARTUP = 1, /* canned parameter reports and ReadyForQuery */
    F_HANGUP = 2,  /* hang up after the idle chunk */
    F_READY = 4,   /* ReadyForQuery after each answer */
    F_RESETQ = 8,  /* reset() with a reset query */
    F_SLOW = 16    /* an answer short of ReadyForQuery: no hang-up */
};

static const tether_driver *drv;
static void *dctx;
static int lfd = -1;
static char dir[64], path[128];

static void cleanup(void) {
    if (lfd >= 0)
        close(lfd);
    unlink(path);
    rmdir(dir);
}

static void setup(void) {
    snprintf(dir, sizeof(dir), "/tmp/tether-fuzz-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/.s.PGSQL.%d", dir, PORT);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(lfd >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    CHECK(bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
    CHECK(listen(lfd, 16) == 0);
    atexit(cleanup);
    static const char *const keys[] = {"user", "dbname", "sslmode",
                                       "gssencmode", "application_name"};
    static const char *const vals[] = {"fuzz", "fuzz", "disable", "disable",
                                       "fuzz"};
    tether_error e = {0};
    drv = tether_driver_pq();
    if (drv->params_create(keys, vals, 5, &dctx, &e) != 0) {
        fprintf(stderr, "fuzz_server: %s\n", e.message);
        abort();
    }
}

/* ---- the fake server's side ------------------------------------------- */

typedef struct out {
    uint8_t buf[16384];
    size_t n;
} out;

static void put(out *o, const void *p, size_t n) {
    if (n == 0)
        return;
    n = n < sizeof(o->buf) - o->n ? n : sizeof(o->buf) - o->n;
    memcpy(o->buf + o->n, p, n);
    o->n += n;
}

/* msg appends one protocol message: type, length, payload. */
static void msg(out *o, char type, const void *payload, size_t n) {
    uint32_t len = (uint32_t)n + 4;
    uint8_t h[5] = {(uint8_t)type, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
                    (uint8_t)(len >> 8), (uint8_t)len};
    put(o, h, sizeof(h));
    put(o, payload, n);
}

static void param(out *o, const char *name, const char *val) {
    char p[128];
    size_t a = strlen(name) + 1, b = strlen(val) + 1;
    memcpy(p, name, a);
    memcpy(p + a, val, b);
    msg(o, 'S', p, a + b);
}

static void ready(out *o) {
    msg(o, 'Z', "I", 1);
}

/* put_chunk appends a chunk of messages with every length the chunk
 * claims cut to MSG_CAP: libpq grows its buffer to a message's claimed
 * length before it reads it, and a fuzzer's 100 MB lengths would make the
 * target slow for nothing (framing is libpq's, not tether's). */
#define MSG_CAP 65536
static void put_chunk(out *o, const uint8_t *p, size_t n) {
    size_t at = o->n;
    put(o, p, n);
    uint8_t *b = o->buf + at;
    n = o->n - at;
    for (size_t i = 0; i + 5 <= n;) {
        uint32_t len = (uint32_t)b[i + 1] << 24 | (uint32_t)b[i + 2] << 16 |
                       (uint32_t)b[i + 3] << 8 | b[i + 4];
        if (len > MSG_CAP) {
            len = MSG_CAP;
            b[i + 1] = 0;
            b[i + 2] = MSG_CAP >> 16;
            b[i + 3] = b[i + 4] = 0;
        }
        i += 1 + (size_t)len;
    }
}

/* Every byte the server sent in this run, to tell where its messages
 * begin (readies). */
static uint8_t stream[8 * sizeof(((out *)0)->buf)];
static size_t streamed;

/* send_all writes what fits without blocking (the rest is dropped). */
static void send_all(int fd, const out *o) {
    size_t keep =
        o->n < sizeof(stream) - streamed ? o->n : sizeof(stream) - streamed;
    memcpy(stream + streamed, o->buf, keep);
    streamed += keep;
    size_t off = 0;
    while (off < o->n) {
        ssize_t w =
            send(fd, o->buf + off, o->n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

/* drain reads and drops what the client sent (its queries). */
static void drain(int fd) {
    char b[4096];
    while (recv(fd, b, sizeof(b), MSG_DONTWAIT) > 0)
        ;
}

static int readable(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

/* ---- checks ----------------------------------------------------------- */

static int known_class(tether_class k) {
    return k == TETHER_CLASS_TRANSIENT || k == TETHER_CLASS_THROTTLED ||
           k == TETHER_CLASS_PERMANENT;
}

static void check_error(int rc, const tether_error *e) {
    CHECK(rc < 0 && e->code == rc && known_class(e->cls));
    size_t n = strnlen(e->message, sizeof(e->message));
    CHECK(n > 0 && n < sizeof(e->message));
}

static char *dup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
}

typedef struct session {
    void *conn;
    PGconn *pg;
    int srv;
    char *hs0, *ro0; /* in_hot_standby, read_only at connect */
    int was_down;    /* a probe said dead or fatal */
} session;

static void check_role(const session *s) {
    tether_role r = drv->role(s->conn);
    CHECK(r == TETHER_ROLE_UNKNOWN || r == TETHER_ROLE_PRIMARY ||
          r == TETHER_ROLE_STANDBY);
    const char *hs = PQparameterStatus(s->pg, "in_hot_standby");
    if (hs)
        CHECK(r == (strcmp(hs, "on") == 0 ? TETHER_ROLE_STANDBY
                                          : TETHER_ROLE_PRIMARY));
}

/* changed: libpq holds a role report that means another role than the one
 * at connect, for the parameter tether watches (in_hot_standby when
 * reported non-empty at connect, else default_transaction_read_only): "on"
 * or not (two different values that both mean "not on" are no change). */
static int changed(const session *s) {
    const char *name = "in_hot_standby", *seen = s->hs0;
    if (!seen || !*seen) {
        name = "default_transaction_read_only";
        seen = s->ro0;
    }
    if (!seen || !*seen)
        return 0;
    const char *now = PQparameterStatus(s->pg, name);
    return now && (strcmp(now, "on") == 0) != (strcmp(seen, "on") == 0);
}

static void probe(session *s, int role_seen) {
    int a = drv->alive(s->conn, 1);
    CHECK(a == 0 || a == 1 || a == TETHER_FATAL_SEEN);
    if (a == 1) {
        CHECK(!s->was_down);
        if (role_seen)
            CHECK(!changed(s));
    } else {
        s->was_down = 1;
    }
    check_role(s);
}

/* ---- one run ---------------------------------------------------------- */

typedef struct input {
    int flags;
    const uint8_t *chunk[NCHUNKS];
    size_t len[NCHUNKS];
} input;

static void split(const uint8_t *data, size_t size, input *in) {
    memset(in, 0, sizeof(*in));
    if (size == 0)
        return;
    in->flags = data[0];
    size_t at = 1;
    for (int i = 0; i < NCHUNKS && at < size; i++) {
        size_t n = size - at;
        if (n >= 2) {
            size_t want = (size_t)data[at] | (size_t)data[at + 1] << 8;
            at += 2;
            n = size - at;
            if (want < n)
                n = want;
        } else {
            at = size;
            n = 0;
        }
        in->chunk[i] = data + at;
        in->len[i] = n;
        at += n;
    }
}

/* readies counts the whole ReadyForQuery messages the server sent from
 * offset from on, reading its stream from the start (a message an earlier
 * answer left unfinished takes the first bytes of the next). */
static int readies(size_t from) {
    int count = 0;
    for (size_t i = 0; i + 5 <= streamed;) {
        size_t len = (size_t)stream[i + 1] << 24 | (size_t)stream[i + 2] << 16 |
                     (size_t)stream[i + 3] << 8 | stream[i + 4];
        if (len < 4 || i + 1 + len > streamed)
            break;
        count += i >= from && stream[i] == 'Z' && len == 5;
        i += 1 + len;
    }
    return count;
}

/* answer writes chunk i (with ReadyForQuery when asked) to the client, as
 * the answer to queries round trips. libpq reads all it can at once and
 * drops what follows a query's ReadyForQuery, so only one query can be
 * answered ahead. The server hangs up (its write side) when the answer
 * holds no ReadyForQuery or there are more queries, so the client never
 * waits out its budget; with F_SLOW and may_wait it stays, and the round
 * trip times out (1 ms: never for reset, whose budget is 5 s). */
static void answer(const session *s, const input *in, int i, int queries,
                   int may_wait) {
    out o = {.n = 0};
    put_chunk(&o, in->chunk[i], in->len[i]);
    if (in->flags & F_READY)
        ready(&o);
    drain(s->srv);
    size_t from = streamed;
    send_all(s->srv, &o);
    if ((queries > 1 || readies(from) < queries) &&
        !(may_wait && (in->flags & F_SLOW)))
        shutdown(s->srv, SHUT_WR);
}

static void quiet(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

/* connect runs the driver's connect against the fake server: 0 connected,
 * -1 it failed (checked, closed). */
static int connect_fake(session *s, const input *in) {
    tether_endpoint ep = {dir, NULL, PORT, -1};
    tether_wait w;
    tether_error e;
    memset(&e, 0x5a, sizeof(e));
    int rc = drv->connect_start(dctx, &ep, &s->conn, &w, &e);
    if (rc < 0) {
        check_error(rc, &e);
        return -1;
    }
    s->pg = drv->handle(s->conn);
    CHECK(s->pg != NULL);
    PQsetNoticeProcessor(s->pg, quiet, NULL); /* libpq's prints them */
    s->srv = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    CHECK(s->srv >= 0);

    out o = {.n = 0};
    msg(&o, 'R', "\0\0\0\0", 4); /* AuthenticationOk */
    put_chunk(&o, in->chunk[0], in->len[0]);
    if (in->flags & F_STARTUP) {
        param(&o, "in_hot_standby", "off");
        param(&o, "default_transaction_read_only", "off");
        msg(&o, 'K', "\0\0\0\1\0\0\0\2", 8);
        ready(&o);
    }
    send_all(s->srv, &o);

    int hung = 0, again = 0;
    for (int i = 0; rc == TETHER_IN_PROGRESS; i++) {
        CHECK(i < 10000); /* libpq loops without waiting: a hang */
        if (w.fd >= 0 && (w.events & POLLIN) && !readable(w.fd)) {
            if (hung) {
                /* After a hang-up the socket is readable, unless libpq has
                 * connected again on its own (it retries some startup
                 * errors): hang up on that connection at once. No new
                 * connection waiting is a hang. */
                struct pollfd l = {lfd, POLLIN, 0};
                CHECK(poll(&l, 1, 1000) == 1 && ++again < 8);
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                CHECK(fd >= 0);
                close(fd);
            } else {
                shutdown(s->srv, SHUT_WR);
                hung = 1;
            }
        }
        rc = drv->connect_poll(s->conn, &w, &e);
    }
    if (rc < 0) {
        check_error(rc, &e);
        CHECK(e.not_sent == 1);
        return -1;
    }
    CHECK(rc == TETHER_CONNECTED);
    s->hs0 = dup_or_null(PQparameterStatus(s->pg, "in_hot_standby"));
    s->ro0 =
        dup_or_null(PQparameterStatus(s->pg, "default_transaction_read_only"));
    return 0;
}

static void run(const input *in) {
    session s = {.conn = NULL, .srv = -1};
    streamed = 0;
    if (connect_fake(&s, in) != 0)
        goto done;
    check_role(&s);
    tether_error e;

    /* Idle: what arrives unasked, then the liveness probe. */
    out o = {.n = 0};
    put_chunk(&o, in->chunk[1], in->len[1]);
    send_all(s.srv, &o);
    if (in->flags & F_HANGUP)
        shutdown(s.srv, SHUT_WR);
    probe(&s, in->len[1] <= 4096);

    answer(&s, in, 2, 1, 1);
    memset(&e, 0x5a, sizeof(e));
    int rc = drv->validate(s.conn, ROUND_TRIP_MS, &e);
    if (rc != 0)
        check_error(rc, &e);
    probe(&s, 0);

    /* reset: ROLLBACK when a transaction is open, then the reset query. */
    const char *rq = in->flags & F_RESETQ ? "SET x = 1" : NULL;
    int was_open = PQtransactionStatus(s.pg) != PQTRANS_IDLE;
    answer(&s, in, 3, was_open + (rq ? 1 : 0), 0);
    memset(&e, 0x5a, sizeof(e));
    rc = drv->reset(s.conn, rq, &e);
    /* TETHER_ROLLED_BACK: clean after rolling back an open transaction */
    CHECK(rc == 0 || rc == TETHER_FATAL ||
          (rc == TETHER_ROLLED_BACK && was_open) || rc < 0);
    if (rc < 0)
        check_error(rc, &e);
    probe(&s, 0);

    answer(&s, in, 4, 1, 1);
    memset(&e, 0x5a, sizeof(e));
    rc = drv->query_role(s.conn, ROUND_TRIP_MS, &e);
    CHECK(rc == TETHER_ROLE_PRIMARY || rc == TETHER_ROLE_STANDBY || rc < 0);
    if (rc < 0)
        check_error(rc, &e);
    probe(&s, 0);

    /* What a user's own failed call would report from this PGconn. */
    memset(&e, 0x5a, sizeof(e));
    rc = tether_pq_error(s.pg, NULL, &e);
    CHECK(rc == TETHER_EBROKEN || rc == TETHER_EQUERY);
    check_error(rc, &e);
done:
    drv->close(s.conn);
    if (s.srv >= 0)
        close(s.srv);
    free(s.hs0);
    free(s.ro0);
}

/* Leaks of memory libpq itself allocated, under libpq's own calls: libpq
 * 15 loses a PGresult it was building when some malformed message
 * sequences arrive (corpus/server/libpq-lost-result, found by this target:
 * tether clears every result it is handed and PQfinish()es every
 * connection, and PQfinish frees what libpq still holds). The server never
 * sends such bytes; tether's own allocations are still checked. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
    return "leak:libpq.so\n";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (lfd < 0)
        setup();
    input in;
    split(data, size, &in);
    run(&in);
    return 0;
}
