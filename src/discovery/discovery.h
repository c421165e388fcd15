/* discovery.h - the cluster's own view of itself (docs/patroni.md,
 * "Discovery"): a Patroni cluster's member list, read from its REST API
 * (GET /cluster) by a background thread, shared by every connector of a
 * process that names the same endpoints. Below the connector, which turns
 * the members into its host list; above core and conninfo only. The REST
 * client (patroni_fetch.c, libcurl) and the member-list parser
 * (patroni_members.c, json-c) are built only with TETHER_PATRONI; without
 * them the keywords are known and refused. Internal. */
#ifndef TETHER_DISCOVERY_H
#define TETHER_DISCOVERY_H

#include "conninfo.h"
#include "internal.h"

#include <stddef.h>
#include <stdint.h>

/* The most members one answer may list (the connector's host-list limit):
 * a longer list is refused, never cut short in silence. */
#define TETHER__PATRONI_MAX_MEMBERS 64
/* The largest answer read, in bytes: a longer body is refused. */
#define TETHER__PATRONI_MAX_BODY (1024 * 1024)
/* The most REST endpoints tether_patroni may name, and their longest URL. */
#define TETHER__PATRONI_MAX_URLS 8
#define TETHER__PATRONI_URL_MAX 256
/* The least time between two refreshes that a trigger (a failed connect, a
 * role change, a 25006) may cause: at most 1000 / this refreshes a second
 * per discovery (docs/patroni.md, "Rate limit"). */
#define TETHER__PATRONI_MIN_GAP_MS 500

/* A member's role, from its "role" field. */
enum {
    TETHER__PM_OTHER = 0,     /* any other value */
    TETHER__PM_LEADER,        /* "leader", "master", "primary" */
    TETHER__PM_REPLICA,       /* "replica" */
    TETHER__PM_SYNC,          /* "sync_standby" */
    TETHER__PM_STANDBY_LEADER /* "standby_leader": a standby cluster's
                                 leader, read-only */
};

/* One member of the cluster, as /cluster lists it. */
typedef struct tether__member {
    char name[129];
    char host[256];   /* no comma, bracket, space or control character */
    int port;         /* [1, 65535] */
    int role;         /* TETHER__PM_* */
    int running;      /* state "running" or "streaming" */
    int64_t lag;      /* bytes behind the leader; -1 unknown or not given */
    int64_t timeline; /* 0 when not given */
    int nofailover, noloadbalance; /* its tags */
} tether__member;

/* tether__patroni_parse reads a /cluster answer (text, len bytes, not
 * necessarily NUL-terminated) into out (room for cap members) and *n.
 * Pure: no I/O, no globals. Returns 0, or TETHER_ESPEC (class transient)
 * with a message naming what is wrong (truncated or not JSON, a field of
 * the wrong type, too many members, a bad host or port); out is then
 * unspecified. Only with TETHER_PATRONI. */
int tether__patroni_parse(const char *text, size_t len, tether__member *out,
                          int cap, int *n, tether_error *err);

/* tether__patroni_get sends GET base_url/cluster within timeout_ms (the
 * whole call: connect, answer, body) and stores the body in *body
 * (malloc'd, NUL-terminated, *len bytes). No redirect is followed; a body
 * over TETHER__PATRONI_MAX_BODY, a status other than 200 or a body slower
 * than the deadline is an error. *stop set makes it give up at once.
 * Returns 0 or a negative error (TETHER_ECONNECT, TETHER_ETIMEDOUT,
 * TETHER_ESPEC) whose message names the URL (never credentials: URLs with
 * them are refused by the keyword). Only with TETHER_PATRONI. */
int tether__patroni_get(const char *base_url, int64_t timeout_ms,
                        const _Atomic int *stop, char **body, size_t *len,
                        tether_error *err);

/* What the keywords say (docs/patroni.md, "Keywords"). */
typedef struct tether__disc_cfg {
    char *urls;         /* tether_patroni, checked; NULL: no discovery */
    int64_t refresh_ms; /* tether_patroni_refresh (5 s) */
    int64_t timeout_ms; /* tether_patroni_timeout (1 s) */
} tether__disc_cfg;

/* tether__disc_cfg_init fills cfg with the defaults (no discovery). */
void tether__disc_cfg_init(tether__disc_cfg *cfg);

/* tether__disc_cfg_apply applies keyword key=val to cfg: 0, 1 when key is
 * not discovery's, or TETHER_ESPEC naming the keyword (a bad URL, a build
 * without Patroni support). */
int tether__disc_cfg_apply(tether__disc_cfg *cfg, const char *key,
                           const char *val, tether_error *err);

/* tether__disc_cfg_free releases what cfg holds. */
void tether__disc_cfg_free(tether__disc_cfg *cfg);

/* A discovery: the refresher thread of one endpoint list and its view. */
typedef struct tether__disc tether__disc;

/* tether__disc_acquire returns in *out the process's discovery for cfg
 * (and the log function), starting it when none runs yet: its thread then
 * asks the endpoints at once, and the caller waits for that first answer
 * at most the endpoints' deadlines (never longer than 2 s). Release it
 * with tether__disc_release. Returns 0, TETHER_ESPEC (no Patroni support)
 * or TETHER_ENOMEM. */
int tether__disc_acquire(const tether__disc_cfg *cfg, tether_log_fn log,
                         void *log_ctx, tether__disc **out, tether_error *err);

/* tether__disc_release drops a reference; the last one stops the thread
 * (within a REST call's deadline) and frees d. NULL is accepted. */
void tether__disc_release(tether__disc *d);

/* tether__disc_view copies the members last known into out (room for
 * TETHER__PATRONI_MAX_MEMBERS) when their generation differs from have,
 * and returns the current generation: 0 while none was ever known (*n is
 * then 0), else >= 1. When the generation equals have or out is NULL, out
 * and *n are not written. */
uint64_t tether__disc_view(tether__disc *d, uint64_t have, tether__member *out,
                           int *n);

/* tether__disc_wait waits up to ms for a list newer than the generation
 * have (a connect's pause between passes: a new leader named by Patroni
 * ends it at once) and returns the generation then. */
uint64_t tether__disc_wait(tether__disc *d, uint64_t have, int64_t ms);

/* tether__disc_kick asks for a refresh now: coalesced with any pending one
 * and held back until TETHER__PATRONI_MIN_GAP_MS after the last. Never
 * blocks on the REST API (a lock held for a few instructions). */
void tether__disc_kick(tether__disc *d);

/* Counters for metrics (docs/metrics.md). */
typedef struct tether__disc_stats {
    uint64_t requests;  /* REST calls made */
    uint64_t failures;  /* REST calls that failed or gave a bad answer */
    uint64_t refreshes; /* refreshes that gave a member list */
    uint64_t kicks;     /* refreshes asked for by a trigger */
    int members;        /* members last known */
    int64_t age_ms;     /* since the last good list; -1 none ever */
} tether__disc_stats;

/* tether__disc_stats_get fills s. */
void tether__disc_stats_get(tether__disc *d, tether__disc_stats *s);

#endif
