/* conninfo.h - the connection-string layer: parsing libpq connection
 * strings (key=value and postgresql:// URI forms), telling which layer reads
 * each keyword (libpq, the connector, the pool), typed setters for tether's
 * keywords, the registry's normalized key and a display form with secrets
 * masked for logs and metric names. Below the connector and the pool;
 * depends on core only. Internal. */
#ifndef TETHER_CONNINFO_H
#define TETHER_CONNINFO_H

#include "internal.h"

#include <stddef.h>

/* The longest connection string accepted, in bytes (longer: TETHER_ESPEC). */
#define TETHER__CONNINFO_MAX 65536

/* What the display form shows instead of a secret value. */
#define TETHER__CONNINFO_MASK "***"

/* One keyword and its decoded value. */
typedef struct tether__kv {
    const char *key;
    const char *val;
    size_t seq; /* order of appearance: the last one of a key wins */
} tether__kv;

/* A parsed connection string: one pair per keyword, sorted by keyword
 * (strcmp order). The strings live in arena. */
typedef struct tether__conninfo {
    tether__kv *kv;
    size_t n;
    size_t cap; /* allocated pairs */
    char *arena;
    size_t used, size; /* arena bytes used / allocated */
} tether__conninfo;

/* tether__conninfo_parse parses s (key=value or URI form) into ci, which the
 * caller frees with tether__conninfo_free even on failure. Returns 0,
 * TETHER_ESPEC (err names a byte position and at most a well-known keyword,
 * never a value), TETHER_EINVAL (NULL s) or TETHER_ENOMEM. */
int tether__conninfo_parse(const char *s, tether__conninfo *ci,
                           tether_error *err);

/* tether__conninfo_free releases what ci holds (ci itself is the caller's). */
void tether__conninfo_free(tether__conninfo *ci);

/* tether__conninfo_get returns the value of key in ci, or NULL. */
const char *tether__conninfo_get(const tether__conninfo *ci, const char *key);

/* tether__conninfo_format writes ci as "k1='v1' k2='v2'" (sorted, ' and \
 * escaped) into buf like snprintf (buf may be NULL when cap is 0) and
 * returns the full length. masked != 0 writes the display form: the value
 * of every secret keyword (tether__conninfo_secret) is TETHER__CONNINFO_MASK.
 */
size_t tether__conninfo_format(const tether__conninfo *ci, int masked,
                               char *buf, size_t cap);

/* tether__conninfo_dup returns a malloc'd tether__conninfo_format of ci
 * (masked or not), or NULL when out of memory. */
char *tether__conninfo_dup(const tether__conninfo *ci, int masked);

/* tether__conninfo_keys parses s and returns malloc'd strings: *key the
 * canonical form (the registry key), *display the masked form. Either
 * pointer may be NULL when not wanted. Returns 0 or a negative error (then
 * both outputs are NULL). */
int tether__conninfo_keys(const char *s, char **key, char **display,
                          tether_error *err);

/* tether__conninfo_secret returns 1 when the display form masks the value
 * of key val: password and sslpassword always, dbname when it holds a
 * nested connection string (libpq may expand one, password included). */
int tether__conninfo_secret(const char *key, const char *val);

/* What a pool name must be (tether_pool_opts.name, tether_pool_name). */
#define TETHER__NAME_WANT "want 1 to 128 bytes, no control characters"

/* tether__conninfo_name_ok returns 1 when name (NULL: no) is a valid pool
 * name: 1 to TETHER_POOL_NAME_MAX bytes, no control characters. */
int tether__conninfo_name_ok(const char *name);

/* tether__conninfo_name_check returns 0 when keyword key's value name is a
 * valid pool name, else TETHER_ESPEC naming key and the value. */
int tether__conninfo_name_check(const char *key, const char *name,
                                tether_error *err);

