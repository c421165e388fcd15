/* sim.c - the simulation driver: a pretend server with faults on demand,
 * for deterministic pool tests and the acquire/release cycle benchmark.
 *
 * A tether_sim is the server. Its mutex guards the connect path (the RNG,
 * the fail_next queue, the connect counters and the intrusive list of
 * connections); connect is not a hot path. The hot path (alive, reset,
 * tether_sim_use) touches only the connection: its atomic flags and its own
 * counters, in a cache-line-aligned struct, so threads working on different
 * connections share nothing. The sim's lock is taken there only to draw a
 * fault whose rate is > 0.
 *
 * A connection is driven by one thread at a time (like a PGconn: the pool
 * hands it over with a lease), so its counters have a single writer and are
 * bumped with a relaxed load and store (a plain add, no locked instruction);
 * tether_sim_stats_get reads them with relaxed loads and adds the totals
 * carried over from closed connections. The broken and fatal flags may be
 * set by any thread (break_all, fatal_all), hence atomics.
 *
 * Connections still connecting (latency, timeout_rate) are on the list and
 * hold a server slot (like a PostgreSQL backend during startup) but count as
 * open and connected only once the connect completes. */
#include "driver.h"
#include "internal.h"
#include "tether_sim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_LINE 64

/* Hot-path faults whose rate is > 0 (sim_conn.faults). */
enum {
    FAULT_IDLE = 1u,  /* break_idle_rate */
    FAULT_USE = 2u,   /* break_in_use_rate */
    FAULT_RESET = 4u, /* reset_fail_rate */
    FAULT_VALID = 8u  /* validate_fail_rate */
};

/* Outcomes of the connect-path checks (besides a negative error). */
enum { ADMIT_NOW, ADMIT_LATER, ADMIT_NEVER };

/* One queued tether_sim_fail_next request. */
typedef struct fail_req {
    int n;
    int code;
    tether_class cls;
    char sqlstate[6]; /* "": the code's usual one */
} fail_req;

typedef struct sim_conn sim_conn;

struct sim_conn {
    /* Owner thread only (plus readers of the atomics). */
    _Atomic int broken;
    _Atomic int fatal;
    unsigned faults;
    int in_txn;
    _Atomic int txn_open; /* tether_sim_txn: a transaction block is open */
    int pending;          /* still connecting; written under the sim's lock */
    int64_t wake_ms;      /* connect completes at this time; -1 never */
    _Atomic uint64_t resets;
    _Atomic uint64_t uses;
    _Atomic uint64_t validations;
    _Atomic uint64_t probes;
    uint64_t id;
    tether_sim *sim;
    /* The sim's list of connections, under the sim's lock. */
    sim_conn *prev;
    sim_conn *next;
};

struct tether_sim {
    tether_sim_opts o; /* read-only after create */
    const tether_clock *clock;
    unsigned faults;
    pthread_mutex_t lock;
    /* Everything below is guarded by lock. */
    tether__rng rng;
    int down;
    fail_req *fails; /* FIFO: fails[fail_head .. fail_len) */
    int fail_head;
    int fail_len;
    int fail_cap;
    uint64_t slots;      /* connections open or connecting */
    tether_sim_stats st; /* connects..closed; hot counters of closed ones */
    sim_conn *conns;
};

/* Process-wide, so ids are unique across sims. */
static _Atomic uint64_t next_conn_id = 1;

/* ---- small helpers ---------------------------------------------------- */

/* bump adds one to a counter that only the connection's owner writes. */
static inline void bump(_Atomic uint64_t *c) {
    uint64_t v = atomic_load_explicit(c, memory_order_relaxed);
    atomic_store_explicit(c, v + 1, memory_order_relaxed);
}

static inline uint64_t load(_Atomic uint64_t *c) {
    return atomic_load_explicit(c, memory_order_relaxed);
}

static inline int is_broken(sim_conn *c) {
    return atomic_load_explicit(&c->broken, memory_order_relaxed);
}

static inline void set_flag(_Atomic int *f) {
    atomic_store_explicit(f, 1, memory_order_relaxed);
}

/* chance_locked draws "does an event of probability rate happen"; draws
 * only for 0 < rate < 1 so zero rates leave the sequence alone. Call it
 * with sim->lock held. */
static int chance_locked(tether_sim *sim, double rate) {
    if (rate <= 0.0)
        return 0;
    if (rate >= 1.0)
        return 1;
    return tether__rng_double(&sim->rng) < rate;
}

