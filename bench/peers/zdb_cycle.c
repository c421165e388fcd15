/*
 * zdb_cycle.c - acquire+release cycles per second of libzdb's
 * ConnectionPool, for side-by-side comparison with `tether bench cycle`.
 *
 * The pool points at a temporary SQLite file (no network I/O), with
 * initial = max = P connections and no reaper.  Each of T threads loops
 * ConnectionPool_getConnection + Connection_close until the window closes.
 *
 * libzdb does not wait for a connection: when all P are in use,
 * ConnectionPool_getConnection() returns NULL at once (checked against the
 * installed 3.1 headers and library; it is the non-throwing variant, and 3.1
 * has no other).  Each NULL is counted as a failure, the thread calls
 * sched_yield() and retries; the retry loop also watches the stop flag, so
 * an exhausted pool never spins past the end of the window.
 *
 *   zdb_cycle --threads T --pool P --seconds S [--json] [--wait|--no-wait]
 */
#include "peer_common.h"

#include <sched.h>
#include <unistd.h>

#include <zdb.h>

struct zdb_ctx {
    ConnectionPool_T pool;
    bool wait_sample;
};

static void *worker(void *arg)
{
    struct peer_thread *t = arg;
    const struct zdb_ctx *c = t->ctx;
    ConnectionPool_T pool = c->pool;
    const bool sample = c->wait_sample;
    uint64_t ops = 0, failures = 0;
    unsigned tick = t->index * 7u;

    peer_wait_start();
    while (!peer_should_stop()) {
        bool timed = sample && (++tick & (PEER_SAMPLE_EVERY - 1)) == 0;
        uint64_t t0 = timed ? bench_now_ns() : 0;
        Connection_T con;
        while ((con = ConnectionPool_getConnection(pool)) == NULL) {
            failures++;
            if (peer_should_stop())
                goto out;
            sched_yield();
        }
        if (timed)
            peer_record_wait(t, bench_now_ns() - t0);
        Connection_close(con);
        ops++;
    }
out:
    t->ops = ops;
    t->failures = failures;
    return NULL;
}

static void zdb_abort(const char *error)
{
    fprintf(stderr, "zdb_cycle: libzdb abort: %s\n", error);
    exit(2);
}

static void remove_db_files(const char *path)
{
    static const char *const suffix[] = {"", "-journal", "-wal", "-shm"};
    char buf[512];
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", path, suffix[i]);
        unlink(buf);
    }
}

int main(int argc, char **argv)
{
    struct peer_opts o;
    int prc = peer_parse(argc, argv, &o);
    if (prc != 0)
        return prc > 0 ? 0 : 2;

    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    char path[400];
    snprintf(path, sizeof path, "%s/zdbbench-%ld.db", tmp, (long)getpid());
    remove_db_files(path);

    URL_T url = URL_create("sqlite://%s", path);
    if (!url) {
        fprintf(stderr, "zdb_cycle: bad URL for %s\n", path);
        return 2;
    }
    struct zdb_ctx ctx = {.pool = ConnectionPool_new(url), .wait_sample = o.wait_sample};
    ConnectionPool_setAbortHandler(ctx.pool, zdb_abort);
    ConnectionPool_setInitialConnections(ctx.pool, o.pool);
    ConnectionPool_setMaxConnections(ctx.pool, o.pool);
    /* No ConnectionPool_setReaper(): the reaper thread is off by default. */

    volatile int started = 0;
    TRY
    {
        ConnectionPool_start(ctx.pool);
        started = 1;
    }
    CATCH(SQLException)
    {
        fprintf(stderr, "zdb_cycle: ConnectionPool_start: %s\n", Exception_frame.message);
    }
    END_TRY;
    if (!started || ConnectionPool_size(ctx.pool) != o.pool) {
        fprintf(stderr, "zdb_cycle: pool did not start with %d connections (size %d)\n",
                o.pool, started ? ConnectionPool_size(ctx.pool) : 0);
        remove_db_files(path);
        return 2;
    }

    struct peer_result r;
    int rc = peer_run(&o, worker, &ctx, &r);
    if (rc == 0)
        peer_report("libzdb", &o, &r);

    ConnectionPool_stop(ctx.pool);
    ConnectionPool_free(&ctx.pool);
    URL_free(&url);
    remove_db_files(path);
    return rc == 0 ? 0 : 2;
}
