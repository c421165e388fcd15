#!/usr/bin/env bash
# test_top.sh - `tether top` and `tether ctl` against live processes
# (docs/operations.md): a plain libpq program (tests/preload/pq_client)
# under the preload library with TETHER_ADMIN_SOCKET set, and `tether demo
# --admin-socket`. For each: `tether top --once --json` checked by a script
# (the pools array and its fields, no password anywhere); the live screen
# checked through tmux (the header and a pool's row, a refresh each second,
# a narrow terminal, q quits); the socket's file gone when the process
# ends. Against the preload program also: another user cannot connect
# (setpriv to nobody), an unknown pool is an error, and the control
# requests: with the pool's runtime control (the ops-pool branch) they are
# checked to do what they say; without it (src/pool/ops_pending.c) their
# error is checked and the rest is skipped, saying so. Bad input first.
#
#   test_top.sh TETHER PQ_CLIENT PRELOAD_SO
#
# Runs itself under scripts/pg-cluster run (the preload program's server);
# the demo starts a cluster of its own.
set -uo pipefail
usage="usage: test_top.sh TETHER PQ_CLIENT PRELOAD_SO"
bin=${1:?$usage}
client=${2:?$usage}
so=${3:?$usage}
here=$(cd "$(dirname "$0")" && pwd)
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
check() { echo "check: $*"; }
command -v tmux >/dev/null || { echo "FAIL: tmux not found (scripts/install-deps installs it)" >&2; exit 1; }

# Bad input (checked once: before the cluster, not again under it).
if [ -z "${PGC_DIR:-}" ]; then
  out=$("$bin" top 2>&1) rc=$?
  [ $rc -eq 2 ] && grep -q -- "--socket" <<<"$out" || fail "top without --socket: rc=$rc $out"
  out=$("$bin" top --socket /nonexistent/x.sock --once 2>&1) rc=$?
  [ $rc -eq 1 ] && grep -q "cannot connect to /nonexistent/x.sock" <<<"$out" || fail "top, no socket: rc=$rc $out"
  out=$("$bin" ctl --socket /tmp/x.sock frobnicate p 2>&1) rc=$?
  [ $rc -eq 2 ] && grep -q "unknown action 'frobnicate'" <<<"$out" || fail "ctl frobnicate: rc=$rc $out"
  out=$("$bin" ctl --socket /tmp/x.sock resize p 3 2>&1) rc=$?
  [ $rc -eq 2 ] && grep -q "resize wants POOL MIN MAX" <<<"$out" || fail "ctl resize p 3: rc=$rc $out"
  out=$("$bin" ctl --socket /tmp/x.sock resize p 3 2 2>&1) rc=$?
  [ $rc -eq 2 ] && grep -q "MIN (3) is above MAX (2)" <<<"$out" || fail "ctl resize p 3 2: rc=$rc $out"
  out=$("$bin" ctl --socket /tmp/x.sock evict p --close-idle 2>&1) rc=$?
  [ $rc -eq 2 ] && grep -q -- "--close-idle goes with pause" <<<"$out" || fail "ctl evict --close-idle: rc=$rc $out"
  grep -q "usage: tether top" <<<"$("$bin" top --help)" || fail "top --help"
  grep -q "usage: tether ctl" <<<"$("$bin" ctl --help)" || fail "ctl --help"
  check "bad input refused"
  [ "$fails" -eq 0 ] || exit 1
  exec bash "$here/../../scripts/pg-cluster" run -- bash "$0" "$@"
fi

scratch=$(mktemp -d /tmp/tether-top.XXXXXX)
chmod 711 "$scratch"
tm=tether-top-$$ # a tmux server of our own
pids=()
cleanup() {
  tmux -L "$tm" kill-server 2>/dev/null
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$scratch"
}
trap cleanup EXIT
# nobody must reach the binary to be refused by the socket, not by exec
[ "$(id -u)" -ne 0 ] || chmod -R a+rX "$(dirname "$bin")"

wait_socket() { # PATH SECONDS
  for _ in $(seq $(($2 * 10))); do [ -S "$1" ] && return 0; sleep 0.1; done
  return 1
}

