/* discovery.c - discovery from Patroni (docs/patroni.md, "Discovery"): the
 * keywords (tether_patroni, tether_patroni_refresh, tether_patroni_timeout),
 * one refresher thread per endpoint list in a process, shared by every
 * connector that names it, and the member list it keeps. The thread asks
 * GET /cluster on the interval and when a trigger kicks it (a failed
 * connect, a role that differs from the list, a 25006), never sooner than
 * TETHER__PATRONI_MIN_GAP_MS after its last refresh; it tries the
 * endpoints in rotation from the one that answered last (at first, from
 * a random one), each call with
 * its own deadline. A failed refresh keeps the last good list. REST calls
 * never run under a lock that a connect or an acquire takes. */
#include "discovery.h"

/* The REST client and the parser are here (TETHER_PATRONI), except in the
 * preload library's copy (CMakeLists.txt: no libcurl in every process the
 * preload is put into). */
#if defined(TETHER_HAVE_PATRONI) && !defined(TETHER_PRELOAD_NO_PATRONI)
#define DISC_PATRONI 1
#elif defined(TETHER_PRELOAD_NO_PATRONI)
#define NO_PATRONI                                                             \
    "the preload library has no Patroni support (a program linked with "       \
    "libtether has)"
#else
#define NO_PATRONI                                                             \
    "this tether was built without Patroni support (cmake "                    \
    "-DTETHER_PATRONI=ON needs libcurl and json-c)"
#endif

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- keywords ------------------------------------------------------------ */

void tether__disc_cfg_init(tether__disc_cfg *cfg) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->refresh_ms = 5000;
    cfg->timeout_ms = 1000;
}

void tether__disc_cfg_free(tether__disc_cfg *cfg) {
    tether__free(cfg->urls);
    cfg->urls = NULL;
}

static int set_urls(void *base, const char *key, const char *v,
                    tether_error *err);

/* A duration in [lo, hi] ms into *out, else TETHER_ESPEC naming key. */
static int set_bounded(const char *key, const char *v, int64_t lo, int64_t hi,
                       const char *want, int64_t *out, tether_error *err) {
    static const tether__keydef defs[] = {
        TETHER__KD("d", TETHER__KD_MS, 0, NULL), TETHER__KD_END};
    int64_t ms = 0;
    tether_error e = {0};
    if (tether__keydefs_apply(defs, &ms, "d", v, &e) || ms < lo || ms > hi)
        return tether__conninfo_bad_value(key, v, want, err);
    *out = ms;
    return 0;
}

static int set_refresh(void *base, const char *key, const char *v,
                       tether_error *err) {
    return set_bounded(key, v, 100, 86400000,
                       "want a duration from 100ms to 24h",
                       &((tether__disc_cfg *)base)->refresh_ms, err);
}

static int set_timeout(void *base, const char *key, const char *v,
                       tether_error *err) {
    return set_bounded(key, v, 10, 60000, "want a duration from 10ms to 60s",
                       &((tether__disc_cfg *)base)->timeout_ms, err);
}

static const tether__keydef disc_keys[] = {
    TETHER__KD_CALL("tether_patroni", set_urls,
                    "Patroni REST URLs: hosts and roles from GET /cluster"),
    TETHER__KD_CALL("tether_patroni_refresh", set_refresh,
                    "Patroni: how often the member list is read"),
    TETHER__KD_CALL("tether_patroni_timeout", set_timeout,
                    "Patroni: the deadline of one REST call"),
    TETHER__KD_END};

static const tether__kwtable disc_table = {
    .layer = "discovery", .kind = TETHER__KW_CONNECTOR, .defs = disc_keys};

__attribute__((constructor)) static void register_keywords(void) {
    tether__keywords_register(&disc_table);
}

#ifdef DISC_PATRONI
/* One URL of the list (s, n bytes, trimmed): http:// or https://, a host,
 * no credentials, no space or control character, no query. */
