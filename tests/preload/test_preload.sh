#!/usr/bin/env bash
# test_preload.sh - libtether-preload.so against real PostgreSQL: the plain
# libpq program pq_client (and psql) run with and without
# LD_PRELOAD, the same results either way; the server never has more of
# the program's backends than the pool's maximum (or than the program
# holds at once); session state does not leak from one connect to the
# next; fork, threads, connecting without blocking, exit without PQfinish;
# pq_cases: credentials from the environment, revoked logins, ALTER ...
# SET, DROP DATABASE, more connections held than the pool, many pools,
# event procedures, custom settings, PQconninfo, configuration edge cases;
# target_session_attrs=read-write across a promotion (last: it promotes
# the standby).
#
#   scripts/pg-cluster run -- bash tests/preload/test_preload.sh PQ_CLIENT PQ_CASES PRELOAD_SO [SANITIZE [RUNTIMES]]
#
# In a sanitizer build (SANITIZE set) the sanitizer runtime must be in the
# process before the preload library: RUNTIMES is "none" when the program
# carries it (clang), else the runtime files (gcc's ASan and UBSan) to put
# first in LD_PRELOAD; without either it prints why and skips. psql (not
# built with the sanitizer) is left out of sanitizer builds.
set -euo pipefail
export LC_ALL=C
usage="usage: test_preload.sh PQ_CLIENT PQ_CASES PRELOAD_SO [SANITIZE [RUNTIMES]]"
client=${1:?$usage}
cases=${2:?$usage}
so=${3:?$usage}
sanitize=${4:-}
runtimes=${5:-}
runtimes=${runtimes% }
if [ -n "$sanitize" ] && [ -z "$runtimes" ]; then
  echo "SKIP: the preload tests need the sanitizer runtime loaded before the library;"
  echo "      this build (-fsanitize=$sanitize) has no way set up (clang, or gcc ASan/UBSan)"
  exit 0
fi
[ "$runtimes" != none ] || runtimes=""
# TSan refuses threads started after a fork of a threaded process unless
# told otherwise: the children here connect (the pool's ticker thread).
case $sanitize in *thread*) export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}die_after_fork=0" ;; esac
preload="${runtimes:+$runtimes }$so"
for v in PGC_DIR PGC_BIN PRIMARY_PORT STANDBY_PORT PGC_HOST PGC_USER PGC_PASSWORD PGC_DB; do
  [ -n "${!v:-}" ] || { echo "FAIL: $v is not set: run through scripts/pg-cluster run" >&2; exit 1; }
