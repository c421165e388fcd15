#!/usr/bin/env bash
# test_programs.sh - real programs nobody here wrote, run plain and under
# libtether-preload.so against a scratch server: the same results, and
# their wall time under the preload beside the plain one (docs/preload.md,
# "Real programs").
#
#   scripts/pg-cluster run -- bash tests/preload/test_programs.sh PRELOAD_SO
#
# The programs: psycopg2's own test suite (Debian's python3-psycopg2 with
# the upstream tests of the same version, vendored in tests/preload/psycopg2
# with their licence), vacuumdb -j 12, pgbench -c 12 (and -C, connect per
# transaction, as a figure), and psql scripts that \c across two users.
# Each short program runs 3 to 7 times each way, interleaved; the best wall time
# of each way is reported ("measure: NAME ... ratio=R"); above 1.2x, one more
# series is run and the best of both reported. A wall-time ratio is a
# figure, not a verdict, on a shared machine: it fails the test only when
# TETHER_PROGRAMS_RATIO is set (a limit, as in "1.2").
set -euo pipefail
export LC_ALL=C
so=$(readlink -f "${1:?usage: test_programs.sh PRELOAD_SO}")
here=$(cd "$(dirname "$0")" && pwd)
ratio_max=${TETHER_PROGRAMS_RATIO:-1.2}
ratio_gate=${TETHER_PROGRAMS_RATIO:+1}
only=${TETHER_PROGRAMS_ONLY:-pgbench vacuumdb psql psycopg2} # a subset, for a quick look
want() { case " $only " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for v in PGC_BIN PRIMARY_PORT PGC_HOST PGC_USER PGC_PASSWORD PGC_DB PGC_SOCK PGC_SUPERUSER; do
  [ -n "${!v:-}" ] || { echo "FAIL: $v is not set: run through scripts/pg-cluster run" >&2; exit 1; }
done
work=$(mktemp -d /tmp/tether-programs.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
check() { echo "check: $*"; }
export PGHOST=$PGC_HOST PGPORT=$PRIMARY_PORT PGUSER=$PGC_USER PGPASSWORD=$PGC_PASSWORD PGDATABASE=$PGC_DB
admin="host=$PGC_SOCK port=$PRIMARY_PORT user=$PGC_SUPERUSER dbname=postgres"
"$PGC_BIN/psql" "$admin" -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE ROLE tether__preload_other LOGIN PASSWORD 'tp-other-pw';
GRANT CREATE ON DATABASE $PGC_DB TO tether__preload_other;
SQL

# timed NAME CMD...: CMD's output (stdout and stderr) in $work/NAME, its
# wall time in $work/NAME.s; a non-zero exit is a failure.
timed() {
  local name=$1 t0 t1
  shift
  t0=$(date +%s%N)
  if ! "$@" >"$work/$name" 2>&1; then
    tail -20 "$work/$name"
    fail "$name exited non-zero"
  fi
  t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) / 1e9 }' >"$work/$name.s"
}
pre() { env LD_PRELOAD="$so" "$@"; }
best() { sort -n "$@" | head -1; }
# compare NAME RUNS FILTER CMD...: RUNS interleaved runs each way; FILTER
# (a command reading the output) gives what must be the same. The best wall
# time of each way is compared; when the preload's is above the limit, one
# more series of RUNS each way is run (a shared machine's load comes in
# bursts) and the best of all is compared.
series() { # NAME RUNS FROM CMD...
  local name=$1 runs=$2 from=$3 i
  shift 3
  for i in $(seq "$from" $((from + runs - 1))); do
    timed "$name.plain.$i" "$@"
    timed "$name.preload.$i" pre "$@"
  done
}
ratio_ok() { awk -v p="$1" -v q="$2" -v r="$ratio_max" 'BEGIN { exit !(q <= p * r) }'; }
compare() {
  local name=$1 runs=$2 filter=$3 p q
  shift 3
  series "$name" "$runs" 1 "$@"
  p=$(best "$work/$name".plain.*.s)
  q=$(best "$work/$name".preload.*.s)
  if ! ratio_ok "$p" "$q"; then
    echo "note: $name: ${q}s under the preload, ${p}s plain: one more series"
    series "$name" "$runs" $((runs + 1)) "$@"
    p=$(best "$work/$name".plain.*.s)
    q=$(best "$work/$name".preload.*.s)
  fi
  if [ "$($filter <"$work/$name.plain.1")" = "$($filter <"$work/$name.preload.1")" ] &&
     [ -n "$($filter <"$work/$name.plain.1")" ]; then
    check "$name: the same results plain and under the preload"
  else
    fail "$name: results differ: $(diff <($filter <"$work/$name.plain.1") <($filter <"$work/$name.preload.1") | head -8 | tr '\n' ' ')"
    grep -E -A12 '^(FAIL|ERROR): ' "$work/$name.preload.1" | head -60 || true
  fi
  echo "measure: $name plain_s=$p preload_s=$q ratio=$(awk -v p="$p" -v q="$q" 'BEGIN { printf "%.2f", q / p }')"
  if ratio_ok "$p" "$q"; then
    echo "note: $name: ${q}s under the preload, ${p}s plain (at most ${ratio_max}x)"
  elif [ -n "$ratio_gate" ]; then
    fail "$name: ${q}s under the preload, ${p}s plain (more than ${ratio_max}x)"
  else
    echo "note: $name: ${q}s under the preload, ${p}s plain (more than ${ratio_max}x; load $(cut -d' ' -f1 /proc/loadavg); a figure, not asserted)"
  fi
}

