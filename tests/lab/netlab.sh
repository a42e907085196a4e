#!/usr/bin/env bash
# A small network with a known truth: a Linux TCP server sends to clients through a router with a
# rate-limited drop-tail bottleneck and a delay line, the router's server-facing port is captured
# (where a span port would sit), and the server kernel's own tracepoints record its congestion
# window, recovery state and retransmissions. See README, "Lab: the gateway against the kernel's own truth".
#
# usage: netlab.sh OUTDIR CC DELAY_MS RATE LIMIT_BYTES TRANSFERS [SEED]
#   CC           server congestion control (reno, cubic, bbr), set on the listening socket
#   DELAY_MS     one-way delay added in each direction (RTT is about twice this)
#   RATE         bottleneck rate as tc writes it (10mbit)
#   LIMIT_BYTES  bottleneck buffer; a full buffer drops new arrivals
#   TRANSFERS    number of server-to-client transfers; SEED (default 1) picks sizes and timing
# env: LAB_DEADLINE_S (default 60) bounds the transfers; PYTHON (default python3).
# Exit status: 0 when every transfer finished and the trace lost nothing, 1 otherwise (outputs are
# kept for inspection), 2 on bad usage, 77 when this machine cannot run the lab (not root, no
# tracefs, no network namespaces).
set -u

