# shellcheck shell=bash disable=SC2154 # sourced by bench/run-patroni, which sets the variables
# patroni-add-replica.sh: bench/run-patroni --add-replica, sourced by it
# inside the cluster (D, base, hp, work, build, rounds, refresh, json, the
# /cluster poller in $work/cluster with the running replicas' ports as its
# 4th field). A replica added while tether reads on: how long until it
# serves reads (docs/patroni.md, "A replica added"). Two clients, both with
# discovery and tether_patroni_refresh=$refresh:
#   tether-discovery          the bench's pool (routing, one reader every
#                             10 ms on its pooled connections)
#   tether-discovery-connect  a connection of its own per read, every 50 ms
#                             (target standby, strategy random: as the read
#                             side of a routing pool opens one)
disc="host=${hp[0]%:*} port=${hp[0]##*:} tether_patroni=$PATRONI_REST tether_patroni_refresh=$refresh"
PATRONI_BENCH_KEY=tether-discovery "$build/bench_patroni" tether \
  "$base $disc $route" >"$work/tether-discovery.out" 2>"$work/tether-discovery.err" &
pids+=($!)
PATRONI_BENCH_TRACE=1 "$build/bench_patroni" connect "$base $disc target_session_attrs=standby tether_strategy=random" \
  >"$work/tether-discovery-connect.out" 2>"$work/tether-discovery-connect.err" &
pids+=($!)
# reads_by M PORT SINCE: M read from PORT at or after SINCE.
reads_by() {
  awk -v p="$2" -v t="$3" '$1 == "r" && $2 >= t && $3 == p {f = 1; exit} END {exit !f}' "$work/$1.out"
}
sleep 3
: >"$work/added"
for ((round = 1; round <= rounds; round++)); do
  until ctl status "$D" >/dev/null 2>&1; do sleep 0.5; done
  sleep "$settle"
  t=$(ms)
  read -r name hostport _ < <(ctl add-replica "$D")
  port=${hostport##*:}
  [ -n "$name" ] || { say "add-replica failed"; exit 1; }
  say "round $round: add-replica $name port $port ($(($(ms) - t)) ms to streaming)"
  # Up to 3 refresh intervals + 10 s for both clients to read from it.
  deadline=$(($(ms) + 10000 + 3 * $(awk -v r="$refresh" 'BEGIN {
    if (r ~ /ms$/) print r + 0; else print (r + 0) * 1000 }')))
  until { reads_by tether-discovery "$port" "$t" && reads_by tether-discovery-connect "$port" "$t"; } ||
    [ "$(ms)" -ge "$deadline" ]; do sleep 0.2; done
  echo "$round $t $name $port" >>"$work/added"
done
end=$(ms)
kill "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
pids=()
kill "$poller" 2>/dev/null || true
wait "$poller" 2>/dev/null || true
poller=

python3 - "$work" "$end" "$json" "$refresh" <<'PY'
import json, os, sys
work, end, as_json, refresh = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
refresh_ms = int(refresh[:-2]) if refresh.endswith("ms") else int(refresh[:-1]) * 1000
added = [l.split() for l in open(os.path.join(work, "added"))]
samples = []
for line in open(os.path.join(work, "cluster")):
    p = line.split()
    if len(p) == 4:
        samples.append((int(p[0]), set(p[3].split(","))))
rows = []
for i, (rnd, t, name, port) in enumerate(added):
    t, t1 = int(t), int(added[i + 1][1]) if i + 1 < len(added) else end
    joined = next((s for s, ports in samples if s >= t and port in ports), None)
    for m in ("tether-discovery", "tether-discovery-connect"):
        reads = []
        for line in open(os.path.join(work, m + ".out")):
            p = line.split()
            if len(p) >= 4 and p[0] == "r" and t <= int(p[1]) < t1:
                reads.append((int(p[1]), p[2]))
        errs = sum(1 for line in open(os.path.join(work, m + ".out"))
                   if line.startswith("re ") and t <= int(line.split()[1]) < t1)
        first = next((r for r, pp in reads if pp == port), None)
        # the connect client traces its steps: its first attempt at the
        # new member is when its list had it
        tried = listed = None
        for line in open(os.path.join(work, m + ".out")):
            p = line.split()
            if (tried is None and len(p) >= 4 and p[0] == "ev" and int(p[1]) >= t
                    and p[3].endswith(":" + port)):
                tried = int(p[1])
            # its log: "patroni: standby hosts now H:P,H:P"
            if (listed is None and len(p) >= 3 and p[0] == "l" and int(p[1]) >= t
                    and "hosts now" in line and (":" + port) in line):
                listed = int(p[1])
        rows.append(dict(mode=m, fault="add-replica", round=int(rnd), node=name,
                         refresh_ms=refresh_ms,
                         join_ms=joined - t if joined else None,
                         first_read_ms=first - joined if first and joined else None,
                         first_attempt_ms=tried - joined if tried and joined else None,
                         listed_ms=listed - joined if listed and joined else None,
                         within_refresh=(first - joined <= refresh_ms) if first and joined else False,
                         reads=len(reads), reads_new=sum(1 for _, pp in reads if pp == port),
                         errors=errs, window_ms=t1 - t))
if as_json:
    for r in rows:
        print(json.dumps(r))
    sys.exit(0)
s = lambda v: "-" if v is None else str(v)
print("%-25s %3s %-6s %8s %10s %13s %14s %7s %12s %7s" % ("mode", "rnd", "node", "join_ms",
      "listed_ms", "first_try_ms", "first_read_ms", "within", "new/reads", "errors"))
for r in rows:
    print("%-25s %3d %-6s %8s %10s %13s %14s %7s %12s %7d" % (r["mode"], r["round"], r["node"],
          s(r["join_ms"]), s(r["listed_ms"]), s(r["first_attempt_ms"]), s(r["first_read_ms"]),
          "yes" if r["within_refresh"] else "NO",
          "%d/%d" % (r["reads_new"], r["reads"]), r["errors"]))
print("\nlisted_ms, first_try_ms, first_read_ms: from /cluster first showing the new "
      "member running to the connector's list naming it (its log), its first connect "
      "attempt at it (traced) and its first read (connect client only); target: the "
      "read within one refresh interval (%d ms)" % refresh_ms)
PY
