/* race.c - the race strategy: staggered parallel attempts (Happy Eyeballs
 * style). The first endpoint starts at once; each later one starts
 * race_delay after the previous (or at once when every attempt in flight
 * has failed). The first connection of the right role wins and the others
 * are closed. A pass that ends with nothing pauses (the pause backoff) and
 * starts over, until the login deadline. */
#include "connector.h"
#include "backoff.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FLIGHTS 64

typedef struct flight {
    void *conn;
    int idx;
    tether_wait w;
    char addr[64];
    int64_t t0; /* when it started */
} flight;

typedef struct race {
    tether_connector *c;
    const tether_clock *clock;
    int64_t start, deadline;
    flight f[MAX_FLIGHTS];
    int nf;
    int next;    /* next endpoint to start */
    int64_t due; /* when it may start */
    void *fallback;
    int attempts;
    tether_error last;
    tether__tally tally; /* every endpoint passed over, and why */
} race;

static int64_t now(const race *r) {
    return tether__now_ms(r->clock);
}

static void drop(race *r, int i) {
    r->f[i] = r->f[--r->nf];
}

/* close_all closes the flights still in the air; noted as timed out
 * when nothing won. */
static void close_all(race *r, int won) {
    for (int i = 0; i < r->nf; i++) {
        if (!won) {
            tether_error e = {0};
            tether_error_set(&e, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
                             "no answer");
            tether__tally_fail(&r->tally, &r->c->cfg.eps[r->f[i].idx], &e,
                               now(r) - r->f[i].t0, 1);
        }
        r->c->drv->close(r->f[i].conn);
    }
    r->nf = 0;
}

static void failed(race *r, int idx, tether_error *e) {
    const tether__ep *ep = &r->c->cfg.eps[idx];
    tether__connector_event(r->c, r->attempts, ep, TETHER_PHASE_FAIL, e, 0,
                            now(r) - r->start, -1);
    tether__tally_fail(&r->tally, ep, e, -1, 0);
    if (e->cls == TETHER_CLASS_TRANSIENT)
        tether__connector_learn(r->c, idx, HS_DOWN, now(r));
    r->last = *e;
    r->due = now(r); /* start the next one at once */
}

/* A connection came up: 1 when it wins. */
static int arrived(race *r, int idx, void *conn) {
    tether_connector *c = r->c;
    tether_role role;
    int fit = tether__connector_judge(c, idx, conn, now(r), r->deadline, &role);
    tether__connector_event(c, r->attempts, &c->cfg.eps[idx],
                            fit == 1 ? TETHER_PHASE_OK : TETHER_PHASE_ROLE,
                            NULL, role, now(r) - r->start, -1);
    if (fit == 1)
        return 1;
    tether__tally_role(&r->tally, &c->cfg.eps[idx], role, c->cfg.target);
    if (fit == 2 && !r->fallback)
        r->fallback = conn;
    else
        c->drv->close(conn);
    return 0;
}

/* Start endpoint r->next. Returns 1 with *won when it connected at once
 * and won. */
static int start_next(race *r, void **won) {
    tether_connector *c = r->c;
    int idx = r->next++;
    const tether__ep *ep = &c->cfg.eps[idx];
    r->due = now(r) + c->cfg.race_delay_ms;
    r->attempts++;
    tether_error e = {0};
    char addrs[TETHER__MAX_ADDRS][64];
    int64_t left = r->deadline < 0 ? -1 : TETHER__MAX(r->deadline - now(r), 0);
    int n = 1;
    addrs[0][0] = '\0';
    if (!ep->hostaddr && c->drv->resolve_names)
        n = tether__resolve(ep->host, left, addrs, &e);
    if (n < 0) {
        failed(r, idx, &e);
        return 0;
    }
    const char *addr = ep->hostaddr ? ep->hostaddr : addrs[0];
    int numeric = ep->host && ep->host[0] != '/' && addr[0];
    tether_endpoint te = {ep->host, numeric ? addr : NULL, ep->port, left};
    flight *f = &r->f[r->nf];
    f->idx = idx;
    f->t0 = now(r);
    f->w = (tether_wait){-1, 0, -1};
    f->conn = NULL;
    int rc = c->drv->connect_start(c->dctx, &te, &f->conn, &f->w, &e);
    if (rc == TETHER_CONNECTED && arrived(r, idx, f->conn)) {
        *won = f->conn;
        return 1;
    }
    if (rc == TETHER_IN_PROGRESS && r->nf < MAX_FLIGHTS) {
        r->nf++;
        return 0;
    }
    if (rc < 0) {
        c->drv->close(f->conn);
        failed(r, idx, &e);
    }
    return 0;
}

