#!/usr/bin/env bash
# test_plan.sh - `tether plan`: the JSON contract (with the seed on every
# line), the mirroring table (docs/schedules.md, "Mirroring"; 15 s: budgets
# 1.2/1.2/2.4/2.4/3.6/3.6 s, pauses 100 and 200 ms), fast failures
# (--fail-after), the streaming order (docs/schedules.md, "Streaming": hosts
# x ports, doubling pauses), sequential backoffs and their failing sequence
# by default, plans reproduced from their seed, --spec against a backoff
# --strategy, human output, --help and input errors (exit 2, option named).
# Uses grep/awk/sed only.
set -euo pipefail
bin=${1:?usage: test_plan.sh TETHER_BINARY}
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { echo "check: $*"; }

# Field n of every JSON line that has it, one per line.
col() { sed -n -E "s/.*\"$1\":(-?[0-9]+).*/\1/p"; }
joined() { paste -sd, -; }
# The lines without their seed field.
noseed() { sed -E 's/,"seed":[0-9]+\}$/}/'; }

check "mirroring 15s: the seed table"
out=$("$bin" plan --strategy mirroring --seed 42 --json)
echo "$out"
[ "$(echo "$out" | col seed | sort -u)" = 42 ] || fail "every line carries the seed 42"
out=$(echo "$out" | noseed)
want='{"attempt":1,"host":"principal","port":5432,"start_ms":0,"budget_ms":1200}
{"attempt":2,"host":"partner","port":5432,"start_ms":1200,"budget_ms":1200}
{"delay_ms":100,"start_ms":2400}
{"attempt":3,"host":"principal","port":5432,"start_ms":2500,"budget_ms":2400}
{"attempt":4,"host":"partner","port":5432,"start_ms":4900,"budget_ms":2400}
{"delay_ms":200,"start_ms":7300}
{"attempt":5,"host":"principal","port":5432,"start_ms":7500,"budget_ms":3600}
{"attempt":6,"host":"partner","port":5432,"start_ms":11100,"budget_ms":3600}'
[ "$out" = "$want" ] || fail "mirroring 15s plan differs from the seed table"
# Every line is one of the two contract shapes, with the seed last.
"$bin" plan --strategy mirroring --seed 42 --json |
  grep -v -E '^\{"attempt":[0-9]+,"host":"[^"]*","port":[0-9]+,"start_ms":[0-9]+,"budget_ms":-?[0-9]+,"seed":[0-9]+\}$' |
  grep -v -E '^\{"delay_ms":[0-9]+,"start_ms":[0-9]+,"seed":[0-9]+\}$' && fail "a line fits neither JSON shape"
# Defaults are the same as the explicit 15 s.
[ "$("$bin" plan --json | noseed)" = "$out" ] || fail "default strategy/login timeout"
[ "$("$bin" plan --strategy mirroring --login-timeout 15s --json | noseed)" = "$out" ] || fail "--login-timeout 15s"

check "mirroring 30s: budgets grow by 2.4 s, the last round is cut to what remains"
out=$("$bin" plan --strategy mirroring --login-timeout 30s --json)
[ "$(echo "$out" | col budget_ms | joined)" = "2400,2400,4800,4800,7200,7200,500" ] ||
  fail "30s budgets: $(echo "$out" | col budget_ms | joined)"
[ "$(echo "$out" | col delay_ms | joined)" = "100,200,400" ] || fail "30s pauses"

check "mirroring --fail-after 10ms: pauses 100,200,400,800 then 1000, many more rounds"
out=$("$bin" plan --strategy mirroring --fail-after 10ms --json)
delays=$(echo "$out" | col delay_ms | joined)
echo "pauses: $delays"
case "$delays" in 100,200,400,800,1000,1000,1000,*) ;; *) fail "fast pauses: $delays" ;; esac
n=$(echo "$out" | grep -c '"attempt"')
[ "$n" -gt 20 ] || fail "fast failures: only $n attempts"
# Each attempt starts 10 ms after the previous one unless a pause came between.
echo "$out" | awk -F'[:,}]' '
  /"attempt"/ { s = $8; if (prev != "" && s != prev + 10 + pause) bad = 1; prev = s; pause = 0 }
  /"delay_ms"/ { pause = $2 }
  END { exit bad }' || fail "fast-failure start times"
# Nothing starts after the login timeout; the last budget stops at 15 s.
echo "$out" | awk -F'[:,}]' '/"attempt"/ && $8 + $10 > 15000 { exit 1 }' ||
  fail "an attempt runs past the login timeout"

