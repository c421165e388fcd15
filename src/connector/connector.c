/* connector.c - one logical connection over many endpoints (docs/conninfo.md,
 * docs/schedules.md): the strategy's schedule (tether_schedule) decides which
 * endpoint to try, with what budget, and how long to pause; each attempt
 * resolves the name within its budget, connects through the driver with a
 * millisecond-exact budget, and checks the server's role against the target. A
 * host-state cache skips endpoints known to be down or of the wrong role until
 * a recheck interval passes. Every step is reported to the event callback. */
#include "connector.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* connector_defaults fills a whole tether_connector_opts with the defaults. */
static void connector_defaults(tether_connector_opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
}

void tether_connector_opts_init_sized(tether_connector_opts *o, size_t size) {
    tether_connector_opts d;
    connector_defaults(&d);
    tether__sized_out(o, size, &d, sizeof(d));
}

/* ---- create / destroy ---------------------------------------------------- */

/* The driver and its parameters: the given driver_ctx, or parameters the
 * driver builds from the connection string's driver keywords. */
static int make_driver_ctx(tether_connector *c, tether_error *err) {
#ifdef TETHER_HAVE_PQ
    c->drv = c->o.driver ? c->o.driver : tether_driver_pq();
#else
    c->drv = c->o.driver;
    if (!c->drv)
        return tether_error_set(
            err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
            "no driver given, and this tether was built without PostgreSQL "
            "(cmake -DTETHER_PQ=OFF): set the options' driver "
            "(tether_driver_tcp() or your own)");
#endif
    if (c->o.driver_ctx || !c->drv->params_create) {
        c->dctx = c->o.driver_ctx;
        return 0;
    }
    c->dctx_free = c->drv->params_destroy;
    return c->drv->params_create((const char *const *)c->cfg.keys,
                                 (const char *const *)c->cfg.vals,
                                 c->cfg.nparams, &c->dctx, err);
}

const tether_driver *tether__connector_driver(const tether_connector *c) {
    return c->drv;
}

/* create makes the connector of o (checked) from ci, or from o->conninfo
 * when ci is NULL. */
static int create(tether_connector **out, const tether_connector_opts *o,
                  const tether__conninfo *ci, tether_error *err) {
    tether_connector *c = tether__calloc(1, sizeof(*c));
    if (!c)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    c->o = *o;
    c->o.conninfo = NULL; /* may hold a password: not kept */
    /* libpq's PG* variables are PostgreSQL's: not for the TCP driver */
    int use_env = o->driver != tether_driver_tcp();
    int rc = ci ? tether__conncfg_from(ci, use_env, &c->cfg, err)
                : tether__conncfg_parse_env(o->conninfo, use_env, &c->cfg, err);
    if (rc == 0)
        rc = make_driver_ctx(c, err);
    if (rc == 0 &&
        !(c->cache = tether__calloc((size_t)c->cfg.neps, sizeof(*c->cache))))
        rc = tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT, NULL);
    if (rc) {
        tether_connector_destroy(c);
        return rc;
    }
    pthread_mutex_init(&c->lock, NULL);
    tether__rng_seed(&c->rng, o->seed);
    rc = tether__connector_discover(c, err); /* tether_patroni */
    if (rc) {
        tether_connector_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* check_opts copies o into *full (defaults for what an older caller's
 * smaller struct lacks); conninfo is required unless ci is given. */
static int check_opts(const tether_connector_opts *o,
                      tether_connector_opts *full, int have_ci,
                      tether_error *err) {
    connector_defaults(full);
    int rc = TETHER__SIZED_IN(*full, o, "tether_connector_opts", err);
    if (rc == 0 && !have_ci && !full->conninfo)
        rc = tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                              "connector: conninfo is required");
    return rc;
}

int tether_connector_create(tether_connector **out,
                            const tether_connector_opts *o, tether_error *err) {
    if (!out)
        return tether__null(err, "tether_connector_create", "out");
    *out = NULL;
    if (!o)
        return tether__null(err, "tether_connector_create", "o");
    tether_connector_opts full;
    int rc = check_opts(o, &full, 0, err);
    return rc ? rc : create(out, &full, NULL, err);
}

int tether__connector_create_ci(tether_connector **out,
                                const tether_connector_opts *o,
                                const tether__conninfo *ci, tether_error *err) {
    *out = NULL;
    tether_connector_opts full;
    int rc = check_opts(o, &full, 1, err);
    return rc ? rc : create(out, &full, ci, err);
}

