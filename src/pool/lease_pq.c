/* lease_pq.c - tether_pq_conn (tether_pq.h): a lease's PGconn. Apart from
 * handle.c because it is the pool layer's one file that sees libpq: a build
 * without libpq (-DTETHER_PQ=OFF) leaves out every *_pq.c file
 * (docs/architecture.md, "The build enforces it"). */
#include "pool.h"
#include "tether_pq.h"

PGconn *tether_pq_conn(const tether_lease *l) {
    return tether_lease_handle(l);
}
