/* tcp.c - the TCP driver: plain TCP (or Unix-domain) connections to any
 * service. A non-blocking connect the caller waits on (within each
 * attempt's budget), liveness by a non-blocking peek (end of stream or an
 * error: dead), and the protocol left to the caller's hooks: setup once
 * connected, validate as the pool's round trip, reset on release, teardown
 * before close. */
#include "driver.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct tether_tcp {
    tether_tcp_opts o;
};

struct tether_tcp_conn {
    const tether_tcp *t;
    int fd;
    int broken;  /* the peek or a hook found it dead */
    int user_fd; /* the teardown hook closed the socket */
    void *user;
    int port;
    int64_t deadline_ns; /* the attempt's end on the real clock; -1 none */
    char peer[128];      /* "host:port" or the socket path */
};

static void tcp_defaults(tether_tcp_opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->nodelay = 1;
    o->keepalive = 1;
}

void tether_tcp_opts_init_sized(tether_tcp_opts *o, size_t size) {
    tether_tcp_opts d;
    tcp_defaults(&d);
    tether__sized_out(o, size, &d, sizeof(d));
}

int tether_tcp_create(tether_tcp **out, const tether_tcp_opts *o,
                      tether_error *err) {
    *out = NULL;
    tether_tcp_opts full;
    tcp_defaults(&full);
    int rc = TETHER__SIZED_IN(full, o, "tether_tcp_opts", err);
    if (rc)
        return rc;
    tether_tcp *t = tether__calloc(1, sizeof(*t));
    if (!t)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    t->o = full;
    *out = t;
    return 0;
}

void tether_tcp_destroy(tether_tcp *t) {
    tether__free(t);
}

/* A connector without driver_ctx: the defaults; no driver keyword is
 * taken (the error names the first, never its value). */
static int tcp_params_create(const char *const *keys, const char *const *vals,
                             int n, void **ctx, tether_error *err) {
    (void)vals;
    *ctx = NULL;
    if (n > 0)
        return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                "tcp driver: keyword \"%.40s\" is not used "
                                "by the tcp driver (it takes host, port and "
                                "tether_* keywords only)",
                                keys[0]);
    tether_tcp *t = NULL;
    int rc = tether_tcp_create(&t, NULL, err);
    *ctx = t;
    return rc;
}

static void tcp_params_destroy(void *ctx) {
    tether_tcp_destroy(ctx);
}

/* ---- accessors ----------------------------------------------------------- */

int tether_tcp_fd(const tether_tcp_conn *c) {
    return c ? c->fd : -1;
}

void *tether_tcp_user(const tether_tcp_conn *c) {
    return c ? c->user : NULL;
}

void tether_tcp_set_user(tether_tcp_conn *c, void *user) {
    if (c)
        c->user = user;
}

int tether_tcp_peer(const tether_tcp_conn *c, char *buf, size_t cap) {
    if (buf && cap)
        snprintf(buf, cap, "%s", c ? c->peer : "");
    return c ? c->port : 0;
}

/* ---- connect ------------------------------------------------------------- */

static int64_t real_ns(void) {
    const tether_clock *clk = tether_clock_real();
    return clk->now_ns(clk->ctx);
}

/* A failed system call during a connect: transient (the network, a
 * refused port, a server not up yet), not sent. */
static int net_error(tether_tcp_conn *c, const char *what, int e,
                     tether_error *err) {
    tether_error_set_not_sent(err, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT,
                              "%s %s: %s", what, c->peer, strerror(e));
    return TETHER_ECONNECT;
}

/* The address to connect to: sockaddr for ep into ss (a Unix socket for a
 * host starting with '/'). */
