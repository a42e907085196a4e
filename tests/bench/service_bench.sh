#!/usr/bin/env bash
# Estimate-service benchmark (not a test): 100k prefixes in a fresh redis-server, a stateless
# replica (spand-estimates --clock wall) on loopback, closed-loop unary Get load from get_loadgen
# (tests/bench/get_loadgen.cpp: C++ async gRPC client, every reply checked), with the local
# cache off and on; then redis-benchmark GET on the same Redis as the reference. Prints machine
# info, the numbers and the CPU time each process used during each run (client, server, Redis:
# on 2 cores they share the machine). If ghz is installed, each case is cross-checked with it
# (ghz needs about three times get_loadgen's CPU per call, so its rates are lower).
# With BASELINE_DIR (a build dir, or a directory holding gateway/service/{spand-estimates,
# service_bench_populate} of another commit) each case runs for the baseline and then for
# BUILD_DIR, against the same Redis (each populates the keys of its own schema) in the same run.
# Environment: READ_CONNECTIONS (replica --read-connections, default 1, the replica's default),
# BASELINE_READ_CONNECTIONS (the same for the baseline, default READ_CONNECTIONS), CONNECTIONS (HTTP/2
# connections, default 4), GHZ=0 to skip ghz, SWEEP (default "8 16 32": the cache-off and the
# hot-set cases again at these concurrencies, latency against load; cache off for the baseline too).
# usage: tests/bench/service_bench.sh BUILD_DIR [PREFIXES] [REQUESTS] [CONCURRENCY] [BASELINE_DIR]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [PREFIXES] [REQUESTS] [CONCURRENCY] [BASELINE_DIR]}
prefixes=${2:-100000}
requests=${3:-200000}
concurrency=${4:-64}
baseline=${5:-}
read_conns=${READ_CONNECTIONS:-1}
base_read_conns=${BASELINE_READ_CONNECTIONS:-$read_conns}
conns=${CONNECTIONS:-4}
loadgen=$build/tests/bench/get_loadgen
[[ -x $loadgen ]] || { echo "$loadgen not built (ninja -C $build tests/bench/get_loadgen)" >&2; exit 2; }
ghz=$(command -v ghz || echo "$HOME/go/bin/ghz")
[[ ${GHZ:-1} != 0 && -x $ghz ]] || ghz=

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 500); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.02; done; echo "port $1 never opened" >&2; exit 1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime, clock ticks
hz=$(getconf CLK_TCK)

echo "== machine"
echo "date:   $(date -u +%FT%TZ)"
echo "nproc:  $(nproc)"
echo "cpu:    $(lscpu | sed -n 's/^Model name: *//p')"
echo "kernel: $(uname -r)"
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (before the run; the machine is shared)"
ghz_version="not used"
[[ -n $ghz ]] && ghz_version="$($ghz --version 2>&1 | head -1) (cross-check)"
echo "redis:  $(redis-server --version | awk '{print $3}')   ghz: $ghz_version"

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
rpid=$!
pids+=($rpid)
wait_port "$rport"
"$build/tests/bench/service_bench_populate" "redis://127.0.0.1:$rport" "$prefixes" "$tmp/data.json"
if [[ -n $baseline ]]; then
  "$baseline/tests/bench/service_bench_populate" "redis://127.0.0.1:$rport" "$prefixes" "$tmp/base.json"
fi
echo "redis keys: $(redis-cli -p "$rport" dbsize)"

