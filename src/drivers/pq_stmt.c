/* pq_stmt.c - statements with deadlines on the pq driver's connections
 * (docs/statements.md).
 *
 * tether_pq_exec sends the statement with libpq's non-blocking API and
 * waits until its deadline, never longer (epoll and a timerfd the
 * connection keeps; "waiting until a deadline" below). At the deadline the
 * caller gets TETHER_ETIMEDOUT at once and the connection is marked
 * draining: its reset on release answers TETHER__EDRAIN, and the pool
 * hands it to a thread of its own, which calls tether__pq_drain. That
 * sends the cancel request itself, on a non-blocking socket (libpq 15's
 * PQcancel blocks in connect() and recv(), and a blackholed server would
 * hold the thread for minutes), and reads the statement's results, both
 * within the drain bound. The connection is reused only once the cancel
 * request has been processed by the server (it closed the cancel socket)
 * or was never sent: a cancel still in flight could otherwise hit the next
 * caller's statement.
 *
 * A statement finds its connection through a table indexed by socket
 * number (PQsocket), filled at connect and emptied at close: a PGconn has
 * no room for a pointer of ours that costs nothing on other paths. */
#include "pq.h"
#include "tether_pq.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* ---- counters --------------------------------------------------------- */

static _Atomic uint64_t n_timeouts, n_cancels_sent, n_cancels_failed, n_reused,
    n_discarded, n_prepares, n_reprepares;

/* Statements are counted per thread: one counter that every thread bumps
 * on every statement moves its cache line between cores on each call. A
 * thread takes a shard on its first statement and gives it back when it
 * exits; a shard keeps its count, and the next thread adds to it, so the
 * sum over the shards is the total. */
typedef struct stmt_shard {
    _Atomic uint64_t n;
    atomic_int busy;
    struct stmt_shard *next; /* the list only grows */
} stmt_shard;

static _Atomic(stmt_shard *) shards;
static TETHER__TLS stmt_shard *my_shard;
static pthread_key_t shard_key;
static pthread_once_t shard_once = PTHREAD_ONCE_INIT;

static void shard_give_back(void *s) {
    atomic_store(&((stmt_shard *)s)->busy, 0);
}

static void shard_key_make(void) {
    pthread_key_create(&shard_key, shard_give_back);
}

/* shard_take finds a free shard or adds one (NULL: out of memory). */
static stmt_shard *shard_take(void) {
    pthread_once(&shard_once, shard_key_make);
    stmt_shard *s = atomic_load(&shards);
    for (; s; s = s->next) {
        int idle = 0;
        if (atomic_compare_exchange_strong(&s->busy, &idle, 1))
            break;
    }
    if (!s) {
        s = tether__calloc(1, sizeof(*s));
        if (!s)
            return NULL;
        atomic_store(&s->busy, 1);
        s->next = atomic_load(&shards);
        while (!atomic_compare_exchange_weak(&shards, &s->next, s))
            ;
    }
    pthread_setspecific(shard_key, s);
    return my_shard = s;
}

static uint64_t statements_total(void) {
    uint64_t n = 0;
    for (stmt_shard *s = atomic_load(&shards); s; s = s->next)
        n += atomic_load_explicit(&s->n, memory_order_relaxed);
    return n;
}

void tether_pq_stats_get(tether_pq_stats *out) {
    if (!out)
        return;
    out->statements = statements_total();
    out->timeouts = atomic_load(&n_timeouts);
    out->cancels_sent = atomic_load(&n_cancels_sent);
    out->cancels_failed = atomic_load(&n_cancels_failed);
    out->reused_after_cancel = atomic_load(&n_reused);
    out->discarded_after_cancel = atomic_load(&n_discarded);
    out->prepares = atomic_load(&n_prepares);
    out->reprepares = atomic_load(&n_reprepares);
}

void tether__pq_stmt_released(tether__pq_conn *c, int reset) {
    if (!c->drained || reset < 0)
        return; /* a failed reset: counted when it is closed */
    c->drained = 0;
    atomic_fetch_add(&n_reused, 1);
}

void tether__pq_count_statement(void) {
    stmt_shard *s = my_shard ? my_shard : shard_take();
    if (s) /* only this thread writes it: no read-modify-write needed */
        atomic_store_explicit(
            &s->n, atomic_load_explicit(&s->n, memory_order_relaxed) + 1,
            memory_order_relaxed);
}

void tether__pq_count_prepare(int again) {
    atomic_fetch_add(again ? &n_reprepares : &n_prepares, 1);
}

void tether__pq_stmt_cancel_counted(int done) {
    atomic_fetch_add(done ? &n_cancels_sent : &n_cancels_failed, 1);
}

static void wait_set_close(tether__pq_conn *c);

