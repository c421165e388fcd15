#!/usr/bin/env bash
# test_chaos.sh - the reliability soak (scripts/chaos) for about two
# minutes: tether demo --chaos must exit 0 (no invariant broke: the job
# worker's transactions and writes back after each fault included), print
# the JSON contract of the reliability campaign, and have done faults of
# every kind, failovers included.
#   test_chaos.sh TETHER_BINARY [SECONDS]
set -euo pipefail
bin=${1:?usage: test_chaos.sh TETHER_BINARY [SECONDS]}
secs=${2:-${TETHER_CHAOS_SECONDS:-120}}
root=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
TETHER_BIN=$bin "$root/scripts/chaos" --seconds "$secs" --json >"$out" || rc=$?
python3 - "$out" "$secs" <<'PY' || fail "report checks"
import json, sys
r = json.load(open(sys.argv[1]))
want = ["seconds", "faults", "ops", "app_errors", "double_leases",
        "accounting_mismatches", "deadline_overruns", "worst_overrun_ms",
        "duplicates", "missing", "rss_growth_pct"]
missing = [k for k in want if k not in r]
assert not missing, f"fields missing: {missing}"
more = ["jobs_ok", "jobs_duplicates", "jobs_missing", "jobs_partial",
        "writes_back_late"]
missing = [k for k in more if k not in r]
assert not missing, f"fields missing: {missing}"
print({k: r[k] for k in want + more + ["errors_within_deadline",
                                       "accounting_checks", "retries", "seed"]})
if r.get("first_overrun"):
    print("first overrun (slack %s ms):" % r.get("overrun_slack_ms"),
          r["first_overrun"])
for f in r["fault_log"]:
    if f["writes_back_late"]:
        print("late:", f["kind"], "at", f["at_ms"], "ms:", f["writes_back"])
for k in ("double_leases", "accounting_mismatches", "deadline_overruns",
          "errors_within_deadline", "duplicates", "missing", "jobs_duplicates",
          "jobs_missing", "jobs_partial", "writes_back_late"):
    assert r[k] == 0, f"{k} = {r[k]} (seed {r['seed']})"
if r["memory_checked"]:  # not under a sanitizer (its allocator grows)
    assert r["rss_growth_pct"] <= 10, f"memory grew {r['rss_growth_pct']} %"
assert r["accounting_checks"] > 0, "the accounting was never checked"
assert r["ops"] > 1000
done = sum(r["faults"].values())
# each fault waits for writes to be back in both pools, which may take the
# breaker's period (up to 15 s) after a stop or a long hang
assert done >= float(sys.argv[2]) / 10, f"only {done} faults"
if float(sys.argv[2]) >= 100:
    assert all(n > 0 for n in r["faults"].values()), f"kinds: {r['faults']}"
PY
[ $rc -eq 0 ] || fail "tether demo --chaos exited $rc"
echo "test_chaos: all checks passed"