check "mirroring infinite: alternates, budgets +1200 per pair, stops at --rounds"
out=$("$bin" plan --strategy mirroring --login-timeout inf --rounds 12 --json)
[ "$(echo "$out" | grep -c '"attempt"')" -eq 24 ] || fail "infinite: want 24 attempts"
[ "$(echo "$out" | grep '"attempt":24,' | col budget_ms)" -eq 14400 ] || fail "infinite: budget of attempt 24"
[ "$(echo "$out" | grep '"attempt":23,' | sed -E 's/.*"host":"([^"]*)".*/\1/')" = principal ] ||
  fail "infinite: attempt 23 should go to the principal"
[ "$("$bin" plan --strategy mirroring --login-timeout inf --json | grep -c '"attempt"')" -eq 20 ] ||
  fail "infinite: default 10 rounds"

check "streaming: random start in [1000,5000], hosts x ports in order, doubling pauses"
out=$("$bin" plan --strategy streaming --hosts a,b --ports 1,2,3 --seed 7 --rounds 3 --json)
echo "$out"
first=$(head -1 <<<"$out" | col delay_ms)
[ -n "$first" ] && [ "$first" -ge 1000 ] && [ "$first" -le 5000 ] || fail "streaming first pause $first"
order=$(echo "$out" | grep '"attempt"' | sed -E 's/.*"host":"([^"]*)","port":([0-9]+).*/\1:\2/' | sed -n 1,6p | joined)
[ "$order" = "a:1,a:2,a:3,b:1,b:2,b:3" ] || fail "streaming order: $order"
[ "$(echo "$out" | grep -c '"attempt"')" -eq 18 ] || fail "streaming: 3 passes of 6"
d=$(echo "$out" | col delay_ms | joined)
[ "$d" = "$first,$((first * 2)),$((first * 4))" ] || fail "streaming pauses $d"
grep -q <<<"$out" provision && fail "provisioning must not be a JSON line"
[ "$("$bin" plan --strategy streaming --seed 7 --json)" = "$("$bin" plan --strategy streaming --seed 7 --json)" ] ||
  fail "same seed, different plan"
caps=$("$bin" plan --strategy streaming --seed 1 --rounds 9 --json | col delay_ms | tail -2 | joined)
[ "$caps" = "60000,60000" ] || fail "streaming cap at 60 s: $caps"
human=$("$bin" plan --strategy streaming --seed 7 --rounds 2)
grep -q <<<"$human" 'provisioning' || fail "human streaming output shows provisioning"
grep -q <<<"$human" 'seed 7' || fail "human output prints the seed"

check "a plan is reproduced from the seed it prints (JSON and table)"
for s in streaming exponential grpc reconnect; do
  a=$("$bin" plan --strategy $s --rounds 4 --json)
  seed=$(head -1 <<<"$a" | col seed)
  [ -n "$seed" ] && [ "$seed" -gt 0 ] || fail "$s: no seed on the first JSON line"
  [ "$(echo "$a" | col seed | sort -u)" = "$seed" ] || fail "$s: lines carry different seeds"
  [ "$("$bin" plan --strategy $s --rounds 4 --seed "$seed" --json)" = "$a" ] ||
    fail "$s: --seed $seed does not reproduce the plan"
  # The seed matters (else the check above proves nothing): another seed,
  # another plan.
  [ "$("$bin" plan --strategy $s --rounds 4 --seed $((seed + 1)) --json | noseed)" != "$(noseed <<<"$a")" ] ||
    fail "$s: seeds $seed and $((seed + 1)) give the same plan"
  echo "  $s: seed $seed reproduces the plan"
done
h=$("$bin" plan --strategy exponential --rounds 4)
seed=$(sed -n -E '1s/.*, seed ([0-9]+)$/\1/p' <<<"$h")
[ -n "$seed" ] || fail "the table's header names no seed: $(head -1 <<<"$h")"
[ "$("$bin" plan --strategy exponential --rounds 4 --seed "$seed")" = "$h" ] ||
  fail "the table's seed does not reproduce it"

check "sequential: backoff between passes, login timeout ends it"
out=$("$bin" plan --strategy sequential --spec "fixed base=1s jitter=none timeout=2s" --json)
echo "$out"
[ "$(echo "$out" | col budget_ms | joined)" = "2000,2000,2000,2000,2000,2000" ] || fail "sequential budgets"
[ "$(echo "$out" | col delay_ms | joined)" = "1000,1000" ] || fail "sequential pauses"
out=$("$bin" plan --strategy immediate --fail-after 1s --json)
[ "$(echo "$out" | grep -c '"attempt"')" -eq 4 ] || fail "immediate: two passes over db1,db2"
[ "$(echo "$out" | col delay_ms)" = "0" ] || fail "immediate pause"
for s in grpc exponential fixed incremental reconnect; do
  "$bin" plan --strategy $s --seed 3 --fail-after 100ms --rounds 3 --json | grep -c '"delay_ms"' >/dev/null ||
    fail "strategy $s shows no pause"
done

check "backoff strategies: a failing sequence by default, not one 15 s attempt"
for s in sequential grpc exponential fixed incremental reconnect blocking-period; do
  out=$("$bin" plan --strategy $s --seed 3 --json)
  n=$(echo "$out" | grep -c '"attempt"')
  p=$(echo "$out" | grep -c '"delay_ms"' || true)
  last=$(echo "$out" | tail -1 | col start_ms)
  echo "  $s: $n attempts, $p pauses, last starts at $last ms"
  [ "$n" -ge 4 ] && [ "$p" -ge 1 ] || fail "$s: $n attempts and $p pauses by default"
  # attempts fail at once: the next one starts when the pause ends
  echo "$out" | awk -F'[:,}]' '
    /"attempt"/ { if (t != "" && $8 != t) bad = 1; t = $8 }
    /"delay_ms"/ { t = $4 + $2 }
    END { exit bad }' || fail "$s: attempts do not fail at once"
  [ "$last" -le 15000 ] || fail "$s: starts after the login timeout"
  human=$("$bin" plan --strategy $s --seed 3)
  grep -q 'every attempt fails at once' <<<"$human" ||
    fail "$s: the table does not say attempts fail at once"
done
out=$("$bin" plan --strategy immediate --json --seed 3)
[ "$(echo "$out" | grep -c '"attempt"')" -eq 4 ] || fail "immediate by default: two passes"
# --fail-after still says how long attempts last: one that outlasts the
# login timeout leaves one attempt, as before.
out=$("$bin" plan --strategy exponential --fail-after 1m --json)
[ "$(echo "$out" | grep -c '"attempt"')" -eq 1 ] || fail "--fail-after 1m: want the one attempt"
[ "$(echo "$out" | col budget_ms)" -eq 15000 ] || fail "--fail-after 1m: budget 15000"
# A per-attempt cap from --spec: attempts time out at it, as before.
out=$("$bin" plan --strategy sequential --spec "exponential base=1s jitter=none timeout=3s" --json)
[ "$(echo "$out" | col budget_ms | sort -u | head -1)" -le 3000 ] || fail "spec timeout: budgets"
human=$("$bin" plan --strategy sequential --spec "exponential timeout=3s")
grep -q 'every attempt times out' <<<"$human" || fail "spec timeout: the table says attempts time out"
# mirroring and streaming budgets are their own: unchanged
human=$("$bin" plan --seed 1)
grep -q 'every attempt times out' <<<"$human" || fail "mirroring: attempts time out"

check "--spec: alone it means sequential; with a backoff --strategy it is a usage error"
a=$("$bin" plan --spec "fixed base=1s jitter=none timeout=2s" --seed 5 --json)
[ "$a" = "$("$bin" plan --strategy sequential --spec "fixed base=1s jitter=none timeout=2s" --seed 5 --json)" ] ||
  fail "--spec alone differs from --strategy sequential --spec"
out=$("$bin" plan --strategy sequential --spec "grpc timeout=2s" --seed 5 --json)
grep -q '"delay_ms"' <<<"$out" || fail "--spec \"grpc timeout=2s\" with --strategy sequential"
for s in grpc fixed exponential blocking-period; do
  set +e
  err=$("$bin" plan --strategy $s --spec fixed 2>&1 >/dev/null); rc=$?
  set -e
  echo "  plan --strategy $s --spec fixed -> rc=$rc: ${err%%$'\n'*}"
  [ $rc -eq 2 ] || fail "--strategy $s --spec fixed: rc=$rc, want 2"
  grep -q -- "--strategy $s" <<<"$err" && grep -q -- "--spec 'fixed'" <<<"$err" &&
    grep -q conflict <<<"$err" || fail "--strategy $s --spec fixed: names not both: $err"
done

check "human output: table and summary"
human=$("$bin" plan --strategy mirroring --seed 1)
echo "$human"
grep -q <<<"$human" 'principal:5432' || fail "human table"
grep -q <<<"$human" 'pause 100 ms' || fail "human pause line"
tail -1 <<<"$human" | grep -c '^6 attempts, 14700 ms' || fail "human summary"

check "--help exits 0 and lists every option"
help=$("$bin" plan --help)
for o in --strategy --login-timeout --hosts --ports --seed --fail-after --rounds --spec --json; do
  grep -q <<<"$help" -- "$o" || fail "--help lacks $o"
done
grep -q <<<"$help" 'shown failing at once' || fail "--help does not say attempts fail at once by default"
grep -q <<<"$help" '"seed":s' || fail "--help does not show the seed in the JSON lines"

check "bad input: exit 2, the option and value named"
bad() { # bad WANT_IN_MESSAGE ARGS...
  local want=$1; shift
  set +e
  err=$("$bin" plan "$@" 2>&1 >/dev/null); rc=$?
  set -e
  [ $rc -eq 2 ] || fail "plan $*: rc=$rc, want 2"
  grep -q <<<"$err" -- "$want" || fail "plan $*: message lacks '$want': $err"
  printf '  plan %s -> %s\n' "$*" "${err%%$'\n'*}"
}
bad bogus --strategy bogus
bad --login-timeout --login-timeout 5x
bad 5x --login-timeout 5x
bad --login-timeout --login-timeout 0
bad --ports --ports 99999
bad --ports --ports 5432,abc
bad --hosts --hosts a,,b
bad --fail-after --fail-after soon
bad --rounds --rounds 0
bad --seed --seed -1
bad --frobnicate --frobnicate
bad --spec --strategy sequential --spec "exponential base=zz"
bad mirroring --hosts a,b,c
echo "test_plan: all checks passed"
