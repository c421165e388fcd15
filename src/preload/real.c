/* real.c - libpq's own connection functions, found once with
 * dlsym(RTLD_NEXT) (the library after this one in the lookup order: the
 * libpq the program would have called), and the entry points the pq
 * driver built into this library uses instead of libpq's names
 * (redirect.h), so that tether's own connects never come back here. */
#include "preload.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

tp_real_fns tp_real;
_Thread_local int tp_passing;

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
    *(void **)&tp_real.connectdb = sym("PQconnectdb");
    *(void **)&tp_real.connectdb_params = sym("PQconnectdbParams");
    *(void **)&tp_real.setdb_login = sym("PQsetdbLogin");
    *(void **)&tp_real.connect_start = sym("PQconnectStart");
    *(void **)&tp_real.connect_start_params = sym("PQconnectStartParams");
    *(void **)&tp_real.connect_poll = sym("PQconnectPoll");
    *(void **)&tp_real.finish = sym("PQfinish");
    *(void **)&tp_real.reset = sym("PQreset");
    *(void **)&tp_real.reset_start = sym("PQresetStart");
    *(void **)&tp_real.reset_poll = sym("PQresetPoll");
    *(void **)&tp_real.ping = sym("PQping");
    *(void **)&tp_real.ping_params = sym("PQpingParams");
    *(void **)&tp_real.conninfo = sym("PQconninfo");
    *(void **)&tp_real.register_event = sym("PQregisterEventProc");
    *(void **)&tp_real.exec = sym("PQexec");
    *(void **)&tp_real.send_query = sym("PQsendQuery");
    *(void **)&tp_real.exec_params = sym("PQexecParams");
    *(void **)&tp_real.send_query_params = sym("PQsendQueryParams");
    *(void **)&tp_real.prepare = sym("PQprepare");
    *(void **)&tp_real.send_prepare = sym("PQsendPrepare");
}

int tp_real_resolve(void) {
    pthread_once(&resolve_once, resolve);
    return resolve_rc;
}

PGconn *tp_real_PQconnectStartParams(const char *const *keys,
                                     const char *const *vals, int expand) {
    if (tp_real_resolve())
        return NULL;
    tp_passing++;
    PGconn *pg = tp_real.connect_start_params(keys, vals, expand);
    tp_passing--;
    return pg;
}

PostgresPollingStatusType tp_real_PQconnectPoll(PGconn *pg) {
    if (tp_real_resolve())
        return PGRES_POLLING_FAILED;
    tp_passing++;
    PostgresPollingStatusType st = tp_real.connect_poll(pg);
    tp_passing--;
    return st;
}

void tp_real_PQfinish(PGconn *pg) {
    if (tp_real_resolve())
        return;
    tp_table_forget(pg); /* its address may be reused by libpq from now */
    tp_passing++;
    tp_real.finish(pg);
    tp_passing--;
}
