#!/usr/bin/env bash
# test_patroni_cluster.sh - the Patroni test cluster itself (scripts/patroni-cluster,
# docs/patroni.md "The test cluster"): etcd and three Patroni nodes on loopback
# as the unprivileged owner, a leader and two streaming replicas, the env file,
# the REST endpoints behind their proxies, the application role; then a
# switchover: the leader changes and the old leader rejoins as a streaming
# replica. Prints the startup, promotion and rejoin times.
#
#   bash tests/integration/test_patroni_cluster.sh [scripts/patroni-cluster]
#
# Exits 77 (ctest: skipped) when Patroni, etcd, curl or jq are not installed
# (scripts/install-deps installs them). The cluster is started and always
# removed by `patroni-cluster run`, whose watchdog also removes it when this
# test is killed (ctest timeout).
# `A && B || fail` below means "fail unless both hold": intended.
# shellcheck disable=SC2015,SC2016
set -euo pipefail
export LC_ALL=C
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { echo "check: $*"; }
now_ms() { date +%s%3N; }

if [ "${1:-}" != --inner ]; then
  ctl=${1:-$(cd "$(dirname "$0")/../.." && pwd)/scripts/patroni-cluster}
  missing=()
  for t in patroni patronictl etcd curl jq; do command -v "$t" >/dev/null || missing+=("$t"); done
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=("PostgreSQL server (initdb)")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "SKIP: integration.patroni_cluster needs ${missing[*]}; run scripts/install-deps"
    exit 77
  fi
  export PTC_TEST_T0; PTC_TEST_T0=$(now_ms)
  exec bash "$ctl" run -- bash "$(readlink -f "$0")" --inner
fi

# ---- inside `patroni-cluster run`: D/env is exported.
for v in PATRONI_DIR PATRONI_CTL PATRONI_NODES PATRONI_HOSTS PATRONI_REST PATRONI_REST_DIRECT \
         PATRONI_USER PATRONI_PASSWORD PATRONI_DB PATRONI_SUPERUSER PATRONI_SUPERPASSWORD PATRONI_PGBIN; do
  [ -n "${!v:-}" ] || fail "$v is not set"
done
ctl=$PATRONI_CTL
startup=$(( $(now_ms) - PTC_TEST_T0 ))
echo "startup: $startup ms (etcd + 3 nodes, a leader and 2 streaming replicas, the role)"
IFS=, read -r -a names <<<"$PATRONI_NODES"
IFS=, read -r -a hosts <<<"$PATRONI_HOSTS"
IFS=, read -r -a rest <<<"$PATRONI_REST"
IFS=, read -r -a direct <<<"$PATRONI_REST_DIRECT"
declare -A hostof restof
for i in 0 1 2; do hostof[${names[$i]}]=${hosts[$i]}; restof[${names[$i]}]=${rest[$i]}; done

