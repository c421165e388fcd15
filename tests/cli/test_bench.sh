#!/usr/bin/env bash
# test_bench.sh - `tether bench cycle`: the JSON contract, wait sampling
# when threads outnumber connections, and input errors. Figures are not
# judged here (benchmarks are compared in bench/run-cycle, not asserted).
set -euo pipefail
bin=${1:?usage: test_bench.sh TETHER_BINARY}
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$bin" bench cycle --threads 2 --pool 2 --seconds 200ms --json)
echo "$out"
grep -Eq <<<"$out" '^\{"bench":"cycle","impl":"tether","threads":2,"pool":2,"seconds":0\.200,"ops_per_sec":[0-9]+,"errors":0,"bytes_per_conn":[0-9]+\}$' \
  || fail "bad JSON line"
ops=$(echo "$out" | sed -E 's/.*"ops_per_sec":([0-9]+).*/\1/')
[ "$ops" -gt 0 ] || fail "no cycles counted"

out=$("$bin" bench cycle --threads 6 --pool 2 --seconds 200ms --json)
echo "$out"
grep -Eq <<<"$out" '"p50_wait_ns":[0-9]+,"p99_wait_ns":[0-9]+,"max_wait_ns":[0-9]+' \
  || fail "no wait distribution when threads > pool"
grep -q <<<"$out" '"errors":0' || fail "errors with a waiting queue"

"$bin" bench cycle --threads 1 --pool 1 --seconds 100ms | grep -c "acquire+release/s" >/dev/null || fail "human output"
"$bin" bench cycle --help | grep -c usage >/dev/null || fail "--help"

set +e
err=$("$bin" bench cycle --threads 0 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--threads" || fail "bad --threads: rc=$rc $err"
err=$("$bin" bench cycle --pool x 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--pool" || fail "bad --pool: rc=$rc $err"
err=$("$bin" bench cycle --seconds 0 2>&1); rc=$?
[ $rc -eq 2 ] || fail "--seconds 0 accepted"
err=$("$bin" bench nope 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" nope || fail "unknown benchmark: rc=$rc"
# bench query: option errors need no server.
err=$("$bin" bench query 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--conninfo" || fail "bench query without --conninfo: rc=$rc $err"
err=$("$bin" bench query --conninfo "host=127.0.0.1 port=1" --threads 0 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--threads" || fail "bench query --threads 0: rc=$rc $err"
err=$("$bin" bench query --conninfo "host=127.0.0.1 port=1" --mode sideways 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--mode" || fail "bench query --mode: rc=$rc $err"
"$bin" bench query --help | grep -c "conninfo" >/dev/null || fail "bench query --help"
err=$("$bin" bench query --conninfo "host=127.0.0.1 port=1" --mode acquire --read-only 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--read-only needs --mode run" || fail "bench query --read-only --mode acquire: rc=$rc $err"
grep -q -- "--read-only" <<<"$("$bin" bench query --help)" || fail "bench query --help names --read-only"
# --read-only against a routing keyword with a bad value: the error names it.
err=$("$bin" bench query --conninfo "host=127.0.0.1 port=1 tether_max_standby_lag=soon" --read-only --seconds 1 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q <<<"$err" -- "tether_max_standby_lag" || fail "bench query --read-only, bad lag: rc=$rc $err"
set -e
echo "test_bench: all checks passed"
