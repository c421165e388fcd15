/*
 * query_zdb.c - SELECT 1 per second through libzdb's ConnectionPool
 * (libzdb 3.1, PostgreSQL backend), side by side with `tether bench query`.
 *
 * The libpq conninfo is split with PQconninfoParse into host, port, dbname,
 * user and password and rebuilt as libzdb's URL
 *   postgresql://HOST:PORT/DB?user=U&password=P
 * (values percent-encoded; libzdb connects with sslmode=disable unless
 * use-ssl=true).  Initial = max = P connections, opened by
 * ConnectionPool_start, no reaper.  Each of T threads loops
 * ConnectionPool_getConnection, Connection_executeQuery("SELECT 1") +
 * ResultSet_next, Connection_close (which returns it to the pool).
 *
 * libzdb semantics that shape the numbers (see bench/README.md):
 *   - getConnection pings every free candidate it looks at, under the pool
 *     mutex (Connection_ping; for PostgreSQL in 3.1 that is a PQstatus()
 *     check of the local state, not a round trip: measured, see README);
 *   - it never waits: with all P in use it returns NULL at once.  Each NULL
 *     is counted in "retries", the thread sched_yield()s and tries again
 *     (the retry loop watches the stop flag), as a libzdb user has to;
 *     the "wait" is from the first getConnection to the one that succeeds.
 *
 *   query_zdb --conninfo C --threads T --pool P --seconds S [--json]
 */
#include "query_common.h"

#include <ctype.h>
#include <sched.h>

#include <zdb.h>

/* Append s percent-encoded (all but RFC 3986 unreserved characters). */
static void put_escaped(char *buf, size_t cap, size_t *len, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s && *len + 4 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalnum(ch) || strchr("-._~", ch)) {
            buf[(*len)++] = (char)ch;
        } else {
            buf[(*len)++] = '%';
            buf[(*len)++] = hex[ch >> 4];
            buf[(*len)++] = hex[ch & 15];
        }
    }
    buf[*len] = '\0';
}

/* postgresql://host:port/db?user=..&password=.. from a libpq conninfo.
 * Returns 0, or -1 with the reason printed. */
static int zdb_url(const char *conninfo, char *buf, size_t cap)
{
    char *err = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &err);
    if (!opts) {
        fprintf(stderr, "query_zdb: --conninfo: %s", err ? err : "out of memory\n");
        PQfreemem(err);
        return -1;
    }
    const char *host = NULL, *hostaddr = NULL, *port = NULL, *db = NULL, *user = NULL,
               *password = NULL;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !*o->val)
            continue;
        if (!strcmp(o->keyword, "host"))
            host = o->val;
        else if (!strcmp(o->keyword, "hostaddr"))
            hostaddr = o->val;
        else if (!strcmp(o->keyword, "port"))
            port = o->val;
        else if (!strcmp(o->keyword, "dbname"))
            db = o->val;
        else if (!strcmp(o->keyword, "user"))
            user = o->val;
        else if (!strcmp(o->keyword, "password"))
            password = o->val;
    }
    if (hostaddr)
        host = hostaddr;
    int rc = 0;
    if (!host || strchr(host, ',') || host[0] == '/' || (port && strchr(port, ',')) || !user) {
        fprintf(stderr, "query_zdb: --conninfo needs one TCP host and a user "
                        "(libzdb takes one host:port)\n");
        rc = -1;
    } else {
        size_t len = 0;
        len = (size_t)snprintf(buf, cap, "postgresql://%s:%s/", host, port ? port : "5432");
        put_escaped(buf, cap, &len, db ? db : user);
        snprintf(buf + len, cap - len, "?user=");
        len += strlen(buf + len);
        put_escaped(buf, cap, &len, user);
        if (password) {
            snprintf(buf + len, cap - len, "&password=");
            len += strlen(buf + len);
            put_escaped(buf, cap, &len, password);
        }
        if (len + 8 >= cap) {
            fprintf(stderr, "query_zdb: --conninfo too long\n");
            rc = -1;
        }
    }
    PQconninfoFree(opts);
    return rc;
}