/* chance is chance_locked taking the sim's lock (hot path, rate > 0); out
 * of line so that the zero-rate path stays a flag test. */
__attribute__((noinline)) static int chance(tether_sim *sim, double rate) {
    pthread_mutex_lock(&sim->lock);
    int hit = chance_locked(sim, rate);
    pthread_mutex_unlock(&sim->lock);
    return hit;
}

/* maybe_break breaks c with probability rate (unless already broken). */
__attribute__((noinline)) static void maybe_break(sim_conn *c, double rate) {
    if (!is_broken(c) && chance(c->sim, rate))
        set_flag(&c->broken);
}

static int broken_error(tether_error *err, const char *what) {
    int rc = tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                              "server closed the connection unexpectedly "
                              "(sim, %s)",
                              what);
    if (err)
        memcpy(err->sqlstate, "08006", 6);
    return rc;
}

/* ---- options ---------------------------------------------------------- */

/* sim_defaults fills a whole tether_sim_opts with the defaults. */
static void sim_defaults(tether_sim_opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->clock = NULL;
}

void tether_sim_opts_init_sized(tether_sim_opts *o, size_t size) {
    tether_sim_opts d;
    sim_defaults(&d);
    tether__sized_out(o, size, &d, sizeof(d));
}

static int bad_rate(tether_error *err, const char *field, double v) {
    return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                            "sim: bad %s = %g: must be in [0, 1]", field, v);
}

static int validate_opts(const tether_sim_opts *o, tether_error *err) {
    const struct {
        const char *name;
        double v;
    } rates[] = {
        {"refuse_rate", o->refuse_rate},
        {"timeout_rate", o->timeout_rate},
        {"auth_fail_rate", o->auth_fail_rate},
        {"validate_fail_rate", o->validate_fail_rate},
        {"break_in_use_rate", o->break_in_use_rate},
        {"break_idle_rate", o->break_idle_rate},
        {"reset_fail_rate", o->reset_fail_rate},
    };
    for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
        if (!(rates[i].v >= 0.0 && rates[i].v <= 1.0))
            return bad_rate(err, rates[i].name, rates[i].v);
    if (o->connect_latency_ms < 0)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "sim: bad connect_latency_ms = %lld: must be "
                                ">= 0",
                                (long long)o->connect_latency_ms);
    if (o->max_connections < 0)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "sim: bad max_connections = %d: must be >= 0",
                                o->max_connections);
    return 0;
}

static unsigned hot_faults(const tether_sim_opts *o) {
    return (o->break_idle_rate > 0.0 ? FAULT_IDLE : 0u) |
           (o->break_in_use_rate > 0.0 ? FAULT_USE : 0u) |
           (o->reset_fail_rate > 0.0 ? FAULT_RESET : 0u) |
           (o->validate_fail_rate > 0.0 ? FAULT_VALID : 0u);
}

/* ---- create / destroy ------------------------------------------------- */

int tether_sim_create(tether_sim **out, const tether_sim_opts *o,
                      tether_error *err) {
    tether_sim_opts defaults;
    if (!out)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "sim: out is NULL");
    *out = NULL;
    sim_defaults(&defaults);
    int rc = TETHER__SIZED_IN(defaults, o, "tether_sim_opts", err);
    if (rc)
        return rc;
    o = &defaults;
    rc = validate_opts(o, err);
    if (rc)
        return rc;
    tether_sim *sim = tether__calloc(1, sizeof(*sim));
    if (!sim || pthread_mutex_init(&sim->lock, NULL) != 0) {
        tether__free(sim);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "sim: out of memory");
    }
    sim->o = *o;
    sim->clock = tether__clock(o->clock);
    sim->faults = hot_faults(o);
    tether__rng_seed(&sim->rng, o->seed);
    *out = sim;
    return 0;
}

/* Connections still open are not touched (nor freed): close them first;
 * closing one after its sim is destroyed is undefined. */
void tether_sim_destroy(tether_sim *sim) {
    if (!sim)
        return;
    pthread_mutex_destroy(&sim->lock);
    tether__free(sim->fails);
    tether__free(sim);
}

/* ---- control ---------------------------------------------------------- */

void tether_sim_set_down(tether_sim *sim, int down) {
    if (!sim)
        return;
    pthread_mutex_lock(&sim->lock);
    sim->down = down != 0;
    pthread_mutex_unlock(&sim->lock);
}

