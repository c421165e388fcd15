#!/usr/bin/env bash
# test_bench_read_only.sh - `tether bench query --read-only` against the
# scratch cluster: the reads land on the standby, as the pool counts them
# and as each node counts them (pg_stat_database, pg_stat_activity), and the
# password never shows in the output.
#
#   scripts/pg-cluster run -- bash tests/integration/test_bench_read_only.sh TETHER
set -euo pipefail
tether=${1:?usage: test_bench_read_only.sh TETHER (through scripts/pg-cluster run)}
fail() { echo "FAIL: $*" >&2; exit 1; }
for v in PRIMARY_PORT STANDBY_PORT PGC_HOST PGC_USER PGC_PASSWORD PGC_DB; do
  [ -n "${!v:-}" ] || fail "$v is not set: run this through scripts/pg-cluster run"
done
ci="host=$PGC_HOST,$PGC_HOST port=$PRIMARY_PORT,$STANDBY_PORT user=$PGC_USER password=$PGC_PASSWORD dbname=$PGC_DB"

out=$("$tether" bench query --conninfo "$ci" --threads 2 --pool 2 --seconds 1 --read-only --json 2>&1)
echo "$out"
grep -q -- "$PGC_PASSWORD" <<<"$out" && fail "the password is in the output"
python3 - "$out" "$PRIMARY_PORT" "$STANDBY_PORT" <<'PY' || fail "bench --read-only figures"
import json, sys
r = json.loads(sys.argv[1].strip().splitlines()[-1])
primary, standby = sys.argv[2], sys.argv[3]
nodes = {n["port"]: n for n in r["nodes"]}
assert r["read_only"] is True
assert r["errors"] == 0, r
assert r["ops_per_sec"] > 0 and r["reads_standby"] > 0, r
assert r["reads_primary"] == 0, r
assert nodes[standby]["role"] == "standby" and nodes[primary]["role"] == "primary", nodes
# Every read is a committed transaction on the standby; the primary saw
# only the warm-up and the monitor.
assert nodes[standby]["xact_commit"] >= r["reads_standby"], nodes
assert nodes[primary]["xact_commit"] < 100, nodes
assert nodes[standby]["backends"] == 2 and nodes[primary]["backends"] == 2, nodes
print("ok: %d reads on the standby, the standby committed %d, the primary %d"
      % (r["reads_standby"], nodes[standby]["xact_commit"], nodes[primary]["xact_commit"]))
PY

# The human form names both nodes with their role.
out=$("$tether" bench query --conninfo "$ci" --threads 1 --pool 1 --seconds 1 --read-only 2>&1)
echo "$out"
grep -q "node $PGC_HOST:$STANDBY_PORT (standby)" <<<"$out" || fail "human output: no standby line"
grep -q "node $PGC_HOST:$PRIMARY_PORT (primary)" <<<"$out" || fail "human output: no primary line"
echo "PASS"
