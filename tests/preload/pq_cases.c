/* pq_cases.c - a plain libpq program (it knows nothing of tether) for the
 * cases where a pool could make a program see what plain libpq would not:
 * test_preload.sh runs each mode with and without
 * LD_PRELOAD=libtether-preload.so and compares the "result:" lines
 * (docs/preload.md, "What it cannot know" and "Tests").
 *
 *   pq_cases envcred CI USER2 PW2      user, password and options from the
 *                                      environment, changed between connects
 *   pq_cases revoke CI ADMIN ROLE PW SECS  NOLOGIN, then a new password,
 *                                      each followed by SECS of waiting
 *                                      (SECS below 0: NOLOGIN only, -SECS)
 *   pq_cases settings CI ADMIN DB SECS ALTER DATABASE / ROLE ... SET
 *   pq_cases dropdb CI ADMIN           DROP DATABASE, CREATE DATABASE ...
 *                                      TEMPLATE, DROP ... WITH (FORCE) of
 *                                      databases the program has left
 *   pq_cases hold CI N                 N connections held at once
 *   pq_cases apps CI N                 N connects, each its own
 *                                      application_name, then a count of
 *                                      the user's backends
 *   pq_cases events CI                 PQregisterEventProc on two connects
 *   pq_cases placeholder CI            a custom setting (myapp.tenant) on
 *                                      one connect, read on the next
 *   pq_cases conninfo CI               what PQconninfo tells
 *   pq_cases prepared CI               PQprepare on each connect: the same
 *                                      text, another text, SQL PREPARE and
 *                                      DEALLOCATE, PQsendPrepare, inside a
 *                                      transaction; and whether a statement
 *                                      was answered without the server
 *   pq_cases clean CI ADMIN            statements that change nothing, and
 *                                      ones that may change the session,
 *                                      each read by the next connect; and
 *                                      whether the give-back ran the reset
 *                                      (a prepare whose statement is not
 *                                      kept: it names a function)
 *
 * CI is the program's connection string (CI for envcred carries no user
 * or password: they come from PGUSER and PGPASSWORD); ADMIN a superuser's.
 * Deterministic lines start with "result:"; measurements with "measure:". */
#include <libpq-events.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* with: ci followed by extra keywords (the later ones win in libpq). */
static PGconn *connect_with(const char *ci, const char *extra) {
    char s[2048];
    snprintf(s, sizeof(s), "%s %s", ci, extra ? extra : "");
    return PQconnectdb(s);
}

static PGconn *must_connect(const char *ci, const char *extra) {
    PGconn *pg = connect_with(ci, extra);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "pq_cases: connect: %s", PQerrorMessage(pg));
        exit(1);
    }
    return pg;
}

/* value: the one value of sql, "null", or "error". */
static const char *value(PGconn *pg, const char *sql, char *out, size_t cap) {
    PGresult *r = PQexec(pg, sql);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        snprintf(out, cap, "%s",
                 PQgetisnull(r, 0, 0) ? "null" : PQgetvalue(r, 0, 0));
    else
        snprintf(out, cap, "error");
    PQclear(r);
    return out;
}

static void must(PGconn *pg, const char *sql) {
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        fprintf(stderr, "pq_cases: %s: %s", sql, PQerrorMessage(pg));
        exit(1);
    }
    PQclear(r);
}

/* admin runs one statement on its own connection; returns 1 when it
 * succeeded. */
