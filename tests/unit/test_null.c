/* test_null.c - the NULL-handle rule (tether.h, docs/errors.md): every
 * public function is called with a NULL handle and with each NULL required
 * pointer. Functions that free or give back (the destroys, lease release
 * and discard, tether_connector_close) do nothing; the others return
 * TETHER_EINVAL with err naming the argument, or do nothing (void), or
 * return their documented neutral value (0, NULL, zeroed metrics).
 *
 * Each case runs in a child process, so that one that crashes is named
 * and the others still run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tether.h"
#ifdef TETHER_HAVE_PQ
#include "tether_pq.h"
#endif
#include "tether_sim.h"

/* In the child: a broken expectation exits 1. */
#define EXPECT(cond)                                                           \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "  %s:%d: expected %s\n", __FILE__, __LINE__,      \
                    #cond);                                                    \
            _exit(1);                                                          \
        }                                                                      \
    } while (0)

/* EINVAL with a message that names what was NULL. */
#define EXPECT_EINVAL(call, e, word)                                           \
    do {                                                                       \
        tether_error_clear(&(e));                                              \
        int rc_ = (call);                                                      \
        EXPECT(rc_ == TETHER_EINVAL);                                          \
        EXPECT((e).code == TETHER_EINVAL);                                     \
        if (!strstr((e).message, (word))) {                                    \
            fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", (e).message,    \
                    (word));                                                   \
            _exit(1);                                                          \
        }                                                                      \
    } while (0)

static int work(void *h, void *arg, const tether_attempt *a, tether_error *e) {
    (void)h;
    (void)arg;
    (void)a;
    (void)e;
    return 0;
}

static int op(void *arg, const tether_attempt *a, tether_error *e) {
    (void)arg;
    (void)a;
    (void)e;
    return 0;
}

/* ---- the cases --------------------------------------------------------------
 */

static void destroys(void) {
    tether_backoff_destroy(NULL);
    tether_schedule_destroy(NULL);
    tether_budget_destroy(NULL);
    tether_breaker_destroy(NULL);
    tether_retry_destroy(NULL);
    tether_connector_destroy(NULL);
    tether_connector_close(NULL, NULL);
    tether_pool_destroy(NULL);
    tether_registry_destroy(NULL);
    tether_lease_release(NULL);
    tether_lease_discard(NULL);
    tether_vclock_destroy(NULL);
    tether_sim_destroy(NULL);
}

static void errors_and_names(void) {
    tether_error_clear(NULL);
    EXPECT(tether_error_set(NULL, TETHER_EIO, TETHER_CLASS_TRANSIENT, "x") ==
           TETHER_EIO);
    EXPECT(tether_error_set_not_sent(NULL, TETHER_EIO, TETHER_CLASS_TRANSIENT,
                                     "x") == TETHER_EIO);
    EXPECT(tether_classify_default(NULL, NULL, NULL) == TETHER_CLASS_PERMANENT);
    EXPECT(tether_now_ms(NULL) > 0); /* the real clock */
    tether_strategy s;
    EXPECT(tether_strategy_parse(NULL, &s) == TETHER_EINVAL);
    EXPECT(tether_strategy_parse("race", NULL) == TETHER_EINVAL);
    int64_t ms;
    EXPECT(tether_duration_parse(NULL, &ms) == TETHER_EINVAL);
    EXPECT(tether_duration_parse("1s", NULL) == TETHER_EINVAL);
}

static void options(void) {
    tether_backoff_opts_init(NULL);
    tether_schedule_opts_init(NULL);
    tether_budget_opts_init(NULL);
    tether_breaker_opts_init(NULL);
    tether_retry_opts_init(NULL);
    tether_connector_opts_init(NULL);
    tether_pool_opts_init(NULL);
    tether_registry_opts_init(NULL);
    tether_sim_opts_init(NULL);
    tether_error e;
    tether_backoff_opts bo;
    tether_breaker_opts ko;
    tether_retry_opts ro;
    tether_budget_opts go;
    EXPECT_EINVAL(tether_backoff_preset(NULL, &bo, &e), e, "name");
    EXPECT_EINVAL(tether_backoff_preset("grpc", NULL, &e), e, "NULL");
    EXPECT_EINVAL(tether_backoff_validate(NULL, &e), e, "NULL");
    EXPECT_EINVAL(tether_breaker_preset(NULL, &ko, &e), e, "name");
    EXPECT_EINVAL(tether_breaker_preset("blocking-period", NULL, &e), e,
                  "NULL");
    EXPECT_EINVAL(tether_retry_opts_parse(NULL, &ro, &e), e, "NULL");
    EXPECT_EINVAL(tether_retry_opts_parse("fixed", NULL, &e), e, "NULL");
    EXPECT_EINVAL(tether_breaker_opts_parse(NULL, &ko, &e), e, "NULL");
    EXPECT_EINVAL(tether_breaker_opts_parse("blocking-period", NULL, &e), e,
                  "NULL");
    EXPECT_EINVAL(tether_budget_opts_parse(NULL, &go, &e), e, "NULL");
    EXPECT_EINVAL(tether_budget_opts_parse("budget", NULL, &e), e, "NULL");
}

static void creates(void) {
    tether_error e;
    EXPECT_EINVAL(tether_backoff_create(NULL, NULL, &e), e, "out");
    EXPECT_EINVAL(tether_schedule_create(NULL, NULL, 0, &e), e, "out");
    EXPECT_EINVAL(tether_budget_create(NULL, NULL, &e), e, "out");
    EXPECT_EINVAL(tether_breaker_create(NULL, NULL, &e), e, "out");
    EXPECT_EINVAL(tether_retry_create(NULL, NULL, &e), e, "out");
    EXPECT_EINVAL(tether_connector_create(NULL, NULL, &e), e, "out");
    tether_connector *c = (tether_connector *)&e;
    EXPECT_EINVAL(tether_connector_create(&c, NULL, &e), e, "NULL");
    EXPECT(c == NULL);
    EXPECT_EINVAL(tether_pool_create(NULL, NULL, &e), e, "out");
    tether_pool *p = (tether_pool *)&e;
    EXPECT_EINVAL(tether_pool_create(&p, NULL, &e), e, "options");
    EXPECT(p == NULL);
    EXPECT_EINVAL(tether_pool_open(NULL, "host=a", NULL, NULL, &e), e, "out");
    EXPECT_EINVAL(tether_pool_open(&p, NULL, NULL, NULL, &e), e, "NULL");
    EXPECT(p == NULL);
    EXPECT_EINVAL(tether_registry_create(NULL, NULL, &e), e, "out");
    EXPECT_EINVAL(tether_sim_create(NULL, NULL, &e), e, "out");
}

static void policies(void) {
    int64_t d = 7;
    EXPECT(tether_backoff_next(NULL, TETHER_CLASS_NONE, &d) == TETHER_EINVAL);
    tether_backoff *b = NULL;
    tether_backoff_opts bo;
    tether_backoff_opts_init(&bo);
    EXPECT(tether_backoff_create(&b, &bo, NULL) == 0);
    EXPECT(tether_backoff_next(b, TETHER_CLASS_NONE, NULL) == TETHER_EINVAL);
    EXPECT(tether_backoff_count(b) == 0); /* nothing was drawn */
    tether_backoff_destroy(b);
    tether_backoff_reset(NULL);
    EXPECT(tether_backoff_count(NULL) == 0);

    tether_step st;
    memset(&st, 0xff, sizeof(st));
    tether_schedule_next(NULL, 0, &st);
    EXPECT(st.kind == TETHER_STEP_DONE);
    tether_schedule *s = NULL;
    tether_schedule_opts so;
    tether_schedule_opts_init(&so);
    EXPECT(tether_schedule_create(&s, &so, 0, NULL) == 0);
    tether_schedule_next(s, 0, NULL);
    tether_schedule_destroy(s);
    tether_schedule_provisioned(NULL, 1, 3);

    EXPECT(tether_budget_withdraw(NULL, 0) == TETHER_EINVAL);
    tether_budget_success(NULL, 5);
    EXPECT(tether_budget_tokens(NULL) == 0);

    tether_error e;
    EXPECT_EINVAL(tether_breaker_allow(NULL, &e), e, "NULL");
    tether_breaker_record(NULL, TETHER_PERMIT_CALL, 0, NULL);
    EXPECT(tether_breaker_state_get(NULL) == TETHER_BREAKER_CLOSED);
    EXPECT(tether_breaker_open_ms(NULL) == 0);
    tether_breaker_isolate(NULL);
    tether_breaker_reset(NULL);

    EXPECT_EINVAL(tether_retry_run(NULL, 0, op, NULL, &e), e, "NULL");
    EXPECT_EINVAL(tether_retry_run_for(NULL, 0, 10, op, NULL, &e), e, "NULL");
    tether_retry *r = NULL;
    tether_retry_opts ro;
    tether_retry_opts_init(&ro);
    EXPECT(tether_retry_create(&r, &ro, NULL) == 0);
    EXPECT_EINVAL(tether_retry_run(r, 0, NULL, NULL, &e), e, "NULL");
    EXPECT_EINVAL(tether_retry_run_for(r, 0, 10, NULL, NULL, &e), e, "NULL");
    tether_retry_stats_get(r, NULL);
    tether_retry_destroy(r);
    tether_retry_stats rs;
    memset(&rs, 0xff, sizeof(rs));
    tether_retry_stats_get(NULL, &rs);
    EXPECT(rs.runs == 0 && rs.size == sizeof(rs));
}

static void connector(void) {
    tether_error e;
    void *h = &e;
    EXPECT_EINVAL(tether_connector_connect(NULL, &h, &e), e, "NULL");
    EXPECT(h == NULL);
    tether_connector_opts co;
    tether_connector_opts_init(&co);
    co.conninfo = "host=a";
    co.driver = tether_driver_sim();
    tether_connector *c = NULL;
    EXPECT(tether_connector_create(&c, &co, NULL) == 0);
    EXPECT_EINVAL(tether_connector_connect(c, NULL, &e), e, "NULL");
    tether_connector_close(c, NULL);
    tether_connector_invalidate(NULL);
    tether_connector_destroy(c);
}

static void pool(void) {
    tether_error e;
    tether_lease *l = (tether_lease *)&e;
    EXPECT_EINVAL(tether_pool_close(NULL, 0, &e), e, "NULL");
    EXPECT_EINVAL(tether_pool_acquire(NULL, 10, &l, &e), e, "NULL");
    EXPECT(l == NULL);
    EXPECT_EINVAL(tether_pool_run(NULL, 0, work, NULL, &e), e, "NULL");
    EXPECT_EINVAL(tether_pool_run_for(NULL, 0, 10, work, NULL, &e), e, "NULL");
    EXPECT(tether_lease_handle(NULL) == NULL);
    tether_pool_clear(NULL);
    EXPECT_EINVAL(tether_pool_resize(NULL, 0, 1, &e), e, "NULL");
    EXPECT(tether_pool_pause(NULL, TETHER_PAUSE_CLOSE_IDLE) == TETHER_EINVAL);
    EXPECT(tether_pool_resume(NULL) == TETHER_EINVAL);
    EXPECT(tether_pool_paused(NULL) == 0);
    EXPECT(tether_pool_evict_idle(NULL) == 0);
    EXPECT(tether_pool_reconnect(NULL) == TETHER_EINVAL);
    tether_pool_holder h[2];
    EXPECT(tether_pool_holders(NULL, h, 2) == 0);
    tether_pool_metrics m;
    memset(&m, 0xff, sizeof(m));
    tether_pool_metrics_get(NULL, &m);
    EXPECT(m.total == 0 && m.acquires == 0 && m.size == sizeof(m));
    char buf[8] = "x";
    EXPECT(tether_pool_metrics_prometheus(NULL, buf, sizeof(buf)) == 0);
    EXPECT(buf[0] == '\0');
    EXPECT(tether_pool_name(NULL) == NULL);

    tether_sim *sim = NULL;
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    EXPECT(tether_sim_create(&sim, &so, NULL) == 0);
    tether_pool_opts po;
    tether_pool_opts_init(&po);
    po.driver = tether_driver_sim();
    po.driver_ctx = sim;
    tether_pool *p = NULL;
    EXPECT(tether_pool_create(&p, &po, NULL) == 0);
    EXPECT_EINVAL(tether_pool_acquire(p, 10, NULL, &e), e, "NULL");
    EXPECT_EINVAL(tether_pool_run(p, 0, NULL, NULL, &e), e, "NULL");
    EXPECT_EINVAL(tether_pool_run_for(p, 0, 10, NULL, NULL, &e), e, "NULL");
    tether_pool_metrics_get(p, NULL);
    EXPECT(tether_pool_metrics_prometheus(p, NULL, 0) > 0);
    tether_pool_destroy(p);
    tether_sim_destroy(sim);
}

static void registry(void) {
    tether_error e;
    tether_lease *l = (tether_lease *)&e;
    EXPECT_EINVAL(tether_registry_acquire(NULL, "host=a", 10, &l, &e), e,
                  "NULL");
    EXPECT(l == NULL);
    tether_registry_opts ro;
    tether_registry_opts_init(&ro);
    tether_sim *sim = NULL;
    tether_sim_opts so;
    tether_sim_opts_init(&so);
    EXPECT(tether_sim_create(&sim, &so, NULL) == 0);
    ro.pool.driver = tether_driver_sim();
    ro.pool.driver_ctx = sim;
    tether_registry *r = NULL;
    EXPECT(tether_registry_create(&r, &ro, NULL) == 0);
    EXPECT_EINVAL(tether_registry_acquire(r, NULL, 10, &l, &e), e, "NULL");
    EXPECT_EINVAL(tether_registry_acquire(r, "host=a", 10, NULL, &e), e,
                  "NULL");
    tether_registry_destroy(r);
    tether_sim_destroy(sim);
    tether_registry_clear_all(NULL);
    EXPECT(tether_registry_count(NULL) == 0);
    EXPECT_EINVAL(tether_registry_normalize(NULL, NULL, 0, &e), e, "NULL");
}

static void sim_and_pq(void) {
    tether_error e;
    EXPECT(tether_vclock_clock(NULL) == NULL);
    tether_vclock_advance(NULL, 5);
    tether_sim_set_down(NULL, 1);
    tether_sim_fail_next(NULL, 1, TETHER_ECONNECT, TETHER_CLASS_TRANSIENT);
    tether_sim_break_all(NULL);
    tether_sim_fatal_all(NULL);
    tether_sim_stats ss;
    memset(&ss, 0xff, sizeof(ss));
    tether_sim_stats_get(NULL, &ss);
    EXPECT(ss.connects == 0 && ss.size == sizeof(ss));
    EXPECT_EINVAL(tether_sim_use(NULL, &e), e, "NULL");
    EXPECT(tether_sim_conn_id(NULL) == 0);
#ifdef TETHER_HAVE_PQ /* the pq driver's calls (a build without libpq has      \
                         none) */
    EXPECT(tether_pq_conn(NULL) == NULL);
    /* no connection and no result: a failure with nothing more to say */
    EXPECT(tether_pq_error(NULL, NULL, &e) < 0);
    PGresult *r = (PGresult *)&e; /* set to NULL by the calls below */
    EXPECT_EINVAL(tether_pq_exec(NULL, "SELECT 1", 100, &r, &e), e, "conn");
    EXPECT(r == NULL);
    r = (PGresult *)&e;
    EXPECT_EINVAL(tether_pq_exec_params(NULL, "SELECT 1", NULL, 100, &r, &e), e,
                  "conn");
    EXPECT(r == NULL);
    EXPECT_EINVAL(tether_pq_exec((PGconn *)&e, NULL, 100, &r, &e), e, "sql");
    EXPECT_EINVAL(tether_pq_exec((PGconn *)&e, "SELECT 1", 100, NULL, &e), e,
                  "res");
    tether_pq_stats_get(NULL);
    tether_pq_stmt *st = (tether_pq_stmt *)&e;
    EXPECT_EINVAL(tether_pq_declare("x", NULL, 0, NULL, &st, &e), e, "sql");
    EXPECT(st == NULL);
    EXPECT_EINVAL(tether_pq_declare("x", "SELECT 1", 0, NULL, NULL, &e), e,
                  "out");
    tether_pq_stmt_destroy(NULL);
    EXPECT_EINVAL(tether_pq_exec_prepared(NULL, st, NULL, 100, &r, &e), e,
                  "conn");
    EXPECT_EINVAL(
        tether_pq_exec_prepared((PGconn *)&e, NULL, NULL, 100, &r, &e), e,
        "stmt");
#endif
}

/* ---- the runner -------------------------------------------------------------
 */

typedef struct named {
    const char *name;
    void (*fn)(void);
} named;

static const named cases[] = {
    {"destroy and release functions", destroys},
    {"errors, names, parsers", errors_and_names},
    {"options, presets, spec parsers", options},
    {"create functions", creates},
    {"policies", policies},
    {"connector", connector},
    {"pool and lease", pool},
    {"registry", registry},
    {"sim and pq", sim_and_pq},
};

static void test_null_handles(void **state) {
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) { /* crash as a crash, not through cmocka's handler */
            int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
            for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
                signal(sigs[k], SIG_DFL);
            cases[i].fn();
            _exit(0);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (WIFSIGNALED(st)) {
            print_message("%s: crashed (signal %d)\n", cases[i].name,
                          WTERMSIG(st));
            bad++;
        } else if (WEXITSTATUS(st) != 0) {
            print_message("%s: failed (exit %d)\n", cases[i].name,
                          WEXITSTATUS(st));
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_handles),
    };
    return cmocka_run_group_tests_name("null", tests, NULL, NULL);
}
