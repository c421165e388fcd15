/* conninfo.h - parsing and normalizing libpq connection strings (key=value
 * and postgresql:// URI forms) into the registry's pool key, and a display
 * form with secrets masked for logs and metric names. Internal. */
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

/* tether__conninfo_known returns 1 when kw is a documented libpq keyword
 * (the only input text error messages ever quote). */
int tether__conninfo_known(const char *kw);

#endif
