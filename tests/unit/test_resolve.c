/* test_resolve.c - host name resolution within a budget (resolve.c):
 * numeric hosts and socket paths pass through, names in /etc/hosts
 * resolve, unknown names fail, and a lookup that outlives its caller's
 * budget is freed when it finishes (it used to leak), whichever of the two
 * lets go last.
 *
 * The slow lookup is deterministic: resolve.c calls getaddrinfo through
 * tether__getaddrinfo, and these tests put a stand-in there that holds
 * names starting with "slow." until the test opens a gate, then answers
 * 127.0.0.1. (This machine has no DNS server to be slow: names outside
 * /etc/hosts fail at once.) The real resolver is used for the rest,
 * including many concurrent lookups with budgets of 0 and 1 ms, which
 * finish on either side of the deadline (for ASan and TSan). */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "../support/clock.h"
#include "connector.h"
#include "tether.h"

#define MAX_LOOKUPS TETHER__MAX_LOOKUPS

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open;

static int slow_gai(const char *name, const char *service,
                    const struct addrinfo *hints, struct addrinfo **res) {
    if (!strncmp(name, "slow.", 5)) {
        pthread_mutex_lock(&gate_mu);
        while (!gate_open)
            pthread_cond_wait(&gate_cv, &gate_mu);
        pthread_mutex_unlock(&gate_mu);
        name = "127.0.0.1";
    }
    return getaddrinfo(name, service, hints, res);
}

static int setup(void **state) {
    (void)state;
    gate_open = 0;
    tether__getaddrinfo = slow_gai;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tether__getaddrinfo = getaddrinfo;
    return 0;
}

static void open_gate(void) {
    pthread_mutex_lock(&gate_mu);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

/* Waits up to 10 s for every lookup to be freed; returns what is left. */
static int drain(void) {
    for (int i = 0; i < 1000 && tether__resolve_pending() > 0; i++)
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    return tether__resolve_pending();
}

static void test_numeric_and_paths_need_no_lookup(void **state) {
    (void)state;
    const char *hosts[] = {"127.0.0.1", "::1", "/var/run/postgresql"};
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        char addrs[TETHER__MAX_ADDRS][64];
        tether_error err = {0};
        assert_int_equal(tether__resolve(hosts[i], 0, addrs, &err), 1);
        assert_string_equal(addrs[0], hosts[i]);
        assert_int_equal(tether__resolve_pending(), 0);
    }
}

static void test_hosts_file_name_resolves(void **state) {
    (void)state;
    char addrs[TETHER__MAX_ADDRS][64];
    tether_error err = {0};
    int n = tether__resolve("localhost", 10000, addrs, &err);
    if (n < 0)
        fail_msg("localhost: %s", err.message);
    int loopback = 0;
    for (int i = 0; i < n; i++)
        loopback |= !strcmp(addrs[i], "127.0.0.1") || !strcmp(addrs[i], "::1");
    assert_true(loopback);
    assert_int_equal(drain(), 0);
}

static void test_unknown_name_fails(void **state) {
    (void)state;
    char addrs[TETHER__MAX_ADDRS][64];
    tether_error err = {0};
    /* .invalid never resolves (RFC 2606); without DNS the answer may also
     * be a temporary failure, or none within the budget. */
    int n = tether__resolve("tether-no-such-host.invalid", 3000, addrs, &err);
    assert_true(n == TETHER_ERESOLVE || n == TETHER_ETIMEDOUT);
    assert_int_equal(err.code, n);
    assert_non_null(strstr(err.message, "tether-no-such-host.invalid"));
    assert_int_equal(drain(), 0);
}

/* The caller gives up at its deadline; the lookup finishes later and is
 * freed then. */
static void test_timed_out_lookup_is_freed_when_it_finishes(void **state) {
    (void)state;
    char addrs[TETHER__MAX_ADDRS][64];
    tether_error err = {0};
    int64_t t0 = now_ms();
    int n = tether__resolve("slow.example", 50, addrs, &err);
    int64_t took = now_ms() - t0;
    assert_int_equal(n, TETHER_ETIMEDOUT);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_non_null(strstr(err.message, "took longer than 50 ms"));
    assert_true(took >= 50 && took < 2000);
    assert_int_equal(tether__resolve_pending(), 1); /* still running */
    open_gate();
    assert_int_equal(drain(), 0);
}