void tether__pq_stmt_closed(tether__pq_conn *c) {
    if (c->draining || c->drained)
        atomic_fetch_add(&n_discarded, 1);
    wait_set_close(c);
}

/* ---- connections by socket ------------------------------------------- */

#define REG_CHUNK 1024
#define REG_CHUNKS 1024 /* sockets below 1048576 */

typedef _Atomic(tether__pq_conn *) reg_entry;
static _Atomic(reg_entry *) reg[REG_CHUNKS];

/* reg_slot returns the table entry of sock, allocating its chunk when
 * make is set (NULL: out of range, or no memory). */
static reg_entry *reg_slot(int sock, int make) {
    if (sock < 0 || sock >= REG_CHUNK * REG_CHUNKS)
        return NULL;
    reg_entry *chunk = atomic_load(&reg[sock / REG_CHUNK]);
    if (!chunk && make) {
        reg_entry *fresh = tether__calloc(REG_CHUNK, sizeof(reg_entry));
        if (!fresh)
            return NULL;
        if (atomic_compare_exchange_strong(&reg[sock / REG_CHUNK], &chunk,
                                           fresh))
            chunk = fresh;
        else
            tether__free(fresh); /* another thread's won; chunk is it */
    }
    return chunk ? &chunk[sock % REG_CHUNK] : NULL;
}

void tether__pq_stmt_register(tether__pq_conn *c) {
    reg_entry *e = reg_slot(c->sock, 1);
    if (e)
        atomic_store(e, c);
}

void tether__pq_stmt_unregister(tether__pq_conn *c) {
    reg_entry *e = reg_slot(c->sock, 0);
    tether__pq_conn *want = c;
    if (e)
        atomic_compare_exchange_strong(e, &want, NULL);
}

/* find returns the driver's connection of pg, or NULL. */
tether__pq_conn *tether__pq_find(const PGconn *pg) {
    reg_entry *e = reg_slot(PQsocket(pg), 0);
    tether__pq_conn *c = e ? atomic_load(e) : NULL;
    return c && c->pg == pg ? c : NULL;
}

/* ---- small helpers ---------------------------------------------------- */

int64_t tether__pq_now_ns(void) {
    const tether_clock *clock = tether_clock_real();
    return clock->now_ns(clock->ctx);
}

/* ---- waiting until a deadline ---------------------------------------- */

/* A statement's wait for the server is bounded by its deadline. poll()
 * with a timeout arms and cancels a kernel high-resolution timer on every
 * call, which cost about 1 % of the statements per second on a two-core
 * machine (docs/statements.md, "How a statement waits"). So a connection
 * that waits with a deadline gets an epoll set holding its socket and a
 * timerfd: the wait is epoll_wait without a timeout, and the timer is set
 * again only when it fired before the deadline in force, or when a
 * deadline comes earlier than the one it is set for. Deadlines mostly
 * move forward, so the timer is set about once per deadline's length.
 * Two file descriptors per such connection; when they cannot be had, a
 * timed poll() does the same. */

/* poll_until is the fallback: a timed poll(), rounded up to whole ms. */
static int poll_until(int sock, short events, int64_t deadline_ns,
                      int64_t now_ns) {
    int64_t left = deadline_ns - (now_ns < 0 ? tether__pq_now_ns() : now_ns);
    if (left <= 0)
        return 0;
    int ms = (int)TETHER__MIN(
        (left + TETHER__NS_PER_MS - 1) / TETHER__NS_PER_MS, (int64_t)1 << 30);
    struct pollfd pfd = {sock, events, 0};
    int rc = poll(&pfd, 1, ms);
    if (rc < 0 && errno == EINTR)
        return tether__pq_now_ns() >= deadline_ns ? 0 : -2;
    return rc;
}

static void wait_set_close(tether__pq_conn *c) {
    if (c->waitset > 0) {
        close(c->waitset - 1);
        close(c->timerfd);
    }
    c->waitset = 0;
}

/* wait_set_make gives c its epoll set: 0, or -1 when it cannot. */
static int wait_set_make(tether__pq_conn *c) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int tfd = ep < 0
                  ? -1
                  : timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event sev = {EPOLLIN, {.u32 = 0}};
    struct epoll_event tev = {EPOLLIN, {.u32 = 1}};
    if (tfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c->sock, &sev) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &tev) != 0) {
        if (ep >= 0)
            close(ep);
        if (tfd >= 0)
            close(tfd);
        c->waitset = -1;
        return -1;
    }
    c->waitset = ep + 1;
    c->timerfd = tfd;
    c->armed_ns = 0;
    c->wait_events = EPOLLIN;
    return 0;
}

