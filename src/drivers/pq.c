/* pq.c - the PostgreSQL driver, on libpq's non-blocking API.
 *
 * Connect: PQconnectStartParams with the parameters object (the driver's
 * ctx) plus the endpoint's host/hostaddr/port, then PQconnectPoll each time
 * the caller's poll() says the socket is ready. No connect_timeout: the
 * caller enforces budgets to the millisecond. Errors during connect carry
 * libpq's verbose text, so the server's SQLSTATE is read from it when the
 * server sent one; otherwise the text decides (client-side failures).
 *
 * After connect the socket is non-blocking for good. alive() makes no round
 * trip: it reads what the server already sent (a FATAL such as
 * pg_terminate_backend's, EOF, a new in_hot_standby value); role reports a
 * statement read are compared once per tick (check_role_tick). validate() and
 * reset() run one query each within a time budget with a poll() loop on a
 * monotonic clock; a query that overruns leaves the connection broken (no
 * blocking PQcancel).
 *
 * A notice receiver watches for FATAL messages arriving while idle (libpq
 * hands them to the notice hooks): the connection is then dying, and a
 * shutdown or crash (57P01, 57P02) also marks it fatal, so the pool clears.
 * Other notices go on to libpq's default receiver. */
#include "pq.h"
#include "conninfo.h"
#include "internal.h"
#include "tether_pq.h"

#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RESET_BUDGET_MS 5000

struct tether__pq_params {
    int n;
    char **keys;
    char **vals;
    const char *password; /* one of vals, or NULL */
};

typedef tether__pq_conn pq_conn; /* pq.h */

/* Results of one query run within a budget (run_query). */
typedef struct pq_run {
    int rc;     /* first error, or 0 */
    char *val;  /* first field of the first row, when wanted */
    size_t cap; /* of val */
} pq_run;

/* ---- small helpers ---------------------------------------------------- */

static int64_t now_ns(void) {
    const tether_clock *clock = tether_clock_real();
    return clock->now_ns(clock->ctx);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = tether__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ci_find finds needle in hay[0, len), ignoring ASCII case. */
static const char *ci_find(const char *hay, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (strncasecmp(hay + i, needle, n) == 0)
            return hay + i;
    return NULL;
}

/* line_of sets [*start, *end) to the line of msg holding p. */
static void line_of(const char *msg, const char *p, const char **start,
                    const char **end) {
    const char *s = p;
    while (s > msg && s[-1] != '\n')
        s--;
    const char *e = strchr(p, '\n');
    *start = s;
    *end = e ? e : p + strlen(p);
}

/* is_state: s begins with five SQLSTATE characters ([0-9A-Z]). */
static int is_state(const char *s) {
    for (int i = 0; i < 5; i++)
        if (!isdigit((unsigned char)s[i]) && !isupper((unsigned char)s[i]))
            return 0;
    return 1;
}

static int state_is(const char *st, const char *want) {
    return st && strcmp(st, want) == 0;
}

/* shutdown_state: admin_shutdown or crash_shutdown, a server-wide event. */
static int shutdown_state(const char *st) {
    return state_is(st, "57P01") || state_is(st, "57P02");
}

/* first_line copies s's first line (without its newline) into buf. */
static void first_line(const char *s, char *buf, size_t cap) {
    size_t n = s ? strcspn(s, "\r\n") : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(buf, s, n);
    buf[n] = '\0';
}

/* ---- libpq's keywords (conninfo's keyword tables) ---------------------- */

/* libpq's own PQconndefaults list, kept for the life of the process: no
 * copy, so no allocation of tether's can fail here. When libpq is out of
 * memory (NULL), only tether's keywords are known for this call and the
 * next call asks again, instead of a one-time load that failed once
 * leaving the list empty or cut short for good. */
static pthread_mutex_t kw_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(PQconninfoOption *) kw_opts;

static PQconninfoOption *kw_list(void) {
    PQconninfoOption *opts =
        atomic_load_explicit(&kw_opts, memory_order_acquire);
    if (opts)
        return opts;
    pthread_mutex_lock(&kw_lock);
    opts = atomic_load_explicit(&kw_opts, memory_order_relaxed);
    if (!opts) {
        opts = PQconndefaults();
        atomic_store_explicit(&kw_opts, opts, memory_order_release);
    }
    pthread_mutex_unlock(&kw_lock);
    return opts;
}

/* kw_at: libpq's i-th keyword, its label as the description. */
static const char *kw_at(size_t i, const char **desc) {
    PQconninfoOption *o = kw_list();
    for (; o && o->keyword; o++)
        if (i-- == 0) {
            *desc = o->label;
            return o->keyword;
        }
    return NULL;
}

/* kw_find: libpq knows kw; secret where its dispchar is "*". */
static int kw_find(const char *kw, int *secret) {
    for (const PQconninfoOption *o = kw_list(); o && o->keyword; o++)
        if (strcmp(kw, o->keyword) == 0) {
            *secret = o->dispchar && o->dispchar[0] == '*';
            return 1;
        }
    return 0;
}

/* kw_env adds what libpq takes for a keyword a string leaves out when its
 * PG* variable is set (a fresh PQconndefaults: it reads the environment
 * now). Before PostgreSQL 16 libpq has no load_balance_hosts, but the
 * connector implements it: PGLOADBALANCEHOSTS is read then too. When
 * libpq is out of memory, the environment is not read (as before). */
static int kw_env(tether__conninfo *env, tether_error *err) {
    PQconninfoOption *defs = PQconndefaults();
    int rc = 0;
    for (PQconninfoOption *o = defs; rc == 0 && o && o->keyword; o++)
        if (o->envvar && getenv(o->envvar) && o->val)
            rc = tether__conninfo_set(env, o->keyword, o->val, err);
    const char *lb = getenv("PGLOADBALANCEHOSTS");
    if (rc == 0 && defs && lb &&
        !tether__conninfo_get(env, "load_balance_hosts"))
        rc = tether__conninfo_set(env, "load_balance_hosts", lb, err);
    PQconninfoFree(defs);
    return rc;
}

static const tether__kwtable pq_keywords = {.layer = "libpq",
                                            .kind = TETHER__KW_LIBPQ,
                                            .at = kw_at,
                                            .find = kw_find,
                                            .env = kw_env};

/* libpq's keywords are known from the start: a string is checked against
 * them wherever it is parsed (conninfo.h, "keyword tables"). */
__attribute__((constructor)) static void register_keywords(void) {
    tether__keywords_register(&pq_keywords);
}

/* ---- parameters ------------------------------------------------------- */

/* known_key: libpq knows the keyword (opts NULL: cannot tell, say yes). */
static int known_key(const PQconninfoOption *opts, const char *key) {
    if (!opts)
        return 1; /* no memory to check: libpq will say at connect */
    for (const PQconninfoOption *o = opts; o->keyword; o++)
        if (strcmp(o->keyword, key) == 0)
            return 1;
    return 0;
}

static int check_key(const PQconninfoOption *opts, const char *key, int i,
                     tether_error *err) {
    static const char *const endpoint_keys[] = {"host", "hostaddr", "port"};
    if (!key || !*key)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "pq: parameter %d has no keyword", i);
    for (size_t k = 0; k < sizeof(endpoint_keys) / sizeof(*endpoint_keys); k++)
        if (strcasecmp(key, endpoint_keys[k]) == 0)
            return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                    "pq: parameter \"%s\" is not allowed: it "
                                    "comes from each endpoint",
                                    key);
    if (!known_key(opts, key))
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "pq: unknown parameter \"%.64s\"", key);
    return 0;
}

