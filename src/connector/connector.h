/* connector.h - the connector's internals: its configuration from a
 * parsed connection string (config.c), name resolution within a deadline
 * (resolve.c) and the connect loops (connector.c, race.c). No libpq here:
 * libpq's keywords reach the connector through conninfo's tables, the
 * default driver through driver.h. */
#ifndef TETHER_CONNECTOR_H
#define TETHER_CONNECTOR_H

#include "conninfo.h"
#include "discovery.h"
#include "driver.h"
#include "internal.h"

#include <pthread.h>

/* One endpoint of the host list. */
typedef struct tether__ep {
    char *host;     /* NULL: the driver's default (libpq: PGHOST/socket) */
    char *hostaddr; /* numeric address given by the user, or NULL */
    int port;       /* 0: default */
    int server;     /* index of its host in the list: a host with several
                       ports gives one endpoint per port, in order */
} tether__ep;

/* What a connection string says to the connector: the endpoints, its
 * keywords, and the libpq keywords for the driver (the pool's keywords are
 * left out: tether_pool_open maps those). */
/* The most hosts one connection string (or one provisioning answer) may
 * name, and the most endpoints (host-port pairs) they may make: a longer
 * list is refused, never cut short in silence. */
#define TETHER__MAX_HOSTS 64

typedef struct tether__conncfg {
    tether__ep *eps;
    int neps;
    char **keys, **vals; /* what goes to the driver (libpq keywords) */
    int nparams;
    tether_strategy strategy;
    tether_target target;
    int64_t login_timeout_ms;   /* tether_login_timeout (15 s; -1 inf) */
    int64_t attempt_timeout_ms; /* tether_attempt_timeout or
                                   connect_timeout (0: from the strategy) */
    int64_t recheck_ms;         /* tether_recheck (10 s) */
    int64_t race_delay_ms;      /* tether_race_delay (250 ms) */
    tether_backoff_opts pause;  /* between passes (tether_pause spec) */
    int pause_set;              /* tether_pause given: every pass pauses */
    char *display; /* the string with secrets masked, for names and logs */
    tether__disc_cfg patroni; /* tether_patroni and its keywords */
} tether__conncfg;

/* tether__conncfg_parse parses conninfo into cfg (freed with
 * tether__conncfg_free even on failure). Errors name the keyword. */
int tether__conncfg_parse(const char *conninfo, tether__conncfg *cfg,
                          tether_error *err);

/* tether__conncfg_parse_env is tether__conncfg_parse, reading the PG*
 * environment for what the string leaves out only when use_env is set
 * (not for the TCP driver: PGPORT is no Redis port). */
int tether__conncfg_parse_env(const char *conninfo, int use_env,
                              tether__conncfg *cfg, tether_error *err);

/* tether__conncfg_from is tether__conncfg_parse_env on a connection string
 * parsed already (ci, which the caller keeps): nothing is parsed again. */
int tether__conncfg_from(const tether__conninfo *ci, int use_env,
                         tether__conncfg *cfg, tether_error *err);

/* tether__connector_create_ci is tether_connector_create with the
 * connection string parsed already: ci instead of o->conninfo (which is
 * ignored). */
int tether__connector_create_ci(tether_connector **out,
                                const tether_connector_opts *o,
                                const tether__conninfo *ci, tether_error *err);

/* tether__conncfg_free releases what cfg holds. */
void tether__conncfg_free(tether__conncfg *cfg);

/* tether__conncfg_set_hosts replaces the endpoint list with "h:p,h:p"
 * (provisioning; "h:p|p" for several ports). Returns 0 or TETHER_ESPEC. */
int tether__conncfg_set_hosts(tether__conncfg *cfg, const char *list,
                              tether_error *err);

/* Up to this many addresses are tried per endpoint. */
#define TETHER__MAX_ADDRS 4

