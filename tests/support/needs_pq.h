/* needs_pq.h - for cmocka tests that run in the build without libpq
 * (-DTETHER_PQ=OFF, docs/architecture.md) too: NEEDS_PQ_KEYWORDS() skips a
 * test whose connection strings hold libpq's keywords (user, dbname,
 * password, sslmode, ...), which only the pq driver's keyword table makes
 * known. Such a test runs in every build with the pq driver. */
#ifndef TETHER_TEST_NEEDS_PQ_H
#define TETHER_TEST_NEEDS_PQ_H

#ifdef TETHER_HAVE_PQ
#define NEEDS_PQ_KEYWORDS() ((void)0)
#else
#define NEEDS_PQ_KEYWORDS() skip()
#endif

#endif