done
ctl=${PGC_CTL:-$(cd "$(dirname "$0")/../.." && pwd)/scripts/pg-cluster}
work=$(mktemp -d /tmp/tether-preload.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
check() { echo "check: $*"; }
ci="host=$PGC_HOST port=$PRIMARY_PORT user=$PGC_USER password=$PGC_PASSWORD dbname=$PGC_DB"
export TETHER_PRELOAD_POOL_MAX=2

# run NAME CMD...: CMD's output in $work/NAME (shown), its status checked.
run() {
  local name=$1
  shift
  if ! "$@" >"$work/$name" 2>&1; then
    cat "$work/$name"
    fail "$name exited non-zero"
    return 0
  fi
  sed "s/^/  $name: /" "$work/$name"
}
pre() { env LD_PRELOAD="$preload" "$@"; }
results() { grep '^result:' "$work/$1" || true; }
measure() { sed -n "s/.*measure: .* $2=\([0-9.]*\).*/\1/p" "$work/$1"; }
same_results() {
  if [ -n "$(results "$1")" ] && [ "$(results "$1")" = "$(results "$2")" ]; then
    check "$1 and $2 print the same results"
  else
    fail "$1 and $2 differ: $(results "$1") / $(results "$2")"
  fi
}
at_most() { # LABEL VALUE MAX
  if [ -n "$2" ] && [ "$2" -le "$3" ]; then check "$1: $2 <= $3"; else fail "$1: '$2' > $3"; fi
}
equals() { # LABEL VALUE WANT
  if [ "$2" = "$3" ]; then check "$1: $2"; else fail "$1: '$2', want '$3'"; fi
}

# ---- connect per query ------------------------------------------------
run cpq.plain "$client" cpq "$ci" 60
run cpq.preload pre "$client" cpq "$ci" 300
# Same work, same sums: compare the first 60 with a second plain-sized run.
run cpq.preload60 pre "$client" cpq "$ci" 60
same_results cpq.plain cpq.preload60
at_most "cpq under the preload: most backends seen" "$(measure cpq.preload max_backends)" 2
at_most "cpq under the preload: distinct backends over 300 connects" \
  "$(measure cpq.preload distinct_backends)" 2
plain_qps=$(measure cpq.plain qps)
pre_qps=$(measure cpq.preload qps)
echo "measure: connect-per-query: plain ${plain_qps} q/s, preload ${pre_qps} q/s" \
  "($(awk -v a="$pre_qps" -v b="$plain_qps" 'BEGIN { printf "%.0f", (b > 0 ? a / b : 0) }')x; not asserted)"

# ---- threads: 6 threads, pool max 2 -----------------------------------
# A connect beyond the pool's 2 goes to libpq at once (never waits): the
# server sees at most the 6 threads' backends, and fewer distinct ones
# than plain (one per connect).
run threads.plain "$client" threads "$ci" 6 10
run threads.preload pre "$client" threads "$ci" 6 10
same_results threads.plain threads.preload
at_most "threads under the preload: most backends seen" "$(measure threads.preload max_backends)" 6
at_most "threads under the preload: distinct backends" "$(measure threads.preload distinct_backends)" \
  "$(( $(measure threads.plain distinct_backends) - 10 ))"
# With a pool as large as the threads, every connect is pooled.
run threads.pool6 env TETHER_PRELOAD_POOL_MAX=6 LD_PRELOAD="$preload" "$client" threads "$ci" 6 10
at_most "threads with a pool of 6: distinct backends" "$(measure threads.pool6 distinct_backends)" 6

# ---- connecting without blocking --------------------------------------
run nonblock.plain "$client" nonblock "$ci" 20
run nonblock.preload pre "$client" nonblock "$ci" 20
same_results nonblock.plain nonblock.preload
at_most "nonblock under the preload: distinct backends" "$(measure nonblock.preload distinct_backends)" 2

# ---- fork ---------------------------------------------------------------
run fork.plain "$client" fork "$ci"
run fork.preload pre "$client" fork "$ci"
same_results fork.plain fork.preload
equals "fork: the parent's idle pooled connection reused after the children" \
  "$(measure fork.preload parent_reused)" 1

# ---- session state ------------------------------------------------------
run state.plain "$client" state "$ci"
run state.preload pre "$client" state "$ci" double
same_results state.plain state.preload
equals "state: the next connect had the same backend (pooled) twice" \
  "$(measure state.preload same_backend)" 2
equals "state: a PQreset connection is not reused" "$(measure state.preload reset_reused)" 0
grep -q 'work_mem_left=0 temp_table_left=0 prepared=0 listening=0 notify_left=0 txn_idle=1 appname_left=0' \
  "$work/state.preload" && check "state: none of SET, temp table, PREPARE, LISTEN, NOTIFY, BEGIN seen; PQparameterStatus tells the reset application_name" ||
  fail "state left behind: $(results state.preload)"

# The control: with no reset query the same program does see the SET and
# the temporary table (the checks above can fail).
run state.noreset env TETHER_PRELOAD_RESET_QUERY=none LD_PRELOAD="$preload" "$client" state "$ci"
grep -q 'after-dirty work_mem_left=1 temp_table_left=1' "$work/state.noreset" &&
  check "state control: TETHER_PRELOAD_RESET_QUERY=none leaves the SET and the temp table" ||
  fail "state control: $(results state.noreset)"

# ---- signals stay on the program's threads -----------------------------
run signal.plain "$client" signal "$ci"
run signal.preload pre "$client" signal "$ci"
same_results signal.plain signal.preload

# ---- not pooled: the off switch, a non-matching string, exit -------------
run off.preload env TETHER_PRELOAD=off LD_PRELOAD="$preload" "$client" cpq "$ci" 10
equals "TETHER_PRELOAD=off: every connect its own backend" "$(measure off.preload distinct_backends)" 10
run nomatch.preload env TETHER_PRELOAD_MATCH="*dbname='other'*" LD_PRELOAD="$preload" "$client" cpq "$ci" 10
equals "TETHER_PRELOAD_MATCH not matching: every connect its own backend" \
  "$(measure nomatch.preload distinct_backends)" 10
run exit.plain "$client" exit "$ci"
run exit.preload pre "$client" exit "$ci"
same_results exit.plain exit.preload
grep -q 'ping_ok=1' "$work/exit.preload" && check "PQping under the preload asks the server: ok" ||
  fail "PQping under the preload: $(results exit.preload)"
run bad.env env TETHER_PRELOAD_POOL_MAX=lots LD_PRELOAD="$preload" "$client" cpq "$ci" 3
grep -q "bad value for TETHER_PRELOAD_POOL_MAX: 'lots'" "$work/bad.env" &&
  check "a bad TETHER_PRELOAD_POOL_MAX is named, the program still runs unpooled" ||
  fail "no message naming TETHER_PRELOAD_POOL_MAX"

# ---- what libpq would connect with, and what the server says now ----------
# pq_cases (a plain libpq program) runs each case with and without the
# preload: the results must be the same (docs/preload.md, "What it cannot
# know").
admin="host=$PGC_SOCK port=$PRIMARY_PORT user=$PGC_SUPERUSER dbname=postgres"
spsql() { "$PGC_BIN/psql" "$admin" -X -q -v ON_ERROR_STOP=1 -c "$1" >/dev/null; }
spsql "CREATE ROLE tether__preload_bob LOGIN PASSWORD 'tp-bob-pw'"
spsql "CREATE ROLE tether__preload_carol LOGIN PASSWORD 'tp-carol-pw'"
both() { # NAME ENV... -- ARGS...: pq_cases plain and under the preload
  local name=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  run "$name.plain" env "${envs[@]}" "$cases" "$@"
  run "$name.preload" env "${envs[@]}" LD_PRELOAD="$preload" "$cases" "$@"
  same_results "$name.plain" "$name.preload"
}
noauth="host=$PGC_HOST port=$PRIMARY_PORT dbname=$PGC_DB"
# Credentials from the environment are part of what selects a pool.
both envcred PGUSER="$PGC_USER" PGPASSWORD="$PGC_PASSWORD" -- envcred "$noauth" tether__preload_bob tp-bob-pw
grep -q 'second=tether__preload_bob wrong_password=refused options=s2' "$work/envcred.preload" &&
  check "envcred: PGUSER, PGPASSWORD and PGOPTIONS changed between connects are used" ||
  fail "envcred: $(results envcred.preload)"
# Revoked access: NOLOGIN and a new password refuse the next connect after
# TETHER_PRELOAD_MAX_AGE.
both revoke TETHER_PRELOAD_MAX_AGE=1s -- revoke "$noauth" "$admin" tether__preload_carol tp-carol-pw 1.3
grep -q 'nologin=refused login_again=tether__preload_carol old_password=refused new_password=tether__preload_carol' "$work/revoke.preload" &&
  check "revoke: NOLOGIN and a changed password refused after the bound" ||
  fail "revoke: $(results revoke.preload)"
# ALTER DATABASE / ROLE ... SET reach the next connect after the bound.
both settings TETHER_PRELOAD_MAX_AGE=1s -- settings "$ci" "$admin" "$PGC_DB" 1.3
grep -q 'database_set=11MB again=11MB role_set=13MB' "$work/settings.preload" &&
  check "settings: ALTER DATABASE and ALTER ROLE ... SET seen" || fail "settings: $(results settings.preload)"
# ... and within TETHER_PRELOAD_RECHECK (100 ms) by the server check at
# checkout, with the default bound (10 s).
both settings_now -- settings "$ci" "$admin" "$PGC_DB" 0.3
grep -q 'database_set=11MB again=11MB role_set=13MB' "$work/settings_now.preload" &&
  check "settings: seen by the connects after 0.3 s" || fail "settings at once: $(results settings_now.preload)"
both nologin_now -- revoke "$noauth" "$admin" tether__preload_carol tp-carol-pw -0.3
grep -q 'nologin=refused login_again=tether__preload_carol' "$work/nologin_now.preload" &&
  check "revoke: NOLOGIN refused by the connects after 0.3 s" || fail "NOLOGIN at once: $(results nologin_now.preload)"
equals "revoke: pooled again once the role may log in again" \
  "$(measure nologin_now.preload reused_after_login)" 1
# Databases the program has left can be dropped and used as a template.
both dropdb -- dropdb "$ci" "$admin"
grep -q 'drop=ok template=ok forced=ok after=ok' "$work/dropdb.preload" &&
  check "dropdb: DROP DATABASE, CREATE ... TEMPLATE and DROP ... WITH (FORCE) of databases left" ||
  fail "dropdb: $(results dropdb.preload)"
for what in drop template; do # the server waits up to 5 s; plain: no wait
  s=$(measure dropdb.preload "${what}_s")
  p=$(measure dropdb.plain "${what}_s")
  awk -v s="$s" -v p="$p" 'BEGIN { exit !(s != "" && s < p + 1) }' &&
    check "dropdb: $what in ${s}s (plain ${p}s)" ||
    fail "dropdb: $what took '${s}'s (plain ${p}s; want less than 1 s more)"
done
# More connections held at once than the pool's maximum: no waiting.
both hold TETHER_PRELOAD_WAIT=30s -- hold "$ci" 12
held=$(measure hold.preload seconds)
# (well under one TETHER_PRELOAD_WAIT in all: one wait would be 30 s; the
# 12 connects themselves took 3.03 s in an ASan build at load 30)
awk -v s="$held" 'BEGIN { exit !(s != "" && s < 15) }' &&
  check "hold: 12 connections held with a pool of 2 in ${held}s" || fail "hold: ${held}s (want < 15 s: no wait of 30 s)"
# Many pools: idle connections across them are capped.
both apps -- apps "$ci" 40
at_most "apps: the user's backends after 40 pools were used" "$(measure apps.preload backends_after)" 11
# Event procedures: a connection with one is closed, not reused.
both events -- events "$ci"
# A custom setting made on one connect is not seen by the next.
both placeholder -- placeholder "$ci"
# PQconninfo tells what the program asked for.
both conninfo -- conninfo "host=$PGC_HOST,$PGC_HOST port=$PRIMARY_PORT,$PRIMARY_PORT user=$PGC_USER password=$PGC_PASSWORD dbname=$PGC_DB"
# Prepared statements kept across give-backs: the same values as fresh
# sessions, and a statement prepared again with the same text is answered
# without the server.
both prepared TETHER_PRELOAD_KEEP_PREPARED=on -- prepared "$ci"
grep -q 'result: same=42+2 other=40 sql=7 again=8 send=0/9 txn=101 mix=88' "$work/prepared.preload" &&
  check "prepared: same text, another text, SQL PREPARE, PQsendPrepare, in a transaction, SQL PREPARE of a kept name" ||
  fail "prepared: $(results prepared.preload)"
grep -q 'measure: kept=yes' "$work/prepared.preload" &&
  check "prepared: the same statement again was not sent to the server" ||
  fail "prepared: the same statement was prepared again on the server"
grep -q 'measure: kept=no' "$work/prepared.plain" ||
  fail "prepared: the plain run's statement was older than its connect (the check proves nothing)"
grep -q 'mix_same_backend=yes' "$work/prepared.preload" ||
  fail "prepared: the SQL PREPARE of a kept name ran on another backend (the check proves nothing)"
# Kept by default; with TETHER_PRELOAD_KEEP_PREPARED=off the reset
# deallocates.
both prepared_default -- prepared "$ci"
grep -q 'measure: kept=yes' "$work/prepared_default.preload" ||
  fail "prepared: not kept by default"
both prepared_off TETHER_PRELOAD_KEEP_PREPARED=off -- prepared "$ci"
grep -q 'measure: kept=no' "$work/prepared_off.preload" ||
  fail "prepared: kept with TETHER_PRELOAD_KEEP_PREPARED=off"
# A give-back without a reset: a connect that ran only statements that
# change nothing is not reset; a function call (a session's advisory
# lock), INTO, a second statement,
# an open transaction and a prepare are (and the next connect reads what
# a fresh session reads, as with plain libpq).
both clean -- clean "$ci" "$admin"
equals "clean: which give-backs ran the reset" \
  "$(sed -n 's/^measure: reset //p' "$work/clean.preload")" \
  "select=kept lock=reset into=reset two=reset txn=reset prepare=reset"
run clean.always env TETHER_PRELOAD_RESET_ALWAYS=on LD_PRELOAD="$preload" "$cases" clean "$ci" "$admin"
same_results clean.plain clean.always
equals "clean: TETHER_PRELOAD_RESET_ALWAYS=on resets the SELECT's give-back too" \
  "$(sed -n 's/^measure: reset select=\([a-z]*\).*/\1/p' "$work/clean.always")" reset
# Configuration edge cases are named, never a silent default.
for bad in TETHER_PRELOAD_WAIT=0 TETHER_PRELOAD_MATCH= TETHER_PRELOAD_POOL_MAX= TETHER_PRELOAD_LOG=2 TETHER_PRELOAD_IDLE_MAX=0 TETHER_PRELOAD_RESET_ALWAYS=sometimes; do
  var=${bad%%=*}
  run "config.$var" env "$bad" LD_PRELOAD="$preload" "$client" cpq "$ci" 3
  grep -q "bad value for $var: '${bad#*=}'" "$work/config.$var" &&
    check "config: $bad is named" || fail "config: $bad not named: $(head -2 "$work/config.$var")"
done

# ---- psql ---------------------------------------------------------------
if [ -n "$sanitize" ]; then
  echo "SKIP: psql under the preload in a sanitizer build (psql is not built with"
  echo "      the sanitizer; with gcc's ASan runtime preloaded it did not finish here)"
else
cat >"$work/script.sql" <<'SQL'
CREATE TEMP TABLE t (x int);
INSERT INTO t SELECT generate_series(1, 5);
SELECT sum(x) FROM t;
SET work_mem = '1234kB';
\connect
SHOW work_mem;
SELECT to_regclass('pg_temp.t') IS NULL AS temp_gone;
SELECT current_user, current_database();
SQL
psql_bin=$PGC_BIN/psql
timeout 30 "$psql_bin" "$ci" -X -At -f "$work/script.sql" >"$work/psql.plain" 2>&1 || fail "psql plain"
ASAN_OPTIONS=detect_leaks=0 TETHER_PRELOAD_LOG=1 LD_PRELOAD="$preload" timeout 30 "$psql_bin" "$ci" -X -At -f "$work/script.sql" \
  >"$work/psql.out" 2>"$work/psql.log" || fail "psql under the preload"
if [ -s "$work/psql.plain" ] && cmp -s "$work/psql.plain" "$work/psql.out"; then
  check "psql runs a script under the preload: the same output"
else
  fail "psql output differs: $(diff "$work/psql.plain" "$work/psql.out" | head -5)"
fi
grep -q 'pooled connection' "$work/psql.log" && check "psql's connections came from the pool" ||
  fail "psql's connections were not pooled: $(head -3 "$work/psql.log")"
# psql \setenv between two users' connects (credentials from the environment)
cat >"$work/setenv.sql" <<SQL
SELECT current_user;
\\setenv PGUSER tether__preload_bob
\\setenv PGPASSWORD tp-bob-pw
\\c -reuse-previous=off "$noauth"
SELECT current_user;
\\setenv PGPASSWORD wrong
\\c -reuse-previous=off "$noauth application_name=x"
SELECT current_user;
SQL
PGUSER=$PGC_USER PGPASSWORD=$PGC_PASSWORD timeout 30 "$psql_bin" "$noauth" -X -At -f "$work/setenv.sql" >"$work/setenv.plain" 2>&1 || true
PGUSER=$PGC_USER PGPASSWORD=$PGC_PASSWORD LD_PRELOAD="$preload" timeout 30 "$psql_bin" "$noauth" -X -At -f "$work/setenv.sql" >"$work/setenv.out" 2>&1 || true
if [ -s "$work/setenv.plain" ] && cmp -s "$work/setenv.plain" "$work/setenv.out" >/dev/null; then
  check "psql \\setenv PGUSER/PGPASSWORD then \\c: the same users as plain ($(tr '\n' ' ' <"$work/setenv.out" | cut -c1-120))"
else
  fail "psql \\setenv differs: $(diff "$work/setenv.plain" "$work/setenv.out" | head -6 | tr '\n' ' ')"
fi
fi

# No password in any output (the scripts given to psql hold some: left out).
for pw in "$PGC_PASSWORD" tp-bob-pw tp-carol-pw; do
  if grep -rq --exclude='*.sql' -- "$pw" "$work"; then fail "a password appears in some output"; fi
done

# ---- read-write across a promotion (last) -----------------------------
rw="host=$PGC_HOST,$PGC_HOST port=$PRIMARY_PORT,$STANDBY_PORT user=$PGC_USER password=$PGC_PASSWORD dbname=$PGC_DB target_session_attrs=read-write connect_timeout=3"
pre "$client" failover "$rw" 4 >"$work/failover" 2>&1 &
bgpid=$!
sleep 1
"$ctl" stop-node "$PGC_DIR" primary
"$ctl" promote "$PGC_DIR" standby 2>/dev/null
wait "$bgpid" || fail "the failover program failed"
sed 's/^/  failover: /' "$work/failover"
equals "read-write: the last queries ran on the promoted standby" \
  "$(sed -n 's/.*last_port=\([0-9]*\).*/\1/p' "$work/failover")" "$STANDBY_PORT"
at_most "read-write: queries that failed on a connection handed out" \
  "$(measure failover query_failures)" 3
streak=$(measure failover final_streak)
[ -n "$streak" ] && [ "$streak" -ge 10 ] && check "read-write: $streak queries in a row at the end" ||
  fail "read-write: final streak '$streak' < 10"

if [ "$fails" -ne 0 ]; then
  echo "test_preload: $fails failure(s)" >&2
  exit 1
fi
echo "test_preload: all checks passed"
