/* fuzz_check.h - what every fuzz target shares: its libFuzzer entry point
 * and CHECK, which aborts (a finding) when an invariant fails, naming the
 * target (FUZZ_NAME, defined before the include) and the line. */
#ifndef TETHER_FUZZ_CHECK_H
#define TETHER_FUZZ_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s: invariant failed: %s (line %d)\n", FUZZ_NAME, \
                    #cond, __LINE__);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

#endif
