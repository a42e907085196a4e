#!/usr/bin/env bash
# Gateway benchmark (not a test): one run reports
#   (a) spand-gateway on one worker lcore through DPDK (net_pcap infinite_rx), Mpps
#   (b) dpdk-testpmd --forward-mode=rxonly on the same vdev input: the ceiling
#   (c) tcptrace -n -l -r on the same file
#   (d) spand-gateway --pcap on the same file
#   (e) bytes of state per tracked connection
#   (f) peak RSS of spand-gateway --pcap with 1M live connections
# with the ratios, and the machine. Rates are given twice: per wall-clock second, and per CPU-second
# of the thread (or process) doing the work. On a shared machine only the second is comparable
# between runs: a busy-polling lcore gets whatever share of a core the scheduler gives it.
#
# Usage: tests/bench/gateway_bench.sh [BUILD_DIR]      (default: build)
# Benchmark an optimised build, as one would ship it:
#   meson setup build-release --buildtype=release -Db_lto=true && ninja -C build-release
# Environment: WORK (captures and logs, default /tmp/spand-gateway-bench), DURATION (seconds per
# DPDK run, default 10), ROUNDS (times (a), (c) and (d) run in turn, default 3), CONNS / CONC
# (synthetic mix: connections / concurrency, default 130000 / 115000), LIVE (handshakes for the
# RSS run, default 1000000).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/machine.sh"
build=${1:-build}
[[ $build = /* ]] || build="$root/$build"
GW="$build/spand-gateway"
WORK=${WORK:-/tmp/spand-gateway-bench}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-130000}
CONC=${CONC:-115000}
LIVE=${LIVE:-1000000}
PY=/usr/bin/python3
EAL_BASE=(--no-huge --no-pci --no-shconf --log-level=lib.eal:warning)

die() { echo "gateway_bench: $*" >&2; exit 1; }
[[ -x $GW ]] || die "no $GW (build it: ninja -C $build spand-gateway)"
command -v dpdk-testpmd >/dev/null || die "dpdk-testpmd missing (Debian package dpdk)"
command -v tcptrace >/dev/null || die "tcptrace missing"
[[ -x /usr/bin/time ]] || die "/usr/bin/time missing (Debian package time)"
mkdir -p "$WORK"

echo "== machine"
bench_machine
echo "dpdk:    $(pkg-config --modversion libdpdk 2>/dev/null || echo '?'), tcptrace $(tcptrace -v 2>&1 | grep -o 'version [0-9.]*' | head -1)"
echo "gateway: $GW ($(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "build:   $(build_line "$build")"
echo "thp:     $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo '?')"

echo "== captures"
mix="$WORK/mix-$CONNS-$CONC.pcap"
live="$WORK/live-$LIVE.pcap"
[[ -s $mix ]] || $PY "$here/gen_synthetic.py" "$mix" --connections "$CONNS" --concurrency "$CONC" 2> "$mix.log" || die "generator failed"
[[ -s $live ]] || $PY "$here/gen_synthetic.py" "$live" --shape handshakes --connections "$LIVE" 2> "$live.log" || die "generator failed"
cat "$mix.log" "$live.log"
mix_packets=$(grep -o '[0-9]* packets' "$mix.log" | cut -d' ' -f1)
max_caplen=128 # the generator's default snap length
# infinite_rx keeps every record in an mbuf: about 512 bytes each with a 256-byte data room.
eal_mb=$(( mix_packets * 512 / 1048576 + 512 ))
vdev="net_pcap0,rx_pcap=$mix,infinite_rx=1"
clk_tck=$(getconf CLK_TCK)

# CPU seconds of the thread named $2 in process $1 (utime + stime).
thread_cpu() {
  local pid=$1 name=$2 t
  for t in /proc/"$pid"/task/*; do
    if [[ $(cat "$t/comm" 2>/dev/null) == "$name" ]]; then
      awk -v hz="$clk_tck" '{printf "%.2f", ($14 + $15) / hz}' "$t/stat"
      return
    fi
  done
  echo 0
}

timed() { # prints "wall user sys maxrss_kb" of the command; its stdout and stderr go to $1
  local log=$1
  shift
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.out" "$@" > "$log" 2>&1 || die "$1 failed: $(tail -3 "$log")"
  cat "$WORK/time.out"
}
rate() { awk -v p="$1" -v c="$2" 'BEGIN {if (c > 0) printf "%.4f", p / c / 1e6; else print 0}'; }

# (a), (c) and (d) run ROUNDS times in turn, so that each ratio compares runs made minutes apart
# at most; the results give every round and the medians.
declare -a A_WALL A_CPU W_CPU C_WALL C_CPU D_WALL D_CPU D_OWN
# One DPDK run: $1 log file, then the gateway's own options. Sets `line` to its rate summary.
dpdk_run() {
  local log=$1 pid
  shift
  "$GW" -l 0,1 "${EAL_BASE[@]}" -m "$eal_mb" --vdev "$vdev" -- "$@" > /dev/null 2> "$log" &
  pid=$!
  # The clock starts when the worker lcore polls; setup (preloading the file) is not measured.
  sleep "$DURATION"
  kill -INT "$pid"
  wait "$pid" || die "gateway (DPDK $*) failed: $(tail -3 "$log")"
  line=$(grep -a '^dpdk: .* packets received' "$log") || die "no dpdk summary line in $log"
  echo "$line"
}
per_cpu_s() { sed -E 's/.*: ([0-9.]+) Mpps per CPU-second.*/\1/' <<< "$1"; }
run_a() {
  echo "== (a) spand-gateway, 1 worker lcore, DPDK net_pcap infinite_rx, ${DURATION} s"
  local line
  dpdk_run "$WORK/gw_dpdk.log"
  grep -a '^summary:\|^connections:\|^samples:\|^state:' "$WORK/gw_dpdk.log" | sed 's/^/  /'
  A_WALL+=("$(sed -E 's/.*: ([0-9.]+) Mpps on.*/\1/' <<< "$line")")
  A_CPU+=("$(per_cpu_s "$line")")
}
# (a) again with the Redis writer on (a local redis-server): the data-plane cost of aggregation.
run_a_writer() {
  echo "== (a+w) as (a), with --redis (writer on, flush every 1 s)"
  local line
  dpdk_run "$WORK/gw_dpdk_w.log" --redis "redis://127.0.0.1:$redis_port" --client-key-file public
  W_CPU+=("$(per_cpu_s "$line")")
}
run_c() {
  echo "== (c) tcptrace -n -l -r (no name lookups: tcptrace's fastest mode)"
  local wall user sys conns
  read -r wall user sys _ < <(timed "$WORK/tcptrace.log" tcptrace -n -l -r "$mix")
  conns=$(grep -a -c '^TCP connection [0-9]*:' "$WORK/tcptrace.log" || true)
  echo "tcptrace: $mix_packets packets, $conns connections in $wall s wall, $user + $sys s CPU"
  C_WALL+=("$(rate "$mix_packets" "$wall")")
  C_CPU+=("$(rate "$mix_packets" "$(awk -v a="$user" -v b="$sys" 'BEGIN {print a + b}')")")
}
run_d() {
  echo "== (d) spand-gateway --pcap"
  local wall user sys
  read -r wall user sys _ < <(timed "$WORK/gw_pcap.log" "$GW" --pcap "$mix")
  grep -a '^summary:\|^elapsed:\|^connections:\|^samples:\|^state:' "$WORK/gw_pcap.log" | sed 's/^/  /'
  echo "gateway --pcap: $mix_packets packets in $wall s wall, $user + $sys s CPU (process: table set-up and file reading included)"
  D_WALL+=("$(rate "$mix_packets" "$wall")")
  D_CPU+=("$(rate "$mix_packets" "$(awk -v a="$user" -v b="$sys" 'BEGIN {print a + b}')")")
  D_OWN+=("$(grep -a '^elapsed:' "$WORK/gw_pcap.log" | sed -E 's/.* ([0-9.]+) Mpps.*/\1/')")
}

echo "== (b) dpdk-testpmd --forward-mode=rxonly, same vdev, ${DURATION} s"
dpdk-testpmd -l 0,1 "${EAL_BASE[@]}" -m "$eal_mb" --vdev "$vdev" -- --forward-mode=rxonly \
  --total-num-mbufs=$(( mix_packets + 16384 )) --mbuf-size=$(( 128 + max_caplen )) \
  --stats-period=1 > "$WORK/testpmd.log" 2>&1 &
pid=$!
sleep "$DURATION"
tp_cpu_s=$(thread_cpu "$pid" rte-worker-1)
kill -INT "$pid"
wait "$pid" || true
tp_packets=$(grep -a 'RX-packets:.*RX-dropped' "$WORK/testpmd.log" | tail -1 | awk '{print $2}')
[[ -n $tp_packets ]] || die "testpmd printed no totals: $(tail -5 "$WORK/testpmd.log")"
# Wall rate: testpmd's own per-second Rx-pps, first two seconds (warm-up) left out.
tp_wall=$(grep -a 'Rx-pps:' "$WORK/testpmd.log" | awk 'NR > 2 {s += $2; n++} END {if (n) printf "%.3f", s / n / 1e6; else print 0}')
tp_cpu=$(awk -v p="$tp_packets" -v c="$tp_cpu_s" 'BEGIN {if (c > 0) printf "%.3f", p / c / 1e6; else print 0}')
echo "testpmd: $tp_packets packets; $tp_wall Mpps (wall); forwarding lcore CPU $tp_cpu_s s: $tp_cpu Mpps per CPU-second"

redis_port=
if command -v redis-server > /dev/null; then
  redis_port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
    > "$WORK/redis.log" 2>&1 &
  redis_pid=$!
  trap 'kill $redis_pid 2>/dev/null || true' EXIT
  for _ in $(seq 100); do redis-cli -p "$redis_port" ping > /dev/null 2>&1 && break; sleep 0.05; done
else
  echo "(no redis-server: the writer-on runs are left out)"
fi

for ((round = 1; round <= ROUNDS; round++)); do
  echo "== round $round of $ROUNDS"
  run_a
  [[ -n $redis_port ]] && run_a_writer
  run_c
  run_d
done

echo "== (e) state per tracked connection"
g++ -std=c++20 -O2 -I"$root/gateway" "$here/gateway_bench_sizes.cpp" "$build/gateway/dataplane/libspand_dataplane.a" \
  -o "$WORK/gateway_bench_sizes" || die "cannot build gateway_bench_sizes"
"$WORK/gateway_bench_sizes" | tee "$WORK/sizes.txt"
bpf=$(awk '/bytes_per_flow/ {print $2}' "$WORK/sizes.txt")
tbytes=$(awk '/table_bytes/ {print $2}' "$WORK/sizes.txt")
cap=$(awk '/flow_capacity/ {print $2}' "$WORK/sizes.txt")
lsb=$(awk '/loss_state_bytes/ {print $2}' "$WORK/sizes.txt")
echo "per connection: $bpf B of flow state; the table reserves $(( tbytes / cap )) B per connection of capacity"
# Directions with a gap or a resend hold a LossState more while their flow lives: the most held
# at once in the --pcap pass over the mix, against the peak number of live connections.
peak_ls=$(sed -nE 's/^state: .*\(([0-9]+) such directions at the peak\)/\1/p' "$WORK/gw_pcap.log" | tail -1)
peak_conc=$(sed -nE 's/.*peak ([0-9]+) concurrent.*/\1/p' "$mix.log" | tail -1)
if [[ -n $peak_ls && -n $peak_conc && $peak_conc -gt 0 ]]; then
  echo "loss states: $peak_ls at the peak of the --pcap pass ($lsb B each), $(( peak_ls * lsb / peak_conc )) B per connection over $peak_conc live connections; $(( bpf + peak_ls * lsb / peak_conc )) B per connection in all"
fi

echo "== (f) peak RSS, spand-gateway --pcap with $LIVE live connections (handshakes, no close)"
read -r lv_wall _ _ lv_rss < <(timed "$WORK/gw_live.log" "$GW" --pcap "$live")
grep -a '^connections:' "$WORK/gw_live.log" | sed 's/^/  /'
echo "peak RSS: $(( lv_rss / 1024 )) MB ($(( lv_rss * 1024 / LIVE )) B per live connection, fixed costs included), $lv_wall s"

echo "== results"
$PY - "$ROUNDS" "${A_WALL[*]}" "${A_CPU[*]}" "$tp_wall" "$tp_cpu" "${C_WALL[*]}" "${C_CPU[*]}" \
  "${D_WALL[*]}" "${D_CPU[*]}" "${D_OWN[*]}" "${W_CPU[*]:-}" <<'PY'
import statistics as st, sys
rounds = int(sys.argv[1])
a_wall, a_cpu = ([float(x) for x in v.split()] for v in sys.argv[2:4])
tp_wall, tp_cpu = float(sys.argv[4]), float(sys.argv[5])
c_wall, c_cpu, d_wall, d_cpu, d_own = ([float(x) for x in v.split()] for v in sys.argv[6:11])
med = st.median
print(f"{'':46s} {'Mpps (wall)':>12s} {'Mpps per CPU-s':>15s}   every round (per CPU-s)")
def row(name, wall, cpu, every=None):
    print(f"{name:46s} {wall:12.3f} {cpu:15.3f}   {every or ''}")
fmt = lambda xs: " ".join(f"{x:.3f}" for x in xs)
row("(a) spand-gateway, DPDK, 1 worker lcore", med(a_wall), med(a_cpu), fmt(a_cpu))
row("(b) dpdk-testpmd rxonly (ceiling)", tp_wall, tp_cpu)
row("(c) tcptrace -n -l -r", med(c_wall), med(c_cpu), fmt(c_cpu))
row("(d) spand-gateway --pcap (whole process)", med(d_wall), med(d_cpu), fmt(d_cpu))
print(f"{'(d2) spand-gateway --pcap, its packet loop':46s} {med(d_own):12.3f}")
ratio = lambda xs, ys: [x / y for x, y in zip(xs, ys) if y > 0]
ad, dd = ratio(a_cpu, c_cpu), ratio(d_cpu, c_cpu)
print(f"ratios per CPU-second, medians of the {rounds} rounds' ratios (every round in brackets):")
print(f"  gateway DPDK / testpmd ceiling: {med(a_cpu) / tp_cpu:.2f}")
print(f"  gateway DPDK / tcptrace:        {med(ad):.1f}  ({' '.join(f'{x:.1f}' for x in ad)})   target >= 20")
print(f"  gateway --pcap / tcptrace:      {med(dd):.1f}  ({' '.join(f'{x:.1f}' for x in dd)})")
w_cpu = [float(x) for x in sys.argv[11].split()]
if w_cpu:
    wd = [100 * (w / a - 1) for w, a in zip(w_cpu, a_cpu)]
    print(f"writer on (a+w) vs off (a), DPDK per CPU-second: on {fmt(w_cpu)}; change per round "
          f"{' '.join(f'{x:+.1f} %' for x in wd)}, median {med(wd):+.1f} %   target within 5 %")
PY
echo "targets: >= 10 Mpps per lcore via DPDK: (a) above; <= 256 B per connection: $bpf B"
echo "(e) $bpf B per connection; (f) peak RSS $(( lv_rss / 1024 )) MB with $LIVE live connections"
echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