void tether_connector_destroy(tether_connector *c) {
    if (!c)
        return;
    tether__connector_undiscover(c);
    if (c->dctx_free)
        c->dctx_free(c->dctx);
    if (c->cache)
        pthread_mutex_destroy(&c->lock);
    tether__free(c->cache);
    tether__conncfg_free(&c->cfg);
    tether__free(c);
}

void tether_connector_invalidate(tether_connector *c) {
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    memset(c->cache, 0, sizeof(*c->cache) * (size_t)c->cfg.neps);
    pthread_mutex_unlock(&c->lock);
    tether__connector_kick(c); /* a failover: ask Patroni (discover.c) */
}

/* ---- roles, cache, events ------------------------------------------------ */

const char *tether_role_name(tether_role role) {
    return role == TETHER_ROLE_PRIMARY   ? "primary"
           : role == TETHER_ROLE_STANDBY ? "standby"
                                         : "unknown";
}

const char *tether_phase_name(tether_phase phase) {
    static const char *const names[] = {"fail", "ok",    "role",
                                        "skip", "pause", "provision"};
    if ((unsigned)phase < sizeof(names) / sizeof(names[0]))
        return names[phase];
    return "unknown";
}

int tether__role_fits(tether_target t, tether_role role) {
    int primary = role == TETHER_ROLE_PRIMARY;
    int standby = role == TETHER_ROLE_STANDBY;
    switch (t) {
    case TETHER_TARGET_READ_WRITE:
    case TETHER_TARGET_PRIMARY:
        return primary;
    case TETHER_TARGET_READ_ONLY:
    case TETHER_TARGET_STANDBY:
        return standby;
    case TETHER_TARGET_PREFER_STANDBY:
        return standby ? 1 : 2;
    case TETHER_TARGET_PREFER_PRIMARY:
        return primary ? 1 : 2;
    default:
        return 1;
    }
}

void tether__connector_learn(tether_connector *c, int i, int state,
                             int64_t now_ms) {
    int kick = 0;
    pthread_mutex_lock(&c->lock);
    if (i < c->cfg.neps) {
        c->cache[i].state = state;
        c->cache[i].until_ms = now_ms + c->cfg.recheck_ms;
        /* Patroni's list said otherwise, or a host is down: ask again. */
        int said = c->disc && c->disc_list ? c->disc_role[i] : 0;
        kick = state == HS_DOWN ||
               (said == TETHER_ROLE_PRIMARY && state == HS_STANDBY) ||
               (said == TETHER_ROLE_STANDBY && state == HS_PRIMARY);
    }
    pthread_mutex_unlock(&c->lock);
    if (kick)
        tether__connector_kick(c);
}

/* Whether endpoint i may be skipped now (known down, or of a role the
 * target excludes), per the cache. */
static int skippable(tether_connector *c, int i, int64_t now) {
    tether__hoststate h = c->cache[i];
    if (h.state == HS_UNKNOWN || now >= h.until_ms)
        return 0;
    if (h.state == HS_DOWN)
        return 1;
    tether_role role =
        h.state == HS_PRIMARY ? TETHER_ROLE_PRIMARY : TETHER_ROLE_STANDBY;
    return tether__role_fits(c->cfg.target, role) == 0;
}

void tether__connector_event(tether_connector *c, int attempt,
                             const tether__ep *ep, tether_phase phase,
                             const tether_error *err, tether_role role,
                             int64_t elapsed_ms, int64_t budget_ms) {
    if (!c->o.on_event)
        return;
    int pause = phase == TETHER_PHASE_PAUSE; /* budget_ms carries the delay */
    tether_connect_event ev = {attempt,
                               ep && ep->host ? ep->host : "(default)",
                               ep ? ep->port : 0,
                               phase,
                               err ? err->code : 0,
                               err ? err->cls : TETHER_CLASS_NONE,
                               role,
                               elapsed_ms,
                               pause ? -1 : budget_ms,
                               pause ? budget_ms : 0,
                               err ? err->message : ""};
    c->o.on_event(c->o.event_ctx, &ev);
}

/* ---- one attempt ----------------------------------------------------------
 */

typedef struct run {
    tether_connector *c;
    const tether_clock *clock;
    int64_t start_ms, deadline_ms; /* deadline -1: none */
    int order[TETHER__MAX_HOSTS];  /* endpoint visiting order */
    int n;
    int attempts;
    void *fallback;      /* prefer-*: a connection of the other role */
    int permanent;       /* a permanent failure was seen this pass */
    int reached;         /* a server of the wrong role answered this pass */
    int busy;            /* a server refused as busy (throttled) this pass */
    int full;            /* ... as full (53300), not in transition (57P03) */
    int by_caller;       /* the deadline is the caller's budget, not the login
                            timeout: an attempt it cuts is the caller's loss */
    int learnt;          /* attempts that told something of a server: a failure
                            of its own, or an answer of the wrong role */
    int skipped;         /* the cache skipped a host this pass */
    tether__watch watch; /* standbys asked their role in pauses (watch.c) */
    int rushed;          /* a pass already followed one at once (skip_rush) */
    int64_t busy_w;      /* the busy pause's window (ms), doubling */
    tether_error last;
    tether__tally tally; /* every endpoint passed over, and why */
} run;

