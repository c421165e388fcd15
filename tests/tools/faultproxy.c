/* faultproxy: a single-threaded, poll()-based TCP proxy for fault injection
 * in tether's integration tests. It listens on 127.0.0.1 only and forwards
 * to a loopback target; a unix control socket switches its mode at run time.
 *
 *   faultproxy serve --listen PORT --target HOST:PORT --control PATH
 *       PORT 0 picks a free port; "port N" is printed on stdout once the
 *       proxy and its control socket are ready.
 *   faultproxy ctl PATH pass|blackhole|reset|refuse|status|counts
 *   faultproxy ctl PATH 'gate N'
 *       prints the proxy's answer ("ok", or "ok mode=M conns=N dead=D"
 *       for status); exit status 0 on "ok".
 *
 * Modes:
 *   pass       forward both ways (TCP_NODELAY on both sides).
 *   blackhole  existing connections go silent: whatever either side sends is
 *              read and dropped, nothing is ever delivered, nothing is closed.
 *              Such a connection stays silent for good (its streams lost
 *              data), even after `pass`; only `reset` or the client closing
 *              it ends it. New connections hang in connect(): the listener
 *              stops accepting, its backlog is lowered to 1 and the proxy
 *              fills the accept queue with its own connections (until
 *              TCP_INFO on the listener reports it full), so the kernel
 *              drops further SYNs and the client keeps retransmitting them
 *              (connect neither succeeds nor fails). The kernel still ACKs
 *              data and keepalives on established connections: only
 *              application-level timeouts can see this blackhole.
 *   reset      close every connection with an RST (SO_LINGER 0), then behave
 *              as `pass` (listening, forwarding new connections).
 *   refuse     close the listening socket: connect() fails at once with
 *              ECONNREFUSED. Existing connections are left as they are.
 *              `pass` (or `blackhole`) reopens it on the same port.
 *   gate N     the counting mode (bench/run-storm): every new connection is
 *              counted, per second since the first `gate`. N < 0: the server
 *              is down: each is reset at once (the client sees its connect
 *              fail). N >= 0: at most N a second (windows from this command)
 *              are forwarded; the rest get PostgreSQL's "sorry, too many
 *              clients already" (53300) and are closed, as an overloaded
 *              server does. Existing connections are left as they are.
 *              `counts` answers "ok seconds=S attempts=a0,a1,...
 *              admitted=b0,b1,..." (per second); `pass`, `reset`,
 *              `blackhole` and `refuse` end the mode.
 * If the target refuses while in pass mode, the client's connection is reset.
 * SIGTERM / SIGINT: close everything, remove the control socket, exit 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (32 * 1024) /* per direction and connection */
#define MAX_CONNS 256
#define MAX_FILLERS 8
#define FILL_WAIT_MS 1000 /* a filler connect not done by then = queue full */
#define GATE_SECONDS 3600 /* the counting mode's per-second counts */

enum mode { MODE_PASS, MODE_BLACKHOLE, MODE_REFUSE };
static const char *const mode_names[] = {"pass", "blackhole", "refuse"};

struct dir {
    char buf[BUF_SIZE];
    size_t off, len; /* pending bytes are buf[off, len) */
};

struct conn {
    int cfd, ufd;       /* client side, upstream side (-1 = closed) */
    int connecting;     /* upstream connect() in progress */
    int dead;           /* blackholed: drop everything, forever */
    int c_eof, u_eof;   /* read EOF from client / upstream */
    int c_shut, u_shut; /* we sent FIN to client / upstream */
    struct dir c2u, u2c;
};

