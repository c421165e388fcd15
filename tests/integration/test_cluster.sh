#!/usr/bin/env bash
# test_cluster.sh - the integration-test bed itself: the scratch cluster that
# scripts/pg-cluster starts (env, loopback only, unprivileged owner, SCRAM for
# the application user, streaming standby), each fault it can inject
# (terminate, wrong password, connection exhaustion, crash, restart,
# promotion) and each faultproxy mode (pass, blackhole, reset, refuse).
#
#   scripts/pg-cluster run -- bash tests/integration/test_cluster.sh FAULTPROXY_BINARY
#
# Destructive steps (crash, restart, promotion) come last. Prints every check;
# exits non-zero on the first failure. Background sessions and the proxy are
# always cleaned up here; the cluster is pg-cluster run's job.
# `A && B || fail` below means "fail unless both hold": intended.
# shellcheck disable=SC2015
set -euo pipefail
export LC_ALL=C
fp=${1:?usage: test_cluster.sh FAULTPROXY_BINARY (run it through scripts/pg-cluster run)}
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { echo "check: $*"; }
t_start=$(date +%s%3N)

for v in PGC_DIR PGC_BIN PRIMARY_PORT STANDBY_PORT PGC_HOST PGC_USER PGC_PASSWORD \
         PGC_DB PGC_SOCK PGC_SUPERUSER; do
  [ -n "${!v:-}" ] || fail "$v is not set: run this through scripts/pg-cluster run"
done
[ -x "$fp" ] || fail "faultproxy binary '$fp' is not executable"
ctl=${PGC_CTL:-$(cd "$(dirname "$0")/../.." && pwd)/scripts/pg-cluster}
psql_bin=$PGC_BIN/psql
work=$(mktemp -d /tmp/tether-it.XXXXXX)
bg=()
cleanup() {
  local p
  for p in "${bg[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${bg[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# The application user over TCP: app PORT [psql args]; password from PGPASSWORD.
app() {
  local port=$1; shift
  PGPASSWORD=${PGPASSWORD_OVERRIDE:-$PGC_PASSWORD} "$psql_bin" -X -At -v ON_ERROR_STOP=1 \
    "host=$PGC_HOST port=$port user=$PGC_USER dbname=$PGC_DB sslmode=disable connect_timeout=10" "$@"
}
# bg_app OUTFILE PORT [psql args]: app in the background; $! and bg get the
# psql process itself (a backgrounded function would be a subshell).
bg_app() {
  local out=$1 port=$2; shift 2
  PGPASSWORD=$PGC_PASSWORD "$psql_bin" -X -At -v ON_ERROR_STOP=1 \
    "host=$PGC_HOST port=$port user=$PGC_USER dbname=$PGC_DB sslmode=disable connect_timeout=10" \
    "$@" >"$out" 2>&1 &
  bg+=($!)
}
# The superuser over the unix socket: sql_su NODE SQL
sql_su() { "$ctl" psql "$PGC_DIR" "$1" -At -c "$2"; }
not() { ! "$@"; }
# wait_until SECONDS CMD...: poll CMD every 100 ms.
wait_until() {
  local end=$(( $(date +%s%3N) + $1 * 1000 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s%3N)" -lt "$end" ] || return 1
    sleep 0.1
  done
}
# alive PID: running and not a zombie (children are reaped only by `wait`).
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $s != Z* ]]; }
ms_since() { echo $(( $(date +%s%3N) - $1 )); }
tether_backends() { sql_su primary "SELECT count(*) FROM pg_stat_activity WHERE usename = '$PGC_USER'"; }
backends_are() { [ "$(tether_backends)" = "$1" ]; }

check "env: ports, loopback host, directories"
[[ $PRIMARY_PORT =~ ^[0-9]+$ && $STANDBY_PORT =~ ^[0-9]+$ ]] || fail "ports not numeric"
[ "$PRIMARY_PORT" != "$STANDBY_PORT" ] || fail "primary and standby share a port"
[ "$PGC_HOST" = 127.0.0.1 ] || fail "PGC_HOST=$PGC_HOST"
[ -d "$PGC_DIR" ] && [ -S "$PGC_SOCK/.s.PGSQL.$PRIMARY_PORT" ] || fail "no socket in $PGC_SOCK"
"$ctl" status "$PGC_DIR" || fail "pg-cluster status says a node is down"