static int64_t now_ms(const run *r) {
    return tether__now_ms(r->clock);
}

/* Try each resolved address of ep within budget. */
static int connect_ep(run *r, const tether__ep *ep, int64_t budget, void **conn,
                      tether_error *err) {
    char addrs[TETHER__MAX_ADDRS][64];
    int64_t t0 = now_ms(r);
    int n = 1;
    if (!r->c->drv->resolve_names) {
        snprintf(addrs[0], 64, "%s", "");
    } else if (!ep->hostaddr) {
        n = tether__resolve(ep->host, budget, addrs, err);
        if (n < 0)
            return n;
    } else {
        snprintf(addrs[0], 64, "%s", ep->hostaddr);
    }
    int rc = TETHER_ECONNECT;
    for (int i = 0; i < n; i++) {
        int64_t left = budget < 0 ? -1 : budget - (now_ms(r) - t0);
        if (budget >= 0 && left <= 0)
            return tether_error_set(
                err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
                "connect to %s:%d timed out after %lld "
                "ms",
                ep->host ? ep->host : "(default)", ep->port, (long long)budget);
        int numeric = ep->host && ep->host[0] != '/' && addrs[i][0];
        tether_endpoint e = {ep->host, numeric ? addrs[i] : NULL, ep->port,
                             left};
        rc = tether__driver_connect(r->c->drv, r->c->dctx, &e, left, r->clock,
                                    conn, err);
        if (rc == 0 || (err && err->cls == TETHER_CLASS_PERMANENT))
            break;
    }
    return rc;
}

int tether__connector_judge(tether_connector *c, int idx, void *conn,
                            int64_t now_ms, int64_t deadline_ms,
                            tether_role *role) {
    const tether_driver *d = c->drv;
    tether_target t = c->cfg.target;
    *role = d->role ? (tether_role)d->role(conn) : TETHER_ROLE_UNKNOWN;
    if (*role == TETHER_ROLE_UNKNOWN && t != TETHER_TARGET_ANY &&
        d->query_role) { /* the server did not say: ask it */
        int64_t left = deadline_ms < 0 ? 5000 : deadline_ms - now_ms;
        int q = d->query_role(conn, TETHER__MAX(left, 1), NULL);
        *role = q > 0 ? (tether_role)q : TETHER_ROLE_UNKNOWN;
    }
    if (*role != TETHER_ROLE_UNKNOWN)
        tether__connector_learn(
            c, idx, *role == TETHER_ROLE_PRIMARY ? HS_PRIMARY : HS_STANDBY,
            now_ms);
    if (*role != TETHER_ROLE_UNKNOWN || t == TETHER_TARGET_ANY)
        return tether__role_fits(t, *role);
    /* An unknown role satisfies only a prefer-* target, as its fallback. */
    return t == TETHER_TARGET_PREFER_STANDBY ||
                   t == TETHER_TARGET_PREFER_PRIMARY
               ? 2
               : 0;
}

/* Judge a fresh connection: 1 take it, 0 closed or watched (wrong role),
 * 2 kept as the prefer-* fallback. */
static int judge_role(run *r, int idx, void *conn, tether_role *role) {
    int fit = tether__connector_judge(r->c, idx, conn, now_ms(r),
                                      r->deadline_ms, role);
    if (fit == 2 && !r->fallback) {
        r->fallback = conn;
        return 2;
    }
    if (fit == 0 && tether__watch_keep(&r->watch, r->c, idx, conn, *role))
        return 0; /* asked its role in the pauses (watch.c) */
    if (fit != 1)
        r->c->drv->close(conn);
    return fit == 1;
}

/* An attempt the login deadline cut short (cut) says little: it neither
 * replaces an earlier failure as the run's error nor marks the host down. */
static void note_failure(run *r, int idx, const tether_error *e, int cut) {
    if (!cut || r->last.code == 0)
        r->last = *e;
    if (e->cls == TETHER_CLASS_PERMANENT)
        r->permanent = 1;
    else if (e->cls == TETHER_CLASS_TRANSIENT && !cut)
        tether__connector_learn(r->c, idx, HS_DOWN, now_ms(r));
}