/* tether__resolve looks host up within budget_ms (-1: unbounded) without
 * blocking past it, writing numeric addresses into addrs (each 64 bytes).
 * Returns the count (>= 1), or a negative error: TETHER_ERESOLVE
 * (transient when temporary), TETHER_ETIMEDOUT. Numeric hosts and socket
 * paths are returned as they are. */
int tether__resolve(const char *host, int64_t budget_ms, char addrs[][64],
                    tether_error *err);

/* Lookups still running beyond this many (the resolver is not answering)
 * make new ones fail at once instead of starting one more thread each. */
#define TETHER__MAX_LOOKUPS 128

/* What a lookup thread calls: getaddrinfo, or a test's stand-in. */
struct addrinfo;
typedef int tether__gai_fn(const char *, const char *, const struct addrinfo *,
                           struct addrinfo **);
extern tether__gai_fn *tether__getaddrinfo;

/* tether__resolve_pending returns the lookups allocated and not yet freed
 * (callers gone or not). */
int tether__resolve_pending(void);

/* What the host-state cache knows of an endpoint. */
typedef struct tether__hoststate {
    int state;        /* HS_* */
    int64_t until_ms; /* the knowledge expires */
} tether__hoststate;

enum { HS_UNKNOWN = 0, HS_DOWN, HS_PRIMARY, HS_STANDBY };

/* What one connect run learned of each endpoint it tried or skipped, for
 * an error that names them all (report.c). Endpoints are told apart by
 * their "host:port" label (provisioning may replace the list mid-run) and
 * kept in the order first met: the first TETHER__TALLY_SHOWN with their
 * reason, the others (up to TETHER__TALLY_HOSTS) counted. */
#define TETHER__TALLY_HOSTS TETHER__MAX_HOSTS
#define TETHER__TALLY_SHOWN 12
#define TETHER__TALLY_LABEL 56
#define TETHER__TALLY_WHY 112
typedef struct tether__tally {
    int n;                                    /* endpoints met */
    uint32_t hash[TETHER__TALLY_HOSTS];       /* their labels' hashes */
    unsigned char tried[TETHER__TALLY_SHOWN]; /* connected to, not skipped */
    char label[TETHER__TALLY_SHOWN][TETHER__TALLY_LABEL];
    char why[TETHER__TALLY_SHOWN][TETHER__TALLY_WHY];
} tether__tally;

/* A connect given less than this by its caller that ran out of time proves
 * nothing of the servers: even a healthy one may take that long to accept
 * under load (docs/breaker.md). One given more, that heard nothing, counts
 * as a failure like any other. */
#define TETHER__CUT_FLOOR_MS 100

/* Why an attempt was cut short (tether__tally_fail's cut): the login
 * timeout, or the caller's deadline (a shorter budget it gave). */
enum { TETHER__CUT_LOGIN = 1, TETHER__CUT_CALLER = 2 };

/* tether__tally_fail notes that ep failed with e (budget_ms: the attempt's
 * budget, -1 unknown). cut: the login deadline ended the attempt, so what
 * an earlier attempt found out about ep is kept over it. */
void tether__tally_fail(tether__tally *t, const tether__ep *ep,
                        const tether_error *e, int64_t budget_ms, int cut);

/* tether__tally_role notes that ep connected with a role the target does
 * not take. */
void tether__tally_role(tether__tally *t, const tether__ep *ep,
                        tether_role role, tether_target target);

/* tether__tally_skip notes that the host-state cache skipped ep (state:
 * HS_*); a reason found by trying it is kept over this. */
void tether__tally_skip(tether__tally *t, const tether__ep *ep, int state);

/* tether__tally_message rewrites err->message to name every endpoint of t
 * and why each was passed over, after a head with the attempts and the
 * time taken; nothing when t is empty. */
void tether__tally_message(const tether__tally *t, tether_target target,
                           int attempts, int64_t elapsed_ms, tether_error *err);

