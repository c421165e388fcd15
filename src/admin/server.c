/* server.c - the admin socket's sockets and its one thread
 * (docs/operations.md): tether_admin_start and tether_admin_stop, the
 * keyword tether_admin_socket and the variable TETHER_ADMIN_SOCKET (both
 * through the pool layer's hooks, live.h). The thread polls the listening
 * sockets and at most TETHER__ADMIN_CLIENTS clients, all non-blocking: a
 * client is served one request at a time, a request must arrive whole (at
 * most TETHER__ADMIN_LINE_MAX bytes) within REQUEST_MS of its first byte and
 * its answer be read within WRITE_MS, an idle client is closed after
 * IDLE_MS. A peer that is neither this process's user nor root is refused
 * (SO_PEERCRED) and closed. Nothing a client does can block a pool: the
 * thread takes no lock of the acquire path (report.c). */
#include "admin.h"
#include "conninfo.h"
#include "internal.h"
#include "live.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define LISTEN_MAX 8       /* admin sockets in one process */
#define CLIENTS_MAX 1000   /* clients at once: the next is closed */
#define REQUEST_MS 2000    /* a request, from its first byte to its newline */
#define WRITE_MS 10000     /* an answer, until the client has read it */
#define IDLE_MS 60000      /* a client with no request under way */
#define OUT_MAX (8u << 20) /* the largest answer */
#define PATH_CAP sizeof(((struct sockaddr_un *)0)->sun_path)

typedef struct client {
    int fd;
    int closing;      /* close once the answer is out */
    size_t inlen;     /* bytes of the request read so far */
    int64_t deadline; /* ms: see the top of the file */
    tether__admin_buf out;
    size_t sent;
    char in[TETHER__ADMIN_LINE_MAX];
} client;

static struct {
    pthread_mutex_t lock; /* guards all but the clients (the thread's) */
    int nlisten;
    int lfd[LISTEN_MAX];
    char path[LISTEN_MAX][PATH_CAP];
    int wake[2]; /* a byte in it: the listeners changed, or stop */
    int running, stop;
    pthread_t thread;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = {-1, -1}};

static client *clients[CLIENTS_MAX];
static int nclients;

/* ---- clients (the thread's own) ----------------------------------------- */

static void client_close(int i) {
    client *c = clients[i];
    close(c->fd);
    tether__free(c->out.p);
    tether__free(c);
    clients[i] = clients[--nclients];
}

/* The peer's uid is ours or root's (SO_PEERCRED); else it is logged, at
 * most once a second, and refused. */
static int peer_ok(int fd, const char *path) {
    static int64_t last_log;
    static unsigned quiet;
    struct ucred cr;
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return 0;
    if (cr.uid == geteuid() || cr.uid == 0)
        return 1;
    int64_t now = tether__now_ms(NULL);
    if (now - last_log >= 1000) {
        tether__log(NULL, NULL, TETHER_LOG_WARN,
                    "admin socket %s: refused a client of uid %u (pid %d): "
                    "only uid %u and root may connect (%u more refused "
                    "since the last report)",
                    path, (unsigned)cr.uid, (int)cr.pid, (unsigned)geteuid(),
                    quiet);
        last_log = now;
        quiet = 0;
    } else {
        quiet++;
    }
    return 0;
}

static void accept_all(int lfd, const char *path, int64_t now,
                       int64_t *accept_pause) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM ||
                errno == ENOBUFS)
                *accept_pause = now + 100; /* no spinning on a full table */
            return;
        }
        client *c = NULL;
        if (!peer_ok(fd, path) || nclients == CLIENTS_MAX ||
            !(c = tether__calloc(1, sizeof(*c)))) {
            close(fd); /* refused: no answer, nobody waits on it */
            continue;
        }
        c->fd = fd;
        c->deadline = now + IDLE_MS;
        clients[nclients++] = c;
    }
}

/* take_request answers the request in c->in if a whole line is there;
 * refuses one too long. */
