/* test_registry.c - unit tests for the pool registry (src/registry/
 * registry.c) on the sim driver: one pool per normalized conninfo, never
 * one shared between credentials, clear_all, lazy eviction on a virtual
 * clock (never of a pool with a lease out or an acquire in progress), the
 * masked pool name, pools opened from the key's own parse (the same errors
 * as tether_pool_open), error paths, and a concurrent run (4 threads, 3
 * conninfos, evictions all along; meant for TSan too). */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "../support/clock.h"

#include "../support/needs_pq.h"
// clang-format on

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tether.h"
#include "tether_sim.h"

#define PW "S3cr3tPw"

/* ------------------------------------------------------------------------ */
/* Fixture: a sim, a virtual clock, a log capture                           */
/* ------------------------------------------------------------------------ */

typedef struct fixture {
    tether_vclock *vc;
    tether_sim *sim;
    tether_registry *reg;
    pthread_mutex_t log_lock;
    char log[8192]; /* every message, one per line */
    atomic_int evictions;
} fixture;

static void capture_log(void *ctx, tether_log_level level, const char *msg) {
    fixture *f = ctx;
    (void)level;
    if (strstr(msg, "closing idle pool"))
        atomic_fetch_add(&f->evictions, 1);
    pthread_mutex_lock(&f->log_lock);
    size_t n = strlen(f->log);
    snprintf(f->log + n, sizeof(f->log) - n, "%s\n", msg);
    pthread_mutex_unlock(&f->log_lock);
}

/* fixture_make makes a sim (connect latency latency_ms on a new virtual
 * clock) and a registry on clock (NULL: the virtual clock). */
static fixture *fixture_make(int64_t evict_ms, const tether_clock *clock,
                             int64_t latency_ms) {
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    pthread_mutex_init(&f->log_lock, NULL);
    f->vc = tether_vclock_create(1000 * MS);
    assert_non_null(f->vc);
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    so.clock = tether_vclock_clock(f->vc);
    so.connect_latency_ms = latency_ms;
    assert_int_equal(tether_sim_create(&f->sim, &so, NULL), 0);
    tether_registry_opts ro;
    tether_registry_opts_init(&ro);
    ro.pool.driver = tether_driver_sim();
    ro.pool.driver_ctx = f->sim;
    ro.pool.clock = clock ? clock : tether_vclock_clock(f->vc);
    ro.pool.log = capture_log;
    ro.pool.log_ctx = f;
    ro.evict_idle_ms = evict_ms;
    tether_error e = {0};
    assert_int_equal(tether_registry_create(&f->reg, &ro, &e), 0);
    return f;
}

static fixture *fixture_new(int64_t evict_ms, const tether_clock *clock) {
    return fixture_make(evict_ms, clock, 0);
}

static void fixture_free(fixture *f) {
    tether_registry_destroy(f->reg);
    tether_sim_stats st;
    tether_sim_stats_get(f->sim, &st);
    assert_int_equal(st.open, 0); /* destroy closed every connection */
    tether_sim_destroy(f->sim);
    tether_vclock_destroy(f->vc);
    pthread_mutex_destroy(&f->log_lock);
    free(f);
}

static void advance_ms(fixture *f, int64_t ms) {
    tether_vclock_advance(f->vc, ms * MS);
}

/* get acquires from the registry and returns the sim connection id. */
static uint64_t get(fixture *f, const char *conninfo, tether_lease **l) {
    tether_error e = {0};
    int rc = tether_registry_acquire(f->reg, conninfo, 5000, l, &e);
    if (rc != 0) {
        print_error("acquire \"%s\": %s\n", conninfo, e.message);
        fail();
    }
    assert_non_null(tether_lease_handle(*l));
    return tether_sim_conn_id(tether_lease_handle(*l));
}

static uint64_t connected(fixture *f) {
    tether_sim_stats st;
    tether_sim_stats_get(f->sim, &st);
    return st.connected;
}

