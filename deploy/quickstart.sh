#!/usr/bin/env bash
# Installs what spand needs, builds it, starts a throwaway local redis-server, and replays a
# bundled capture through the gateway into Redis; prints the per-prefix summary, the exit summary
# and one estimate read back over gRPC. Outputs land in ./quickstart-out/.
# Exit status 0 when an estimate was read back, 1 otherwise.
# Usage (as root): bash deploy/quickstart.sh [CAPTURE]       (default: pcaps/lab/cubic_3nets.pcap)
# Environment (for tests/integration/deploy/test_quickstart.py): SPAND_BUILD=DIR uses that
# existing build (no setup.sh, no build); SPAND_QUICKSTART_OUT=DIR, SPAND_QUICKSTART_REDIS_PORT,
# SPAND_QUICKSTART_GRPC_PORT move the outputs and the ports (default ./quickstart-out, 6390,
# 50551).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
capture=${1:-pcaps/lab/cubic_3nets.pcap}
build=${SPAND_BUILD:-build}
if [ -z "${SPAND_BUILD:-}" ]; then
  bash deploy/setup.sh >/dev/null
  [ -d build ] || meson setup build >/dev/null
  ninja -C build >/dev/null
fi

out=${SPAND_QUICKSTART_OUT:-$top/quickstart-out}
mkdir -p "$out"
port=${SPAND_QUICKSTART_REDIS_PORT:-6390}
grpc=${SPAND_QUICKSTART_GRPC_PORT:-50551}
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$out" \
  --daemonize yes --pidfile "$out/redis.pid" --logfile "$out/redis.log"
trap 'kill "$(cat "$out/redis.pid")" 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
# Every writer to Redis (the gateway, the replica taking Report) needs the deployment's client id
# key, the same for all: one random key for this demo, kept across runs (a package install makes
# /etc/spand/client.key instead).
key=$out/client.key
[ -s "$key" ] || (umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' > "$key" && echo >> "$key")

# The bundled capture has one or two client hosts per /24: the demo asks for one sample and one
# client, in the gateway's prefix summary and in the estimate service alike (the defaults, 5
# samples from 2 clients, guard real deployments against single-host forgery).
demo_thresholds=(--min-samples 1 --min-clients 1)
echo "== spand-gateway --pcap $capture --redis redis://127.0.0.1:$port"
"$build/spand-gateway" --pcap "$capture" --redis "redis://127.0.0.1:$port" \
  --client-key-file "$key" "${demo_thresholds[@]}" \
  --flows-out "$out/flows.jsonl" --samples-out "$out/samples.jsonl" --prefix-summary
echo "== Redis now holds $(redis-cli -p "$port" --scan --pattern 'spand:*' | wc -l) spand keys"
status=1
if [ -x "$build/gateway/control/spand-estimates" ] && [ -x "$build/tools/spandctl" ]; then
  "$build/gateway/control/spand-estimates" --redis "redis://127.0.0.1:$port" --client-key-file "$key" \
    --grpc-listen "127.0.0.1:$grpc" "${demo_thresholds[@]}" >"$out/estimates.log" 2>&1 &
  est=$!
  trap 'kill $est 2>/dev/null; kill "$(cat "$out/redis.pid")" 2>/dev/null || true' EXIT
  prefix=$(head -n 1 "$out/samples.jsonl" | sed 's/.*"prefix":"\([^"]*\)".*/\1/')
  # Until the replica has read the gateways' clock from Redis (every 100 ms) its "now" is the
  # wall clock, far after the capture: the window is empty and the answer SLOW_START.
  for _ in $(seq 1 50); do
    answer=$("$build/tools/spandctl" get "$prefix" --server "127.0.0.1:$grpc" --bytes 100000 \
      2>/dev/null) || answer=
    if grep -q USE_ESTIMATE <<<"$answer"; then
      echo "$answer"
      status=0
      break
    fi
    sleep 0.2
  done
fi
echo "== flow records: $out/flows.jsonl, samples: $out/samples.jsonl"
[ "$status" = 0 ] || echo "== no estimate read back (spand-estimates: $out/estimates.log)" >&2
exit "$status"
