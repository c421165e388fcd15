#!/usr/bin/env bash
# pgbench_figures.sh - the figures of docs/preload.md ("Figures: pgbench"):
# pgbench -S with a connect per transaction (-C) and with persistent
# connections, 8 clients, plain libpq and under libtether-preload.so with
# TETHER_PRELOAD_MAX_AGE at 1 s, 10 s (the default) and 1 h, and (when
# given) an older build of the preload for comparison. For each run: tps
# and the sessions the server started (pg_stat_database.sessions).
#
#   scripts/pg-cluster run -- bash tests/preload/pgbench_figures.sh PRELOAD_SO [SECONDS [OLD_SO [ROUNDS]]]
#
# ROUNDS (default 3) rounds, each running every variant once, so that the
# load of a shared machine spreads over all of them.
set -euo pipefail
export LC_ALL=C
so=$(readlink -f "${1:?usage: pgbench_figures.sh PRELOAD_SO [SECONDS [OLD_SO]]}")
secs=${2:-10}
old=${3:+$(readlink -f "$3")}
rounds=${4:-3}
export PGHOST=$PGC_HOST PGPORT=$PRIMARY_PORT PGUSER=$PGC_USER PGPASSWORD=$PGC_PASSWORD PGDATABASE=$PGC_DB
admin="host=$PGC_SOCK port=$PRIMARY_PORT user=$PGC_SUPERUSER dbname=postgres"
pgbench -i -q -s 2 >/dev/null 2>&1
sessions() { "$PGC_BIN/psql" "$admin" -X -At -c "SELECT sessions FROM pg_stat_database WHERE datname = '$PGC_DB'"; }
one() { # LABEL ENV... -- PGBENCH ARGS
  local label=$1 envs=() s0 s1 out
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  s0=$(sessions)
  out=$(env "${envs[@]}" pgbench -n -S -c 8 -j 2 -T "$secs" "$@" 2>&1)
  s1=$(sessions)
  printf '%-32s %-4s tps=%-9s sessions=%s\n' "$label" "${1:-}" \
    "$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1 | cut -d. -f1)" "$((s1 - s0))"
}
echo "pgbench_figures: $(nproc) cpus, $("$PGC_BIN/postgres" --version), ${secs}s per run, 8 clients, -S"
for round in $(seq "$rounds"); do
echo "round $round"
for mode in -C ""; do
  one plain -- $mode
  one "preload max_age=1s" LD_PRELOAD="$so" TETHER_PRELOAD_MAX_AGE=1s -- $mode
  one "preload max_age=10s (default)" LD_PRELOAD="$so" -- $mode
  one "preload max_age=1h" LD_PRELOAD="$so" TETHER_PRELOAD_MAX_AGE=1h -- $mode
  [ -z "$old" ] || one "preload before (no check)" LD_PRELOAD="$old" -- $mode
done
done