/* ------------------------------------------------------------------------ */
/* Options and errors                                                       */
/* ------------------------------------------------------------------------ */

static void test_opts(void **state) {
    (void)state;
    tether_registry_opts o;
    tether_pool_opts po;
    tether_registry_opts_init(&o);
    tether_pool_opts_init(&po);
    assert_int_equal(o.evict_idle_ms, 600000);
    assert_null(o.pool.driver);
    assert_null(o.pool.name); /* pools are named by their conninfo */
    assert_int_equal(o.pool.max_size, po.max_size);
    assert_int_equal(o.pool.acquire_timeout_ms, po.acquire_timeout_ms);

    tether_registry *r = (tether_registry *)&o;
    tether_error e = {0};
    /* No driver: a PostgreSQL registry (pools opened from each string). */
    assert_int_equal(tether_registry_create(&r, &o, &e), 0);
    assert_non_null(r);
    tether_lease *l = NULL;
    assert_int_equal(
        tether_registry_acquire(r, "host=a bogus_key=1", 10, &l, &e),
        TETHER_ESPEC);
    assert_null(l);
    assert_int_equal(tether_registry_count(r), 0);
    tether_registry_destroy(r);
    r = (tether_registry *)&o;
    assert_int_equal(tether_registry_create(&r, NULL, &e), TETHER_EINVAL);
    o.pool.driver = tether_driver_sim();
    o.pool.connector = (tether_connector *)&o; /* shared: refused */
    assert_int_equal(tether_registry_create(&r, &o, &e), TETHER_EINVAL);
    assert_non_null(strstr(e.message, "pool.connector"));
    o.pool.connector = NULL;
    o.evict_idle_ms = -1;
    assert_int_equal(tether_registry_create(&r, &o, &e), TETHER_EINVAL);
    assert_non_null(strstr(e.message, "evict_idle_ms"));
    o.evict_idle_ms = 0;
    assert_int_equal(tether_registry_create(&r, &o, NULL), 0);
    assert_int_equal(tether_registry_count(r), 0);
    tether_registry_destroy(r); /* empty */
    tether_registry_destroy(NULL);
    tether_registry_clear_all(NULL);
    assert_int_equal(tether_registry_count(NULL), 0);
}

static void test_errors(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
    fixture *f = fixture_new(0, NULL);
    tether_lease *l = (tether_lease *)f;
    tether_error e = {0};
    assert_int_equal(
        tether_registry_acquire(f->reg, "host=h password='" PW, 100, &l, &e),
        TETHER_ESPEC);
    assert_null(l);
    assert_non_null(strstr(e.message, "bad value for password"));
    assert_null(strstr(e.message, PW));
    assert_int_equal(tether_registry_acquire(f->reg, NULL, 100, &l, &e),
                     TETHER_EINVAL);
    assert_int_equal(tether_registry_acquire(f->reg, "host=h", 100, NULL, &e),
                     TETHER_EINVAL);
    assert_int_equal(tether_registry_acquire(NULL, "host=h", 100, &l, &e),
                     TETHER_EINVAL);
    assert_int_equal(tether_registry_count(f->reg), 0);
    fixture_free(f);
}

/* A template the pool refuses: the error comes back, no pool is kept. */
static void test_pool_create_fails(void **state) {
    (void)state;
    tether_sim *sim;
    assert_int_equal(tether_sim_create(&sim, NULL, NULL), 0);
    tether_registry_opts o;
    tether_registry_opts_init(&o);
    o.pool.driver = tether_driver_sim();
    o.pool.driver_ctx = sim;
    o.pool.max_size = 0;
    tether_registry *r;
    assert_int_equal(tether_registry_create(&r, &o, NULL), 0);
    tether_lease *l;
    tether_error e = {0};
    assert_int_equal(tether_registry_acquire(r, "host=h", 100, &l, &e),
                     TETHER_EINVAL);
    assert_int_equal(tether_registry_count(r), 0);
    tether_registry_destroy(r);
    tether_sim_destroy(sim);
}

