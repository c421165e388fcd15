#!/usr/bin/env bash
# check.sh - runs an example program and checks what it prints. The one
# checker of the examples' output: ctest runs it on the examples built in
# the tree (example.retry, example.pg_pool, ...), scripts/check-install on the
# examples built against an installed tether.
#
#   check.sh retry BIN      no server needed
#   check.sh pg_pool BIN    inside scripts/pg-cluster run (PGC_* variables)
#   check.sh evloop BIN     inside scripts/pg-cluster run (PGC_* variables)
#   check.sh pg_jobs BIN    inside scripts/pg-cluster run (PGC_* variables)
#   check.sh redis_pool BIN starts a redis-server of its own on a free
#                           loopback port (scripts/free-port), always stopped
set -uo pipefail

name=${1:?usage: check.sh retry|pg_pool|pg_jobs|evloop|redis_pool BIN}
bin=${2:?usage: check.sh retry|pg_pool|pg_jobs|evloop|redis_pool BIN}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/tether-example.XXXXXX)
redis_pid=
cleanup() {
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0

fail() {
  echo "FAIL ($name): $*" >&2
  fails=$((fails + 1))
}

# run ARGS...: runs the example, output in $tmp/out and $tmp/err, status
# in $status; both are shown so that a failure can be read in the log.
run() {
  status=0
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err" || status=$?
  echo "--- $name exit $status; stdout:"
  cat "$tmp/out"
  echo "--- stderr:"
  cat "$tmp/err"
}

# retry: five runs of work that fails two times in three and is not
# idempotent; each failure says it never reached the server, so the runs
# retry it (never "stopped: not-idempotent"), and every retry is logged.
check_retry() {
  run
  [ "$status" -eq 0 ] || fail "exit status $status, want 0"
  local re='^run ([1-5]): (ok|TETHER_E[A-Z]+) after ([0-9]+) attempts \([0-9]+ ms\)(, stopped: (attempts|deadline|budget|breaker))?$'
  local runs=0 attempts=0 ok=0 line
  while IFS= read -r line; do
    case $line in
      run*)
        if [[ $line =~ $re ]]; then
          runs=$((runs + 1))
          attempts=$((attempts + BASH_REMATCH[3]))
          [ "${BASH_REMATCH[2]}" = ok ] && ok=$((ok + 1))
          [ "${BASH_REMATCH[1]}" -eq "$runs" ] || fail "run lines out of order: '$line'"
        else
          fail "unexpected run line: '$line'"
        fi ;;
      policy:*) ;;
      *) fail "unexpected line: '$line'" ;;
    esac
  done <"$tmp/out"
  [ "$runs" -eq 5 ] || fail "$runs run lines, want 5"
  grep -q 'not-idempotent' "$tmp/out" && fail "a run stopped not-idempotent: the failures must say they were not sent"
  [ "$attempts" -gt "$runs" ] || fail "$attempts attempts in $runs runs: nothing was retried"
  [ "$ok" -ge 1 ] || fail "no run succeeded"
  # every retry (a pause before another attempt) is logged as a warning;
  # the breaker may refuse the attempt after the last one
  local warned
  warned=$(grep -c '^\[warn\] retry: attempt [0-9]* failed after .*; retrying in [0-9]* ms$' "$tmp/err")
  [ "$warned" -ge $((attempts - runs)) ] ||
    fail "$warned retries logged as warnings on stderr, want at least $((attempts - runs))"
  local want="policy: $runs runs, $attempts attempts, $warned retries, $ok succeeded"
  grep -qxF "$want" "$tmp/out" || fail "want the line '$want'"
  run "exponential bogus=1"
  [ "$status" -eq 2 ] || fail "a bad spec: exit status $status, want 2"
  grep -q '^bad policy: .*bogus' "$tmp/err" || fail "a bad spec: want 'bad policy: ...' naming the key"
}

