/* real.c - libpq's own connection functions, found once with
 * dlsym(RTLD_NEXT) (the library after this one in the lookup order: the
 * libpq the program would have called), and the entry points the pq
 * driver built into this library uses instead of libpq's names
 * (redirect.h), so that tether's own connects never come back here. */
#include "preload.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

tether__preload_real_fns tether__preload_real;
_Thread_local int tether__preload_passing;

static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
static int resolve_rc;

static void *sym(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "tether-preload: libpq's %s not found (%s)\n", name,
                dlerror());
        resolve_rc = -1;
    }
    return p;
}

static void resolve(void) {
    /* Function pointers from dlsym: POSIX guarantees the conversion. */
    *(void **)&tether__preload_real.connectdb = sym("PQconnectdb");
    *(void **)&tether__preload_real.connectdb_params = sym("PQconnectdbParams");
    *(void **)&tether__preload_real.setdb_login = sym("PQsetdbLogin");
    *(void **)&tether__preload_real.connect_start = sym("PQconnectStart");
    *(void **)&tether__preload_real.connect_start_params =
        sym("PQconnectStartParams");
    *(void **)&tether__preload_real.connect_poll = sym("PQconnectPoll");
    *(void **)&tether__preload_real.finish = sym("PQfinish");
    *(void **)&tether__preload_real.reset = sym("PQreset");
    *(void **)&tether__preload_real.reset_start = sym("PQresetStart");
    *(void **)&tether__preload_real.reset_poll = sym("PQresetPoll");
    *(void **)&tether__preload_real.ping = sym("PQping");
    *(void **)&tether__preload_real.ping_params = sym("PQpingParams");
    *(void **)&tether__preload_real.conninfo = sym("PQconninfo");
    *(void **)&tether__preload_real.register_event = sym("PQregisterEventProc");
    *(void **)&tether__preload_real.exec = sym("PQexec");
    *(void **)&tether__preload_real.send_query = sym("PQsendQuery");
    *(void **)&tether__preload_real.exec_params = sym("PQexecParams");
    *(void **)&tether__preload_real.send_query_params =
        sym("PQsendQueryParams");
    *(void **)&tether__preload_real.prepare = sym("PQprepare");
    *(void **)&tether__preload_real.send_prepare = sym("PQsendPrepare");
    *(void **)&tether__preload_real.fn = sym("PQfn");
}

static int resolved; /* __atomic_*: resolve has run */

int tether__preload_real_resolve(void) {
    if (__builtin_expect(__atomic_load_n(&resolved, __ATOMIC_ACQUIRE), 1))
        return resolve_rc;
    pthread_once(&resolve_once, resolve);
    __atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
    return resolve_rc;
}

PGconn *tether__preload_real_PQconnectStartParams(const char *const *keys,
                                                  const char *const *vals,
                                                  int expand) {
    if (tether__preload_real_resolve())
        return NULL;
    tether__preload_passing++;
    PGconn *pg = tether__preload_real.connect_start_params(keys, vals, expand);
    tether__preload_passing--;
    return pg;
}

PostgresPollingStatusType tether__preload_real_PQconnectPoll(PGconn *pg) {
    if (tether__preload_real_resolve())
        return PGRES_POLLING_FAILED;
    tether__preload_passing++;
    PostgresPollingStatusType st = tether__preload_real.connect_poll(pg);
    tether__preload_passing--;
    return st;
}

void tether__preload_real_PQfinish(PGconn *pg) {
    if (tether__preload_real_resolve())
        return;
    tether__preload_table_forget(
        pg); /* its address may be reused by libpq from now */
    tether__preload_passing++;
    tether__preload_real.finish(pg);
    tether__preload_passing--;
}
