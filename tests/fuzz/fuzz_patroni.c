/* fuzz_patroni.c - libFuzzer target for the member-list parser of
 * discovery from Patroni (tether__patroni_parse, docs/patroni.md
 * "Discovery"): feeds arbitrary bytes as a GET /cluster answer (not
 * NUL-terminated: a copy of exactly the input) and abort()s when an
 * invariant breaks:
 *   - the same input always gives the same result, members and message;
 *   - failure: TETHER_ESPEC (or TETHER_ENOMEM) of class transient, no
 *     member count, a non-empty message under 200 characters;
 *   - success: 1 to the cap members, each with a non-empty name and host
 *     NUL-terminated within their fields, the host free of the host
 *     list's separators (comma, brackets, space, quote, =), a port in
 *     [1, 65535], a known role code, lag -1 or >= 0, flags 0 or 1;
 *   - a cap smaller than the count is refused, never cut short.
 * Build and run it like fuzz_conninfo (see CMakeLists.txt here):
 *   build-fuzz/tests/fuzz/fuzz_patroni -max_total_time=60 /tmp/fz \
 *       tests/fuzz/corpus/patroni */
#include "discovery.h"
#include "tether.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_patroni"
#include "fuzz_check.h"

#define CAP TETHER__PATRONI_MAX_MEMBERS

static tether__member a[CAP], b[CAP];

static void check_member(const tether__member *m) {
    CHECK(memchr(m->name, '\0', sizeof(m->name)) != NULL);
    CHECK(memchr(m->host, '\0', sizeof(m->host)) != NULL);
    CHECK(m->name[0] != '\0' && m->host[0] != '\0');
    CHECK(strcspn(m->host, ",[] \t'\"\\=") == strlen(m->host));
    for (const char *p = m->host; *p; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    CHECK(m->port >= 1 && m->port <= 65535);
    CHECK(m->role >= TETHER__PM_OTHER && m->role <= TETHER__PM_STANDBY_LEADER);
    CHECK(m->lag >= -1);
    CHECK(m->running == 0 || m->running == 1);
    CHECK(m->nofailover == 0 || m->nofailover == 1);
    CHECK(m->noloadbalance == 0 || m->noloadbalance == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size ? size : 1); /* exactly the input: no NUL */
    if (!text)
        return 0;
    if (size)
        memcpy(text, data, size);
    int n1 = -1, n2 = -1;
    tether_error e1 = {0}, e2 = {0};
    int r1 = tether__patroni_parse(text, size, a, CAP, &n1, &e1);
    int r2 = tether__patroni_parse(text, size, b, CAP, &n2, &e2);
    CHECK(r1 == r2 && n1 == n2);
    CHECK(strcmp(e1.message, e2.message) == 0);
    if (r1) {
        CHECK(r1 == TETHER_ESPEC || r1 == TETHER_ENOMEM);
        CHECK(e1.cls == TETHER_CLASS_TRANSIENT);
        CHECK(n1 == 0);
        size_t ml = strlen(e1.message);
        CHECK(ml > 0 && ml < 200);
    } else {
        CHECK(n1 >= 1 && n1 <= CAP);
        CHECK(memcmp(a, b, sizeof(a[0]) * (size_t)n1) == 0);
        for (int i = 0; i < n1; i++)
            check_member(&a[i]);
        if (n1 > 1) { /* a smaller cap: refused, never cut */
            int n3 = -1;
            tether_error e3 = {0};
            CHECK(tether__patroni_parse(text, size, b, n1 - 1, &n3, &e3) ==
                  TETHER_ESPEC);
            CHECK(strstr(e3.message, "members; at most") != NULL);
        }
    }
    free(text);
    return 0;
}