# The Prometheus text from line $1 of $tmp/out on: every sample line is
# "name{labels} value" of a family declared by # TYPE, every family has a
# sample, and the histogram ends with its _count (the last line written:
# a text cut short loses it).
check_metrics() {
  tail -n +"$1" "$tmp/out" >"$tmp/metrics"
  [ -s "$tmp/metrics" ] || { fail "no metrics text"; return; }
  [ "$(tail -c 1 "$tmp/metrics" | od -An -c | tr -d ' ')" = '\n' ] ||
    fail "the metrics text does not end with a newline (cut short?)"
  awk '
    /^# HELP / { next }
    /^# TYPE / { type[$3] = $4; next }
    /^[a-zA-Z_:][a-zA-Z0-9_:]*\{[^}]*\} [-+0-9.eE]+$/ {
      n = $1; sub(/\{.*/, "", n); base = n
      if (!(base in type)) sub(/_(bucket|sum|count)$/, "", base)
      if (!(base in type)) { print "sample of an undeclared family: " $0; bad = 1 }
      seen[base]++
      if (type[base] == "histogram" && n == base "_count") counted[base] = 1
      next
    }
    { print "not a metrics line: " $0; bad = 1 }
    END {
      for (f in type) {
        if (!seen[f]) { print "family without a sample: " f; bad = 1 }
        if (type[f] == "histogram" && !counted[f]) { print "histogram without _count: " f; bad = 1 }
      }
      exit bad
    }' "$tmp/metrics" >"$tmp/why" || fail "metrics text: $(cat "$tmp/why")"
  grep -Eq '^tether_pool_acquires_total\{[^}]*\} [1-9][0-9]*$' "$tmp/metrics" ||
    fail "tether_pool_acquires_total is not >= 1"
}

# pg_pool ATTRS WANT_ROLE WANT_PORT: the standby is listed first, the pool
# must still land where target_session_attrs says.
check_pg_pool_run() {
  local ci="host=$PGC_HOST,$PGC_HOST port=$STANDBY_PORT,$PRIMARY_PORT"
  ci+=" user=$PGC_USER password=$PGC_PASSWORD dbname=$PGC_DB"
  ci+=" target_session_attrs=$1 tether_pool_max=4"
  run "$ci"
  [ "$status" -eq 0 ] || fail "$1: exit status $status, want 0"
  head -n 1 "$tmp/out" | grep -Eqx "pg_class has [1-9][0-9]* rows, counted on the $2 \(port $3\)" ||
    fail "$1: first line '$(head -n 1 "$tmp/out")', want 'pg_class has N rows, counted on the $2 (port $3)'"
  check_metrics 2
  if grep -qF -- "$PGC_PASSWORD" "$tmp/out" "$tmp/err"; then
    fail "$1: the password appears in the output"
  fi
}

check_pg_pool() {
  local v
  for v in PGC_HOST PRIMARY_PORT STANDBY_PORT PGC_USER PGC_PASSWORD PGC_DB; do
    [ -n "${!v:-}" ] || { echo "check.sh pg_pool: \$$v is not set (run it inside scripts/pg-cluster run)" >&2; exit 2; }
  done
  check_pg_pool_run read-write primary "$PRIMARY_PORT"
  check_pg_pool_run read-only standby "$STANDBY_PORT"
  run
  [ "$status" -eq 2 ] || fail "no argument: exit status $status, want 2"
  grep -q '^usage: ' "$tmp/err" || fail "no argument: want a usage line on stderr"
}

# redis_pool: a redis-server on a free loopback port, a closed port listed
# before it. The example connects through the TCP driver (the closed port
# refused, then the live one), INCRs 200 times from 4 threads, has the
# server kill every client but one, holds 4 leases at once (each killed
# connection found dead at checkout and replaced), INCRs 200 more: the
# counter is exact and the pool's counts match what was killed.
check_redis_pool() {
  command -v redis-server >/dev/null ||
    { echo "check.sh redis_pool: redis-server not found (scripts/install-deps installs it)" >&2; exit 2; }
  local port dead
  port=$(bash "$here/../../scripts/free-port")
  dead=$(bash "$here/../../scripts/free-port" "$port")
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --unixsocket '' --dir "$tmp" --logfile "$tmp/redis.log" &
  redis_pid=$!
  local i up=0
  for i in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
    sleep 0.05
  done
  [ "$up" = 1 ] || { fail "redis-server did not start on $port: $(cat "$tmp/redis.log" 2>/dev/null)"; return; }
  run "host=127.0.0.1 port=$dead|$port"
  [ "$status" -eq 0 ] || fail "exit status $status, want 0"
  head -n 1 "$tmp/out" | grep -qx "connect 127.0.0.1:$dead fail: connect to 127.0.0.1:$dead: Connection refused" ||
    fail "first line: want the closed port $dead refused"
  sed -n 2p "$tmp/out" | grep -qx "connect 127.0.0.1:$port ok" || fail "second line: want 127.0.0.1:$port ok"
  grep -qx "after 200 INCR: counter 200, connections made 4, closed broken 0" "$tmp/out" ||
    fail "want 'after 200 INCR: counter 200, connections made 4, closed broken 0'"
  local killed
  killed=$(sed -n 's/^CLIENT KILL closed \([0-9]*\) connections$/\1/p' "$tmp/out")
  [ "${killed:-0}" -eq 3 ] || fail "CLIENT KILL closed '${killed}' connections, want 3 (4 pooled, one asked)"
  grep -qx "after CLIENT KILL, 4 leases at once: counter 200, connections made 7, closed broken 3" "$tmp/out" ||
    fail "the 3 killed connections were not found dead at checkout and replaced"
  grep -Eqx "after 400 INCR: counter 400, connections made [0-9]+, closed broken [0-9]+" "$tmp/out" ||
    fail "want 'after 400 INCR: counter 400, ...' (no INCR lost)"
  grep -q "fail" <(tail -n +3 "$tmp/out") && fail "a connect failed after the first"
  [ ! -s "$tmp/err" ] || fail "unexpected stderr"
  run "host=127.0.0.1 port=$port||$dead"
  [ "$status" -eq 2 ] || fail "a bad port list: exit status $status, want 2"
  grep -q "^bad connection string: .*bad value \"$port||$dead\" for port" "$tmp/err" ||
    fail "a bad port list: want an error naming the port item"
  run
  [ "$status" -eq 2 ] || fail "no argument: exit status $status, want 2"
}