/* Whether the cache says to skip endpoint idx now (never every one): 0,
 * or the HS_* state it is skipped for. */
static int skip_now(run *r, int idx) {
    tether_connector *c = r->c;
    pthread_mutex_lock(&c->lock);
    int64_t now = now_ms(r);
    int skip = skippable(c, idx, now), others = 0;
    for (int j = 0; skip && j < c->cfg.neps && !others; j++)
        others = !skippable(c, j, now);
    int state = skip && others ? c->cache[idx].state : 0;
    pthread_mutex_unlock(&c->lock);
    return state;
}

/* A server of the wrong role answered (a fresh connection, or a watched
 * one asked again): the pass reached it; its error goes into e, the tally
 * and, as the first, the run's last error. */
static void wrong_role(run *r, const tether__ep *ep, tether_role role,
                       tether_error *e) {
    r->reached = 1;
    r->learnt++;
    tether_error_set(e, TETHER_ENOHOST, TETHER_CLASS_TRANSIENT,
                     "%s:%d is a %s, not %s", ep->host ? ep->host : "(default)",
                     ep->port,
                     role == TETHER_ROLE_UNKNOWN ? "server of unknown role"
                                                 : tether_role_name(role),
                     tether_target_name(r->c->cfg.target));
    tether__tally_role(&r->tally, ep, role, r->c->cfg.target);
    if (r->last.code == 0)
        r->last = *e;
}

/* The server (tether__ep.server) of the connection the last connect on
 * this thread returned, -1 none (tether__connector_fresh_last). */
static _Thread_local int last_server = -1;

/* A watched standby answered as a primary (watch.c): its connection is
 * taken as a fresh one of the right role. Returns 1. */
static int take_watched(run *r, int k, void **conn) {
    tether_connector *c = r->c;
    int idx = r->watch.idx[k];
    *conn = tether__watch_take(&r->watch, c, k);
    tether__connector_learn(c, idx, HS_PRIMARY, now_ms(r));
    pthread_mutex_lock(&c->lock);
    const tether__ep *ep = idx < c->cfg.neps ? &c->cfg.eps[idx] : NULL;
    last_server = ep ? ep->server : -1;
    pthread_mutex_unlock(&c->lock);
    tether__connector_event(c, r->attempts, ep, TETHER_PHASE_OK, NULL,
                            TETHER_ROLE_PRIMARY, now_ms(r) - r->start_ms, 0);
    return 1;
}

/* An attempt on an endpoint already watched asks the kept connection its
 * role instead of connecting again: 1 promoted (taken, *conn), 0 still of
 * the wrong role (this pass reached it), -1 the connection failed (closed:
 * a connect follows). */
static int ask_watched(run *r, int k, const tether__ep *ep, int64_t budget,
                       void **conn) {
    int q = tether__watch_ask(&r->watch, r->c, k, budget);
    if (q == TETHER_ROLE_PRIMARY)
        return take_watched(r, k, conn);
    if (q < 0)
        return -1;
    /* Known as a fresh connection's answer is: a host down when last tried
     * is then skipped only while another may serve (skip_now). Unlearnt,
     * after a pool's fatal event emptied the cache, the watched standby
     * kept the restarted primary skipped for tether_recheck. */
    if (q == TETHER_ROLE_STANDBY)
        tether__connector_learn(r->c, r->watch.idx[k], HS_STANDBY, now_ms(r));
    tether_error e = {0};
    wrong_role(r, ep, (tether_role)q, &e);
    return 0;
}

