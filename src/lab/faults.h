/* faults.h - a scratch PostgreSQL primary and streaming standby, and the
 * faults done to them on a schedule: what `tether demo` runs, and the one
 * place any other driver of real faults (the chaos soak) takes them from.
 *
 * The cluster itself is scripts/pg-cluster's (start, stop, node control);
 * this module finds that script, reads the cluster's env file, and does
 * the faults: backend terminations over a superuser connection, a fast
 * restart, a hang (SIGSTOP of the server's processes, then SIGCONT), too
 * many connections (idle connections holding every slot), a failover
 * (the primary stopped, the standby promoted) and a blackhole (the test
 * tree's faultproxy, one in front of each node, drops every byte and
 * accepts nothing: docs/testing.md). */
#ifndef TETHER_LAB_FAULTS_H
#define TETHER_LAB_FAULTS_H

#include <stddef.h>
#include <stdint.h>

typedef enum fault_kind {
    FAULT_TERMINATE, /* every backend of the workload terminated */
    FAULT_RESTART,   /* fast stop of the primary, then start */
    FAULT_HANG,      /* the primary's processes stopped, then continued */
    FAULT_TOO_MANY,  /* all connection slots taken, the pool's backends
                        terminated: reconnects meet 53300 */
    FAULT_BLACKHOLE, /* the primary's proxy moves no byte, accepts nothing */
    FAULT_FAILOVER,  /* primary stopped, the standby promoted after the
                        hold; with rebuild set, the old primary rebuilt as
                        the new standby */
    FAULT_TERMINATE_SOME, /* about half the workload's backends */
    FAULT_STOP, /* the primary stopped (fast) for the hold, then started:
                   no failover (docs/failures.md) */
    FAULT_NKINDS
} fault_kind;

/* fault_kind_name returns the kind's short name ("terminate", ...). */
const char *fault_kind_name(fault_kind k);

/* fault_find_tool finds one of tether's helper programs (pg-cluster,
 * faultproxy, patroni-cluster): $env when set, else the first of
 * ../libexec/tether and libexec/tether beside the running tether that
 * holds an executable name; its path in out. 0, or -1. */
int fault_find_tool(const char *env, const char *name, char *out, size_t n);

/* One fault of a schedule: when it starts (ms from the workload's start)
 * and how long it is held (hang, too many, blackhole; 0 for the others). */
typedef struct fault_event {
    int64_t at_ms;
    fault_kind kind;
    int64_t hold_ms;
} fault_event;

#define FAULT_MAX_EVENTS 1024

/* fault_schedule_demo fills ev with the demo's schedule for a run of
 * total_ms: one fault of each kind, spread over the run, the failover
 * last (after it there is no standby). Returns the number of events. */
int fault_schedule_demo(fault_event *ev, int64_t total_ms, int blackhole);

/* fault_schedule_random fills ev (room for max) with faults of every
 * kind in a random order from seed (each kind once in every round of
 * FAULT_NKINDS, so that a short run sees them all), 1-3 s apart after each
 * one's hold (hang 1-5 s; stop 2-6 s; too many and blackhole 1-3 s; the
 * promotion 0.5-1.5 s after the stop), from 2 s into a run of total_ms to
 * 3 s before its end.
 * Returns the number of events. */
int fault_schedule_random(fault_event *ev, int max, int64_t total_ms,
                          uint64_t seed);

/* The cluster and its proxies. Filled by fault_cluster_start. */
typedef struct fault_cluster {
    char dir[256];  /* pg-cluster's directory */
    char ctl[4096]; /* the pg-cluster script */
    char host[64];  /* loopback address the servers listen on */
    char user[64], password[64], db[64], sock[300], super[64];
    int port[2];       /* server ports: [0] node "primary", [1] "standby" */
    int proxy_port[2]; /* the fault proxy's port in front of each; 0: none */
    int proxy_pid[2];  /* its process */
    char proxy_ctl[2][300]; /* its control socket */
    char proxy_bin[4096];   /* faultproxy (tests/tools/faultproxy.c) */
    _Atomic int writable;   /* which node takes writes now (0 or 1) */
    int standby_up;         /* the other node still runs as a standby */
    int rebuild; /* a failover rebuilds the old primary as the standby */
    /* Called by fault_end on its thread the moment the server is back
     * (continued, slots freed, started, proxy open, standby promoted;
     * before a failover's rebuild), or at once for a fault with no end.
     * NULL: not called. */
    void (*on_back)(void *ctx);
    void *on_back_ctx;
} fault_cluster;

/* fault_cluster_start starts a scratch primary and standby through
 * pg-cluster (its progress lines go to stderr) and, with proxies set,
 * a faultproxy process in front of each node. Both helpers are found
 * through $TETHER_PG_CLUSTER / $TETHER_FAULTPROXY, else relative to the
 * running tether: ../libexec/tether beside it (installed), else
 * libexec/tether beside it (a build tree). Returns 0, or -1 with why
 * filled. */
int fault_cluster_start(fault_cluster *c, int proxies, char *why, size_t n);

/* fault_cluster_stop stops the proxies and both servers and removes the
 * cluster's directory (safe to call twice, and on a half-started one). */
void fault_cluster_stop(fault_cluster *c);

/* fault_cluster_conninfo writes the connection string of both nodes
 * (through the proxies when via_proxy is set and there are some) for
 * application_name app, with
 * extra appended. Holds the password: never print it. */
void fault_cluster_conninfo(const fault_cluster *c, int via_proxy,
                            const char *app, const char *extra, char *out,
                            size_t n);

/* fault_admin_exec runs sql as the superuser on node (over the unix
 * socket). Returns 0, or -1 with why filled. */
int fault_admin_exec(const fault_cluster *c, int node, const char *sql,
                     char *why, size_t n);

/* fault_count_app returns how many client backends named app the
 * writable node has now (superuser, 1 s connect timeout), or -1. */
int fault_count_app(const fault_cluster *c, const char *app);

/* fault_sessions_app writes into buf (n bytes) one line per session of
 * app on the writable node: pid, state, how long in it, what it waits
 * for, the start of its query (for a report). */
void fault_sessions_app(const fault_cluster *c, const char *app, char *buf,
                        size_t n);

/* fault_node_role tells what node answers now: 1 primary, 0 standby,
 * -1 not answering (a short connect timeout). */
int fault_node_role(const fault_cluster *c, int node);

/* fault_begin puts e in force (it returns once it is: the backends are
 * gone, the server is down or stopped, the slots are full). detail gets a
 * line for the screen. Returns 0, or -1 with detail saying why not. A
 * restart and a failover begin with the primary's fast stop; fault_end
 * starts it again, or promotes the standby, after the hold. */
int fault_begin(fault_cluster *c, const fault_event *e, char *detail, size_t n);

/* fault_end lifts e (continues the server, frees the slots, starts a
 * restarted server, opens the proxy, promotes the standby); a no-op for
 * faults that have none. Calls c->on_back once the server is back (after
 * the promotion, before the rebuild of a new standby). Returns 0, or -1
 * with detail saying why (on_back is then not called). */
int fault_end(fault_cluster *c, const fault_event *e, char *detail, size_t n);

#endif