/* How long poll may sleep: until the next start, the deadline or a
 * flight's wake time. */
static int poll_timeout(race *r) {
    int64_t t = r->deadline < 0 ? 1000 : r->deadline - now(r);
    if (r->next < r->c->cfg.neps)
        t = TETHER__MIN(t, r->due - now(r));
    for (int i = 0; i < r->nf; i++)
        if (r->f[i].w.fd < 0 && r->f[i].w.wake_ms >= 0)
            t = TETHER__MIN(t, r->f[i].w.wake_ms - now(r));
    return (int)TETHER__MAX(t, 0);
}

/* Advance flights after poll(). Returns 1 with *won set when one won. */
static int advance(race *r, struct pollfd *pfd, void **won) {
    for (int i = r->nf - 1; i >= 0; i--) {
        flight *f = &r->f[i];
        int ready = f->w.fd >= 0
                        ? pfd[i].revents != 0
                        : (f->w.wake_ms >= 0 && now(r) >= f->w.wake_ms);
        if (!ready)
            continue;
        tether_error e = {0};
        int rc = r->c->drv->connect_poll(f->conn, &f->w, &e);
        if (rc == TETHER_IN_PROGRESS)
            continue;
        void *conn = f->conn;
        int idx = f->idx;
        drop(r, i);
        if (rc < 0) {
            r->c->drv->close(conn);
            failed(r, idx, &e);
        } else if (arrived(r, idx, conn)) {
            *won = conn;
            return 1;
        }
    }
    return 0;
}

static int wait_flights(race *r, void **won) {
    struct pollfd pfd[MAX_FLIGHTS];
    for (int i = 0; i < r->nf; i++)
        pfd[i] = (struct pollfd){r->f[i].w.fd, r->f[i].w.events, 0};
    int ms = poll_timeout(r), sockets = 0;
    for (int i = 0; i < r->nf; i++)
        sockets += r->f[i].w.fd >= 0;
    if (sockets == 0) /* only timers (or nothing): sleep on the clock */
        r->clock->sleep_ns(r->clock->ctx, ms * TETHER__NS_PER_MS);
    else if (poll(pfd, (nfds_t)r->nf, ms) < 0)
        return 0;
    return advance(r, pfd, won);
}

static int end_pass(race *r, tether__backoff_state *bs) {
    if (r->fallback)
        return 1;
    int64_t pause;
    tether__backoff_next(&r->c->cfg.pause, bs, TETHER_CLASS_TRANSIENT, &pause);
    if (r->deadline >= 0 && now(r) + pause >= r->deadline)
        return 1;
    r->clock->sleep_ns(r->clock->ctx, pause * TETHER__NS_PER_MS);
    r->next = 0;
    r->due = now(r);
    return 0;
}

int tether__connector_race(tether_connector *c, int64_t deadline_ms,
                           void **conn, tether_error *err) {
    race r;
    memset(&r, 0, sizeof(r));
    r.c = c;
    r.clock = tether__clock(c->o.clock);
    r.start = r.due = now(&r);
    r.deadline = deadline_ms;
    tether__backoff_state bs;
    tether__backoff_init(&bs, &c->cfg.pause);
    void *won = NULL;
    while (!won && (r.deadline < 0 || now(&r) < r.deadline)) {
        if (r.next < c->cfg.neps && (now(&r) >= r.due || r.nf == 0)) {
            start_next(&r, &won);
            continue;
        }
        if (r.nf == 0 && r.next >= c->cfg.neps) {
            if (end_pass(&r, &bs))
                break;
            continue;
        }
        wait_flights(&r, &won);
    }
    close_all(&r, won != NULL || r.fallback != NULL);
    if (won && r.fallback)
        c->drv->close(r.fallback);
    *conn = won ? won : r.fallback;
    if (*conn)
        return 0;
    if (r.last.code == 0)
        tether_error_set(&r.last, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
                         "no connection within the login timeout");
    if (err) {
        *err = r.last;
        err->attempts = r.attempts;
        tether__tally_message(&r.tally, c->cfg.target, r.attempts,
                              now(&r) - r.start, err);
    }
    return r.last.code;
}