/* check_keys checks every keyword against libpq's list (fetched once). */
static int check_keys(const char *const *keys, int n, tether_error *err) {
    PQconninfoOption *opts = n > 0 ? PQconndefaults() : NULL;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = check_key(opts, keys[i], i, err);
    PQconninfoFree(opts);
    return rc;
}

void tether__pq_params_destroy(tether__pq_params *p) {
    if (!p)
        return;
    for (int i = 0; i < p->n; i++) {
        tether__free(p->keys[i]);
        tether__free(p->vals[i]);
    }
    tether__free(p->keys);
    tether__free(p->vals);
    tether__free(p);
}

/* params_copy copies the pairs with a value into p; 0 or -1 (memory). */
static int params_copy(tether__pq_params *p, const char *const *keys,
                       const char *const *vals, int n) {
    for (int i = 0; i < n; i++) {
        if (!vals[i])
            continue;
        p->keys[p->n] = dup_str(keys[i]);
        p->vals[p->n] = dup_str(vals[i]);
        p->n++; /* counted even when half-copied: destroy frees both */
        if (!p->keys[p->n - 1] || !p->vals[p->n - 1])
            return -1;
    }
    return 0;
}

int tether__pq_params_create(tether__pq_params **out, const char *const *keys,
                             const char *const *vals, int n,
                             tether_error *err) {
    if (!out || n < 0 || (n > 0 && (!keys || !vals)))
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "pq: bad parameters (out, n or arrays)");
    *out = NULL;
    int rc = check_keys(keys, n, err);
    if (rc)
        return rc;
    tether__pq_params *p = tether__calloc(1, sizeof(*p));
    if (p) {
        p->keys = tether__calloc((size_t)n + 1, sizeof(char *));
        p->vals = tether__calloc((size_t)n + 1, sizeof(char *));
    }
    if (!p || !p->keys || !p->vals || params_copy(p, keys, vals, n) != 0) {
        tether__pq_params_destroy(p);
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "pq: out of memory");
    }
    p->password = tether__pq_params_get(p, "password");
    *out = p;
    return 0;
}

const char *tether__pq_params_get(const tether__pq_params *p, const char *key) {
    if (!p || !key)
        return NULL;
    for (int i = p->n - 1; i >= 0; i--) /* the last one wins, as in libpq */
        if (strcmp(p->keys[i], key) == 0)
            return p->vals[i];
    return NULL;
}

/* ---- scrubbing -------------------------------------------------------- */

/* put_stars replaces msg[at, at + len) with "***" within cap bytes;
 * returns the index just past the stars. */
static size_t put_stars(char *msg, size_t cap, size_t at, size_t len) {
    size_t n = strlen(msg);
    size_t stars = TETHER__MIN((size_t)3, cap - 1 - at);
    size_t tail = n - at - len;
    size_t room = cap - 1 - at - stars;
    if (tail > room)
        tail = room;
    memmove(msg + at + stars, msg + at + len, tail);
    memcpy(msg + at, "***", stars);
    msg[at + stars + tail] = '\0';
    return at + stars;
}

/* value_end returns the end of the value at msg[i]: a quoted value ends
 * after its closing quote, a bare one at a blank. */
static size_t value_end(const char *msg, size_t i) {
    if (msg[i] == '\'' || msg[i] == '"') {
        char q = msg[i++];
        while (msg[i] && msg[i] != q)
            i += (msg[i] == '\\' && msg[i + 1]) ? 2 : 1;
        return msg[i] ? i + 1 : i;
    }
    while (msg[i] && !isspace((unsigned char)msg[i]))
        i++;
    return i;
}

/* scrub_keyword hides "password=VALUE" and SQL's "PASSWORD 'VALUE'". */
static int scrub_keyword(char *msg, size_t cap) {
    int count = 0;
    for (size_t i = 0; msg[i]; i++) {
        if (strncasecmp(msg + i, "password", 8) != 0)
            continue;
        size_t j = i + 8;
        while (msg[j] == ' ')
            j++;
        if (msg[j] == '=') {
            for (j++; msg[j] == ' ';)
                j++;
        } else if (msg[j] != '\'' || j == i + 8) {
            continue;
        }
        size_t end = value_end(msg, j);
        if (end == j)
            continue;
        i = put_stars(msg, cap, j, end - j) - 1;
        count++;
    }
    return count;
}

/* scrub_uri hides the password of "scheme://user:PASSWORD@host". */
static int scrub_uri(char *msg, size_t cap) {
    int count = 0;
    for (char *p = strstr(msg, "://"); p; p = strstr(p + 3, "://")) {
        char *info = p + 3;
        size_t n = strcspn(info, "@/?# \t\r\n");
        char *colon = memchr(info, ':', n);
        if (info[n] != '@' || !colon || colon + 1 == info + n)
            continue;
        size_t at = (size_t)(colon + 1 - msg);
        put_stars(msg, cap, at, (size_t)(info + n - colon - 1));
        count++;
    }
    return count;
}

