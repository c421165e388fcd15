/*
 * query_sql.c - a statement of the caller's for the query benchmarks
 * (query_sql.h): compiled once into the tether_benchsupport library.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "query_sql.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int q_sql_init(struct q_sql *s, const char *text, long param_max, char *why,
               size_t cap) {
    int n = 0;
    for (const char *p = text; (p = strchr(p, '$')) != NULL;) {
        char *end = NULL;
        long k = isdigit((unsigned char)p[1]) ? strtol(p + 1, &end, 10) : 0;
        if (k > Q_SQL_MAX_PARAMS) {
            snprintf(why, cap, "at most $%d", Q_SQL_MAX_PARAMS);
            return -1;
        }
        if (k > n)
            n = (int)k;
        p = end ? end : p + 1;
    }
    if (!*text || param_max < 1) {
        snprintf(why, cap, "%s",
                 *text ? "parameters' range below 1" : "an empty statement");
        return -1;
    }
    s->text = text;
    s->nparams = n;
    s->param_max = param_max;
    return 0;
}

/* A result's outcome: rows or a command's completion is success. */
static bool q_sql_ok(const PGresult *r) {
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    return st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK;
}

static void q_sql_fail(struct q_thread *t, PGconn *c, const PGresult *r,
                       const char *what) {
    q_error(t, what,
            r && *PQresultErrorMessage(r) ? PQresultErrorMessage(r)
                                          : PQerrorMessage(c));
}

bool q_sql_prepare(struct q_thread *t, PGconn *c, const struct q_sql *s) {
    PGresult *r = PQprepare(c, Q_SQL_NAME, s->text, s->nparams, NULL);
    bool ok = q_sql_ok(r);
    if (!ok)
        q_sql_fail(t, c, r, "PQprepare");
    PQclear(r);
    return ok;
}

/* Whether r failed because the prepared statement does not exist. */
static bool q_sql_lost(const PGresult *r) {
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return state && strcmp(state, "26000") == 0;
}

bool q_sql_exec(struct q_thread *t, PGconn *c, const struct q_sql *s,
                int prepared, const struct q_sql_args *a) {
    const char *const *v = s->nparams ? a->values : NULL;
    PGresult *r =
        prepared ? PQexecPrepared(c, Q_SQL_NAME, s->nparams, v, NULL, NULL, 0)
                 : PQexecParams(c, s->text, s->nparams, NULL, v, NULL, NULL, 0);
    if (prepared && q_sql_lost(r)) {
        PQclear(r);
        r = q_sql_prepare(t, c, s)
                ? PQexecPrepared(c, Q_SQL_NAME, s->nparams, v, NULL, NULL, 0)
                : NULL;
    }
    bool ok = q_sql_ok(r);
    if (!ok)
        q_sql_fail(t, c, r, prepared ? "PQexecPrepared" : "PQexecParams");
    PQclear(r);
    return ok;
}
