/* bench_nodes.h - per-node server-side figures for `tether bench query
 * --read-only` (bench_nodes.c). */
#ifndef TETHER_LAB_BENCH_NODES_H
#define TETHER_LAB_BENCH_NODES_H

#include <libpq-fe.h>

#define BENCH_MAX_NODES 16

/* One node of the connection string and what it reported. */
typedef struct bench_node {
    char host[256], addr[64], port[16];
    int up;             /* the last snapshot reached it */
    int standby;        /* pg_is_in_recovery() */
    long long xact0;    /* xact_commit before the window */
    long long xacts;    /* committed transactions in the window */
    long long backends; /* the bench's backends during the window */
} bench_node;

typedef struct bench_nodes {
    int n;
    bench_node node[BENCH_MAX_NODES];
    PQconninfoOption *opts; /* the string's libpq settings */
} bench_nodes;

/* bench_nodes_find lists the nodes conninfo names (its tether keywords
 * left out). Returns 0, or -1 when libpq cannot parse the rest. */
int bench_nodes_find(const char *conninfo, bench_nodes *ns);

/* bench_nodes_snapshot asks every node, on a connection of its own: phase
 * 0 notes xact_commit, 1 counts the backends of application app, 2 sets
 * xacts to the commits since phase 0. */
void bench_nodes_snapshot(bench_nodes *ns, const char *app, int phase);

/* bench_nodes_free frees what bench_nodes_find kept. */
void bench_nodes_free(bench_nodes *ns);

#endif
