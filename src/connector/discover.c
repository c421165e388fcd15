/* discover.c - the connector's host list from Patroni's member list
 * (docs/patroni.md, "Discovery"). The refresher (src/discovery) keeps the
 * list; here, before a connect picks its hosts, a connector whose list
 * changed builds its own from it for its target:
 *   - read-write, primary: the leader, then the running replicas that may
 *     become leader (no nofailover tag): a connect reaches them only when
 *     the leader fails, and watches them for the promotion (watch.c); no
 *     leader known: every running member, the role check finds it;
 *   - read-only, standby: the running replicas within the lag bound that
 *     are not tagged noloadbalance (none: the leader, so that the read
 *     side fails fast and the router sends the read to the primary);
 *   - prefer-standby: those replicas, then the leader; prefer-primary and
 *     any: the leader, then those replicas.
 * Until a list was ever known, the connection string's hosts serve. */
#include "connector.h"

#include <stdio.h>
#include <string.h>

static int is_reader(const tether__member *m) {
    return m->role == TETHER__PM_REPLICA || m->role == TETHER__PM_SYNC ||
           m->role == TETHER__PM_STANDBY_LEADER;
}

/* A replica that may take reads. */
static int readable(const tether__member *m, int64_t lag_bytes) {
    return is_reader(m) && m->running && !m->noloadbalance &&
           (lag_bytes < 0 || (m->lag >= 0 && m->lag <= lag_bytes));
}

typedef struct hostlist {
    char buf[TETHER__MAX_HOSTS * 270];
    size_t len;
    int n;
    unsigned char role[TETHER__MAX_HOSTS];
} hostlist;

static void add(hostlist *l, const tether__member *m) {
    if (l->n >= TETHER__MAX_HOSTS)
        return;
    int v6 = strchr(m->host, ':') != NULL;
    int w = snprintf(l->buf + l->len, sizeof(l->buf) - l->len,
                     v6 ? "%s[%s]:%d" : "%s%s:%d", l->n ? "," : "", m->host,
                     m->port);
    if (w < 0 || (size_t)w >= sizeof(l->buf) - l->len)
        return;
    l->len += (size_t)w;
    l->role[l->n++] = m->role == TETHER__PM_LEADER ? TETHER_ROLE_PRIMARY
                                                   : TETHER_ROLE_STANDBY;
}

static void add_leader(hostlist *l, const tether__member *m, int n) {
    for (int i = 0; i < n; i++)
        if (m[i].role == TETHER__PM_LEADER)
            add(l, &m[i]);
}

/* A replica Patroni may promote: after the leader in a writer's list. */
static void add_successors(hostlist *l, const tether__member *m, int n) {
    for (int i = 0; i < n; i++)
        if (is_reader(&m[i]) && m[i].running && !m[i].nofailover)
            add(l, &m[i]);
}

static void add_readers(hostlist *l, const tether__member *m, int n,
                        int64_t lag_bytes) {
    for (int i = 0; i < n; i++)
        if (readable(&m[i], lag_bytes))
            add(l, &m[i]);
}

/* build makes the list for target t. */
static void build(hostlist *l, tether_target t, const tether__member *m, int n,
                  int64_t lag_bytes) {
    memset(l, 0, sizeof(*l));
    switch (t) {
    case TETHER_TARGET_READ_WRITE:
    case TETHER_TARGET_PRIMARY:
        add_leader(l, m, n);
        if (l->n > 0)
            add_successors(l, m, n);
        for (int i = 0; l->n == 0 && i < n; i++) /* no leader: ask them */
            if (m[i].running)
                add(l, &m[i]);
        break;
    case TETHER_TARGET_READ_ONLY:
    case TETHER_TARGET_STANDBY:
        add_readers(l, m, n, lag_bytes);
        if (l->n == 0)
            add_leader(l, m, n);
        break;
    case TETHER_TARGET_PREFER_STANDBY:
        add_readers(l, m, n, lag_bytes);
        add_leader(l, m, n);
        break;
    default:
        add_leader(l, m, n);
        add_readers(l, m, n, lag_bytes);
        break;
    }
    if (l->n == 0) /* nothing usable: every member, the role check judges */
        for (int i = 0; i < n; i++)
            add(l, &m[i]);
}

/* Endpoint arrays replaced while c lives: a connect on another thread may
 * still read the one it began with (attempt() reads c->cfg.eps[i] outside
 * the lock), so they are freed with c. One per change of the list. */
typedef struct retired {
    struct retired *next;
    tether__ep *eps;
    int neps;
} retired;

static int same_str(const char *a, const char *b) {
    return a == b || (a && b && !strcmp(a, b));
}

/* mark_added records which servers of c's new list the old one (old, n)
 * did not name (c->lock held): a pool over c moves a share of its
 * connections to them (docs/patroni.md, "A replica added"). */
static void mark_added(tether_connector *c, const tether__ep *old, int n) {
    memset(c->disc_fresh, 0, sizeof(c->disc_fresh));
    memset(c->disc_quota, 0, sizeof(c->disc_quota));
    c->disc_added = c->disc_servers = 0;
    for (int i = 0; i < c->cfg.neps; i++) {
        const tether__ep *e = &c->cfg.eps[i];
        if (i == 0 || e->server != c->cfg.eps[i - 1].server)
            c->disc_servers++;
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = same_str(e->host, old[j].host) &&
                   same_str(e->hostaddr, old[j].hostaddr) &&
                   e->port == old[j].port;
        if (!seen && !c->disc_fresh[e->server]) {
            c->disc_fresh[e->server] = 1;
            c->disc_added++;
        }
    }
    if (c->disc_added)
        c->disc_added_gen++;
}