static int admin(const char *ci, const char *sql) {
    PGconn *pg = must_connect(ci, NULL);
    PGresult *r = PQexec(pg, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        fprintf(stderr, "pq_cases: admin: %s: %s", sql, PQerrorMessage(pg));
    PQclear(r);
    PQfinish(pg);
    return ok;
}

/* one: connect with extra, run sql, print label=value (or label=refused). */
static void one(const char *label, const char *ci, const char *extra,
                const char *sql) {
    char v[256];
    PGconn *pg = connect_with(ci, extra);
    if (PQstatus(pg) != CONNECTION_OK)
        printf(" %s=refused", label);
    else
        printf(" %s=%s", label, value(pg, sql, v, sizeof(v)));
    PQfinish(pg);
}

static int cmd_envcred(const char *ci, const char *user2, const char *pw2) {
    printf("result: envcred");
    one("first", ci, NULL, "SELECT current_user");
    setenv("PGUSER", user2, 1);
    setenv("PGPASSWORD", pw2, 1);
    one("second", ci, NULL, "SELECT current_user");
    setenv("PGPASSWORD", "not-the-password", 1);
    one("wrong_password", ci, NULL, "SELECT current_user");
    setenv("PGPASSWORD", pw2, 1);
    setenv("PGOPTIONS", "-c search_path=s2", 1);
    one("options", ci, NULL, "SHOW search_path");
    unsetenv("PGOPTIONS");
    one("no_options", ci, NULL, "SHOW search_path");
    printf("\n");
    return 0;
}

/* same_backend: two connects in a row had the same backend (pooled). */
static int same_backend(const char *ci, const char *extra) {
    int pid[2];
    for (int i = 0; i < 2; i++) {
        PGconn *pg = must_connect(ci, extra);
        pid[i] = PQbackendPID(pg);
        PQfinish(pg);
    }
    return pid[0] == pid[1];
}

static int cmd_revoke(const char *ci, const char *adm, const char *role,
                      const char *pw, double secs) {
    char sql[512], who[256], newpw[256];
    int nologin_only = secs < 0;
    secs = secs < 0 ? -secs : secs;
    snprintf(who, sizeof(who), "user=%s password=%s", role, pw);
    snprintf(newpw, sizeof(newpw), "user=%s password=%s-new", role, pw);
    printf("result: revoke");
    one("before", ci, who, "SELECT current_user");
    snprintf(sql, sizeof(sql), "ALTER ROLE %s NOLOGIN", role);
    admin(adm, sql);
    sleep_s(secs);
    one("nologin", ci, who, "SELECT current_user");
    snprintf(sql, sizeof(sql), "ALTER ROLE %s LOGIN", role);
    admin(adm, sql);
    one("login_again", ci, who, "SELECT current_user");
    if (nologin_only) { /* a new password needs the longer bound */
        printf("\n");
        int reused = 0; /* a pool's breaker may wait 1 s after a refusal */
        for (double end = now_s() + 5; !reused && now_s() < end; sleep_s(0.2))
            reused = same_backend(ci, who);
        printf("measure: revoke reused_after_login=%d\n", reused);
        return 0;
    }
    snprintf(sql, sizeof(sql), "ALTER ROLE %s PASSWORD '%s-new'", role, pw);
    admin(adm, sql);
    sleep_s(secs);
    one("old_password", ci, who, "SELECT current_user");
    one("new_password", ci, newpw, "SELECT current_user");
    snprintf(sql, sizeof(sql), "ALTER ROLE %s PASSWORD '%s'", role, pw);
    admin(adm, sql);
    printf("\n");
    return 0;
}

static int cmd_settings(const char *ci, const char *adm, const char *db,
                        double secs) {
    char sql[512];
    printf("result: settings");
    one("before", ci, NULL, "SHOW work_mem");
    one("again", ci, NULL, "SHOW work_mem"); /* a connection used twice */
    snprintf(sql, sizeof(sql), "ALTER DATABASE %s SET work_mem = '11MB'", db);
    admin(adm, sql);
    sleep_s(secs);
    one("database_set", ci, NULL, "SHOW work_mem");
    PGconn *pg = must_connect(ci, NULL);
    char role[128], sql2[256];
    value(pg, "SELECT current_user", role, sizeof(role));
    PQfinish(pg);
    one("again", ci, NULL, "SHOW work_mem");
    snprintf(sql2, sizeof(sql2), "ALTER ROLE %s SET work_mem = '13MB'", role);
    admin(adm, sql2);
    sleep_s(secs);
    one("role_set", ci, NULL, "SHOW work_mem");
    snprintf(sql, sizeof(sql), "ALTER DATABASE %s RESET work_mem", db);
    admin(adm, sql);
    snprintf(sql2, sizeof(sql2), "ALTER ROLE %s RESET work_mem", role);
    admin(adm, sql2);
    printf("\n");
    return 0;
}

/* visit connects to db, runs a query and finishes. */
static void visit(const char *ci, const char *db) {
    char extra[128], v[32];
    snprintf(extra, sizeof(extra), "dbname=%s", db);
    PGconn *pg = must_connect(ci, extra);
    value(pg, "SELECT 1", v, sizeof(v));
    PQfinish(pg);
}

static void timed(const char *label, const char *adm, const char *sql) {
    double t0 = now_s();
    int ok = admin(adm, sql);
    printf(" %s=%s", label, ok ? "ok" : "failed");
    fprintf(stderr, "measure: dropdb %s_s=%.2f\n", label, now_s() - t0);
}

static int cmd_dropdb(const char *ci, const char *adm) {
    admin(adm, "DROP DATABASE IF EXISTS tether__preload_gone");
    admin(adm, "DROP DATABASE IF EXISTS tether__preload_tmpl");
    admin(adm, "DROP DATABASE IF EXISTS tether__preload_copy");
    admin(adm, "DROP DATABASE IF EXISTS tether__preload_forced");
    admin(adm, "CREATE DATABASE tether__preload_gone");
    admin(adm, "CREATE DATABASE tether__preload_tmpl");
    admin(adm, "CREATE DATABASE tether__preload_forced");
    visit(ci, "tether__preload_gone");
    visit(ci, "tether__preload_tmpl");
    visit(ci, "tether__preload_forced");
    printf("result: dropdb");
    timed("drop", adm, "DROP DATABASE tether__preload_gone");
    timed("template", adm,
          "CREATE DATABASE tether__preload_copy TEMPLATE tether__preload_tmpl");
    timed("forced", adm, "DROP DATABASE tether__preload_forced WITH (FORCE)");
    /* the server ended pooled backends: the next connects still work */
    visit(ci, "postgres");
    visit(ci, "postgres");
    printf(" after=ok\n");
    admin(adm, "DROP DATABASE IF EXISTS tether__preload_copy");
    admin(adm, "DROP DATABASE IF EXISTS tether__preload_tmpl");
    return 0;
}

static int cmd_hold(const char *ci, int n) {
    PGconn *pg[64];
    char v[32];
    long sum = 0;
    double t0 = now_s();
    n = n > 64 ? 64 : n;
    for (int i = 0; i < n; i++)
        pg[i] = must_connect(ci, NULL);
    for (int i = 0; i < n; i++)
        sum += atol(value(pg[i], "SELECT 7", v, sizeof(v)));
    for (int i = 0; i < n; i++)
        PQfinish(pg[i]);
    printf("result: hold n=%d sum=%ld\n", n, sum);
    printf("measure: hold seconds=%.2f\n", now_s() - t0);
    return 0;
}

static int cmd_apps(const char *ci, int n) {
    char extra[64], v[32];
    int failed = 0;
    for (int i = 0; i < n; i++) {
        snprintf(extra, sizeof(extra),
                 "application_name=tether__preload_app_%d", i);
        PGconn *pg = connect_with(ci, extra);
        if (PQstatus(pg) != CONNECTION_OK) {
            fprintf(stderr, "pq_cases: apps %d: %s", i, PQerrorMessage(pg));
            failed++;
        }
        PQfinish(pg);
    }
    sleep_s(0.3);
    PGconn *pg = must_connect(ci, NULL);
    value(pg,
          "SELECT count(*) FROM pg_stat_activity WHERE usename = current_user "
          "AND backend_type = 'client backend'",
          v, sizeof(v));
    PQfinish(pg);
    printf("result: apps n=%d failed=%d\n", n, failed);
    printf("measure: apps backends_after=%s\n", v);
    return 0;
}

static int destroyed;

static int event_proc(PGEventId id, void *info, void *pass) {
    (void)info;
    (void)pass;
    if (id == PGEVT_CONNDESTROY)
        destroyed++;
    return 1;
}

static int cmd_events(const char *ci) {
    int reg[2];
    for (int i = 0; i < 2; i++) {
        PGconn *pg = must_connect(ci, NULL);
        reg[i] = PQregisterEventProc(pg, event_proc, "pq_cases", NULL);
        PQfinish(pg);
    }
    printf("result: events register1=%d register2=%d destroyed=%d\n", reg[0],
           reg[1], destroyed);
    return 0;
}

static int cmd_placeholder(const char *ci) {
    char v[64], w[64];
    PGconn *pg = must_connect(ci, NULL);
    must(pg, "SET myapp.tenant = 'acme'");
    PQfinish(pg);
    pg = must_connect(ci, NULL);
    const char *p[1] = {"x"};
    PGresult *r =
        PQexecParams(pg, "SELECT set_config('myapp.other', $1, false)", 1, NULL,
                     p, NULL, NULL, 0);
    PQclear(r);
    value(pg, "SELECT current_setting('myapp.tenant', true)", v, sizeof(v));
    PQfinish(pg);
    pg = must_connect(ci, NULL);
    value(pg, "SELECT current_setting('myapp.other', true)", w, sizeof(w));
    PQfinish(pg);
    printf("result: placeholder tenant=%s other=%s\n", v, w);
    return 0;
}

static int cmd_conninfo(const char *ci) {
    PGconn *pg = must_connect(ci, NULL);
    PQconninfoOption *o = PQconninfo(pg);
    printf("result: conninfo");
    for (PQconninfoOption *p = o; p && p->keyword; p++)
        if (!strcmp(p->keyword, "host") || !strcmp(p->keyword, "hostaddr") ||
            !strcmp(p->keyword, "port") || !strcmp(p->keyword, "dbname") ||
            !strcmp(p->keyword, "user") ||
            !strcmp(p->keyword, "target_session_attrs"))
            printf(" %s=%s", p->keyword, p->val ? p->val : "(null)");
    printf("\n");
    PQconninfoFree(o);
    PQfinish(pg);
    return 0;
}

/* prep_run: PQprepare name as sql on pg (through PQprepare, or PQsendPrepare
 * when async), then run it with arg: its value, or "error". */
static const char *prep_run(PGconn *pg, const char *name, const char *sql,
                            const char *arg, int async, char *out, size_t cap) {
    PGresult *r;
    if (async) {
        r = NULL;
        if (PQsendPrepare(pg, name, sql, 1, NULL))
            for (PGresult *x; (x = PQgetResult(pg)) != NULL;) {
                PQclear(r);
                r = x;
            }
    } else {
        r = PQprepare(pg, name, sql, 1, NULL);
    }
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) {
        snprintf(out, cap, "error");
        return out;
    }
    const char *vals[1] = {arg};
    r = PQexecPrepared(pg, name, 1, vals, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        snprintf(out, cap, "%s", PQgetvalue(r, 0, 0));
    else
        snprintf(out, cap, "error");
    PQclear(r);
    return out;
}

/* Each connect prepares as a program that prepares on every connect does;
 * the values must be those of fresh sessions. Under the preload, a
 * statement with the same text comes back without a round trip: its
 * server-side prepare_time is then older than the connect. */
static int cmd_prepared(const char *ci) {
    char v[7][64], kept[16] = "no";
    PGconn *pg = must_connect(ci, NULL);
    prep_run(pg, "s1", "SELECT $1::int + 1", "41", 0, v[0], sizeof(v[0]));
    PQfinish(pg);
    sleep_s(0.05);
    pg = must_connect(ci, NULL);
    char since[64], t[64];
    value(pg, "SELECT now()", since, sizeof(since));
    prep_run(pg, "s1", "SELECT $1::int + 1", "1", 0, v[1], sizeof(v[1]));
    char q[256];
    snprintf(q, sizeof(q),
             "SELECT prepare_time < '%s' FROM pg_prepared_statements "
             "WHERE name = 's1'",
             since);
    if (!strcmp(value(pg, q, t, sizeof(t)), "t"))
        snprintf(kept, sizeof(kept), "yes");
    PQfinish(pg);
    pg = must_connect(ci, NULL); /* the same name, another text */
    prep_run(pg, "s1", "SELECT $1::int * 10", "4", 0, v[2], sizeof(v[2]));
    PQfinish(pg);
    pg = must_connect(ci, NULL); /* SQL PREPARE and DEALLOCATE */
    value(pg, "PREPARE s2 AS SELECT 7", t, sizeof(t));
    value(pg, "EXECUTE s2", v[3], sizeof(v[3]));
    prep_run(pg, "s1", "SELECT $1::int + 1", "5", 0, t, sizeof(t));
    PQfinish(pg);
    pg = must_connect(ci, NULL); /* s2 must be gone: PREPARE again */
    must(pg, "PREPARE s2 AS SELECT 8");
    value(pg, "EXECUTE s2", v[4], sizeof(v[4]));
    PQfinish(pg);
    pg = must_connect(ci, NULL); /* PQsendPrepare, then PQprepare */
    prep_run(pg, "s3", "SELECT $1::int - 1", "1", 1, v[5], sizeof(v[5]));
    PQfinish(pg);
    pg = must_connect(ci, NULL);
    prep_run(pg, "s3", "SELECT $1::int - 1", "10", 0, t, sizeof(t));
    must(pg, "BEGIN"); /* inside a transaction block */
    prep_run(pg, "s1", "SELECT $1::int + 100", "1", 0, v[6], sizeof(v[6]));
    must(pg, "COMMIT");
    PQfinish(pg);
    /* A name an earlier connect prepared with PQprepare, prepared now with
     * SQL PREPARE: a fresh session has no such statement, so it runs. */
    pg = must_connect(ci, NULL);
    int pid = PQbackendPID(pg);
    char t8[64];
    prep_run(pg, "s8", "SELECT $1::int * 8", "1", 0, t8, sizeof(t8));
    PQfinish(pg);
    pg = must_connect(ci, NULL);
    char mix[64] = "error";
    int same_backend = PQbackendPID(pg) == pid;
    PGresult *r = PQexec(pg, "PREPARE s8 AS SELECT 88");
    if (PQresultStatus(r) == PGRES_COMMAND_OK)
        value(pg, "EXECUTE s8", mix, sizeof(mix));
    PQclear(r);
    PQfinish(pg);
    printf("result: same=%s+%s other=%s sql=%s again=%s send=%s/%s txn=%s "
           "mix=%s\n",
           v[0], v[1], v[2], v[3], v[4], v[5], t, v[6], mix);
    printf("measure: kept=%s mix_same_backend=%s\n", kept,
           same_backend ? "yes" : "no");
    return 0;
}

/* after: what became of backend pid once its connection was finished,
 * seen from ADMIN: "gone" (closed, plain libpq), "reset" (its last
 * statement is no longer sql: the give-back's reset ran) or "kept" (still
 * sql after 1 s: given back without a reset). */
static const char *after(const char *adm, int pid, const char *sql) {
    char q[128], v[512];
    snprintf(q, sizeof(q), "SELECT query FROM pg_stat_activity WHERE pid = %d",
             pid);
    PGconn *a = must_connect(adm, NULL);
    const char *what = "kept";
    for (double t0 = now_s(); now_s() - t0 < 1; sleep_s(0.02)) {
        PGresult *r = PQexec(a, q);
        int rows = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : -1;
        snprintf(v, sizeof(v), "%s", rows == 1 ? PQgetvalue(r, 0, 0) : "");
        PQclear(r);
        if (rows == 0 || rows == 1) {
            if (rows == 0 || strcmp(v, sql)) {
                what = rows == 0 ? "gone" : "reset";
                break;
            }
        }
    }
    PQfinish(a);
    return what;
}

/* Each case runs its statement on one connect (a prepare for "prepare"),
 * then the next connect reads what a fresh session reads. */
static int cmd_clean(const char *ci, const char *adm) {
    static const struct {
        const char *label, *sql, *check;
    } k[] = {
        {"select", "SELECT 41 + 1 AS answer", "SHOW work_mem"},
        {"lock", "SELECT pg_advisory_lock(4242)",
         "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
         "objid = 4242"},
        {"into", "SELECT 1 AS x INTO TEMP clean_t",
         "SELECT to_regclass('pg_temp.clean_t') IS NULL"},
        {"two", "SELECT 1; SET work_mem = '2345kB'", "SHOW work_mem"},
        {"txn", "BEGIN ISOLATION LEVEL SERIALIZABLE",
         "SHOW transaction_isolation"},
        {"prepare", "SELECT length($1::text) AS clean_p",
         "SELECT count(*) FROM pg_prepared_statements"},
    };
    char v[64], resets[256] = "";
    /* Held throughout: a pool the program holds nothing of closes its idle
     * connections after 250 ms (docs/preload.md). */
    PGconn *hold = must_connect(ci, NULL);
    printf("result: clean");
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        PGconn *pg = must_connect(ci, NULL);
        int pid = PQbackendPID(pg);
        if (!strcmp(k[i].label, "prepare"))
            PQclear(PQprepare(pg, "clean_p", k[i].sql, 1, NULL));
        else
            value(pg, k[i].sql, v, sizeof(v));
        PQfinish(pg);
        size_t n = strlen(resets);
        snprintf(resets + n, sizeof(resets) - n, " %s=%s", k[i].label,
                 after(adm, pid, k[i].sql));
        pg = must_connect(ci, NULL);
        printf(" %s=%s", k[i].label, value(pg, k[i].check, v, sizeof(v)));
        PQfinish(pg);
    }
    printf("\nmeasure: reset%s\n", resets);
    PQfinish(hold);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: pq_cases MODE CONNINFO [ARGS] (see the "
                        "source)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *m = argv[1], *ci = argv[2];
    const char *a = argc > 3 ? argv[3] : "", *b = argc > 4 ? argv[4] : "";
    const char *c = argc > 5 ? argv[5] : "", *d = argc > 6 ? argv[6] : "1";
    if (!strcmp(m, "envcred"))
        return cmd_envcred(ci, a, b);
    if (!strcmp(m, "revoke"))
        return cmd_revoke(ci, a, b, c, atof(d));
    if (!strcmp(m, "settings"))
        return cmd_settings(ci, a, b, atof(argc > 5 ? c : "1"));
    if (!strcmp(m, "dropdb"))
        return cmd_dropdb(ci, a);
    if (!strcmp(m, "hold"))
        return cmd_hold(ci, atoi(a));
    if (!strcmp(m, "apps"))
        return cmd_apps(ci, atoi(a));
    if (!strcmp(m, "events"))
        return cmd_events(ci);
    if (!strcmp(m, "placeholder"))
        return cmd_placeholder(ci);
    if (!strcmp(m, "conninfo"))
        return cmd_conninfo(ci);
    if (!strcmp(m, "prepared"))
        return cmd_prepared(ci);
    if (!strcmp(m, "clean"))
        return cmd_clean(ci, a);
    fprintf(stderr, "pq_cases: unknown mode '%s'\n", m);
    return 2;
}