/* fail_push appends a request to the queue (lock held); 0 or -1 (no
 * memory: the request is dropped). */
static int fail_push(tether_sim *sim, fail_req r) {
    if (sim->fail_head == sim->fail_len)
        sim->fail_head = sim->fail_len = 0;
    if (sim->fail_len == sim->fail_cap && sim->fail_head > 0) {
        sim->fail_len -= sim->fail_head;
        memmove(sim->fails, sim->fails + sim->fail_head,
                (size_t)sim->fail_len * sizeof(*sim->fails));
        sim->fail_head = 0;
    }
    if (sim->fail_len == sim->fail_cap) {
        int cap = sim->fail_cap ? sim->fail_cap * 2 : 4;
        fail_req *q = tether__realloc(sim->fails, (size_t)cap * sizeof(*q));
        if (!q)
            return -1;
        sim->fails = q;
        sim->fail_cap = cap;
    }
    sim->fails[sim->fail_len++] = r;
    return 0;
}

/* Requests queue up: the next n connects fail as asked, after the ones
 * queued before. n <= 0 does nothing; code >= 0 means TETHER_ECONNECT;
 * class NONE is filled in as classify would. */
void tether_sim_fail_next(tether_sim *sim, int n, int code, tether_class cls) {
    tether_sim_fail_next_sqlstate(sim, n, code, cls, NULL);
}

void tether_sim_fail_next_sqlstate(tether_sim *sim, int n, int code,
                                   tether_class cls, const char *sqlstate) {
    if (!sim || n <= 0)
        return;
    fail_req r = {n, code < 0 ? code : TETHER_ECONNECT, cls, ""};
    if (sqlstate)
        snprintf(r.sqlstate, sizeof(r.sqlstate), "%s", sqlstate);
    pthread_mutex_lock(&sim->lock);
    (void)fail_push(sim, r);
    pthread_mutex_unlock(&sim->lock);
}

static void mark_all(tether_sim *sim, int fatal) {
    if (!sim)
        return;
    pthread_mutex_lock(&sim->lock);
    for (sim_conn *c = sim->conns; c; c = c->next)
        set_flag(fatal ? &c->fatal : &c->broken);
    pthread_mutex_unlock(&sim->lock);
}

void tether_sim_break_all(tether_sim *sim) {
    mark_all(sim, 0);
}

void tether_sim_fatal_all(tether_sim *sim) {
    mark_all(sim, 1);
}

static void sim_stats(tether_sim *sim, tether_sim_stats *out) {
    memset(out, 0, sizeof(*out));
    if (!sim)
        return;
    pthread_mutex_lock(&sim->lock);
    *out = sim->st;
    for (sim_conn *c = sim->conns; c; c = c->next) {
        out->validations += load(&c->validations);
        out->probes += load(&c->probes);
        out->resets += load(&c->resets);
        out->uses += load(&c->uses);
    }
    pthread_mutex_unlock(&sim->lock);
}

/* ---- classification --------------------------------------------------- */

static tether_class class_of(int code) {
    switch (code) {
    case TETHER_ECONNECT:
    case TETHER_ETIMEDOUT:
    case TETHER_EBROKEN:
        return TETHER_CLASS_TRANSIENT;
    case TETHER_ETHROTTLED:
        return TETHER_CLASS_THROTTLED;
    default: /* TETHER_EAUTH and anything else */
        return TETHER_CLASS_PERMANENT;
    }
}

static void sim_classify(void *conn, tether_error *err) {
    (void)conn;
    if (err && err->cls == TETHER_CLASS_NONE)
        err->cls = class_of(err->code);
}

/* ---- connect ---------------------------------------------------------- */

static int refuse(tether_error *err, int code, tether_class cls,
                  const char *sqlstate, const char *msg) {
    tether_error_set(err, code, cls, "%s", msg);
    if (err) {
        memcpy(err->sqlstate, sqlstate, 6);
        err->not_sent = 1;
    }
    return code;
}

/* fail_pop consumes one queued failure (lock held); 1 when there was one. */
static int fail_pop(tether_sim *sim, fail_req *r) {
    if (sim->fail_head == sim->fail_len)
        return 0;
    fail_req *f = &sim->fails[sim->fail_head];
    *r = *f;
    if (--f->n == 0)
        sim->fail_head++;
    return 1;
}