/* One ATTEMPT step. Returns 1 with *conn when done, else 0. */
static int attempt(run *r, const tether_step *st, void **conn) {
    tether_connector *c = r->c;
    int idx = r->order[st->host % r->n];
    pthread_mutex_lock(&c->lock);
    /* Another connect may have put discovery's new, shorter list in place
     * since this pass began (discover.c): a step past its end is passed
     * over, never read as an empty endpoint (the driver's default host). */
    int gone = idx >= c->cfg.neps;
    const tether__ep *ep = &c->cfg.eps[idx];
    pthread_mutex_unlock(&c->lock);
    if (gone)
        return 0;
    int64_t budget = st->budget_ms, cap = c->cfg.attempt_timeout_ms;
    if (cap > 0 && (budget < 0 || cap < budget))
        budget = cap;
    int k = tether__watch_find(&r->watch, idx);
    int w =
        k < 0 ? -1 : ask_watched(r, k, ep, budget < 0 ? 5000 : budget, conn);
    if (w >= 0)
        return w;
    int skip = skip_now(r, idx);
    if (skip) {
        r->skipped = 1;
        tether__tally_skip(&r->tally, ep, skip);
        tether__connector_event(c, st->attempt, ep, TETHER_PHASE_SKIP, NULL, 0,
                                now_ms(r) - r->start_ms, 0);
        return 0;
    }
    tether_error e = {0};
    r->attempts++;
    int rc = connect_ep(r, ep, budget, conn, &e);
    int64_t el = now_ms(r) - r->start_ms;
    if (rc) {
        tether__connector_event(c, st->attempt, ep, TETHER_PHASE_FAIL, &e, 0,
                                el, budget);
        int cut = e.code == TETHER_ETIMEDOUT && r->deadline_ms >= 0 &&
                  now_ms(r) >= r->deadline_ms;
        r->learnt += !cut;
        tether__tally_fail(
            &r->tally, ep, &e, budget,
            cut ? (r->by_caller ? TETHER__CUT_CALLER : TETHER__CUT_LOGIN) : 0);
        note_failure(r, idx, &e, cut);
        r->busy |= e.cls == TETHER_CLASS_THROTTLED;
        r->full |=
            e.cls == TETHER_CLASS_THROTTLED && strcmp(e.sqlstate, "57P03") != 0;
        return 0;
    }
    tether_role role;
    int v = judge_role(r, idx, *conn, &role);
    if (v != 1)
        wrong_role(r, ep, role, &e);
    else
        last_server = ep->server;
    tether__connector_event(c, st->attempt, ep,
                            v == 1 ? TETHER_PHASE_OK : TETHER_PHASE_ROLE,
                            v == 1 ? NULL : &e, role, el, budget);
    return v == 1;
}

/* ---- the loop ------------------------------------------------------------ */

/* favour_first moves the first server in perm with quota left from a
 * change of the list to the front, and uses one of its quota
 * (tether__connector_favour; c->lock held). */
static void favour_first(tether_connector *c, int *perm, const int *srv,
                         int ns) {
    for (int i = 0; i < ns; i++) {
        int s = c->cfg.eps[srv[perm[i]]].server;
        if (c->disc_quota[s] == 0)
            continue;
        c->disc_quota[s]--;
        int t = perm[i];
        memmove(&perm[1], &perm[0], (size_t)i * sizeof(perm[0]));
        perm[0] = t;
        return;
    }
}

/* The visiting order: the endpoints as listed (each server's ports
 * together, in order), the servers shuffled (random) or rotated
 * (round-robin) as wholes; a server a change of the list added first
 * while its quota lasts. */