# json_check FILE MIN_POOLS SECRET: the --once --json document
json_check() {
  python3 - "$@" <<'PY'
import json, sys
path, min_pools, secret = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(path).read()
assert text.count("\n") == 1, "one line"
assert secret not in text, "the password is in the document"
d = json.loads(text)
pools = d["pools"]
assert len(pools) >= min_pools, f"{len(pools)} pools"
for p in pools:
    for k in ("name", "size", "in_use", "idle", "waiting", "timeouts",
              "breaker", "held", "hosts", "acquire_p50_us", "acquire_p99_us",
              "paused", "min", "max", "read_side"):
        assert k in p, f"no {k} in {p['name']}"
    assert isinstance(p["name"], str) and p["name"]
    for k in ("size", "in_use", "idle", "waiting", "timeouts"):
        assert isinstance(p[k], int) and p[k] >= 0, f"{k}={p[k]}"
    assert p["in_use"] + p["idle"] <= p["size"]
    assert p["breaker"] in ("closed", "open", "half-open"), p["breaker"]
    for h in p["held"]:
        assert isinstance(h["site"], str) and h["age_ms"] >= 0
    for h in p["hosts"]:
        assert h["role"] in ("primary", "standby", "down", "unknown")
print("json:", ", ".join(f"{p['name']} size={p['size']} in_use={p['in_use']} "
                         f"acquires={p['acquires']}" for p in pools))
PY
}

# screen_check NAME SOCKET TEXT: the live view in a tmux pane shows TEXT
screen_check() {
  local s=$1 a b c t1 t2
  tmux -L "$tm" new-session -d -s "$s" -x 132 -y 40 "$bin top --socket $2"
  sleep 2.5
  a=$(tmux -L "$tm" capture-pane -p -t "$s")
  printf '%s\n' "$a" >"$scratch/$s.screen"
  echo "---- tether top ($s), 132 columns:"; printf '%s\n' "$a" | sed '/^$/d' | head -20
  grep -q "^tether top - $2 - [0-9:]\{8\} - [0-9]* pools\? - q quits" <<<"$a" || fail "$s: no header"
  grep -qE "^POOL +SIZE +USE +IDLE +WAIT +MIN +MAX +P50 +P99 +TMOUT +BREAKER +STATE" <<<"$a" ||
    fail "$s: no column heads"
  grep -qF -- "$3" <<<"$a" || fail "$s: '$3' not on the screen"
  grep -q "^  hosts: " <<<"$a" || fail "$s: no hosts line"
  t1=$(sed -n 's/^tether top - .* - \([0-9:]\{8\}\) - .*/\1/p' <<<"$a")
  sleep 1.6
  b=$(tmux -L "$tm" capture-pane -p -t "$s")
  t2=$(sed -n 's/^tether top - .* - \([0-9:]\{8\}\) - .*/\1/p' <<<"$b")
  [ -n "$t1" ] && [ "$t1" != "$t2" ] || fail "$s: no refresh ($t1, then $t2)"
  tmux -L "$tm" resize-window -t "$s" -x 60 -y 40
  sleep 1.6
  c=$(tmux -L "$tm" capture-pane -p -t "$s")
  echo "---- 60 columns:"; printf '%s\n' "$c" | sed '/^$/d' | head -8
  [ -z "$(awk 'length > 60' <<<"$c")" ] || fail "$s: lines wider than 60 columns"
  grep -qE "^POOL +SIZE +USE +IDLE +WAIT +P99" <<<"$c" || fail "$s: no narrow heads"
  grep -q " MIN " <<<"$c" && fail "$s: the wide heads at 60 columns"
  tmux -L "$tm" send-keys -t "$s" q
  for _ in $(seq 30); do tmux -L "$tm" has-session -t "$s" 2>/dev/null || break; sleep 0.1; done
  tmux -L "$tm" has-session -t "$s" 2>/dev/null && fail "$s: q did not quit"
  check "$s: screen, refresh, narrow terminal, q"
}

# ---- a plain libpq program under the preload --------------------------------
ci="host=$PGC_HOST port=$PRIMARY_PORT user=$PGC_USER password=$PGC_PASSWORD dbname=$PGC_DB"
sock=$scratch/preload.sock
TETHER_ADMIN_SOCKET=$sock LD_PRELOAD=$so "$client" failover "$ci" 25 \
  >"$scratch/client.log" 2>&1 &
cpid=$!
pids+=("$cpid")
wait_socket "$sock" 15 || fail "the preload program opened no socket at $sock"
[ "$(stat -c %a "$sock" 2>/dev/null)" = 600 ] || fail "socket mode $(stat -c %a "$sock")"
"$bin" top --socket "$sock" --once --json >"$scratch/preload.json" || fail "top --once --json"
json_check "$scratch/preload.json" 1 "$PGC_PASSWORD" || fail "the preload program's document"
pool=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pools"][0]["name"])' "$scratch/preload.json")
"$bin" top --socket "$sock" --once >"$scratch/once.txt" || fail "top --once"
grep -qF "$pool" "$scratch/once.txt" || fail "top --once does not show $pool"
grep -q $'\033' "$scratch/once.txt" && fail "top --once to a file wrote escapes"
screen_check preload "$sock" "$pool"