check "servers listen on 127.0.0.1 only and run as $PGC_SUPERUSER, not root"
for port in "$PRIMARY_PORT" "$STANDBY_PORT"; do
  addrs=$(ss -Htln "sport = :$port" | awk '{print $4}' | sort -u)
  [ "$addrs" = "127.0.0.1:$port" ] || fail "port $port listens on: $addrs"
done
for node in primary standby; do
  pid=$(head -n 1 "$PGC_DIR/$node/postmaster.pid")
  owner=$(ps -o user= -p "$pid")
  [ "$owner" = "$PGC_SUPERUSER" ] && [ "$owner" != root ] || fail "$node runs as '$owner'"
done

check "user $PGC_USER connects over TCP with SCRAM to the primary and the standby"
[ "$(app "$PRIMARY_PORT" -c "SELECT current_user, current_setting('is_superuser')")" = "$PGC_USER|off" ] ||
  fail "primary: not $PGC_USER or a superuser"
[ "$(app "$STANDBY_PORT" -c 'SELECT current_database()')" = "$PGC_DB" ] || fail "standby: database"
[ "$(sql_su primary "SELECT rolpassword LIKE 'SCRAM-SHA-256\$%' FROM pg_authid WHERE rolname = '$PGC_USER'")" = t ] ||
  fail "the password is not stored as SCRAM"
[ "$(sql_su primary "SELECT string_agg(DISTINCT auth_method, ',') FROM pg_hba_file_rules WHERE type = 'host'")" = scram-sha-256 ] ||
  fail "host lines of pg_hba.conf are not all scram-sha-256"

check "roles: primary writable, standby in recovery and streaming"
[ "$(app "$PRIMARY_PORT" -c 'SELECT pg_is_in_recovery()')" = f ] || fail "primary is in recovery"
[ "$(app "$STANDBY_PORT" -c 'SELECT pg_is_in_recovery()')" = t ] || fail "standby is not in recovery"
[ "$(sql_su primary "SELECT state FROM pg_stat_replication")" = streaming ] || fail "no streaming standby"

check "a write on the primary reaches the standby"
token=$RANDOM$RANDOM
app "$PRIMARY_PORT" -q -c "CREATE TABLE it_marks (v text)" -c "INSERT INTO it_marks VALUES ('$token')"
seen() { [ "$(app "$STANDBY_PORT" -c "SELECT count(*) FROM it_marks WHERE v = '$1'" 2>/dev/null)" = 1 ]; }
t0=$(date +%s%3N)
wait_until 10 seen "$token" || fail "row $token not replicated within 10 s"
echo "  replicated in $(ms_since "$t0") ms"
out=$(app "$STANDBY_PORT" -c "INSERT INTO it_marks VALUES ('x')" 2>&1) && fail "standby accepted a write"
grep -q "read-only transaction" <<<"$out" || fail "standby write error: $out"

check "wrong password: 'password authentication failed'"
t0=$(date +%s%3N)
out=$(PGPASSWORD_OVERRIDE=not-the-password app "$PRIMARY_PORT" -c 'SELECT 1' 2>&1) && fail "wrong password accepted"
grep -q "password authentication failed for user \"$PGC_USER\"" <<<"$out" || fail "wrong password: $out"
echo "  refused in $(ms_since "$t0") ms"

check "terminate: pg-cluster terminate ends the sessions of $PGC_USER"
bg_app "$work/term.out" "$PRIMARY_PORT" -c 'SELECT pg_sleep(30)'
victim=$!
wait_until 10 backends_are 1 || fail "sleeping session never showed up"
n=$("$ctl" terminate "$PGC_DIR" primary)
[ "$n" -ge 1 ] || fail "terminate ended $n backends"
wait_until 5 not alive "$victim" || fail "terminated session still running"
rc=0; wait "$victim" || rc=$?
[ $rc -ne 0 ] && grep -q "terminating connection due to administrator command" "$work/term.out" ||
  fail "terminated session: rc=$rc $(cat "$work/term.out")"
wait_until 5 backends_are 0 || fail "terminated backend still listed"

