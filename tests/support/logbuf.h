/* logbuf.h - a log hook for tests: logbuf_capture (a tether log function,
 * as tether_pool_opts.log takes) appends each message and a newline to a
 * logbuf, cut at its size, and counts the warnings. Header only. */
#ifndef TETHER_TEST_LOGBUF_H
#define TETHER_TEST_LOGBUF_H

#include <string.h>

#include "tether.h"

typedef struct logbuf {
    char text[8192];
    int warns; /* messages at TETHER_LOG_WARN */
} logbuf;

static inline void logbuf_capture(void *ctx, tether_log_level level,
                                  const char *msg) {
    logbuf *b = ctx;
    if (level == TETHER_LOG_WARN)
        b->warns++;
    size_t used = strlen(b->text);
    if (used + 2 >= sizeof(b->text))
        return;
    strncat(b->text, msg, sizeof(b->text) - used - 2);
    strcat(b->text, "\n");
}

#endif
