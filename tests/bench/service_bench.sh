#!/usr/bin/env bash
# Estimate-service benchmark (not a test): 100k prefixes in a fresh redis-server, a stateless
# replica (spand-estimates --clock wall) on loopback, closed-loop unary Get load from ghz
# (go install github.com/bojand/ghz/cmd/ghz@latest), with the local cache off and on; then
# redis-benchmark GET on the same Redis as the reference. Prints machine info and the numbers.
# With BASELINE_DIR (a build dir, or a directory holding gateway/service/{spand-estimates,
# service_bench_populate} of another commit) each case runs for the baseline and then for
# BUILD_DIR, against the same Redis (each populates the keys of its own schema) in the same run.
# usage: tests/bench/service_bench.sh BUILD_DIR [PREFIXES] [REQUESTS] [CONCURRENCY] [BASELINE_DIR]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [PREFIXES] [REQUESTS] [CONCURRENCY] [BASELINE_DIR]}
prefixes=${2:-100000}
requests=${3:-200000}
concurrency=${4:-64}
baseline=${5:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
ghz=$(command -v ghz || echo "$HOME/go/bin/ghz")
[[ -x $ghz ]] || { echo "ghz not found: go install github.com/bojand/ghz/cmd/ghz@latest" >&2; exit 2; }

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 500); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.02; done; echo "port $1 never opened" >&2; exit 1; }

echo "== machine"
echo "date:   $(date -u +%FT%TZ)"
echo "nproc:  $(nproc)"
echo "cpu:    $(lscpu | sed -n 's/^Model name: *//p')"
echo "kernel: $(uname -r)"
echo "load:   $(cut -d' ' -f1-3 /proc/loadavg) (before the run; the machine is shared)"
echo "redis:  $(redis-server --version | awk '{print $3}')   ghz: $($ghz --version 2>&1 | head -1)"

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
pids+=($!)
wait_port "$rport"
"$build/gateway/service/service_bench_populate" "redis://127.0.0.1:$rport" "$prefixes" "$tmp/data.json"
if [[ -n $baseline ]]; then
  "$baseline/gateway/service/service_bench_populate" "redis://127.0.0.1:$rport" "$prefixes" "$tmp/base.json"
fi
echo "redis keys: $(redis-cli -p "$rport" dbsize)"

run_ghz() { # label cache_ttl_ms data_file [build_dir]
  local gport; gport=$(free_port)
  "${4:-$build}/gateway/service/spand-estimates" --redis "redis://127.0.0.1:$rport" --grpc-listen "127.0.0.1:$gport" \
    --clock wall --cache-ttl-ms "$2" --read-connections 8 >"$tmp/replica.log" 2>&1 &
  local rp=$!
  pids+=($rp)
  wait_port "$gport"
  "$ghz" --insecure --protoset "$build/proto/spand/v1/estimates.desc" \
    --call spand.v1.Estimates.Get --data-file "$3" -n "$requests" -c "$concurrency" \
    --connections 4 --format json "127.0.0.1:$gport" >"$tmp/ghz.json"
  kill "$rp"; wait "$rp" 2>/dev/null || true
  /usr/bin/python3 - "$1" "$tmp/ghz.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
lat = {d["percentage"]: d["latency"] / 1e6 for d in r.get("latencyDistribution") or []}
codes = r.get("statusCodeDistribution", {})
print(f"{sys.argv[1]:48s} {r['rps']:10.0f} Get/s  p50 {lat.get(50, float('nan')):7.3f} ms  "
      f"p99 {lat.get(99, float('nan')):7.3f} ms  count {r['count']}  codes {codes}")
PY
}

echo "== spand-estimates Get (closed loop: $concurrency in flight, $requests calls, $prefixes prefixes round robin, transfer_bytes=65536)"
# Ceiling of gRPC + the load generator on this machine: 1000 hot prefixes, nearly all cache hits.
/usr/bin/python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))[:1000], open(sys.argv[2],"w"))' \
  "$tmp/data.json" "$tmp/hot.json"
both() { # label cache_ttl_ms data_file
  [[ -n $baseline ]] && run_ghz "baseline: $1" "$2" "$3" "$baseline"
  run_ghz "${baseline:+this build: }$1" "$2" "$3"
}
both "cache off (Redis per Get)" 0 "$tmp/data.json"
both "cache on (1 s TTL)" 1000 "$tmp/data.json"
both "cache on, 1000 hot prefixes" 1000 "$tmp/hot.json"

echo "== redis-benchmark on the same Redis (reference)"
redis-benchmark -p "$rport" -t get -n 200000 -q 2>&1 | tr '\r' '\n' | grep -a 'requests per second' | tail -1
echo "pipelined (-P 16):"
redis-benchmark -p "$rport" -t get -n 500000 -P 16 -q 2>&1 | tr '\r' '\n' | grep -a 'requests per second' | tail -1
echo "load average during the run: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared)"
