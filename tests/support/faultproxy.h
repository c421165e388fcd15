/* faultproxy.h - a fault proxy (tests/tools/faultproxy.c) in front of a
 * server, for integration tests written with cmocka: start it, set its
 * mode (docs/testing.md lists them), stop it.
 *
 * Header only (static functions); integration tests include it as
 * "../support/faultproxy.h" after <cmocka.h>. */
#ifndef TETHER_TEST_FAULTPROXY_H
#define TETHER_TEST_FAULTPROXY_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct proxy {
    const char *bin; /* the faultproxy binary */
    pid_t pid;
    int port; /* where it listens */
    char ctl[128];
} proxy;

/* proxy_start starts bin's proxy in front of 127.0.0.1:target_port; tag
 * names its control socket. */
static void proxy_start(proxy *px, const char *bin, int target_port,
                        const char *tag) {
    px->bin = bin;
    snprintf(px->ctl, sizeof(px->ctl), "/tmp/tether-%s-%d.sock", tag, getpid());
    unlink(px->ctl);
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", target_port);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    px->pid = fork();
    if (px->pid == 0) {
        /* Gone with the test, even one that fails before proxy_stop: a
         * proxy left running holds ctest's output pipe open. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(fds[1], 1);
        close(fds[0]);
        execl(bin, bin, "serve", "--listen", "0", "--target", target,
              "--control", px->ctl, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    char line[64] = "";
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    assert_int_equal(sscanf(line, "port %d", &px->port), 1);
}

/* proxy_stop stops it and removes its control socket. */
static void proxy_stop(proxy *px) {
    kill(px->pid, SIGTERM);
    waitpid(px->pid, NULL, 0);
    unlink(px->ctl);
}

/* proxy_mode sets its mode ("blackhole", "pass", ...). */
static void proxy_mode(proxy *px, const char *mode) {
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s ctl %s %s >/dev/null", px->bin, px->ctl,
             mode);
    assert_int_equal(system(cmd), 0);
}

#endif
