/* config.c - the preload's settings, read once from the environment
 * (docs/preload.md). A bad value turns the preload off with a message
 * naming the variable: a program that knows nothing of tether keeps
 * working as it did. */
#include "internal.h"
#include "preload.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static tp_config cfg;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

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

static void read_duration(const char *name, const char *def, char *out,
                          size_t cap) {
    const char *v = env(name);
    int64_t ms;
    if (!v)
        v = def;
    if (strlen(v) >= cap || tether_duration_parse(v, &ms) != 0)
        bad(name, v, "a duration such as 250ms, 30s or 5m");
    else
        snprintf(out, cap, "%s", v);
}

static void read_max(void) {
    const char *v = env("TETHER_PRELOAD_POOL_MAX");
    cfg.pool_max = 10;
    if (!v)
        return;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 1 || n > 100000)
        bad("TETHER_PRELOAD_POOL_MAX", v, "an integer from 1 to 100000");
    else
        cfg.pool_max = (int)n;
}

static void load(void) {
    const char *v = env("TETHER_PRELOAD");
    if (v && !is_off(v) && !is_on(v))
        bad("TETHER_PRELOAD", v, "on or off");
    else if (v && is_off(v))
        cfg.off = 1;
    v = env("TETHER_PRELOAD_LOG");
    cfg.log = v && is_on(v);
    read_max();
    read_duration("TETHER_PRELOAD_IDLE_TIMEOUT", "60s", cfg.idle,
                  sizeof(cfg.idle));
    read_duration("TETHER_PRELOAD_WAIT", "30s", cfg.wait, sizeof(cfg.wait));
    v = getenv("TETHER_PRELOAD_RESET_QUERY"); /* set and empty: none */
    cfg.reset = !v ? "DISCARD ALL" : !strcasecmp(v, "none") ? "" : v;
    if (strchr(cfg.reset, '\n'))
        bad("TETHER_PRELOAD_RESET_QUERY", "(a line break)", "one line");
    cfg.match = env("TETHER_PRELOAD_MATCH");
    if (!cfg.match)
        cfg.match = "*";
}

const tp_config *tp_config_get(void) {
    pthread_once(&cfg_once, load);
    return &cfg;
}

void tp_log(const char *fmt, ...) {
    if (!tp_config_get()->log)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "tether-preload: %s\n", line);
}
