/* cq.h - the non-blocking acquire (cq.c, docs/evloop.md), above the pool:
 * what the housekeeper's tick calls. */
#ifndef TETHER_CQ_H
#define TETHER_CQ_H

#include "pool.h"

/* tether__cq_expire completes queued non-blocking acquires past their
 * deadline with TETHER_ETIMEDOUT (the housekeeper's tick). */
void tether__cq_expire(tether_pool *p);

#endif