/* tether__conninfo_pool_name stores in *out a malloc'd name for a pool of
 * ci: tether_pool_name's value (checked as above), else
 * "[user@]host[:port][/dbname]" from the first host (or hostaddr) and the
 * first port (a v6 literal in brackets; a dbname that is a connection
 * string left out; cut to TETHER_POOL_NAME_MAX bytes), or NULL when ci
 * names no host: the pool's own default then. Never holds a password.
 * Returns 0, TETHER_ESPEC or TETHER_ENOMEM. */
int tether__conninfo_pool_name(const tether__conninfo *ci, char **out,
                               tether_error *err);

/* Which layer reads a keyword. */
typedef enum tether__kw_kind {
    TETHER__KW_UNKNOWN = 0, /* neither libpq's nor tether's */
    TETHER__KW_LIBPQ,       /* passed on to the driver as it is */
    TETHER__KW_ENDPOINT,    /* host, hostaddr, port: the connector's list */
    TETHER__KW_CONNECTOR,   /* how to connect (tether_strategy, ...) */
    TETHER__KW_POOL         /* how to pool (tether_pool_max, ...) */
} tether__kw_kind;

/* tether__conninfo_kind returns the layer that reads kw: the kind of the
 * registered table that holds it (tether's tables before the drivers'). */
tether__kw_kind tether__conninfo_kind(const char *kw);

/* tether__conninfo_keyword returns the i-th keyword of the tables of the
 * given kind (ENDPOINT, CONNECTOR or POOL), or NULL past the end. */
const char *tether__conninfo_keyword(tether__kw_kind kind, size_t i);

/* tether__conninfo_known returns 1 when kw is a keyword of the driver's
 * registered list (TETHER__KW_LIBPQ: the linked libpq's own). */
int tether__conninfo_known(const char *kw);

/* tether__conninfo_libpq_secret returns 1 when the driver's list marks kw
 * as a secret (libpq's dispchar "*": password, sslpassword, ...). */
int tether__conninfo_libpq_secret(const char *kw);

/* How a keyword's value is stored (tether__keydef.type). */
enum {
    TETHER__KD_INT = 0, /* int in [lo, hi] */
    TETHER__KD_I64,     /* int64_t in [lo, hi] */
    TETHER__KD_MS,      /* int64_t ms, a duration with a unit */
    TETHER__KD_MS_INF,  /* the same; "0", "inf", "infinite": -1 */
    TETHER__KD_BOOL,    /* int: on/true/1 or off/false/0 */
    TETHER__KD_ENUM,    /* int: the index of the value in names */
    TETHER__KD_STR,     /* char *, malloc'd (the previous value freed) */
    TETHER__KD_FN,      /* fn parses and stores */
    TETHER__KD_OWN      /* read by the layer's own code (the host list) */
};

/* One keyword a layer maps into its own structure (at offset off), with a
 * one-line description (docs/conninfo.md has the whole story). A table ends
 * with an entry whose name is NULL. */
typedef struct tether__keydef {
    const char *name;
    const char *desc;
    int type;
    size_t off;
    int64_t lo, hi;           /* INT, I64 */
    const char *const *names; /* ENUM, NULL-terminated */
    int (*fn)(void *base, const char *key, const char *val,
              tether_error *err); /* FN */
} tether__keydef;

/* Table entries: a plain value, an integer range, an enum, a function, a
 * keyword the layer reads itself; each with its description d. */
#define TETHER__KD(n, t, o, d)                                                 \
    { .name = (n), .desc = (d), .type = (t), .off = (o) }
#define TETHER__KD_RANGE(n, t, o, l, h, d)                                     \
    { .name = (n), .desc = (d), .type = (t), .off = (o), .lo = (l), .hi = (h) }
#define TETHER__KD_NAMES(n, o, v, d)                                           \
    {                                                                          \
        .name = (n), .desc = (d), .type = TETHER__KD_ENUM, .off = (o),         \
        .names = (v)                                                           \
    }
#define TETHER__KD_CALL(n, f, d)                                               \
    { .name = (n), .desc = (d), .type = TETHER__KD_FN, .fn = (f) }
#define TETHER__KD_SELF(n, d)                                                  \
    { .name = (n), .desc = (d), .type = TETHER__KD_OWN }
