/*
 * tether_pq.h - tether's PostgreSQL specifics: the libpq driver and the
 * mapping of libpq failures to tether errors. Include it after (or instead
 * of) tether.h in programs that use libpq; link with libtether and libpq
 * (pkg-config --libs libtether gives both).
 */
#ifndef TETHER_PQ_H
#define TETHER_PQ_H

#include <libpq-fe.h>

#include "tether.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tether_driver_pq returns the PostgreSQL driver (libpq; connects without
 * blocking). tether_lease_handle and tether_connector_connect give the
 * PGconn *, in libpq's usual blocking mode. */
TETHER_API const tether_driver *tether_driver_pq(void);

/* tether_pq_error fills err from a failed libpq call in a work function:
 * from pgresult (its SQLSTATE and primary message) when it carries an
 * SQLSTATE, else from the state of pgconn (may be NULL; a lost
 * connection is TETHER_EBROKEN, transient, not_sent 0). Classes follow the
 * SQLSTATE (docs/pq-driver.md): 40001/40P01 TETHER_ECONFLICT and 53300
 * TETHER_ETHROTTLED are transient or throttled, class 28 is permanent;
 * 25006 is TETHER_EREADONLY, on which tether_pool_run clears the pool and
 * retries (the work was refused, so it never ran): the retry connects
 * through the connector again, which finds the new primary when the
 * target is read-write or primary. Returns the code
 * (negative), or 0 when pgresult is a successful result. */
TETHER_API int tether_pq_error(const PGconn *pgconn, const PGresult *pgresult,
                               tether_error *err);

/* tether_pq_conn returns the PGconn of a lease from a PostgreSQL pool (the
 * same pointer as tether_lease_handle). */
TETHER_API PGconn *tether_pq_conn(const tether_lease *l);

#ifdef __cplusplus
}
#endif
#endif /* TETHER_PQ_H */
