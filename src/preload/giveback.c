/* giveback.c - the give-back's reset off the program's thread
 * (docs/preload.md, "The reset off the program's path"). PQfinish sends
 * the rollback and the reset query and returns; one collector thread reads
 * their results and only then releases the lease to the pool, so that no
 * checkout ever sees a connection whose reset has not finished. A result
 * that is not what a clean reset returns, a connection lost, or no answer
 * within RESET_WAIT_MS closes the connection instead. A fork waits for
 * the collector to end its round (the releases it makes take locks and
 * allocate: a child must not inherit them held); the child forgets the
 * parent's pending connections without touching them. */
#include "internal.h"
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RESET_WAIT_MS 5000
#define PENDING_MAX 4096 /* more at once: the program's own thread resets */

typedef struct pending {
    PGconn *pg;
    tether_lease *lease;
    const void *owner; /* the pool it goes back to */
    int64_t since_ms;
    int failed; /* a result that a clean reset does not return */
    int ready;  /* its socket was readable (the collector's last poll) */
} pending;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Held by the collector from a poll's end to the last release of its
 * round; a fork takes it before every other lock (pool.c). */
static pthread_mutex_t round_lock = PTHREAD_MUTEX_INITIALIZER;
static pending *list;
static int n, cap;
static int queued;             /* n, for a look without the lock (__atomic_*) */
static int wake[2] = {-1, -1}; /* the collector's pipe */
static int started;
static pthread_cond_t born = PTHREAD_COND_INITIALIZER;
static int running; /* the collector has begun: its thread's start is over */

/* finish ends p: released when its reset came back clean, else closed. */
static void finish(const pending *p, int clean) {
    if (clean && PQtransactionStatus(p->pg) == PQTRANS_IDLE) {
        tether_lease_release(p->lease); /* no round trip: nothing left */
        return;
    }
    tether__preload_log("connection closed, not reused: its reset %s",
                        clean ? "left a transaction open"
                              : "failed or did not answer in time");
    tether_lease_discard(p->lease);
}

/* collect reads what p's reset sent back: 1 when all of it came (ok says
 * whether it was clean), 0 for more, -1 when the connection was lost. */
static int collect(pending *p) {
    if (!PQconsumeInput(p->pg))
        return -1;
    while (!PQisBusy(p->pg)) {
        PGresult *r = PQgetResult(p->pg);
        if (!r)
            return 1;
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
            p->failed = 1;
        PQclear(r);
    }
    return 0;
}

/* take_done moves the pending connections that are done, or late, from
 * the list into out (lock held); returns how many, with their verdicts in
 * clean. The poll saw m sockets, of the connections polled[0..m-1]: found
 * again by their PGconn, since a connect may have reclaimed one meanwhile
 * (tether__preload_giveback_reclaim). Downward, so that the one moved into
 * a freed place (from the end) has been looked at already. */
static int take_done(const struct pollfd *fds, PGconn *const *polled, int m,
                     pending *out, int *clean, int64_t now) {
    for (int i = 0; i < n; i++) {
        list[i].ready = 0;
        for (int j = 0; j < m; j++)
            if (fds[j + 1].revents && list[i].pg == polled[j])
                list[i].ready = 1;
    }
    int k = 0;
    for (int i = n - 1; i >= 0; i--) {
        int rc = list[i].ready ? collect(&list[i]) : 0;
        if (rc == 0 && now - list[i].since_ms > RESET_WAIT_MS)
            rc = -1;
        if (rc == 0)
            continue;
        clean[k] = rc > 0 && !list[i].failed;
        out[k++] = list[i];
        list[i] = list[--n];
    }
    __atomic_store_n(&queued, n, __ATOMIC_RELAXED);
    return k;
}

static void *collector(void *arg) {
    (void)arg;
    struct pollfd *fds = NULL;
    pending *done = NULL;
    PGconn **polled = NULL;
    int *clean = NULL, room = 0;
    pthread_mutex_lock(&lock);
    running = 1;
    pthread_cond_broadcast(&born);
    pthread_mutex_unlock(&lock);
    for (;;) {
        pthread_mutex_lock(&lock);
        if (room < n + 1) {
            room = cap + 1;
            free(fds);
            free(done);
            free(clean);
            free(polled);
            fds = malloc(sizeof(*fds) * room);
            done = malloc(sizeof(*done) * room);
            clean = malloc(sizeof(*clean) * room);
            polled = malloc(sizeof(*polled) * room);
            if (!fds || !done || !clean || !polled)
                abort(); /* a few kilobytes: as libpq, no way on */
        }
        fds[0] = (struct pollfd){wake[0], POLLIN, 0};
        for (int i = 0; i < n; i++) {
            fds[i + 1] = (struct pollfd){PQsocket(list[i].pg), POLLIN, 0};
            polled[i] = list[i].pg;
        }
        int nfds = n + 1;
        pthread_mutex_unlock(&lock);
        if (poll(fds, (nfds_t)nfds, 100) < 0 && errno != EINTR)
            continue;
        if (fds[0].revents) {
            char buf[64];
            while (read(wake[0], buf, sizeof(buf)) > 0)
                ;
        }
        pthread_mutex_lock(&round_lock);
        pthread_mutex_lock(&lock);
        int k = take_done(fds, polled, nfds - 1, done, clean,
                          tether__preload_now_ms());
        pthread_mutex_unlock(&lock);
        for (int i = 0; i < k; i++)
            finish(&done[i], clean[i]);
        pthread_mutex_unlock(&round_lock);
    }
    return NULL;
}

