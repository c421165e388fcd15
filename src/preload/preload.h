/* preload.h - libtether-preload: libpq's connection functions interposed so
 * that an unmodified program's connect-per-request takes pooled
 * connections (docs/preload.md). Internal to the preload library.
 *
 * Modules: real.c (libpq's own functions, found with dlsym(RTLD_NEXT), and
 * the pass-through guard), config.c (the TETHER_PRELOAD_* environment),
 * conn.c (connection strings: from the PQconnectdbParams arrays and
 * PQsetdbLogin arguments, the pooled form, the key and the libpq-only
 * form), creds.c (what libpq takes from the environment and the password
 * file; the keyed hash standing for a secret in a key), table.c (the
 * PGconns the pool made and which of them are handed out), pools.c (the
 * process's pools by key), pool.c (fork, acquire and give back),
 * interpose.c (the exported PQ* functions). */
#ifndef TETHER_PRELOAD_H
#define TETHER_PRELOAD_H

#include <libpq-events.h>
#include <pthread.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "tether_pq.h"

#define TETHER__PRELOAD_EXPORT __attribute__((visibility("default")))

/* ---- real.c ------------------------------------------------------------ */

/* libpq's own functions (dlsym(RTLD_NEXT)); tether__preload_real_resolve fills
 * them once and returns 0, or -1 when one is missing (the message is printed).
 */
typedef struct tether__preload_real_fns {
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
    PQconninfoOption *(*conninfo)(PGconn *);
    int (*register_event)(PGconn *, PGEventProc, const char *, void *);
    PGresult *(*exec)(PGconn *, const char *);
    int (*send_query)(PGconn *, const char *);
    PGresult *(*exec_params)(PGconn *, const char *, int, const Oid *,
                             const char *const *, const int *, const int *,
                             int);
    int (*send_query_params)(PGconn *, const char *, int, const Oid *,
                             const char *const *, const int *, const int *,
                             int);
    PGresult *(*prepare)(PGconn *, const char *, const char *, int,
                         const Oid *);
    int (*send_prepare)(PGconn *, const char *, const char *, int, const Oid *);
    PGresult *(*fn)(PGconn *, int, int *, int *, int, const PQArgBlock *, int);
} tether__preload_real_fns;

extern tether__preload_real_fns tether__preload_real;
int tether__preload_real_resolve(void);

/* While a thread is inside a real libpq function called from here (libpq's
 * PQconnectdb calls PQconnectStart, its PQreset calls PQconnectPoll, all
 * through the interposed names), the interposers pass straight through. */
extern _Thread_local int tether__preload_passing;

/* What the pq driver calls instead of libpq's names when it is built into
 * the preload library (redirect.h): the real functions, never the pool. */
PGconn *tether__preload_real_PQconnectStartParams(const char *const *keys,
                                                  const char *const *vals,
                                                  int expand);
PostgresPollingStatusType tether__preload_real_PQconnectPoll(PGconn *pg);
void tether__preload_real_PQfinish(PGconn *pg);

/* ---- config.c ---------------------------------------------------------- */

typedef struct tether__preload_config {
    int off;          /* TETHER_PRELOAD=off: everything passes through */
    int log;          /* TETHER_PRELOAD_LOG=1: a line per decision */
    int pool_max;     /* TETHER_PRELOAD_POOL_MAX, default 10 */
    int idle_max;     /* TETHER_PRELOAD_IDLE_MAX, default 10 */
    char idle[32];    /* TETHER_PRELOAD_IDLE_TIMEOUT, default "1s" */
    char wait[32];    /* TETHER_PRELOAD_WAIT, default "30s" */
    char max_age[32]; /* TETHER_PRELOAD_MAX_AGE, default "10s" */
    int64_t max_age_ms;
    char recheck[32]; /* TETHER_PRELOAD_RECHECK, default "100ms" */
    int64_t recheck_ms;
    const char *reset; /* TETHER_PRELOAD_RESET_QUERY, default DISCARD ALL
                          (TETHER__PRELOAD_RESET_KEEP when keep_prepared);
                          "" for none */
    int keep_prepared; /* TETHER_PRELOAD_KEEP_PREPARED, default on (and no reset
                          query named): prepared statements stay */
    const char *match; /* TETHER_PRELOAD_MATCH, default "*" */
    int reset_always;  /* TETHER_PRELOAD_RESET_ALWAYS=on: a give-back is
                          reset even when the program changed nothing */
} tether__preload_config;

