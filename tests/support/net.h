/* net.h - loopback sockets for tests: a listener (accepted from, or never:
 * a connect then completes its handshake and nothing answers) and a port
 * nothing listens on (a connect is refused).
 *
 * Header only (static inline functions); tests include it as
 * "../support/net.h" after <cmocka.h> (a failed call fails the test). */
#ifndef TETHER_TEST_NET_H
#define TETHER_TEST_NET_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* loopback_listener opens a listening socket on 127.0.0.1 on a port the
 * kernel picks, in *port; returns its fd (close it when done). */
static inline int loopback_listener(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    assert_int_equal(a.sin_family, AF_INET);
    *port = ntohs(a.sin_port);
    assert_true(*port > 0);
    return fd;
}

/* closed_port returns a loopback port nothing listens on: bound (so the
 * kernel picked a free one), then closed. */
static inline int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    int port = ntohs(a.sin_port);
    assert_true(port > 0);
    return port;
}

#endif