struct proxy {
    enum mode mode;
    int lfd;  /* listening socket, -1 when refusing */
    int full; /* accept queue stuffed (blackhole) */
    int port; /* listen port, host order */
    int ctl_fd;
    const char *ctl_path;
    struct sockaddr_storage target;
    socklen_t target_len;
    struct conn *conns[MAX_CONNS];
    int nconns;
    int fillers[MAX_FILLERS]; /* our own connections stuffing the queue */
    int filler_ports[MAX_FILLERS];
    int nfillers;
    int pending_filler; /* the filler whose SYN the full queue drops, or -1 */
    /* The counting mode (gate). */
    int gate_on;
    int gate;                /* < 0: down; else connects admitted a second */
    long long gate_t0_ms;    /* the first gate command: second 0 */
    long long gate_since_ms; /* the last one: admission windows start here */
    long long window;
    int in_window;
    int attempts[GATE_SECONDS];
    int admitted[GATE_SECONDS];
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

static void logmsg(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("faultproxy: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void set_nodelay(int fd) {
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Close with an RST instead of a FIN. */
static void close_rst(int fd) {
    if (fd < 0)
        return;
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

static void close_fd(int *fd) {
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static int is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    }
    return 0;
}

/* HOST:PORT -> a loopback address (this tool never talks to anything else). */
static int parse_target(struct proxy *p, const char *spec) {
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof host)
        return -1;
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
        return -1;
    int rc = -1;
    for (ai = res; ai; ai = ai->ai_next) {
        if (is_loopback(ai->ai_addr)) {
            memcpy(&p->target, ai->ai_addr, ai->ai_addrlen);
            p->target_len = ai->ai_addrlen;
            rc = 0;
            break;
        }
    }
    freeaddrinfo(res);
    return rc;
}

static struct sockaddr_in loopback_addr(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static int local_port(int fd) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    return ntohs(a.sin_port);
}

static int peer_port(int fd) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getpeername(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    return ntohs(a.sin_port);
}

/* Open the listener on 127.0.0.1:p->port (0: pick one and remember it). */
static int listener_open(struct proxy *p) {
    struct sockaddr_in a = loopback_addr(p->port);
    int one = 1;
    for (int tries = 0; tries < 20; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            listen(fd, SOMAXCONN) == 0) {
            p->lfd = fd;
            p->port = local_port(fd);
            p->full = 0;
            return 0;
        }
        int e = errno;
        close(fd);
        if (e != EADDRINUSE)
            break;
        usleep(100 * 1000); /* the port may be briefly busy after refuse */
    }
    logmsg("cannot listen on 127.0.0.1:%d: %s", p->port, strerror(errno));
    return -1;
}

static struct conn *conn_new(struct proxy *p, int cfd) {
    if (p->nconns >= MAX_CONNS) {
        close_rst(cfd);
        return NULL;
    }
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        close_rst(cfd);
        return NULL;
    }
    c->cfd = cfd;
    c->ufd = -1;
    p->conns[p->nconns++] = c;
    return c;
}

/* A new client in pass mode: start the upstream connect. */
static void conn_start(struct proxy *p, int cfd) {
    set_nodelay(cfd);
    struct conn *c = conn_new(p, cfd);
    if (!c)
        return;
    int ufd = socket(p->target.ss_family,
                     SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ufd < 0) {
        close_rst(c->cfd);
        c->cfd = -1;
        return;
    }
    set_nodelay(ufd);
    c->ufd = ufd;
    if (connect(ufd, (struct sockaddr *)&p->target, p->target_len) == 0)
        return;
    if (errno == EINPROGRESS) {
        c->connecting = 1;
        return;
    }
    close_rst(c->cfd); /* target refused: the client sees a reset */
    c->cfd = -1;
    close_fd(&c->ufd);
}

