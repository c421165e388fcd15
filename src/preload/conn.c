/* conn.c - connection strings for the preload: the arrays of
 * PQconnectdbParams and the arguments of PQsetdbLogin rendered as one
 * key=value string (libpq's rules: empty values ignored, later keywords
 * win, a dbname holding a connection string expanded in place); what
 * libpq would connect with (that string and what libpq takes from the
 * environment, creds.c); the form the pool opens (the preload's defaults
 * added as tether keywords the program did not set); the pool's key
 * (secrets hashed, docs/preload.md "Which pool"); the masked display form
 * and a libpq-only form for connects that pass through. */
#include "conninfo.h"
#include "internal.h"
#include "preload.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <unistd.h>

typedef tether__preload_sb sbuf;

void tether__preload_sb_put(sbuf *b, const char *s, size_t n) {
    if (!b->ok)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = TETHER__MAX((b->n + n + 1) * 2, (size_t)256);
        char *p = realloc(b->s, cap);
        if (!p) {
            b->ok = 0;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

void tether__preload_sb_str(sbuf *b, const char *s) {
    tether__preload_sb_put(b, s, strlen(s));
}

void tether__preload_sb_kv(sbuf *b, const char *key, const char *val) {
    tether__preload_sb_str(b, b->n ? " " : "");
    tether__preload_sb_str(b, key);
    tether__preload_sb_str(b, "='");
    for (const char *p = val; *p;) {
        size_t run = strcspn(p, "'\\"); /* up to a quote or a backslash */
        tether__preload_sb_put(b, p, run);
        p += run;
        if (*p) {
            char esc[2] = {'\\', *p++};
            tether__preload_sb_put(b, esc, 2);
        }
    }
    tether__preload_sb_str(b, "'");
}

char *tether__preload_sb_done(sbuf *b) {
    if (!b->ok || !b->s) {
        free(b->s);
        return b->ok ? strdup("") : NULL;
    }
    return b->s;
}

#define sb_put tether__preload_sb_put
#define sb_str tether__preload_sb_str
#define sb_kv tether__preload_sb_kv
#define sb_done tether__preload_sb_done

static int is_uri(const char *s) {
    return !strncmp(s, "postgresql://", 13) || !strncmp(s, "postgres://", 11);
}

/* add_dbname appends a dbname that libpq would expand (a key=value string,
 * inlined as it is; later keywords still win), else as a plain value.
 * Returns -1 for a URI, which cannot be inlined. */
static int add_dbname(sbuf *b, const char *val, int expand) {
    if (expand && is_uri(val))
        return -1;
    if (expand && strchr(val, '=')) {
        sb_str(b, b->n ? " " : "");
        sb_str(b, val);
        return 0;
    }
    sb_kv(b, "dbname", val);
    return 0;
}

static char *dup_or_null(const char *s, int *failed) {
    char *d = s ? strdup(s) : NULL;
    *failed |= s && !d;
    return d;
}

/* ---- what a thread keeps of its last connect ----------------------------
 * (below: the string of its last PQconnectdbParams arrays, and its last
 * pooled string's outcome), under one thread-specific key. */

typedef struct params_memo params_memo;
typedef struct memo memo;
static void params_free(void *v);
static void memo_free(void *v);

typedef struct kept {
    params_memo *params;
    memo *conn;
} kept;

static pthread_key_t kept_key;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;
static int kept_ok;

static void kept_free(void *v) {
    kept *k = v;
    if (!k)
        return;
    params_free(k->params);
    memo_free(k->conn);
    free(k);
}

static void kept_init(void) {
    kept_ok = pthread_key_create(&kept_key, kept_free) == 0;
}

/* kept_get returns the thread's record (made when make), or NULL. */
static kept *kept_get(int make) {
    pthread_once(&kept_once, kept_init);
    kept *k = kept_ok ? pthread_getspecific(kept_key) : NULL;
    if (!k && make && kept_ok && (k = calloc(1, sizeof(*k))) != NULL &&
        pthread_setspecific(kept_key, k) != 0) {
        free(k);
        k = NULL;
    }
    return k;
}

/* ---- the last arrays rendered, per thread -------------------------------
 * A program that connects with PQconnectdbParams passes the same arrays
 * every time: their string is kept and handed out again while each key and
 * value is the same. */

struct params_memo {
    size_t n;
    char **kv; /* key 0, value 0, key 1, ... (values NULL as given) */
    int expand;
    char *out;
};

static void params_free(void *v) {
    params_memo *m = v;
    if (!m)
        return;
    for (size_t i = 0; i < 2 * m->n; i++)
        free(m->kv[i]);
    free(m->kv);
    free(m->out);
    free(m);
}

static int same_str(const char *a, const char *b) {
    return a == b || (a && b && !strcmp(a, b));
}

/* params_hit: the thread's last arrays were keys, vals, expand. */
static const params_memo *params_hit(const char *const *keys,
                                     const char *const *vals, int expand) {
    const kept *k = kept_get(0);
    const params_memo *m = k ? k->params : NULL;
    if (!m || m->expand != expand)
        return NULL;
    size_t i = 0;
    for (; keys && keys[i] && i < m->n; i++)
        if (!same_str(keys[i], m->kv[2 * i]) ||
            !same_str(vals[i], m->kv[2 * i + 1]))
            return NULL;
    return (!keys || !keys[i]) && i == m->n ? m : NULL;
}

static void params_keep(const char *const *keys, const char *const *vals,
                        int expand, const char *out) {
    size_t n = 0;
    while (keys && keys[n])
        n++;
    kept *k = kept_get(1);
    params_memo *m = k ? calloc(1, sizeof(*m)) : NULL;
    int failed = !m || !(m->kv = calloc(2 * n + 1, sizeof(char *)));
    for (size_t i = 0; !failed && i < n; i++) {
        m->kv[2 * i] = dup_or_null(keys[i], &failed);
        m->kv[2 * i + 1] = dup_or_null(vals[i], &failed);
    }
    if (m) {
        m->n = n;
        m->expand = expand;
        m->out = dup_or_null(out, &failed);
    }
    if (failed) {
        params_free(m);
        return;
    }
    params_free(k->params);
    k->params = m;
}

static char *render_params(const char *const *keys, const char *const *vals,
                           int expand) {
    sbuf b = {NULL, 0, 0, 1};
    for (size_t i = 0; keys && keys[i]; i++) {
        if (!vals[i] || !*vals[i])
            continue;
        if (!strcmp(keys[i], "dbname")) {
            if (add_dbname(&b, vals[i], expand)) {
                free(b.s);
                return NULL;
            }
        } else {
            sb_kv(&b, keys[i], vals[i]);
        }
    }
    return sb_done(&b);
}

char *tether__preload_conn_from_params(const char *const *keys,
                                       const char *const *vals, int expand) {
    const params_memo *m = params_hit(keys, vals, expand);
    if (m)
        return strdup(m->out);
    char *out = render_params(keys, vals, expand);
    if (out)
        params_keep(keys, vals, expand, out);
    return out;
}

char *tether__preload_conn_from_setdb(const char *host, const char *port,
                                      const char *options, const char *dbname,
                                      const char *user, const char *password) {
    sbuf b = {NULL, 0, 0, 1};
    if (dbname && *dbname && add_dbname(&b, dbname, 1)) {
        free(b.s);
        return NULL;
    }
    const char *k[] = {"host", "port", "options", "user", "password"};
    const char *v[] = {host, port, options, user, password};
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
        if (v[i] && *v[i])
            sb_kv(&b, k[i], v[i]);
    return sb_done(&b);
}

/* A replication connection is never pooled. */
static int replication(const tether__conninfo *ci) {
    const char *v = tether__conninfo_get(ci, "replication");
    return v && *v && strcasecmp(v, "false") && strcasecmp(v, "off") &&
           strcasecmp(v, "no") && strcmp(v, "0");
}

/* matches: display against TETHER_PRELOAD_MATCH's patterns ('|'). */
static int matches(const char *display, const char *patterns) {
    char pat[1024];
    const char *p = patterns;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n < sizeof(pat)) {
            memcpy(pat, p, n);
            pat[n] = '\0';
            if (fnmatch(pat, display, 0) == 0)
                return 1;
        }
        if (!bar)
            return 0;
        p = bar + 1;
    }
}