/* The reset with TETHER_PRELOAD_KEEP_PREPARED: DISCARD ALL without its
 * DEALLOCATE ALL, so that the program's prepared statements stay
 * (docs/preload.md). */
#define TETHER__PRELOAD_RESET_KEEP                                             \
    "CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; "    \
    "SELECT pg_advisory_unlock_all(); DISCARD PLANS; DISCARD TEMP; "           \
    "DISCARD SEQUENCES"

/* tether__preload_config_get returns the configuration, read once from the
 * environment. A bad value is reported on stderr naming the variable and turns
 * the preload off (every connect passes through to libpq). */
const tether__preload_config *tether__preload_config_get(void);

/* tether__preload_log prints "tether-preload: ..." on stderr when
 * TETHER_PRELOAD_LOG is set. Never give it a password. */
void tether__preload_log(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* ---- conn.c ------------------------------------------------------------ */

/* tether__preload_conn_from_params renders PQconnectdbParams' arrays as a
 * key=value string (malloc'd), later keywords winning, a dbname holding a
 * key=value string inlined when expand is set. NULL when it cannot be pooled (a
 * URI in dbname) or out of memory. */
char *tether__preload_conn_from_params(const char *const *keys,
                                       const char *const *vals, int expand);

/* tether__preload_conn_from_setdb does the same for PQsetdbLogin's arguments.
 */
char *tether__preload_conn_from_setdb(const char *host, const char *port,
                                      const char *options, const char *dbname,
                                      const char *user, const char *password);

/* A growing string; on allocation failure ok becomes 0. */
typedef struct tether__preload_sb {
    char *s;
    size_t n, cap;
    int ok;
} tether__preload_sb;
void tether__preload_sb_put(tether__preload_sb *b, const char *s, size_t n);
void tether__preload_sb_str(tether__preload_sb *b, const char *s);
void tether__preload_sb_kv(tether__preload_sb *b, const char *key,
                           const char *val); /* " k='v'" */
char *tether__preload_sb_done(
    tether__preload_sb *b); /* the string (malloc'd) or NULL */

/* A program's connection string, parsed: what libpq would connect with
 * (the program's string, then what libpq takes from the environment for
 * the keywords it leaves out), the string to pool (that, with tether's
 * defaults from the environment added where the program set none), the
 * pool's key (the secrets hashed, the password file's identity added),
 * the masked display form (logs, TETHER_PRELOAD_MATCH) and whether it may
 * be pooled at all. */
typedef struct tether__preload_conn {
    char *pooled;      /* NULL when not to be pooled */
    char *key;         /* the pool's key: never a secret in clear */
    uint64_t key_hash; /* of key: its bucket among the pools */
    char *asked;       /* what libpq would connect with, libpq keywords only */
    char *user, *db, *options; /* what the session must be */
    char *display;             /* masked, never a password */
    char *libpq;               /* without tether's keywords, for a pass-through;
                                  NULL when the original string has none */
    int keep_prepared;         /* the reset is TETHER__PRELOAD_RESET_KEEP: the
                                  program's statements stay (prep.c) */
    int own_reset;             /* the preload resets at give-back, off the
                                  program's thread (giveback.c); 0 when the string
                                  names tether_reset_query: the pool does */
} tether__preload_conn;

/* tether__preload_conn_prepare fills c from conninfo. Returns 0 (c->pooled may
 * still be NULL: replication, no match, off) or -1 (not parsable by tether:
 * pass through as it is). */
int tether__preload_conn_prepare(const char *conninfo, tether__preload_conn *c);
/* tether__preload_conn_get is tether__preload_conn_prepare without a copy:
 * the thread's kept outcome for conninfo when it still holds (valid until
 * this thread's next call), else own filled (the caller frees it), or
 * NULL (not parsable by tether). */
const tether__preload_conn *tether__preload_conn_get(const char *conninfo,
                                                     tether__preload_conn *own);
void tether__preload_conn_free(tether__preload_conn *c);

struct tether__conninfo;

/* ---- creds.c ----------------------------------------------------------- */

/* tether__preload_creds_add appends to b, for each keyword ci leaves out, the
 * value libpq would take from the environment (PGUSER, PGPASSWORD, PGOPTIONS,
 * ...; the user name of the process for user). Returns 0, or -1 with
 * *why set when libpq would use what the preload cannot know. */
int tether__preload_creds_add(const struct tether__conninfo *ci,
                              tether__preload_sb *b, const char **why);

/* tether__preload_creds_passfile appends the identity of the password file
 * libpq would read for eff (none when eff has a password) to b. Returns 0, or
 * -1 with *why set when the file cannot be read. */
int tether__preload_creds_passfile(const struct tether__conninfo *eff,
                                   tether__preload_sb *b, const char **why);

/* tether__preload_hash_hex writes a keyed hash of s (32 hex digits and a NUL)
 * to out: the key is random per process, so the hash stands for a secret in a
 * pool's key and says nothing outside this process. */
void tether__preload_hash_hex(const char *s, char out[33]);

/* ---- scan.c ------------------------------------------------------------ */

/* tether__preload_sql_sets_custom returns 1 when sql may make a custom setting
 * (SET a.b, set_config): a connection it ran on is not reused. */
int tether__preload_sql_sets_custom(const char *sql);

/* tether__preload_sql_clean returns 1 when sql cannot change the session:
 * one SELECT without '(' or INTO, or one transaction command (BEGIN,
 * START, COMMIT, END, ROLLBACK, ABORT, SAVEPOINT, RELEASE) without '('.
 * Anything else, and NULL, gives 0. */
int tether__preload_sql_clean(const char *sql);

/* ---- table.c ----------------------------------------------------------- */

enum {
    TETHER__PRELOAD_NONE = 0,
    TETHER__PRELOAD_LEASED,
    TETHER__PRELOAD_IDLE,
    TETHER__PRELOAD_INHERITED
};

struct tether__preload_pool;

/* ---- giveback.c -------------------------------------------------------- */

/* tether__preload_giveback rolls back pg's open transaction (rare: on this
 * thread), sends its reset query and leaves the rest to the collector
 * thread, which releases lease once the results came back clean and
 * closes it otherwise. Returns 0 (handed over: the caller touches pg no
 * more), 1 when pg is clean already (no reset query, or it ran here: no
 * room on the collector's list) and the caller releases it, -1 when pg
 * must be closed (the caller discards it). */
int tether__preload_giveback(PGconn *pg, tether_lease *lease, const void *owner,
                             const char *reset);
/* tether__preload_giveback_reclaim finishes on this thread the give-back
 * of one connection of owner's whose reset is still being collected: a
 * connect then finds it idle instead of making a new one. Returns 1 when
 * there was one. */
int tether__preload_giveback_reclaim(const void *owner);
/* tether__preload_giveback_queued: how many give-backs the collector has
 * (read without its lock: a hint, for skipping reclaim's work). */
int tether__preload_giveback_queued(void);
void tether__preload_giveback_lock(void); /* fork: in the locks' order */
void tether__preload_giveback_unlock(void);
/* tether__preload_giveback_round_lock waits for the collector to end its
 * round of releases; fork takes it first of all (pool.c). */
void tether__preload_giveback_round_lock(void);
void tether__preload_giveback_round_unlock(void);
void tether__preload_giveback_fork_child(void);

/* ---- prep.c ------------------------------------------------------------ */

/* The statements a program prepared on a pooled connection (prep.c): a
 * list, kept in the connection's slot under the table's lock. */
typedef struct tether__preload_prep tether__preload_prep;

enum {
    TETHER__PRELOAD_PREP_NONE = 0, /* the name is not prepared */
    TETHER__PRELOAD_PREP_SAME,     /* prepared with this text and types */
    TETHER__PRELOAD_PREP_OTHER     /* prepared with another text or types */
};

/* tether__preload_prep_find says what list holds of name. */
int tether__preload_prep_find(const tether__preload_prep *list,
                              const char *name, const char *query, int n,
                              const Oid *types);
/* tether__preload_prep_add records name; -1 when it cannot (out of memory,
 * or the list is full: the caller then treats it as unknown). */
int tether__preload_prep_add(tether__preload_prep **list, const char *name,
                             const char *query, int n, const Oid *types);
void tether__preload_prep_drop(tether__preload_prep **list, const char *name);
/* tether__preload_prep_mark sets name's (NULL: every statement's) mark of
 * use in the current lease. */
void tether__preload_prep_mark(tether__preload_prep *list, const char *name,
                               int used);
/* tether__preload_prep_take_stale drops from list the statements the
 * program has not prepared in this lease and returns the SQL that
 * deallocates them on pg ("DEALLOCATE a; ...", malloc'd), or NULL when
 * there are none. */
char *tether__preload_prep_take_stale(tether__preload_prep **list, PGconn *pg);
void tether__preload_prep_free(tether__preload_prep **list);
/* tether__preload_sql_touches_prepared: sql may prepare, deallocate or
 * discard statements (the words PREPARE, DEALLOCATE, DISCARD). */
int tether__preload_sql_touches_prepared(const char *sql);

/* One PGconn the pool made, once handed out. */
typedef struct tether__preload_slot {
    PGconn *pg;
    tether_lease *lease;               /* while leased */
    struct tether__preload_pool *pool; /* while leased */
    char *asked;         /* while leased: for PQconninfo (malloc'd) */
    char *settings;      /* the server's settings at its first checkout */
    int state;           /* TETHER__PRELOAD_LEASED, TETHER__PRELOAD_IDLE or
                            TETHER__PRELOAD_INHERITED */
    const char *tainted; /* why it must be closed, never reused (PQreset,
                            an event procedure, a custom setting) */
    PQnoticeReceiver rx; /* the driver's receiver at checkout */
    int64_t born_ms;     /* first handed out (monotonic ms) */
    int too_many_idle;   /* at PQfinish: the idle cap is reached */
    tether__preload_prep *prep; /* prepared on it by the program (prep.c) */
    int prep_unknown; /* the program prepared or dropped statements the
                         preload could not follow: the give-back
                         deallocates them all */
    int dirty;        /* this lease sent something that may have changed
                         the session (scan.c): the give-back resets it */
} tether__preload_slot;

/* tether__preload_table_lease records pg as leased (asked is taken over);
 * returns the time pg was first handed out (now for a new one). */
int64_t tether__preload_table_lease(PGconn *pg, tether_lease *lease,
                                    PQnoticeReceiver rx,
                                    struct tether__preload_pool *pool,
                                    char *asked);
/* tether__preload_table_finish: for PQfinish. LEASED: *out gets the slot (the
 * caller frees out->asked), which becomes IDLE; INHERITED: removed; returns the
 * state before (TETHER__PRELOAD_NONE: unknown). */
int tether__preload_table_finish(PGconn *pg, tether__preload_slot *out);
int tether__preload_table_state(PGconn *pg);
/* tether__preload_table_taint: pg, when leased, is closed at PQfinish for
 * reason why; returns 1 when pg is leased. */
int tether__preload_table_taint(PGconn *pg, const char *why);
/* tether__preload_table_settings records settings for pg the first time; later,
 * returns 1 when they differ from the first (0 when the same). */
int tether__preload_table_settings(PGconn *pg, const char *settings);
/* tether__preload_table_asked: a PQconninfoParse of what the program asked for
 * on a leased pg, or NULL when pg is not leased. */
PQconninfoOption *tether__preload_table_asked(PGconn *pg);
int64_t tether__preload_now_ms(void);
void tether__preload_table_forget(PGconn *pg); /* the driver closed pg */
/* tether__preload_table_prep: what a leased pg holds of the statement name
 * (TETHER__PRELOAD_PREP_*), or -1 when it is not leased, its list is
 * unknown, or statements are not kept (a reset query of the user's). */
int tether__preload_table_prep(PGconn *pg, const char *name, const char *query,
                               int n, const Oid *types);
/* tether__preload_table_prep_set records name as prepared on a leased pg
 * with query and types (replacing what it had of name). */
void tether__preload_table_prep_set(PGconn *pg, const char *name,
                                    const char *query, int n, const Oid *types);
/* tether__preload_table_prep_unknown: a leased pg's list can no longer be
 * trusted: emptied, and the give-back deallocates everything. */
void tether__preload_table_prep_unknown(PGconn *pg);
/* tether__preload_table_prep_stale: for a leased pg whose statements are
 * kept, tether__preload_prep_take_stale on its list (NULL otherwise). */
char *tether__preload_table_prep_stale(PGconn *pg);
/* tether__preload_table_dirty: a leased pg ran something that may have
 * changed its session: its give-back runs the reset query. */
void tether__preload_table_dirty(PGconn *pg);
void tether__preload_table_lock(void);
void tether__preload_table_unlock(void);
/* tether__preload_table_fork_child: in a child, idle slots are forgotten and
 * leased ones become INHERITED (the program's own, as with plain libpq). */
void tether__preload_table_fork_child(void);

/* ---- pools.c ----------------------------------------------------------- */

/* One pool of the process, by key. leased counts the connections of this
 * pool the program holds (never above max: a connect beyond goes to libpq
 * directly, docs/preload.md "A program never waits on the pool's size"). */
typedef struct tether__preload_pool {
    char *key;
    tether_pool *pool;
    int max;
    int keep_prepared;   /* see tether__preload_conn */
    int own_reset;       /* see tether__preload_conn */
    int leased;          /* __atomic_* */
    int64_t used_ms;     /* last reserved (under the pools' lock) */
    int64_t released_ms; /* last reservation ended (__atomic_*) */
    /* The server's last answer (pool.c), under mu: */
    pthread_mutex_t mu;
    int checking;       /* a thread is asking */
    int64_t checked_ms; /* when (0: never) */
    int may_login;
    char *settings; /* what ALTER DATABASE/ROLE ... SET gave then */
    struct tether__preload_pool *next;
} tether__preload_pool;

/* tether__preload_pools_reserve returns the pool for c (made on first use) with
 * one of its connections reserved for this connect, or NULL: *full when the
 * program holds them all, else no pool could be made. */
tether__preload_pool *
tether__preload_pools_reserve(const tether__preload_conn *c, int *full);
/* tether__preload_pools_unreserve gives the reservation back (after the
 * connection's release or discard, or a failed acquire). */
void tether__preload_pools_unreserve(tether__preload_pool *p);
void tether__preload_pools_lock(void);
void tether__preload_pools_unlock(void);
void tether__preload_pools_fork_child(void);

/* ---- pool.c ------------------------------------------------------------ */

/* tether__preload_pool_connect returns a pooled PGconn for a prepared string,
 * or NULL (the caller passes through to libpq). */
PGconn *tether__preload_pool_connect(const tether__preload_conn *c);

/* tether__preload_pool_finish gives pg back when the pool made it and returns
 * 1, or returns 0 when pg is not the pool's (the caller calls libpq's
 * PQfinish). */
int tether__preload_pool_finish(PGconn *pg);

#endif
