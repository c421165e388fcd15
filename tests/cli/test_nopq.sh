#!/usr/bin/env bash
# test_nopq.sh - a tether built without libpq (cmake -DTETHER_PQ=OFF,
# docs/architecture.md): the binary does not link libpq; `tether demo`,
# `tether bench query` (exit 1) and a probe with the default (pq) driver
# (exit 2, a configuration error) end with a message that says the build
# has no PostgreSQL; the TCP paths work (a probe of a closed port fails as
# a TCP connect, not as a missing driver). Built only in that
# configuration.
set -uo pipefail
bin=${1:?usage: test_nopq.sh TETHER_BINARY}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

lib=$(ldd "$bin" | awk '/libtether\.so/ { print $3 }')
[ -n "$lib" ] || fail "the binary does not load libtether.so"
for f in "$bin" $lib; do
  if ldd "$f" | grep -q libpq; then
    fail "$f links libpq: $(ldd "$f" | grep libpq)"
  fi
done

want_nopq() { # WANT_RC ARGS...: that exit, "without PostgreSQL" on stderr
  local want=$1 out rc
  shift
  out=$("$bin" "$@" 2>&1 >/dev/null) rc=$?
  echo "tether $* -> rc=$rc: $out"
  [ "$rc" -eq "$want" ] || fail "tether $*: exit $rc, want $want"
  grep -q "built without PostgreSQL" <<<"$out" ||
    fail "tether $*: '$out' does not say the build has no PostgreSQL"
}
want_nopq 1 demo --seconds 1
want_nopq 1 bench query --conninfo "host=127.0.0.1"
want_nopq 2 probe "host=127.0.0.1 port=1 connect_timeout=1" # a bad configuration

# The TCP driver is there: a closed port is a connect failure.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
out=$("$bin" probe --driver tcp "host=127.0.0.1 port=$port connect_timeout=2" 2>&1) rc=$?
echo "tether probe --driver tcp (closed port) -> rc=$rc: $out"
[ "$rc" -ne 0 ] || fail "a probe of a closed port succeeded"
grep -q "built without PostgreSQL" <<<"$out" && fail "the TCP probe asked for PostgreSQL"

[ "$fails" -eq 0 ] && echo "test_nopq: all checks passed"
exit $((fails > 0))
