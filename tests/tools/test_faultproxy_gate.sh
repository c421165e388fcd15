#!/usr/bin/env bash
# test_faultproxy_gate.sh - the fault proxy's counting mode (gate), which
# bench/run-storm drives: down (every connect reset, counted), then at most
# N connects a second forwarded and the rest answered as PostgreSQL does
# when overloaded (53300), counted per second. No server needed: the
# forwarded ones go to a port nothing listens on.
set -euo pipefail
fp=${1:?usage: test_faultproxy_gate.sh FAULTPROXY}
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
# A loopback port with no listener: the target.
dead=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$fp" serve --listen 0 --target "127.0.0.1:$dead" --control "$dir/ctl" >"$dir/out" 2>"$dir/err" &
pid=$!
for _ in $(seq 50); do grep -q '^port ' "$dir/out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/^port //p' "$dir/out")
[ -n "$port" ] || fail "proxy did not start: $(cat "$dir/err")"
# connect N: what each of N connects hears first: E53300 (busy), RST, EOF.
probe() {
  python3 - "$port" "$1" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
out = []
for _ in range(n):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=3)
        s.sendall(b"\0\0\0\x08\x04\xd2\x16\x2f")  # an SSLRequest, as libpq
        d = s.recv(256)
        out.append("busy" if d[:1] == b"E" and b"C53300\0" in d else ("eof" if not d else "other"))
        s.close()
    except (ConnectionResetError, BrokenPipeError):
        out.append("reset")
print(" ".join(out))
PY
}
"$fp" ctl "$dir/ctl" 'gate -1' >/dev/null || fail "gate -1"
r=$(probe 3)
[ "$r" = "reset reset reset" ] || fail "down: want 3 resets, got '$r'"
"$fp" ctl "$dir/ctl" 'gate 2' >/dev/null || fail "gate 2"
r=$(probe 5)
busy=$(grep -o busy <<<"$r" | wc -l)
[ "$busy" -eq 3 ] || fail "gate 2: want 3 of 5 refused as busy, got '$r'"
c=$("$fp" ctl "$dir/ctl" counts) || fail "counts: $c"
echo "$c"
total=$(sed -E 's/.*attempts=([0-9,]*).*/\1/' <<<"$c" | tr ',' '\n' | awk '{s+=$1} END{print s}')
adm=$(sed -E 's/.*admitted=([0-9,]*).*/\1/' <<<"$c" | tr ',' '\n' | awk '{s+=$1} END{print s}')
[ "$total" -eq 8 ] || fail "want 8 attempts counted, got $total"
[ "$adm" -eq 2 ] || fail "want 2 admitted, got $adm"
"$fp" ctl "$dir/ctl" 'gate x' >/dev/null && fail "bad gate accepted"
"$fp" ctl "$dir/ctl" pass >/dev/null || fail "pass"
c=$("$fp" ctl "$dir/ctl" counts)
grep -q "seconds=0 " <<<"$c" || fail "pass did not end the counting mode: $c"
echo "test_faultproxy_gate: all checks passed"
