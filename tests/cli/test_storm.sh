#!/usr/bin/env bash
# test_storm.sh - `tether sim storm`: JSON contract, the default reconnect
# policy's targets in the 10000-client scenario (a deterministic model, so
# these are properties of the algorithm, not timings), and input errors.
set -euo pipefail
bin=${1:?usage: test_storm.sh TETHER_BINARY}
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$bin" sim storm --clients 10000 --down 30 --capacity 500 --json)
echo "$out"
[ "$(echo "$out" | wc -l)" -eq 6 ] || fail "want 6 JSON lines"
for s in nojitter full equal decorrelated streaming default; do
  grep -q <<<"$out" "^{\"strategy\":\"$s\",\"total_attempts\":[0-9]*,\"peak_after_recovery\":[0-9]*,\"all_connected_s\":[0-9.]*,\"connected\":[0-9]*}$" \
    || fail "no well-formed line for $s"
done
field() { echo "$out" | grep "\"strategy\":\"$1\"" | sed -E "s/.*\"$2\":([0-9.]+).*/\1/"; }
for s in full streaming default; do
  [ "$(field $s connected)" -eq 10000 ] || fail "$s: not every client connected"
done
# Nobody can connect faster than capacity allows: N/C = 20 s after recovery.
awk -v t="$(field default all_connected_s)" 'BEGIN{exit !(t >= 49.0)}' \
  || fail "default connected faster than the server admits"
# The targets: fewer attempts AND sooner than full jitter, peak <= 1.5 x C.
[ "$(field default total_attempts)" -lt "$(field full total_attempts)" ] \
  || fail "default makes more attempts than full jitter"
awk -v d="$(field default all_connected_s)" -v f="$(field full all_connected_s)" \
  'BEGIN{exit !(d < f)}' || fail "default connects later than full jitter"
[ "$(field default peak_after_recovery)" -le 750 ] || fail "default peak above 1.5 x capacity"
# No jitter: every client retries in lock-step, so the peak is the whole herd.
[ "$(field nojitter peak_after_recovery)" -eq 10000 ] || fail "nojitter peak should be N"

# Same seed, same figures; a different seed changes them.
a=$("$bin" sim storm --clients 2000 --down 10 --capacity 100 --strategy full --seed 5 --json)
b=$("$bin" sim storm --clients 2000 --down 10 --capacity 100 --strategy full --seed 5 --json)
c=$("$bin" sim storm --clients 2000 --down 10 --capacity 100 --strategy full --seed 6 --json)
[ "$a" = "$b" ] || fail "same seed gave different results"
[ "$a" != "$c" ] || fail "different seeds gave identical results"

# Human output is a table naming every strategy.
"$bin" sim storm --clients 500 --down 5 --capacity 50 | grep -c "^default " >/dev/null || fail "human table"

# Bad input: exit 2 and the option named.
set +e
err=$("$bin" sim storm --clients -3 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--clients" || fail "bad --clients: rc=$rc $err"
err=$("$bin" sim storm --strategy bogus 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" "bogus" || fail "bad --strategy: rc=$rc $err"
err=$("$bin" sim storm --down 5x 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--down" || fail "bad --down: rc=$rc $err"
err=$("$bin" sim storm --frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] || fail "unknown option accepted"
"$bin" sim storm --help | grep -c "usage" >/dev/null || fail "--help"
set -e
echo "test_storm: all checks passed"
