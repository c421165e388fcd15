/* resolve.c - host name resolution that cannot blow the connect deadline:
 * the lookup (getaddrinfo) runs on a thread of its own and the caller
 * waits for it at most the attempt's budget. A lookup still running at the
 * deadline is left to finish: the caller and the lookup's thread each hold
 * a reference, and whichever lets go last frees it. Numeric addresses and
 * Unix-socket paths need no lookup.
 *
 * Not glibc's getaddrinfo_a: a gai_suspend that times out just as the
 * lookup finishes returns without unhooking its waiter, which lives on the
 * caller's stack and which glibc then writes through (concurrent lookups
 * with short budgets crashed on it), a lookup canceled with gai_cancel is
 * never freed by glibc, and ThreadSanitizer cannot follow the threads glibc
 * starts for it (the first allocation on one crashes). */
#include "connector.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
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

#define MAX_LOOKUPS TETHER__MAX_LOOKUPS

tether__gai_fn *tether__getaddrinfo = getaddrinfo;

/* A lookup in flight. Two references: the caller's, dropped when
 * tether__resolve returns, and the lookup thread's, dropped when
 * getaddrinfo has answered. Whoever drops the last one frees the lookup
 * and its result, so a lookup that outlives its caller's deadline is freed
 * when it finishes, and neither side touches it after it is freed. */
typedef struct lookup {
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* CLOCK_MONOTONIC */
    int done, rc;         /* under mu: answered, with getaddrinfo's code */
    struct addrinfo *res; /* set with done, then left alone */
    tether__gai_fn *gai;
    atomic_int refs;
    char name[256];
} lookup;

/* Lookups allocated and not yet freed (also for the tests). */
static atomic_int pending;

int tether__resolve_pending(void) {
    return atomic_load(&pending);
}

static void unref(lookup *l) {
    if (atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1) {
        if (l->res)
            freeaddrinfo(l->res);
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        tether__free(l);
        atomic_fetch_sub_explicit(&pending, 1, memory_order_release);
    }
}

static void *run_lookup(void *arg) {
    lookup *l = arg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_ADDRCONFIG};
    struct addrinfo *res = NULL;
    int rc = l->gai(l->name, NULL, &hints, &res);
    pthread_mutex_lock(&l->mu);
    l->rc = rc;
    l->res = rc == 0 ? res : NULL;
    l->done = 1;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    unref(l);
    return NULL;
}

/* Starts l's thread, detached, with every signal blocked (signals are for
 * the application's threads). */
static int start_lookup(lookup *l) {
    return tether__thread_spawn(run_lookup, l);
}

static lookup *new_lookup(const char *host) {
    lookup *l = tether__calloc(1, sizeof(*l));
    pthread_condattr_t ca;
    if (!l || pthread_condattr_init(&ca) != 0) {
        tether__free(l);
        return NULL;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int bad = pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!bad && pthread_mutex_init(&l->mu, NULL) != 0) {
        pthread_cond_destroy(&l->cv);
        bad = 1;
    }
    if (bad) {
        tether__free(l);
        return NULL;
    }
    snprintf(l->name, sizeof(l->name), "%s", host);
    l->gai = tether__getaddrinfo;
    atomic_init(&l->refs, 2);
    return l;
}

/* Waits for l's answer until budget_ms has passed (-1: no limit); signals
 * do not cut the wait short. Returns 1 once answered (rc set), else 0. */
static int wait_lookup(lookup *l, int64_t budget_ms, int *rc) {
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += budget_ms / 1000;
    end.tv_nsec += (budget_ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mu);
    while (!l->done) {
        if (budget_ms < 0)
            pthread_cond_wait(&l->cv, &l->mu);
        else if (pthread_cond_timedwait(&l->cv, &l->mu, &end) == ETIMEDOUT)
            break;
    }
    int done = l->done;
    *rc = l->rc;
    pthread_mutex_unlock(&l->mu);
    return done;
}

int tether__resolve(const char *host, int64_t budget_ms, char addrs[][64],
                    tether_error *err) {
    if (!host || host[0] == '/' || numeric(host)) {
        snprintf(addrs[0], 64, "%s", host ? host : "");
        return 1;
    }
    if (atomic_fetch_add_explicit(&pending, 1, memory_order_relaxed) >=
        MAX_LOOKUPS) {
        atomic_fetch_sub_explicit(&pending, 1, memory_order_relaxed);
        return tether_error_set(err, TETHER_ERESOLVE, TETHER_CLASS_TRANSIENT,
                                "cannot resolve \"%.60s\": %d lookups are "
                                "still waiting for the resolver",
                                host, MAX_LOOKUPS);
    }
    lookup *l = new_lookup(host);
    if (!l) {
        atomic_fetch_sub_explicit(&pending, 1, memory_order_relaxed);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    }
    if (start_lookup(l) != 0) {
        unref(l); /* the thread's reference */
        unref(l);
        return tether_error_set(err, TETHER_ERESOLVE, TETHER_CLASS_TRANSIENT,
                                "cannot start resolving \"%.60s\"", host);
    }
    int rc;
    if (!wait_lookup(l, budget_ms, &rc)) {
        unref(l); /* the lookup thread frees it if it is still running */
        return tether_error_set(err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
                                "resolving \"%.60s\" took longer than %lld "
                                "ms",
                                host, (long long)budget_ms);
    }
    int n = rc == 0 ? copy_addrs(l->res, addrs) : 0;
    unref(l);
    if (n > 0)
        return n;
    return tether_error_set(err, TETHER_ERESOLVE,
                            rc == EAI_AGAIN ? TETHER_CLASS_TRANSIENT
                                            : TETHER_CLASS_PERMANENT,
                            "could not resolve \"%.60s\": %s", host,
                            rc ? gai_strerror(rc) : "no address");
}