static int url_ok(const char *s, size_t n, const char **why) {
    size_t scheme = !strncmp(s, "http://", 7)    ? 7
                    : !strncmp(s, "https://", 8) ? 8
                                                 : 0;
    *why = "want http://host:port or https://host:port";
    if (!scheme || n <= scheme || n >= TETHER__PATRONI_URL_MAX)
        return 0;
    size_t auth = scheme + strcspn(s + scheme, "/");
    if (auth > n)
        auth = n;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f || s[i] == '?' ||
            s[i] == '#')
            return 0;
    if (auth == scheme || s[scheme] == ':')
        return 0;
    if (memchr(s + scheme, '@', auth - scheme)) {
        *why = "credentials in the URL are not accepted (GET /cluster "
               "needs none)";
        return 0;
    }
    return 1;
}

#endif

static int set_urls(void *base, const char *key, const char *v,
                    tether_error *err) {
    tether__disc_cfg *cfg = base;
#ifndef DISC_PATRONI
    (void)cfg, (void)v;
    return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                            "connection string: %s: " NO_PATRONI, key);
#else
    size_t len = strlen(v);
    char *out = tether__malloc(len + 1);
    if (!out)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    size_t used = 0;
    int count = 0;
    for (const char *p = v;; p++) {
        size_t n = strcspn(p, ",");
        const char *a = p, *b = p + n;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        while (b > a && b[-1] == '/')
            b--;
        const char *why = "want http://host:port or https://host:port";
        if (++count > TETHER__PATRONI_MAX_URLS ||
            !url_ok(a, (size_t)(b - a), &why)) {
            tether__free(out);
            if (count > TETHER__PATRONI_MAX_URLS)
                return tether_error_set(err, TETHER_ESPEC,
                                        TETHER_CLASS_PERMANENT,
                                        "connection string: %s: more than %d "
                                        "endpoints",
                                        key, TETHER__PATRONI_MAX_URLS);
            return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                                    "connection string: bad value for %s: "
                                    "endpoint %d: %s (comma-separated, at "
                                    "most %d bytes each)",
                                    key, count, why,
                                    TETHER__PATRONI_URL_MAX - 1);
        }
        if (used)
            out[used++] = ',';
        memcpy(out + used, a, (size_t)(b - a));
        used += (size_t)(b - a);
        p += n;
        if (!*p)
            break;
    }
    out[used] = '\0';
    tether__free(cfg->urls);
    cfg->urls = out;
    return 0;
#endif
}

int tether__disc_cfg_apply(tether__disc_cfg *cfg, const char *key,
                           const char *val, tether_error *err) {
    return tether__keydefs_apply(disc_keys, cfg, key, val, err);
}

/* ---- the shared discoveries ---------------------------------------------- */

enum { ST_NONE = 0, ST_OK, ST_DOWN };

