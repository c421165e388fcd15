/* pq_drain.c - bringing back a connection whose statement outran its
 * deadline (docs/statements.md, "Draining"): the pool's drain thread calls
 * tether__pq_drain on it after its release.
 *
 * The cancel request is tether's own: a non-blocking socket to the
 * server's address, the 16-byte CancelRequest, then the wait for the
 * server to close that socket, which it does once it has signalled the
 * backend. libpq before 17 has no non-blocking cancel (PQcancel blocks in
 * connect() and recv()), and it keeps the backend's secret key inside its
 * PGcancel object; for libpq 12-16 the key is read from that object's
 * documented-in-source layout (libpq-int.h, struct pg_cancel), and only
 * after checking that the PID found there is PQbackendPID's. Where the
 * check fails (another libpq), no cancel is sent: the connection is
 * reused if its statement ends within the bound, closed otherwise. */
#include "pq.h"
#include "tether_pq.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CANCEL_CODE 80877102 /* 1234 << 16 | 5678 */

/* libpq 12-16's SockAddr and the head of struct pg_cancel. */
typedef struct sock_addr {
    struct sockaddr_storage addr;
    socklen_t salen;
} sock_addr;

typedef struct cancel_head {
    sock_addr raddr;
    int be_pid;
    int be_key;
} cancel_head;

/* CX_NONE: no cancel, or it failed; CX_UNNEEDED: dropped before sending,
 * the statement having ended on its own. */
enum { CX_NONE = 0, CX_CONNECTING, CX_SENT, CX_DONE, CX_UNNEEDED };

typedef struct cancel {
    int fd;
    int state;
    uint32_t pkt[4];
    int64_t done_ns; /* when the server processed the last one (CX_DONE) */
    int sent;        /* cancels started for this drain */
} cancel;

/* A cancel the server processes while the backend has not begun the
 * statement yet (still reading it: the statement was sent just before
 * its deadline) is dropped by PostgreSQL, and the statement then runs
 * its course. When the statement still runs RECANCEL_MS after a cancel
 * was processed, another is sent, up to CANCEL_MAX in all. */
#define RECANCEL_MS 50
#define CANCEL_MAX 5

static int64_t mono_ns(void) {
    const tether_clock *clock = tether_clock_real();
    return clock->now_ns(clock->ctx);
}

/* cancel_target reads the server's address, PID and key for pg into *h
 * (libpq 12-16 only, checked against PQbackendPID). 0 or -1. */
static int cancel_target(PGconn *pg, cancel_head *h) {
    int v = PQlibVersion();
    if (v < 120000 || v >= 170000)
        return -1;
    PGcancel *pc = PQgetCancel(pg);
    if (!pc)
        return -1;
    memcpy(h, pc, sizeof(*h)); /* the head of a larger object */
    PQfreeCancel(pc);
    int fam = h->raddr.addr.ss_family;
    if (h->be_pid != PQbackendPID(pg) || h->be_pid == 0 ||
        h->raddr.salen == 0 || h->raddr.salen > sizeof(h->raddr.addr) ||
        (fam != AF_INET && fam != AF_INET6 && fam != AF_UNIX))
        return -1;
    return 0;
}

/* cancel_start opens the cancel socket and starts its connect. */
static void cancel_start(PGconn *pg, cancel *x) {
    cancel_head h;
    x->fd = -1;
    x->state = CX_NONE;
    x->sent++;
    if (cancel_target(pg, &h) != 0)
        return;
    x->pkt[0] = htonl(16);
    x->pkt[1] = htonl(CANCEL_CODE);
    x->pkt[2] = htonl((uint32_t)h.be_pid);
    x->pkt[3] = htonl((uint32_t)h.be_key);
    x->fd = socket(h.raddr.addr.ss_family,
                   SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (x->fd < 0)
        return;
    if (connect(x->fd, (struct sockaddr *)&h.raddr.addr, h.raddr.salen) == 0 ||
        errno == EINPROGRESS) {
        x->state = CX_CONNECTING;
        return;
    }
    close(x->fd);
    x->fd = -1;
}

static void cancel_end(cancel *x, int state) {
    if (x->fd >= 0)
        close(x->fd);
    x->fd = -1;
    x->state = state;
    if (state == CX_DONE)
        x->done_ns = mono_ns();
}

/* recancel_due: when the statement, still running, gets another cancel
 * (mono ns), or -1 for none. */
static int64_t recancel_due(const cancel *x) {
    if (x->state != CX_DONE || x->sent >= CANCEL_MAX)
        return -1;
    return x->done_ns + RECANCEL_MS * TETHER__NS_PER_MS;
}

/* cancel_step moves the cancel on after poll() said revents. */
static void cancel_step(cancel *x, short revents) {
    if (x->state == CX_CONNECTING) {
        int e = 0;
        socklen_t n = sizeof(e);
        if (getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &e, &n) != 0 || e) {
            cancel_end(x, CX_NONE);
            return;
        }
        ssize_t w = send(x->fd, x->pkt, sizeof(x->pkt), MSG_NOSIGNAL);
        if (w != (ssize_t)sizeof(x->pkt)) { /* 16 bytes on a new socket */
            cancel_end(x, CX_NONE);
            return;
        }
        x->state = CX_SENT;
        return;
    }
    if (x->state == CX_SENT && (revents & (POLLIN | POLLHUP | POLLERR))) {
        char b[16];
        ssize_t r = recv(x->fd, b, sizeof(b), 0);
        if (r <= 0 && !(r < 0 && (errno == EAGAIN || errno == EINTR)))
            cancel_end(x, CX_DONE); /* the server has processed it */
    }
}

