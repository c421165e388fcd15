/* pool.c - the checkout and give-back of a PGconn around the pool's own
 * reset (docs/preload.md, "What it does"), and fork (a child abandons its
 * parent's pools without touching them: no connection of the parent's is
 * ever handed out, closed or written to in the child, whose own connects
 * make new ones). A connect never waits on the pool's size: when the
 * program holds every connection of its pool, it goes to libpq directly.
 * A connection older than TETHER_PRELOAD_MAX_AGE is closed at checkout,
 * so that a revoked login or a changed password reaches the program within
 * that bound; what the server can tell at once (the role may still log
 * in, the database's and role's settings as of now) is asked at every
 * checkout (docs/preload.md, "Revoked access and changed settings"). */
#include "internal.h"
#include "preload.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

/* The locks in their one order: the give-back collector's round (its
 * releases take the ones after it), the ticker's (its thread runs the
 * pools' housekeeping, which closes connections: the table's lock), the
 * pools', the table's, the give-back list's, the log's. */
static void fork_prepare(void) {
    tether__preload_giveback_round_lock();
    tether__ticker_fork_prepare();
    tether__preload_pools_lock();
    tether__preload_table_lock();
    tether__preload_giveback_lock();
    tether__log_fork_prepare();
}

static void fork_parent(void) {
    tether__log_fork_parent();
    tether__preload_giveback_unlock();
    tether__preload_table_unlock();
    tether__preload_pools_unlock();
    tether__ticker_fork_parent();
    tether__preload_giveback_round_unlock();
}

static void fork_child(void) {
    tether__log_fork_child();
    tether__ticker_fork_child();
    tether__preload_table_fork_child();
    tether__preload_giveback_fork_child();
    tether__preload_pools_fork_child();
}

/* With TETHER_PRELOAD_LOG set, tether's own log (pools opening and
 * closing connections, failures) goes to stderr too; it never holds a
 * password. */
static void log_sink(void *ctx, tether_log_level level, const char *msg) {
    (void)ctx;
    tether__preload_log("tether %s: %s",
                        level >= TETHER_LOG_WARN ? "warning" : "info", msg);
}