/* replace installs l as c's host list (c->lock held), with *nc as its
 * new host-state cache (taken). Returns 1 when it did. */
static int replace(tether_connector *c, const hostlist *l,
                   tether__hoststate **nc) {
    char *copy = tether__strdup(l->buf);
    retired *r = tether__malloc(sizeof(*r));
    if (!copy || !r) {
        tether__free(copy);
        tether__free(r);
        return 0;
    }
    r->eps = c->cfg.eps;
    r->neps = c->cfg.neps;
    c->cfg.eps = NULL;
    c->cfg.neps = 0;
    tether_error e = {0};
    if (tether__conncfg_set_hosts(&c->cfg, l->buf, &e)) {
        c->cfg.eps = r->eps; /* refused (cannot be: checked members) */
        c->cfg.neps = r->neps;
        tether__free(copy);
        tether__free(r);
        return 0;
    }
    mark_added(c, r->eps, r->neps);
    r->next = c->disc_retired;
    c->disc_retired = r;
    tether__free(c->disc_list);
    c->disc_list = copy;
    c->disc_changes++;
    tether__free(c->cache);
    c->cache = *nc;
    *nc = NULL;
    memset(c->disc_role, 0, sizeof(c->disc_role));
    memcpy(c->disc_role, l->role, (size_t)l->n);
    return 1;
}

void tether__connector_undiscover(tether_connector *c) {
    tether__disc_release(c->disc);
    c->disc = NULL;
    while (c->disc_retired) {
        retired *r = c->disc_retired;
        c->disc_retired = r->next;
        for (int i = 0; i < r->neps; i++) {
            tether__free(r->eps[i].host);
            tether__free(r->eps[i].hostaddr);
        }
        tether__free(r->eps);
        tether__free(r);
    }
    tether__free(c->disc_list);
    c->disc_list = NULL;
}

int tether__connector_discover(tether_connector *c, tether_error *err) {
    c->disc_lag_bytes = -1;
    if (!c->cfg.patroni.urls)
        return 0;
    int rc = tether__disc_acquire(&c->cfg.patroni, c->o.log, c->o.log_ctx,
                                  &c->disc, err);
    if (rc == 0)
        tether__connector_sync(c);
    return rc;
}

void tether__connector_sync(tether_connector *c) {
    if (!c->disc)
        return;
    pthread_mutex_lock(&c->lock);
    uint64_t have = c->disc_gen;
    pthread_mutex_unlock(&c->lock);
    int n = 0;
    if (tether__disc_view(c->disc, have, NULL, &n) == have)
        return; /* the usual case: nothing new */
    tether__member *m = tether__calloc(TETHER__PATRONI_MAX_MEMBERS, sizeof(*m));
    hostlist *l = tether__malloc(sizeof(*l));
    tether__hoststate *nc = tether__calloc(TETHER__MAX_HOSTS, sizeof(*nc));
    if (!m || !l || !nc)
        goto out; /* the list stays; the next connect tries again */
    uint64_t gen = tether__disc_view(c->disc, have, m, &n);
    pthread_mutex_lock(&c->lock);
    build(l, c->cfg.target, m, n, c->disc_lag_bytes);
    int changed = gen != c->disc_gen && n > 0 &&
                  (!c->disc_list || strcmp(c->disc_list, l->buf)) &&
                  replace(c, l, &nc);
    c->disc_gen = gen; /* a list refused stays refused until the next */
    pthread_mutex_unlock(&c->lock);
    if (changed) /* the user's log function, outside the lock */
        tether__log(c->o.log, c->o.log_ctx, TETHER_LOG_INFO,
                    "patroni: %s hosts now %s",
                    tether_target_name(c->cfg.target), l->buf);
out:
    tether__free(m);
    tether__free(l);
    tether__free(nc);
}

int tether__connector_added(tether_connector *c, unsigned *gen, int *added,
                            int *servers) {
    if (!c || !c->disc ||
        (c->cfg.strategy != TETHER_STRATEGY_RANDOM &&
         c->cfg.strategy != TETHER_STRATEGY_ROUND_ROBIN))
        return 0;
    tether__connector_sync(c);
    pthread_mutex_lock(&c->lock);
    int news = c->disc_added_gen != *gen;
    *gen = c->disc_added_gen;
    *added = c->disc_added;
    *servers = c->disc_servers;
    pthread_mutex_unlock(&c->lock);
    return news && *added > 0;
}

void tether__connector_favour(tether_connector *c, int n) {
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < TETHER__MAX_HOSTS; i++)
        c->disc_quota[i] = c->disc_fresh[i] ? (unsigned short)n : 0;
    pthread_mutex_unlock(&c->lock);
}

void tether__connector_kick(tether_connector *c) {
    if (c && c->disc)
        tether__disc_kick(c->disc);
}

void tether__connector_set_lag_bytes(tether_connector *c, int64_t bytes) {
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    c->disc_lag_bytes = bytes;
    c->disc_gen = (uint64_t)-1; /* build the list again */
    pthread_mutex_unlock(&c->lock);
    tether__connector_sync(c);
}

int tether__connector_disc_stats(tether_connector *c, tether__disc_stats *s) {
    if (!c || !c->disc)
        return 0;
    tether__disc_stats_get(c->disc, s);
    return 1;
}
