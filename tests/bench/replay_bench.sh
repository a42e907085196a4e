#!/usr/bin/env bash
# Replay benchmark (not a test): an analyst's view of spand-gateway --pcap against other offline
# TCP analysers on the same capture, side by side in one run:
#   spand-gateway --pcap F --flows-out OUT            (the defaults: --workers picks 2 on 2+ cores)
#   spand-gateway --pcap F --flows-out OUT --workers 1
#   tcptrace -l -r -n F                                (per-connection statistics, RTT, rexmt)
#   ndpiReader -i F -q                                 (nDPI: DPI and flow statistics), if installed
# ROUNDS rounds, the tools in turn within a round, so that each ratio compares runs made seconds
# apart; prints every run, then per tool the median wall time, user and system CPU, peak RSS and
# the ratio of tcptrace's median wall time to the tool's (higher is faster), and the machine.
# The capture is read from the page cache (one untimed read first).
#
# Usage: tests/bench/replay_bench.sh [BUILD_DIR]      (default: build)
# Environment: WORK (default /tmp/spand-replay-bench), ROUNDS (default 5), CONNS (connections of
# the synthetic mix, default 50000), PCAP (a capture to use instead of the synthetic mix).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/machine.sh"
build=${1:-build}
[[ $build = /* ]] || build="$root/$build"
GW="$build/spand-gateway"
WORK=${WORK:-/tmp/spand-replay-bench}
ROUNDS=${ROUNDS:-5}
CONNS=${CONNS:-50000}
PY=/usr/bin/python3
die() { echo "replay_bench: $*" >&2; exit 1; }
[[ -x $GW ]] || die "no $GW (build it: ninja -C $build spand-gateway)"
command -v tcptrace > /dev/null || die "tcptrace missing (Debian package tcptrace)"
[[ -x /usr/bin/time ]] || die "/usr/bin/time missing (Debian package time)"
mkdir -p "$WORK"

echo "== machine"
bench_machine
echo "gateway: $GW ($(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "build:   $(build_line "$build")"
echo "tools:   tcptrace $(tcptrace -v 2>&1 | grep -o 'version [0-9.]*' | head -1), ndpiReader $(dpkg-query -W -f '${Version}' libndpi-bin 2>/dev/null || echo 'not installed')"

if [[ -n ${PCAP:-} ]]; then
  cap=$PCAP
else
  cap="$WORK/mix-$CONNS.pcap"
  [[ -s $cap ]] || $PY "$here/gen_synthetic.py" "$cap" --connections "$CONNS" \
    2> "$cap.log" || die "generator failed"
  cat "$cap.log"
fi
echo "capture: $cap, $(( $(stat -c %s "$cap") / 1048576 )) MiB"
cat "$cap" > /dev/null  # into the page cache

declare -A CMD
CMD[gateway]="$GW --pcap $cap --flows-out $WORK/flows.jsonl"
CMD[gateway_w1]="$GW --pcap $cap --flows-out $WORK/flows.jsonl --workers 1"
CMD[tcptrace]="tcptrace -l -r -n $cap"
tools=(gateway gateway_w1 tcptrace)
if command -v ndpiReader > /dev/null; then
  CMD[ndpiReader]="ndpiReader -i $cap -q"
  tools+=(ndpiReader)
fi

runs="$WORK/runs.tsv"
: > "$runs"
for ((round = 1; round <= ROUNDS; round++)); do
  for t in "${tools[@]}"; do
    # shellcheck disable=SC2086
    /usr/bin/time -f '%e %U %S %M' -o "$WORK/time.out" ${CMD[$t]} > "$WORK/$t.out" 2>&1 ||
      die "$t failed: $(tail -3 "$WORK/$t.out")"
    read -r wall user sys rss < "$WORK/time.out"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$t" "$wall" "$user" "$sys" "$rss" | tee -a "$runs"
  done
done
grep -a '^summary:\|^connections:\|^outputs:' "$WORK/gateway.out" | sed 's/^/  gateway: /'

echo "== results (medians of $ROUNDS rounds; x tcptrace = tcptrace's wall / the tool's)"
$PY - "$runs" "${tools[@]}" <<'PY'
import statistics as st, sys
rows = [l.split('\t') for l in open(sys.argv[1]).read().splitlines()]
tools = sys.argv[2:]
by = {t: [r for r in rows if r[1] == t] for t in tools}
med = lambda t, i: st.median(float(r[i]) for r in by[t])
tc = med('tcptrace', 2)
nd = med('ndpiReader', 2) if 'ndpiReader' in by else None
print(f"| tool | wall s (median) | every round | user s | sys s | peak RSS MB | x tcptrace | x ndpiReader |")
print(f"| --- | --- | --- | --- | --- | --- | --- | --- |")
for t in tools:
    w = med(t, 2)
    every = ' '.join(r[2] for r in by[t])
    ndr = f"{nd / w:.2f}" if nd else '-'
    print(f"| {t} | {w:.3f} | {every} | {med(t, 3):.2f} | {med(t, 4):.2f} | {med(t, 5) / 1024:.0f} | {tc / w:.2f} | {ndr} |")
PY
echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -x $build/tests/bench/json_bench ]]; then
  echo "== JSON Lines writer (json_bench)"
  "$build/tests/bench/json_bench"
fi
