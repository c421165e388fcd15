/* storm.h - `tether sim storm`: the model's parameters and results, and the
 * world that runs real pools against the server model (storm_world.c). */
#ifndef TETHER_LAB_STORM_H
#define TETHER_LAB_STORM_H

#include "cli.h"

#include <stddef.h>
#include <stdint.h>

typedef struct storm_params {
    int clients;
    int64_t down_ms;
    int capacity;
    int64_t horizon_ms; /* the run stops there, connected or not */
    uint64_t seed;
} storm_params;

typedef struct storm_result {
    const char *strategy;
    long long total_attempts;      /* connects from t = 0 */
    long long peak_after_recovery; /* most connects in one second */
    double all_connected_s;        /* the last client's first success */
    int connected;
} storm_result;

/* storm_world_run runs p->clients pools, each made from conninfo on the sim
 * driver, through the outage; 0, or -1 with msg set. */
int storm_world_run(const storm_params *p, const char *conninfo,
                    storm_result *res, char *msg, size_t msglen);

#endif