check "max_connections exhaustion: reserved slots, then 'too many clients'"
max=$(sql_su primary "SHOW max_connections"); reserved=$(sql_su primary "SHOW superuser_reserved_connections")
napp=$((max - reserved))
# The fillers' backends notice a closed client within 250 ms, so killing the
# psql processes frees the slots at once (no superuser login is possible
# while every slot is taken). A login racing with a filler (our own polls)
# can make the filler fail: refill respawns the fillers that died.
export PGOPTIONS="-c client_connection_check_interval=250"
app_fillers=() su_fillers=()
start_app_filler() { bg_app /dev/null "$PRIMARY_PORT" -c 'SELECT pg_sleep(60)'; app_fillers+=($!); }
start_su_filler() {
  "$psql_bin" -X -q -h "$PGC_SOCK" -p "$PRIMARY_PORT" -U "$PGC_SUPERUSER" -d postgres \
    -c 'SELECT pg_sleep(60)' >/dev/null 2>&1 &
  su_fillers+=($!); bg+=($!)
}
refill() { # refill app|su N
  local p live=()
  local -n list=${1}_fillers
  for p in "${list[@]}"; do if alive "$p"; then live+=("$p"); fi; done
  list=("${live[@]}")
  while [ ${#list[@]} -lt "$2" ]; do "start_${1}_filler"; done
}
app_full() { refill app "$napp"; backends_are "$napp"; }
wait_until 20 app_full || fail "only $(tether_backends) of $napp sessions connected"
out=$(app "$PRIMARY_PORT" -c 'SELECT 1' 2>&1) && fail "connection $((napp + 1)) of $PGC_USER accepted"
grep -q "remaining connection slots are reserved" <<<"$out" || fail "at $napp sessions: $out"
echo "  $napp sessions of $PGC_USER: '$(grep -o 'remaining connection slots[^"]*' <<<"$out" | head -n 1)'"
too_many() {
  local o
  refill su "$reserved"
  o=$(app "$PRIMARY_PORT" -c 'SELECT 1' 2>&1) || grep -q "sorry, too many clients already" <<<"$o"
}
wait_until 20 too_many || fail "no 'too many clients' with all $max slots taken"
echo "  all $max slots taken: 'sorry, too many clients already'"
unset PGOPTIONS
kill -TERM "${app_fillers[@]}" "${su_fillers[@]}" 2>/dev/null || true
for p in "${app_fillers[@]}" "${su_fillers[@]}"; do wait "$p" 2>/dev/null || true; done
wait_until 10 backends_are 0 || fail "filler backends did not go away"
app "$PRIMARY_PORT" -c 'SELECT 1' >/dev/null || fail "cannot connect after the fillers left"

check "faultproxy: start in front of the primary"
"$fp" serve --listen 0 --target "127.0.0.1:$PRIMARY_PORT" --control "$work/fp.sock" \
  >"$work/fp.out" 2>"$work/fp.err" &
proxy=$!; bg+=("$proxy")
wait_until 5 grep -q '^port ' "$work/fp.out" || fail "faultproxy did not start: $(cat "$work/fp.err")"
fport=$(awk '/^port /{print $2}' "$work/fp.out")
fctl() { "$fp" ctl "$work/fp.sock" "$1" >/dev/null || fail "faultproxy ctl $1"; }

check "faultproxy pass: queries go through to the primary"
[ "$(app "$fport" -c 'SELECT inet_server_port()')" = "$PRIMARY_PORT" ] || fail "pass"
[ "$(app "$fport" -c 'SELECT count(*) FROM generate_series(1, 100000)')" = 100000 ] || fail "pass: big result"

check "faultproxy blackhole: an open session goes silent (not closed)"
bg_app "$work/silent.out" "$fport" -c "SET application_name = 'it_silent'" \
  -c 'SELECT pg_sleep(0.5)' -c "SELECT 'answered'"
silent=$!
active() { [ "$(sql_su primary "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'it_silent' AND query LIKE '%pg_sleep%'")" = 1 ]; }
wait_until 10 active || fail "the session through the proxy never ran its query"
fctl blackhole
sleep 2
alive "$silent" || fail "blackholed session ended: $(cat "$work/silent.out")"
! grep -q answered "$work/silent.out" || fail "an answer got through the blackhole"

check "faultproxy blackhole: a new connect hangs (timeout 3 psql)"
t0=$(date +%s%3N); rc=0
timeout 3 "$psql_bin" -X "host=127.0.0.1 port=$fport user=$PGC_USER dbname=$PGC_DB sslmode=disable" \
  -c 'SELECT 1' >/dev/null 2>&1 || rc=$?
el=$(ms_since "$t0")
[ $rc -eq 124 ] && [ "$el" -ge 2900 ] || fail "blackholed connect: rc=$rc after $el ms (want a hang)"
rc=0; timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$fport" 2>/dev/null || rc=$?
[ $rc -eq 124 ] || fail "a bare TCP connect to the blackhole returned ($rc) instead of hanging"

check "faultproxy pass again: new connections work, the blackholed one stays silent"
fctl pass
t0=$(date +%s%3N)
[ "$(app "$fport" -c 'SELECT 42')" = 42 ] || fail "no connection after blackhole -> pass"
echo "  connected $(ms_since "$t0") ms after pass"
alive "$silent" || fail "the blackholed session ended on pass"

check "faultproxy reset: the silent session fails at once with a reset"
t0=$(date +%s%3N)
fctl reset
wait_until 3 not alive "$silent" || fail "session still alive after reset"
rc=0; wait "$silent" || rc=$?
[ $rc -ne 0 ] && grep -q "server closed the connection unexpectedly" "$work/silent.out" ||
  fail "after reset: rc=$rc $(cat "$work/silent.out")"
echo "  failed $(ms_since "$t0") ms after reset"
[ "$(app "$fport" -c 'SELECT 7')" = 7 ] || fail "reset: the proxy no longer forwards"

check "faultproxy refuse: connect fails at once with 'Connection refused'"
fctl refuse
t0=$(date +%s%3N)
out=$(app "$fport" -c 'SELECT 1' 2>&1) && fail "connected while refusing"
el=$(ms_since "$t0")
grep -q "Connection refused" <<<"$out" && [ "$el" -lt 1000 ] || fail "refuse: $out after $el ms"
fctl pass
[ "$(app "$fport" -c 'SELECT 8')" = 8 ] || fail "refuse -> pass: no connection"

check "faultproxy exits 0 on SIGTERM and removes its control socket"
kill -TERM "$proxy"
rc=0; wait "$proxy" || rc=$?
[ $rc -eq 0 ] && [ ! -e "$work/fp.sock" ] || fail "faultproxy exit $rc / socket left"

check "kill (crash) the primary, start it again: committed data survives"
app "$PRIMARY_PORT" -q -c "SET synchronous_commit = on" -c "INSERT INTO it_marks VALUES ('before-crash')"
t0=$(date +%s%3N)
"$ctl" kill "$PGC_DIR" primary
out=$(app "$PRIMARY_PORT" -c 'SELECT 1' 2>&1) && fail "primary answers after kill"
grep -q "Connection refused" <<<"$out" || fail "after kill: $out"
"$ctl" start-node "$PGC_DIR" primary
[ "$(app "$PRIMARY_PORT" -c "SELECT count(*) FROM it_marks WHERE v = 'before-crash'")" = 1 ] ||
  fail "committed row lost in the crash"
echo "  crash + restart (with crash recovery) in $(ms_since "$t0") ms"

check "restart the primary (fast): an open session is ended, new ones work"
bg_app "$work/restart.out" "$PRIMARY_PORT" -c 'SELECT pg_sleep(30)'
victim=$!
wait_until 10 backends_are 1 || fail "session before restart never showed up"
t0=$(date +%s%3N)
"$ctl" restart "$PGC_DIR" primary
echo "  restart in $(ms_since "$t0") ms"
rc=0; wait "$victim" || rc=$?
[ $rc -ne 0 ] || fail "session survived a restart"
[ "$(app "$PRIMARY_PORT" -c 'SELECT 1')" = 1 ] || fail "no connection after restart"

check "promotion: stop the primary, promote the standby, write to it"
token=$RANDOM$RANDOM
app "$PRIMARY_PORT" -q -c "INSERT INTO it_marks VALUES ('$token')"
wait_until 15 seen "$token" || fail "standby did not catch up after the restart"
"$ctl" stop-node "$PGC_DIR" primary
out=$(app "$PRIMARY_PORT" -c 'SELECT 1' 2>&1) && fail "primary answers after stop-node"
t0=$(date +%s%3N)
"$ctl" promote "$PGC_DIR"
echo "  promoted in $(ms_since "$t0") ms"
[ "$(app "$STANDBY_PORT" -c 'SELECT pg_is_in_recovery()')" = f ] || fail "standby still in recovery"
app "$STANDBY_PORT" -q -c "INSERT INTO it_marks VALUES ('after-promotion')" || fail "promoted standby refuses writes"
[ "$(app "$STANDBY_PORT" -c "SELECT count(*) FROM it_marks WHERE v IN ('$token', 'after-promotion')")" = 2 ] ||
  fail "promoted standby lacks data"

echo "PASS: test_cluster.sh ($(ms_since "$t_start") ms)"