static bool zdb_select1(struct q_thread *t, Connection_T con)
{
    volatile bool ok = false;
    TRY
    {
        ResultSet_T rs = Connection_executeQuery(con, "SELECT 1");
        ok = ResultSet_next(rs);
        if (!ok)
            q_error(t, "SELECT 1", "no row");
    }
    CATCH(SQLException)
    {
        q_error(t, "SELECT 1", Exception_frame.message);
    }
    END_TRY;
    return ok;
}

static void *worker(void *arg)
{
    struct q_thread *t = arg;
    ConnectionPool_T pool = t->ctx;
    uint64_t retries = 0;
    if (!q_start(t, NULL))
        return NULL;
    while (!q_should_stop()) {
        uint64_t t0 = bench_now_ns();
        Connection_T con;
        while ((con = ConnectionPool_getConnection(pool)) == NULL) {
            retries++;
            if (q_should_stop())
                goto out;
            sched_yield();
        }
        uint64_t tw = bench_now_ns();
        bool ok = zdb_select1(t, con);
        Connection_close(con);
        if (!ok) {
            t->errors++;
            q_error_pause();
            continue;
        }
        q_op_done(t, t0, tw, bench_now_ns());
    }
out:
    t->retries = retries;
    return NULL;
}

static void zdb_abort(const char *error)
{
    fprintf(stderr, "query_zdb: libzdb abort: %s\n", error);
    exit(2);
}

/* Take all P connections, SELECT 1 on each, return them. */
static int warm_up(ConnectionPool_T pool, int n)
{
    Connection_T *con = calloc((size_t)n, sizeof *con);
    struct q_thread *t = calloc(1, sizeof *t);
    int got = 0, rc = con && t ? 0 : -1;
    while (rc == 0 && got < n && (con[got] = ConnectionPool_getConnection(pool)) != NULL)
        if (!zdb_select1(t, con[got++]))
            rc = -1;
    if (rc == 0 && got < n)
        snprintf(t->error, sizeof t->error, "only %d of %d connections", got, n), rc = -1;
    if (rc)
        fprintf(stderr, "query_zdb: warm-up: %s\n", t ? t->error : "out of memory");
    for (int i = 0; i < got; i++)
        Connection_close(con[i]);
    free(con);
    free(t);
    return rc;
}

int main(int argc, char **argv)
{
    struct q_opts o = {.impl = "libzdb"};
    int prc = q_parse(argc, argv,
                      "SELECT 1 through a libzdb ConnectionPool of P connections (default 8).",
                      &o);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    int n = o.pool ? o.pool : 8;

    char text[2048];
    if (zdb_url(o.conninfo, text, sizeof text) != 0)
        return 2;
    URL_T url = URL_new(text);
    memset(text, 0, sizeof text); /* holds the password */
    if (!url) {
        fprintf(stderr, "query_zdb: libzdb cannot parse the URL built from --conninfo\n");
        return 2;
    }
    ConnectionPool_T pool = ConnectionPool_new(url);
    ConnectionPool_setAbortHandler(pool, zdb_abort);
    ConnectionPool_setInitialConnections(pool, n);
    ConnectionPool_setMaxConnections(pool, n);
    /* No ConnectionPool_setReaper(): the reaper thread is off by default. */
    volatile int started = 0;
    TRY
    {
        ConnectionPool_start(pool);
        started = 1;
    }
    CATCH(SQLException)
    {
        fprintf(stderr, "query_zdb: ConnectionPool_start: %s\n", Exception_frame.message);
    }
    END_TRY;
    int rc = started && ConnectionPool_size(pool) == n ? warm_up(pool, n) : -1;
    if (started && rc != 0 && ConnectionPool_size(pool) != n)
        fprintf(stderr, "query_zdb: pool did not start with %d connections (size %d)\n", n,
                ConnectionPool_size(pool));
    struct q_result r = {0};
    if (rc == 0)
        rc = q_run(&o, worker, pool, &r);
    if (rc == 0)
        q_report(&o, n, &r);
    if (started)
        ConnectionPool_stop(pool);
    ConnectionPool_free(&pool);
    URL_free(&url);
    return rc != 0 ? 2 : r.ops == 0 ? 1 : 0;
}