int tether__pq_scrub(char *msg, size_t cap, const char *password) {
    if (!msg || cap == 0)
        return 0;
    int count = scrub_keyword(msg, cap) + scrub_uri(msg, cap);
    size_t plen = password ? strlen(password) : 0;
    if (plen < 3)
        return count;
    for (char *p = strstr(msg, password); p; p = strstr(p, password)) {
        size_t next = put_stars(msg, cap, (size_t)(p - msg), plen);
        p = msg + next;
        count++;
    }
    return count;
}

/* ---- the SQLSTATE table ----------------------------------------------- */

/* state_class: the table's entries by class (the first two characters). */
static int state_class(const char *s, tether_class *cls) {
    if (s[0] == '0' && s[1] == '8') {
        *cls = TETHER_CLASS_TRANSIENT;
        return state_is(s, "08001") || state_is(s, "08004") ? TETHER_ECONNECT
                                                            : TETHER_EBROKEN;
    }
    if (s[0] == '5' && s[1] == '3') {
        int busy = state_is(s, "53300");
        *cls = busy ? TETHER_CLASS_THROTTLED : TETHER_CLASS_TRANSIENT;
        return TETHER_ETHROTTLED; /* lacks resources: disk, memory, slots */
    }
    if (s[0] == '5' && s[1] == '8') {
        *cls = TETHER_CLASS_TRANSIENT;
        return TETHER_EIO;
    }
    if (s[0] == '2' && s[1] == '8') {
        *cls = TETHER_CLASS_PERMANENT;
        return TETHER_EAUTH;
    }
    *cls = TETHER_CLASS_PERMANENT;
    return TETHER_EQUERY;
}

int tether__pq_classify_sqlstate(const char *sqlstate, int *code,
                                 tether_class *cls) {
    static const struct {
        const char *state;
        int code;
        tether_class cls;
    } exact[] = {
        {"57P01", TETHER_EBROKEN, TETHER_CLASS_TRANSIENT}, /* admin shutdown */
        {"57P02", TETHER_EBROKEN, TETHER_CLASS_TRANSIENT}, /* crash */
        {"57P03", TETHER_ETHROTTLED, TETHER_CLASS_THROTTLED}, /* starting */
        {"57P05", TETHER_EBROKEN, TETHER_CLASS_TRANSIENT},    /* idle session */
        {"25P03", TETHER_EBROKEN, TETHER_CLASS_TRANSIENT},    /* idle in txn */
        {"40001", TETHER_ECONFLICT, TETHER_CLASS_TRANSIENT}, /* serialization */
        {"40P01", TETHER_ECONFLICT, TETHER_CLASS_TRANSIENT}, /* deadlock */
        {"55P03", TETHER_ECONFLICT, TETHER_CLASS_TRANSIENT}, /* lock n/a */
        {"25006", TETHER_EREADONLY, TETHER_CLASS_TRANSIENT}, /* read-only */
        {"57014", TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT}, /* canceled */
    };
    int c = TETHER_EQUERY;
    tether_class k = TETHER_CLASS_PERMANENT;
    int hit = 0;
    if (sqlstate && strlen(sqlstate) == 5 && is_state(sqlstate)) {
        for (size_t i = 0; i < sizeof(exact) / sizeof(*exact) && !hit; i++)
            if (strcmp(sqlstate, exact[i].state) == 0) {
                c = exact[i].code;
                k = exact[i].cls;
                hit = 1;
            }
        if (!hit)
            c = state_class(sqlstate, &k);
    }
    if (code)
        *code = c;
    if (cls)
        *cls = k;
    return c;
}

/* ---- connect-message classification ----------------------------------- */

/* A rule: needle found in libpq's message (any case) decides. state NULL:
 * "database" or "role" in the line picks 3D000 or 28000. */
typedef struct conn_rule {
    const char *needle;
    int code;
    tether_class cls;
    const char *state;
} conn_rule;

#define THR TETHER_CLASS_THROTTLED
#define TRA TETHER_CLASS_TRANSIENT
#define PER TETHER_CLASS_PERMANENT

/* In priority order: a message may hold several attempts' lines. */
static const conn_rule conn_rules[] = {
    {"too many clients", TETHER_ETHROTTLED, THR, "53300"},
    {"remaining connection slots are reserved", TETHER_ETHROTTLED, THR,
     "53300"},
    {"too many connections for", TETHER_ETHROTTLED, THR, "53300"},
    {"the database system is starting up", TETHER_ETHROTTLED, THR, "57P03"},
    {"the database system is shutting down", TETHER_ETHROTTLED, THR, "57P03"},
    {"the database system is in recovery", TETHER_ETHROTTLED, THR, "57P03"},
    {"not yet accepting connections", TETHER_ETHROTTLED, THR, "57P03"},
    {"is not accepting connections", TETHER_ETHROTTLED, THR, "57P03"},
    {"password authentication failed", TETHER_EAUTH, PER, "28P01"},
    {"no pg_hba.conf entry", TETHER_EAUTH, PER, "28000"},
    {"no password supplied", TETHER_EAUTH, PER, "28P01"},
    {"does not exist", TETHER_ECONNECT, PER, NULL},
    {"authentication", TETHER_EAUTH, PER, "28000"},
    {"could not translate host name", TETHER_ERESOLVE, TRA, ""},
    {"does not support SSL", TETHER_ECONNECT, PER, ""},
    {"certificate", TETHER_ECONNECT, PER, ""},
    {"invalid connection option", TETHER_ESPEC, PER, ""},
    {"for connection option", TETHER_ESPEC, PER, ""},
    {"invalid port number", TETHER_ESPEC, PER, ""},
    {" value: \"", TETHER_ESPEC, PER, ""},
    {"session is read-only", TETHER_EREADONLY, TRA, ""},
    {"server is in hot standby mode", TETHER_EREADONLY, TRA, ""},
    {"session is not read-only", TETHER_ENOHOST, TRA, ""},
    {"server is not in hot standby mode", TETHER_ENOHOST, TRA, ""},
    {"out of memory", TETHER_ENOMEM, PER, ""},
    {"server closed the connection unexpectedly", TETHER_ECONNECT, TRA,
     "08006"},
    {"Connection refused", TETHER_ECONNECT, TRA, "08001"},
    {"could not connect", TETHER_ECONNECT, TRA, "08001"},
    {"timeout", TETHER_ECONNECT, TRA, "08001"},
    {"timed out", TETHER_ECONNECT, TRA, "08001"},
};

