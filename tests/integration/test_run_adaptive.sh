#!/usr/bin/env bash
# test_run_adaptive.sh - a smoke run of bench/run-adaptive (bench/README.md,
# "adaptive"), about 20 s: short single-process runs of two workloads with
# two fixed sizes (and the adaptive pool when the library has it) and a
# small fleet (hand-tuned and adaptive pools), in the script's own scratch
# cluster. Checks that it exits 0, prints every JSON line with its figures
# (the adaptive ones numbers, or null with the reason given), counts no
# error in the fixed runs, and prints no password.
#
#   bash tests/integration/test_run_adaptive.sh ROOT BENCH_ADAPTIVE
set -euo pipefail
root=${1:?usage: test_run_adaptive.sh ROOT BENCH_ADAPTIVE}
bin=${2:?usage: test_run_adaptive.sh ROOT BENCH_ADAPTIVE}
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
rc=0
"$root/bench/run-adaptive" --bin "$bin" --json --quick --secs 1 --warmup 0.2 \
  --threads 16 --workloads select1,io --sizes 2,8 --no-slowdown \
  --fleet-procs 4 --fleet-secs 1 --fleet-warmup 1 --fleet-modes tuned,adaptive >"$out" 2>"$err" || rc=$?
cat "$err" >&2
cat "$out"
[ $rc -eq 0 ] || fail "bench/run-adaptive exited with status $rc"
# pg-cluster's password is random per cluster: the test cannot know it, but
# no line may carry a password= keyword.
grep -qi 'password=' "$out" "$err" && fail "a connection string's password is in the output"
python3 - "$out" <<'PY' || fail "bench/run-adaptive's JSON lines"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {r["workload"]: r for r in rows}
assert set(by) == {"select1", "io", "fleet"}, list(by)
for w in ("select1", "io"):
    r = by[w]
    for k in ("adaptive_tps", "best_fixed_tps", "best_fixed_size", "adaptive_p99_ms", "best_fixed_p99_ms"):
        assert k in r, (w, k)
    assert set(r["fixed"]) == {"2", "8"}, r["fixed"]
    for n, v in r["fixed"].items():
        assert v["tps"] > 0 and v["p99_ms"] > 0 and v["errors"] == 0, (w, n, v)
    assert r["best_fixed_size"] in (2, 8) and r["best_fixed_tps"] == r["fixed"][str(r["best_fixed_size"])]["tps"], r
    if r["adaptive_tps"] is None:
        assert r["adaptive_p99_ms"] is None and "not in this build" in r["adaptive"], r
    else:
        assert r["adaptive_tps"] > 0 and r["adaptive_p99_ms"] > 0, r
# pg_sleep(0.005) on 8 connections runs more statements than on 2
assert by["io"]["fixed"]["8"]["tps"] > by["io"]["fixed"]["2"]["tps"], by["io"]["fixed"]
f = by["fleet"]
for k in ("fleet_53300_after_warmup", "fleet_tps", "tuned_fleet_tps", "min_share"):
    assert k in f, k
assert f["tuned_fleet_tps"] > 0 and f["tuned_fleet"]["peak_connections"] > 0, f
assert f["naive_fleet"] is None, f  # not asked for
if f["fleet_tps"] is None:
    assert "not in this build" in f["adaptive"], f
else:
    assert f["fleet_tps"] > 0 and f["min_share"] is not None, f
print("ok: %s" % ", ".join("%s best fixed %s" % (w, by[w]["best_fixed_size"]) for w in ("select1", "io")))
PY
