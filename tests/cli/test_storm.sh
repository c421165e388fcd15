#!/usr/bin/env bash
# test_storm.sh - `tether sim storm`: the JSON contract, the default
# settings' targets (the model runs real pools on a virtual clock and is
# deterministic for a seed, so these are properties of tether's defaults,
# not timings), the limits on the work asked for, and input errors.
set -euo pipefail
bin=${1:?usage: test_storm.sh TETHER_BINARY}
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { echo "$1" | grep "\"strategy\":\"$2\"" | sed -E "s/.*\"$3\":([0-9.]+).*/\1/"; }
le() { awk -v a="$1" -v b="$2" 'BEGIN{exit !(a <= b)}'; }

# The model's scenario scaled down 10x (1000 clients, 50/s: the same 20 s
# floor after a 30 s outage), every strategy.
out=$("$bin" sim storm --clients 1000 --down 30 --capacity 50 --json)
echo "$out"
[ "$(echo "$out" | wc -l)" -eq 6 ] || fail "want 6 JSON lines"
for s in nojitter full equal decorrelated streaming default; do
  grep -q <<<"$out" "^{\"strategy\":\"$s\",\"total_attempts\":[0-9]*,\"peak_after_recovery\":[0-9]*,\"all_connected_s\":[0-9.]*,\"connected\":[0-9]*}$" \
    || fail "no well-formed line for $s"
  [ "$(field "$out" $s connected)" -eq 1000 ] || fail "$s: not every client connected"
done
d_att=$(field "$out" default total_attempts)
d_peak=$(field "$out" default peak_after_recovery)
d_all=$(field "$out" default all_connected_s)
# Nobody connects faster than the server admits: 30 s + 1000/50 s.
le 50 "$d_all" || fail "default connected faster than the server admits"
# Within 1.5x the floor, a few attempts per client, a bounded peak.
le "$d_all" 75 || fail "default: last client at $d_all s, want <= 75"
le "$d_att" 6500 || fail "default: $d_att attempts, want <= 6.5 per client"
le "$d_peak" 200 || fail "default: peak $d_peak, want <= 4x capacity"
# Fewer attempts than every comparison row; a lower peak than every
# exponential one (streaming's, about the same, is checked within 10 %).
for s in nojitter full equal decorrelated streaming; do
  [ "$d_att" -lt "$(field "$out" $s total_attempts)" ] || fail "default makes more attempts than $s"
done
for s in nojitter full equal decorrelated; do
  [ "$d_peak" -lt "$(field "$out" $s peak_after_recovery)" ] || fail "default peaks above $s"
done
le "$d_peak" "$(( $(field "$out" streaming peak_after_recovery) * 11 / 10 ))" || fail "default peaks above streaming"

# The real fleet's scenario (bench/run-storm): 100 clients, 20 s, 20/s:
# <= 4.5 attempts per client, peak <= 1.5x, all back within 15 s.
f=$("$bin" sim storm --clients 100 --down 20 --capacity 20 --strategy default --json)
echo "$f"
le "$(field "$f" default total_attempts)" 450 || fail "fleet: too many attempts"
le "$(field "$f" default peak_after_recovery)" 30 || fail "fleet: peak above 1.5x"
le "$(field "$f" default all_connected_s)" 35 || fail "fleet: not all back within 15 s"
# A blip: down half a second, every client back within about a second.
b=$("$bin" sim storm --clients 100 --down 500ms --capacity 1000 --strategy default --json)
echo "$b"
le "$(field "$b" default all_connected_s)" 1.5 || fail "blip: not noticed within a second"
le "$(field "$b" default total_attempts)" 300 || fail "blip: too many attempts"

# Same seed, same figures; a different seed changes them.
a=$("$bin" sim storm --clients 300 --down 10 --capacity 30 --strategy full,default --seed 5 --json)
b=$("$bin" sim storm --clients 300 --down 10 --capacity 30 --strategy full,default --seed 5 --json)
c=$("$bin" sim storm --clients 300 --down 10 --capacity 30 --strategy full,default --seed 6 --json)
[ "$a" = "$b" ] || fail "same seed gave different results"
[ "$a" != "$c" ] || fail "different seeds gave identical results"

# Human output is a table naming every strategy.
"$bin" sim storm --clients 50 --down 5 --capacity 10 | grep -c "^default " >/dev/null || fail "human table"

# Bad input: exit 2 and the option named; the work asked for is bounded
# (the run time grows with clients x down).
set +e
err=$("$bin" sim storm --clients -3 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--clients" || fail "bad --clients: rc=$rc $err"
err=$("$bin" sim storm --strategy bogus 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" "bogus" || fail "bad --strategy: rc=$rc $err"
err=$("$bin" sim storm --down 5x 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--down" || fail "bad --down: rc=$rc $err"
err=$("$bin" sim storm --clients 10 --down 2h 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" -- "--down.*at most 1h" || fail "--down 2h: rc=$rc $err"
start=$(date +%s)
err=$("$bin" sim storm --clients 100000 --down 1h 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q <<<"$err" "client-seconds" || fail "clients x down: rc=$rc $err"
[ $(( $(date +%s) - start )) -le 2 ] || fail "the refusal took long"
err=$("$bin" sim storm --frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] || fail "unknown option accepted"
"$bin" sim storm --help | grep -c "usage" >/dev/null || fail "--help"
set -e
echo "test_storm: all checks passed"