/* The lookup answers first; the caller frees it. */
static void test_answered_lookup_is_freed_by_caller(void **state) {
    (void)state;
    open_gate();
    char addrs[TETHER__MAX_ADDRS][64];
    tether_error err = {0};
    assert_int_equal(tether__resolve("slow.example", 5000, addrs, &err), 1);
    assert_string_equal(addrs[0], "127.0.0.1");
    assert_int_equal(drain(), 0);
}

static void on_alarm(int sig) {
    (void)sig;
}

/* Signals do not cut the wait short. */
static void test_signal_does_not_end_wait(void **state) {
    (void)state;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, &old);
    struct itimerval every20 = {{0, 20000}, {0, 20000}}, off = {0};
    setitimer(ITIMER_REAL, &every20, NULL);
    char addrs[TETHER__MAX_ADDRS][64];
    tether_error err = {0};
    int64_t t0 = now_ms();
    int n = tether__resolve("slow.example", 300, addrs, &err);
    int64_t took = now_ms() - t0;
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    assert_int_equal(n, TETHER_ETIMEDOUT);
    assert_true(took >= 300);
    open_gate();
    assert_int_equal(drain(), 0);
}

static void *open_gate_later(void *arg) {
    (void)arg;
    nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
    open_gate();
    return NULL;
}

/* A budget of -1 waits for the answer however long it takes. */
static void test_unbounded_budget_waits(void **state) {
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, open_gate_later, NULL), 0);
    char addrs[TETHER__MAX_ADDRS][64];
    tether_error err = {0};
    assert_int_equal(tether__resolve("slow.example", -1, addrs, &err), 1);
    assert_string_equal(addrs[0], "127.0.0.1");
    pthread_join(t, NULL);
    assert_int_equal(drain(), 0);
}

/* Lookups stuck on the resolver are bounded: past MAX_LOOKUPS, new ones
 * fail at once (transient) instead of starting more threads. */
static void test_stuck_lookups_are_bounded(void **state) {
    (void)state;
    char addrs[TETHER__MAX_ADDRS][64];
    tether_error err = {0};
    for (int i = 0; i < MAX_LOOKUPS; i++)
        assert_int_equal(tether__resolve("slow.example", 0, addrs, &err),
                         TETHER_ETIMEDOUT);
    assert_int_equal(tether__resolve_pending(), MAX_LOOKUPS);
    assert_int_equal(tether__resolve("slow.example", 1000, addrs, &err),
                     TETHER_ERESOLVE);
    assert_int_equal(err.cls, TETHER_CLASS_TRANSIENT);
    assert_non_null(strstr(err.message, "still waiting for the resolver"));
    /* numeric hosts need no lookup and still pass */
    assert_int_equal(tether__resolve("127.0.0.1", 0, addrs, &err), 1);
    open_gate();
    assert_int_equal(drain(), 0);
    assert_int_equal(tether__resolve("slow.example", 5000, addrs, &err), 1);
    assert_int_equal(drain(), 0);
}

/* Many threads at once on the real resolver, half giving up at once or
 * after 1 ms, so that caller and lookup finish in either order. */
static void *resolver(void *arg) {
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 50; i++) {
        char addrs[TETHER__MAX_ADDRS][64];
        tether_error err = {0};
        int64_t budget = (i + id) % 2 ? (i % 4 == 1) : 10000;
        int n = tether__resolve("localhost", budget, addrs, &err);
        if (!(n >= 1 || (budget <= 1 && n == TETHER_ETIMEDOUT)))
            return (void *)1;
    }
    return NULL;
}

static void test_concurrent_lookups(void **state) {
    (void)state;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(
            pthread_create(&t[i], NULL, resolver, (void *)(intptr_t)i), 0);
    for (int i = 0; i < 4; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        assert_null(bad);
    }
    assert_int_equal(drain(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numeric_and_paths_need_no_lookup),
        cmocka_unit_test(test_hosts_file_name_resolves),
        cmocka_unit_test(test_unknown_name_fails),
        cmocka_unit_test_setup_teardown(
            test_timed_out_lookup_is_freed_when_it_finishes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answered_lookup_is_freed_by_caller,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_does_not_end_wait, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unbounded_budget_waits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stuck_lookups_are_bounded, setup,
                                        teardown),
        cmocka_unit_test(test_concurrent_lookups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