static int is_tether_kw(const char *key) {
    tether__kw_kind k = tether__conninfo_kind(key);
    return k == TETHER__KW_CONNECTOR || k == TETHER__KW_POOL;
}

/* without_tether: ci without tether's keywords (NULL when out of memory). */
static char *without_tether(const tether__conninfo *ci) {
    sbuf b = {NULL, 0, 0, 1};
    for (size_t i = 0; i < ci->n; i++)
        if (!is_tether_kw(ci->kv[i].key))
            sb_kv(&b, ci->kv[i].key, ci->kv[i].val);
    return sb_done(&b);
}

/* libpq_form: ci without tether's keywords, or NULL when it has none. */
static char *libpq_form(const tether__conninfo *ci, int *failed) {
    int any = 0;
    for (size_t i = 0; i < ci->n; i++)
        any |= is_tether_kw(ci->kv[i].key);
    if (!any)
        return NULL;
    char *s = without_tether(ci);
    *failed = !s;
    return s;
}

/* pooled_form: ci with the environment's defaults for the pool keywords
 * the program left out. */
static char *pooled_form(const tether__conninfo *ci,
                         const tether__preload_config *cfg) {
    char *base = tether__conninfo_dup(ci, 0);
    if (!base)
        return NULL;
    sbuf b = {NULL, 0, 0, 1};
    sb_str(&b, base);
    free(base);
    char max[16];
    snprintf(max, sizeof(max), "%d", cfg->pool_max);
    const char *k[] = {"tether_pool_max", "tether_idle_timeout",
                       "tether_acquire_timeout", "tether_reset_query"};
    /* The reset is the preload's, off the program's thread (giveback.c):
     * the pool's own reset only rolls back what is left (nothing). */
    const char *v[] = {max, cfg->idle, cfg->wait, ""};
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
        if (!tether__conninfo_get(ci, k[i]))
            sb_kv(&b, k[i], v[i]);
    return sb_done(&b);
}

