/* fuzz_classify.c - libFuzzer target for the PostgreSQL error classifier
 * (src/drivers/pq.c): the SQLSTATE table (tether__pq_classify_sqlstate and
 * the driver's classify()), the reading of a failed connect's libpq message
 * (tether__pq_classify_connect, tether__pq_connect_error: the server's
 * FATAL text, a verbose SQLSTATE, client-side failures) and the password
 * scrubber (tether__pq_scrub). The input is "MESSAGE\0PASSWORD" (no NUL: no
 * password); it abort()s when an invariant breaks:
 *   - codes are ones the table uses, classes are set, SQLSTATEs are "" or
 *     five [0-9A-Z] characters; a malformed state is TETHER_EQUERY;
 *   - the deciding line lies within the message and holds no newline;
 *   - a connect error reads "connect to LABEL failed: ...", fits, is
 *     not_sent, agrees with classify_connect and never holds a distinctive
 *     password (3+ bytes, no '*'), whatever the message around it;
 *   - scrubbing, into any capacity, stays NUL-terminated within it and
 *     leaves no such password behind.
 * Build and run it like fuzz_conninfo (see CMakeLists.txt here):
 *   build-fuzz/tests/fuzz/fuzz_classify -max_total_time=60 /tmp/fz \
 *       tests/fuzz/corpus/classify */
#include "driver.h"
#include "pq.h"
#include "tether.h"
#include "tether_pq.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_classify"
#include "fuzz_check.h"

#define LABEL "db1.example:5432"
#define PREFIX "connect to " LABEL " failed: "

static int known_code(int c) {
    switch (c) {
    case TETHER_ECONNECT:
    case TETHER_EAUTH:
    case TETHER_ETHROTTLED:
    case TETHER_EBROKEN:
    case TETHER_EREADONLY:
    case TETHER_ECONFLICT:
    case TETHER_EQUERY:
    case TETHER_ENOHOST:
    case TETHER_ERESOLVE:
    case TETHER_EIO:
    case TETHER_ESPEC:
    case TETHER_ENOMEM:
    case TETHER_ETIMEDOUT: /* 57014: a statement cancelled or timed out */
        return 1;
    default:
        return 0;
    }
}

static int known_class(tether_class k) {
    return k == TETHER_CLASS_TRANSIENT || k == TETHER_CLASS_THROTTLED ||
           k == TETHER_CLASS_PERMANENT;
}

static int valid_state(const char *s) {
    if (strlen(s) != 5)
        return 0;
    for (int i = 0; i < 5; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z')))
            return 0;
    return 1;
}

/* A password the scrubber must hide wherever it is: 3+ bytes, no '*' (the
 * stars could otherwise rebuild it) and not within the fixed text. */
static int hideable(const char *pw) {
    return pw && strlen(pw) >= 3 && !strchr(pw, '*') && !strstr(PREFIX, pw);
}

/* sqlstate: msg's first five bytes (or fewer) as an SQLSTATE. */
static void sqlstate(const char *msg) {
    char st[6];
    snprintf(st, sizeof(st), "%s", msg);
    int code = 1;
    tether_class cls = TETHER_CLASS_NONE;
    int rc = tether__pq_classify_sqlstate(st, &code, &cls);
    CHECK(rc == code && known_code(code) && known_class(cls));
    if (!valid_state(st))
        CHECK(code == TETHER_EQUERY && cls == TETHER_CLASS_PERMANENT);
    CHECK(tether__pq_classify_sqlstate(st, NULL, NULL) == rc);
    /* The driver's classify() reads err->sqlstate the same way. */
    tether_error e;
    memset(&e, 0, sizeof(e));
    e.code = TETHER_EQUERY;
    memcpy(e.sqlstate, st, sizeof(st));
    tether_driver_pq()->classify(NULL, &e);
    CHECK(*st ? e.cls == cls : known_class(e.cls));
}

/* connect_msg: msg as libpq's text for a failed connect. */
static void connect_msg(const char *msg, const char *pw) {
    int code = 1;
    tether_class cls = TETHER_CLASS_NONE;
    char st[6];
    memset(st, 'x', sizeof(st));
    const char *line = NULL;
    size_t len = 99;
    int rc = tether__pq_classify_connect(msg, &code, &cls, st, &line, &len);
    CHECK(rc == code && known_code(code) && known_class(cls));
    CHECK(memchr(st, '\0', sizeof(st)) && (!*st || valid_state(st)));
    CHECK(line >= msg && line + len <= msg + strlen(msg));
    CHECK(memchr(line, '\n', len) == NULL);
    CHECK(tether__pq_classify_connect(msg, NULL, NULL, NULL, NULL, NULL) == rc);

    tether_error e;
    memset(&e, 0x5a, sizeof(e));
    CHECK(tether__pq_connect_error(LABEL, msg, pw, &e) == rc);
    CHECK(e.code == rc && e.cls == cls && e.not_sent == 1);
    CHECK(strcmp(e.sqlstate, st) == 0);
    size_t n = strnlen(e.message, sizeof(e.message));
    CHECK(n < sizeof(e.message));
    if (!pw || strlen(pw) < 3) { /* else it may straddle the prefix */
        CHECK(strncmp(e.message, PREFIX, strlen(PREFIX)) == 0);
        CHECK(n > strlen(PREFIX));
    }
    if (hideable(pw))
        CHECK(strstr(e.message, pw) == NULL);
    CHECK(tether__pq_connect_error(NULL, msg, pw, NULL) == rc);
}

/* scrub: msg scrubbed into a buffer of each of a few capacities. */
static void scrub(const char *msg, const char *pw) {
    size_t n = strlen(msg);
    size_t caps[] = {n + 1, n + 2, n + 4, TETHER_MSG_MAX};
    for (size_t i = 0; i < sizeof(caps) / sizeof(*caps); i++) {
        size_t cap = caps[i];
        if (cap <= n) /* the caller's text always fits its buffer */
            continue;
        char *buf = malloc(cap);
        CHECK(buf != NULL);
        memcpy(buf, msg, n + 1);
        int count = tether__pq_scrub(buf, cap, pw);
        CHECK(count >= 0);
        CHECK(memchr(buf, '\0', cap) != NULL);
        if (hideable(pw))
            CHECK(strstr(buf, pw) == NULL);
        if (count == 0)
            CHECK(strcmp(buf, msg) == 0);
        free(buf);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 2);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = s[size + 1] = '\0';
    const char *msg = s;
    size_t mlen = strlen(s);
    const char *pw = mlen < size ? s + mlen + 1 : NULL;
    sqlstate(msg);
    connect_msg(msg, pw);
    scrub(msg, pw);
    free(s);
    return 0;
}