if (($# < 6 || $# > 7)); then
  sed -n '7,16p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
OUT=$1 CC=$2 DELAY_MS=$3 RATE=$4 LIMIT_BYTES=$5 TRANSFERS=$6 SEED=${7:-1}
DEADLINE_S=${LAB_DEADLINE_S:-60}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
PORT=5001  # compare_truth.py and the trace filters know the server by this port
TRACEFS=/sys/kernel/tracing
EVENTS=(tcp_probe tcp_cong_state_set tcp_retransmit_skb tcp_retransmit_synack)

say() { echo "netlab: $*" >&2; }
cannot() { say "cannot run here: $*"; exit 77; }

((EUID == 0)) || cannot "needs root (network namespaces, tracefs)"
for tool in ip tc ethtool tcpdump "$PYTHON"; do
  command -v "$tool" >/dev/null || cannot "$tool not found"
done
if [[ ! -d $TRACEFS/events ]]; then
  mount -t tracefs nodev "$TRACEFS" 2>/dev/null || cannot "tracefs not mounted at $TRACEFS"
fi
for ev in "${EVENTS[@]}"; do
  [[ -d $TRACEFS/events/tcp/$ev ]] || cannot "no tcp:$ev tracepoint"
done

# Unique per run, so that concurrent runs neither share namespaces nor a trace buffer. The
# tracepoints themselves are global (they fire for port 5001 in every namespace), so the client
# addresses are unique per run too and the trace is cut down to them afterwards.
TAG=nl$$
NS_SRV=$TAG-srv NS_RTR=$TAG-rtr NS_DLY=$TAG-dly NS_CLI=$TAG-cli
NET=10.$((16 + $$ % 200))
SERVER=$NET.0.1
CLIENTS=($NET.1.10 $NET.1.11 $NET.2.10 $NET.2.11 $NET.3.10 $NET.3.11)
INSTANCE=$TRACEFS/instances/spand-$TAG

mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/{trace.pcap,tcp_probe.txt,realtime_minus_mono,plan.txt,transfers.txt,params}

pids=()
made_ns=()
cleanup() {
  local pid ns ev
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  if [[ -d $INSTANCE ]]; then
    for ev in "${EVENTS[@]}"; do echo 0 >"$INSTANCE/events/tcp/$ev/enable"; done 2>/dev/null
    rmdir "$INSTANCE" 2>/dev/null || say "could not remove trace instance $INSTANCE"
  fi
  for ns in "${made_ns[@]}"; do
    # Anything still running in our own namespaces is ours.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# Background processes are started with `ip netns exec` itself, not through a shell function,
# so that $! is the process to signal (ip execs into the command).
in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
fail() { say "$*"; exit 1; }

# Topology: srv:s0 -- r0:rtr:r1 -- d0:dly:d1 -- c0:cli. The router's r1 egress holds the
# bottleneck; the capture is on r0, before the bottleneck, as a span port near the servers.
for ns in $NS_SRV $NS_RTR $NS_DLY $NS_CLI; do
  ip netns add "$ns" || cannot "ip netns add failed"
  made_ns+=("$ns")
  ip -n "$ns" link set lo up
done
ip link add s0 netns $NS_SRV type veth peer name r0 netns $NS_RTR || fail "veth"
ip link add r1 netns $NS_RTR type veth peer name d0 netns $NS_DLY || fail "veth"
ip link add d1 netns $NS_DLY type veth peer name c0 netns $NS_CLI || fail "veth"
for end in $NS_SRV:s0 $NS_RTR:r0 $NS_RTR:r1 $NS_DLY:d0 $NS_DLY:d1 $NS_CLI:c0; do
  ns=${end%%:*} dev=${end#*:}
  # Without this, veths hand over 64 KB super-segments with unfinished checksums: the capture
  # would not show the segments the server's TCP really sent.
  in_ns "$ns" ethtool -K "$dev" tx off tso off gso off gro off >/dev/null 2>&1 ||
    fail "ethtool -K $dev"
  ip -n "$ns" link set "$dev" up
done
ip -n $NS_DLY link set d0 promisc on
ip -n $NS_DLY link set d1 promisc on
ip -n $NS_SRV addr add $SERVER/24 dev s0
ip -n $NS_SRV route add default via $NET.0.254
ip -n $NS_RTR addr add $NET.0.254/24 dev r0
for sub in 1 2 3; do
  ip -n $NS_RTR addr add $NET.$sub.1/24 dev r1
done
for addr in "${CLIENTS[@]}"; do
  ip -n $NS_CLI addr add "$addr"/24 dev c0
done
ip -n $NS_CLI route add default via $NET.1.1
in_ns $NS_RTR sysctl -qw net.ipv4.ip_forward=1
# Otherwise a connection starts from the ssthresh its predecessor to the same client cached.
in_ns $NS_SRV sysctl -qw net.ipv4.tcp_no_metrics_save=1
# Bucket of two full frames: the rate holds at the scale of a few packets.
in_ns $NS_RTR tc qdisc add dev r1 root tbf rate "$RATE" burst 3028 limit "$LIMIT_BYTES" ||
  fail "tc tbf rate $RATE limit $LIMIT_BYTES"

ip netns exec $NS_DLY "$PYTHON" "$HERE/delay_line.py" d0 d1 "$DELAY_MS" 2>"$OUT/delay_line.log" &
pids+=($!)
ip netns exec $NS_SRV "$PYTHON" "$HERE/transfer.py" serve $PORT "$CC" >"$OUT/server.log" 2>&1 &
pids+=($!)

# Readiness: one small transfer through the whole path (before tracing and capture start).
echo "0 ${CLIENTS[0]} 1000" >"$OUT/probe_plan.txt"
ready=0
for _ in 1 2 3 4 5 6 7 8 9 10; do
  if in_ns $NS_CLI "$PYTHON" "$HERE/transfer.py" fetch "$OUT/probe_plan.txt" $SERVER $PORT 2 \
    >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 0.5
done
rm -f "$OUT/probe_plan.txt"
((ready)) || fail "no connectivity from client to server (see $OUT/server.log, delay_line.log)"
grep -q mismatch "$OUT/server.log" && fail "congestion control $CC was not applied"

# A trace instance of our own: its clock, buffer and filters leave the global trace untouched.
mkdir "$INSTANCE" || fail "cannot create trace instance $INSTANCE"
echo mono >"$INSTANCE/trace_clock" || fail "trace_clock mono"
echo 16384 >"$INSTANCE/buffer_size_kb"
for ev in "${EVENTS[@]}"; do
  echo "sport == $PORT" >"$INSTANCE/events/tcp/$ev/filter" || fail "filter on $ev"
  echo 1 >"$INSTANCE/events/tcp/$ev/enable" || fail "enable $ev"
done

ip netns exec $NS_RTR tcpdump -i r0 -s 128 -U -n -w "$OUT/trace.pcap" tcp port $PORT \
  2>"$OUT/tcpdump.log" &
tcpdump_pid=$!
pids+=($tcpdump_pid)
for _ in $(seq 50); do
  grep -q 'listening on' "$OUT/tcpdump.log" 2>/dev/null && break
  sleep 0.1
done
grep -q 'listening on' "$OUT/tcpdump.log" || fail "tcpdump did not start (see $OUT/tcpdump.log)"

# Capture timestamps are CLOCK_REALTIME, trace timestamps CLOCK_MONOTONIC: record the offset,
# read between two monotonic reads, keeping the tightest of a few tries.
"$PYTHON" -c '
import time
best = None
for _ in range(50):
    a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    r = time.clock_gettime_ns(time.CLOCK_REALTIME)
    b = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    if best is None or b - a < best[0]:
        best = (b - a, r - (a + b) // 2)
print(f"{best[1] / 1e9:.9f}")' >"$OUT/realtime_minus_mono"

"$PYTHON" "$HERE/transfer.py" plan "$SEED" "$TRANSFERS" "${CLIENTS[@]}" >"$OUT/plan.txt"
ip netns exec $NS_CLI "$PYTHON" "$HERE/transfer.py" fetch "$OUT/plan.txt" $SERVER $PORT "$DEADLINE_S" \
  >"$OUT/transfers.txt" 2>&1 &
fetch_pid=$!
pids+=($fetch_pid)
finished=0
for _ in $(seq $((DEADLINE_S * 5 + 25))); do
  if ! kill -0 $fetch_pid 2>/dev/null; then
    wait $fetch_pid && finished=1
    break
  fi
  sleep 0.2
done
kill -0 $fetch_pid 2>/dev/null && { say "transfers past the deadline: killed"; kill $fetch_pid; }
# Let the last FIN/ACK exchanges reach the server and the capture.
sleep 1

for ev in "${EVENTS[@]}"; do echo 0 >"$INSTANCE/events/tcp/$ev/enable"; done
overrun=$(awk '/^overrun:/ { n += $2 } END { print n + 0 }' "$INSTANCE"/per_cpu/cpu*/stats)
prefix=${NET//./\\.}
grep -E "^#|(dest|daddr)=$prefix\.[123]\.1[01][: ]" "$INSTANCE/trace" >"$OUT/tcp_probe.txt"
foreign=$(grep -vcE "^#|(dest|daddr)=$prefix\.[123]\.1[01][: ]" "$INSTANCE/trace")

# SIGINT makes tcpdump flush the file and print its drop count.
kill -INT $tcpdump_pid 2>/dev/null
for _ in $(seq 50); do
  kill -0 $tcpdump_pid 2>/dev/null || break
  sleep 0.1
done
kill -0 $tcpdump_pid 2>/dev/null && kill -9 $tcpdump_pid
wait $tcpdump_pid 2>/dev/null
dropped=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$OUT/tcpdump.log")

cat >"$OUT/params" <<EOF
cc=$CC
delay_ms=$DELAY_MS
rate=$RATE
limit_bytes=$LIMIT_BYTES
transfers=$TRANSFERS
seed=$SEED
server=$SERVER:$PORT
client_prefixes=$NET.1.0/24 $NET.2.0/24 $NET.3.0/24
transfers_finished=$finished
trace_overrun_events=$overrun
trace_lines_of_other_runs=$foreign
capture_dropped_by_kernel=${dropped:-unknown}
EOF
cat "$OUT/params" >&2
((finished)) || fail "not every transfer finished (see $OUT/transfers.txt)"
((overrun == 0)) || fail "the trace buffer overflowed: $overrun events lost"
[[ ${dropped:-0} == 0 ]] || fail "tcpdump lost $dropped packets"
exit 0
