#!/usr/bin/env bash
# A/B of the worker alone (a benchmark, not a test): packet_loop_bench of several builds on one
# capture, interleaved round by round (build 1, build 2, ..., then again), so that a shared
# machine's load falls on every build alike. Prints each run, then per build the median over
# rounds of its per-run medians and the ratio to the first build, with the machine and its load
# before and after. Lower is better (CPU ns per packet).
#
# Usage: tests/bench/packet_loop_ab.sh CAPTURE BUILD_DIR... (environment: ROUNDS, default 5;
#        PASSES per run, default 3)
# A build is a build directory holding tests/bench/packet_loop_bench, or the binary itself.
set -euo pipefail
cap=${1:?usage: $0 CAPTURE BUILD_DIR...}
shift
(($# >= 1)) || { echo "packet_loop_ab: no build given" >&2; exit 2; }
ROUNDS=${ROUNDS:-5}
PASSES=${PASSES:-3}
bins=()
for b in "$@"; do
  if [[ -f $b ]]; then bins+=("$b"); else bins+=("$b/tests/bench/packet_loop_bench"); fi
  [[ -x ${bins[-1]} ]] || { echo "packet_loop_ab: no ${bins[-1]}" >&2; exit 2; }
done
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); cpu: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); capture: $cap; $ROUNDS rounds of $PASSES passes"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= ROUNDS; ++r)); do
  for i in "${!bins[@]}"; do
    ns=$("${bins[$i]}" "$cap" "$PASSES" 2>&1 | awk '/^median:/ {print $2}')
    [[ -n $ns ]] || { echo "packet_loop_ab: ${bins[$i]} gave no median" >&2; exit 1; }
    echo "round $r: ${bins[$i]} $ns ns" | tee -a "$out"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$out" "${bins[@]}" << 'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
bins = sys.argv[2:]
runs = {b: [float(r[3]) for r in rows if r[2] == b] for b in bins}
first = statistics.median(runs[bins[0]])
for b in bins:
    m = statistics.median(runs[b])
    print(f"{b}: median {m:.1f} ns per packet, {m / first:.3f} x the first; runs {runs[b]}")
PY