struct tether_connector {
    tether_connector_opts o;
    const tether_driver *drv;
    void *dctx; /* the driver's parameters (tether__pq_params for pq) */
    void (*dctx_free)(void *);
    tether__conncfg cfg;
    pthread_mutex_t lock; /* guards cache, rr, rng, and cfg.eps */
    tether__hoststate *cache;
    unsigned rr;
    tether__rng rng;
    /* Discovery from Patroni (discover.c, docs/patroni.md): the shared
     * refresher, the generation of its list that cfg.eps was built from
     * (0: none yet, the string's hosts), the lag bound of the read side's
     * list (bytes, -1 none) and the role the list gave each endpoint
     * (TETHER_ROLE_*; all guarded by lock). */
    tether__disc *disc;
    uint64_t disc_gen;
    int64_t disc_lag_bytes;
    unsigned char disc_role[TETHER__MAX_HOSTS];
    char *disc_list;       /* the list last set from it */
    unsigned disc_changes; /* times it was set */
    /* A rebalance (docs/patroni.md, "Rebalance"): the servers the
     * last change added (disc_fresh, by server index), how many, of how
     * many in the list, counted by disc_added_gen; a server with quota
     * left goes first in the visiting order (tether__connector_favour). */
    unsigned char disc_fresh[TETHER__MAX_HOSTS];
    unsigned short disc_quota[TETHER__MAX_HOSTS];
    int disc_added, disc_servers;
    unsigned disc_added_gen;
    struct retired *disc_retired; /* endpoint arrays it replaced */
    /* A server refused as busy (53300, 57P03) ends the connect at once
     * instead of pausing for the next pass (tether__connector_busy_fast:
     * the adaptive pool's connector, docs/pool.md "Adaptive limit"). */
    _Atomic int busy_fast;
    /* Standbys' connections watched by its connects now (watch.c): at
     * most TETHER__WATCH_MAX across them all. */
    _Atomic int watching;
};

/* tether__connector_discover starts c's discovery when its string names
 * tether_patroni (create calls it). Returns 0 or a negative error. */
int tether__connector_discover(tether_connector *c, tether_error *err);

/* tether__connector_undiscover releases what discovery holds in c
 * (destroy calls it). */
void tether__connector_undiscover(tether_connector *c);

/* tether__connector_sync replaces c's host list with what discovery last
 * learned, for c's target, when that changed since the last call (never a
 * REST call: a copy of the shared list). Nothing without discovery. */
void tether__connector_sync(tether_connector *c);

/* tether__connector_kick asks c's discovery to refresh now (coalesced and
 * rate-limited, docs/patroni.md "Refresh"): a connect failed, a role
 * differed from the list, a 25006 came. Nothing without discovery. */
void tether__connector_kick(tether_connector *c);

/* tether__connector_set_lag_bytes sets the lag bound (bytes; -1 none) that
 * a replica of the Patroni list must be within to be in c's list for a
 * standby target (the routing pool's read side). */
void tether__connector_set_lag_bytes(tether_connector *c, int64_t bytes);

/* tether__connector_added syncs c's list (tether__connector_sync) and,
 * when a change of it added servers since generation *gen (updated), says
 * how many (*added) of how many (*servers) and returns 1. Else 0: nothing
 * added, no discovery, or a strategy that visits hosts in their order
 * (sequential and the provisioning ones: nothing to spread). */
int tether__connector_added(tether_connector *c, unsigned *gen, int *added,
                            int *servers);

/* tether__connector_favour puts each server the last change added first
 * in the next n connects' visiting order (one server a connect, the others
 * after it in their usual order), so that a pool's replacements reach them
 * (docs/patroni.md, "Rebalance"). A later change of the list ends
 * it. */
void tether__connector_favour(tether_connector *c, int n);

/* tether__connector_fresh_last says whether the connection the last
 * connect on this thread returned is on a server the last change of c's
 * list added: 1, else 0 (a pool's mover checks that its move landed). */
int tether__connector_fresh_last(tether_connector *c);