/* Anything else: a connect failure worth another try. */
static const conn_rule default_rule = {NULL, TETHER_ECONNECT, TRA, ""};

#undef THR
#undef TRA
#undef PER

/* match_rule returns the first rule whose needle is in msg; *at is where. */
static const conn_rule *match_rule(const char *msg, const char **at) {
    size_t len = strlen(msg);
    for (size_t i = 0; i < sizeof(conn_rules) / sizeof(*conn_rules); i++) {
        const char *p = ci_find(msg, len, conn_rules[i].needle);
        if (p) {
            *at = p;
            return &conn_rules[i];
        }
    }
    *at = msg;
    return &default_rule;
}

/* find_state finds a verbose-mode SQLSTATE ("SEVERITY:  XXXXX: ") in msg. */
static const char *find_state(const char *msg) {
    for (const char *p = strstr(msg, ":  "); p; p = strstr(p + 1, ":  "))
        if (is_state(p + 3) && p[8] == ':' && p[9] == ' ')
            return p + 3;
    return NULL;
}

/* state_rule classifies a connect failure the server gave an SQLSTATE:
 * the table, then connect's own reading (a missing database or role is a
 * permanent connect error; session-level codes become ECONNECT). */
static int state_rule(const char *st, const char *line, size_t len,
                      tether_class *cls) {
    int code = tether__pq_classify_sqlstate(st, NULL, cls);
    if (code == TETHER_EAUTH && !ci_find(line, len, "does not exist"))
        return code;
    if (code == TETHER_ETHROTTLED || code == TETHER_EREADONLY)
        return code;
    if (code == TETHER_EAUTH) /* role "x" does not exist */
        *cls = TETHER_CLASS_PERMANENT;
    return TETHER_ECONNECT;
}

int tether__pq_classify_connect(const char *msg, int *code, tether_class *cls,
                                char sqlstate[6], const char **line,
                                size_t *line_len) {
    const char *at, *s, *e;
    tether_class k;
    int c;
    char st[6] = "";
    msg = msg ? msg : "";
    const char *vs = find_state(msg);
    if (vs) {
        memcpy(st, vs, 5);
        line_of(msg, vs, &s, &e);
        c = state_rule(st, s, (size_t)(e - s), &k);
    } else {
        const conn_rule *r = match_rule(msg, &at);
        line_of(msg, at, &s, &e);
        c = r->code;
        k = r->cls;
        if (r->state)
            snprintf(st, sizeof(st), "%s", r->state);
        else /* "does not exist": a database, or a role */
            snprintf(st, sizeof(st), "%s",
                     ci_find(s, (size_t)(e - s), "database") ? "3D000"
                                                             : "28000");
    }
    if (code)
        *code = c;
    if (cls)
        *cls = k;
    if (sqlstate)
        memcpy(sqlstate, st, sizeof(st));
    if (line)
        *line = s;
    if (line_len)
        *line_len = (size_t)(e - s);
    return c;
}

/* tidy drops libpq's "connection to server ... failed: " prefix, a verbose
 * SQLSTATE and trailing blanks from the line in buf. */
static void tidy(char *buf) {
    static const char prefix[] = "connection to server ";
    if (strncmp(buf, prefix, sizeof(prefix) - 1) == 0) {
        char *f = strstr(buf, " failed: ");
        if (f)
            memmove(buf, f + 9, strlen(f + 9) + 1);
    }
    const char *vs = find_state(buf);
    if (vs) {
        char *v = buf + (vs - buf);
        memmove(v, v + 7, strlen(v + 7) + 1); /* "XXXXX: " */
    }
    size_t n = strlen(buf);
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
}

int tether__pq_connect_error(const char *label, const char *libpq_msg,
                             const char *password, tether_error *err) {
    int code;
    tether_class cls;
    char st[6];
    const char *line;
    size_t len;
    tether__pq_classify_connect(libpq_msg, &code, &cls, st, &line, &len);
    if (!err)
        return code;
    char *text =
        tether__malloc(len + 4); /* room for "***" over a 1-2 byte secret */
    if (text) {
        memcpy(text, line, len);
        text[len] = '\0';
        tidy(text);
        tether__pq_scrub(text, len + 4, password);
    }
    tether_error_set(err, code, cls, "connect to %s failed: %s",
                     label ? label : "server",
                     text && *text ? text : tether_strerror(code));
    tether__free(text);
    tether__pq_scrub(err->message, sizeof(err->message), password);
    memcpy(err->sqlstate, st, sizeof(st));
    err->not_sent = 1;
    return code;
}

/* ---- errors of a work function ---------------------------------------- */

static int result_failed(ExecStatusType st) {
    return st == PGRES_BAD_RESPONSE || st == PGRES_NONFATAL_ERROR ||
           st == PGRES_FATAL_ERROR || st == PGRES_PIPELINE_ABORTED;
}

/* result_error fills err from a result carrying SQLSTATE st. */
static int result_error(const PGresult *r, const char *st, tether_error *err) {
    int code;
    tether_class cls;
    tether__pq_classify_sqlstate(st, &code, &cls);
    if (!err)
        return code;
    char text[TETHER_MSG_MAX];
    const char *primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    first_line(primary ? primary : PQresultErrorMessage(r), text, sizeof(text));
    tether__pq_scrub(text, sizeof(text), NULL);
    tether_error_set(err, code, cls, "%s", *text ? text : "query failed");
    snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", st);
    return code;
}

