/* watch.c - the connector's role watch (docs/conninfo.md, "The role
 * watch"). In a failover the leader's successor is a standby until the
 * moment it is promoted, and a connect for a read-write target reaches it
 * on every pass as "a server of the wrong role". Instead of closing that
 * connection and connecting again after the pause, the connect keeps it
 * and asks it its role (a round trip: SELECT pg_is_in_recovery() on pq)
 * every few milliseconds of the pause: the promotion is seen within one
 * step, and the connection it was seen on is the one handed out. The
 * connect's loop (connector.c) decides when to keep, ask and take. */
#include "connector.h"

int tether__watch_keep(tether__watch *w, tether_connector *c, int idx,
                       void *conn, tether_role role) {
    tether_target t = c->cfg.target;
    if (role != TETHER_ROLE_STANDBY || !c->drv->query_role ||
        (t != TETHER_TARGET_READ_WRITE && t != TETHER_TARGET_PRIMARY) ||
        c->cfg.strategy == TETHER_STRATEGY_MIRRORING ||
        c->cfg.strategy == TETHER_STRATEGY_STREAMING ||
        w->n >= TETHER__WATCH_MAX || tether__watch_find(w, idx) >= 0)
        return 0;
    /* The connector's share: connects beyond it close and connect again,
     * as without the watch, so a pool's burst of connects in a failover
     * holds no more server slots than one connect. */
    if (atomic_fetch_add(&c->watching, 1) >= TETHER__WATCH_MAX) {
        atomic_fetch_sub(&c->watching, 1);
        return 0;
    }
    w->conn[w->n] = conn;
    w->idx[w->n++] = idx;
    return 1;
}

int tether__watch_find(const tether__watch *w, int idx) {
    for (int k = 0; k < w->n; k++)
        if (w->idx[k] == idx)
            return k;
    return -1;
}

void *tether__watch_take(tether__watch *w, tether_connector *c, int k) {
    void *conn = w->conn[k];
    atomic_fetch_sub(&c->watching, 1);
    w->n--;
    w->conn[k] = w->conn[w->n];
    w->idx[k] = w->idx[w->n];
    return conn;
}

int tether__watch_ask(tether__watch *w, tether_connector *c, int k,
                      int64_t budget_ms) {
    int q = c->drv->query_role(w->conn[k], TETHER__MAX(budget_ms, 1), NULL);
    if (q < 0)
        c->drv->close(tether__watch_take(w, c, k));
    return q;
}

void tether__watch_close(tether__watch *w, tether_connector *c) {
    while (w->n > 0)
        c->drv->close(tether__watch_take(w, c, w->n - 1));
}
