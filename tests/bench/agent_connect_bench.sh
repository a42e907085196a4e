#!/usr/bin/env bash
# Connection setup rate on loopback with spand-agent's sock_ops program detached vs attached,
# in one run (a benchmark: it prints numbers, it does not pass or fail). Needs root.
# Three cases per round: detached; attached with a policy for 127.0.0.0/24 ("applied": every
# accepted connection gets the full work: LPM lookups, TCP_BPF_IW, the clamp, the pacing rate,
# the socket-state map, the state callback at close); attached with a policy for another
# prefix only ("no match": the lookups alone, the common case for most clients).
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
for p in 127.0.0.0 192.0.2.0; do
  cat > "$work/est-$p.json" <<JSON
{"estimates": [{"prefix": "$p/24", "samples": 50, "wc_segments": 40, "rtt_ms": 1,
                "verdict": "USE_ESTIMATE"}]}
JSON
done

run() {  # prints the rate of one run inside the cgroup
  bash -c "echo \$\$ > $cg/cgroup.procs; exec $bench $n 18080" | sed -n 's/.*rate_per_s=\([0-9]*\).*/\1/p'
}

echo "agent_connect_bench: $(date -u +%FT%TZ) nproc=$(nproc) cpu=\"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')\" kernel=$(uname -r)"
echo "connections per run: $n, rounds: $rounds (detached, applied, no match, in turn)"
attached_run() {  # $1: prefix with an estimate
  "$agent" --mode bpf --cgroup "$cg" -f "$work/est-$1.json" -p 18080:100000 \
    -P "$1/24" --metrics '' 2> "$work/agent.err" &
  agent_pid=$!
  for _ in $(seq 100); do grep -q 'applied port=' "$work/agent.err" && break; sleep 0.1; done
  grep -q 'applied port=' "$work/agent.err" || { cat "$work/agent.err"; exit 1; }
  run
  kill "$agent_pid"; wait "$agent_pid" || true; agent_pid=
}
declare -a det app nom
for ((r = 0; r < rounds; r++)); do
  det+=("$(run)")
  app+=("$(attached_run 127.0.0.0)")
  nom+=("$(attached_run 192.0.2.0)")
  echo "round $r: detached ${det[r]}/s applied ${app[r]}/s no-match ${nom[r]}/s"
done
python3 - "${det[*]}" "${app[*]}" "${nom[*]}" <<'PY'
import statistics, sys
d, a, m = ([float(x) for x in arg.split()] for arg in sys.argv[1:4])
md = statistics.median(d)
print("median detached %.0f conn/s" % md)
for name, v in (("applied", a), ("no match", m)):
    mv = statistics.median(v)
    print("median attached (%s) %.0f conn/s, ratio %.3f (%.1f%% slower)"
          % (name, mv, mv / md, 100 * (1 - mv / md)))
PY
