/*
 * query_sql.h - a statement of the caller's for the query benchmarks
 * (bench_interleave --sql), instead of SELECT 1: its parameters $1..$n
 * each get an integer drawn per call, uniformly in [1, max] (for example
 * an aid of pgbench_accounts), and it runs through libpq, either with
 * PQexecParams (parsed and planned by the server at every call) or
 * prepared once per connection (PQprepare) and then run with
 * PQexecPrepared: what a program that keeps its connections does.
 * Compiled into tether_benchsupport (query_sql.c); what runs once per
 * statement is static inline here.
 */
#ifndef TETHER_BENCH_QUERY_SQL_H
#define TETHER_BENCH_QUERY_SQL_H

#include "query_common.h"

#define Q_SQL_MAX_PARAMS 8
/* The name the libpq loops prepare the statement under. */
#define Q_SQL_NAME "bench_stmt"

struct q_sql {
    const char *text;
    int nparams;    /* the highest $k in text, 0..Q_SQL_MAX_PARAMS */
    long param_max; /* each parameter is drawn in [1, param_max] */
};

/* One call's parameter values, as libpq takes them. */
struct q_sql_args {
    char buf[Q_SQL_MAX_PARAMS][24];
    const char *values[Q_SQL_MAX_PARAMS];
};

/* q_sql_init takes text and its parameters' range; it counts the
 * parameters as the highest $k in text (string literals are not told
 * apart). Returns 0, or -1 with the reason in why. */
int q_sql_init(struct q_sql *s, const char *text, long param_max, char *why,
               size_t cap);

/* q_sql_seed is a thread's generator state, from its index. */
static inline uint64_t q_sql_seed(unsigned index) {
    return 0x9e3779b97f4a7c15ull * (index + 1u) | 1u;
}

/* q_sql_draw fills a with one call's values (xorshift64*: a few ns). */
static inline void q_sql_draw(const struct q_sql *s, uint64_t *rng,
                              struct q_sql_args *a) {
    for (int i = 0; i < s->nparams; i++) {
        uint64_t x = *rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *rng = x;
        uint64_t v = (x * 0x2545f4914f6cdd1dull) >> 11;
        snprintf(a->buf[i], sizeof a->buf[i], "%lu",
                 (unsigned long)(v % (uint64_t)s->param_max) + 1);
        a->values[i] = a->buf[i];
    }
}

/* q_sql_prepare prepares s as Q_SQL_NAME on c (the server infers the
 * parameters' types); false with the thread's first error recorded. */
bool q_sql_prepare(struct q_thread *t, PGconn *c, const struct q_sql *s);

/* q_sql_exec runs s once on c with the values a: PQexecPrepared of
 * Q_SQL_NAME (prepared on c before), or PQexecParams. A result with rows or
 * a command's completion is success; when the server no longer knows the
 * prepared statement (26000: a DEALLOCATE, or a new connection at an old
 * one's address), it is prepared again and run once more. */
bool q_sql_exec(struct q_thread *t, PGconn *c, const struct q_sql *s,
                int prepared, const struct q_sql_args *a);

#endif /* TETHER_BENCH_QUERY_SQL_H */