/* ------------------------------------------------------------------------ */
/* One pool per key, never shared across credentials                        */
/* ------------------------------------------------------------------------ */

static void test_same_pool(void **state) {
    (void)state;
    static const char *const spellings[] = {
        "host=h user=u password=" PW " dbname=d",
        "dbname=d password=" PW " user=u host=h",
        "  host = 'h'\tuser=u   password='" PW "' dbname=d ",
        "postgresql://u:" PW "@h/d",
        ("postgres://u@h/d?password=" PW),
    };
    fixture *f = fixture_new(0, NULL);
    tether_lease *l;
    uint64_t first = get(f, spellings[0], &l);
    tether_lease_release(l);
    for (size_t i = 1; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
        assert_int_equal(get(f, spellings[i], &l), first); /* reused */
        tether_lease_release(l);
        assert_int_equal(tether_registry_count(f->reg), 1);
    }
    assert_int_equal(connected(f), 1);
    fixture_free(f);
}

#define NHOLD 4

static void test_credentials_isolated(void **state) {
    (void)state;
    static const char *const a = "host=h user=alice password=pa";
    static const char *const b = "host=h user=bob password=pb";
    static const char *const c = "host=h user=alice password=other";
    fixture *f = fixture_new(0, NULL);
    tether_lease *la[NHOLD], *lb[NHOLD], *lc;
    uint64_t ida[NHOLD], idb[NHOLD];
    for (int i = 0; i < NHOLD; i++)
        ida[i] = get(f, a, &la[i]);
    for (int i = 0; i < NHOLD; i++)
        tether_lease_release(la[i]); /* pool a: NHOLD idle connections */
    for (int i = 0; i < NHOLD; i++)
        idb[i] = get(f, b, &lb[i]); /* none of them may serve b */
    uint64_t idc = get(f, c, &lc);  /* nor a different password */
    assert_int_equal(tether_registry_count(f->reg), 3);
    for (int i = 0; i < NHOLD; i++) {
        for (int j = 0; j < NHOLD; j++) {
            assert_int_not_equal(ida[i], idb[j]);
            if (i != j) {
                assert_int_not_equal(ida[i], ida[j]);
                assert_int_not_equal(idb[i], idb[j]);
            }
        }
        assert_int_not_equal(idc, ida[i]);
        assert_int_not_equal(idc, idb[i]);
    }
    assert_int_equal(connected(f), 2 * NHOLD + 1);
    /* and the other way round: a gets its own connections back */
    tether_lease_release(lc);
    for (int i = 0; i < NHOLD; i++)
        tether_lease_release(lb[i]);
    uint64_t again = get(f, a, &la[0]);
    int mine = 0;
    for (int i = 0; i < NHOLD; i++)
        mine |= again == ida[i];
    assert_true(mine);
    tether_lease_release(la[0]);
    fixture_free(f);
}

/* timeout_message makes the pool for conninfo time out (max_size 1, its
 * one connection held) and returns the error message, which names the
 * pool. */
static void timeout_message(fixture *f, const char *conninfo, char *msg,
                            size_t cap) {
    tether_lease *held, *l;
    tether_error e = {0};
    get(f, conninfo, &held);
    assert_int_equal(tether_registry_acquire(f->reg, conninfo, 10, &l, &e),
                     TETHER_ETIMEDOUT);
    snprintf(msg, cap, "%s", e.message);
    tether_lease_release(held);
}

/* Without a driver in the template, a pool is opened from the keyword set
 * the registry parsed for its key: the same errors as tether_pool_open's
 * for the same string, and no pool kept for a string that fails. */