struct tether__disc {
    struct tether__disc *next; /* in the process's list (list_lock) */
    int refs;                  /* list_lock */
    char *urls;                /* the keyword's value: the key */
    char *split;               /* a copy cut into url[] */
    char *url[TETHER__PATRONI_MAX_URLS];
    int nurls;
    int64_t refresh_ms, timeout_ms;
    tether_log_fn log;
    void *log_ctx;
    pthread_t thread;
    int started;
    pthread_mutex_t lock; /* all below; never held over a REST call */
    pthread_cond_t cond;  /* CLOCK_MONOTONIC: the refresher's wake */
    pthread_cond_t news;  /* CLOCK_MONOTONIC: a new list (gen moved) */
    _Atomic int stop;
    int kicked, first_done, state;
    int64_t last_ms; /* when the last refresh began; -1 never */
    int64_t ok_ms;   /* when the last good list came; -1 never */
    int next_url;    /* the endpoint to ask first */
    tether__member members[TETHER__PATRONI_MAX_MEMBERS];
    int n;
    uint64_t gen;
    char leader[129];
    tether__rng rng;
    _Atomic uint64_t requests, failures, refreshes, kicks;
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static tether__disc *list;

static int64_t mono_ms(void) {
    return tether__mono_ns() / TETHER__NS_PER_MS;
}

#ifdef DISC_PATRONI
static void abs_time(int64_t ms, struct timespec *ts) {
    ts->tv_sec = (time_t)(ms / 1000);
    ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}
#endif

#ifdef DISC_PATRONI

/* The leader's name, or "" when the list has none. */
static const char *leader_of(const tether__member *m, int n) {
    for (int i = 0; i < n; i++)
        if (m[i].role == TETHER__PM_LEADER)
            return m[i].name;
    return "";
}

/* A good answer: the new list, logged when its leader changes or the first
 * time, and after a state of failure. */
static void took(tether__disc *d, const tether__member *m, int n, int url) {
    pthread_mutex_lock(&d->lock);
    int changed = n != d->n || memcmp(m, d->members, sizeof(*m) * (size_t)n);
    if (changed) {
        memcpy(d->members, m, sizeof(*m) * (size_t)n);
        d->n = n;
        d->gen++;
        pthread_cond_broadcast(&d->news); /* connects in a pause */
    }
    int was = d->state;
    d->state = ST_OK;
    d->ok_ms = mono_ms();
    d->next_url = url;
    const char *leader = leader_of(m, n);
    int new_leader = strcmp(leader, d->leader) != 0 || was != ST_OK;
    snprintf(d->leader, sizeof(d->leader), "%s", leader);
    pthread_mutex_unlock(&d->lock);
    atomic_fetch_add(&d->refreshes, 1);
    if (new_leader)
        tether__log(d->log, d->log_ctx, TETHER_LOG_INFO,
                    "patroni: %s: %d members, leader %s%s", d->url[url], n,
                    leader[0] ? leader : "(none)",
                    was == ST_DOWN ? " (the REST API answers again)" : "");
}

/* Every endpoint failed: the last list stays (or the connection string's
 * hosts, when none was ever known). Logged once per change of state. */
static void failed(tether__disc *d, const tether_error *e) {
    pthread_mutex_lock(&d->lock);
    int was = d->state, have = d->n > 0;
    d->state = ST_DOWN;
    pthread_mutex_unlock(&d->lock);
    if (was != ST_DOWN)
        tether__log(d->log, d->log_ctx, TETHER_LOG_WARN,
                    "patroni: no endpoint gave a member list (last: %s); %s",
                    e->message,
                    have ? "keeping the last known list"
                         : "using the connection string's hosts");
}

/* One refresh: the endpoints in rotation until one gives a list. */
static void refresh(tether__disc *d) {
    pthread_mutex_lock(&d->lock);
    int first = d->next_url;
    pthread_mutex_unlock(&d->lock);
    tether_error e = {0};
    tether__member *m = tether__calloc(TETHER__PATRONI_MAX_MEMBERS, sizeof(*m));
    if (!m) {
        tether_error_set(&e, TETHER_ENOMEM, TETHER_CLASS_TRANSIENT,
                         "patroni: out of memory");
        failed(d, &e);
        return;
    }
    for (int k = 0; k < d->nurls && !d->stop; k++) {
        int u = (first + k) % d->nurls;
        char *body = NULL;
        size_t len = 0;
        int n = 0;
        atomic_fetch_add(&d->requests, 1);
        int rc = tether__patroni_get(d->url[u], d->timeout_ms, &d->stop, &body,
                                     &len, &e);
        if (rc == 0) {
            rc = tether__patroni_parse(body, len, m,
                                       TETHER__PATRONI_MAX_MEMBERS, &n, &e);
            if (rc) { /* name the endpoint that gave the bad answer */
                char why[sizeof(e.message)];
                snprintf(why, sizeof(why), "%s", e.message);
                tether_error_set(&e, rc, TETHER_CLASS_TRANSIENT, "%s: %s",
                                 d->url[u], why);
            }
        }
        tether__free(body);
        if (rc == 0) {
            took(d, m, n, u);
            tether__free(m);
            return;
        }
        atomic_fetch_add(&d->failures, 1);
    }
    tether__free(m);
    if (!d->stop)
        failed(d, &e);
}

#endif

#ifdef DISC_PATRONI
/* The interval, drawn from [0.9, 1.1] x refresh_ms each time: a fleet
 * started together does not ask together. */
static int64_t next_interval(tether__disc *d) {
    return tether__rng_range(&d->rng, d->refresh_ms * 9 / 10,
                             d->refresh_ms * 11 / 10);
}

static void *run(void *arg) {
    tether__disc *d = arg;
    pthread_mutex_lock(&d->lock);
    int64_t interval = 0;
    while (!d->stop) {
        int64_t now = mono_ms();
        int64_t due = d->last_ms < 0 ? now : d->last_ms + interval;
        if (d->kicked && d->last_ms >= 0)
            due = TETHER__MIN(due, d->last_ms + TETHER__PATRONI_MIN_GAP_MS);
        if (now < due) {
            struct timespec ts;
            abs_time(due, &ts);
            pthread_cond_timedwait(&d->cond, &d->lock, &ts);
            continue;
        }
        d->kicked = 0;
        d->last_ms = now;
        interval = next_interval(d);
        pthread_mutex_unlock(&d->lock);
#ifdef DISC_PATRONI
        refresh(d);
#endif
        pthread_mutex_lock(&d->lock);
        d->first_done = 1;
        pthread_cond_broadcast(&d->cond);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

#endif

static void destroy(tether__disc *d) {
    if (d->started) {
        pthread_mutex_lock(&d->lock);
        d->stop = 1;
        pthread_cond_broadcast(&d->cond);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->thread, NULL);
        pthread_cond_destroy(&d->cond);
        pthread_cond_destroy(&d->news);
        pthread_mutex_destroy(&d->lock);
    }
    tether__free(d->urls);
    tether__free(d->split);
    tether__free(d);
}

#ifdef DISC_PATRONI
/* make builds a discovery of cfg and starts its thread. */
static int make(const tether__disc_cfg *cfg, tether_log_fn log, void *log_ctx,
                tether__disc **out, tether_error *err) {
    tether__disc *d = tether__calloc(1, sizeof(*d));
    if (d) {
        d->urls = tether__strdup(cfg->urls);
        d->split = tether__strdup(cfg->urls);
    }
    if (!d || !d->urls || !d->split) {
        if (d) {
            tether__free(d->urls);
            tether__free(d->split);
        }
        tether__free(d);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                NULL);
    }
    for (char *p = d->split; p && d->nurls < TETHER__PATRONI_MAX_URLS;) {
        d->url[d->nurls++] = p;
        p = strchr(p, ',');
        if (p)
            *p++ = '\0';
    }
    d->refresh_ms = cfg->refresh_ms;
    d->timeout_ms = cfg->timeout_ms;
    d->log = log;
    d->log_ctx = log_ctx;
    d->last_ms = d->ok_ms = -1;
    d->refs = 1;
    tether__rng_seed(&d->rng, 0);
    /* The first refresh starts at a random endpoint: a fleet that shares
     * one list spreads its requests over the Patroni nodes. */
    d->next_url = (int)tether__rng_range(&d->rng, 0, d->nurls - 1);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cond, &ca);
    pthread_cond_init(&d->news, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&d->thread, NULL, run, d)) {
        pthread_cond_destroy(&d->cond);
        pthread_cond_destroy(&d->news);
        pthread_mutex_destroy(&d->lock);
        tether__free(d->urls);
        tether__free(d->split);
        tether__free(d);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_TRANSIENT,
                                "patroni: cannot start the refresher thread");
    }
    d->started = 1;
    *out = d;
    return 0;
}

