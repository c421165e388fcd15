/* resolve.c - host name resolution that cannot blow the connect deadline:
 * glibc's getaddrinfo_a runs the lookup on its own thread and gai_suspend
 * waits for it at most the attempt's budget. A lookup still running at the
 * deadline is canceled (or, if it cannot be, left to finish and free
 * itself later). Numeric addresses and Unix-socket paths need no lookup. */
#include "connector.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int numeric(const char *host) {
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 ||
           inet_pton(AF_INET6, host, buf) == 1;
}

static int copy_addrs(struct addrinfo *res, char addrs[][64]) {
    int n = 0;
    for (struct addrinfo *a = res; a && n < TETHER__MAX_ADDRS; a = a->ai_next) {
        void *p = a->ai_family == AF_INET
                      ? (void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                      : (void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
        if (!inet_ntop(a->ai_family, p, addrs[n], 64))
            continue;
        int dup = 0;
        for (int i = 0; i < n; i++)
            dup |= !strcmp(addrs[i], addrs[n]);
        n += !dup;
    }
    return n;
}

/* A lookup in flight; freed by whoever finishes last. */
typedef struct lookup {
    struct gaicb cb;
    struct addrinfo hints;
    char name[256];
} lookup;

static int wait_lookup(lookup *l, int64_t budget_ms) {
    const struct gaicb *list[1] = {&l->cb};
    struct timespec ts, *tp = NULL;
    if (budget_ms >= 0) {
        ts.tv_sec = budget_ms / 1000;
        ts.tv_nsec = (budget_ms % 1000) * 1000000L;
        tp = &ts;
    }
    for (;;) {
        int rc = gai_suspend(list, 1, tp);
        if (rc == EAI_AGAIN)
            return TETHER_ETIMEDOUT;
        if (rc != EAI_INTR || budget_ms >= 0)
            return gai_error(&l->cb) == EAI_INPROGRESS ? TETHER_ETIMEDOUT : 0;
    }
}

int tether__resolve(const char *host, int64_t budget_ms, char addrs[][64],
                    tether_error *err) {
    if (!host || host[0] == '/' || numeric(host)) {
        snprintf(addrs[0], 64, "%s", host ? host : "");
        return 1;
    }
    lookup *l = calloc(1, sizeof(*l));
    if (!l)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    snprintf(l->name, sizeof(l->name), "%s", host);
    l->hints.ai_family = AF_UNSPEC;
    l->hints.ai_socktype = SOCK_STREAM;
    l->hints.ai_flags = AI_ADDRCONFIG;
    l->cb.ar_name = l->name;
    l->cb.ar_request = &l->hints;
    struct gaicb *list[1] = {&l->cb};
    if (getaddrinfo_a(GAI_NOWAIT, list, 1, NULL) != 0) {
        free(l);
        return tether_error_set(err, TETHER_ERESOLVE, TETHER_CLASS_TRANSIENT,
                                "cannot start resolving \"%.60s\"", host);
    }
    if (wait_lookup(l, budget_ms) == TETHER_ETIMEDOUT) {
        if (gai_cancel(&l->cb) == EAI_CANCELED ||
            gai_error(&l->cb) != EAI_INPROGRESS) {
            freeaddrinfo(l->cb.ar_result);
            free(l);
        } /* else: still running; a small leak beats a use after free */
        return tether_error_set(err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
                                "resolving \"%.60s\" took longer than %lld "
                                "ms",
                                host, (long long)budget_ms);
    }
    int rc = gai_error(&l->cb), n = 0;
    if (rc == 0)
        n = copy_addrs(l->cb.ar_result, addrs);
    freeaddrinfo(l->cb.ar_result);
    free(l);
    if (n > 0)
        return n;
    return tether_error_set(err, TETHER_ERESOLVE,
                            rc == EAI_AGAIN ? TETHER_CLASS_TRANSIENT
                                            : TETHER_CLASS_PERMANENT,
                            "could not resolve \"%.60s\": %s", host,
                            rc ? gai_strerror(rc) : "no address");
}