static void test_open_from_key(void **state) {
    (void)state;
    static const char *const bad[] = {
        "host=h user=u password=" PW " tether_pool_max=0",
        "host=h tether_pool_min=5 tether_pool_max=2",
        "host=h tether_read_wait=1s",
        "host=h tether_bogus=1",
        "host=h user=u password=" PW " tether_retry='exponential base=x'",
    };
    tether_registry *r;
    tether_registry_opts ro;
    tether_registry_opts_init(&ro);
    assert_int_equal(tether_registry_create(&r, &ro, NULL), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tether_error e1 = {0}, e2 = {0};
        tether_lease *l = NULL;
        tether_pool *p = NULL;
        int rc = tether_registry_acquire(r, bad[i], 100, &l, &e1);
        assert_int_equal(rc, TETHER_ESPEC);
        assert_null(l);
        assert_int_equal(tether_pool_open(&p, bad[i], NULL, NULL, &e2), rc);
        assert_null(p);
        assert_string_equal(e1.message, e2.message);
        assert_null(strstr(e1.message, PW));
        assert_int_equal(tether_registry_count(r), 0);
    }
    tether_registry_destroy(r);
}

static void test_pool_name(void **state) {
    (void)state;
    char msg[TETHER_MSG_MAX];
    fixture *f = fixture_new(0, NULL);
    tether_registry_destroy(f->reg);
    tether_registry_opts ro;
    tether_registry_opts_init(&ro);
    ro.pool.driver = tether_driver_sim();
    ro.pool.driver_ctx = f->sim;
    ro.pool.max_size = 1;
    assert_int_equal(tether_registry_create(&f->reg, &ro, NULL), 0);
    /* named as tether_pool_open names a pool: short, no password */
    timeout_message(f, "postgresql://u:" PW "@h:6432/db", msg, sizeof(msg));
    assert_non_null(strstr(msg, "pool u@h:6432/db: "));
    assert_null(strstr(msg, PW));
    assert_null(strstr(msg, "password"));
    timeout_message(f, "host=h2 tether_pool_name=api", msg, sizeof(msg));
    assert_non_null(strstr(msg, "pool api: "));
    tether_registry_destroy(f->reg);
    char name[] = "orders";
    ro.pool.name = name; /* a template name: copied, used by every pool */
    assert_int_equal(tether_registry_create(&f->reg, &ro, NULL), 0);
    strcpy(name, "xxxxxx");
    timeout_message(f, "host=h user=u password=" PW, msg, sizeof(msg));
    assert_non_null(strstr(msg, "orders"));
    assert_null(strstr(msg, "password"));
    fixture_free(f);
}

static void test_clear_all(void **state) {
    (void)state;
    fixture *f = fixture_new(0, NULL);
    tether_lease *la, *lb;
    uint64_t ida = get(f, "host=h user=a", &la);
    uint64_t idb = get(f, "host=h user=b", &lb);
    tether_lease_release(lb); /* idle in b, leased in a */
    tether_registry_clear_all(f->reg);
    tether_lease_release(la); /* from an old generation: closed */
    tether_sim_stats st;
    tether_sim_stats_get(f->sim, &st);
    assert_int_equal(st.open, 0);
    assert_int_equal(st.closed, 2);
    assert_int_equal(tether_registry_count(f->reg), 2); /* pools stay */
    assert_int_not_equal(get(f, "host=h user=a", &la), ida);
    assert_int_not_equal(get(f, "host=h user=b", &lb), idb);
    tether_lease_release(la);
    tether_lease_release(lb);
    fixture_free(f);
}

/* ------------------------------------------------------------------------ */
/* Eviction                                                                 */
/* ------------------------------------------------------------------------ */