static int is_filler(const struct proxy *p, int fd) {
    int port = peer_port(fd);
    for (int i = 0; i < p->nfillers; i++)
        if (p->filler_ports[i] == port)
            return 1;
    return 0;
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An overloaded server's answer (ErrorResponse, SQLSTATE 53300): libpq
 * reads it in place of the SSL or startup reply. */
static void refuse_busy(struct proxy *p, int fd) {
    static const char msg[] =
        "SFATAL\0VFATAL\0C53300\0Msorry, too many clients "
        "already\0\0";
    char pkt[1 + 4 + sizeof msg];
    uint32_t len = htonl((uint32_t)(4 + sizeof msg - 1));
    pkt[0] = 'E';
    memcpy(pkt + 1, &len, 4);
    memcpy(pkt + 5, msg, sizeof msg - 1);
    (void)send(fd, pkt, 5 + sizeof msg - 1, MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    struct conn *c = conn_new(p, fd); /* drop its input until it closes */
    if (c)
        c->dead = 1;
}

/* A new connection in the counting mode: count it, then reset it (down),
 * forward it (within this second's admissions) or refuse it as busy. */
static void gate_accept(struct proxy *p, int fd) {
    long long now = now_ms(), s = (now - p->gate_t0_ms) / 1000;
    int in = s >= 0 && s < GATE_SECONDS;
    if (in)
        p->attempts[s]++;
    if (p->gate < 0) {
        close_rst(fd);
        return;
    }
    long long w = (now - p->gate_since_ms) / 1000;
    if (w != p->window) {
        p->window = w;
        p->in_window = 0;
    }
    if (p->in_window < p->gate) {
        p->in_window++;
        if (in)
            p->admitted[s]++;
        conn_start(p, fd);
        return;
    }
    refuse_busy(p, fd);
}

/* Accept everything queued; fillers are closed, clients start (or go dead). */
static void accept_all(struct proxy *p, int dead) {
    for (;;) {
        int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (is_filler(p, fd)) {
            close(fd);
        } else if (dead) {
            struct conn *c = conn_new(p, fd);
            if (c)
                c->dead = 1;
        } else if (p->gate_on) {
            gate_accept(p, fd);
        } else {
            conn_start(p, fd);
        }
    }
}

/* Accept-queue length and limit of a listening socket (Linux TCP_INFO reports
 * them as tcpi_unacked / tcpi_sacked); the queue is full when len > limit. */
static int queue_state(int lfd, unsigned *len) {
    struct tcp_info ti;
    socklen_t sz = sizeof ti;
    if (getsockopt(lfd, IPPROTO_TCP, TCP_INFO, &ti, &sz) != 0)
        return -1;
    *len = ti.tcpi_unacked;
    return ti.tcpi_unacked > ti.tcpi_sacked;
}

/* One filler connect to our own listener. Returns 1 if it completed, 0 if
 * it is still in progress after FILL_WAIT_MS (the queue is full), -1 on error.
 */
static int filler_connect(struct proxy *p, int *fdp) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = loopback_addr(p->port);
    *fdp = fd;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
        return 1;
    if (errno != EINPROGRESS)
        return -1;
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    if (poll(&pf, 1, FILL_WAIT_MS) == 0)
        return 0;
    int err = 0;
    socklen_t len = sizeof err;
    (void)getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    return err == 0 ? 1 : -1;
}

/* After a filler connected, give the listener a moment to queue it. */
static int wait_queued(const struct proxy *p, unsigned want) {
    unsigned len = 0;
    int full = 0;
    for (int i = 0; i < 100; i++) {
        full = queue_state(p->lfd, &len);
        if (full != 0 || len >= want)
            break;
        usleep(1000);
    }
    return full;
}

/* Stuff the accept queue (backlog 1) with our own connections until the
 * kernel reports it full, or until one of our connects hangs. */
static void listener_fill(struct proxy *p) {
    if (p->full)
        return;
    (void)listen(p->lfd, 1);
    accept_all(p, 1);
    p->full = 1;
    unsigned len;
    for (int i = 0; i < MAX_FILLERS; i++) {
        if (queue_state(p->lfd, &len) == 1)
            return;
        int fd = -1;
        int r = filler_connect(p, &fd);
        if (r == 1) {
            p->fillers[p->nfillers] = fd;
            p->filler_ports[p->nfillers++] = local_port(fd);
            if (wait_queued(p, (unsigned)p->nfillers) == 1)
                return;
            continue;
        }
        if (r == 0) {
            p->pending_filler = fd; /* its SYN is being dropped: full */
            return;
        }
        close_fd(&fd);
        break;
    }
    logmsg(
        "warning: the accept queue did not fill; new connections may not hang");
}

/* Undo listener_fill: drop our connections, accept what clients queued. */
static void listener_unfill(struct proxy *p) {
    if (!p->full)
        return;
    close_fd(&p->pending_filler);
    (void)listen(p->lfd, SOMAXCONN);
    accept_all(p, 0);
    for (int i = 0; i < p->nfillers; i++)
        close(p->fillers[i]);
    p->nfillers = 0;
    p->full = 0;
}

static void listener_close(struct proxy *p) {
    close_fd(&p->pending_filler);
    for (int i = 0; i < p->nfillers; i++)
        close(p->fillers[i]);
    p->nfillers = 0;
    p->full = 0;
    close_fd(&p->lfd);
}

static int count_dead(const struct proxy *p) {
    int n = 0;
    for (int i = 0; i < p->nconns; i++)
        n += p->conns[i]->dead;
    return n;
}

static void go_dead(struct conn *c) {
    c->dead = 1;
    c->c2u.off = c->c2u.len = 0;
    c->u2c.off = c->u2c.len = 0;
    if (c->connecting) {
        close_fd(&c->ufd);
        c->connecting = 0;
    }
}

/* "gate N": enter (or re-set) the counting mode. */
static int set_gate(struct proxy *p, const char *n) {
    char *end;
    long v = strtol(n, &end, 10);
    if (end == n || *end || v < -1 || v > 1000000)
        return -2;
    if (p->lfd < 0 && listener_open(p) != 0)
        return -1;
    listener_unfill(p);
    p->mode = MODE_PASS;
    long long now = now_ms();
    if (!p->gate_on) {
        p->gate_on = 1;
        p->gate_t0_ms = now;
        memset(p->attempts, 0, sizeof p->attempts);
        memset(p->admitted, 0, sizeof p->admitted);
    }
    p->gate = (int)v;
    p->gate_since_ms = now;
    p->window = 0;
    p->in_window = 0;
    return 0;
}

static int set_mode(struct proxy *p, const char *what) {
    if (strncmp(what, "gate ", 5) == 0)
        return set_gate(p, what + 5);
    p->gate_on = 0;
    if (strcmp(what, "reset") == 0) {
        for (int i = 0; i < p->nconns; i++) {
            close_rst(p->conns[i]->cfd);
            close_rst(p->conns[i]->ufd);
            p->conns[i]->cfd = p->conns[i]->ufd = -1;
        }
        what = "pass";
    }
    if (strcmp(what, "pass") == 0) {
        if (p->lfd < 0 && listener_open(p) != 0)
            return -1;
        listener_unfill(p);
        p->mode = MODE_PASS;
    } else if (strcmp(what, "blackhole") == 0) {
        for (int i = 0; i < p->nconns; i++)
            go_dead(p->conns[i]);
        if (p->lfd < 0 && listener_open(p) != 0)
            return -1;
        listener_fill(p);
        p->mode = MODE_BLACKHOLE;
    } else if (strcmp(what, "refuse") == 0) {
        listener_close(p);
        p->mode = MODE_REFUSE;
    } else {
        return -2;
    }
    return 0;
}

/* One control request: a line with a mode name; the reply ends the exchange. */
static void handle_ctl(struct proxy *p) {
    int fd = accept4(p->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct timeval tv = {.tv_sec = 2};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char line[64];
    size_t n = 0;
    while (n < sizeof line - 1) {
        ssize_t r = read(fd, line + n, sizeof line - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (memchr(line, '\n', n))
            break;
    }
    line[n] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    static char reply[32 + 2 * 8 * GATE_SECONDS];
    if (strcmp(line, "counts") == 0) {
        long long secs = p->gate_on ? (now_ms() - p->gate_t0_ms) / 1000 + 1 : 0;
        secs = secs > GATE_SECONDS ? GATE_SECONDS : secs;
        size_t o = (size_t)snprintf(reply, sizeof reply,
                                    "ok seconds=%lld attempts=", secs);
        for (int k = 0; k < 2; k++) {
            const int *v = k ? p->admitted : p->attempts;
            if (k)
                o +=
                    (size_t)snprintf(reply + o, sizeof reply - o, " admitted=");
            for (long long i = 0; i < secs; i++)
                o += (size_t)snprintf(reply + o, sizeof reply - o, "%s%d",
                                      i ? "," : "", v[i]);
        }
        snprintf(reply + o, sizeof reply - o, "\n");
    } else if (strcmp(line, "status") == 0) {
        snprintf(reply, sizeof reply, "ok mode=%s conns=%d dead=%d port=%d\n",
                 mode_names[p->mode], p->nconns, count_dead(p), p->port);
    } else {
        int rc = set_mode(p, line);
        if (rc == 0)
            logmsg("mode %s (%d connections, %d silent)", mode_names[p->mode],
                   p->nconns, count_dead(p));
        snprintf(reply, sizeof reply, "%s\n",
                 rc == 0    ? "ok"
                 : rc == -2 ? "error: unknown mode"
                            : "error: cannot listen");
    }
    (void)send(fd, reply, strlen(reply), MSG_NOSIGNAL);
    close(fd);
}

/* ---- forwarding ---- */

static void conn_close(struct conn *c, int rst) {
    if (rst) {
        close_rst(c->cfd);
        close_rst(c->ufd);
    } else {
        if (c->cfd >= 0)
            close(c->cfd);
        if (c->ufd >= 0)
            close(c->ufd);
    }
    c->cfd = c->ufd = -1;
}

/* Read from fd into d. Returns bytes read, 0 on EOF, -1 on error, -2 on EAGAIN.
 */
static ssize_t fill_dir(int fd, struct dir *d) {
    if (d->off == d->len)
        d->off = d->len = 0;
    if (d->len >= BUF_SIZE)
        return -2;
    ssize_t r = recv(fd, d->buf + d->len, BUF_SIZE - d->len, 0);
    if (r > 0)
        d->len += (size_t)r;
    if (r < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? -2
                                                                           : -1;
    return r;
}

static int drain_dir(int fd, struct dir *d) {
    while (d->off < d->len) {
        ssize_t w = send(fd, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL);
        if (w < 0)
            return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                       ? 0
                       : -1;
        d->off += (size_t)w;
    }
    d->off = d->len = 0;
    return 0;
}

/* Read and discard; returns 1 while the socket is open, 0 on EOF or error. */
static int drop_input(int fd) {
    char scratch[4096];
    for (int i = 0; i < 16; i++) {
        ssize_t r = recv(fd, scratch, sizeof scratch, 0);
        if (r == 0)
            return 0;
        if (r < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
    return 1;
}

static void dead_event(struct conn *c, int side_client, short rev) {
    if (!(rev & (POLLIN | POLLHUP | POLLERR)))
        return;
    if (side_client) {
        if (!drop_input(c->cfd))
            conn_close(c, 0); /* the client gave up: release the upstream */
    } else if (!drop_input(c->ufd)) {
        close_fd(&c->ufd); /* the client keeps hearing nothing */
    }
}

static void upstream_connected(struct conn *c, short rev) {
    int err = 0;
    socklen_t len = sizeof err;
    if (!(rev & (POLLOUT | POLLERR | POLLHUP)))
        return;
    (void)getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0)
        conn_close(c, 1);
    else
        c->connecting = 0;
}

/* Readable/writable work on one side: from = the fd that was polled. */
static void pass_event(struct conn *c, int side_client, short ev, short rev) {
    int from = side_client ? c->cfd : c->ufd;
    struct dir *in =
        side_client ? &c->c2u : &c->u2c; /* what we read from `from` */
    struct dir *out = side_client ? &c->u2c : &c->c2u; /* what we owe `from` */
    int *eof = side_client ? &c->c_eof : &c->u_eof;
    if ((rev & (POLLERR | POLLHUP)) && !(ev & POLLIN)) {
        conn_close(c, 1); /* peer gone and we cannot read what it sent */
        return;
    }
    if (rev & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t r = fill_dir(from, in);
        if (r == 0)
            *eof = 1;
        else if (r == -1) {
            conn_close(c, 1);
            return;
        }
    }
    if ((rev & POLLOUT) && drain_dir(from, out) < 0)
        conn_close(c, 1);
}

static void conn_flush(struct conn *c) {
    if (c->cfd < 0 || c->dead || c->connecting)
        return;
    if (c->c2u.off < c->c2u.len && drain_dir(c->ufd, &c->c2u) < 0) {
        conn_close(c, 1);
        return;
    }
    if (c->u2c.off < c->u2c.len && drain_dir(c->cfd, &c->u2c) < 0) {
        conn_close(c, 1);
        return;
    }
    if (c->c_eof && c->c2u.off == c->c2u.len && !c->u_shut) {
        (void)shutdown(c->ufd, SHUT_WR);
        c->u_shut = 1;
    }
    if (c->u_eof && c->u2c.off == c->u2c.len && !c->c_shut) {
        (void)shutdown(c->cfd, SHUT_WR);
        c->c_shut = 1;
    }
    if (c->c_shut && c->u_shut)
        conn_close(c, 0);
}

static short client_events(const struct conn *c) {
    if (c->dead)
        return POLLIN;
    short ev = 0;
    if (!c->connecting && !c->c_eof && c->c2u.len < BUF_SIZE)
        ev |= POLLIN;
    if (c->u2c.off < c->u2c.len)
        ev |= POLLOUT;
    return ev;
}

static short upstream_events(const struct conn *c) {
    if (c->dead)
        return POLLIN;
    if (c->connecting)
        return POLLOUT;
    short ev = 0;
    if (!c->u_eof && c->u2c.len < BUF_SIZE)
        ev |= POLLIN;
    if (c->c2u.off < c->c2u.len)
        ev |= POLLOUT;
    return ev;
}

static void reap(struct proxy *p) {
    int j = 0;
    for (int i = 0; i < p->nconns; i++) {
        struct conn *c = p->conns[i];
        if (c->cfd < 0) {
            if (c->ufd >= 0)
                close(c->ufd);
            free(c);
        } else {
            p->conns[j++] = c;
        }
    }
    p->nconns = j;
}

struct slot {
    struct conn *c;
    int side_client;
};

static int build_pollset(struct proxy *p, struct pollfd *fds,
                         struct slot *slots) {
    int n = 0;
    fds[n++] = (struct pollfd){.fd = p->ctl_fd, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = (p->lfd >= 0 && !p->full) ? p->lfd : -1,
                               .events = POLLIN};
    for (int i = 0; i < p->nconns; i++) {
        struct conn *c = p->conns[i];
        short ev = client_events(c);
        if (ev || !c->c_shut) {
            slots[n] = (struct slot){c, 1};
            fds[n++] = (struct pollfd){.fd = c->cfd, .events = ev};
        }
        if (c->ufd >= 0) {
            ev = upstream_events(c);
            if (ev || !c->u_shut) {
                slots[n] = (struct slot){c, 0};
                fds[n++] = (struct pollfd){.fd = c->ufd, .events = ev};
            }
        }
    }
    return n;
}

static void dispatch(struct proxy *p, struct pollfd *fds, struct slot *slots,
                     int n) {
    for (int i = 2; i < n; i++) {
        struct conn *c = slots[i].c;
        int side_client = slots[i].side_client;
        short rev = fds[i].revents;
        if (!rev || fds[i].fd != (side_client ? c->cfd : c->ufd))
            continue; /* nothing, or closed meanwhile */
        if (c->dead)
            dead_event(c, side_client, rev);
        else if (!side_client && c->connecting)
            upstream_connected(c, rev);
        else
            pass_event(c, side_client, fds[i].events, rev);
    }
    for (int i = 0; i < p->nconns; i++)
        conn_flush(p->conns[i]);
    reap(p);
}

static int serve_loop(struct proxy *p) {
    static struct pollfd fds[2 + 2 * MAX_CONNS];
    static struct slot slots[2 + 2 * MAX_CONNS];
    sigset_t none;
    sigemptyset(&none);
    while (!stop_flag) {
        int n = build_pollset(p, fds, slots);
        int r = ppoll(fds, (nfds_t)n, NULL, &none);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            logmsg("poll: %s", strerror(errno));
            return 1;
        }
        if (fds[0].revents & POLLIN) {
            handle_ctl(p);
            reap(p);
            continue; /* the poll set may be stale now */
        }
        if (fds[1].revents & POLLIN)
            accept_all(p, 0);
        dispatch(p, fds, slots, n);
    }
    return 0;
}

static int ctl_listen(struct proxy *p, const char *path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    struct stat st;
    if (strlen(path) >= sizeof a.sun_path) {
        logmsg("control path too long: %s", path);
        return -1;
    }
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            logmsg("%s exists and is not a socket", path);
            return -1;
        }
        unlink(path);
    }
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(fd, 8) != 0) {
        logmsg("control socket %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    set_nonblock(fd);
    p->ctl_fd = fd;
    p->ctl_path = path;
    return 0;
}

static void shutdown_proxy(struct proxy *p) {
    for (int i = 0; i < p->nconns; i++) {
        conn_close(p->conns[i], 0);
        free(p->conns[i]);
    }
    p->nconns = 0;
    listener_close(p);
    close_fd(&p->ctl_fd);
    unlink(p->ctl_path);
}

static void install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, NULL); /* delivered only inside ppoll */
}

static int usage(void) {
    fprintf(
        stderr,
        "usage: faultproxy serve --listen PORT --target HOST:PORT --control "
        "PATH\n"
        "       faultproxy ctl PATH pass|blackhole|reset|refuse|status|counts\n"
        "       faultproxy ctl PATH 'gate N'\n");
    return 2;
}

static int cmd_serve(int argc, char **argv) {
    static struct proxy p;
    const char *listen_s = NULL, *target_s = NULL, *ctl_s = NULL;
    for (int i = 0; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--listen") == 0)
            listen_s = argv[i + 1];
        else if (strcmp(argv[i], "--target") == 0)
            target_s = argv[i + 1];
        else if (strcmp(argv[i], "--control") == 0)
            ctl_s = argv[i + 1];
        else
            return usage();
    }
    if (argc % 2 != 0 || !listen_s || !target_s || !ctl_s)
        return usage();
    char *end;
    long port = strtol(listen_s, &end, 10);
    if (*end || port < 0 || port > 65535)
        return usage();
    p.port = (int)port;
    p.lfd = p.ctl_fd = p.pending_filler = -1;
    if (parse_target(&p, target_s) != 0) {
        logmsg("target %s: not a loopback HOST:PORT", target_s);
        return 2;
    }
    install_signals();
    if (ctl_listen(&p, ctl_s) != 0)
        return 1;
    if (listener_open(&p) != 0) {
        unlink(ctl_s);
        return 1;
    }
    printf("port %d\n", p.port);
    fflush(stdout);
    int rc = serve_loop(&p);
    shutdown_proxy(&p);
    return rc;
}

static int cmd_ctl(int argc, char **argv) {
    if (argc != 2)
        return usage();
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(argv[0]) >= sizeof a.sun_path)
        return usage();
    strcpy(a.sun_path, argv[0]);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        fprintf(stderr, "faultproxy ctl: %s: %s\n", argv[0], strerror(errno));
        return 1;
    }
    struct timeval tv = {.tv_sec = 10};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    static char reply[64 * 1024];
    char req[64];
    int len = snprintf(req, sizeof req, "%s\n", argv[1]);
    if (len < 0 || (size_t)len >= sizeof req ||
        send(fd, req, (size_t)len, MSG_NOSIGNAL) != len) {
        close(fd);
        return 1;
    }
    size_t n = 0;
    ssize_t r;
    while (n < sizeof reply - 1 &&
           (r = read(fd, reply + n, sizeof reply - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    reply[n] = '\0';
    fputs(reply, stdout);
    return strncmp(reply, "ok", 2) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return cmd_serve(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "ctl") == 0)
        return cmd_ctl(argc - 2, argv + 2);
    return usage();
}