static void make_order(run *r) {
    tether_connector *c = r->c;
    int srv[TETHER__MAX_HOSTS], ns = 0;
    pthread_mutex_lock(&c->lock);
    r->n = c->cfg.neps; /* at most TETHER__MAX_HOSTS: config refuses more */
    for (int i = 0; i < r->n; i++)
        if (i == 0 || c->cfg.eps[i].server != c->cfg.eps[i - 1].server)
            srv[ns++] = i; /* where each server's endpoints start */
    int perm[TETHER__MAX_HOSTS];
    for (int i = 0; i < ns; i++)
        perm[i] = i;
    if (c->cfg.strategy == TETHER_STRATEGY_RANDOM) {
        for (int i = ns - 1; i > 0; i--) {
            int j = (int)tether__rng_range(&c->rng, 0, i);
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    } else if (c->cfg.strategy == TETHER_STRATEGY_ROUND_ROBIN && ns > 0) {
        unsigned s = c->rr++ % (unsigned)ns;
        for (int i = 0; i < ns; i++)
            perm[i] = (int)((s + (unsigned)i) % (unsigned)ns);
    }
    if (c->disc)
        favour_first(c, perm, srv, ns);
    int k = 0;
    for (int i = 0; i < ns; i++) {
        int end = perm[i] + 1 < ns ? srv[perm[i] + 1] : r->n;
        for (int e = srv[perm[i]]; e < end; e++)
            r->order[k++] = e;
    }
    pthread_mutex_unlock(&c->lock);
}

static int make_schedule(run *r, tether_schedule **s, tether_error *err) {
    tether_connector *c = r->c;
    tether_schedule_opts so;
    tether_schedule_opts_init(&so);
    so.strategy = c->cfg.strategy; /* random, round-robin: sequential
                                       timing in make_order's order */
    so.login_timeout_ms =
        r->deadline_ms < 0 ? -1 : r->deadline_ms - r->start_ms;
    if (so.login_timeout_ms == 0)
        so.login_timeout_ms = 1;
    so.nhosts = r->n;
    so.backoff = c->cfg.pause;
    so.initial_wait = 0; /* a connect is not a herd; the pool paces those */
    pthread_mutex_lock(&c->lock);
    so.seed = c->o.seed ? tether__rng_next(&c->rng) | 1 : 0;
    pthread_mutex_unlock(&c->lock);
    so.backoff.seed = so.seed;
    return tether_schedule_create(s, &so, r->start_ms, err);
}

static int provision(run *r) {
    tether_connector *c = r->c;
    if (!c->o.provision)
        return 1; /* nothing to refresh: the list stays */
    char buf[4096] = "";
    tether_error e = {0};
    int rc = c->o.provision(c->o.provision_ctx, buf, sizeof(buf));
    /* The new cache first, for as many hosts as a list may hold: were it
     * allocated after the list changed and failed, the old cache would
     * be read and written past its end for the new list's hosts. */
    tether__hoststate *nc = NULL;
    if (rc == 0 && !(nc = tether__calloc(TETHER__MAX_HOSTS, sizeof(*nc))))
        rc = tether_error_set(&e, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                              "provisioning: out of memory");
    pthread_mutex_lock(&c->lock);
    if (rc == 0)
        rc = tether__conncfg_set_hosts(&c->cfg, buf, &e);
    if (rc == 0) {
        tether__free(c->cache);
        c->cache = nc;
        nc = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    tether__free(nc);
    tether__connector_event(c, 0, NULL, TETHER_PHASE_PROVISION, rc ? &e : NULL,
                            0, now_ms(r) - r->start_ms, 0);
    if (rc == 0) {
        tether__watch_close(&r->watch, c);
        make_order(r);
    }
    return rc == 0;
}

/* disc_changed syncs the host list with discovery's (discover.c) and says
 * whether it changed. */
static int disc_changed(run *r) {
    tether_connector *c = r->c;
    pthread_mutex_lock(&c->lock);
    unsigned before = c->disc_changes;
    pthread_mutex_unlock(&c->lock);
    tether__connector_sync(c);
    pthread_mutex_lock(&c->lock);
    int changed = c->disc_changes != before;
    pthread_mutex_unlock(&c->lock);
    return changed;
}

/* new_list puts a new list of hosts in place for the next pass: the
 * order over it, and no watch (its endpoints' indexes meant the old). */
static void new_list(run *r, tether_schedule *s) {
    tether__watch_close(&r->watch, r->c);
    make_order(r);
    tether_schedule_provisioned(s, 1, r->n);
}

/* wait_news sleeps ms, or less when discovery (on the real clock) has a
 * list newer than generation have: then 1, the new list in place. */
static int wait_news(run *r, tether_schedule *s, uint64_t have, int64_t ms) {
    tether__disc *d = r->c->disc;
    if (!d || r->c->o.clock) {
        r->clock->sleep_ns(r->clock->ctx, ms * TETHER__NS_PER_MS);
        return 0;
    }
    if (tether__disc_wait(d, have, ms) != have &&
        r->c->cfg.strategy != TETHER_STRATEGY_MIRRORING &&
        r->c->cfg.strategy != TETHER_STRATEGY_STREAMING && disc_changed(r)) {
        new_list(r, s);
        return 1;
    }
    return 0;
}

/* pause_pass waits between two passes: 1 when a watched standby was
 * promoted meanwhile (its connection in *conn), else 0. With discovery on
 * the real clock, a new list from Patroni (a new leader) ends the pause at
 * once and the next pass goes over it (docs/patroni.md, "Refresh"). While
 * standbys are watched (watch.c), the pause goes in steps of
 * TETHER__WATCH_STEP_MS, each followed by a question to each of them; a
 * question may take up to WATCH_ASK_MS, never past the login deadline. */
#define WATCH_ASK_MS 100
static int pause_pass(run *r, tether_schedule *s, int64_t delay_ms,
                      void **conn) {
    uint64_t have =
        r->c->disc ? tether__disc_view(r->c->disc, 0, NULL, NULL) : 0;
    int64_t end = now_ms(r) + delay_ms;
    for (;;) {
        int64_t left = end - now_ms(r);
        int64_t step =
            r->watch.n ? TETHER__MIN(left, TETHER__WATCH_STEP_MS) : left;
        if (step > 0 && wait_news(r, s, have, step))
            return 0;
        if (r->watch.n == 0 || now_ms(r) >= end)
            return 0;
        int64_t ask = TETHER__MAX(end - now_ms(r), WATCH_ASK_MS);
        if (r->deadline_ms >= 0)
            ask = TETHER__MIN(ask, r->deadline_ms - now_ms(r));
        for (int k = 0; k < r->watch.n;) {
            int q = tether__watch_ask(&r->watch, r->c, k, ask);
            if (q == TETHER_ROLE_PRIMARY)
                return take_watched(r, k, conn);
            k += q > 0; /* a failed one's slot now holds another */
        }
    }
}

/* Give up: the fallback if a prefer-* target left one, else the error. */
static int finish(run *r, void **conn, tether_error *err) {
    if (r->fallback) {
        *conn = r->fallback;
        return 0;
    }
    if (r->last.code == 0)
        tether_error_set(&r->last, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
                         "no connection within the login timeout");
    if (err) {
        *err = r->last;
        tether__tally_message(&r->tally, r->c->cfg.target, r->attempts,
                              now_ms(r) - r->start_ms, err);
    }
    return r->last.code;
}

/* Without tether_pause (config.c), after a pass: 1 to end the connect when
 * it reached no server (the pool's breaker paces the next; not with
 * discovery from Patroni, whose list may name the new leader by the next
 * pass); when a server
 * refused as busy (and none of the wrong role answered), *delay is a draw
 * from [w/2, w], w from 4 s doubling per such pass (tuned with `tether sim
 * storm`: a busy server is up, the caller waits; a herd thins out), from
 * [250, 500] ms every time when every refusal was 57P03 (starting up,
 * shutting down: a transition of a second or two, whose end should be seen
 * within half a second; the pool's breaker paces across connects), or 1
 * when that passes the login deadline. After a server of the wrong role (a
 * failover under way) the schedule's pause stands. */
#define BUSY_FIRST_MS 4000
#define TRANSITION_MS 500
#define BUSY_MAX_MS 60000

int tether__connector_fresh_last(tether_connector *c) {
    int s = last_server;
    pthread_mutex_lock(&c->lock);
    int fresh = s >= 0 && s < TETHER__MAX_HOSTS && c->disc_fresh[s];
    pthread_mutex_unlock(&c->lock);
    return fresh;
}

void tether__connector_busy_fast(tether_connector *c) {
    atomic_store(&c->busy_fast, 1);
}

static int default_pause(run *r, int64_t *delay) {
    tether_connector *c = r->c;
    if (c->cfg.pause_set || c->cfg.strategy == TETHER_STRATEGY_MIRRORING ||
        c->cfg.strategy == TETHER_STRATEGY_STREAMING || r->reached)
        return 0;
    if (!r->busy) /* with discovery, a host down is likely a failover under
                     way: the next pass, after the schedule's pause, goes
                     over the list Patroni gives by then (docs/patroni.md,
                     "Refresh"), until the login deadline */
        return c->disc ? 0 : 1;
    if (atomic_load_explicit(&c->busy_fast, memory_order_relaxed))
        return 1; /* the adaptive pool reacts to it (busy_fast) */
    if (!r->full) /* a transition: the same short window every pass */
        r->busy_w = TRANSITION_MS;
    else
        r->busy_w =
            r->busy_w ? TETHER__MIN(r->busy_w * 2, BUSY_MAX_MS) : BUSY_FIRST_MS;
    pthread_mutex_lock(&c->lock);
    *delay = tether__rng_range(&c->rng, r->busy_w / 2, r->busy_w);
    pthread_mutex_unlock(&c->lock);
    return r->deadline_ms >= 0 && now_ms(r) + *delay >= r->deadline_ms;
}

static int loop(run *r, tether_schedule *s, void **conn, tether_error *err) {
    for (;;) {
        tether_step st;
        tether_schedule_next(s, now_ms(r), &st);
        if (st.kind == TETHER_STEP_ATTEMPT) {
            if (attempt(r, &st, conn)) {
                if (r->fallback)
                    r->c->drv->close(r->fallback);
                return 0;
            }
            continue;
        }
        if (st.kind == TETHER_STEP_PROVISION) {
            int ok = provision(r);
            tether_schedule_provisioned(s, ok, r->n);
            continue;
        }
        /* A pass ended: a fallback or a permanent failure ends the loop. */
        if (st.kind == TETHER_STEP_DONE || r->fallback || r->permanent)
            return finish(r, conn, err);
        /* Sequential timing: the provisioning callback refreshes the list
         * for the next pass, or for the next connect when the default
         * pause ends this one here (streaming asks in its own steps). */
        if (r->c->o.provision &&
            r->c->cfg.strategy != TETHER_STRATEGY_MIRRORING &&
            r->c->cfg.strategy != TETHER_STRATEGY_STREAMING) {
            int ok = provision(r); /* r->n is the new count after it */
            tether_schedule_provisioned(s, ok, r->n);
        }
        /* Patroni's list changed since the pass began (a trigger of this
         * connect, or the interval): the next pass goes over the new one
         * (docs/patroni.md, "Refresh"). */
        if (r->c->disc && r->c->cfg.strategy != TETHER_STRATEGY_MIRRORING &&
            r->c->cfg.strategy != TETHER_STRATEGY_STREAMING && disc_changed(r))
            new_list(r, s);
        if (default_pause(r, &st.delay_ms))
            return finish(r, conn, err);
        /* The first pass that skipped a host and found nothing fitting is
         * followed at once by the next (once per connect): the cache now
         * knows the others' roles, so the skipped host is tried unless
         * another still may serve, and a server down when last tried may
         * be back (a restart takes under a second). */
        if (r->skipped && !r->rushed && !r->c->cfg.pause_set) {
            st.delay_ms = 0;
            r->rushed = 1;
        }
        r->reached = r->busy = r->full = r->skipped = 0;
        tether__connector_event(r->c, 0, NULL, TETHER_PHASE_PAUSE, NULL, 0,
                                now_ms(r) - r->start_ms, st.delay_ms);
        if (pause_pass(r, s, st.delay_ms, conn))
            return 0;
    }
}

int tether__connector_open(tether_connector *c, int64_t budget_ms, void **conn,
                           tether_error *err, int *cut) {
    run r;
    memset(&r, 0, sizeof(r));
    r.c = c;
    r.clock = tether__clock(c->o.clock);
    r.start_ms = now_ms(&r);
    int64_t login = c->cfg.login_timeout_ms;
    if (budget_ms >= 0 && (login < 0 || budget_ms < login))
        login = budget_ms;
    r.deadline_ms = login < 0 ? -1 : r.start_ms + login;
    r.by_caller =
        budget_ms >= 0 && login == budget_ms &&
        (c->cfg.login_timeout_ms < 0 || budget_ms < c->cfg.login_timeout_ms);
    *conn = NULL;
    last_server = -1;
    tether__connector_sync(c); /* Patroni's list, when it changed */
    int rc;
    if (c->cfg.strategy == TETHER_STRATEGY_RACE) {
        rc = tether__connector_race(c, r.deadline_ms, conn, err);
    } else {
        make_order(&r);
        tether_schedule *s = NULL;
        rc = make_schedule(&r, &s, err);
        if (rc == 0)
            rc = loop(&r, s, conn, err);
        tether_schedule_destroy(s);
        tether__watch_close(&r.watch, c);
    }
    int64_t took = now_ms(&r) - r.start_ms;
    if (err) {
        err->attempts = r.attempts ? r.attempts : err->attempts;
        err->elapsed_ms = took;
    }
    if (cut) /* the race keeps no tally: a time-out at the caller's end */
        *cut = rc != 0 && r.by_caller && r.learnt == 0 &&
               budget_ms < TETHER__CUT_FLOOR_MS &&
               (c->cfg.strategy != TETHER_STRATEGY_RACE ||
                rc == TETHER_ETIMEDOUT) &&
               took >= budget_ms;
    return rc;
}

/* ---- the public handle API ----------------------------------------------- */

/* Handles given to users map back to driver connections through a small
 * header kept in front of nothing: the driver's conn is the handle's
 * owner, so we keep a tiny registry of open handles. */
typedef struct handle_rec {
    void *handle, *conn;
    struct handle_rec *next;
} handle_rec;

static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static handle_rec *handles;

int tether_connector_connect(tether_connector *c, void **handle,
                             tether_error *err) {
    if (!handle)
        return tether__null(err, "tether_connector_connect", "handle");
    *handle = NULL;
    if (!c)
        return tether__null(err, "tether_connector_connect", "c");
    void *conn = NULL;
    int rc = tether__connector_open(c, -1, &conn, err, NULL);
    if (rc)
        return rc;
    handle_rec *h = tether__malloc(sizeof(*h));
    if (!h) {
        c->drv->close(conn);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    }
    h->conn = conn;
    h->handle = c->drv->handle(conn);
    pthread_mutex_lock(&handles_lock);
    h->next = handles;
    handles = h;
    pthread_mutex_unlock(&handles_lock);
    *handle = h->handle;
    return 0;
}

void tether_connector_close(tether_connector *c, void *handle) {
    if (!c || !handle)
        return;
    pthread_mutex_lock(&handles_lock);
    handle_rec **pp = &handles, *h = NULL;
    while (*pp && (*pp)->handle != handle)
        pp = &(*pp)->next;
    if (*pp) {
        h = *pp;
        *pp = h->next;
    }
    pthread_mutex_unlock(&handles_lock);
    if (h)
        c->drv->close(h->conn);
    tether__free(h);
}