int tether_pq_error(const PGconn *pg, const PGresult *r, tether_error *err) {
    if (r && !result_failed(PQresultStatus(r))) {
        tether_error_clear(err);
        return 0;
    }
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (st && strlen(st) == 5 && is_state(st))
        return result_error(r, st, err);
    char text[TETHER_MSG_MAX];
    first_line(r ? PQresultErrorMessage(r) : NULL, text, sizeof(text));
    if (!*text && pg)
        first_line(PQerrorMessage(pg), text, sizeof(text));
    tether__pq_scrub(text, sizeof(text), NULL);
    if (PQstatus(pg) == CONNECTION_BAD) /* it may have reached the server */
        return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                "connection lost: %s",
                                *text ? text : "no connection to the server");
    return tether_error_set(err, TETHER_EQUERY, TETHER_CLASS_PERMANENT, "%s",
                            *text ? text : "query failed");
}

/* ---- classify --------------------------------------------------------- */

static tether_class class_of(int code) {
    switch (code) {
    case TETHER_ECONNECT:
    case TETHER_ETIMEDOUT:
    case TETHER_EBROKEN:
    case TETHER_ERESOLVE:
    case TETHER_EREADONLY:
    case TETHER_ECONFLICT:
    case TETHER_EIO:
        return TETHER_CLASS_TRANSIENT;
    case TETHER_ETHROTTLED:
        return TETHER_CLASS_THROTTLED;
    default: /* TETHER_EAUTH, TETHER_EQUERY and anything else */
        return TETHER_CLASS_PERMANENT;
    }
}

static void pq_classify(void *conn, tether_error *err) {
    (void)conn;
    if (!err)
        return;
    if (err->sqlstate[0])
        tether__pq_classify_sqlstate(err->sqlstate, NULL, &err->cls);
    else if (err->cls == TETHER_CLASS_NONE)
        err->cls = class_of(err->code);
}

/* ---- notices and roles ------------------------------------------------ */

/* on_notice sees every notice, including errors that arrive while idle. */
static void on_notice(void *arg, const PGresult *res) {
    pq_conn *c = arg;
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (shutdown_state(PQresultErrorField(res, PG_DIAG_SQLSTATE)))
        c->fatal = 1;
    if (sev && (strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0)) {
        c->dying = 1; /* handled here: not printed */
        return;
    }
    if (c->next_rx) /* libpq's default receiver ignores its arg */
        c->next_rx(NULL, res);
}

static void remember(char *dst, const PGconn *pg, const char *name) {
    const char *v = PQparameterStatus(pg, name);
    snprintf(dst, TETHER__PQ_STATUS_MAX, "%s", v ? v : "");
}

/* check_role marks c fatal when the server's role changed since connect:
 * in_hot_standby (PostgreSQL 14+), else default_transaction_read_only. A
 * session's own SET default_transaction_read_only is no role change, so it
 * counts only when in_hot_standby is not reported. */
static void check_role(pq_conn *c) {
    const char *name = "in_hot_standby", *seen = c->hot_standby;
    if (!*seen) {
        name = "default_transaction_read_only";
        seen = c->read_only;
    }
    const char *v = *seen ? PQparameterStatus(c->pg, name) : NULL;
    if (v && strcmp(v, seen) != 0)
        c->fatal = 1;
}

/* check_role_tick runs check_role at most once per housekeeper tick
 * (10 ms) per connection. The check walks libpq's list of server
 * parameters, a dozen separately allocated nodes that are cold in the
 * cache of a busy thread; on every acquire and release it cost more than
 * the rest of the pool's path. A role change the server reports during
 * work is therefore seen by the first acquire or release in a later tick. */
TETHER__HOT static void check_role_tick(pq_conn *c) {
    int64_t t = tether__ticker_ms();
    if (t != c->role_ms) {
        c->role_ms = t;
        check_role(c);
    }
}

static tether_role pq_role(void *conn) {
    pq_conn *c = conn;
    const char *v = PQparameterStatus(c->pg, "in_hot_standby");
    if (v)
        return strcmp(v, "on") == 0 ? TETHER_ROLE_STANDBY : TETHER_ROLE_PRIMARY;
    v = PQparameterStatus(c->pg, "default_transaction_read_only");
    if (v && strcmp(v, "on") == 0)
        return TETHER_ROLE_STANDBY;
    return (tether_role)c->queried_role;
}

/* ---- connect ---------------------------------------------------------- */

/* make_label names the endpoint "host:port" ("[addr]:port" for IPv6). */
static void make_label(pq_conn *c, const tether_endpoint *ep) {
    const char *h = ep && ep->host && *ep->host           ? ep->host
                    : ep && ep->hostaddr && *ep->hostaddr ? ep->hostaddr
                                                          : PQhost(c->pg);
    char port[16];
    if (ep && ep->port > 0)
        snprintf(port, sizeof(port), "%d", ep->port);
    else
        snprintf(port, sizeof(port), "%s",
                 PQport(c->pg) && *PQport(c->pg) ? PQport(c->pg) : "5432");
    h = h && *h ? h : "localhost";
    if (strchr(h, ':') && !strchr(h, '/')) /* an IPv6 address */
        snprintf(c->label, sizeof(c->label), "[%s]:%s", h, port);
    else
        snprintf(c->label, sizeof(c->label), "%s:%s", h, port);
}

static int connect_failed(pq_conn *c, tether_error *err) {
    const char *pw = c->params ? c->params->password : NULL;
    return tether__pq_connect_error(c->label, PQerrorMessage(c->pg), pw, err);
}

static int finish_connect(pq_conn *c, tether_error *err) {
    (void)err;
    /* Users get the PGconn in libpq's usual blocking mode; the driver's own
     * round trips switch to non-blocking for their duration. */
    PQsetErrorVerbosity(c->pg, PQERRORS_DEFAULT);
    remember(c->hot_standby, c->pg, "in_hot_standby");
    remember(c->read_only, c->pg, "default_transaction_read_only");
    c->params = NULL;
    c->sock = PQsocket(c->pg);
    tether__pq_stmt_register(c); /* for tether_pq_exec (pq_stmt.c) */
    return TETHER_CONNECTED;
}

