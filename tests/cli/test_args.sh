#!/usr/bin/env bash
# test_args.sh - option parsing of every subcommand (plan, probe, bench
# cycle, bench query, sim storm): --help prints usage and exits 0; an
# unknown option, a missing value, a value given to a flag, a stray
# argument and a bad number or duration each exit 2 with one error line
# that names the option and the value, and nothing on stdout; a stray
# argument and the text after '=' of an unknown option are never echoed
# (they may be pieces of an unquoted connection string: test_secrets.sh).
# None of these needs a server: parsing ends before anything is contacted.
set -uo pipefail
bin=${1:?usage: test_args.sh TETHER_BINARY}
fails=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# usage_err "WANT1|WANT2..." ARGS...: exit 2, empty stdout, and the first
# line of stderr is "tether CMD: ..." holding every WANT (fixed strings).
usage_err() {
  local want=$1 out err first rc w
  shift
  out=$("$bin" "$@" 2>"$tmp") rc=$?
  err=$(<"$tmp")
  first=${err%%$'\n'*}
  echo "tether $*  ->  rc=$rc: $first"
  [ "$rc" -eq 2 ] || { fail "tether $*: exit $rc, want 2"; return; }
  [ -z "$out" ] || fail "tether $*: wrote to stdout: $out"
  [[ $first =~ ^tether\ [a-z\ ]*:\  ]] || fail "tether $*: no 'tether CMD:' error"
  IFS='|' read -ra ws <<<"$want"
  for w in "${ws[@]}"; do
    [[ $first == *"$w"* ]] || fail "tether $*: error does not say '$w': $err"
  done
}

# help CMD...: --help and -h print a usage to stdout and exit 0, also after
# other options.
help() {
  local out rc
  for h in --help -h; do
    out=$("$bin" "$@" "$h" 2>&1) rc=$?
    [ "$rc" -eq 0 ] && grep -q "usage: tether" <<<"$out" || fail "tether $* $h: rc=$rc $out"
  done
  out=$("$bin" "$@" --json --help 2>&1) rc=$?
  [ "$rc" -eq 0 ] && grep -q "usage: tether" <<<"$out" || fail "tether $* --json --help: rc=$rc"
}

# common CMD...: what every subcommand rejects the same way.
common() {
  usage_err "unknown option|--frobnicate" "$@" --frobnicate
  usage_err "unknown option|--frobnicate'" "$@" --frobnicate=3
  usage_err "unknown option|-q" "$@" -q
  usage_err "--json|takes no value" "$@" --json=1
}

q="host=127.0.0.1 port=1 connect_timeout=1"

echo "== plan"
help plan
common plan
usage_err "unexpected argument|extra" plan extra
for o in --strategy --login-timeout --hosts --ports --spec --seed --rounds --fail-after; do
  usage_err "$o|needs a value" plan "$o"
done
usage_err "--hosts|needs a value|--json" plan --hosts --json
usage_err "--seed|'x'" plan --seed x
usage_err "--seed|'-1'" plan --seed -1
usage_err "--seed|'1.5'" plan --seed 1.5
usage_err "--seed|'+3'" plan --seed +3
usage_err "--seed|'99999999999999999999'" plan --seed 99999999999999999999
usage_err "--rounds|'0'" plan --rounds 0
usage_err "--rounds|'100001'" plan --rounds=100001
usage_err "--rounds|''" plan --rounds=
usage_err "--ports|'0'" plan --ports 0
usage_err "--ports|'70000'" plan --ports 5432,70000
usage_err "--login-timeout|'5x'" plan --login-timeout 5x
usage_err "--login-timeout|'0'" plan --login-timeout 0
usage_err "--login-timeout|'9999h'" plan --login-timeout 9999h
usage_err "--fail-after|'-5ms'" plan --fail-after -5ms
usage_err "--fail-after|' 5'" plan --fail-after ' 5'
usage_err "--strategy|'sideways'" plan --strategy sideways
usage_err "ambiguous option|--s" plan --s 1
# Abbreviations that name one option and the --opt=value form still work.
[ "$("$bin" plan --strat=streaming --login=2s --rounds=1 --seed=7 --json)" = \
  "$("$bin" plan --strategy streaming --login-timeout 2s --rounds 1 --seed 7 --json)" ] ||
  fail "plan: --opt=value or an unambiguous abbreviation differs"

echo "== probe"
help probe
common probe
usage_err "connection string is required" probe
usage_err "connection string is required" probe --json
usage_err "one connection string only|not shown" probe a b

