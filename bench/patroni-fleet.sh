# shellcheck shell=bash disable=SC2154 # sourced by bench/run-patroni, which sets the variables
# patroni-fleet.sh: bench/run-patroni --fleet N, sourced by it inside the
# cluster (D, base, hp, work, build, fleet, refresh, json). N processes with
# discovery through a switchover: how many requests the REST endpoints see
# (docs/patroni.md, "A fleet through a switchover"). Each process is
# bench_patroni fleet: a pool of 1, an idempotent write every 100 ms,
# tether_patroni = every node's REST endpoint (the proxies, which log each
# request to D/NODE.requests). 10 s steady, a switchover, 10 s more. The
# pools are not routing pools: target_session_attrs=read-write, as a
# writer would be (with the default "any", writes that reached the old
# leader after it became a replica failed with 25006 through the pool's
# attempts and reached the workload: 47 errors in a run of 10 processes).
steady=${PATRONI_FLEET_STEADY:-10} after=${PATRONI_FLEET_AFTER:-10}
ci="$base host=${hp[0]%:*} port=${hp[0]##*:} target_session_attrs=read-write tether_patroni=$PATRONI_REST tether_pool_max=1"
[ -z "$refresh" ] || ci+=" tether_patroni_refresh=$refresh"
t_start=$(ms)
for ((i = 1; i <= fleet; i++)); do
  PATRONI_BENCH_KEY=fleet-$i "$build/bench_patroni" fleet "$ci" >"$work/fleet-$i.out" 2>"$work/fleet-$i.err" &
  pids+=($!)
done
say "$fleet processes started; ${steady} s steady"
sleep "$steady"
line=$(ctl switchover "$D" | grep '^switchover ' | head -n 1)
t_sw=$(awk '{print $2}' <<<"$line")
say "$line; ${after} s more"
# `after` seconds from the switchover's start
rest=$((t_sw + after * 1000 - $(ms)))
[ "$rest" -le 0 ] || sleep "$(awk -v r="$rest" 'BEGIN {printf "%.3f", r / 1000}')"
t_end=$(ms)
alive=0
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
kill "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
pids=()
for f in "$D"/node*.requests; do
  n=${f##*/}
  sed "s/\$/ ${n%.requests}/" "$f"
done >"$work/requests" 2>/dev/null || true

python3 - "$work" "$fleet" "$alive" "$t_start" "$t_sw" "$t_end" "$steady" "$json" "${refresh:-5s}" <<'PY'
import collections, glob, json, os, sys
work, n, alive, t0, tsw, tend, steady, as_json, refresh = sys.argv[1:10]
n, alive, t0, tsw, tend, steady = int(n), int(alive), int(t0), int(tsw), int(tend), int(steady)
as_json = as_json == "1"
refresh_ms = int(refresh[:-2]) if refresh.endswith("ms") else int(refresh[:-1]) * 1000
req = []
by_node = collections.Counter()  # before the switchover
other = 0
for line in open(os.path.join(work, "requests")):
    p = line.split()
    if len(p) < 4 or not (t0 <= int(p[0]) < tend):
        continue
    if p[3] == "tether" and p[2].startswith("/cluster"):
        req.append(int(p[0]))
        if int(p[0]) < tsw and len(p) > 4:
            by_node[p[4]] += 1
    else:
        other += 1
per_s = collections.Counter((t - tsw) // 1000 for t in req)
# steady: the seconds from 3 s after the start (the first answers and the
# ramp over) to the switchover
lo = -((tsw - t0) // 1000) + 3
steady_secs = [s for s in range(lo, 0)]
steady_rps = sum(per_s[s] for s in steady_secs) / max(1, len(steady_secs))
peak_s = max(range(0, (tend - tsw) // 1000 + 1), key=lambda s: per_s[s])
writes = errs = preq = pfail = 0
for i in range(1, n + 1):
    for line in open(os.path.join(work, "fleet-%d.out" % i)):
        if line.startswith("m "):
            kv = dict(x.split("=") for x in line.split()[1:])
            writes += int(kv["writes"]); errs += int(kv["write_errors"])
            preq += int(kv["patroni_requests"])
            pfail += int(kv["patroni_failures"])
row = dict(mode="tether-discovery", fault="switchover", fleet=n, processes_alive=alive,
           refresh_ms=refresh_ms, steady_rps=round(steady_rps, 1),
           steady_rps_expected=round(n * 1000 / refresh_ms, 1),
           peak_rps=per_s[peak_s], peak_second=peak_s,
           after_switchover=sum(c for s, c in per_s.items() if s >= 0),
           total_requests=len(req), bound_rps=2 * n,
           before_switchover_by_node=dict(sorted(by_node.items())),
           other_requests=other, pool_requests=preq, pool_failures=pfail,
           writes=writes, write_errors=errs,
           window_ms=tend - t0, switchover_ms=tsw - t0)
if as_json:
    print(json.dumps(row))
else:
    for k, v in row.items():
        print("%-20s %s" % (k, v))
    print("per second from the switchover (s: requests):",
          " ".join("%d:%d" % (s, per_s[s]) for s in range(min(per_s, default=0), max(per_s, default=0) + 1)))
PY