# pg_jobs: the job worker runs for 8 s while its backends are terminated
# three times and the primary is restarted once. Every job it was told
# committed must be in the database once and whole, no failed one at all;
# the slow statements (one job in 50) time out, are cancelled and their
# connections reused; new connections prepare the declared statements
# again; no statement returns more than 250 ms after its deadline (a loose
# bound: this program counts the time its threads waited for a CPU on a
# loaded 2-core machine; integration.statements holds 20 ms, CPU wait left
# out).
check_pg_jobs() {
  local v
  for v in PGC_HOST PRIMARY_PORT PGC_USER PGC_PASSWORD PGC_DB PGC_DIR PGC_CTL; do
    [ -n "${!v:-}" ] || { echo "check.sh pg_jobs: \$$v is not set (run it inside scripts/pg-cluster run)" >&2; exit 2; }
  done
  local ci="host=$PGC_HOST port=$PRIMARY_PORT user=$PGC_USER password=$PGC_PASSWORD dbname=$PGC_DB"
  (
    for t in 1.5 1.5 1.5; do sleep "$t"; bash "$PGC_CTL" terminate "$PGC_DIR" >/dev/null 2>&1; done
    sleep 1; bash "$PGC_CTL" restart "$PGC_DIR" primary >/dev/null 2>&1
  ) &
  local faults=$!
  run "$ci" 8
  wait "$faults"
  [ "$status" -eq 0 ] || fail "exit status $status, want 0"
  grep -Eq '^jobs: [1-9][0-9]* committed, [0-9]+ failed, [0-9]+ with a lost COMMIT answer$' "$tmp/out" ||
    fail "want 'jobs: N committed, ...' with N > 0"
  # Every failed job (and each lost COMMIT answer) failed one step, counted
  # by its error code on the failures line.
  local failed lost total
  failed=$(sed -n 's/^jobs: [0-9]* committed, \([0-9]*\) failed, .*/\1/p' "$tmp/out")
  lost=$(sed -n 's/^jobs: .* failed, \([0-9]*\) with a lost COMMIT answer$/\1/p' "$tmp/out")
  total=$(sed -n 's/^failures: \([0-9]*\)\( (.*)\)\{0,1\}$/\1/p' "$tmp/out")
  [ -n "$total" ] && [ "$total" -eq $(( ${failed:-0} + ${lost:-0} )) ] ||
    fail "want 'failures: N (CODE n, ...)' with N = failed + lost COMMIT answers (${failed:-?} + ${lost:-?}), got '${total}'"
  grep -qx 'check: 0 committed and missing, 0 half applied, 0 applied twice, 0 failed and present' "$tmp/out" ||
    fail "the database does not hold what the jobs were told"
  local late
  late=$(sed -n 's/^statements: [0-9]* run, [1-9][0-9]* past their deadline, the worst returned \([0-9]*\) ms after it$/\1/p' "$tmp/out")
  [ -n "$late" ] || fail "want 'statements: ... N past their deadline' with N > 0 (one job in 50 is too slow)"
  [ "${late:-999}" -le 250 ] || fail "a statement returned ${late} ms after its deadline (at most 250)"
  grep -Eq '^cancels: [1-9][0-9]* sent, connections reused after one [1-9][0-9]*, closed [0-9]+$' "$tmp/out" ||
    fail "want cancels sent and connections reused after them"
  local prep conns
  prep=$(sed -n 's/^prepared: \([0-9]*\) prepares on \([0-9]*\) connections opened$/\1/p' "$tmp/out")
  conns=$(sed -n 's/^prepared: \([0-9]*\) prepares on \([0-9]*\) connections opened$/\2/p' "$tmp/out")
  [ "${conns:-0}" -gt 4 ] || fail "${conns:-no} connections opened: the faults did not reach the pool (want > 4)"
  [ "${prep:-0}" -ge "${conns:-1}" ] || fail "${prep:-no} prepares on ${conns} connections: new connections did not prepare again"
  grep -Eq '^reservations: [1-9][0-9]* kept across acquires, ' "$tmp/out" ||
    fail "want transactions kept across acquires"
  if grep -qF -- "$PGC_PASSWORD" "$tmp/out" "$tmp/err"; then
    fail "the password appears in the output"
  fi
  run
  [ "$status" -eq 2 ] || fail "no argument: exit status $status, want 2"
}

