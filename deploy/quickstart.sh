#!/usr/bin/env bash
# Installs what spand needs, builds it, starts a throwaway local redis-server, and replays a
# bundled capture through the gateway into Redis; prints the per-prefix summary, the exit summary
# and one estimate read back over gRPC. Outputs land in ./quickstart-out/.
# Usage (as root): bash deploy/quickstart.sh [CAPTURE]       (default: pcaps/lab/cubic_3nets.pcap)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
capture=${1:-pcaps/lab/cubic_3nets.pcap}
bash deploy/setup.sh >/dev/null
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null

out=$top/quickstart-out
mkdir -p "$out"
port=6390
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$out" \
  --daemonize yes --pidfile "$out/redis.pid" --logfile "$out/redis.log"
trap 'kill "$(cat "$out/redis.pid")" 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
# Every writer to Redis (the gateway, the replica taking Report) needs the deployment's client id
# key, the same for all: one random key for this demo, kept across runs (a package install makes
# /etc/spand/client.key instead).
key=$out/client.key
[ -s "$key" ] || (umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' > "$key" && echo >> "$key")

# The bundled capture has one client host per /24: the demo asks for one sample and one client
# (the defaults, 5 samples from 2 clients, guard real deployments against single-host forgery).
echo "== spand-gateway --pcap $capture --redis redis://127.0.0.1:$port"
./build/spand-gateway --pcap "$capture" --redis "redis://127.0.0.1:$port" --client-key-file "$key" \
  --min-samples 1 \
  --flows-out "$out/flows.jsonl" --samples-out "$out/samples.jsonl" --prefix-summary
echo "== Redis now holds $(redis-cli -p "$port" --scan --pattern 'spand:*' | wc -l) spand keys"
if [ -x build/gateway/control/spand-estimates ] && [ -x build/tools/spandctl ]; then
  ./build/gateway/control/spand-estimates --redis "redis://127.0.0.1:$port" --client-key-file "$key" \
    --grpc-listen 127.0.0.1:50551 \
    --min-samples 1 --min-clients 1 >"$out/estimates.log" 2>&1 &
  est=$!
  trap 'kill $est 2>/dev/null; kill "$(cat "$out/redis.pid")" 2>/dev/null || true' EXIT
  prefix=$(head -n 1 "$out/samples.jsonl" | sed 's/.*"prefix":"\([^"]*\)".*/\1/')
  for _ in $(seq 1 50); do
    ./build/tools/spandctl get "$prefix" --server 127.0.0.1:50551 --bytes 100000 2>/dev/null && break
    sleep 0.2
  done
fi
echo "== flow records: $out/flows.jsonl, samples: $out/samples.jsonl"