echo "== bench cycle"
help bench cycle
common bench cycle
usage_err "unexpected argument|not shown" bench cycle extra
for o in --threads --pool --seconds; do
  usage_err "$o|needs a value" bench cycle "$o"
done
usage_err "--threads|needs a value|--pool" bench cycle --threads --pool 2
usage_err "--threads|'0'" bench cycle --threads 0
usage_err "--threads|'4097'" bench cycle --threads 4097
usage_err "--threads|'2x'" bench cycle --threads 2x
usage_err "--pool|'1e3'" bench cycle --pool 1e3
usage_err "--pool|'-1'" bench cycle --pool=-1
usage_err "--seconds|'0'" bench cycle --seconds 0
usage_err "--seconds|'-1'" bench cycle --seconds -1
usage_err "--seconds|'soon'" bench cycle --seconds soon
usage_err "unknown benchmark|'nope'" bench nope
usage_err "unknown benchmark|'--bogus'" bench --bogus

echo "== bench query"
help bench query
common bench query --conninfo "$q"
usage_err "--conninfo is required" bench query
usage_err "--conninfo is required" bench query --threads 2
usage_err "--conninfo|needs a value" bench query --conninfo
usage_err "--conninfo|needs a value|--threads" bench query --conninfo --threads 2
usage_err "--conninfo|empty" bench query --conninfo ''
usage_err "unexpected argument|not shown" bench query --conninfo "$q" extra
for o in --threads --pool --seconds --mode; do
  usage_err "$o|needs a value" bench query --conninfo "$q" "$o"
done
usage_err "--threads|'0'" bench query --conninfo "$q" --threads 0
usage_err "--threads|'eight'" bench query --conninfo "$q" --threads eight
usage_err "--pool|'100001'" bench query --conninfo "$q" --pool 100001
usage_err "--pool|'99999999999999999999'" bench query --conninfo "$q" --pool 99999999999999999999
usage_err "--seconds|'0ms'" bench query --conninfo "$q" --seconds 0ms
usage_err "--seconds|'1y'" bench query --conninfo "$q" --seconds 1y
usage_err "--mode|'sideways'" bench query --conninfo "$q" --mode sideways

echo "== sim storm"
help sim storm
common sim storm
usage_err "unexpected argument|extra" sim storm extra
for o in --clients --down --capacity --strategy --seed; do
  usage_err "$o|needs a value" sim storm "$o"
done
usage_err "--clients|needs a value|--json" sim storm --clients --json
usage_err "--clients|'-3'" sim storm --clients -3
usage_err "--clients|'0'" sim storm --clients 0
usage_err "--clients|'1000001'" sim storm --clients 1000001
usage_err "--capacity|'0'" sim storm --capacity 0
usage_err "--capacity|'ten'" sim storm --capacity ten
usage_err "--seed|'1.5'" sim storm --seed 1.5
usage_err "--down|'5x'" sim storm --down 5x
usage_err "--down|'-5s'" sim storm --down -5s
usage_err "--down|'721h'" sim storm --down 721h
usage_err "--strategy|'bogus'" sim storm --strategy full,bogus
usage_err "unknown simulation|'flood'" sim flood
# A valid --opt=value run still works.
"$bin" sim storm --clients=100 --down=1s --capacity=50 --strategy=full --json |
  grep -q '"strategy":"full"' || fail "sim storm with --opt=value"

echo "== top level"
out=$("$bin" nope 2>&1) rc=$?
[ "$rc" -eq 2 ] && grep -q "unknown command 'nope'" <<<"$out" || fail "unknown command: rc=$rc"
grep -q "usage: tether" <<<"$("$bin" --help)" || fail "tether --help"

# --json stays valid JSON (UTF-8) whatever bytes an argument carries: a
# host named with a byte that is not UTF-8, a DEL, and a valid e-acute.
host=$(printf 'a\xff\xc3\xa9b\x7f')
out=$("$bin" probe "host=$host port=1 connect_timeout=1" --json 2>/dev/null) || true
printf '%s\n' "$out" | python3 -c '
import json, sys
lines = sys.stdin.buffer.read().decode("utf-8").splitlines()
assert lines and all(json.loads(l) for l in lines)
assert "a\ufffd\u00e9b\u007f" in json.loads(lines[0])["host"]
' || fail "--json with bytes that are not UTF-8"

[ "$fails" -eq 0 ] || { echo "test_args: $fails checks failed" >&2; exit 1; }
echo "test_args: all checks passed"
