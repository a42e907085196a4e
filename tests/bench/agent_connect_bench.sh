#!/usr/bin/env bash
# Connection setup rate on loopback with spand-agent's sock_ops program detached vs attached,
# in one run (a benchmark: it prints numbers, it does not pass or fail). Needs root.
# The attached case carries a policy for 127.0.0.0/24, so every connection does the full
# work: two LPM lookups per socket, TCP_BPF_IW, the clamp, the pacing rate, the socket-state
# map and the per-ACK callback until the first window is acknowledged.
# Usage: tests/bench/agent_connect_bench.sh BUILD_DIR [CONNECTIONS] [ROUNDS]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [CONNECTIONS] [ROUNDS]}
n=${2:-100000}
rounds=${3:-3}
bench=$build/agents/spand-agent/agent_connect_bench
agent=$build/agents/spand-agent/spand-agent
cg2=/sys/fs/cgroup/unified
[[ -f $cg2/cgroup.procs ]] || cg2=/sys/fs/cgroup
cg=$cg2/spand_connect_bench
work=$(mktemp -d)
mkdir -p "$cg"
agent_pid=
cleanup() {
  [[ -n $agent_pid ]] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  rmdir "$cg" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cat > "$work/est.json" <<JSON
{"estimates": [{"prefix": "127.0.0.0/24", "samples": 50, "wc_segments": 40, "rtt_ms": 1,
                "verdict": "USE_ESTIMATE"}]}
JSON

run() {  # prints the rate of one run inside the cgroup
  bash -c "echo \$\$ > $cg/cgroup.procs; exec $bench $n 18080" | sed -n 's/.*rate_per_s=\([0-9]*\).*/\1/p'
}

echo "agent_connect_bench: $(date -u +%FT%TZ) nproc=$(nproc) cpu=\"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')\" kernel=$(uname -r)"
echo "connections per run: $n, rounds: $rounds (detached, attached alternate)"
declare -a det att
for ((r = 0; r < rounds; r++)); do
  det+=("$(run)")
  "$agent" --mode bpf --cgroup "$cg" -f "$work/est.json" -p 18080:100000 -p 0:100000 \
    -P 127.0.0.0/24 --metrics '' 2> "$work/agent.err" &
  agent_pid=$!
  for _ in $(seq 100); do grep -q 'applied port=0' "$work/agent.err" && break; sleep 0.1; done
  grep -q 'applied port=0' "$work/agent.err" || { cat "$work/agent.err"; exit 1; }
  att+=("$(run)")
  kill "$agent_pid"; wait "$agent_pid" || true; agent_pid=
  echo "round $r: detached ${det[r]}/s attached ${att[r]}/s"
done
python3 - "${det[*]}" "${att[*]}" <<'PY'
import statistics, sys
d = [float(x) for x in sys.argv[1].split()]
a = [float(x) for x in sys.argv[2].split()]
md, ma = statistics.median(d), statistics.median(a)
print("median detached %.0f conn/s, attached %.0f conn/s, attached/detached %.3f (%.1f%% slower)"
      % (md, ma, ma / md, 100 * (1 - ma / md)))
PY