# another user: the socket's mode keeps it out
if [ "$(id -u)" -eq 0 ]; then
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" top --socket "$sock" --once 2>&1) rc=$?
  [ $rc -eq 1 ] && grep -q "Permission denied" <<<"$out" || fail "nobody: rc=$rc $out"
  check "another user refused: $out"
fi

out=$("$bin" ctl --socket "$sock" evict no-such-pool 2>&1) rc=$?
[ $rc -eq 1 ] && grep -q "no pool of that name" <<<"$out" || fail "ctl unknown pool: rc=$rc $out"
out=$("$bin" ctl --socket "$sock" pause "$pool" 2>&1) rc=$?
if [ $rc -eq 1 ] && grep -q "not valid in the current state" <<<"$out"; then
  echo "SKIP: tether ctl pause/resume/resize/evict/reconnect need the pool's runtime"
  echo "      control (the ops-pool branch); this build answers: $out"
  for a in resume evict reconnect; do
    out=$("$bin" ctl --socket "$sock" "$a" "$pool" 2>&1) rc=$?
    [ $rc -eq 1 ] && grep -q "^tether ctl: error: " <<<"$out" || fail "ctl $a: rc=$rc $out"
  done
else
  [ $rc -eq 0 ] && [ "$out" = ok ] || fail "ctl pause: rc=$rc $out"
  paused() { "$bin" top --socket "$sock" --once --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["pools"][0]["paused"])'; }
  [ "$(paused)" = True ] || fail "not paused after ctl pause"
  out=$("$bin" ctl --socket "$sock" resume "$pool" 2>&1) || fail "ctl resume: $out"
  [ "$(paused)" = False ] || fail "still paused after ctl resume"
  out=$("$bin" ctl --socket "$sock" resize "$pool" 0 1 --json 2>&1) rc=$?
  [ $rc -eq 0 ] && [ "$out" = '{"ok":true,"answer":"ok"}' ] || fail "ctl resize: rc=$rc $out"
  max=$("$bin" top --socket "$sock" --once --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["pools"][0]["max"])')
  [ "$max" = 1 ] || fail "max $max after resize to 0 1"
  out=$("$bin" ctl --socket "$sock" evict "$pool" 2>&1) rc=$?
  [ $rc -eq 0 ] && grep -q "^ok [0-9]* closed$" <<<"$out" || fail "ctl evict: rc=$rc $out"
  out=$("$bin" ctl --socket "$sock" reconnect "$pool" 2>&1) || fail "ctl reconnect: $out"
  out=$("$bin" ctl --socket "$sock" pause "$pool" --close-idle 2>&1) || fail "ctl pause --close-idle: $out"
  out=$("$bin" ctl --socket "$sock" resume "$pool" 2>&1) || fail "ctl resume: $out"
  check "ctl pause, resume, resize, evict, reconnect"
fi
wait "$cpid"; rc=$?
[ $rc -eq 0 ] || { cat "$scratch/client.log"; fail "the preload program exited $rc"; }
[ -e "$sock" ] && fail "the socket file outlived the preload program"
check "preload program: $(grep measure: "$scratch/client.log")"

# ---- tether demo --admin-socket ------------------------------------------
dsock=$scratch/demo.sock
"$bin" demo --seconds 20 --no-faults --admin-socket "$dsock" >"$scratch/demo.out" 2>"$scratch/demo.err" &
dpid=$!
pids+=("$dpid")
# the pools exist once the cluster is up and the workload runs
for _ in $(seq 900); do
  [ -S "$dsock" ] && grep -q "threads on a pool" "$scratch/demo.err" && break
  kill -0 "$dpid" 2>/dev/null || break
  sleep 0.1
done
sleep 1
"$bin" top --socket "$dsock" --once --json >"$scratch/demo.json" || fail "demo: top --once --json"
json_check "$scratch/demo.json" 2 "password=" || fail "the demo's document"
names=$(python3 -c 'import json,sys; print(" ".join(sorted(p["name"] for p in json.load(open(sys.argv[1]))["pools"])))' "$scratch/demo.json")
[ "$names" = "demo-app demo-jobs" ] || fail "the demo's pools: $names"
screen_check demo "$dsock" "demo-jobs"
kill -INT "$dpid" 2>/dev/null
wait "$dpid"
[ -e "$dsock" ] && fail "the socket file outlived the demo"
check "demo: its pools seen, its socket removed at the end"

[ "$fails" -eq 0 ] || { echo "test_top: $fails checks failed" >&2; exit 1; }
echo "test_top: all checks passed"