static void test_evict_idle(void **state) {
    (void)state;
    NEEDS_PQ_KEYWORDS();
    fixture *f = fixture_new(1000, NULL);
    tether_lease *l;
    get(f, "host=h user=u password=" PW, &l);
    tether_lease_release(l);
    advance_ms(f, 300); /* a scan sees it idle: idle from now on */
    assert_int_equal(tether_registry_count(f->reg), 1);
    advance_ms(f, 999);
    assert_int_equal(tether_registry_count(f->reg), 1);
    advance_ms(f, 251); /* the next scan: idle for 1250 ms */
    assert_int_equal(tether_registry_count(f->reg), 0);
    tether_sim_stats st;
    tether_sim_stats_get(f->sim, &st);
    assert_int_equal(st.open, 0);
    assert_int_equal(atomic_load(&f->evictions), 1);
    /* the pool's name (in the eviction log) is the masked display form */
    assert_non_null(
        strstr(f->log, "closing idle pool host='h' password='***' user='u'"));
    assert_null(strstr(f->log, PW));
    /* a new acquire makes a new pool */
    get(f, "user=u host=h password=" PW, &l);
    assert_int_equal(tether_registry_count(f->reg), 1);
    tether_lease_release(l);
    fixture_free(f);
}

static void test_evict_not_leased(void **state) {
    (void)state;
    fixture *f = fixture_new(1000, NULL);
    tether_lease *held, *l;
    get(f, "host=held", &held);
    get(f, "host=idle", &l);
    tether_lease_release(l);
    advance_ms(f, 5000);
    assert_int_equal(tether_registry_count(f->reg), 2); /* idle: seen */
    advance_ms(f, 5000);
    assert_int_equal(tether_registry_count(f->reg), 1); /* idle went */
    advance_ms(f, 3600 * 1000); /* an hour without a call, lease out */
    tether_lease_release(held);
    /* this scan is the first to see it idle: not yet */
    assert_int_equal(tether_registry_count(f->reg), 1);
    advance_ms(f, 999);
    assert_int_equal(tether_registry_count(f->reg), 1);
    advance_ms(f, 250); /* the next scan */
    assert_int_equal(tether_registry_count(f->reg), 0);
    fixture_free(f);
}

static void test_evict_off(void **state) {
    (void)state;
    fixture *f = fixture_new(0, NULL);
    tether_lease *l;
    get(f, "host=h", &l);
    tether_lease_release(l);
    advance_ms(f, 24LL * 3600 * 1000);
    assert_int_equal(tether_registry_count(f->reg), 1);
    fixture_free(f);
}

/* Eviction happens during acquires too, of other pools. */
static void test_evict_during_acquire(void **state) {
    (void)state;
    fixture *f = fixture_new(1000, NULL);
    tether_lease *l;
    get(f, "host=a", &l);
    tether_lease_release(l);
    advance_ms(f, 300);
    assert_int_equal(tether_registry_count(f->reg), 1); /* seen idle */
    advance_ms(f, 2000);
    get(f, "host=b", &l);
    assert_int_equal(atomic_load(&f->evictions), 1);
    assert_int_equal(tether_registry_count(f->reg), 1);
    tether_lease_release(l);
    fixture_free(f);
}

/* A clock whose sleeps block until the test opens the gate: a connect
 * (sim latency) stays in progress while the test moves virtual time. */
typedef struct gate {
    tether_clock clock;
    tether_vclock *vc;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int open, sleepers;
} gate;

static int64_t gate_now(void *ctx) {
    gate *g = ctx;
    const tether_clock *c = tether_vclock_clock(g->vc);
    return c->now_ns(c->ctx);
}

static void gate_sleep(void *ctx, int64_t ns) {
    gate *g = ctx;
    pthread_mutex_lock(&g->lock);
    g->sleepers++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->lock);
    g->sleepers--;
    pthread_mutex_unlock(&g->lock);
    tether_vclock_advance(g->vc, ns);
}

typedef struct acquirer {
    fixture *f;
    int rc;
    tether_lease *l;
} acquirer;

static void *acquire_thread(void *arg) {
    acquirer *a = arg;
    a->rc = tether_registry_acquire(a->f->reg, "host=slow", 60000, &a->l, NULL);
    return NULL;
}

typedef struct counting {
    tether_registry *reg;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int n, done;
} counting;