static void setup(void) {
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    if (tether__preload_config_get()->log)
        tether_set_log(log_sink, NULL, TETHER_LOG_INFO);
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

static void learn_processor(PGconn *pg, int fresh) {
    if (fresh && !__atomic_load_n(&default_processor, __ATOMIC_ACQUIRE))
        __atomic_store_n(&default_processor,
                         PQsetNoticeProcessor(pg, NULL, NULL),
                         __ATOMIC_RELEASE);
}

/* The server's view, as the session's own role sees it: may it still log
 * in (and connect to this database), and the settings ALTER DATABASE /
 * ALTER ROLE ... SET give a new session of it here. */
static const char check_sql[] =
    "SELECT r.rolcanlogin AND coalesce(r.rolvaliduntil > now(), true) "
    "AND d.datallowconn AND has_database_privilege(d.oid, 'CONNECT'), "
    "coalesce((SELECT string_agg(s.setdatabase || '/' || s.setrole || '/' "
    "|| array_to_string(s.setconfig, ','), ';' ORDER BY s.setdatabase, "
    "s.setrole) FROM pg_db_role_setting s WHERE s.setdatabase IN (0, d.oid) "
    "AND s.setrole IN (0, r.oid)), '') "
    "FROM pg_roles r, pg_database d "
    "WHERE r.rolname = session_user AND d.datname = current_database()";

/* ask runs the check on pg and records the answer in p. Returns -1 when
 * the query failed (pg is then not to be handed out). */
static int ask(tether__preload_pool *p, PGconn *pg) {
    tether__preload_passing++; /* the preload's own: not the program's */
    PGresult *r = tether__preload_real.exec(pg, check_sql);
    tether__preload_passing--;
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    char *fp = ok ? strdup(PQgetvalue(r, 0, 1)) : NULL;
    pthread_mutex_lock(&p->mu);
    if (fp) {
        free(p->settings);
        p->settings = fp;
        p->may_login = !strcmp(PQgetvalue(r, 0, 0), "t");
        p->checked_ms = tether__preload_now_ms();
    }
    p->checking = 0;
    pthread_mutex_unlock(&p->mu);
    PQclear(r);
    return fp ? 0 : -1;
}

/* server_check returns NULL when pg may be handed out, else why not. The
 * server is asked on a reused connection at most once per
 * TETHER_PRELOAD_RECHECK per pool (one thread at a time); pg is compared
 * with the pool's last answer: may the role log in, and are the settings
 * the same as when pg was first checked (a change made during its first
 * use is seen within TETHER_PRELOAD_MAX_AGE only). */
static const char *server_check(tether__preload_pool *p, PGconn *pg,
                                int fresh) {
    int64_t now = tether__preload_now_ms();
    pthread_mutex_lock(&p->mu);
    if (fresh) /* it has just logged in: the role may, again */
        p->may_login = 1;
    int due = !fresh && !p->checking &&
              now - p->checked_ms >= tether__preload_config_get()->recheck_ms;
    p->checking |= due;
    pthread_mutex_unlock(&p->mu);
    if (due && ask(p, pg) != 0)
        return "the server check failed";
    pthread_mutex_lock(&p->mu);
    const char *why =
        p->checked_ms && !p->may_login
            ? "the role may no longer log in (or connect to the database)"
        : p->settings && tether__preload_table_settings(pg, p->settings) != 0
            ? "ALTER DATABASE or ALTER ROLE ... SET changed its settings"
            : NULL;
    pthread_mutex_unlock(&p->mu);
    return why;
}

/* same: a and b equal, NULL as "". */
static int same(const char *a, const char *b) {
    return !strcmp(a ? a : "", b ? b : "");
}

/* checkout_check returns NULL when pg may be handed out, else why not: it
 * must be the user, database and options asked for (the pool's own
 * connects read the environment for keywords its string leaves out), no
 * older than the bound, and, unless it was made for this connect, pass
 * the server's check. */
static const char *checkout_check(tether__preload_pool *p, PGconn *pg,
                                  const tether__preload_conn *c, int fresh,
                                  int64_t born) {
    if (!same(PQuser(pg), c->user) || !same(PQdb(pg), c->db) ||
        !same(PQoptions(pg), c->options))
        return "not the user, database or options asked for";
    if (tether__preload_now_ms() - born >=
        tether__preload_config_get()->max_age_ms)
        return "older than TETHER_PRELOAD_MAX_AGE";
    return server_check(p, pg, fresh);
}

/* idle_now: p has an idle connection now (a give-back still being reset
 * is not idle yet). */
static int idle_now(tether__preload_pool *p) {
    tether_pool_metrics m;
    tether_pool_metrics_get(p->pool, &m);
    return m.idle > 0;
}

/* lease_fresh acquires from p a connection no older than the bound:
 * older ones are closed (a new one authenticates again). NULL on failure
 * (the caller connects through libpq, which reports the error). */
static PGconn *lease_fresh(tether__preload_pool *p,
                           const tether__preload_conn *c) {
    for (int tries = 0; tries <= p->max + 1; tries++) {
        tether_lease *l = NULL;
        tether_error err = {0};
        if (tries == 0 && tether__preload_giveback_queued() &&
            !idle_now(p)) /* one given back, being reset */
            tether__preload_giveback_reclaim(p);
        if (tether_pool_acquire(p->pool, -1, &l, &err) != 0) {
            tether__preload_log("pool failed (%s), connecting without it: %s",
                                err.message, c->display);
            return NULL;
        }
        PGconn *pg = tether_pq_conn(l);
        int fresh = tether__preload_table_state(pg) == TETHER__PRELOAD_NONE;
        learn_processor(pg, fresh);
        char *asked = strdup(c->asked);
        int64_t born = tether__preload_table_lease(
            pg, l, PQsetNoticeReceiver(pg, NULL, NULL), p, asked);
        const char *why = checkout_check(p, pg, c, fresh, born);
        if (!why)
            return pg;
        tether__preload_slot s;
        tether__preload_table_finish(pg, &s);
        free(s.asked);
        tether__preload_log("pooled connection closed at checkout: %s", why);
        tether_lease_discard(l);
        if (strncmp(why, "older", 5)) { /* the others are no better */
            tether_pool_clear(p->pool);
            return NULL;
        }
    }
    return NULL;
}

PGconn *tether__preload_pool_connect(const tether__preload_conn *c) {
    if (!c->pooled)
        return NULL;
    pthread_once(&setup_once, setup);
    int full;
    tether__preload_pool *p = tether__preload_pools_reserve(c, &full);
    if (!p) {
        if (full)
            tether__preload_log(
                "the program holds all the connections of this pool: a "
                "connection of its own: %s",
                c->display);
        return NULL;
    }
    PGconn *pg = lease_fresh(p, c);
    if (!pg) {
        tether__preload_pools_unreserve(p);
        return NULL;
    }
    checkout(pg);
    tether__preload_log("pooled connection (backend %d): %s", PQbackendPID(pg),
                        c->display);
    return pg;
}

/* restore undoes what a program may have changed on its PGconn through
 * libpq calls that do not reach the server. Returns NULL, or why the
 * connection cannot be made as it was. */
static const char *restore(PGconn *pg, const tether__preload_slot *s) {
    if (PQsetNoticeReceiver(pg, NULL, NULL) != s->rx)
        return "its notice receiver was replaced";
    if (PQpipelineStatus(pg) != PQ_PIPELINE_OFF)
        return "it is in pipeline mode";
    PQnoticeProcessor dp =
        __atomic_load_n(&default_processor, __ATOMIC_ACQUIRE);
    if (dp)
        PQsetNoticeProcessor(pg, dp, NULL);
    PQsetErrorVerbosity(pg, PQERRORS_DEFAULT);
    PQsetErrorContextVisibility(pg, PQSHOW_CONTEXT_ERRORS);
    PQuntrace(pg);
    if (PQisnonblocking(pg) && PQsetnonblocking(pg, 0) != 0)
        return "its non-blocking mode could not be undone";
    return NULL;
}

/* deallocate_all drops every prepared statement from pg when the program
 * prepared or dropped some the preload could not follow (prep.c): the
 * transaction rolled back first. Returns 0, or -1 when pg must be closed. */
static int deallocate_all(PGconn *pg) {
    tether__preload_passing++; /* libpq's PQexec calls PQsendQuery */
    int ok = 1;
    if (PQtransactionStatus(pg) != PQTRANS_IDLE) {
        PGresult *r = tether__preload_real.exec(pg, "ROLLBACK");
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
    }
    if (ok) {
        PGresult *r = tether__preload_real.exec(pg, "DEALLOCATE ALL");
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
    }
    tether__preload_passing--;
    return ok ? 0 : -1;
}

/* unchanged: the program ran on pg only statements that change nothing
 * (scan.c) and left no transaction open, so its session is as the last
 * reset left it (docs/preload.md, "A give-back without a reset"). */
static int unchanged(PGconn *pg, const tether__preload_slot *s) {
    return !s->dirty && !tether__preload_config_get()->reset_always &&
           PQtransactionStatus(pg) == PQTRANS_IDLE;
}

/* reset_query: the configured reset; with prepared statements kept but
 * none on this connection, DISCARD ALL (one command where the reset that
 * keeps them is eight). */
static const char *reset_query(const tether__preload_slot *s) {
    return s->pool->keep_prepared && !s->prep
               ? "DISCARD ALL"
               : tether__preload_config_get()->reset;
}

int tether__preload_pool_finish(PGconn *pg) {
    tether__preload_slot s;
    switch (tether__preload_table_finish(pg, &s)) {
    case TETHER__PRELOAD_LEASED:
        break;
    case TETHER__PRELOAD_IDLE: /* PQfinish twice: it is back in the pool already
                                */
        tether__preload_log(
            "PQfinish of a connection already given back: ignored");
        return 1;
    default: /* not the pool's, or inherited from a parent process */
        return 0;
    }
    free(s.asked);
    const char *why = s.tainted ? s.tainted : restore(pg, &s);
    if (!why && s.too_many_idle)
        why = "TETHER_PRELOAD_IDLE_MAX idle connections are kept already";
    if (!why && s.prep_unknown && s.pool->keep_prepared &&
        deallocate_all(pg) != 0)
        why = "its prepared statements could not be deallocated";
    if (why) {
        tether__preload_log("connection closed, not reused: %s", why);
        tether_lease_discard(s.lease);
    } else if (s.pool->own_reset && unchanged(pg, &s)) {
        tether_lease_release(s.lease); /* no reset: nothing to undo */
    } else {
        int rc =
            s.pool->own_reset
                ? tether__preload_giveback(pg, s.lease, s.pool, reset_query(&s))
                : 1;
        if (rc > 0)
            tether_lease_release(s.lease); /* rollback, reset query, close */
        else if (rc < 0)
            tether_lease_discard(s.lease); /* the reset could not be sent */
    }
    tether__preload_pools_unreserve(s.pool);
    return 1;
}
