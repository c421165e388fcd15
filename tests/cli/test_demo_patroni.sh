#!/usr/bin/env bash
# test_demo_patroni.sh - `tether demo --patroni` (docs/patroni.md, "tether
# demo --patroni"): its usage errors and help; in a build without Patroni
# support, the clear error; with it, a 25 s run on its own scratch Patroni
# cluster through its three faults (switchover, kill -9 of the leader,
# the leader's Patroni stopped): the JSON report, every fault applied, no
# error reaching the workload, reads on replicas, the failover timed (when Patroni made one), and
# the cluster removed at the end (about 35-45 s).
#
#   bash tests/cli/test_demo_patroni.sh TETHER_BINARY ON|OFF
#
# ON|OFF: whether the build has Patroni support (TETHER_HAS_PATRONI). Exits
# 77 (ctest: skipped) before the run when Patroni, etcd or jq are not
# installed (scripts/install-deps installs them).
# `A && B || fail` below means "fail unless both hold": intended.
# shellcheck disable=SC2015
set -uo pipefail
bin=${1:?usage: test_demo_patroni.sh TETHER_BINARY ON|OFF}
have=${2:?usage: test_demo_patroni.sh TETHER_BINARY ON|OFF}
fail() {
  echo "FAIL: $*" >&2
  # The run's own account, when there was a run: its faults and progress.
  [ -z "${scratch:-}" ] || [ ! -s "$scratch/err.txt" ] || tail -n 40 "$scratch/err.txt" >&2
  exit 1
}

grep -q -- "--patroni" <<<"$("$bin" demo --help)" || fail "demo --help does not name --patroni"
grep -q "usage: tether demo --patroni" <<<"$("$bin" demo --patroni --help)" || fail "demo --patroni --help"
err=$("$bin" demo --patroni --seconds 5 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--seconds" <<<"$err" || fail "--seconds 5 with --patroni: exit $rc, '$err'"
err=$("$bin" demo --patroni --svg x.svg 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--svg" <<<"$err" || fail "--svg with --patroni: exit $rc, '$err'"

if [ "$have" != ON ]; then
  err=$("$bin" demo --patroni --seconds 20 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q "built without Patroni support" <<<"$err" ||
    fail "a build without Patroni: exit $rc, '$err'"
  echo "test_demo_patroni: all checks passed (a build without Patroni support)"
  exit 0
fi

missing=()
for t in patroni patronictl etcd jq; do command -v "$t" >/dev/null || missing+=("$t"); done
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=("PostgreSQL server (initdb)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "SKIP: the run of cli.demo_patroni needs ${missing[*]}; run scripts/install-deps"
  exit 77
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$bin" demo --patroni --seconds 25 --json >"$scratch/out.json" 2>"$scratch/err.txt"
rc=$?
dir=$(sed -n 's/^tether demo: cluster in \(.*\) (removed at the end)$/\1/p' "$scratch/err.txt")
if [ $rc -ne 0 ]; then
  cat "$scratch/out.json" >&2
  fail "tether demo --patroni exited $rc"
fi
[ -n "$dir" ] || fail "no 'cluster in' line"
[ ! -e "$dir" ] || fail "the cluster's directory $dir is left"
left=$(pgrep -af -- "$dir" || true)
[ -z "$left" ] || fail "processes of $dir left: $left"
grep -qE '^ *[0-9]+s .* ops/s .* leader 127\.0\.0\.1:[0-9]+' "$scratch/err.txt" || fail "no progress lines"
j=$scratch/out.json
jq -e . "$j" >/dev/null || fail "not JSON: $(head -c 300 "$j")"
[ "$(jq '.patroni' "$j")" = true ] || fail "patroni is not true"
[ "$(jq '.app_errors' "$j")" = 0 ] || fail "errors reached the workload: $(jq -c . "$j")"
[ "$(jq '[.faults[] | select(.applied)] | length' "$j")" = 3 ] || fail "not 3 faults applied: $(jq -c .faults "$j")"
[ "$(jq -r '[.faults[].kind] | join(",")' "$j")" = switchover,kill-leader,stop-leader-patroni ] ||
  fail "faults: $(jq -c .faults "$j")"
[ "$(jq '.reads_standby > 0 and .writes > 0 and .patroni_requests > 0' "$j")" = true ] ||
  fail "no reads on a replica, writes or REST requests: $(jq -c . "$j")"
# The failover is judged when Patroni made one with a second of the run
# left: its leader's Patroni, stopped, may hold the leader key (seen once in
# a dozen runs: the old leader kept taking writes, and no node led within
# 30 s), and tether cannot write to a leader that does not exist.
judged=$(jq '.faults[2].promotion_ms >= 0 and
  .faults[2].at_ms + .faults[2].promotion_ms + 1000 <= .seconds * 1000' "$j")
if [ "$judged" = true ]; then
  [ "$(jq '.failover_ms > 0 and .failover_ms < 15000' "$j")" = true ] || fail "failover_ms: $(jq -c . "$j")"
  [ "$(jq '[.faults[] | select(.recovery_ms < 0)] | length' "$j")" = 0 ] ||
    fail "a fault without writes on the leader again: $(jq -c .faults "$j")"
else
  echo "note: Patroni showed no new leader with a second of the run left (promotion_ms $(jq .faults[2].promotion_ms "$j")): the failover is not judged"
  [ "$(jq '[.faults[0:2][] | select(.recovery_ms < 0)] | length' "$j")" = 0 ] ||
    fail "a fault without writes on the leader again: $(jq -c .faults "$j")"
fi
echo "test_demo_patroni: all checks passed ($(jq -c '{ops, failover_ms, patroni_requests, recovery: [.faults[].recovery_ms]}' "$j"))"