static int timer_set(tether__pq_conn *c, int64_t at_ns) {
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    its.it_value.tv_sec = (time_t)(at_ns / 1000000000);
    its.it_value.tv_nsec = (long)(at_ns % 1000000000);
    if (timerfd_settime(c->timerfd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
        return -1;
    c->armed_ns = at_ns;
    return 0;
}

/* wait_set_events makes the socket's entry in the set watch events. */
static int wait_set_events(tether__pq_conn *c, short events) {
    unsigned want =
        (events & POLLIN ? EPOLLIN : 0) | (events & POLLOUT ? EPOLLOUT : 0);
    if (want == c->wait_events)
        return 0;
    struct epoll_event sev = {want, {.u32 = 0}};
    if (epoll_ctl(c->waitset - 1, EPOLL_CTL_MOD, c->sock, &sev) != 0)
        return -1;
    c->wait_events = want;
    return 0;
}

int tether__pq_wait(tether__pq_conn *c, short events, int64_t deadline_ns,
                    int64_t now_ns) {
    if (deadline_ns < 0) {
        struct pollfd pfd = {c->sock, events, 0};
        int rc = poll(&pfd, 1, -1);
        return rc < 0 && errno == EINTR ? -2 : rc;
    }
    if (c->waitset == 0)
        wait_set_make(c);
    if (c->waitset < 0)
        return poll_until(c->sock, events, deadline_ns, now_ns);
    if (wait_set_events(c, events) != 0 ||
        ((!c->armed_ns || c->armed_ns > deadline_ns) &&
         timer_set(c, deadline_ns) != 0))
        return -1;
    for (;;) {
        struct epoll_event ev[2];
        int n = epoll_wait(c->waitset - 1, ev, 2, -1), ready = 0;
        if (n < 0)
            return errno != EINTR                       ? -1
                   : tether__pq_now_ns() >= deadline_ns ? 0
                                                        : -2;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u32 == 0) {
                ready = 1;
                continue;
            }
            uint64_t fired;
            if (read(c->timerfd, &fired, sizeof(fired)) < 0 && errno != EAGAIN)
                return -1;
            c->armed_ns = 0;
        }
        if (ready)
            return 1;
        if (tether__pq_now_ns() >= deadline_ns)
            return 0;
        if (timer_set(c, deadline_ns) != 0) /* set for an earlier one */
            return -1;
    }
}

int tether__pq_lost(tether__pq_conn *c, const char *what, tether_error *err) {
    char text[TETHER_MSG_MAX];
    const char *m = PQerrorMessage(c->pg);
    size_t n = m ? strcspn(m, "\r\n") : 0;
    c->broken = 1;
    snprintf(text, sizeof(text), "%.*s", (int)n, m ? m : "");
    tether__pq_scrub(text, sizeof(text), NULL);
    return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                            "%s on %s: connection lost: %s", what, c->label,
                            *text ? text : "no connection to the server");
}

/* ---- the caller's side ------------------------------------------------ */

/* ready checks that c can take a statement now. */
int tether__pq_ready(tether__pq_conn *c, int *in_txn, tether_error *err) {
    if (c->draining)
        return tether_error_set(
            err, TETHER_ESTATE, TETHER_CLASS_PERMANENT,
            "statement on %s: an earlier statement timed out; the connection "
            "is drained when its lease is released",
            c->label);
    if (c->broken || c->dying || PQstatus(c->pg) != CONNECTION_OK)
        return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                "statement on %s: connection is broken",
                                c->label);
    PGTransactionStatusType ts = PQtransactionStatus(c->pg);
    *in_txn = ts != PQTRANS_IDLE;
    if (ts == PQTRANS_ACTIVE || PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF)
        return tether_error_set(err, TETHER_ESTATE, TETHER_CLASS_PERMANENT,
                                "statement on %s: a query is already running",
                                c->label);
    return 0;
}

/* tether__pq_deadline turns a statement's timeout_ms, counted from now_ns,
 * into a deadline (mono ns). */
int64_t tether__pq_deadline(int64_t now_ns, int64_t timeout_ms) {
    if (timeout_ms < 0)
        return tether__run_deadline_ns;
    return now_ns +
           TETHER__MIN(timeout_ms, (int64_t)1 << 40) * TETHER__NS_PER_MS;
}

/* keep holds the result to return: the first failure, else the last. */
static void keep_result(PGresult **keep, PGresult *r) {
    ExecStatusType st = *keep ? PQresultStatus(*keep) : PGRES_COMMAND_OK;
    if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) {
        PQclear(r);
        return;
    }
    PQclear(*keep);
    *keep = r;
}

/* collect reads the results ready now into *keep: 1 when the statement is
 * done, 0 when more must come, -1 on COPY (not supported here). */
static int collect(tether__pq_conn *c, PGresult **keep) {
    while (!PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        if (!r)
            return 1;
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT ||
            st == PGRES_COPY_BOTH) {
            PQclear(r);
            c->broken = 1;
            return -1;
        }
        keep_result(keep, r);
    }
    return 0;
}

