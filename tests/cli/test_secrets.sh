#!/usr/bin/env bash
# test_secrets.sh - no tether command prints a password: every subcommand
# that takes a connection string (probe, bench query), human and --json,
# success and failure (wrong password, refused port, malformed strings,
# stray and misspelled arguments), stdout and stderr, is searched for the
# known password, each half of a password with a space, and the scratch
# cluster's own password. Runs next to a scratch cluster: re-executes
# itself under scripts/pg-cluster run when PGC_DIR is not set; a second
# login role with the known password is made over the superuser socket.
set -euo pipefail
bin=${1:?usage: test_secrets.sh TETHER_BINARY}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${PGC_DIR:-}" ]; then
  exec bash "$here/../../scripts/pg-cluster" run -- bash "$0" "$bin"
fi
fail() { echo "FAIL: $*" >&2; exit 1; }

PW=S3cr3t-Pa55-XYZ
PW_A=Sp4ce-S3cr3t
PW_B=H4lf_Tw0
secrets=("$PW" "$PW_A" "$PW_B" "$PGC_PASSWORD")
"$PGC_CTL" psql "$PGC_DIR" primary -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
DROP ROLE IF EXISTS tether2;
CREATE ROLE tether2 LOGIN PASSWORD '$PW';
SQL

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
closed=$("$here/../../scripts/free-port")
base="host=$PGC_HOST port=$PRIMARY_PORT dbname=$PGC_DB"
good="$base user=tether2 password=$PW"
good_uri="postgresql://tether2:$PW@$PGC_HOST:$PRIMARY_PORT/$PGC_DB"
wrong="$base user=$PGC_USER password=$PW"
wrong_uri="postgresql://$PGC_USER:$PW@$PGC_HOST:$PRIMARY_PORT/$PGC_DB"
right_pw_bad_db="host=$PGC_HOST port=$PRIMARY_PORT user=$PGC_USER password=$PGC_PASSWORD dbname=nosuchdb"
refused="host=127.0.0.1 port=$closed user=$PGC_USER password=$PW tether_login_timeout=1s"
malformed=(
  "host=h password=$PW bogus"
  "host=h password='$PW"
  "host=h password=$PW_A $PW_B"
  "host=h password=$PW_A $PW_B=1"
  "host=h password=$PW tether_pool_max=abc"
  "host=h password=$PW tether_strategy=bogus"
  "host=a,b port=1,2,3 password=$PW"
  "postgresql://u:$PW%zz@h/d"
  "postgresql://u:$PW@h:notaport/d"
  "postgresql://u:$PW@h/d?a=b=c"
)

n=0
# run EXPECT CMD...: runs tether with the arguments, stdout and stderr to
# one file; EXPECT is ok (exit 0), fail (non-zero) or any.
run() {
  local expect=$1 rc=0
  shift
  n=$((n + 1))
  "$bin" "$@" >"$scratch/$n.out" 2>&1 || rc=$?
  {
    printf '$ tether'
    printf ' %q' "$@"
    printf '  (exit %d)\n' "$rc"
  } >"$scratch/$n.cmd"
  case $expect in
  ok) [ $rc -eq 0 ] || fail "$(cat "$scratch/$n.cmd")"$'\n'"$(cat "$scratch/$n.out")" ;;
  fail) [ $rc -ne 0 ] || fail "$(cat "$scratch/$n.cmd"): should fail" ;;
  esac
  [ -s "$scratch/$n.out" ] || fail "$(cat "$scratch/$n.cmd"): no output"
}

for j in "" --json; do
  # probe: success, wrong password, refused, bad database, malformed.
  run ok probe "$good" $j
  run ok probe "$good_uri" $j
  run fail probe "$wrong" $j
  run fail probe "$wrong_uri" $j
  run fail probe "$right_pw_bad_db" $j
  run fail probe "$refused" $j
  for m in "${malformed[@]}"; do run fail probe "$m" $j; done
  # The password left unquoted: the shell splits the string in two.
  run fail probe $base user=tether2 password=$PW $j
  run fail probe "$base user=tether2" password=$PW $j
  # bench query: success (both modes), wrong password, malformed.
  run ok bench query --conninfo "$good" --threads 2 --pool 2 --seconds 1 $j
  run ok bench query --conninfo "$good_uri" --threads 2 --pool 2 \
    --seconds 1 --mode acquire $j
  run fail bench query --conninfo "$wrong" --threads 1 --pool 1 --seconds 1 $j
  run fail bench query --conninfo "$refused" --threads 1 --pool 1 --seconds 1 $j
  for m in "${malformed[@]}"; do
    run fail bench query --conninfo "$m" --threads 1 --pool 1 --seconds 1 $j
  done
  run fail bench query --conninfo $base user=tether2 password=$PW $j
  run fail bench query --connifo="$good" --seconds 1 $j
  run fail bench query --conninfo "$base user=tether2" password=$PW $j
  run fail bench query --conninfo "$good" "$PW" $j
  run fail bench query --json="$good" --conninfo "$good" $j
  run fail bench cycle "$good" $j
done

# Every output, searched for every secret.
found=0
for ((i = 1; i <= n; i++)); do
  for s in "${secrets[@]}"; do
    if grep -qF -- "$s" "$scratch/$i.out"; then
      echo "LEAK of '$s' by:" >&2
      cat "$scratch/$i.cmd" >&2
      grep -F -- "$s" "$scratch/$i.out" | head -3 >&2
      found=1
    fi
  done
done
[ $found -eq 0 ] || fail "a password appears in the output"
bytes=$(cat "$scratch"/*.out | wc -c)
echo "test_secrets: $n commands, $bytes bytes of output, no password in any"