static void take_request(client *c, int64_t now) {
    char *nl = memchr(c->in, '\n', c->inlen);
    if (!nl) {
        if (c->inlen == sizeof(c->in)) {
            tether__admin_put(&c->out, "error: request longer than %d bytes\n",
                              TETHER__ADMIN_LINE_MAX);
            c->closing = 1;
            c->deadline = now + WRITE_MS;
        }
        return;
    }
    size_t n = (size_t)(nl - c->in);
    tether__admin_req r;
    char why[160];
    if (tether__admin_parse(c->in, n, &r, why, sizeof(why)) == 0)
        tether__admin_answer(&r, &c->out);
    else
        tether__admin_put(&c->out, "error: %s\n", why);
    if (c->out.oom || c->out.len > OUT_MAX) {
        c->out.len = c->out.oom = 0;
        tether__admin_put(&c->out, "error: answer too large\n");
        c->closing = !!c->out.oom;
    }
    memmove(c->in, nl + 1, c->inlen - n - 1); /* a pipelined next one waits */
    c->inlen -= n + 1;
    c->deadline = now + WRITE_MS;
}

/* client_io reads or writes what poll said c may; returns -1 to close. */
static int client_io(client *c, short revents, int64_t now) {
    if (revents & (POLLERR | POLLNVAL))
        return -1;
    if (c->out.len) { /* an answer under way: only write */
        if (!(revents & (POLLOUT | POLLHUP)))
            return 0;
        ssize_t k = send(c->fd, c->out.p + c->sent, c->out.len - c->sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        c->sent += (size_t)k;
        if (c->sent < c->out.len)
            return 0;
        if (c->closing)
            return -1;
        c->sent = c->out.len = 0;
        if (c->out.cap > 65536) { /* a large answer's memory back */
            tether__free(c->out.p);
            c->out.p = NULL;
            c->out.cap = 0;
        }
        c->deadline = c->inlen ? now + REQUEST_MS : now + IDLE_MS;
        take_request(c, now); /* a pipelined request */
        return 0;
    }
    if (!(revents & (POLLIN | POLLHUP)))
        return 0;
    ssize_t k =
        recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, MSG_DONTWAIT);
    if (k == 0)
        return -1;
    if (k < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (c->inlen == 0) /* a request begins: it has REQUEST_MS */
        c->deadline = now + REQUEST_MS;
    c->inlen += (size_t)k;
    take_request(c, now);
    return 0;
}

/* ---- the thread ---------------------------------------------------------- */

static void *serve(void *arg) {
    (void)arg;
    static struct pollfd pfd[1 + LISTEN_MAX + CLIENTS_MAX];
    int lfd[LISTEN_MAX];
    char lpath[LISTEN_MAX][PATH_CAP];
    int64_t accept_pause = 0;
    for (;;) {
        pthread_mutex_lock(&S.lock);
        int stop = S.stop, nl = S.nlisten;
        memcpy(lfd, S.lfd, sizeof(lfd));
        memcpy(lpath, S.path, sizeof(lpath));
        pthread_mutex_unlock(&S.lock);
        if (stop)
            break;
        int64_t now = tether__now_ms(NULL);
        int np = 0, timeout = 1000;
        pfd[np++] = (struct pollfd){.fd = S.wake[0], .events = POLLIN};
        int listening = now >= accept_pause;
        for (int i = 0; i < nl; i++)
            pfd[np++] = (struct pollfd){.fd = listening ? lfd[i] : -1,
                                        .events = POLLIN};
        if (!listening)
            timeout = 100;
        for (int i = 0; i < nclients; i++) {
            client *c = clients[i];
            pfd[np++] = (struct pollfd){
                .fd = c->fd, .events = c->out.len ? POLLOUT : POLLIN};
            int64_t left = c->deadline - now;
            if (left < timeout)
                timeout = left < 0 ? 0 : (int)left;
        }
        int k = poll(pfd, (nfds_t)np, timeout);
        if (k < 0 && errno != EINTR)
            break;
        now = tether__now_ms(NULL);
        if (k > 0 && (pfd[0].revents & POLLIN)) {
            char drain[64];
            while (read(S.wake[0], drain, sizeof(drain)) > 0)
                ;
        }
        /* clients first (their slots in pfd), from the last: closing one
         * moves the last client into its place */
        for (int i = nclients - 1; i >= 0; i--) {
            client *c = clients[i];
            short re = k > 0 ? pfd[1 + nl + i].revents : 0;
            if ((re && client_io(c, re, now) < 0) || now >= c->deadline)
                client_close(i);
        }
        for (int i = 0; k > 0 && i < nl; i++)
            if (pfd[1 + i].revents & POLLIN)
                accept_all(lfd[i], lpath[i], now, &accept_pause);
    }
    while (nclients)
        client_close(nclients - 1);
    return NULL;
}

static void wake(void) {
    char b = 1;
    ssize_t k = write(S.wake[1], &b, 1);
    (void)k; /* full: the thread wakes anyway */
}

/* ---- starting and stopping ---------------------------------------------- */

/* listen_at opens the listening socket at path; a stale socket file is
 * replaced, a live one is TETHER_ESTATE. */
static int listen_at(const char *path, int *out, tether_error *err) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                    "admin socket %s: the file exists and is "
                                    "not a socket",
                                    path);
        int t = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int live =
            t >= 0 && (connect(t, (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
                       errno == EAGAIN);
        if (t >= 0)
            close(t);
        if (live)
            return tether_error_set(err, TETHER_ESTATE, TETHER_CLASS_PERMANENT,
                                    "admin socket %s: in use by another "
                                    "process",
                                    path);
        unlink(path); /* stale: its process is gone */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return tether_error_set(err, TETHER_EIO, TETHER_CLASS_PERMANENT,
                                "admin socket %s: socket: %s", path,
                                strerror(errno));
    /* Linux gives the socket file the mode of the socket's inode (less the
     * umask) at bind: 0600 from the start, and once more after */
    if (fchmod(fd, 0600) != 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        chmod(path, 0600) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return tether_error_set(err, TETHER_EIO, TETHER_CLASS_PERMANENT,
                                "admin socket %s: %s", path, strerror(e));
    }
    *out = fd;
    return 0;
}

static void unlink_all(void) {
    pthread_mutex_lock(&S.lock);
    for (int i = 0; i < S.nlisten; i++)
        unlink(S.path[i]);
    pthread_mutex_unlock(&S.lock);
}

/* A child of fork has no server thread: it forgets the parent's sockets
 * (closing its copies) so that neither its exit nor a tether_admin_stop in
 * it removes the parent's files, and its clients' connections are not
 * held open by it. It may start sockets of its own. */
static void forget_in_child(void) {
    pthread_mutex_init(&S.lock, NULL); /* another thread may have held it */
    for (int i = 0; i < S.nlisten; i++)
        close(S.lfd[i]);
    for (int i = 0; i < nclients && i < CLIENTS_MAX; i++)
        if (clients[i])
            close(clients[i]->fd); /* their memory: left to the child */
    nclients = 0;
    if (S.wake[0] >= 0) {
        close(S.wake[0]);
        close(S.wake[1]);
    }
    S.wake[0] = S.wake[1] = -1;
    S.nlisten = S.running = S.stop = 0;
}

/* start_thread starts the server thread with every signal blocked (the
 * process's signals are not its business). S.lock held. */
static int start_thread(tether_error *err) {
    if (S.running)
        return 0;
    if (S.wake[0] < 0 && pipe2(S.wake, O_NONBLOCK | O_CLOEXEC) != 0)
        return tether_error_set(err, TETHER_EIO, TETHER_CLASS_PERMANENT,
                                "admin socket: pipe: %s", strerror(errno));
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&S.thread, NULL, serve, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        return tether_error_set(err, TETHER_EIO, TETHER_CLASS_PERMANENT,
                                "admin socket: pthread_create: %s",
                                strerror(rc));
    S.running = 1;
    S.stop = 0;
    static int at_exit;
    if (!at_exit++) {
        atexit(unlink_all);
        pthread_atfork(NULL, NULL, forget_in_child);
    }
    return 0;
}

int tether_admin_start(const char *path, tether_error *err) {
    if (!path)
        return tether__null(err, "tether_admin_start", "path");
    if (!*path || strlen(path) >= PATH_CAP)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "admin socket: the path must be 1 to %zu "
                                "bytes",
                                PATH_CAP - 1);
    pthread_mutex_lock(&S.lock);
    int rc = 0;
    for (int i = 0; i < S.nlisten; i++)
        if (!strcmp(S.path[i], path))
            goto out; /* started already */
    if (S.nlisten == LISTEN_MAX) {
        rc = tether_error_set(err, TETHER_ESTATE, TETHER_CLASS_PERMANENT,
                              "admin socket %s: a process has at most %d", path,
                              LISTEN_MAX);
        goto out;
    }
    int fd;
    rc = listen_at(path, &fd, err);
    if (rc == 0 && (rc = start_thread(err)) != 0) {
        close(fd);
        unlink(path);
    }
    if (rc == 0) {
        S.lfd[S.nlisten] = fd;
        memcpy(S.path[S.nlisten], path, strlen(path) + 1);
        S.nlisten++;
        wake();
    }
out:
    pthread_mutex_unlock(&S.lock);
    return rc;
}