static void *count_thread(void *arg) {
    counting *c = arg;
    int n = tether_registry_count(c->reg);
    pthread_mutex_lock(&c->lock);
    c->n = n;
    c->done = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* wait_count waits up to wait_ms for count_thread. Returns its count, or
 * -1 when it did not return in time (it blocked destroying a pool whose
 * connect is held at the gate: the eviction of a pinned pool). */
static int wait_count(counting *c, int64_t wait_ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000;
    pthread_mutex_lock(&c->lock);
    while (!c->done && pthread_cond_timedwait(&c->cv, &c->lock, &until) == 0) {
    }
    int n = c->done ? c->n : -1;
    pthread_mutex_unlock(&c->lock);
    return n;
}

static void open_gate(gate *g) {
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->lock);
}

static void test_no_evict_while_acquiring(void **state) {
    (void)state;
    gate g = {{gate_now, gate_sleep, NULL}, NULL, PTHREAD_MUTEX_INITIALIZER,
              PTHREAD_COND_INITIALIZER,     0,    0};
    g.clock.ctx = &g;
    fixture *f = fixture_make(1000, &g.clock, 10);
    g.vc = f->vc;

    acquirer a = {f, -1, NULL};
    pthread_t t;
    pthread_create(&t, NULL, acquire_thread, &a);
    pthread_mutex_lock(&g.lock);
    while (g.sleepers == 0) /* the connect is in progress */
        pthread_cond_wait(&g.cv, &g.lock);
    pthread_mutex_unlock(&g.lock);
    advance_ms(f, 10000);
    counting c = {f->reg, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                  0, 0};
    pthread_t ct;
    pthread_create(&ct, NULL, count_thread, &c);
    int n = wait_count(&c, 2000);
    open_gate(&g);
    pthread_join(t, NULL);
    int used = a.rc == 0 ? tether_sim_use(tether_lease_handle(a.l), NULL) : -1;
    if (a.rc == 0)
        tether_lease_release(a.l);
    pthread_join(ct, NULL);
    assert_int_equal(n, 1); /* the pool was pinned: not evicted */
    assert_int_equal(a.rc, 0);
    assert_int_equal(used, 0);
    advance_ms(f, 2000);
    assert_int_equal(tether_registry_count(f->reg), 1); /* seen idle */
    advance_ms(f, 2000);
    assert_int_equal(tether_registry_count(f->reg), 0);
    fixture_free(f);
}

/* ------------------------------------------------------------------------ */
/* Concurrency: 4 threads, 3 conninfos, evictions all along                 */
/* ------------------------------------------------------------------------ */

#define NTHREADS 4
#define ROUNDS 8
#define HALF 150    /* acquires per thread in each half of a busy phase */
#define EVICT_MS 20 /* the registry's evict_idle_ms */
#define IDMAP 65536 /* open addressing: sim connection id -> conninfo */

/* Each round: a busy phase (all three conninfos, then all but one, which
 * gets evicted while the others are in use), then a quiet phase in which
 * the main thread drives scans until every pool is evicted. A counter
 * thread calls count and clear_all throughout. */
typedef struct shared {
    tether_registry *reg;
    pthread_barrier_t busy_done, quiet_done;
    pthread_mutex_t map_lock;
    uint64_t ids[IDMAP];
    int owner[IDMAP];
    atomic_int failures, conflicts, not_drained, done;
} shared;

static const char *const spell[3][2] = {
    {"host=h user=a password=pa", "password=pa  user=a host=h"},
    {"host=h user=b password=pb", "postgresql://b:pb@h"},
    {"postgresql://c:pc@h", "user=c host='h' password='pc'"},
};

/* note_owner records that connection id served conninfo k; counts a
 * conflict when it had served another. */
static void note_owner(shared *s, uint64_t id, int k) {
    pthread_mutex_lock(&s->map_lock);
    size_t i = (size_t)(id * 0x9E3779B97F4A7C15ULL >> 48) % IDMAP;
    while (s->ids[i] != 0 && s->ids[i] != id)
        i = (i + 1) % IDMAP;
    if (s->ids[i] == 0) {
        s->ids[i] = id;
        s->owner[i] = k;
    } else if (s->owner[i] != k) {
        atomic_fetch_add(&s->conflicts, 1);
    }
    pthread_mutex_unlock(&s->map_lock);
}

