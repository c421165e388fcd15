/* preload.h - libtether-preload: libpq's connection functions interposed so
 * that an unmodified program's connect-per-request takes pooled
 * connections (docs/preload.md). Internal to the preload library.
 *
 * Modules: real.c (libpq's own functions, found with dlsym(RTLD_NEXT), and
 * the pass-through guard), config.c (the TETHER_PRELOAD_* environment),
 * conn.c (connection strings: from the PQconnectdbParams arrays and
 * PQsetdbLogin arguments, the pooled form and the libpq-only form),
 * table.c (the PGconns the pool made and which of them are handed out),
 * pool.c (the registry, fork, acquire and give back), interpose.c (the
 * exported PQ* functions). */
#ifndef TETHER_PRELOAD_H
#define TETHER_PRELOAD_H

#include <libpq-fe.h>

#include "tether_pq.h"

#define TP_EXPORT __attribute__((visibility("default")))

/* ---- real.c ------------------------------------------------------------ */

/* libpq's own functions (dlsym(RTLD_NEXT)); tp_real_resolve fills them
 * once and returns 0, or -1 when one is missing (the message is printed). */
typedef struct tp_real_fns {
    PGconn *(*connectdb)(const char *);
    PGconn *(*connectdb_params)(const char *const *, const char *const *, int);
    PGconn *(*setdb_login)(const char *, const char *, const char *,
                           const char *, const char *, const char *,
                           const char *);
    PGconn *(*connect_start)(const char *);
    PGconn *(*connect_start_params)(const char *const *, const char *const *,
                                    int);
    PostgresPollingStatusType (*connect_poll)(PGconn *);
    void (*finish)(PGconn *);
    void (*reset)(PGconn *);
    int (*reset_start)(PGconn *);
    PostgresPollingStatusType (*reset_poll)(PGconn *);
    PGPing (*ping)(const char *);
    PGPing (*ping_params)(const char *const *, const char *const *, int);
} tp_real_fns;

extern tp_real_fns tp_real;
int tp_real_resolve(void);

/* While a thread is inside a real libpq function called from here (libpq's
 * PQconnectdb calls PQconnectStart, its PQreset calls PQconnectPoll, all
 * through the interposed names), the interposers pass straight through. */
extern _Thread_local int tp_passing;

/* What the pq driver calls instead of libpq's names when it is built into
 * the preload library (redirect.h): the real functions, never the pool. */
PGconn *tp_real_PQconnectStartParams(const char *const *keys,
                                     const char *const *vals, int expand);
PostgresPollingStatusType tp_real_PQconnectPoll(PGconn *pg);
void tp_real_PQfinish(PGconn *pg);

/* ---- config.c ---------------------------------------------------------- */

typedef struct tp_config {
    int off;           /* TETHER_PRELOAD=off: everything passes through */
    int log;           /* TETHER_PRELOAD_LOG=1: a line per decision */
    int pool_max;      /* TETHER_PRELOAD_POOL_MAX, default 10 */
    char idle[32];     /* TETHER_PRELOAD_IDLE_TIMEOUT, default "60s" */
    char wait[32];     /* TETHER_PRELOAD_WAIT, default "30s" */
    const char *reset; /* TETHER_PRELOAD_RESET_QUERY, default DISCARD ALL;
                          "" for none */
    const char *match; /* TETHER_PRELOAD_MATCH, default "*" */
} tp_config;

/* tp_config_get returns the configuration, read once from the environment.
 * A bad value is reported on stderr naming the variable and turns the
 * preload off (every connect passes through to libpq). */
const tp_config *tp_config_get(void);

/* tp_log prints "tether-preload: ..." on stderr when TETHER_PRELOAD_LOG is
 * set. Never give it a password. */
void tp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- conn.c ------------------------------------------------------------ */

/* tp_conn_from_params renders PQconnectdbParams' arrays as a key=value
 * string (malloc'd), later keywords winning, a dbname holding a key=value
 * string inlined when expand is set. NULL when it cannot be pooled (a URI
 * in dbname) or out of memory. */
char *tp_conn_from_params(const char *const *keys, const char *const *vals,
                          int expand);

/* tp_conn_from_setdb does the same for PQsetdbLogin's arguments. */
char *tp_conn_from_setdb(const char *host, const char *port,
                         const char *options, const char *dbname,
                         const char *user, const char *password);

/* A program's connection string, parsed: the string to pool (tether's
 * defaults from the environment added where the program set none), the
 * masked display form (logs, TETHER_PRELOAD_MATCH) and whether it may be
 * pooled at all. */
typedef struct tp_conn {
    char *pooled;  /* NULL when not to be pooled */
    char *display; /* masked, never a password */
    char *libpq;   /* without tether's keywords, for a pass-through;
                      NULL when the original string has none */
} tp_conn;

/* tp_conn_prepare fills c from conninfo. Returns 0 (c->pooled may still be
 * NULL: replication, no match, off) or -1 (not parsable by tether: pass
 * through as it is). */
int tp_conn_prepare(const char *conninfo, tp_conn *c);
void tp_conn_free(tp_conn *c);

/* ---- table.c ----------------------------------------------------------- */

enum { TP_NONE = 0, TP_LEASED, TP_IDLE, TP_INHERITED };

/* One PGconn the pool made, once handed out. */
typedef struct tp_slot {
    PGconn *pg;
    tether_lease *lease; /* while leased */
    int state;           /* TP_LEASED, TP_IDLE or TP_INHERITED */
    int tainted;         /* PQreset by the program: close, never reuse */
    PQnoticeReceiver rx; /* the driver's receiver at checkout */
} tp_slot;

void tp_table_lease(PGconn *pg, tether_lease *lease, PQnoticeReceiver rx);
/* tp_table_finish: for PQfinish. LEASED: *out gets the slot, which becomes
 * IDLE; INHERITED: removed; returns the state before (TP_NONE: unknown). */
int tp_table_finish(PGconn *pg, tp_slot *out);
int tp_table_state(PGconn *pg);
int tp_table_taint(PGconn *pg);   /* 1 when pg is leased (now tainted) */
void tp_table_forget(PGconn *pg); /* the driver closed pg */
void tp_table_lock(void);
void tp_table_unlock(void);
/* tp_table_fork_child: in a child, idle slots are forgotten and leased
 * ones become INHERITED (the program's own, as with plain libpq). */
void tp_table_fork_child(void);

/* ---- pool.c ------------------------------------------------------------ */

/* tp_pool_connect returns a pooled PGconn for a prepared string, or NULL
 * (the caller passes through to libpq). */
PGconn *tp_pool_connect(const tp_conn *c);

/* tp_pool_finish gives pg back when the pool made it and returns 1, or
 * returns 0 when pg is not the pool's (the caller calls libpq's PQfinish). */
int tp_pool_finish(PGconn *pg);

#endif
