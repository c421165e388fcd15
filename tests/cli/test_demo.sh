#!/usr/bin/env bash
# test_demo.sh - `tether demo` on its own scratch cluster: the JSON report's
# contract and what it proves (idempotent work saw no error, no insert was
# applied twice, none acknowledged is missing, every fault was done and
# recovered from; the job worker's transactions: none applied twice or half,
# none acknowledged missing; after each fault, writes back in both pools
# within 1 s of the later of the server's return and the breaker's period
# then), the SVG, that Ctrl-C removes everything, and bad input.
set -euo pipefail
bin=${1:?usage: test_demo.sh TETHER_BINARY}
fail() { echo "FAIL: $*" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# As root the servers run as tetherpg, which must reach the binaries.
[ "$(id -u)" -ne 0 ] || chmod -R a+rX "$(dirname "$bin")"

# Bad input first: exit 2 naming the option, before any server starts.
set +e
err=$("$bin" demo --seconds 5 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--seconds" <<<"$err" || fail "--seconds 5: rc=$rc $err"
err=$("$bin" demo --pool 0 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--pool" <<<"$err" || fail "--pool 0: rc=$rc $err"
err=$("$bin" demo --bogus 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--bogus" <<<"$err" || fail "--bogus: rc=$rc $err"
set -e
grep -q "usage: tether demo" <<<"$("$bin" demo --help)" || fail "--help"

# The run: 30 s (room for every fault of the schedule on a loaded machine).
rc=0
"$bin" demo --seconds 30 --json --svg "$scratch/t.svg" >"$scratch/out.json" \
  2>"$scratch/err.txt" || rc=$?
cat "$scratch/err.txt" >&2
cat "$scratch/out.json"
[ $rc -eq 0 ] || fail "tether demo exited $rc"
python3 - "$scratch/out.json" <<'PY' || fail "report checks"
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("ops", "app_errors", "retries", "duplicates", "missing", "faults",
          "failover_ms"):
    assert k in r, f"no {k}"
assert r["ops"] > 1000, f"ops {r['ops']}"
assert r["app_errors"] == 0, f"idempotent work saw {r['app_errors']} errors"
assert r["duplicates"] == 0, f"{r['duplicates']} inserts applied twice"
assert r["missing"] == 0, f"{r['missing']} acknowledged inserts missing"
assert r["writes_acked"] > 0 and r["rows"] >= r["writes_acked"]
kinds = [f["kind"] for f in r["faults"]]
want = ["terminate", "restart", "hang", "too-many", "blackhole", "failover"]
assert kinds == want, f"faults {kinds}"
for k in ("jobs_ok", "jobs_acked", "jobs_duplicates", "jobs_missing",
          "jobs_partial", "writes_back_late"):
    assert k in r, f"no {k}"
assert r["jobs_ok"] > 100, f"jobs {r['jobs_ok']}"
assert r["jobs_duplicates"] == 0, f"{r['jobs_duplicates']} jobs applied twice"
assert r["jobs_missing"] == 0, f"{r['jobs_missing']} acknowledged jobs missing"
assert r["jobs_partial"] == 0, f"{r['jobs_partial']} jobs half applied"
for f in r["faults"]:
    assert f["applied"], f"{f['kind']} not done: {f['detail']}"
    assert f["recovery_ms"] >= 0, f"{f['kind']}: no success after it"
    assert f["app_errors"] == 0, f"{f['kind']}: idempotent errors"
    for k in ("back_at_ms", "writes_back_ms", "writes_back_allowed_ms",
              "writes_back_late", "writes_back"):
        assert k in f, f"{f['kind']}: no {k}"
    assert not f["writes_back_late"], \
        f"{f['kind']}: writes back late: {f['writes_back']}"
assert r["writes_back_late"] == 0
assert r["failover_ms"] > 0
print("report ok:", r["ops"], "ops,", r["retries"], "retries, failover",
      r["failover_ms"], "ms")
PY
grep -q "fault: failover" "$scratch/err.txt" || fail "faults not named on screen"
grep -q "ops/s" "$scratch/err.txt" || fail "no progress lines"
! grep -q "tether-secret" "$scratch/out.json" "$scratch/err.txt" ||
  fail "the password appears in the output"
head -c 200 "$scratch/t.svg" | grep -q "<svg" || fail "no SVG"
for k in terminate restart hang too-many blackhole failover; do
  grep -q ">$k<" "$scratch/t.svg" || fail "SVG lacks the $k marker"
done
dir=$(sed -n 's/^tether demo: cluster in \(.*\) (removed at the end)$/\1/p' "$scratch/err.txt")
[ -n "$dir" ] && [ ! -e "$dir" ] || fail "cluster directory '$dir' left behind"

# Ctrl-C in the middle: exit 130, cluster and proxies gone.
"$bin" demo --seconds 60 >"$scratch/int.out" 2>"$scratch/int.err" &
pid=$!
for _ in $(seq 1 300); do
  grep -q "fault: terminate in force" "$scratch/int.err" 2>/dev/null && break
  sleep 0.1
done
dir=$(sed -n 's/^tether demo: cluster in \(.*\) (removed at the end)$/\1/p' "$scratch/int.err")
[ -n "$dir" ] && [ -d "$dir" ] || fail "no running cluster to interrupt"
kill -INT $pid
rc=0
wait $pid || rc=$?
[ $rc -eq 130 ] || fail "interrupted demo exited $rc, want 130"
[ ! -e "$dir" ] || fail "interrupted demo left $dir"
! pgrep -f "postgres -D $dir" >/dev/null || fail "servers of $dir still run"
! pgrep -f "faultproxy serve .*$dir" >/dev/null || fail "fault proxies still run"
echo "test_demo: all checks passed"