/* key_form: eff with every secret value replaced by its keyed hash, then
 * the password file's identity. NULL (with *why) when not to be pooled. */
static char *key_form(const tether__conninfo *eff, const char **why) {
    sbuf b = {NULL, 0, 0, 1};
    char h[33];
    for (size_t i = 0; i < eff->n; i++) {
        const char *k = eff->kv[i].key, *v = eff->kv[i].val;
        if (tether__conninfo_secret(k, v)) {
            tether__preload_hash_hex(v, h);
            sb_kv(&b, k, h);
        } else {
            sb_kv(&b, k, v);
        }
    }
    if (tether__preload_creds_passfile(eff, &b, why) != 0) {
        free(b.s);
        return NULL;
    }
    return sb_done(&b);
}

/* effective parses what libpq would connect with: ci and what libpq takes
 * from the environment. Returns 0, or -1 (*why set when it is not known). */
static int effective(const tether__conninfo *ci, tether__conninfo *eff,
                     const char **why) {
    sbuf b = {NULL, 0, 0, 1};
    char *base = tether__conninfo_dup(ci, 0);
    if (base)
        sb_str(&b, base);
    free(base);
    if (!base || tether__preload_creds_add(ci, &b, why) != 0) {
        free(b.s);
        return -1;
    }
    char *s = sb_done(&b);
    tether_error err = {0};
    int rc = s ? tether__conninfo_parse(s, eff, &err) : -1;
    free(s);
    if (rc != 0 && !*why)
        *why = "the environment's values cannot be parsed";
    return rc != 0 ? -1 : 0;
}

/* service: a service file names settings the preload does not read. */
static int service(const tether__conninfo *eff) {
    const char *v = tether__conninfo_get(eff, "service");
    return v && *v;
}

