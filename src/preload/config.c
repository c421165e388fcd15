/* config.c - the preload's settings, read once from the environment
 * (docs/preload.md, "Configuration"). A bad value, an empty one included,
 * turns the preload off with a message naming the variable and the value:
 * a program that knows nothing of tether keeps working as it did, and
 * nothing is ever taken silently for a default. */
#include "internal.h"
#include "preload.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static tether__preload_config cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static int bad(const char *name, const char *val, const char *want) {
    fprintf(stderr,
            "tether-preload: bad value for %s: '%s' (want %s); the preload is "
            "off, connections are not pooled\n",
            name, val, want);
    cfg.off = 1;
    return -1;
}

static int is_off(const char *v) {
    return !strcasecmp(v, "off") || !strcasecmp(v, "0") ||
           !strcasecmp(v, "false") || !strcasecmp(v, "no");
}

static int is_on(const char *v) {
    return !strcasecmp(v, "on") || !strcasecmp(v, "1") ||
           !strcasecmp(v, "true") || !strcasecmp(v, "yes");
}

/* read_switch: an on/off variable; unset gives def. */
static int read_switch(const char *name, int def) {
    const char *v = getenv(name);
    if (!v)
        return def;
    if (is_on(v) || is_off(v))
        return is_on(v);
    bad(name, v, "on or off");
    return def;
}

/* read_duration: a duration above 0 (tether_duration_parse), kept as text
 * for the pool's keywords and in ms. */
static void read_duration(const char *name, const char *def, char *out,
                          size_t cap, int64_t *ms) {
    const char *v = getenv(name);
    if (!v)
        v = def;
    if (strlen(v) >= cap || tether_duration_parse(v, ms) != 0 || *ms <= 0) {
        bad(name, v, "a duration above 0 such as 250ms, 30s or 5m");
        tether_duration_parse(def, ms);
        v = def;
    }
    snprintf(out, cap, "%s", v);
}

/* read_int: an integer in [lo, hi]; unset gives def. */
static int read_int(const char *name, int def, long lo, long hi) {
    const char *v = getenv(name);
    if (!v)
        return def;
    char *end, want[64];
    long n = strtol(v, &end, 10);
    if (*v && !*end && n >= lo && n <= hi)
        return (int)n;
    snprintf(want, sizeof(want), "an integer from %ld to %ld", lo, hi);
    bad(name, v, want);
    return def;
}

static void read_match(void) {
    cfg.match = getenv("TETHER_PRELOAD_MATCH");
    if (!cfg.match)
        cfg.match = "*";
    else if (!*cfg.match)
        bad("TETHER_PRELOAD_MATCH", "",
            "shell patterns separated by |; unset to pool every string");
    else if (strlen(cfg.match) >= 1024)
        bad("TETHER_PRELOAD_MATCH", "(longer than 1023 bytes)",
            "a shorter list of patterns");
}

static void load(void) {
    cfg.off = !read_switch("TETHER_PRELOAD", 1);
    cfg.log = read_switch("TETHER_PRELOAD_LOG", 0);
    int keep = read_switch("TETHER_PRELOAD_KEEP_PREPARED", 1);
    cfg.reset_always = read_switch("TETHER_PRELOAD_RESET_ALWAYS", 0);
    cfg.pool_max = read_int("TETHER_PRELOAD_POOL_MAX", 10, 1, 100000);
    cfg.idle_max = read_int("TETHER_PRELOAD_IDLE_MAX", 10, 1, 100000);
    int64_t ms;
    read_duration("TETHER_PRELOAD_IDLE_TIMEOUT", "1s", cfg.idle,
                  sizeof(cfg.idle), &ms);
    read_duration("TETHER_PRELOAD_WAIT", "30s", cfg.wait, sizeof(cfg.wait),
                  &ms);
    read_duration("TETHER_PRELOAD_MAX_AGE", "10s", cfg.max_age,
                  sizeof(cfg.max_age), &cfg.max_age_ms);
    read_duration("TETHER_PRELOAD_RECHECK", "100ms", cfg.recheck,
                  sizeof(cfg.recheck), &cfg.recheck_ms);
    const char *v = getenv("TETHER_PRELOAD_RESET_QUERY"); /* empty: none */
    /* DISCARD ALL, unless the program's prepared statements are kept
     * (docs/preload.md, "Prepared statements survive the give-back"): a
     * reset the user names keeps none. */
    cfg.keep_prepared = keep && !v;
    cfg.reset = cfg.keep_prepared        ? TETHER__PRELOAD_RESET_KEEP
                : !v                     ? "DISCARD ALL"
                : !strcasecmp(v, "none") ? ""
                                         : v;
    if (strchr(cfg.reset, '\n'))
        bad("TETHER_PRELOAD_RESET_QUERY", "(a line break)", "one line");
    read_match();
}

const tether__preload_config *tether__preload_config_get(void) {
    pthread_once(&cfg_once, load);
    return &cfg;
}

void tether__preload_log(const char *fmt, ...) {
    if (!tether__preload_config_get()->log)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "tether-preload: %s\n", line);
}