/* start makes the pipe and the thread (lock held), and returns once the
 * thread runs: a thread still starting allocates (its stack's bounds,
 * under a sanitizer), and a program that forks at once must not leave
 * its child an allocator locked by it. 0, or -1. */
static int start(void) {
    if (started)
        return 0;
    if (pipe(wake) != 0)
        return -1;
    for (int i = 0; i < 2; i++)
        fcntl(wake[i], F_SETFL, fcntl(wake[i], F_GETFL) | O_NONBLOCK);
    if (tether__thread_spawn(collector, NULL) != 0) {
        close(wake[0]);
        close(wake[1]);
        wake[0] = wake[1] = -1;
        return -1;
    }
    started = 1;
    while (!running)
        pthread_cond_wait(&born, &lock);
    return 0;
}

/* add puts pg on the list (lock held). 0, or -1 when it cannot. */
static int add(PGconn *pg, tether_lease *lease, const void *owner) {
    if (start() != 0 || n >= PENDING_MAX)
        return -1;
    if (n == cap) {
        int ncap = cap ? 2 * cap : 16;
        pending *l = realloc(list, sizeof(*l) * ncap);
        if (!l)
            return -1;
        list = l;
        cap = ncap;
    }
    list[n++] = (pending){pg, lease, owner, tether__preload_now_ms(), 0, 0};
    __atomic_store_n(&queued, n, __ATOMIC_RELAXED);
    return 0;
}

/* rollback ends pg's open transaction on the program's thread (a
 * program rarely gives a connection back inside one): a reset query such
 * as DISCARD ALL cannot share a message with the ROLLBACK (a multi-command
 * string is a transaction block). 0, or -1 when it failed. */
static int rollback(PGconn *pg) {
    tether__preload_passing++; /* libpq's PQexec calls PQsendQuery */
    PGresult *r = tether__preload_real.exec(pg, "ROLLBACK");
    tether__preload_passing--;
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK &&
             PQtransactionStatus(pg) == PQTRANS_IDLE;
    PQclear(r);
    return ok ? 0 : -1;
}

/* run_now runs the reset query on the program's thread: 1 (release it)
 * when every result is clean, else -1 (close it). */
static int run_now(PGconn *pg, const char *reset) {
    tether__preload_passing++;
    PGresult *r = tether__preload_real.exec(pg, reset);
    tether__preload_passing--;
    ExecStatusType st = PQresultStatus(r);
    PQclear(r);
    return (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) &&
                   PQtransactionStatus(pg) == PQTRANS_IDLE
               ? 1
               : -1;
}

int tether__preload_giveback(PGconn *pg, tether_lease *lease, const void *owner,
                             const char *reset) {
    PGTransactionStatusType ts = PQtransactionStatus(pg);
    if (ts == PQTRANS_ACTIVE || ts == PQTRANS_UNKNOWN)
        return 1; /* a command still running (COPY, async): the pool's
                     reset finds it and closes the connection */
    if (ts != PQTRANS_IDLE && rollback(pg) != 0)
        return -1;
    if (!*reset)
        return 1; /* nothing to send: the caller releases it */
    pthread_mutex_lock(&lock);
    int rc = n < PENDING_MAX && start() == 0 ? 0 : 1;
    if (rc == 0) {
        tether__preload_passing++; /* not the program's statement */
        int sent = PQsendQuery(pg, reset) && PQflush(pg) == 0;
        tether__preload_passing--;
        rc = !sent ? -1 : add(pg, lease, owner) != 0 ? -1 : 0;
    }
    pthread_mutex_unlock(&lock);
    if (rc > 0) /* no room, or no collector: the reset in the program's time */
        return run_now(pg, reset);
    if (rc == 0 && write(wake[1], "", 1) < 0 && errno != EAGAIN)
        tether__preload_log("give-back: the collector's pipe: %s",
                            strerror(errno));
    return rc;
}

int tether__preload_giveback_queued(void) {
    return __atomic_load_n(&queued, __ATOMIC_RELAXED);
}

int tether__preload_giveback_reclaim(const void *owner) {
    pending p;
    int found = 0;
    pthread_mutex_lock(&lock);
    for (int i = n - 1; i >= 0 && !found; i--)
        if (list[i].owner == owner) {
            p = list[i];
            list[i] = list[--n];
            found = 1;
        }
    __atomic_store_n(&queued, n, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    if (!found)
        return 0;
    /* Its answer has most often come already; else wait for it here. */
    int rc;
    while ((rc = collect(&p)) == 0) {
        int64_t left = p.since_ms + RESET_WAIT_MS - tether__preload_now_ms();
        struct pollfd fd = {PQsocket(p.pg), POLLIN, 0};
        if (left <= 0 || (poll(&fd, 1, (int)left) < 0 && errno != EINTR)) {
            rc = -1;
            break;
        }
    }
    finish(&p, rc > 0 && !p.failed);
    return 1;
}

void tether__preload_giveback_lock(void) {
    pthread_mutex_lock(&lock);
}

void tether__preload_giveback_unlock(void) {
    pthread_mutex_unlock(&lock);
}

void tether__preload_giveback_round_lock(void) {
    pthread_mutex_lock(&round_lock);
}

void tether__preload_giveback_round_unlock(void) {
    pthread_mutex_unlock(&round_lock);
}

void tether__preload_giveback_fork_child(void) {
    /* The parent's connections and its thread are not the child's: the
     * list is dropped without a touch, a thread is made on demand. */
    free(list);
    list = NULL;
    n = cap = queued = 0;
    if (started) {
        close(wake[0]);
        close(wake[1]);
    }
    wake[0] = wake[1] = -1;
    started = running = 0;
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&born, NULL);
    pthread_mutex_init(&round_lock, NULL);
}
