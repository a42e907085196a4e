#!/usr/bin/env bash
# Data-plane benchmark (not a test): the gateway's own work per packet, as issue 16 defines it,
#   own ns per packet = 1e3 / (gateway Mpps per CPU-second) - 1e3 / (testpmd rxonly Mpps per CPU-second)
# through DPDK (net_pcap infinite_rx, one worker lcore) on gateway_bench's mix, with testpmd run
# in the same round, so the receive cost both pay cancels. Also the worker alone on the capture
# held in memory (packet_loop_bench: no receive path at all). Each round runs testpmd, then every
# gateway given, in turn; prints every round, the medians over rounds, the ratios of the medians,
# and the machine with its load before and after (the machine is shared: compare ratios).
#
# Usage: tests/bench/dataplane_bench.sh [BUILD_DIR]          (default: build)
# Environment:
#   BEFORE     a second build directory (e.g. the commit before a change) run in the same rounds
#   ROUNDS     rounds (default 5); DURATION seconds per DPDK run (default 5)
#   CONNS/CONC the synthetic mix (default 130000 / 115000, gateway_bench's); WORK (default
#              /tmp/spand-dataplane-bench)
# Benchmark a release build, as gateway_bench: meson setup build-release --buildtype=release -Db_lto=true
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/machine.sh"
abs() { [[ $1 = /* ]] && echo "$1" || echo "$root/$1"; }
builds=("$(abs "${1:-build}")")
names=(after)
if [[ -n ${BEFORE:-} ]]; then
  builds=("$(abs "$BEFORE")" "${builds[0]}")
  names=(before after)
fi
BENCH_NAME=dataplane_bench
. "$here/dataplane_mix.sh"
for b in "${builds[@]}"; do
  [[ -x $b/spand-gateway ]] || die "no $b/spand-gateway"
  [[ -x $b/tests/bench/packet_loop_bench ]] || die "no $b/tests/bench/packet_loop_bench"
done
command -v dpdk-testpmd > /dev/null || die "dpdk-testpmd missing (Debian package dpdk)"

echo "== machine"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host:    $(uname -n), kernel $(uname -r), THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo '?')"
echo "cpu:     $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min, before the run)"
echo "dpdk:    $(pkg-config --modversion libdpdk 2>/dev/null || echo '?')"
for i in "${!builds[@]}"; do
  echo "${names[$i]}: ${builds[$i]} ($(git -C "${builds[$i]}" rev-parse --short HEAD 2>/dev/null || echo '?'), $(build_line "${builds[$i]}"))"
done

dataplane_mix
vdev="net_pcap0,rx_pcap=$mix,infinite_rx=1"
clk_tck=$(getconf CLK_TCK)
cat "$mix" > /dev/null

thread_cpu() {  # CPU seconds of thread $2 of process $1
  local t
  for t in /proc/"$1"/task/*; do
    if [[ $(cat "$t/comm" 2>/dev/null) == "$2" ]]; then
      awk -v hz="$clk_tck" '{printf "%.3f", ($14 + $15) / hz}' "$t/stat"
      return
    fi
  done
  echo 0
}
testpmd_rate() {  # Mpps per CPU-second of testpmd's forwarding lcore
  local pid cpu n
  : > "$WORK/testpmd.log"  # emptied before the start (wait_for_line reads it)
  dpdk-testpmd -l 0,1 "${EAL_BASE[@]}" -m "$eal_mb" --vdev "$vdev" -- --forward-mode=rxonly \
    --total-num-mbufs=$(( packets + 16384 )) --mbuf-size=256 --stats-period=1 \
    > "$WORK/testpmd.log" 2>&1 &
  pid=$!
  # Timed from its first statistics line (the file loaded, packets flowing), as the gateway.
  wait_for_line "$WORK/testpmd.log" 'RX-packets' "$pid" || true
  sleep "$DURATION"
  cpu=$(thread_cpu "$pid" rte-worker-1)
  kill -INT "$pid"
  wait "$pid" || true
  n=$(grep -a 'RX-packets:.*RX-dropped' "$WORK/testpmd.log" | tail -1 | awk '{print $2}')
  [[ -n $n ]] || die "testpmd printed no totals: $(tail -5 "$WORK/testpmd.log")"
  awk -v p="$n" -v c="$cpu" 'BEGIN {if (c > 0) printf "%.3f", p / c / 1e6; else print 0}'
}
gateway_rate() {  # Mpps per CPU-second of the gateway's worker lcore (its own exit line)
  local log="$WORK/gw.log"
  gateway_for_duration "$log" "$1/spand-gateway" -l 0,1 "${EAL_BASE[@]}" -m "$eal_mb" \
    --vdev "$vdev" -- --progress
  grep -a '^dpdk: .* packets received' "$log" | sed -E 's/.*: ([0-9.]+) Mpps per CPU-second.*/\1/'
}
loop_ns() {  # packet_loop_bench median CPU ns per packet (3 passes)
  "$1/tests/bench/packet_loop_bench" "$mix" 3 | tee -a "$WORK/loop.log" |
    sed -nE 's/^median: ([0-9.]+) ns per packet.*/\1/p'
}

runs="$WORK/runs.tsv"
: > "$runs"
: > "$WORK/loop.log"
echo "== rounds (Mpps per CPU-second; own = 1e3/gateway - 1e3/testpmd, ns per packet)"
for ((round = 1; round <= ROUNDS; round++)); do
  tp=$(testpmd_rate)
  # A run whose forwarding thread was not found yet (a slow start on a loaded machine): again.
  [[ $tp == 0 ]] && tp=$(testpmd_rate)
  line="round $round: testpmd $tp"
  for i in "${!builds[@]}"; do
    gw=$(gateway_rate "${builds[$i]}")
    lp=$(loop_ns "${builds[$i]}")
    own=$(awk -v g="$gw" -v t="$tp" 'BEGIN {printf "%.1f", 1e3 / g - 1e3 / t}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "${names[$i]}" "$tp" "$gw" "$own" "$lp" >> "$runs"
    line+="; ${names[$i]}: gateway $gw, own $own ns, loop $lp ns"
  done
  echo "$line (load $(cut -d' ' -f1 /proc/loadavg))"
done

echo "== results (medians of $ROUNDS rounds)"
$PY - "$runs" <<'PY'
import statistics as st, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
names = list(dict.fromkeys(r[1] for r in rows))
med = {}
for n in names:
    rs = [r for r in rows if r[1] == n]
    tp, gw, own, lp = (st.median(float(r[k]) for r in rs) for k in (2, 3, 4, 5))
    med[n] = (gw, own, lp)
    print(f"{n:7s} gateway {gw:.3f} Mpps per CPU-s ({1e3 / gw:.1f} ns per packet), testpmd {tp:.3f} "
          f"({1e3 / tp:.1f} ns); own work {own:.1f} ns per packet; worker alone "
          f"(packet_loop_bench) {lp:.1f} ns per packet")
if "before" in med:
    b, a = med["before"], med["after"]
    own_r = [float(x[4]) for x in rows if x[1] == "before"]
    own_a = [float(x[4]) for x in rows if x[1] == "after"]
    per_round = [x / y for x, y in zip(own_r, own_a)]
    print(f"before / after: gateway rate {a[0] / b[0]:.2f}x; own work {b[1] / a[1]:.2f}x "
          f"(per round {' '.join(f'{x:.2f}' for x in per_round)}); worker alone {b[2] / a[2]:.2f}x")
PY
echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