/* wait_first waits for d's first refresh, at most the endpoints' deadlines
 * (and 2 s). */
static void wait_first(tether__disc *d) {
    int64_t wait = TETHER__MIN(d->timeout_ms * d->nurls + 100, (int64_t)2000);
    struct timespec ts;
    abs_time(mono_ms() + wait, &ts);
    pthread_mutex_lock(&d->lock);
    while (!d->first_done && !d->stop)
        if (pthread_cond_timedwait(&d->cond, &d->lock, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&d->lock);
}

#endif

int tether__disc_acquire(const tether__disc_cfg *cfg, tether_log_fn log,
                         void *log_ctx, tether__disc **out, tether_error *err) {
    *out = NULL;
#ifndef DISC_PATRONI
    (void)cfg, (void)log, (void)log_ctx;
    return tether_error_set(err, TETHER_ESPEC, TETHER_CLASS_PERMANENT,
                            "connection string: tether_patroni: " NO_PATRONI);
#else
    pthread_mutex_lock(&list_lock);
    tether__disc *d = list;
    while (d &&
           (strcmp(d->urls, cfg->urls) || d->refresh_ms != cfg->refresh_ms ||
            d->timeout_ms != cfg->timeout_ms || d->log != log ||
            d->log_ctx != log_ctx))
        d = d->next;
    int rc = 0;
    if (d)
        d->refs++;
    else if ((rc = make(cfg, log, log_ctx, &d, err)) == 0) {
        d->next = list;
        list = d;
    }
    pthread_mutex_unlock(&list_lock);
    if (rc)
        return rc;
    wait_first(d);
    *out = d;
    return 0;
#endif
}

void tether__disc_release(tether__disc *d) {
    if (!d)
        return;
    pthread_mutex_lock(&list_lock);
    int last = --d->refs == 0;
    if (last) {
        tether__disc **pp = &list;
        while (*pp != d)
            pp = &(*pp)->next;
        *pp = d->next;
    }
    pthread_mutex_unlock(&list_lock);
    if (last)
        destroy(d);
}

uint64_t tether__disc_view(tether__disc *d, uint64_t have, tether__member *out,
                           int *n) {
    pthread_mutex_lock(&d->lock);
    uint64_t gen = d->gen;
    if (gen != have && out) {
        memcpy(out, d->members, sizeof(*out) * (size_t)d->n);
        *n = d->n;
    }
    pthread_mutex_unlock(&d->lock);
    return gen;
}

uint64_t tether__disc_wait(tether__disc *d, uint64_t have, int64_t ms) {
    if (!d || !d->started) { /* no thread: no news can come */
        if (ms > 0)
            tether_clock_real()->sleep_ns(NULL, ms * TETHER__NS_PER_MS);
        return d ? tether__disc_view(d, have, NULL, NULL) : 0;
    }
    int64_t until = mono_ms() + (ms > 0 ? ms : 0);
    pthread_mutex_lock(&d->lock);
    while (d->gen == have && !atomic_load(&d->stop) && mono_ms() < until) {
#ifdef DISC_PATRONI
        struct timespec ts;
        abs_time(until, &ts);
        pthread_cond_timedwait(&d->news, &d->lock, &ts);
#else
        break;
#endif
    }
    uint64_t gen = d->gen;
    pthread_mutex_unlock(&d->lock);
    return gen;
}

void tether__disc_kick(tether__disc *d) {
    if (!d)
        return;
    pthread_mutex_lock(&d->lock);
    if (!d->kicked) {
        d->kicked = 1;
        atomic_fetch_add(&d->kicks, 1);
        pthread_cond_signal(&d->cond);
    }
    pthread_mutex_unlock(&d->lock);
}

void tether__disc_stats_get(tether__disc *d, tether__disc_stats *s) {
    memset(s, 0, sizeof(*s));
    s->requests = atomic_load(&d->requests);
    s->failures = atomic_load(&d->failures);
    s->refreshes = atomic_load(&d->refreshes);
    s->kicks = atomic_load(&d->kicks);
    pthread_mutex_lock(&d->lock);
    s->members = d->n;
    s->age_ms = d->ok_ms < 0 ? -1 : mono_ms() - d->ok_ms;
    pthread_mutex_unlock(&d->lock);
}