/* drain_results reads what the statement sent: 1 when it is over (no
 * query in flight), 0 when more must come, -1 when c cannot go on. */
static int drain_results(tether__pq_conn *c) {
    int nulls = 0;
    while (!PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        if (!r && c->pipe_syncs > 0 && ++nulls < 2)
            continue; /* the end of one command of a pipeline */
        if (!r && c->pipe_syncs > 0)
            return 0; /* nothing more parsed yet */
        if (!r)
            return PQtransactionStatus(c->pg) == PQTRANS_ACTIVE ? 0 : 1;
        nulls = 0;
        ExecStatusType st = PQresultStatus(r);
        PQclear(r);
        if (st == PGRES_PIPELINE_SYNC && --c->pipe_syncs == 0 &&
            !PQexitPipelineMode(c->pg))
            return -1;
        if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT ||
            st == PGRES_COPY_BOTH)
            return -1;
    }
    return 0;
}

/* drain_wait polls c's socket and the cancel's until the next event or
 * deadline_ns: 1 event(s), 0 deadline, -1 c failed. */
static int drain_wait(tether__pq_conn *c, cancel *x, int want_write,
                      int64_t deadline_ns) {
    struct pollfd fds[2] = {{c->sock, POLLIN, 0}, {x->fd, 0, 0}};
    if (want_write)
        fds[0].events |= POLLOUT;
    if (x->state == CX_CONNECTING)
        fds[1].events = POLLOUT;
    else if (x->state == CX_SENT)
        fds[1].events = POLLIN;
    int n = x->fd >= 0 ? 2 : 1;
    int64_t left = deadline_ns - mono_ns();
    if (left <= 0)
        return 0;
    int rc = poll(fds, (nfds_t)n,
                  (int)TETHER__MIN((left + 999999) / 1000000, 1 << 30));
    if (rc < 0)
        return errno == EINTR ? 1 : -1;
    if (rc == 0)
        return mono_ns() >= deadline_ns ? 0 : 1;
    if (n == 2 && fds[1].revents)
        cancel_step(x, fds[1].revents);
    if (fds[0].revents && !PQconsumeInput(c->pg))
        return -1;
    return 1;
}

/* drain_loop runs until the statement is over and the cancel settled. */
static int drain_loop(tether__pq_conn *c, cancel *x, int64_t deadline_ns) {
    int over = 0;
    for (;;) {
        int pending = PQflush(c->pg);
        if (pending < 0)
            return -1;
        if (!pending && !over)
            over = drain_results(c);
        if (over < 0)
            return -1;
        if (over && x->state == CX_CONNECTING)
            cancel_end(x, CX_UNNEEDED); /* not sent: none can come late */
        if (over && x->state != CX_SENT)
            return 0;
        int64_t again = over ? -1 : recancel_due(x);
        if (again >= 0 && mono_ns() >= again) {
            cancel_start(c->pg, x); /* the last one came too early */
            continue;
        }
        int64_t until = again >= 0 && again < deadline_ns ? again : deadline_ns;
        int w = drain_wait(c, x, pending, until);
        if (w < 0 || (w == 0 && until == deadline_ns))
            return -1;
    }
}

int tether__pq_drain(void *conn, int64_t bound_ms) {
    tether__pq_conn *c = conn;
    if (!c || !c->draining || c->broken || PQstatus(c->pg) != CONNECTION_OK)
        return TETHER_EBROKEN;
    int64_t deadline = c->drain_from_ns + bound_ms * TETHER__NS_PER_MS;
    cancel x = {-1, CX_NONE, {0}, 0, 0};
    int tried = 0;
    if (PQisBusy(c->pg) || PQflush(c->pg) != 0 || drain_results(c) != 1) {
        cancel_start(c->pg, &x); /* the statement still runs */
        tried = 1;
    }
    int rc = drain_loop(c, &x, deadline);
    if (tried && (x.state != CX_UNNEEDED || x.done_ns))
        tether__pq_stmt_cancel_counted(x.done_ns != 0);
    cancel_end(&x, x.state);
    if (rc < 0) {
        c->broken = 1; /* closed by the pool; stays non-blocking */
        return TETHER_ETIMEDOUT;
    }
    PQsetnonblocking(c->pg, 0); /* nothing left to flush */
    c->draining = 0;
    c->drained = 1;
    return 0;
}
