#!/usr/bin/env bash
# check.sh CC PROBES - the build refuses an upward include.
#
# Each line of PROBES is "layer header expect -Idir...": a one-line source
# that includes header, compiled with the include path layer is built with
# (the flags), must fail when expect is "fail" (the header belongs to a
# layer above, or the layer is the command line, which sees the public
# headers only) and compile when it is "pass" (a layer below: the control
# that shows the failures come from the include path alone).
set -u
cc=$1
probes=$2
src=$(mktemp --suffix=.c)
trap 'rm -f "$src"' EXIT
pass=0
bad=0
while read -r layer header expect flags; do
  printf '#include "%s"\nint tether__layer_probe;\n' "$header" >"$src"
  # shellcheck disable=SC2086
  if "$cc" -std=c11 -D_GNU_SOURCE -fsyntax-only $flags "$src" 2>/dev/null; then
    got=pass
  else
    got=fail
  fi
  if [ "$got" = "$expect" ]; then
    pass=$((pass + 1))
  else
    echo "FAIL: $layer including $header: compile ${got}ed, expected $expect"
    bad=$((bad + 1))
  fi
done <"$probes"
echo "layers: $pass passed, $bad failed"
[ "$bad" -eq 0 ] && [ "$pass" -gt 0 ]