/* session fills what a pooled connection's session must be: libpq's
 * PQuser, PQdb (the user's name when none is given) and PQoptions. */
static int session(const tether__conninfo *eff, tether__preload_conn *c) {
    const char *u = tether__conninfo_get(eff, "user");
    const char *d = tether__conninfo_get(eff, "dbname");
    const char *o = tether__conninfo_get(eff, "options");
    c->user = strdup(u ? u : "");
    c->db = strdup(d && *d ? d : u ? u : "");
    c->options = strdup(o ? o : "");
    return c->user && c->db && c->options ? 0 : -1;
}

/* key_hash: FNV-1a of the pool's key (its bucket in pools.c). */
static uint64_t key_hash(const char *key) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* decide fills c's pooled form and key from eff, or logs why not. */
static void decide(const tether__conninfo *eff,
                   const tether__preload_config *cfg, tether__preload_conn *c) {
    const char *why = NULL;
    if (cfg->off)
        tether__preload_log("off: not pooled: %s", c->display);
    else if (replication(eff))
        tether__preload_log("replication connection, not pooled: %s",
                            c->display);
    else if (service(eff))
        tether__preload_log(
            "a service (service= or PGSERVICE) is used, whose file the "
            "preload does not read: not pooled: %s",
            c->display);
    else if (!matches(c->display, cfg->match))
        tether__preload_log("no match in TETHER_PRELOAD_MATCH, not pooled: %s",
                            c->display);
    else if (!(c->key = key_form(eff, &why)))
        tether__preload_log("%s: not pooled: %s", why ? why : "out of memory",
                            c->display);
    else if (!(c->pooled = pooled_form(eff, cfg)) ||
             !(c->asked = without_tether(eff)) || session(eff, c) != 0) {
        free(c->pooled);
        free(c->key);
        c->pooled = c->key = NULL;
    } else {
        c->key_hash = key_hash(c->key);
        c->own_reset = !tether__conninfo_get(eff, "tether_reset_query");
        c->keep_prepared = cfg->keep_prepared && c->own_reset;
    }
}

/* prepare fills c from conninfo (tether__preload_conn_prepare, below);
 * *again: the outcome holds for the same string while the environment's
 * PG variables stay as they are (a pooled string with its password: no
 * password file read), and, when *os_user (the user is the process's),
 * while the effective user does. */
static int prepare(const char *conninfo, tether__preload_conn *c, int *again,
                   int *os_user) {
    memset(c, 0, sizeof(*c));
    const tether__preload_config *cfg = tether__preload_config_get();
    tether__conninfo ci, eff = {0};
    tether_error err = {0};
    const char *why = NULL;
    int failed = 0;
    if (tether__conninfo_parse(conninfo ? conninfo : "", &ci, &err) != 0) {
        tether__preload_log("not pooled: %s", err.message);
        tether__conninfo_free(&ci);
        return -1;
    }
    c->libpq = libpq_form(&ci, &failed);
    int known = effective(&ci, &eff, &why) == 0;
    c->display = tether__conninfo_dup(known ? &eff : &ci, 1);
    if (!c->display || failed) {
        tether__conninfo_free(&ci);
        tether__conninfo_free(&eff);
        tether__preload_conn_free(c);
        return -1;
    }
    if (known)
        decide(&eff, cfg, c);
    else
        tether__preload_log("%s: not pooled: %s", why ? why : "?", c->display);
    const char *pw = known ? tether__conninfo_get(&eff, "password") : NULL;
    *again = c->pooled && pw && *pw;
    *os_user = !tether__conninfo_get(&ci, "user") && !getenv("PGUSER");
    tether__conninfo_free(&ci);
    tether__conninfo_free(&eff);
    return 0;
}

/* ---- the last pooled string's outcome, per thread ---------------------
 * A program connects with the same string again and again; parsing it,
 * reading the environment and hashing the secrets on every connect cost
 * more than the rest of a pooled connect. The outcome is reused while the
 * string, the environment's PG variables (every one libpq reads starts
 * with PG) and, when the user is the process's, the effective user are
 * the same. */

