/* pq.h - the PostgreSQL driver's internals (libpq, non-blocking): the
 * parameters object that is the driver's ctx, the classification tables
 * (testable without a server) and a role query for the connector.
 * The public part (tether_driver_pq, tether_pq_error) is in tether.h. */
#ifndef TETHER__PQ_INTERNAL_H
#define TETHER__PQ_INTERNAL_H

#include "driver.h"
#include "tether.h"

#include <stddef.h>
#include <stdint.h>

/* ---- parameters (the driver's ctx) -------------------------------------- */

/* libpq connection keywords and values, copied; host, hostaddr and port come
 * from each endpoint instead. Immutable after create: share it between
 * threads freely. It must outlive the connections made with it. */
typedef struct tether__pq_params tether__pq_params;

/* tether__pq_params_create copies n keyword/value pairs (values may be NULL:
 * the pair is then skipped, as libpq does). host, hostaddr and port are
 * rejected with TETHER_EINVAL naming the key. */
int tether__pq_params_create(tether__pq_params **out, const char *const *keys,
                             const char *const *vals, int n, tether_error *err);

/* tether__pq_params_destroy frees p (NULL is accepted). */
void tether__pq_params_destroy(tether__pq_params *p);

/* tether__pq_params_get returns the value of key in p, or NULL. */
const char *tether__pq_params_get(const tether__pq_params *p, const char *key);

/* ---- classification -------------------------------------------------------
 */

/* tether__pq_classify_sqlstate maps a server SQLSTATE to a tether code and
 * class (see docs/pq-driver.md for the table) and returns the code. NULL or
 * a malformed state gives TETHER_EQUERY, permanent. */
int tether__pq_classify_sqlstate(const char *sqlstate, int *code,
                                 tether_class *cls);

/* tether__pq_classify_connect maps a failed connect's libpq message (the
 * server's FATAL text, possibly with its SQLSTATE in verbose form, or a
 * client-side failure) to a code, a class and an SQLSTATE (sqlstate gets 6
 * bytes, "" when none fits). Returns the code. *line and *line_len (both may
 * be NULL) receive the message line that decided (the first line when none
 * matched). */
int tether__pq_classify_connect(const char *msg, int *code, tether_class *cls,
                                char sqlstate[6], const char **line,
                                size_t *line_len);

/* tether__pq_connect_error fills err for a failed connect to label
 * ("host:port") from libpq's message: "connect to LABEL failed: LINE", with
 * libpq's "connection to server ... failed: " prefix and a verbose
 * SQLSTATE dropped, password scrubbed (password, when not NULL, is also
 * scrubbed literally). not_sent is 1. Returns the code. */
int tether__pq_connect_error(const char *label, const char *libpq_msg,
                             const char *password, tether_error *err);

/* tether__pq_scrub replaces, in place, what follows "password=" (up to a
 * blank, or the closing quote of a quoted value), the password of a URI's
 * user info ("://user:SECRET@"), a SQL "PASSWORD 'SECRET'" literal and, when
 * password is not NULL and at least 3 bytes long, every literal occurrence of
 * password, with "***". Returns how many secrets it replaced. */
int tether__pq_scrub(char *msg, size_t cap, const char *password);

/* ---- connections ----------------------------------------------------------
 */

/* tether__pq_query_role asks the server of conn (a pq driver connection, as
 * from connect_start) for its role with "SELECT pg_is_in_recovery()",
 * waiting at most timeout_ms (-1: unbounded). Returns TETHER_ROLE_PRIMARY
 * or TETHER_ROLE_STANDBY (and role() reports it from then on when the
 * server sends no in_hot_standby), or a negative error (TETHER_ETIMEDOUT:
 * the connection is left broken). */
int tether__pq_query_role(void *conn, int64_t timeout_ms, tether_error *err);

/* tether__pq_label returns conn's "host:port" label for messages. */
const char *tether__pq_label(const void *conn);

#endif
