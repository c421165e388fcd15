/* fake_patroni.h - a small fake of Patroni's REST API for tests: a thread
 * on a loopback port that answers GET /cluster with a canned body (which
 * the test may change between calls) or misbehaves on purpose: hangs,
 * trickles its body, redirects to itself, truncates, sends a huge body or
 * an error status. It serves one connection at a time and counts the
 * requests. fake_patroni_down closes the listening socket (a connect is
 * refused), fake_patroni_up opens it again on the same port.
 *
 * Header only (static functions); include it after <cmocka.h>. */
#ifndef TETHER_TEST_FAKE_PATRONI_H
#define TETHER_TEST_FAKE_PATRONI_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
    FP_OK = 0,   /* 200 with the body */
    FP_HANG,     /* read the request, never answer */
    FP_TRICKLE,  /* the headers, then the body a byte every 200 ms */
    FP_REDIRECT, /* 302 to itself */
    FP_TRUNCATE, /* Content-Length of the body, half of it, close */
    FP_HUGE,     /* a 2 MiB body */
    FP_STATUS500 /* 503 with a JSON body */
};

typedef struct fake_patroni {
    int fd, port;
    pthread_t thread;
    pthread_mutex_t lock;
    char *body; /* the answer (lock) */
    int mode;   /* FP_* (lock) */
    _Atomic int stop;
    _Atomic int requests;
} fake_patroni;

static void fp_send(int c, const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = send(c, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* fp_sleep sleeps ms unless the server stops. Returns 1 when stopping. */
static int fp_sleep(fake_patroni *f, int ms) {
    for (int i = 0; i < ms / 10; i++) {
        if (atomic_load(&f->stop))
            return 1;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&f->stop);
}

static void fp_serve(fake_patroni *f, int c) {
    char req[4096] = "";
    size_t got = 0;
    while (got < sizeof(req) - 1 && !strstr(req, "\r\n\r\n")) {
        struct pollfd p = {c, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) {
            if (atomic_load(&f->stop))
                return;
            continue;
        }
        ssize_t r = recv(c, req + got, sizeof(req) - 1 - got, 0);
        if (r <= 0)
            return;
        got += (size_t)r;
        req[got] = '\0';
    }
    atomic_fetch_add(&f->requests, 1);
    pthread_mutex_lock(&f->lock);
    int mode = f->mode;
    char *body = strdup(f->body ? f->body : "");
    pthread_mutex_unlock(&f->lock);
    size_t n = strlen(body);
    char head[512];
    int h = 0;
    switch (mode) {
    case FP_HANG:
        fp_sleep(f, 60000);
        break;
    case FP_TRICKLE:
        h = snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     n);
        fp_send(c, head, (size_t)h);
        for (size_t i = 0; i < n && !fp_sleep(f, 200); i++)
            fp_send(c, body + i, 1);
        break;
    case FP_REDIRECT:
        h = snprintf(
            head, sizeof(head),
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:%d/"
            "cluster\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            f->port);
        fp_send(c, head, (size_t)h);
        break;
    case FP_TRUNCATE:
        h = snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     n);
        fp_send(c, head, (size_t)h);
        fp_send(c, body, n / 2);
        break;
    case FP_HUGE: {
        size_t big = 2u << 20;
        h = snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     big);
        fp_send(c, head, (size_t)h);
        char *chunk = malloc(65536);
        memset(chunk, ' ', 65536);
        for (size_t i = 0; i < big / 65536; i++)
            fp_send(c, chunk, 65536);
        free(chunk);
        break;
    }
    case FP_STATUS500:
    default:
        h = snprintf(head, sizeof(head),
                     "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     mode == FP_OK ? "200 OK" : "503 Service Unavailable", n);
        fp_send(c, head, (size_t)h);
        fp_send(c, body, n);
        break;
    }
    free(body);
}

static void *fp_run(void *arg) {
    fake_patroni *f = arg;
    while (!atomic_load(&f->stop)) {
        pthread_mutex_lock(&f->lock);
        int fd = f->fd;
        pthread_mutex_unlock(&f->lock);
        if (fd < 0) {
            fp_sleep(f, 20);
            continue;
        }
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int c = accept(fd, NULL, NULL);
        if (c < 0)
            continue;
        fp_serve(f, c);
        close(c);
    }
    return NULL;
}

static int fp_listen(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* fake_patroni_start starts a server answering body (copied). */
static inline fake_patroni *fake_patroni_start(const char *body) {
    fake_patroni *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    pthread_mutex_init(&f->lock, NULL);
    f->body = strdup(body);
    f->fd = fp_listen(0);
    assert_true(f->fd >= 0);
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(f->fd, (struct sockaddr *)&a, &len), 0);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->thread, NULL, fp_run, f), 0);
    return f;
}

/* fake_patroni_set changes the answer and the mode for the next calls. */
static inline void fake_patroni_set(fake_patroni *f, const char *body,
                                    int mode) {
    pthread_mutex_lock(&f->lock);
    if (body) {
        free(f->body);
        f->body = strdup(body);
    }
    f->mode = mode;
    pthread_mutex_unlock(&f->lock);
}

/* fake_patroni_down stops listening: connects are refused. */
static inline void fake_patroni_down(fake_patroni *f) {
    pthread_mutex_lock(&f->lock);
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    pthread_mutex_unlock(&f->lock);
}

/* fake_patroni_up listens again on the same port. */
static inline void fake_patroni_up(fake_patroni *f) {
    int fd = fp_listen(f->port);
    assert_true(fd >= 0);
    pthread_mutex_lock(&f->lock);
    f->fd = fd;
    pthread_mutex_unlock(&f->lock);
}

/* fake_patroni_url writes "http://127.0.0.1:PORT" into buf. */
static inline void fake_patroni_url(const fake_patroni *f, char *buf,
                                    size_t cap) {
    snprintf(buf, cap, "http://127.0.0.1:%d", f->port);
}

static inline void fake_patroni_stop(fake_patroni *f) {
    if (!f)
        return;
    atomic_store(&f->stop, 1);
    pthread_join(f->thread, NULL);
    if (f->fd >= 0)
        close(f->fd);
    free(f->body);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

#endif
