/*
 * tether_sim.h - test support for programs that use tether: a simulated
 * driver (no I/O, faults on demand) and a virtual clock, so a program's own
 * tests can drive pools, connectors and policies deterministically. Every
 * options struct of tether.h takes a clock; a pool takes the sim driver.
 */
#ifndef TETHER_SIM_H
#define TETHER_SIM_H

#include "tether.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Virtual clock                                                            */
/* ------------------------------------------------------------------------ */

/* A virtual clock for tests: time moves only when advanced or slept on.
 * Thread-safe. */
typedef struct tether_vclock tether_vclock;

/* tether_vclock_create makes a virtual clock reading start_ns. */
TETHER_API tether_vclock *tether_vclock_create(int64_t start_ns);

/* tether_vclock_destroy frees a virtual clock (NULL is accepted). */
TETHER_API void tether_vclock_destroy(tether_vclock *vc);

/* tether_vclock_clock returns the tether_clock view of vc; sleeping on it
 * advances the virtual time by the amount slept. */
TETHER_API const tether_clock *tether_vclock_clock(tether_vclock *vc);

/* tether_vclock_advance moves virtual time forward by ns (ns >= 0). */
TETHER_API void tether_vclock_advance(tether_vclock *vc, int64_t ns);

/* ------------------------------------------------------------------------ */
/* Simulated driver                                                         */
/* ------------------------------------------------------------------------ */

/* tether_driver_sim returns the simulation driver: no I/O, faults on demand
 * (deterministic tests and the cycle benchmark). Its driver_ctx is a
 * tether_sim. */
TETHER_API const tether_driver *tether_driver_sim(void);

/* Sim options. Defaults: no latency, no faults, unlimited connections, seed
 * 0, real clock. Rates are probabilities in [0, 1] drawn per event. */
typedef struct tether_sim_opts {
    size_t size;                /* sizeof, set by tether_sim_opts_init */
    int64_t connect_latency_ms; /* each connect takes this long (on clock) */
    int max_connections;        /* beyond: connects fail throttled; 0 = no
                                   limit */
    double refuse_rate;         /* connect refused (transient) */
    double timeout_rate;        /* connect hangs until its budget ends */
    double auth_fail_rate;      /* connect fails authentication (permanent) */
    double validate_fail_rate;  /* round-trip validation fails */
    double break_in_use_rate;   /* a leased connection breaks (seen by the
                                   liveness check on release / next use) */
    double break_idle_rate;     /* an idle connection breaks */
    double reset_fail_rate;     /* reset on release fails */
    uint64_t seed;
    const tether_clock *clock;
} tether_sim_opts;

/* tether_sim_opts_init fills o with the documented defaults and sets
 * o->size (a macro: it passes the struct's sizeof as the caller was
 * compiled). */
TETHER_API void tether_sim_opts_init_sized(tether_sim_opts *o, size_t size);
#define tether_sim_opts_init(o)                                                \
    tether_sim_opts_init_sized((o), sizeof(tether_sim_opts))

/* A simulated server and its connections. Thread-safe. */
typedef struct tether_sim tether_sim;

/* tether_sim_create makes a simulated server. */
TETHER_API int tether_sim_create(tether_sim **out, const tether_sim_opts *o,
                                 tether_error *err);

/* tether_sim_destroy frees sim (NULL is accepted); its connections must be
 * closed first. */
TETHER_API void tether_sim_destroy(tether_sim *sim);

/* tether_sim_set_down makes the server refuse every connect (down = 1) or
 * accept them again (down = 0). */
TETHER_API void tether_sim_set_down(tether_sim *sim, int down);

/* tether_sim_fail_next makes the next n connects fail with code and class
 * (for instance TETHER_EAUTH, permanent), before any random fault. */
TETHER_API void tether_sim_fail_next(tether_sim *sim, int n, int code,
                                     tether_class cls);

/* tether_sim_fail_next_sqlstate is tether_sim_fail_next with the SQLSTATE
 * the failures report (5 characters; NULL or "": the code's usual one:
 * 28P01 for TETHER_EAUTH, 53300 for TETHER_ETHROTTLED, else 08006). For
 * instance "57P03", a server starting up or shutting down. */
TETHER_API void tether_sim_fail_next_sqlstate(tether_sim *sim, int n, int code,
                                              tether_class cls,
                                              const char *sqlstate);

/* tether_sim_break_all breaks every open connection (like terminating every
 * backend): each is seen as broken by its next liveness check. */
TETHER_API void tether_sim_break_all(tether_sim *sim);

/* tether_sim_fatal_all marks every open connection as having seen a fatal
 * server event (shutdown, failover): the pool is cleared when one returns. */
TETHER_API void tether_sim_fatal_all(tether_sim *sim);

/* Counters of a simulated server. */
typedef struct tether_sim_stats {
    size_t size;        /* what the library filled (the caller's sizeof) */
    uint64_t connects;  /* connect attempts */
    uint64_t connected; /* successful connects */
    uint64_t open;      /* connections open now */
    uint64_t closed;
    uint64_t validations; /* round trips */
    uint64_t probes;      /* liveness checks that asked for the socket
                             probe (counted; a sim breaks in memory) */
    uint64_t resets;
    uint64_t uses; /* tether_sim_use calls */
} tether_sim_stats;

/* tether_sim_stats_get copies the counters of sim into out. */
TETHER_API void tether_sim_stats_get_sized(tether_sim *sim,
                                           tether_sim_stats *out, size_t size);
#define tether_sim_stats_get(sim, out)                                         \
    tether_sim_stats_get_sized((sim), (out), sizeof(tether_sim_stats))

/* tether_sim_use does a pretend query on a sim connection (the handle from
 * tether_lease_handle): 0, or TETHER_EBROKEN when the connection broke (or
 * breaks now, at break_in_use_rate), with err filled. */
TETHER_API int tether_sim_use(void *handle, tether_error *err);

/* tether_sim_txn opens (open = 1, a BEGIN) or ends (open = 0, a COMMIT)
 * a transaction block on a sim connection, as the driver's
 * in_transaction hook reports it (transaction affinity, docs/pool.md). A
 * reset on release rolls an open one back (TETHER_ROLLED_BACK). Returns 0,
 * TETHER_EINVAL for NULL, TETHER_EBROKEN on a broken connection. */
TETHER_API int tether_sim_txn(void *handle, int open);

/* tether_sim_conn_id returns the unique id of a sim connection handle. */
TETHER_API uint64_t tether_sim_conn_id(void *handle);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_SIM_H */
