#!/usr/bin/env bash
# Data-plane benchmark (not a test): two worker lcores against one, through DPDK, on
# gateway_bench's mix split by connection into two rx_pcap files (tests/bench/split_by_flow.py:
# what symmetric RSS does on a NIC), each looped by net_pcap (infinite_rx), one rx queue per file.
#   one worker:  -l 0,1: the main lcore (the collector) on CPU 0, the worker on CPU 1, polling both
#                queues (the port has no RSS, so without --queues-by-flow worker 0 takes them all)
#   two workers: --lcores 0@0,1@1,2@0 and --queues-by-flow: queue 0 to the worker on CPU 1, queue
#                1 to the worker on CPU 0, which it shares with the main lcore (this machine may
#                have two CPUs only; a third would give the collector its own)
# Rates are per CPU-second of each polling thread (what a worker does with a core of its own), and
# the packets over the wall time of the run (what the machine does). Each round runs both, in
# turn; prints every round, the medians, the ratios, and the machine with its load.
#
# Usage: tests/bench/dataplane_workers_bench.sh [BUILD_DIR]      (default: build)
# Environment: ROUNDS (default 5), DURATION seconds per run (default 5), CONNS/CONC (default
#              130000 / 115000), WORK (default /tmp/spand-dataplane-bench)
# Benchmark a release build, as gateway_bench: meson setup build-release --buildtype=release -Db_lto=true
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/machine.sh"
build=${1:-build}
[[ $build = /* ]] || build=$root/$build
BENCH_NAME=dataplane_workers_bench
. "$here/dataplane_mix.sh"
[[ -x $build/spand-gateway ]] || die "no $build/spand-gateway"

echo "== machine"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host:    $(uname -n), kernel $(uname -r), $(nproc) CPUs"
echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min, before the run)"
echo "dpdk:    $(pkg-config --modversion libdpdk 2>/dev/null || echo '?')"
echo "build:   $build ($(git -C "$build" rev-parse --short HEAD 2>/dev/null || echo '?'), $(build_line "$build"))"

dataplane_mix
split="$WORK/mix-$CONNS-$CONC.split"
[[ -s $split.1.pcap && $split.1.pcap -nt $mix ]] ||
  $PY "$here/split_by_flow.py" "$mix" "$split" 2 || die "split failed"
vdev="net_pcap0,rx_pcap=$split.0.pcap,rx_pcap=$split.1.pcap,infinite_rx=1"
cat "$split.0.pcap" "$split.1.pcap" > /dev/null

# Runs the gateway for DURATION seconds, one worker (one) or two (two); prints
# "wall_mpps cpu_mpps_w0 [cpu_mpps_w1]".
gateway_run() {
  local log="$WORK/gw-workers.log" lcores=(-l 0,1) opts=(--progress)
  [[ $1 == two ]] && lcores=(--lcores 0@0,1@1,2@0) opts+=(--queues-by-flow)
  gateway_for_duration "$log" "$build/spand-gateway" "${lcores[@]}" "${EAL_BASE[@]}" \
    -m "$eal_mb" --vdev "$vdev" -- "${opts[@]}"
  local wall per
  wall=$(grep -a '^dpdk: .* packets received' "$log" | sed -E 's/.*s: ([0-9.]+) Mpps on .*/\1/')
  per=$(grep -a '^dpdk: worker [0-9]*:' "$log" | sed -E 's/.*: ([0-9.]+) Mpps per CPU-second/\1/' |
        tr '\n' ' ')
  [[ -n $per ]] || per=$(grep -a '^dpdk: .* packets received' "$log" |
                         sed -E 's/.*: ([0-9.]+) Mpps per CPU-second.*/\1/')
  echo "$wall $per"
}

runs="$WORK/workers.tsv"
: > "$runs"
echo "== rounds (wall: packets / run time, Mpps; per CPU-second of each worker's polling thread)"
for ((round = 1; round <= ROUNDS; round++)); do
  read -r w1 c1 _ <<< "$(gateway_run one)"
  read -r w2 a2 b2 <<< "$(gateway_run two)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$w1" "$c1" "$w2" "$a2" "$b2" >> "$runs"
  echo "round $round: one worker: wall $w1, $c1 per CPU-s; two workers: wall $w2, $a2 + $b2 per CPU-s (load $(cut -d' ' -f1 /proc/loadavg))"
done

echo "== results (medians of $ROUNDS rounds)"
$PY - "$runs" <<'PY'
import statistics as st, sys
rows = [[float(x) for x in l.split("\t")] for l in open(sys.argv[1]).read().split("\n") if l]
med = lambda k: st.median(r[k] for r in rows)
s2 = [r[4] + r[5] for r in rows]
print(f"one worker:  {med(2):.3f} Mpps per CPU-second; wall {med(1):.3f} Mpps")
print(f"two workers: {med(4):.3f} + {med(5):.3f} Mpps per CPU-second (sum {st.median(s2):.3f}); "
      f"wall {med(3):.3f} Mpps")
print(f"two / one: sum of per-CPU-second rates {st.median(s2) / med(2):.2f}x (per round "
      f"{' '.join(f'{a / r[2]:.2f}' for a, r in zip(s2, rows))}); wall "
      f"{med(3) / med(1):.2f}x (per round {' '.join(f'{r[3] / r[1]:.2f}' for r in rows)})")
PY
echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