/* wait_for tells the caller to wait for events on the current socket. */
static int wait_for(pq_conn *c, tether_wait *w, short events) {
    int fd = PQsocket(c->pg);
    /* No socket (should not happen while in progress): poll again now. */
    *w = (tether_wait){fd, fd >= 0 ? events : (short)0,
                       fd >= 0 ? -1 : tether__now_ms(NULL)};
    return TETHER_IN_PROGRESS;
}

/* start_libpq starts the connect: params, then the endpoint's keys. */
static int start_libpq(pq_conn *c, const tether_endpoint *ep,
                       tether_error *err) {
    int n = c->params ? c->params->n : 0, k = 0;
    const char **keys = tether__calloc(2 * ((size_t)n + 4), sizeof(char *));
    if (!keys)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "pq: out of memory");
    const char **vals = keys + n + 4;
    char port[16];
    for (; k < n; k++) {
        keys[k] = c->params->keys[k];
        vals[k] = c->params->vals[k];
    }
    if (ep && ep->host && *ep->host)
        keys[k] = "host", vals[k++] = ep->host;
    if (ep && ep->hostaddr && *ep->hostaddr)
        keys[k] = "hostaddr", vals[k++] = ep->hostaddr;
    if (ep && ep->port > 0) {
        snprintf(port, sizeof(port), "%d", ep->port);
        keys[k] = "port", vals[k++] = port;
    }
    c->pg = PQconnectStartParams(keys, vals, 0);
    tether__free(keys);
    if (!c->pg)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "pq: out of memory");
    return 0;
}

static int pq_connect_start(void *ctx, const tether_endpoint *ep, void **conn,
                            tether_wait *w, tether_error *err) {
    *conn = NULL;
    pq_conn *c = tether__calloc(1, sizeof(*c));
    if (!c)
        return tether_error_set(err, TETHER_ENOMEM, TETHER_CLASS_PERMANENT,
                                "pq: out of memory");
    c->params = ctx;
    c->sock = -1;
    int rc = start_libpq(c, ep, err);
    if (rc == 0) {
        make_label(c, ep);
        c->next_rx = PQsetNoticeReceiver(c->pg, on_notice, c);
        PQsetErrorVerbosity(c->pg, PQERRORS_VERBOSE); /* SQLSTATE in text */
        ConnStatusType st = PQstatus(c->pg);
        rc = st == CONNECTION_BAD  ? connect_failed(c, err)
             : st == CONNECTION_OK ? finish_connect(c, err)
                                   : wait_for(c, w, POLLOUT);
    }
    if (rc < 0) {
        PQfinish(c->pg);
        tether__free(c);
        return rc;
    }
    *conn = c;
    return rc;
}

static int pq_connect_poll(void *conn, tether_wait *w, tether_error *err) {
    pq_conn *c = conn;
    switch (PQconnectPoll(c->pg)) {
    case PGRES_POLLING_OK:
        return finish_connect(c, err);
    case PGRES_POLLING_READING:
        return wait_for(c, w, POLLIN);
    case PGRES_POLLING_WRITING:
        return wait_for(c, w, POLLOUT);
    case PGRES_POLLING_FAILED:
        return connect_failed(c, err);
    default: /* PGRES_POLLING_ACTIVE, unused: call again */
        return wait_for(c, w, POLLIN | POLLOUT);
    }
}

static void pq_close(void *conn) {
    pq_conn *c = conn;
    if (!c)
        return;
    tether__pq_stmt_closed(c);
    tether__pq_stmt_unregister(c);
    PQfinish(c->pg);
    tether__free(c);
}

static void *pq_handle(void *conn) {
    return conn ? ((pq_conn *)conn)->pg : NULL;
}

const char *tether__pq_label(const void *conn) {
    return conn ? ((const pq_conn *)conn)->label : "";
}

/* ---- queries within a budget ------------------------------------------ */

/* lost marks c broken after an I/O failure and reports it. */
static int lost(pq_conn *c, const char *what, tether_error *err) {
    char text[TETHER_MSG_MAX];
    c->broken = 1;
    first_line(PQerrorMessage(c->pg), text, sizeof(text));
    tether__pq_scrub(text, sizeof(text), NULL);
    return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                            "%s on %s: connection lost: %s", what, c->label,
                            *text ? text : "no connection to the server");
}

/* wait_io waits for the socket to be readable (or writable, want_write)
 * until deadline_ns (-1: none). 1: deadline passed, 0: go on, -1: error. */
static int wait_io(PGconn *pg, int want_write, int64_t deadline_ns) {
    struct pollfd pfd = {PQsocket(pg), POLLIN, 0};
    if (pfd.fd < 0)
        return -1;
    if (want_write)
        pfd.events |= POLLOUT;
    int ms = -1;
    if (deadline_ns >= 0) {
        int64_t left = deadline_ns - now_ns();
        if (left <= 0)
            return 1;
        left = (left + TETHER__NS_PER_MS - 1) / TETHER__NS_PER_MS;
        ms = (int)TETHER__MIN(left, (int64_t)1 << 30);
    }
    int rc = poll(&pfd, 1, ms);
    if (rc < 0)
        return errno == EINTR ? 0 : -1;
    return rc == 0 && deadline_ns >= 0 && now_ns() >= deadline_ns;
}

/* note_result records one result; -1 when c cannot go on (COPY). */
static int note_result(pq_conn *c, PGresult *r, pq_run *run,
                       tether_error *err) {
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
        c->broken = 1;
        if (!run->rc)
            run->rc =
                tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                 "unexpected COPY on %s", c->label);
        return -1;
    }
    if (result_failed(st)) {
        if (shutdown_state(PQresultErrorField(r, PG_DIAG_SQLSTATE)))
            c->fatal = 1;
        if (!run->rc)
            run->rc = tether_pq_error(c->pg, r, err);
    } else if (st == PGRES_TUPLES_OK && run->val && PQntuples(r) > 0 &&
               PQnfields(r) > 0) {
        snprintf(run->val, run->cap, "%s", PQgetvalue(r, 0, 0));
    }
    return 0;
}

/* take_results reads the results ready now: 1 when the query is done, 0
 * when more must be read, -1 when c cannot go on. */