/* fail_next_error reports a queued failure like the server would. */
static int fail_next_error(const fail_req *f, tether_error *err) {
    char msg[128];
    const char *state = f->sqlstate[0]                 ? f->sqlstate
                        : f->code == TETHER_EAUTH      ? "28P01"
                        : f->code == TETHER_ETHROTTLED ? "53300"
                                                       : "08006";
    snprintf(msg, sizeof(msg), "%s (sim fail_next)", tether_strerror(f->code));
    return refuse(err, f->code,
                  f->cls != TETHER_CLASS_NONE ? f->cls : class_of(f->code),
                  state, msg);
}

/* admit runs the connect-path checks in order (lock held): a negative
 * error (err filled), or ADMIT_NOW / ADMIT_LATER / ADMIT_NEVER. */
static int admit(tether_sim *sim, tether_error *err) {
    const tether_sim_opts *o = &sim->o;
    fail_req f;
    if (fail_pop(sim, &f))
        return fail_next_error(&f, err);
    if (sim->down)
        return refuse(err, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT, "08001",
                      "connection refused (sim down)");
    if (o->max_connections > 0 && sim->slots >= (uint64_t)o->max_connections)
        return refuse(err, TETHER_ETHROTTLED, TETHER_CLASS_THROTTLED, "53300",
                      "sorry, too many clients already");
    if (chance_locked(sim, o->refuse_rate))
        return refuse(err, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT, "08001",
                      "connection refused (sim)");
    if (chance_locked(sim, o->auth_fail_rate))
        return refuse(err, TETHER_EAUTH, TETHER_CLASS_PERMANENT, "28P01",
                      "password authentication failed for user \"sim\"");
    if (chance_locked(sim, o->timeout_rate))
        return ADMIT_NEVER;
    return o->connect_latency_ms > 0 ? ADMIT_LATER : ADMIT_NOW;
}

/* conn_alloc returns a zeroed connection alone on its cache lines. */
static sim_conn *conn_alloc(tether_sim *sim) {
    size_t size =
        (sizeof(sim_conn) + CACHE_LINE - 1) & ~(size_t)(CACHE_LINE - 1);
    sim_conn *c = tether__aligned_alloc(CACHE_LINE, size);
    if (!c)
        return NULL;
    memset(c, 0, size);
    c->sim = sim;
    c->faults = sim->faults;
    c->id = atomic_fetch_add_explicit(&next_conn_id, 1, memory_order_relaxed);
    return c;
}

/* link_conn puts c on the sim's list (lock held). */
static void link_conn(tether_sim *sim, sim_conn *c) {
    c->prev = NULL;
    c->next = sim->conns;
    if (sim->conns)
        sim->conns->prev = c;
    sim->conns = c;
    sim->slots++;
    if (!c->pending) {
        sim->st.connected++;
        sim->st.open++;
    }
}

static int sim_connect_start(void *ctx, const tether_endpoint *ep, void **conn,
                             tether_wait *w, tether_error *err) {
    (void)ep;
    tether_sim *sim = ctx;
    *conn = NULL;
    if (!sim)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "sim: driver_ctx is NULL");
    sim_conn *c = conn_alloc(sim);
    if (!c)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "sim: out of memory");
    int64_t now =
        sim->o.connect_latency_ms > 0 ? tether__now_ms(sim->clock) : 0;
    pthread_mutex_lock(&sim->lock);
    sim->st.connects++;
    int rc = admit(sim, err);
    if (rc >= 0) {
        c->pending = rc != ADMIT_NOW;
        c->wake_ms = rc == ADMIT_LATER ? now + sim->o.connect_latency_ms : -1;
        link_conn(sim, c);
    }
    pthread_mutex_unlock(&sim->lock);
    if (rc < 0) {
        tether__aligned_free(c);
        return rc;
    }
    *conn = c;
    *w = (tether_wait){-1, 0, c->wake_ms};
    return rc == ADMIT_NOW ? TETHER_CONNECTED : TETHER_IN_PROGRESS;
}

static int sim_connect_poll(void *conn, tether_wait *w, tether_error *err) {
    sim_conn *c = conn;
    tether_sim *sim = c->sim;
    if (!c->pending)
        return TETHER_CONNECTED;
    *w = (tether_wait){-1, 0, c->wake_ms};
    if (c->wake_ms < 0 || tether__now_ms(sim->clock) < c->wake_ms)
        return TETHER_IN_PROGRESS;
    if (is_broken(c))
        return refuse(err, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT, "08006",
                      "server closed the connection during startup (sim)");
    pthread_mutex_lock(&sim->lock);
    c->pending = 0;
    sim->st.connected++;
    sim->st.open++;
    pthread_mutex_unlock(&sim->lock);
    return TETHER_CONNECTED;
}