/* tether__connector_busy_fast makes a pass that found a server busy (53300,
 * 57P03) end c's connect with that refusal instead of pausing for another
 * pass: its pool reacts to it (the adaptive limit comes down, the caller
 * waits for a release, the breaker paces a pool with none out). */
void tether__connector_busy_fast(tether_connector *c);

/* tether__connector_disc_stats fills s from c's discovery and returns 1,
 * or returns 0 when c has none. */
int tether__connector_disc_stats(tether_connector *c, tether__disc_stats *s);

/* tether__connector_open connects with the connector's strategy within
 * budget_ms (also capped by the login timeout; -1: the login timeout) and
 * returns the driver's connection (not the user handle). *cut (cut may be
 * NULL) is 1 when it failed only because budget_ms, shorter than the login
 * timeout and than TETHER__CUT_FLOOR_MS, ran out before any attempt told
 * something of a server: the caller's loss, not the servers'
 * (docs/breaker.md). */
int tether__connector_open(tether_connector *c, int64_t budget_ms, void **conn,
                           tether_error *err, int *cut);

/* tether__connector_race is the race strategy's loop. */
int tether__connector_race(tether_connector *c, int64_t deadline_ms,
                           void **conn, tether_error *err);

/* Shared by the loops: report an event. */
void tether__connector_event(tether_connector *c, int attempt,
                             const tether__ep *ep, tether_phase phase,
                             const tether_error *err, tether_role role,
                             int64_t elapsed_ms, int64_t budget_ms);

/* Whether role satisfies the target strictly (1), only as a fallback for
 * prefer-* targets (2), or not at all (0). */
int tether__role_fits(tether_target t, tether_role role);

/* tether__connector_judge learns the role of conn, fresh from endpoint idx
 * (asking the server within deadline_ms when it did not say; -1: 5 s),
 * records it in the host-state cache and returns whether it fits the
 * target: 1 take it, 2 only as the fallback of a prefer-* target, 0 not at
 * all. The role is stored in *role. */
int tether__connector_judge(tether_connector *c, int idx, void *conn,
                            int64_t now_ms, int64_t deadline_ms,
                            tether_role *role);

/* tether__connector_driver returns the driver c connects with. */
const tether_driver *tether__connector_driver(const tether_connector *c);

/* Record what an attempt learned about endpoint i. */
void tether__connector_learn(tether_connector *c, int i, int state,
                             int64_t now_ms);

/* ---- the role watch (watch.c) ----------------------------------------- */

/* A connect for a read-write or primary target keeps connections that
 * reached a standby, up to this many across all the connects of one
 * connector (each holds a server slot), and asks each its role every
 * TETHER__WATCH_STEP_MS while it pauses between passes: a standby promoted
 * is taken at once, without a new connect (docs/conninfo.md, "The role
 * watch"). */
#define TETHER__WATCH_MAX 2
#define TETHER__WATCH_STEP_MS 10

typedef struct tether__watch {
    void *conn[TETHER__WATCH_MAX];
    int idx[TETHER__WATCH_MAX]; /* the endpoint each came from */
    int n;
} tether__watch;

/* tether__watch_keep keeps conn, fresh from endpoint idx and judged of the
 * wrong role (role), when c watches for that: 1 kept, 0 not (the caller
 * closes it). */
int tether__watch_keep(tether__watch *w, tether_connector *c, int idx,
                       void *conn, tether_role role);

/* tether__watch_find returns the slot watching endpoint idx, or -1. */
int tether__watch_find(const tether__watch *w, int idx);

/* tether__watch_ask asks slot k's server its role within budget_ms: the
 * role (> 0), or < 0 when the connection failed (it is closed and the
 * slot's place taken by the last one). */
int tether__watch_ask(tether__watch *w, tether_connector *c, int k,
                      int64_t budget_ms);

/* tether__watch_take removes slot k and returns its connection. */
void *tether__watch_take(tether__watch *w, tether_connector *c, int k);

/* tether__watch_close closes every watched connection. */
void tether__watch_close(tether__watch *w, tether_connector *c);

#endif
