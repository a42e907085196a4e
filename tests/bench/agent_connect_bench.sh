#!/usr/bin/env bash
# Connection setup rate on loopback with spand-agent's sock_ops program detached vs attached,
# in one run (a benchmark: it prints numbers, it does not pass or fail). Needs root.
# One agent stays attached to cgroup "on"; runs alternate between three cases:
#   detached  - the client/server process in cgroup "off" (no program);
#   applied   - in cgroup "on", client bound to 127.0.0.1, which has a policy: every accepted
#               connection gets the full work (LPM lookups, TCP_BPF_IW, the clamp, the pacing
#               rate, the count of first windows in flight, the state callback at close; no
#               socket storage: these connections end before any data is acknowledged);
#   no match  - in cgroup "on", client bound to 127.0.0.3, no policy: the lookups alone (the
#               common case for clients without an estimate).
# Then the same three cases interleaved inside one process, blocks of CONNECTIONS/10, as many
# connections per case as above (agent_connect_bench --interleave): on a shared machine the
# other load changes within seconds, and this puts it on all three cases alike.
# With PACE_DEVICES=1 the agent also installs its HTB pacing classes (agent.pace_devices), on
# a veth pair the script creates: the program then also sets an applied connection's priority
# to its pacing class, which is the per-connection cost measured; loopback itself is not shaped.
# (HTB on lo itself would put every packet of every case through the qdisc and defer it to a
# softirq, which lets this client outrun accept() past the listen backlog.)
# Usage: [PACE_DEVICES=1] tests/bench/agent_connect_bench.sh BUILD_DIR [CONNECTIONS] [ROUNDS]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [CONNECTIONS] [ROUNDS]}
n=${2:-100000}
rounds=${3:-5}
bench=$build/tests/bench/agent_connect_bench
agent=$build/agents/spand-agent/spand-agent
cg2=/sys/fs/cgroup/unified
[[ -f $cg2/cgroup.procs ]] || cg2=/sys/fs/cgroup
on=$cg2/spand_bench_on
off=$cg2/spand_bench_off
work=$(mktemp -d)
mkdir -p "$on" "$off"
agent_pid=
cleanup() {
  if [[ -n $agent_pid ]]; then kill "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null || true; fi
  [[ -n ${PACE_DEVICES:-} ]] && ip link del spand_pb0 2>/dev/null || true
  rmdir "$on" "$off" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cat > "$work/est.json" <<JSON
{"estimates": [{"prefix": "127.0.0.1/32", "samples": 50, "wc_segments": 40, "rtt_ms": 1,
                "verdict": "USE_ESTIMATE"}]}
JSON
pace_line=
if [[ -n ${PACE_DEVICES:-} ]]; then
  ip link add spand_pb0 type veth peer name spand_pb1
  ip link set spand_pb0 up
  pace_line='pace_devices = ["spand_pb0"]'
fi
cat > "$work/agent.toml" <<TOML
[agent]
prefix_len_v4 = 32
metrics_listen = ""
prefixes = ["127.0.0.1/32"]
$pace_line
[[port]]
port = 18080
response_bytes = 100000
TOML
"$agent" --mode bpf --cgroup "$on" -c "$work/agent.toml" -f "$work/est.json" 2> "$work/agent.err" &
agent_pid=$!
for _ in $(seq 100); do grep -q 'applied port=18080' "$work/agent.err" && break; sleep 0.1; done
grep -q 'applied port=18080' "$work/agent.err" || { cat "$work/agent.err"; exit 1; }

run() {  # $1 cgroup, $2 client source: prints "connections_per_s,cpu_us_per_connection"
  bash -c "echo \$\$ > $1/cgroup.procs; exec $bench $n 18080 $2" |
    sed -n 's/.*rate_per_s=\([0-9]*\) cpu_us_per_conn=\([0-9.]*\).*/\1,\2/p'
}

echo "agent_connect_bench: $(date -u +%FT%TZ) nproc=$(nproc) cpu=\"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')\" kernel=$(uname -r) load=\"$(cut -d' ' -f1-3 /proc/loadavg)\""
echo "connections per run: $n, rounds: $rounds (detached, applied, no match, in turn)${PACE_DEVICES:+; HTB pacing classes on (veth) spand_pb0}"
declare -a det app nom
for ((r = 0; r < rounds; r++)); do
  det+=("$(run "$off" 127.0.0.1)")
  app+=("$(run "$on" 127.0.0.1)")
  nom+=("$(run "$on" 127.0.0.3)")
  echo "round $r (conn/s,cpu us/conn): detached ${det[r]} applied ${app[r]} no-match ${nom[r]}"
done
block=$((n / 10))
echo "interleaved: $((rounds * 10)) rounds of $block connections per case, order rotated per round"
"$bench" --interleave "$off" "$on" $((rounds * 10)) "$block" 18080 > "$work/interleaved.txt"
applied=$(bpftool map dump pinned /sys/fs/bpf/spand/stats | python3 -c '
import json, sys
print(sum(v["value"] for e in json.load(sys.stdin) if e["key"] == 1 for v in e["values"]))')
echo "program: policies applied to $applied connections (expected $((2 * n * rounds)))"
python3 - "${det[*]}" "${app[*]}" "${nom[*]}" <<'PY'
import statistics, sys
def parse(arg):
    pairs = [x.split(",") for x in arg.split()]
    return [float(p[0]) for p in pairs], [float(p[1]) for p in pairs]
(dr, dc), (ar, ac), (mr, mc) = (parse(arg) for arg in sys.argv[1:4])
md, mdc = statistics.median(dr), statistics.median(dc)
print("median detached: %.0f conn/s, %.2f cpu us/conn" % (md, mdc))
for name, r, c in (("applied", ar, ac), ("no match", mr, mc)):
    mv, mvc = statistics.median(r), statistics.median(c)
    print("median attached (%s): %.0f conn/s (%.1f%% slower), %.2f cpu us/conn (%+.1f%%)"
          % (name, mv, 100 * (1 - mv / md), mvc, 100 * (mvc / mdc - 1)))
PY
python3 - "$work/interleaved.txt" <<'PY'
import collections, re, statistics, sys
rows = collections.defaultdict(dict)  # round -> case -> (connections, seconds, cpu_s)
for line in open(sys.argv[1]):
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    rows[int(f["round"])][f["case"]] = (int(f["connections"]), float(f["seconds"]), float(f["cpu_s"]))
tot = {c: [sum(r[c][i] for r in rows.values()) for i in range(3)] for c in ("detached", "applied", "no_match")}
rate = {c: t[0] / t[1] for c, t in tot.items()}
cpu = {c: 1e6 * t[2] / t[0] for c, t in tot.items()}
print("interleaved totals: detached %.0f conn/s, %.2f cpu us/conn" % (rate["detached"], cpu["detached"]))
for c in ("applied", "no_match"):
    # per round: the case's block against the detached block of the same round
    rr = [r["detached"][1] / r[c][1] for r in rows.values()]
    cr = [(r[c][2] / r[c][0]) / (r["detached"][2] / r["detached"][0]) for r in rows.values()]
    print("interleaved %s: %.0f conn/s (%.1f%% slower; median of per-round ratios %.1f%%), "
          "%.2f cpu us/conn (%+.1f%%; per-round median %+.1f%%)"
          % (c.replace("_", " "), rate[c], 100 * (1 - rate[c] / rate["detached"]),
             100 * (1 - statistics.median(rr)), cpu[c], 100 * (cpu[c] / cpu["detached"] - 1),
             100 * (statistics.median(cr) - 1)))
PY
