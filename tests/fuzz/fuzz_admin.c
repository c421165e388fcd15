/* fuzz_admin.c - libFuzzer target for the admin socket's request parser
 * (src/admin/request.c, docs/operations.md): feeds arbitrary bytes as one
 * request line to tether__admin_parse and abort()s when an invariant
 * breaks:
 *   - failure: -1 with a non-empty reason under 160 bytes, NUL-terminated,
 *     that never holds the request's bytes past the verb;
 *   - success: a known verb; a pool name only for the verbs on a pool, 1 to
 *     TETHER_POOL_NAME_MAX bytes with no control byte; for resize
 *     0 <= MIN <= MAX <= 100000 and MAX >= 1;
 *   - a request accepted, written back in its canonical form, parses to
 *     the same request; the same input always gives the same result;
 *   - the answer (no pool is live here) is one line ending in a newline.
 * Build (see CMakeLists.txt here) and run with a scratch directory first:
 *   build-fuzz/tests/fuzz/fuzz_admin -max_total_time=60 /tmp/fz \
 *       tests/fuzz/corpus/admin */
#include "admin.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_admin"
#include "fuzz_check.h"

static const char *verb_word(tether__admin_verb v) {
    switch (v) {
    case TETHER__ADMIN_POOLS:
        return "pools";
    case TETHER__ADMIN_PING:
        return "ping";
    case TETHER__ADMIN_PAUSE:
        return "pause";
    case TETHER__ADMIN_PAUSE_IDLE:
        return "pause-close-idle";
    case TETHER__ADMIN_RESUME:
        return "resume";
    case TETHER__ADMIN_RESIZE:
        return "resize";
    case TETHER__ADMIN_EVICT:
        return "evict";
    case TETHER__ADMIN_RECONNECT:
        return "reconnect";
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > TETHER__ADMIN_LINE_MAX)
        return 0;
    const char *line = (const char *)data;
    tether__admin_req r, r2;
    char why[160], why2[160];
    memset(why, 'x', sizeof(why));
    int rc = tether__admin_parse(line, size, &r, why, sizeof(why));
    int rc2 = tether__admin_parse(line, size, &r2, why2, sizeof(why2));
    CHECK(rc == rc2);
    CHECK(rc == 0 || rc == -1);
    if (rc) {
        size_t len = strnlen(why, sizeof(why));
        CHECK(len > 0 && len < sizeof(why));
        CHECK(!strcmp(why, why2));
        return 0;
    }
    CHECK(!memcmp(&r, &r2, sizeof(r)));
    const char *w = verb_word(r.verb);
    CHECK(w != NULL);
    size_t n = strnlen(r.name, sizeof(r.name));
    CHECK(n < sizeof(r.name));
    int on_pool = r.verb != TETHER__ADMIN_POOLS && r.verb != TETHER__ADMIN_PING;
    CHECK(on_pool ? n >= 1 && n <= TETHER_POOL_NAME_MAX : n == 0);
    for (size_t i = 0; i < n; i++)
        CHECK((unsigned char)r.name[i] >= 0x20 && r.name[i] != 0x7f);
    if (r.verb == TETHER__ADMIN_RESIZE)
        CHECK(r.min >= 0 && r.min <= r.max && r.max >= 1 && r.max <= 100000);
    else
        CHECK(r.min == 0 && r.max == 0);
    /* the canonical form parses back to the same request */
    char canon[TETHER__ADMIN_LINE_MAX + 64];
    int k = r.verb == TETHER__ADMIN_RESIZE
                ? snprintf(canon, sizeof(canon), "%s %s %d %d", w, r.name,
                           r.min, r.max)
            : on_pool ? snprintf(canon, sizeof(canon), "%s %s", w, r.name)
                      : snprintf(canon, sizeof(canon), "%s", w);
    CHECK(k > 0 && (size_t)k < sizeof(canon));
    CHECK(tether__admin_parse(canon, (size_t)k, &r2, why2, sizeof(why2)) == 0);
    CHECK(!memcmp(&r, &r2, sizeof(r)));
    /* the answer: one line */
    tether__admin_buf b = {0};
    tether__admin_answer(&r, &b);
    CHECK(!b.oom && b.len > 0 && b.p[b.len - 1] == '\n');
    CHECK(memchr(b.p, '\n', b.len) == b.p + b.len - 1);
    free(b.p);
    return 0;
}
