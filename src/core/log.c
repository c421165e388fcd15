/* log.c - the process-wide log sink and the formatting helper. */
#include "internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static tether_log_fn sink_fn;
static void *sink_ctx;
static tether_log_level sink_min = TETHER_LOG_WARN;

void tether_set_log(tether_log_fn fn, void *ctx, tether_log_level min_level) {
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_ctx = ctx;
    sink_min = min_level;
    pthread_mutex_unlock(&sink_lock);
}

void tether__log_fork_prepare(void) {
    pthread_mutex_lock(&sink_lock);
}

void tether__log_fork_parent(void) {
    pthread_mutex_unlock(&sink_lock);
}

void tether__log_fork_child(void) {
    pthread_mutex_init(&sink_lock, NULL); /* held by the fork's thread */
}

void tether__log(tether_log_fn fn, void *ctx, tether_log_level level,
                 const char *fmt, ...) {
    tether_log_level min = TETHER_LOG_DEBUG;
    if (!fn) {
        pthread_mutex_lock(&sink_lock);
        fn = sink_fn;
        ctx = sink_ctx;
        min = sink_min;
        pthread_mutex_unlock(&sink_lock);
    }
    if (!fn || level < min)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fn(ctx, level, buf);
}
