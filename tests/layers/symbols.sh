#!/usr/bin/env bash
# symbols.sh LIST - no call points up, judged on what links.
#
# LIST has one line per object file, "layer object", the layers in order
# from the bottom (core) up. A symbol that an object of a layer uses but
# does not define must be defined by that layer or one below it, or by
# none of them (libc, libpq, pthread). A call into a layer above fails,
# whatever header declared it (a public prototype in tether.h hides an
# upward call from the include check, build.layers).
#
# Before judging the real objects, the check proves it can fail: it plants
# an object in the bottom layer that calls a function defined in the top
# one, and expects that to be refused (set CC to the compiler).
set -u
list=$1
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# judge LIST: print each upward use; exit status 1 if any.
judge() {
  awk '!seen[$1]++ { print $1 }' "$1" >"$tmp/order"
  : >"$tmp/defs"
  : >"$tmp/uses"
  local rank=0 layer obj
  while read -r layer; do
    rank=$((rank + 1))
    while read -r l obj; do
      [ "$l" = "$layer" ] || continue
      nm -g --defined-only "$obj" | awk -v r="$rank" -v l="$layer" \
        'NF >= 3 { print $3, r, l }' >>"$tmp/defs"
      nm -u "$obj" | awk -v r="$rank" -v l="$layer" -v o="$obj" \
        '{ print $NF, r, l, o }' >>"$tmp/uses"
    done <"$1"
  done <"$tmp/order"
  awk 'NR == FNR { rank[$1] = $2; owner[$1] = $3; next }
       ($1 in rank) && rank[$1] > $2 {
         n = split($4, p, "/")
         printf "FAIL: %s (%s) calls %s, defined in %s above it\n",
                $3, p[n], $1, owner[$1]
         bad = 1
       }
       END { exit bad }' "$tmp/defs" "$tmp/uses"
}

# The planted upward call: a bottom-layer object using a top-layer symbol.
bottom=$(awk 'NR == 1 { print $1 }' "$list")
top=$(awk '{ l = $1; o = $2 } END { print l, o }' "$list")
victim=$(nm -g --defined-only ${top#* } | awk 'NF >= 3 && $2 == "T" { print $3; exit }')
if [ -z "$victim" ]; then
  echo "FAIL: no function defined in the top layer (${top% *}) to plant a call to"
  exit 1
fi
printf 'extern void %s(void);\nvoid tether__planted(void) { %s(); }\n' \
  "$victim" "$victim" >"$tmp/planted.c"
"$cc" -c -o "$tmp/planted.o" "$tmp/planted.c" || exit 1
{ cat "$list"; echo "$bottom $tmp/planted.o"; } >"$tmp/planted.list"
if judge "$tmp/planted.list" >"$tmp/planted.out"; then
  echo "FAIL: the planted call from $bottom to $victim was not seen"
  exit 1
fi
echo "control: the planted call from $bottom to $victim is refused:"
grep planted "$tmp/planted.out"

if judge "$list"; then
  echo "layers: $(wc -l <"$list") objects, no call points up"
else
  exit 1
fi
