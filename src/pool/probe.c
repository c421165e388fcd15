/* probe.c - the breaker's probe belongs to the pool (docs/breaker.md, "The
 * probe belongs to the pool"). When the connect breaker's period ends, the
 * connect that tests the server runs on a thread of the pool's with the
 * connector's whole budget (its login timeout, its passes over the hosts),
 * not on whichever caller heads the queue with what is left of its
 * deadline. Callers wait within their own deadlines and are handed the
 * connection as soon as it succeeds; one probe per period, as before.
 * Also here: the pool's background threads (probe, fill, keepalive,
 * non-blocking acquires' workers). */
#include "waitq.h"

#include <signal.h>

int tether__pool_spawn(void *(*fn)(void *), void *arg) {
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigset_t all, old; /* the application's signals stay on its threads */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&t, &a, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    return rc;
}

void tether__pool_bg_done(tether_pool *p) {
    pthread_mutex_lock(&p->lock);
    p->bg--;
    pthread_cond_broadcast(&p->drained);
    pthread_mutex_unlock(&p->lock);
}

/* The probe's budget: the connector's own (login timeout, passes over the
 * hosts), or for a bare driver the pool's acquire timeout, as the
 * background fill uses. */
static int64_t probe_budget(const tether_pool *p) {
    return p->o.connector ? -1 : p->o.acquire_timeout_ms;
}

static void *probe_main(void *arg) {
    tether_pool *p = arg;
    tether__slot *s = NULL;
    tether_error err;
    tether_error_clear(&err);
    int rc = tether__pool_connect_reserved(p, TETHER_PERMIT_PROBE,
                                           probe_budget(p), 1, &s, &err);
    if (rc == 0 && atomic_load(&p->closing)) {
        tether__pool_discard(p, s, CLOSE_SHUTDOWN);
    } else if (rc == 0) {
        tether__pool_put_idle(p, s); /* to the first waiter, or idle */
        tether__pool_grant_due(p);   /* then room for the others */
    } else
        tether__log(p->o.log, p->o.log_ctx, TETHER_LOG_WARN,
                    "pool %s: the breaker's probe failed after %lld ms: %s",
                    p->name, (long long)err.elapsed_ms, err.message);
    tether__pool_bg_done(p);
    return NULL;
}

int tether__pool_probe_start(tether_pool *p) {
    pthread_mutex_lock(&p->lock);
    p->bg++;
    atomic_store(&p->probing, 1);
    p->probe_start_ns = tether__mono_ns();
    pthread_mutex_unlock(&p->lock);
    atomic_fetch_add(&p->probes, 1);
    if (tether__pool_spawn(probe_main, p) == 0)
        return 0;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->probing, 0);
    p->bg--;
    pthread_cond_broadcast(&p->drained);
    pthread_mutex_unlock(&p->lock);
    atomic_fetch_sub(&p->probes, 1);
    return -1;
}