static int make_addr(tether_tcp_conn *c, const tether_endpoint *ep,
                     struct sockaddr_storage *ss, socklen_t *len,
                     tether_error *err) {
    memset(ss, 0, sizeof(*ss));
    if (ep->host && ep->host[0] == '/') {
        struct sockaddr_un *un = (struct sockaddr_un *)ss;
        if (strlen(ep->host) >= sizeof(un->sun_path))
            return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                    "tcp: socket path \"%.60s...\" is too "
                                    "long",
                                    ep->host);
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, ep->host, strlen(ep->host) + 1);
        *len = sizeof(*un);
        return 0;
    }
    const char *addr = ep->hostaddr ? ep->hostaddr : ep->host;
    char port[16];
    snprintf(port, sizeof(port), "%d", ep->port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (getaddrinfo(addr, port, &hints, &res) != 0 || !res)
        return tether_error_set(err, TETHER_ERESOLVE, TETHER_CLASS_PERMANENT,
                                "tcp: \"%.60s\" is not a numeric address "
                                "(the connector resolves names)",
                                addr);
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static void name_peer(tether_tcp_conn *c, const tether_endpoint *ep) {
    const char *h = ep->host ? ep->host : ep->hostaddr;
    if (h[0] == '/')
        snprintf(c->peer, sizeof(c->peer), "%s", h);
    else if (strchr(h, ':'))
        snprintf(c->peer, sizeof(c->peer), "[%s]:%d", h, ep->port);
    else
        snprintf(c->peer, sizeof(c->peer), "%s:%d", h, ep->port);
}

static int check_endpoint(const tether_endpoint *ep, tether_error *err) {
    if (!ep)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "tcp: no endpoint (the TCP driver connects "
                                "through a connector: set the pool's "
                                "connector)");
    if (!ep->host && !ep->hostaddr)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "tcp: no host to connect to (set host= in "
                                "the connection string)");
    int path = ep->host && ep->host[0] == '/';
    if (!path && (ep->port < 1 || ep->port > 65535))
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "tcp: host \"%.60s\" has no port (set port= "
                                "in the connection string)",
                                ep->host ? ep->host : ep->hostaddr);
    return 0;
}

/* Socket options, blocking mode, then the setup hook within what is left
 * of the attempt. */