extern char **environ;

struct memo {
    char *conninfo;
    char *env; /* each PG entry of environ, with its NUL, in order */
    size_t env_len;
    uid_t euid; /* -1: the outcome does not depend on it */
    tether__preload_conn c;
};

static void memo_free(void *v) {
    memo *m = v;
    if (!m)
        return;
    free(m->conninfo);
    free(m->env);
    tether__preload_conn_free(&m->c);
    free(m);
}

static int is_pg(const char *e) {
    return e[0] == 'P' && e[1] == 'G';
}

/* env_same: environ's PG entries are those of sig. */
static int env_same(const char *sig, size_t len) {
    size_t at = 0;
    for (char **e = environ; e && *e; e++) {
        if (!is_pg(*e))
            continue;
        size_t n = strlen(*e) + 1;
        if (at + n > len || memcmp(sig + at, *e, n) != 0)
            return 0;
        at += n;
    }
    return at == len;
}

static char *env_sig(size_t *len) {
    sbuf b = {NULL, 0, 0, 1};
    for (char **e = environ; e && *e; e++)
        if (is_pg(*e))
            sb_put(&b, *e, strlen(*e) + 1);
    *len = b.n;
    return sb_done(&b);
}

/* conn_copy: dst gets its own copy of src; -1 when out of memory. */
static int conn_copy(tether__preload_conn *dst,
                     const tether__preload_conn *src) {
    int failed = 0;
    *dst = *src;
    dst->pooled = dup_or_null(src->pooled, &failed);
    dst->key = dup_or_null(src->key, &failed);
    dst->asked = dup_or_null(src->asked, &failed);
    dst->user = dup_or_null(src->user, &failed);
    dst->db = dup_or_null(src->db, &failed);
    dst->options = dup_or_null(src->options, &failed);
    dst->display = dup_or_null(src->display, &failed);
    dst->libpq = dup_or_null(src->libpq, &failed);
    if (failed)
        tether__preload_conn_free(dst);
    return failed ? -1 : 0;
}

static memo *memo_get(void) {
    kept *k = kept_get(0);
    return k ? k->conn : NULL;
}

static void memo_keep(const char *conninfo, const tether__preload_conn *c,
                      int os_user) {
    kept *k = kept_get(1);
    memo *m = k ? calloc(1, sizeof(*m)) : NULL;
    if (!m || !(m->conninfo = strdup(conninfo)) ||
        !(m->env = env_sig(&m->env_len)) || conn_copy(&m->c, c) != 0) {
        memo_free(m);
        return;
    }
    m->euid = os_user ? geteuid() : (uid_t)-1;
    memo_free(k->conn);
    k->conn = m;
}

const tether__preload_conn *
tether__preload_conn_get(const char *conninfo, tether__preload_conn *own) {
    const char *s = conninfo ? conninfo : "";
    memo *m = memo_get();
    memset(own, 0, sizeof(*own));
    if (m && !strcmp(m->conninfo, s) && env_same(m->env, m->env_len) &&
        (m->euid == (uid_t)-1 || m->euid == geteuid()))
        return &m->c;
    int again = 0, os_user = 0;
    if (prepare(s, own, &again, &os_user) != 0)
        return NULL;
    if (again)
        memo_keep(s, own, os_user);
    return own;
}

int tether__preload_conn_prepare(const char *conninfo,
                                 tether__preload_conn *c) {
    tether__preload_conn own;
    const tether__preload_conn *got = tether__preload_conn_get(conninfo, &own);
    if (got == &own) {
        *c = own;
        return 0;
    }
    return got && conn_copy(c, got) == 0 ? 0 : -1;
}

void tether__preload_conn_free(tether__preload_conn *c) {
    free(c->pooled);
    free(c->key);
    free(c->asked);
    free(c->user);
    free(c->db);
    free(c->options);
    free(c->display);
    free(c->libpq);
    memset(c, 0, sizeof(*c));
}
