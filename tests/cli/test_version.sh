#!/usr/bin/env bash
# test_version.sh - `tether version`, `tether -V` and `tether --version`
# print "tether MAJOR.MINOR.PATCH", the version include/tether.h declares
# (tether_version()), and exit 0; `tether version --help` prints a usage;
# a stray argument is a usage error (exit 2); the top-level help lists the
# command.
set -uo pipefail
bin=${1:?usage: test_version.sh TETHER_BINARY}
here=$(cd "$(dirname "$0")" && pwd)
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

h=$here/../../include/tether.h
v=$(for p in MAJOR MINOR PATCH; do
  sed -n -E "s/^#define TETHER_VERSION_$p ([0-9]+)$/\1/p" "$h"
done | paste -sd. -)
[[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "FAIL: no version in $h" >&2; exit 1; }
echo "tether.h declares $v"

for args in version -V --version; do
  out=$("$bin" $args 2>&1) rc=$?
  echo "tether $args -> rc=$rc: $out"
  [ "$rc" -eq 0 ] || fail "tether $args: exit $rc"
  [ "$out" = "tether $v" ] || fail "tether $args printed '$out', want 'tether $v'"
done

out=$("$bin" version --help 2>&1) rc=$?
[ "$rc" -eq 0 ] && grep -q "usage: tether version" <<<"$out" || fail "tether version --help: rc=$rc $out"

out=$("$bin" version extra 2>&1 >/dev/null) rc=$?
echo "tether version extra -> rc=$rc: ${out%%$'\n'*}"
[ "$rc" -eq 2 ] && grep -q "unexpected argument 'extra'" <<<"$out" ||
  fail "tether version extra: rc=$rc $out"

grep -q -E '^  version ' <<<"$("$bin" --help)" || fail "tether --help does not list version"

[ "$fails" -eq 0 ] || { echo "test_version: $fails checks failed" >&2; exit 1; }
echo "test_version: all checks passed"