#define TETHER__KD_END                                                         \
    { .name = NULL }

/* tether__keydefs_apply stores val for key into base through the table
 * defs. Returns 0, 1 when key is not in defs (or is TETHER__KD_OWN), or a
 * negative error (TETHER_ESPEC naming the keyword and the value). */
int tether__keydefs_apply(const tether__keydef *defs, void *base,
                          const char *key, const char *val, tether_error *err);

/* tether__conninfo_bad_value reports TETHER_ESPEC: "bad value for key"
 * with the value (never call it for a secret) and what is wanted. */
int tether__conninfo_bad_value(const char *key, const char *val,
                               const char *want, tether_error *err);

/* ---- keyword tables (keys.c) ---------------------------------------------
 *
 * Each layer that reads keywords registers its table here once, at load
 * (a constructor next to the table): the connector its endpoint and
 * connector keywords, the pool its own, the pq driver libpq's. Every
 * keyword is defined in one place, its layer's table; which layer reads a
 * keyword, the list errors name, docs/conninfo.md (checked by the test
 * doc.conninfo) and `tether --help` all come from these tables. */

/* One registered table: fixed keywords (defs), or a driver's list that is
 * not kept by hand (libpq's, asked of the linked libpq) through at and
 * find. env, when set, adds to *env what the environment gives for the
 * keywords a string leaves out (libpq's PG* variables that are set). */
typedef struct tether__kwtable {
    const char *layer; /* "connector", "pool", "libpq" */
    tether__kw_kind kind;
    const tether__keydef *defs;                     /* or NULL: */
    const char *(*at)(size_t i, const char **desc); /* NULL past the end */
    int (*find)(const char *kw, int *secret);       /* 1 when known */
    int (*env)(tether__conninfo *env, tether_error *err);
} tether__kwtable;

/* The most tables that can be registered. */
#define TETHER__KWTABLES_MAX 8

/* tether__keywords_register adds t (static, kept for the life of the
 * process; registering it again does nothing). Returns 0, or -1 when
 * TETHER__KWTABLES_MAX tables are registered already. */
int tether__keywords_register(const tether__kwtable *t);

/* One keyword as tether__keyword_at gives it. */
typedef struct tether__kwinfo {
    const char *name;
    const char *layer; /* its table's */
    const char *desc;  /* one line */
    tether__kw_kind kind;
} tether__kwinfo;

/* tether__keyword_at stores in *out the i-th of every registered keyword:
 * tether's (endpoint, connector, pool) in table order, then the drivers'
 * that no tether table claims. Returns 0, or -1 past the end. For `tether
 * --help` and the docs test. */
int tether__keyword_at(size_t i, tether__kwinfo *out);

/* tether__keyword_near returns the keyword of tether's tables (endpoint,
 * connector, pool) closest to kw, when at most two edits away (a typo:
 * tether_pool_mx), else NULL. For "did you mean" in errors. */
const char *tether__keyword_near(const char *kw);

/* tether__conninfo_env fills env (freed by the caller, on failure too)
 * with what the registered drivers take from the environment for keywords
 * a string leaves out (libpq: its PG* variables that are set). Returns 0
 * or TETHER_ENOMEM. */
int tether__conninfo_env(tether__conninfo *env, tether_error *err);

/* ---- editing a parsed set (conninfo.c) ---------------------------------- */

/* tether__conninfo_copy makes dst (freed by the caller, on failure too) a
 * copy of src. Returns 0 or TETHER_ENOMEM. */
int tether__conninfo_copy(tether__conninfo *dst, const tether__conninfo *src,
                          tether_error *err);

/* tether__conninfo_set sets key to val in ci (replacing its value, or
 * adding the pair in keyword order). key must be a valid keyword. Returns
 * 0 or TETHER_ENOMEM. */
int tether__conninfo_set(tether__conninfo *ci, const char *key, const char *val,
                         tether_error *err);

/* tether__conninfo_wipe overwrites ci's strings (passwords included) with
 * zeros, then frees it. */
void tether__conninfo_wipe(tether__conninfo *ci);

#endif