static int finish(tether_tcp_conn *c, tether_error *err) {
    const tether_tcp_opts *o = &c->t->o;
    int one = 1;
    if (o->nodelay && c->port)
        (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (o->keepalive && c->port)
        (void)setsockopt(c->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    if (!o->nonblocking) {
        int fl = fcntl(c->fd, F_GETFL);
        if (fl < 0 || fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
            return net_error(c, "fcntl on", errno, err);
    }
    if (!o->setup)
        return TETHER_CONNECTED;
    int64_t left = -1;
    if (c->deadline_ns >= 0)
        left = TETHER__MAX((c->deadline_ns - real_ns()) / TETHER__NS_PER_MS, 1);
    int rc = o->setup(o->ctx, c, left, err);
    if (rc < 0 && err && err->code == 0)
        tether_error_set(err, rc, TETHER_CLASS_NONE, "tcp: setup of %s failed",
                         c->peer);
    return rc < 0 ? rc : TETHER_CONNECTED;
}

static int tcp_connect_start(void *ctx, const tether_endpoint *ep, void **conn,
                             tether_wait *w, tether_error *err) {
    *conn = NULL;
    const tether_tcp *t = ctx;
    if (!t)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "tcp: no parameters (driver_ctx: "
                                "tether_tcp_create)");
    int rc = check_endpoint(ep, err);
    if (rc)
        return rc;
    tether_tcp_conn *c = tether__calloc(1, sizeof(*c));
    if (!c)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    c->t = t;
    c->fd = -1;
    c->port = ep->host && ep->host[0] == '/' ? 0 : ep->port;
    c->deadline_ns =
        ep->budget_ms < 0 ? -1 : real_ns() + ep->budget_ms * TETHER__NS_PER_MS;
    name_peer(c, ep);
    *conn = c;
    struct sockaddr_storage ss;
    socklen_t len = 0;
    if ((rc = make_addr(c, ep, &ss, &len, err)) != 0)
        return rc;
    c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return net_error(c, "socket for", errno, err);
    if (connect(c->fd, (struct sockaddr *)&ss, len) == 0)
        return finish(c, err);
    if (errno != EINPROGRESS && errno != EAGAIN)
        return net_error(c, "connect to", errno, err);
    *w = (tether_wait){c->fd, POLLOUT, -1};
    return TETHER_IN_PROGRESS;
}

static int tcp_connect_poll(void *conn, tether_wait *w, tether_error *err) {
    tether_tcp_conn *c = conn;
    struct pollfd pfd = {c->fd, POLLOUT, 0};
    if (poll(&pfd, 1, 0) <= 0) { /* woken early (or EINTR): wait on */
        *w = (tether_wait){c->fd, POLLOUT, -1};
        return TETHER_IN_PROGRESS;
    }
    int e = 0;
    socklen_t len = sizeof(e);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
        e = errno;
    if (e)
        return net_error(c, "connect to", e, err);
    return finish(c, err);
}

/* ---- use ------------------------------------------------------------------
 */

/* The peek: 1 open (nothing to read, or input waiting), 0 end of stream or
 * an error. Never blocks, never consumes. */
static int peek_open(tether_tcp_conn *c) {
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0)
        return 1;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 1;
    return 0;
}

static int tcp_alive(void *conn, int probe) {
    tether_tcp_conn *c = conn;
    if (c->broken || c->fd < 0)
        return 0;
    if (probe && !peek_open(c))
        c->broken = 1;
    return !c->broken;
}

static int tcp_validate(void *conn, int64_t timeout_ms, tether_error *err) {
    tether_tcp_conn *c = conn;
    if (!tcp_alive(c, 1))
        return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                "tcp: %s closed the connection", c->peer);
    const tether_tcp_opts *o = &c->t->o;
    if (!o->validate)
        return 0;
    int rc = o->validate(o->ctx, c, timeout_ms, err);
    if (rc < 0) {
        c->broken = 1;
        if (err && err->code == 0)
            tether_error_set(err, rc, TETHER_CLASS_NONE,
                             "tcp: validation of %s failed", c->peer);
    }
    return rc < 0 ? rc : 0;
}

static int tcp_reset(void *conn, const char *reset_query, tether_error *err) {
    (void)reset_query;
    tether_tcp_conn *c = conn;
    const tether_tcp_opts *o = &c->t->o;
    if (!o->reset)
        return 0;
    int rc = o->reset(o->ctx, c, err);
    if (rc < 0)
        c->broken = 1;
    return rc < 0 ? rc : 0;
}

static void tcp_close(void *conn) {
    tether_tcp_conn *c = conn;
    if (!c)
        return;
    const tether_tcp_opts *o = &c->t->o;
    int closed = 0;
    if (o->teardown && c->fd >= 0)
        closed = o->teardown(o->ctx, c) == 1;
    if (!closed && c->fd >= 0)
        close(c->fd);
    tether__free(c);
}

/* Network failures are transient, bad input permanent: the default
 * classification, with the class an operation set kept. */
static void tcp_classify(void *conn, tether_error *err) {
    (void)conn;
    if (!err || err->cls != TETHER_CLASS_NONE)
        return;
    int64_t ra = 0;
    err->cls = tether_classify_default(NULL, err, &ra);
    if (ra > 0)
        err->retry_after_ms = ra;
}

static void *tcp_handle(void *conn) {
    return conn;
}

static const tether_driver tcp_driver = {
    .name = "tcp",
    .params_create = tcp_params_create,
    .params_destroy = tcp_params_destroy,
    .connect_start = tcp_connect_start,
    .connect_poll = tcp_connect_poll,
    .alive = tcp_alive,
    .validate = tcp_validate,
    .reset = tcp_reset,
    .close = tcp_close,
    .classify = tcp_classify,
    .handle = tcp_handle,
    .resolve_names = 1,
};

const tether_driver *tether_driver_tcp(void) {
    return &tcp_driver;
}
