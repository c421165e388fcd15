#!/usr/bin/env bash
# check_man.sh - the man page tether(1): groff renders it without a warning,
# and it names every command, subcommand and option that the tether binary's
# own --help texts name (so a new option cannot go undocumented).
#
#   check_man.sh TETHER docs/tether.1
set -uo pipefail
tether=${1:?usage: check_man.sh TETHER MANPAGE}
page=${2:?usage: check_man.sh TETHER MANPAGE}
fails=0
fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}

command -v groff >/dev/null || { echo "check_man.sh: groff not found (scripts/install-deps installs groff-base)" >&2; exit 1; }

# 1. It renders, and neither groff (-ww: every warning) nor the man macros
#    complain.
warnings=$(groff -man -Tutf8 -ww "$page" 2>&1 >/dev/null)
[ -z "$warnings" ] || fail "groff warnings: $warnings"
lines=$(groff -man -Tutf8 "$page" 2>/dev/null | wc -l)
[ "$lines" -gt 50 ] || fail "the page renders to only $lines lines"

# 2. Every command and option of the --help texts appears in the page's
#    source (font changes removed, \- read as -).
text=$(sed -e 's/\\f[BIRP]//g' -e 's/\\f(CW//g' -e 's/\\-/-/g' -e 's/\\(em/--/g' \
  -e 's/\\&//g' "$page")
# has WORDS: the page holds WORDS, not as part of a longer name
# (--fail-after is not --fail-afterwards); WORDS are [a-z -] only.
has() { grep -qE -- "(^|[^a-z-])$1([^a-z-]|\$)" <<<"$text"; }

main_help=$("$tether" --help 2>&1)
commands=$(awk '/^commands:/ { on = 1; next } on && NF == 0 { on = 0 } on { print $1 }' <<<"$main_help")
[ -n "$commands" ] || fail "no commands in 'tether --help'"
helps=$main_help
for c in $commands; do
  has "tether $c" || fail "command '$c' is not in the page"
  h=$("$tether" "$c" --help 2>&1)
  helps+=$'\n'$h
  # subcommands named in the help: "tether bench query", "tether sim storm"
  for sub in $(grep -oE "tether $c [a-z]+" <<<"$h" | awk '{ print $3 }' | sort -u); do
    has "tether $c $sub" || fail "subcommand '$c $sub' is not in the page"
    helps+=$'\n'$("$tether" "$c" "$sub" --help 2>&1)
  done
done
for opt in $(grep -oE -- '(^|[^a-z-])--[a-z][a-z-]*' <<<"$helps" | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
  has "$opt" || fail "option '$opt' (in a --help text) is not in the page"
done
if [ "$fails" -ne 0 ]; then
  echo "check_man.sh: $fails check(s) failed" >&2
  exit 1
fi
echo "check_man.sh: ok ($(wc -w <<<"$commands") commands, $lines lines)"