void tether_admin_stop(void) {
    pthread_mutex_lock(&S.lock);
    int running = S.running;
    S.stop = 1;
    if (running)
        wake();
    pthread_mutex_unlock(&S.lock);
    if (running)
        pthread_join(S.thread, NULL);
    pthread_mutex_lock(&S.lock);
    for (int i = 0; i < S.nlisten; i++) {
        close(S.lfd[i]);
        unlink(S.path[i]);
    }
    S.nlisten = 0;
    S.running = 0;
    pthread_mutex_unlock(&S.lock);
}

/* ---- the keyword and the variable ---------------------------------------- */

static void start_from_env(void) {
    const char *path = getenv("TETHER_ADMIN_SOCKET");
    tether_error e = {0};
    if (path && *path && tether_admin_start(path, &e) != 0)
        tether__log(NULL, NULL, TETHER_LOG_WARN, "TETHER_ADMIN_SOCKET: %s",
                    e.message);
}

static void created(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, start_from_env);
}

static int opened(tether_pool *p, const tether__conninfo *ci,
                  tether_error *err) {
    (void)p;
    const char *path = tether__conninfo_get(ci, "tether_admin_socket");
    if (!path)
        return 0;
    tether_error e = {0};
    int rc = tether_admin_start(path, &e);
    if (rc)
        tether_error_set(err, rc == TETHER_EIO ? TETHER_EIO : TETHER_ESPEC,
                         TETHER_CLASS_PERMANENT,
                         "connection string: tether_admin_socket: %s",
                         e.message);
    return rc ? (rc == TETHER_EIO ? TETHER_EIO : TETHER_ESPEC) : 0;
}

static const tether__live_hooks hooks = {.created = created, .opened = opened};

static const tether__keydef admin_keys[] = {
    TETHER__KD_SELF("tether_admin_socket",
                    "a Unix socket for tether top and tether ctl "
                    "(docs/operations.md)"),
    TETHER__KD_END};

static const tether__kwtable admin_table = {
    .layer = "admin", .kind = TETHER__KW_POOL, .defs = admin_keys};

/* The keyword is known, and the hooks in place, from the start (as every
 * layer's keywords: conninfo.h, "keyword tables"). */
__attribute__((constructor)) static void admin_register(void) {
    tether__keywords_register(&admin_table);
    tether__live_hooks_set(&hooks);
}