# evloop: one thread, one libuv loop, 20000 queries started at once over a
# pool of 8 (each "SELECT <its number>", checked by the example). A sampler
# counts the example's backends in pg_stat_activity (application_name
# tether-evloop) every 20 ms meanwhile: never above 8, and seen at least
# once (else the sampler missed the run and proves nothing). The loop runs
# the pool's ticks: the example's process has one thread after its batch.
# Then the same on a libevent base (--libevent) with 2000 acquires
# outstanding all along (--at-once: each one done starts the next).
check_evloop() {
  local v
  for v in PGC_HOST PRIMARY_PORT PGC_USER PGC_PASSWORD PGC_DB PGC_DIR PGC_CTL; do
    [ -n "${!v:-}" ] || { echo "check.sh evloop: \$$v is not set (run it inside scripts/pg-cluster run)" >&2; exit 2; }
  done
  local ci="host=$PGC_HOST port=$PRIMARY_PORT user=$PGC_USER"
  ci+=" password=$PGC_PASSWORD dbname=$PGC_DB application_name=tether-evloop"
  local q="SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tether-evloop'"
  ( while [ ! -e "$tmp/stop" ]; do
      bash "$PGC_CTL" psql "$PGC_DIR" primary -Atc "$q" 2>/dev/null >>"$tmp/samples"
      sleep 0.02
    done ) &
  local sampler=$!
  run "$ci" 20000 8
  touch "$tmp/stop"
  wait "$sampler"
  [ "$status" -eq 0 ] || fail "exit status $status, want 0"
  grep -Eq '^mode pool requests 20000 completed 20000 errors 0 max_connections [1-8] seconds [0-9.]+ qps [0-9]+ cpu_us_per_query [0-9.]+ threads 1$' "$tmp/out" ||
    fail "want 'mode pool requests 20000 completed 20000 errors 0 max_connections (1-8) ... threads 1'"
  local max seen
  max=$(sort -n "$tmp/samples" | tail -1)
  seen=$(awk '$1 > 0' "$tmp/samples" | wc -l)
  echo "--- pg_stat_activity: $(wc -l <"$tmp/samples") samples, $seen with backends, max ${max:-none}"
  [ "$seen" -gt 0 ] || fail "the sampler never saw the example's backends"
  [ "${max:-0}" -le 8 ] || fail "$max backends at once, want at most 8"
  if grep -qF -- "$PGC_PASSWORD" "$tmp/out" "$tmp/err"; then
    fail "the password appears in the output"
  fi
  # the same through libtether-event, 2000 acquires outstanding all along
  run "$ci" 20000 8 --libevent --at-once 2000
  [ "$status" -eq 0 ] || fail "--libevent: exit status $status, want 0"
  grep -Eq '^mode pool requests 20000 completed 20000 errors 0 max_connections [1-8] seconds [0-9.]+ qps [0-9]+ cpu_us_per_query [0-9.]+ threads 1$' "$tmp/out" ||
    fail "--libevent: want 'mode pool requests 20000 completed 20000 errors 0 ... threads 1'"
  run
  [ "$status" -eq 2 ] || fail "no argument: exit status $status, want 2"
  run "$ci" 100 8 --at-once 0
  [ "$status" -eq 2 ] || fail "--at-once 0: exit status $status, want 2"
}

case $name in
  retry) check_retry ;;
  evloop) check_evloop ;;
  pg_pool) check_pg_pool ;;
  pg_jobs) check_pg_jobs ;;
  redis_pool) check_redis_pool ;;
  *) echo "check.sh: unknown example '$name'" >&2; exit 2 ;;
esac
if [ "$fails" -ne 0 ]; then
  echo "check.sh $name ($bin): $fails check(s) failed" >&2
  exit 1
fi
echo "check.sh $name ($bin): ok"
