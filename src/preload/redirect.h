/* redirect.h - included first (-include) into the pq driver when it is
 * compiled into libtether-preload: the driver's libpq connect and close
 * calls go to libpq's real functions (real.c), never back into the
 * interposed ones and the pool. */
#ifndef TETHER_PRELOAD_REDIRECT_H
#define TETHER_PRELOAD_REDIRECT_H
#define PQconnectStartParams tether__preload_real_PQconnectStartParams
#define PQconnectPoll tether__preload_real_PQconnectPoll
#define PQfinish tether__preload_real_PQfinish
#endif
