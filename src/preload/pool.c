/* pool.c - the registry behind the preload (one pool per normalized
 * connection string and credentials: different users never share), made
 * on first use; fork (a child abandons its parent's registry without
 * touching it: no connection of the parent's is ever handed out, closed
 * or written to in the child, whose own connects make a new one); and the
 * checkout and give-back of a PGconn around the pool's own reset. */
#include "internal.h"
#include "preload.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static tether_registry *reg;
static int reg_failed;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) {
    pthread_mutex_lock(&reg_lock);
    tp_table_lock();
    tether__ticker_fork_prepare();
    tether__log_fork_prepare();
}

static void fork_parent(void) {
    tether__log_fork_parent();
    tether__ticker_fork_parent();
    tp_table_unlock();
    pthread_mutex_unlock(&reg_lock);
}

static void fork_child(void) {
    tether__log_fork_child();
    tether__ticker_fork_child();
    tp_table_fork_child();
    reg = NULL; /* the parent's: abandoned, never used or closed here */
    reg_failed = 0;
    pthread_mutex_init(&reg_lock, NULL);
}

static void install_fork_hooks(void) {
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* With TETHER_PRELOAD_LOG set, tether's own log (pools opening and
 * closing connections, failures) goes to stderr too; it never holds a
 * password. */
static void log_sink(void *ctx, tether_log_level level, const char *msg) {
    (void)ctx;
    tp_log("tether %s: %s", level >= TETHER_LOG_WARN ? "warning" : "info", msg);
}

/* registry returns the process's registry, made on first use (NULL when it
 * cannot be made: connects then pass through). Never closed: at exit the
 * kernel closes the idle connections, as it would a program's own. */
static tether_registry *registry(void) {
    pthread_once(&fork_once, install_fork_hooks);
    pthread_mutex_lock(&reg_lock);
    if (!reg && !reg_failed) {
        if (tp_config_get()->log)
            tether_set_log(log_sink, NULL, TETHER_LOG_INFO);
        tether_registry_opts o;
        tether_registry_opts_init(&o);
        tether_error err = {0};
        if (tether_registry_create(&reg, &o, &err) != 0) {
            tp_log("no registry: %s", err.message);
            reg_failed = 1;
        }
    }
    tether_registry *r = reg;
    pthread_mutex_unlock(&reg_lock);
    return r;
}

/* checkout readies a pooled PGconn for the program: notifications that
 * came for an earlier user are dropped. */
static void checkout(PGconn *pg) {
    PGnotify *n;
    while ((n = PQnotifies(pg)) != NULL)
        PQfreemem(n);
}

/* The notice processor libpq gives every new PGconn (its argument is
 * NULL), learnt from the first pooled PGconn, before any program saw it. */
static PQnoticeProcessor default_processor;

PGconn *tp_pool_connect(const tp_conn *c) {
    tether_registry *r = c->pooled ? registry() : NULL;
    if (!r)
        return NULL;
    tether_lease *l = NULL;
    tether_error err = {0};
    int rc = tether_registry_acquire(r, c->pooled, -1, &l, &err);
    if (rc != 0) {
        tp_log("pool failed (%s), connecting without it: %s", err.message,
               c->display);
        return NULL;
    }
    PGconn *pg = tether_pq_conn(l);
    if (tp_table_state(pg) == TP_NONE &&
        !__atomic_load_n(&default_processor, __ATOMIC_ACQUIRE))
        __atomic_store_n(&default_processor,
                         PQsetNoticeProcessor(pg, NULL, NULL),
                         __ATOMIC_RELEASE);
    checkout(pg);
    tp_table_lease(pg, l, PQsetNoticeReceiver(pg, NULL, NULL));
    tp_log("pooled connection (backend %d): %s", PQbackendPID(pg), c->display);
    return pg;
}

/* restore undoes what a program may have changed on its PGconn through
 * libpq calls that do not reach the server. Returns 0, or -1 when the
 * connection cannot be made as it was (its notice receiver was replaced:
 * the driver's own is needed). */
static int restore(PGconn *pg, const tp_slot *s) {
    if (PQsetNoticeReceiver(pg, NULL, NULL) != s->rx)
        return -1;
    PQnoticeProcessor dp =
        __atomic_load_n(&default_processor, __ATOMIC_ACQUIRE);
    if (dp)
        PQsetNoticeProcessor(pg, dp, NULL);
    PQsetErrorVerbosity(pg, PQERRORS_DEFAULT);
    PQsetErrorContextVisibility(pg, PQSHOW_CONTEXT_ERRORS);
    PQuntrace(pg);
    if (PQisnonblocking(pg) && PQsetnonblocking(pg, 0) != 0)
        return -1;
    return 0;
}

int tp_pool_finish(PGconn *pg) {
    tp_slot s;
    switch (tp_table_finish(pg, &s)) {
    case TP_LEASED:
        break;
    case TP_IDLE: /* PQfinish twice: it is back in the pool already */
        tp_log("PQfinish of a connection already given back: ignored");
        return 1;
    default: /* not the pool's, or inherited from a parent process */
        return 0;
    }
    if (s.tainted || restore(pg, &s) != 0) {
        tp_log("connection closed, not reused (reset or changed by the "
               "program)");
        tether_lease_discard(s.lease);
    } else {
        tether_lease_release(s.lease); /* rollback, reset query, or close */
    }
    return 1;
}