# ---- pgbench ----------------------------------------------------------------
"$PGC_BIN/../bin/pgbench" -i -q -s 2 >/dev/null 2>&1 || pgbench -i -q -s 2 >/dev/null 2>&1 ||
  fail "pgbench -i"
pgb=$(command -v pgbench)
if want pgbench; then
pgbench_filter() { grep -E 'number of (transactions actually processed|failed)|number of clients|^transaction type'; }
compare pgbench_c12 5 pgbench_filter "$pgb" -n -S -c 12 -j 2 -t 6000
compare pgbench_C8 1 pgbench_filter "$pgb" -n -S -C -c 8 -j 2 -t 100
for f in "$work"/pgbench_*.[0-9]; do
  echo "measure: $(basename "$f") $(grep -E '^tps' "$f" | head -1)"
done
fi

# ---- vacuumdb -j 12 -----------------------------------------------------------
if want vacuumdb; then
vac_filter() { grep -v '^$' | sort; }
compare vacuumdb_j12 5 vac_filter "$PGC_BIN/vacuumdb" -j 12 -z -d "$PGC_DB"
fi

# ---- psql \c across two users -------------------------------------------------
if want psql; then
# The passwords come from a password file (both users) and, for the last
# connects, from PGPASSWORD set inside psql with \setenv.
cat >"$work/two_users.sql" <<SQL
SELECT current_user, current_database();
CREATE TEMP TABLE t AS SELECT 1 AS x;
SET work_mem = '2345kB';
\\c - tether__preload_other
SELECT current_user, to_regclass('pg_temp.t') IS NULL AS no_temp, current_setting('work_mem');
\\c - $PGC_USER
SELECT current_user, current_setting('work_mem');
\\setenv PGPASSWORD tp-other-pw
\\c -reuse-previous=off "host=$PGC_HOST port=$PRIMARY_PORT dbname=$PGC_DB user=tether__preload_other"
SELECT current_user;
\\setenv PGPASSWORD $PGC_PASSWORD
\\c -reuse-previous=off "host=$PGC_HOST port=$PRIMARY_PORT dbname=$PGC_DB user=$PGC_USER"
SELECT current_user;
SQL
{
  printf '%s:%s:*:tether__preload_other:tp-other-pw\n' "$PGC_HOST" "$PRIMARY_PORT"
  printf '%s:%s:*:%s:%s\n' "$PGC_HOST" "$PRIMARY_PORT" "$PGC_USER" "$PGC_PASSWORD"
} >"$work/pgpass"
chmod 600 "$work/pgpass"
cat >"$work/psql_two.sh" <<SH
#!/bin/sh
for i in 1 2 3 4 5; do
  env -u PGPASSWORD PGPASSFILE="$work/pgpass" "$PGC_BIN/psql" -X -At -v ON_ERROR_STOP=1 -f "$work/two_users.sql" || exit 1
done
SH
chmod +x "$work/psql_two.sh"
cat_filter() { cat; }
compare psql_two_users 7 cat_filter "$work/psql_two.sh"
grep -q '^tether__preload_other|t|4MB$' "$work/psql_two_users.preload.1" &&
  check "psql: the second user sees none of the first one's session" ||
  fail "psql: $(head -8 "$work/psql_two_users.preload.1" | tr '\n' ' ')"
fi

# ---- psycopg2's test suite ----------------------------------------------------
if want psycopg2; then
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3 # Debian's, with python3-psycopg2
if "$py" -c 'import psycopg2' 2>/dev/null; then
  ver=$("$py" -c 'import psycopg2; print(psycopg2.__version__.split()[0])')
  want=$(cat "$here/psycopg2/VERSION")
  [ "$ver" = "$want" ] || echo "note: psycopg2 $ver installed, the vendored tests are of $want"
  "$PGC_BIN/psql" "$admin" -X -q -c "CREATE DATABASE psycopg2_test OWNER $PGC_USER" >/dev/null
  "$PGC_BIN/psql" "$admin" -X -q -d psycopg2_test -c "CREATE EXTENSION IF NOT EXISTS hstore" >/dev/null 2>&1 || true
  cat >"$work/psy.sh" <<SH
#!/bin/sh
cd "$here/psycopg2" && PSYCOPG2_TESTDB=psycopg2_test exec "$py" -c \
  "import tests; tests.unittest.main(defaultTest='tests.test_suite')" --verbose
SH
  chmod +x "$work/psy.sh"
  psy_filter() { grep -E ' \.\.\. ' | sed -E 's/ \.\.\. (ok|skipped.*|FAIL|ERROR|expected failure|unexpected success).*/ \1/' | sort; }
  compare psycopg2_suite 1 psy_filter "$work/psy.sh"
  echo "measure: psycopg2: $(grep -E '^Ran [0-9]+ tests' "$work/psycopg2_suite.plain.1") / $(grep -E '^(OK|FAILED)' "$work/psycopg2_suite.plain.1")"
else
  fail "python3-psycopg2 is not installed (scripts/install-deps)"
fi
fi

if [ "$fails" -ne 0 ]; then
  echo "test_programs: $fails failure(s)" >&2
  exit 1
fi
echo "test_programs: all checks passed"