static void sim_close(void *conn) {
    sim_conn *c = conn;
    if (!c)
        return;
    tether_sim *sim = c->sim;
    pthread_mutex_lock(&sim->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        sim->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sim->slots--;
    if (!c->pending) {
        sim->st.open--;
        sim->st.closed++;
    }
    sim->st.validations += load(&c->validations);
    sim->st.probes += load(&c->probes);
    sim->st.resets += load(&c->resets);
    sim->st.uses += load(&c->uses);
    pthread_mutex_unlock(&sim->lock);
    tether__aligned_free(c);
}

/* ---- the hot path ----------------------------------------------------- */

static int sim_alive(void *conn, int probe) {
    sim_conn *c = conn;
    if (probe) /* counted only: a sim connection breaks in memory */
        bump(&c->probes);
    if (c->faults & FAULT_IDLE)
        maybe_break(c, c->sim->o.break_idle_rate);
    if (is_broken(c))
        return 0;
    return atomic_load_explicit(&c->fatal, memory_order_relaxed)
               ? TETHER_FATAL_SEEN
               : 1;
}

static int sim_validate(void *conn, int64_t timeout_ms, tether_error *err) {
    (void)timeout_ms;
    sim_conn *c = conn;
    bump(&c->validations);
    if (c->faults & FAULT_VALID)
        maybe_break(c, c->sim->o.validate_fail_rate);
    if (is_broken(c))
        return broken_error(err, "validation");
    return 0;
}

static int sim_reset(void *conn, const char *reset_query, tether_error *err) {
    (void)reset_query;
    sim_conn *c = conn;
    bump(&c->resets);
    c->in_txn = 0;
    /* A plain load first: no locked step on the cycle benchmark's path. */
    int rolled = atomic_load_explicit(&c->txn_open, memory_order_relaxed);
    if (__builtin_expect(rolled, 0))
        atomic_store_explicit(&c->txn_open, 0, memory_order_relaxed);
    if (is_broken(c))
        return broken_error(err, "reset");
    if ((c->faults & FAULT_RESET) && chance(c->sim, c->sim->o.reset_fail_rate))
        return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                "reset failed, session state unknown (sim)");
    if (atomic_load_explicit(&c->fatal, memory_order_relaxed))
        return TETHER_FATAL;
    return rolled ? TETHER_ROLLED_BACK : 0;
}

static int sim_in_transaction(void *conn) {
    sim_conn *c = conn;
    if (is_broken(c))
        return -1;
    return atomic_load_explicit(&c->txn_open, memory_order_relaxed);
}

int tether_sim_txn(void *handle, int open) {
    sim_conn *c = handle;
    if (!c)
        return TETHER_EINVAL;
    if (is_broken(c))
        return TETHER_EBROKEN;
    atomic_store_explicit(&c->txn_open, open != 0, memory_order_relaxed);
    return 0;
}

static void *sim_handle(void *conn) {
    return conn;
}

int tether_sim_use(void *handle, tether_error *err) {
    sim_conn *c = handle;
    if (!c)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "sim: handle is NULL");
    bump(&c->uses);
    if (c->faults & FAULT_USE)
        maybe_break(c, c->sim->o.break_in_use_rate);
    if (is_broken(c))
        return broken_error(err, "query"); /* not_sent = 0: it may have run */
    c->in_txn = 1;
    return 0;
}

uint64_t tether_sim_conn_id(void *handle) {
    return handle ? ((sim_conn *)handle)->id : 0;
}

static const tether_driver sim_driver = {
    .name = "sim",
    .connect_start = sim_connect_start,
    .connect_poll = sim_connect_poll,
    .alive = sim_alive,
    .validate = sim_validate,
    .reset = sim_reset,
    .close = sim_close,
    .classify = sim_classify,
    .handle = sim_handle,
    .in_transaction = sim_in_transaction,
};

const tether_driver *tether_driver_sim(void) {
    return &sim_driver;
}

void tether_sim_stats_get_sized(tether_sim *sim, tether_sim_stats *out,
                                size_t size) {
    tether_sim_stats full;
    if (!out)
        return;
    sim_stats(sim, &full);
    tether__sized_out(out, size, &full, sizeof(full));
}