/* timed_out marks c draining and fills err. in_txn: the statement ran
 * inside a transaction block, which can no longer commit. */
int tether__pq_timed_out(tether__pq_conn *c, int64_t start_ns, int in_txn,
                         tether_error *err) {
    c->draining = 1;
    c->drain_from_ns = tether__pq_now_ns();
    atomic_fetch_add(&n_timeouts, 1);
    return tether_error_set(
        err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
        "statement on %s timed out after %lld ms, cancelled in the "
        "background: %s",
        c->label, (long long)((c->drain_from_ns - start_ns) / 1000000),
        in_txn ? "its transaction will be rolled back"
               : "it may have been applied");
}

/* await waits for the statement's results until deadline_ns (-1: none). */
static int await(tether__pq_conn *c, int64_t start_ns, int64_t deadline_ns,
                 int in_txn, PGresult **keep, tether_error *err) {
    int64_t now_ns = start_ns; /* the first wait's: a read saved */
    for (;;) {
        int pending = PQflush(c->pg);
        if (pending < 0)
            return tether__pq_lost(c, "statement", err);
        int done = pending ? 0 : collect(c, keep);
        if (done > 0)
            return 0;
        if (done < 0)
            return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                    "statement on %s: COPY is not supported "
                                    "by tether_pq_exec",
                                    c->label);
        int rc = tether__pq_wait(c, pending ? POLLIN | POLLOUT : POLLIN,
                                 deadline_ns, now_ns);
        now_ns = -1;
        if (rc == 0)
            return tether__pq_timed_out(c, start_ns, in_txn, err);
        if (rc == -1)
            return tether__pq_lost(c, "statement", err);
        if (rc > 0 && !PQconsumeInput(c->pg))
            return tether__pq_lost(c, "statement", err);
    }
}

/* finish turns the kept result into the call's outcome. */
static int finish(tether__pq_conn *c, PGresult *keep, PGresult **res,
                  tether_error *err) {
    PQsetnonblocking(c->pg, 0); /* nothing to flush: does not block */
    int rc = tether_pq_error(c->pg, keep, err);
    if (rc < 0) {
        PQclear(keep);
        return rc;
    }
    *res = keep;
    return 0;
}

static int send_stmt(tether__pq_conn *c, const char *sql,
                     const tether_pq_params *pp) {
    if (!pp)
        return PQsendQuery(c->pg, sql);
    return PQsendQueryParams(c->pg, sql, pp->n, pp->types, pp->values,
                             pp->lengths, pp->formats, pp->result_format);
}

static int exec_stmt(PGconn *pg, const char *sql, const tether_pq_params *pp,
                     int64_t timeout_ms, PGresult **res, tether_error *err) {
    tether__pq_conn *c = tether__pq_find(pg);
    if (!c)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "statement: conn is not a connection of "
                                "tether's pq driver");
    int in_txn = 0, rc = tether__pq_ready(c, &in_txn, err);
    if (rc)
        return rc;
    int64_t start = tether__pq_now_ns(),
            deadline = tether__pq_deadline(start, timeout_ms);
    if (deadline >= 0 && start >= deadline)
        return tether_error_set_not_sent(
            err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
            "statement on %s not sent: its deadline had passed", c->label);
    tether__pq_count_statement();
    if (PQsetnonblocking(pg, 1) != 0 || !send_stmt(c, sql, pp))
        return tether__pq_lost(c, "statement", err);
    PGresult *keep = NULL;
    rc = await(c, start, deadline, in_txn, &keep, err);
    if (rc < 0) { /* draining or broken: stays non-blocking (docs) */
        PQclear(keep);
        return rc;
    }
    return finish(c, keep, res, err);
}

int tether_pq_exec(PGconn *conn, const char *sql, int64_t timeout_ms,
                   PGresult **res, tether_error *err) {
    if (res)
        *res = NULL;
    if (!conn || !sql || !res)
        return tether__null(err, "tether_pq_exec",
                            !conn  ? "conn"
                            : !sql ? "sql"
                                   : "res");
    return exec_stmt(conn, sql, NULL, timeout_ms, res, err);
}

int tether_pq_exec_params(PGconn *conn, const char *sql,
                          const tether_pq_params *params, int64_t timeout_ms,
                          PGresult **res, tether_error *err) {
    if (res)
        *res = NULL;
    if (!conn || !sql || !res)
        return tether__null(err, "tether_pq_exec_params",
                            !conn  ? "conn"
                            : !sql ? "sql"
                                   : "res");
    if (params && (params->n < 0 || (params->n > 0 && !params->values)))
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "tether_pq_exec_params: params: n is %d with "
                                "%s values",
                                params->n, params->values ? "" : "no");
    static const tether_pq_params none = {0, NULL, NULL, NULL, NULL, 0};
    return exec_stmt(conn, sql, params ? params : &none, timeout_ms, res, err);
}