static int take_results(pq_conn *c, pq_run *run, tether_error *err) {
    while (!PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        if (!r)
            return 1;
        int st = note_result(c, r, run, err);
        PQclear(r);
        if (st < 0)
            return -1;
    }
    return 0;
}

static int overran(pq_conn *c, const char *what, int64_t timeout_ms,
                   tether_error *err) {
    c->broken = 1; /* a query is still running: the session is unusable */
    return tether_error_set(err, TETHER_ETIMEDOUT, TETHER_CLASS_TRANSIENT,
                            "%s on %s timed out after %lld ms", what, c->label,
                            (long long)timeout_ms);
}

/* run_query runs sql on c without blocking past timeout_ms (-1: no limit):
 * 0, the first result error, or TETHER_EBROKEN / TETHER_ETIMEDOUT (c is
 * then broken). what names the operation in messages. */
static int run_query_nb(pq_conn *c, const char *sql, const char *what,
                        int64_t timeout_ms, pq_run *run, tether_error *err) {
    int64_t deadline =
        timeout_ms < 0 ? -1 : now_ns() + timeout_ms * TETHER__NS_PER_MS;
    if (!PQisnonblocking(c->pg) && PQsetnonblocking(c->pg, 1) != 0)
        return lost(c, what, err);
    if (!PQsendQuery(c->pg, sql))
        return lost(c, what, err);
    for (;;) {
        int pending = PQflush(c->pg);
        if (pending < 0)
            return lost(c, what, err);
        int done = pending ? 0 : take_results(c, run, err);
        if (done)
            return run->rc;
        int w = wait_io(c->pg, pending, deadline);
        if (w > 0)
            return overran(c, what, timeout_ms, err);
        if (w < 0 || !PQconsumeInput(c->pg))
            return lost(c, what, err);
    }
}

/* run_query is run_query_nb with the connection back in blocking mode
 * afterwards, as users expect their PGconn. */
static int run_query(pq_conn *c, const char *sql, const char *what,
                     int64_t timeout_ms, pq_run *run, tether_error *err) {
    int rc = run_query_nb(c, sql, what, timeout_ms, run, err);
    if (c->pg && PQstatus(c->pg) == CONNECTION_OK)
        PQsetnonblocking(c->pg, 0);
    return rc;
}

/* usable checks that c can run a query now (no query in flight) and
 * returns its transaction status (IDLE, INTRANS or INERROR) in *ts. Two
 * libpq calls, as it runs on every release: PQtransactionStatus is UNKNOWN
 * on a bad connection and ACTIVE while a query runs. */
TETHER__HOT static int usable(pq_conn *c, const char *what,
                              PGTransactionStatusType *ts, tether_error *err) {
    *ts = c->broken || c->dying ? PQTRANS_UNKNOWN : PQtransactionStatus(c->pg);
    if (*ts == PQTRANS_UNKNOWN)
        return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                "%s on %s: connection is broken", what,
                                c->label);
    if (*ts == PQTRANS_ACTIVE || PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF) {
        if (c->draining) /* a statement outran its deadline: drain it */
            return TETHER__EDRAIN;
        return tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                                "%s on %s: a query is still running, session "
                                "state unknown",
                                what, c->label);
    }
    return 0;
}

/* ---- alive, validate, reset ------------------------------------------- */

/* readable_now: the server sent something (or hung up) already. */
TETHER__HOT static int readable_now(const pq_conn *c) {
    struct pollfd pfd = {c->sock, POLLIN, 0};
    if (pfd.fd < 0)
        return 0;
    return poll(&pfd, 1, 0) > 0;
}

TETHER__HOT static int pq_alive(void *conn, int probe) {
    pq_conn *c = conn;
    if (probe && !c->broken && !c->dying && PQstatus(c->pg) == CONNECTION_OK &&
        readable_now(c)) {
        /* PQconsumeInput only reads; PQisBusy parses what came, which
         * hands a FATAL to the notice receiver (dying, and fatal for a
         * shutdown) and applies a ParameterStatus. Without it a dead
         * connection whose FATAL sat unread passed this check once. */
        if (PQconsumeInput(c->pg))
            PQisBusy(c->pg);
        if (PQstatus(c->pg) == CONNECTION_OK && !c->dying)
            check_role(c); /* a report that came while idle */
    }
    if (c->fatal) /* a shutdown, crash or role change: clear the pool */
        return TETHER_FATAL_SEEN;
    /* Without the probe, libpq has not run on c since connect, reset or
     * validate found it OK: its status cannot have changed, and asking
     * (a call into libpq and a line of its PGconn) costs a cache miss on
     * the path that runs cold after each round trip. */
    return !c->broken && !c->dying &&
           (!probe || PQstatus(c->pg) == CONNECTION_OK);
}

static int pq_validate(void *conn, int64_t timeout_ms, tether_error *err) {
    pq_conn *c = conn;
    pq_run run = {0, NULL, 0};
    PGTransactionStatusType ts;
    int rc = usable(c, "validate", &ts, err);
    if (rc == 0)
        rc = run_query(c, "", "validate", timeout_ms, &run, err);
    if (rc < 0 && rc != TETHER_ETIMEDOUT) { /* any failure: discard it */
        c->broken = 1;
        if (err) {
            err->code = rc = TETHER_EBROKEN;
            err->cls = TETHER_CLASS_TRANSIENT;
        }
    }
    if (rc == 0)
        check_role(c);
    return rc < 0 ? rc : 0;
}

/* reset_verdict: a failed reset is fatal when the server said so (the
 * pool clears and closes this one anyway), else the state is unknown. */
static int reset_verdict(pq_conn *c, int rc) {
    return c->fatal ? TETHER_FATAL : rc;
}