# psql over TCP: app HOST:PORT SQL (the application role), sup HOST:PORT SQL (the superuser).
app() {
  PGPASSWORD=$PATRONI_PASSWORD PGCONNECT_TIMEOUT=5 "$PATRONI_PGBIN/psql" -X -At -v ON_ERROR_STOP=1 \
    "host=${1%:*} port=${1#*:} user=$PATRONI_USER dbname=$PATRONI_DB sslmode=disable" -c "$2"
}
sup() {
  PGPASSWORD=$PATRONI_SUPERPASSWORD PGCONNECT_TIMEOUT=5 "$PATRONI_PGBIN/psql" -X -At -v ON_ERROR_STOP=1 \
    "host=${1%:*} port=${1#*:} user=$PATRONI_SUPERUSER dbname=postgres sslmode=disable" -c "$2"
}
cluster() { curl -fsS -m 2 "${rest[0]}/cluster"; }
# wait_until SECONDS CMD...: poll CMD every 100 ms.
wait_until() {
  local end=$(( $(now_ms) + $1 * 1000 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(now_ms)" -lt "$end" ] || return 1
    sleep 0.1
  done
}

check "env: three nodes on 127.0.0.1, distinct ports, REST endpoints"
[ ${#names[@]} = 3 ] && [ ${#hosts[@]} = 3 ] && [ ${#rest[@]} = 3 ] || fail "not three nodes: $PATRONI_NODES"
[ "$(printf '%s\n' "${hosts[@]}" | grep -c '^127\.0\.0\.1:[0-9]\+$')" = 3 ] || fail "hosts: $PATRONI_HOSTS"
[ "$(printf '%s\n' "${hosts[@]}" | sort -u | wc -l)" = 3 ] || fail "hosts share a port: $PATRONI_HOSTS"
[ "$(printf '%s\n' "${rest[@]}" | grep -c '^http://127\.0\.0\.1:[0-9]\+$')" = 3 ] || fail "rest: $PATRONI_REST"

check "every process listens on 127.0.0.1 only and runs as an unprivileged user"
for hp in "${hosts[@]}" "${rest[@]#http://}" "${direct[@]#http://}"; do
  addrs=$(ss -Htln "sport = :${hp#*:}" | awk '{print $4}' | sort -u)
  [ "$addrs" = "$hp" ] || fail "port ${hp#*:} listens on: ${addrs:-nothing}"
done
for f in "$PATRONI_DIR"/*.pid; do
  u=$(ps -o user= -p "$(cat "$f")") || fail "$(basename "$f"): process gone"
  [ "$u" != root ] || fail "$(basename "$f" .pid) runs as root"
done
owner=$(ps -o user= -p "$(cat "$PATRONI_DIR/node1.pid")")

check "/cluster: one leader running, two replicas running, api_url = PATRONI_REST"
j=$(cluster) || fail "GET ${rest[0]}/cluster failed"
echo "$j" | jq -c '.members[] | {name, role, state, host, port, api_url, timeline, lag}'
leader=$(jq -r '[.members[] | select(.role == "leader" and .state == "running") | .name] | join(",")' <<<"$j")
[ -n "$leader" ] && [[ $leader != *,* ]] || fail "leader: '$leader'"
[ "$(jq '[.members[] | select(.role == "replica" and .state == "running")] | length' <<<"$j")" = 2 ] ||
  fail "not two running replicas"
for n in "${names[@]}"; do
  [ "$(jq -r --arg n "$n" '.members[] | select(.name == $n) | "\(.host):\(.port) \(.api_url)"' <<<"$j")" = \
    "${hostof[$n]} ${restof[$n]}/patroni" ] || fail "$n: host or api_url differ from env"
done
read -r l lhp < <("$ctl" leader "$PATRONI_DIR") || fail "patroni-cluster leader failed"
[ "$l" = "$leader" ] && [ "$lhp" = "${hostof[$leader]}" ] || fail "leader command: $l $lhp"

check "REST: /primary 200 only on the leader, /replica 200 only on replicas"
for n in "${names[@]}"; do
  p=$(curl -s -o /dev/null -w '%{http_code}' -m 2 "${restof[$n]}/primary")
  r=$(curl -s -o /dev/null -w '%{http_code}' -m 2 "${restof[$n]}/replica")
  if [ "$n" = "$leader" ]; then [ "$p/$r" = 200/503 ] || fail "$n (leader): /primary $p /replica $r"
  else [ "$p/$r" = 503/200 ] || fail "$n (replica): /primary $p /replica $r"; fi
done

check "two streaming replicas in pg_stat_replication on the leader ($leader)"
s=$(sup "${hostof[$leader]}" "SELECT string_agg(application_name, ',' ORDER BY application_name)
  FROM pg_stat_replication WHERE state = 'streaming'")
[ "$s" = "$(printf '%s\n' "${names[@]}" | grep -vx "$leader" | paste -sd,)" ] || fail "streaming: '$s'"

check "the application role writes on the leader (password over TCP), the rows reach the replicas"
app "${hostof[$leader]}" "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'before')" >/dev/null
for n in "${names[@]}"; do
  [ "$n" != "$leader" ] || continue
  wait_until 10 sh -c '[ "$(PGPASSWORD=$1 "$2" -X -At "host=${3%:*} port=${3#*:} user=$4 dbname=$5" -c "SELECT v FROM t")" = before ]' \
    sh "$PATRONI_PASSWORD" "$PATRONI_PGBIN/psql" "${hostof[$n]}" "$PATRONI_USER" "$PATRONI_DB" ||
    fail "the row did not reach $n"
  [ "$(app "${hostof[$n]}" 'SELECT pg_is_in_recovery()')" = t ] || fail "$n is not in recovery"
  not_written=$(app "${hostof[$n]}" "INSERT INTO t VALUES (2, 'x')" 2>&1 || true)
  [[ $not_written == *"read-only transaction"* ]] || fail "$n accepted a write: $not_written"
done
PGPASSWORD=wrong "$PATRONI_PGBIN/psql" -X -At "host=${hostof[$leader]%:*} port=${hostof[$leader]#*:} \
  user=$PATRONI_USER dbname=$PATRONI_DB sslmode=disable" -c 'SELECT 1' >/dev/null 2>&1 &&
  fail "a wrong password was accepted"

check "switchover: wait-leader sees the new leader, the old one rejoins streaming"
wl=$(mktemp)
"$ctl" wait-leader "$PATRONI_DIR" --not "$leader" --timeout 30 >"$wl" &
wl_pid=$!
out=$("$ctl" switchover "$PATRONI_DIR") || { kill "$wl_pid" 2>/dev/null; fail "switchover failed"; }
echo "$out"
read -r word t_fault detail <<<"$out"
[ "$word" = switchover ] && [[ $t_fault =~ ^[0-9]{13}$ ]] || fail "fault line: '$out'"
wait "$wl_pid" || fail "wait-leader saw no new leader"
read -r new t_leader <"$wl"; rm -f "$wl"
[[ $detail == "from=$leader to=$new" ]] || fail "switchover went to '$detail', wait-leader saw $new"
[ "$new" != "$leader" ] || fail "the leader did not change"
echo "switchover: /cluster showed $new as leader $((t_leader - t_fault)) ms after patronictl switchover was run"
wait_until 10 sh -c '[ "$(PGPASSWORD=$1 "$2" -X -At "host=${3%:*} port=${3#*:} user=$4 dbname=$5" -c "SELECT pg_is_in_recovery()")" = f ]' \
  sh "$PATRONI_PASSWORD" "$PATRONI_PGBIN/psql" "${hostof[$new]}" "$PATRONI_USER" "$PATRONI_DB" ||
  fail "$new is not writable"
app "${hostof[$new]}" "UPDATE t SET v = 'after' WHERE id = 1" >/dev/null
rejoined() {
  local j
  j=$(cluster) || return 1
  [ "$(jq -r --arg n "$leader" '.members[] | select(.name == $n) | .role + "/" + .state' <<<"$j")" = replica/running ] &&
  [ "$(sup "${hostof[$new]}" "SELECT count(*) FROM pg_stat_replication
      WHERE state = 'streaming' AND application_name = '$leader'")" = 1 ] &&
  [ "$(app "${hostof[$leader]}" 'SELECT v FROM t')" = after ]
}
wait_until 30 rejoined || fail "$leader did not rejoin as a streaming replica of $new"
echo "switchover: old leader $leader streaming from $new $(( $(now_ms) - t_fault )) ms after the switchover"
# The third node follows the new leader's timeline on its own time (it
# was seen still on the old one, 600 bytes behind, when the old leader had
# rejoined): healthy within 30 s, not at once.
status_ok() { "$ctl" status "$PATRONI_DIR" >/dev/null 2>&1; }
wait_until 30 status_ok ||
  { "$ctl" status "$PATRONI_DIR"; fail "status reports the cluster unhealthy 30 s after the switchover"; }
"$ctl" status "$PATRONI_DIR"
[ "$("$ctl" leader "$PATRONI_DIR")" = "$new ${hostof[$new]}" ] || fail "leader command after the switchover"

# A failure injected here shows that `run` still removes everything
# (docs/patroni.md, "The test cluster").
[ -z "${PTC_TEST_FAIL:-}" ] || fail "PTC_TEST_FAIL is set: failing on purpose"
echo "ok: integration.patroni_cluster (owner $owner, total $(( $(now_ms) - PTC_TEST_T0 )) ms before the stop)"
