/* retry.c - retry a flaky operation under a policy read from a spec, with a
 * retry budget and a circuit breaker, logging transient faults.
 *
 *   example_retry ["exponential base=50ms max=1s attempts=6 deadline=5s"]
 */
#include <tether.h>

#include <stdio.h>
#include <stdlib.h>

/* A pretend remote call: fails with a transient error two times in three.
 * The work is not idempotent (the runs below pass no TETHER_IDEMPOTENT), so
 * it is retried only because each failure says it never reached the server:
 * tether_error_set_not_sent. (tether_error_set would mean "it may have
 * been sent" and stop the run after one attempt.) */
static int flaky(void *arg, const tether_attempt *a, tether_error *err) {
    int *calls = arg;
    (*calls)++;
    if (rand() % 3 != 0) /* refused before anything was sent */
        return tether_error_set_not_sent(err, TETHER_ECONNECT,
                                         TETHER_CLASS_TRANSIENT,
                                         "connection refused (attempt %d, "
                                         "%lld ms allowed)",
                                         a->number, (long long)a->timeout_ms);
    return 0;
}

static void log_line(void *ctx, tether_log_level level, const char *msg) {
    (void)ctx;
    fprintf(stderr, "[%s] %s\n",
            level >= TETHER_LOG_ERROR  ? "error"
            : level >= TETHER_LOG_WARN ? "warn"
                                       : "info",
            msg);
}

int main(int argc, char **argv) {
    const char *spec = argc > 1 ? argv[1]
                                : "exponential base=50ms max=1s jitter=full "
                                  "attempts=6 deadline=5s";
    tether_error err = {0};
    tether_retry_opts o;
    if (tether_retry_opts_parse(spec, &o, &err) != 0) {
        fprintf(stderr, "bad policy: %s\n", err.message);
        return 2;
    }
    tether_budget *budget = NULL;
    tether_breaker *breaker = NULL;
    tether_budget_opts bo;
    tether_breaker_opts ko;
    tether_budget_opts_init(&bo);
    tether_breaker_opts_init(&ko);
    tether_set_log(log_line, NULL, TETHER_LOG_WARN);
    tether_retry *policy = NULL;
    int rc = tether_budget_create(&budget, &bo, &err);
    if (rc == 0)
        rc = tether_breaker_create(&breaker, &ko, &err);
    o.budget = budget;
    o.breaker = breaker;
    if (rc == 0)
        rc = tether_retry_create(&policy, &o, &err);
    for (int i = 0; rc == 0 && i < 5; i++) {
        int calls = 0;
        int r = tether_retry_run(policy, 0, flaky, &calls, &err);
        printf("run %d: %s after %d attempts (%lld ms)%s%s\n", i + 1,
               r == 0 ? "ok" : tether_errname(r), err.attempts,
               (long long)err.elapsed_ms, r ? ", stopped: " : "",
               r ? tether_stop_name(err.stop) : "");
    }
    if (rc == 0) {
        tether_retry_stats st;
        tether_retry_stats_get(policy, &st);
        printf("policy: %llu runs, %llu attempts, %llu retries, %llu "
               "succeeded\n",
               (unsigned long long)st.runs, (unsigned long long)st.attempts,
               (unsigned long long)st.retries,
               (unsigned long long)st.successes);
    } else {
        fprintf(stderr, "setup failed: %s\n", err.message);
    }
    tether_retry_destroy(policy);
    tether_breaker_destroy(breaker);
    tether_budget_destroy(budget);
    return rc == 0 ? 0 : 1;
}