static void pause_us(long us) {
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* use_one acquires from conninfo k, checks the connection and releases
 * it. */
static void use_one(shared *s, int k, int variant) {
    tether_lease *l;
    tether_error e = {0};
    if (tether_registry_acquire(s->reg, spell[k][variant], 10000, &l, &e)) {
        atomic_fetch_add(&s->failures, 1);
        return;
    }
    void *h = tether_lease_handle(l);
    note_owner(s, tether_sim_conn_id(h), k);
    if (tether_sim_use(h, NULL) != 0)
        atomic_fetch_add(&s->failures, 1);
    pause_us(50);
    tether_lease_release(l);
}

static void *worker(void *arg) {
    shared *s = arg;
    unsigned seed = (unsigned)(uintptr_t)pthread_self();
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < 2 * HALF; i++) {
            int k = (int)(rand_r(&seed) % 3);
            if (i >= HALF && k == r % 3) /* left idle: evicted meanwhile */
                k = (k + 1) % 3;
            use_one(s, k, i & 1);
            pause_us(50);
        }
        pthread_barrier_wait(&s->busy_done);
        pthread_barrier_wait(&s->quiet_done);
    }
    return NULL;
}

/* quiet drives scans until every pool is evicted (or 5 s went by). */
static void quiet(shared *s) {
    for (int i = 0; i < 5000 && tether_registry_count(s->reg) > 0; i++)
        pause_us(1000);
    if (tether_registry_count(s->reg) != 0)
        atomic_fetch_add(&s->not_drained, 1);
}

static void *counter(void *arg) {
    shared *s = arg;
    for (int i = 0; !atomic_load(&s->done); i++) {
        if (tether_registry_count(s->reg) > 3)
            atomic_fetch_add(&s->failures, 1);
        if (i % 50 == 0)
            tether_registry_clear_all(s->reg);
        pause_us(200);
    }
    return NULL;
}

static void test_concurrent(void **state) {
    (void)state;
    fixture *f = fixture_new(EVICT_MS, tether_clock_real());
    shared *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->reg = f->reg;
    pthread_mutex_init(&s->map_lock, NULL);
    pthread_barrier_init(&s->busy_done, NULL, NTHREADS + 1);
    pthread_barrier_init(&s->quiet_done, NULL, NTHREADS + 1);
    pthread_t w[NTHREADS], c;
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&w[i], NULL, worker, s);
    pthread_create(&c, NULL, counter, s);
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&s->busy_done);
        quiet(s);
        pthread_barrier_wait(&s->quiet_done);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(w[i], NULL);
    atomic_store(&s->done, 1);
    pthread_join(c, NULL);
    assert_int_equal(atomic_load(&s->failures), 0);
    assert_int_equal(atomic_load(&s->conflicts), 0);
    assert_int_equal(atomic_load(&s->not_drained), 0);
    /* every round evicts at least the two pools of its second half */
    assert_true(atomic_load(&f->evictions) >= 2 * ROUNDS);
    pthread_barrier_destroy(&s->busy_done);
    pthread_barrier_destroy(&s->quiet_done);
    pthread_mutex_destroy(&s->map_lock);
    free(s);
    fixture_free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opts),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_pool_create_fails),
        cmocka_unit_test(test_same_pool),
        cmocka_unit_test(test_credentials_isolated),
        cmocka_unit_test(test_open_from_key),
        cmocka_unit_test(test_pool_name),
        cmocka_unit_test(test_clear_all),
        cmocka_unit_test(test_evict_idle),
        cmocka_unit_test(test_evict_not_leased),
        cmocka_unit_test(test_evict_off),
        cmocka_unit_test(test_evict_during_acquire),
        cmocka_unit_test(test_no_evict_while_acquiring),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