run_case() { # label cache_ttl_ms data_file [build_dir [concurrency [ghz [read_connections]]]]
  local gport; gport=$(free_port)
  "${4:-$build}/gateway/control/spand-estimates" --redis "redis://127.0.0.1:$rport" --client-key-file public \
    --grpc-listen "127.0.0.1:$gport" \
    --clock wall --cache-ttl-ms "$2" --read-connections "${7:-$read_conns}" >"$tmp/replica.log" 2>&1 &
  local rp=$!
  pids+=($rp)
  wait_port "$gport"
  local s0 r0 t0 s1 r1 t1
  s0=$(cpu_ticks "$rp"); r0=$(cpu_ticks "$rpid"); t0=$(date +%s.%N)
  local rc=0
  "$loadgen" "127.0.0.1:$gport" "$3" --requests "$requests" --concurrency "${5:-$concurrency}" \
    --connections "$conns" --label "$1" || rc=$?
  s1=$(cpu_ticks "$rp"); r1=$(cpu_ticks "$rpid"); t1=$(date +%s.%N)
  /usr/bin/python3 - "$((s1 - s0))" "$((r1 - r0))" "$t0" "$t1" "$hz" "$((requests + 5000))" <<'PY'
import sys
s, r, t0, t1, hz, calls = (float(x) for x in sys.argv[1:])
w = t1 - t0
print(f"{'':40s} during it: spand-estimates {s / hz:.1f} s CPU ({100 * s / hz / w:.0f}% of a core, "
      f"{1e6 * s / hz / calls:.1f} us per Get), redis-server {r / hz:.1f} s ({100 * r / hz / w:.0f}%, "
      f"{1e6 * r / hz / calls:.1f} us per Get), over {w:.1f} s wall (warmup included)")
PY
  [[ $rc == 0 ]] || echo "get_loadgen FAILED (exit $rc): errors or bad replies above" >&2
  if [[ -n $ghz && ${6:-1} == 1 ]]; then
    "$ghz" --insecure --protoset "$build/proto/spand/v1/estimates.desc" \
      --call spand.v1.Estimates.Get --data-file "$3" -n "$requests" -c "$concurrency" \
      --connections "$conns" --format json "127.0.0.1:$gport" >"$tmp/ghz.json"
    /usr/bin/python3 - "ghz: $1" "$tmp/ghz.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
lat = {d["percentage"]: d["latency"] / 1e6 for d in r.get("latencyDistribution") or []}
codes = r.get("statusCodeDistribution", {})
print(f"{sys.argv[1]:40s} {r['rps']:8.0f} Get/s  p50 {lat.get(50, float('nan')):6.3f}  "
      f"p99 {lat.get(99, float('nan')):6.3f} ms  count {r['count']}  codes {codes}")
PY
  fi
  kill "$rp"; wait "$rp" 2>/dev/null || true
  return $rc
}

echo "== spand-estimates Get (closed loop: $concurrency in flight over $conns connections, $requests calls after a warmup, round robin over the prefixes, transfer_bytes=65536; replica --read-connections $read_conns${baseline:+, baseline $base_read_conns})"
# Ceiling of gRPC + the load generator on this machine: 1000 hot prefixes, nearly all cache hits.
/usr/bin/python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))[:1000], open(sys.argv[2],"w"))' \
  "$tmp/data.json" "$tmp/hot.json"
status=0
both() { # label cache_ttl_ms data_file
  [[ -n $baseline ]] && { run_case "baseline: $1" "$2" "$3" "$baseline" "$concurrency" 1 "$base_read_conns" || status=1; }
  run_case "${baseline:+this build: }$1" "$2" "$3" || status=1
}
both "cache off (Redis per Get)" 0 "$tmp/data.json"
both "cache on (1 s TTL), $prefixes prefixes" 1000 "$tmp/data.json"
both "cache on, 1000 hot prefixes" 1000 "$tmp/hot.json"

echo "== latency against load: cache off, fewer calls in flight"
for c in ${SWEEP-8 16 32}; do
  if [[ -n $baseline ]]; then
    run_case "baseline: cache off, $c in flight" 0 "$tmp/data.json" "$baseline" "$c" 0 "$base_read_conns" || status=1
  fi
  run_case "${baseline:+this build: }cache off, $c in flight" 0 "$tmp/data.json" "$build" "$c" 0 || status=1
done
echo "== latency against load: 1000 hot prefixes (cache hits), fewer calls in flight"
for c in ${SWEEP-8 16 32}; do
  run_case "hot set, $c in flight" 1000 "$tmp/hot.json" "$build" "$c" 0 || status=1
done

echo "== redis-benchmark on the same Redis (reference; 50 clients)"
redis-benchmark -p "$rport" -t get -n 200000 -q 2>&1 | tr '\r' '\n' | grep -a 'requests per second' | tail -1
echo "pipelined (-P 16):"
redis-benchmark -p "$rport" -t get -n 500000 -P 16 -q 2>&1 | tr '\r' '\n' | grep -a 'requests per second' | tail -1
echo "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared)"
exit $status