TETHER__HOT static int pq_reset(void *conn, const char *reset_query,
                                tether_error *err) {
    pq_conn *c = conn;
    pq_run run = {0, NULL, 0};
    PGTransactionStatusType ts;
    int rc = usable(c, "reset", &ts, err);
    if (rc)
        return reset_verdict(c, rc);
    int ran = ts != PQTRANS_IDLE || (reset_query && *reset_query);
    if (ts != PQTRANS_IDLE)
        rc = run_query(c, "ROLLBACK", "reset", RESET_BUDGET_MS, &run, err);
    if (rc == 0 && reset_query && *reset_query) {
        c->nprep = 0; /* DISCARD ALL may drop them: prepare again */
        rc = run_query(c, reset_query, "reset query", RESET_BUDGET_MS, &run,
                       err);
    }
    if (rc == 0 && ran && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
        rc = tether_error_set(err, TETHER_EBROKEN, TETHER_CLASS_TRANSIENT,
                              "reset on %s left a transaction open", c->label);
    if (__builtin_expect(c->drained, 0)) /* back from a drain (pq_stmt.c) */
        tether__pq_stmt_released(c, rc);
    if (rc < 0)
        return reset_verdict(c, rc);
    check_role_tick(c);
    if (c->fatal)
        return TETHER_FATAL;
    return ts != PQTRANS_IDLE ? TETHER_ROLLED_BACK : 0; /* docs/pool.md */
}

/* Transaction affinity (docs/pool.md, "Transactions across acquires"):
 * libpq's own record of the last ReadyForQuery, no round trip. */
static int pq_in_transaction(void *conn) {
    pq_conn *c = conn;
    if (c->broken || c->dying || PQstatus(c->pg) != CONNECTION_OK)
        return -1;
    switch (PQtransactionStatus(c->pg)) {
    case PQTRANS_IDLE:
        return 0;
    case PQTRANS_INTRANS:
    case PQTRANS_INERROR:
        return 1;
    default: /* a command in progress, or unknown */
        return -1;
    }
}

int tether__pq_query_role(void *conn, int64_t timeout_ms, tether_error *err) {
    pq_conn *c = conn;
    char val[8] = "";
    pq_run run = {0, val, sizeof(val)};
    if (!c)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "pq: conn is NULL");
    PGTransactionStatusType ts;
    int rc = usable(c, "role query", &ts, err);
    if (rc == 0)
        rc = run_query(c, "SELECT pg_is_in_recovery()", "role query",
                       timeout_ms, &run, err);
    if (rc < 0)
        return rc;
    if (strcmp(val, "t") != 0 && strcmp(val, "f") != 0)
        return tether_error_set(err, TETHER_EQUERY, TETHER_CLASS_PERMANENT,
                                "role query on %s: unexpected answer",
                                c->label);
    c->queried_role = val[0] == 't' ? TETHER_ROLE_STANDBY : TETHER_ROLE_PRIMARY;
    /* The answer is the connection's role from now on: a connection the
     * connector kept on a standby until it was promoted (docs/conninfo.md,
     * "The role watch") is a primary's, not one whose role changed. */
    remember(c->hot_standby, c->pg, "in_hot_standby");
    remember(c->read_only, c->pg, "default_transaction_read_only");
    return c->queried_role;
}

/* The lag query: "MS BYTES". The replay delay is counted only while WAL
 * received waits to be replayed: on an idle primary the last replayed
 * transaction grows old without the standby lagging. */
static const char lag_sql[] =
    "SELECT CASE WHEN NOT pg_is_in_recovery() THEN '0 0' ELSE "
    "(CASE WHEN pg_last_wal_receive_lsn() IS NOT NULL AND "
    "pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN 0 ELSE "
    "COALESCE((extract(epoch FROM now() - pg_last_xact_replay_timestamp()) "
    "* 1000)::bigint, 0) END)::text || ' ' || "
    "COALESCE(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), "
    "pg_last_wal_replay_lsn()), 0)::bigint::text END";

static int pq_lag(void *conn, int64_t timeout_ms, int64_t *lag_ms,
                  int64_t *lag_bytes, tether_error *err) {
    pq_conn *c = conn;
    char val[64] = "";
    pq_run run = {0, val, sizeof(val)};
    PGTransactionStatusType ts;
    int rc = usable(c, "lag query", &ts, err);
    if (rc == 0)
        rc = run_query(c, lag_sql, "lag query", timeout_ms, &run, err);
    if (rc < 0)
        return rc;
    long long ms, bytes;
    if (sscanf(val, "%lld %lld", &ms, &bytes) != 2)
        return tether_error_set(err, TETHER_EQUERY, TETHER_CLASS_PERMANENT,
                                "lag query on %s: unexpected answer", c->label);
    *lag_ms = ms < 0 ? 0 : ms;
    *lag_bytes = bytes < 0 ? 0 : bytes;
    return 0;
}

/* The connector's parameters: the connection string's libpq keywords, and
 * target_session_attrs=any, since tether judges roles itself: libpq must
 * not apply PGTARGETSESSIONATTRS on its own. */
static int pq_params_create(const char *const *keys, const char *const *vals,
                            int n, void **ctx, tether_error *err) {
    const char **k = tether__malloc(sizeof(*k) * ((size_t)n + 1));
    const char **v = tether__malloc(sizeof(*v) * ((size_t)n + 1));
    int rc = TETHER_ENOMEM;
    if (k && v) {
        k[0] = "target_session_attrs";
        v[0] = "any";
        for (int i = 0; i < n; i++) {
            k[i + 1] = keys[i];
            v[i + 1] = vals[i];
        }
        tether__pq_params *p = NULL;
        rc = tether__pq_params_create(&p, k, v, n + 1, err);
        *ctx = p;
    } else {
        tether_error_set(err, rc, TETHER_CLASS_PERMANENT, "pq: out of memory");
    }
    tether__free(k);
    tether__free(v);
    return rc;
}

static void pq_params_destroy(void *ctx) {
    tether__pq_params_destroy(ctx);
}

static const tether_driver pq_driver = {
    .name = "pq",
    .params_create = pq_params_create,
    .params_destroy = pq_params_destroy,
    .connect_start = pq_connect_start,
    .connect_poll = pq_connect_poll,
    .alive = pq_alive,
    .validate = pq_validate,
    .reset = pq_reset,
    .in_transaction = pq_in_transaction,
    .close = pq_close,
    .classify = pq_classify,
    .handle = pq_handle,
    .role = pq_role,
    .query_role = tether__pq_query_role,
    .resolve_names = 1,
    .lag = pq_lag,
};

const tether_driver *tether_driver_pq(void) {
    return &pq_driver;
}
