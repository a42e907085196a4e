# Sourced by the DPDK data-plane benchmarks (dataplane_bench.sh, dataplane_workers_bench.sh):
# their settings from the environment, and gateway_bench's mix. Set BENCH_NAME first.
WORK=${WORK:-/tmp/spand-dataplane-bench}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
CONNS=${CONNS:-130000}
CONC=${CONC:-115000}
PY=/usr/bin/python3
EAL_BASE=(--no-huge --no-pci --no-shconf --log-level=lib.eal:warning)
die() { echo "$BENCH_NAME: $*" >&2; exit 1; }

# Makes the mix once per WORK directory (gen_synthetic.py, CONNS connections, CONC at once) and
# prints the generator's line; sets mix (its path), packets, and eal_mb (EAL memory in MiB:
# infinite_rx keeps every record in an mbuf).
dataplane_mix() {
  mkdir -p "$WORK"
  mix="$WORK/mix-$CONNS-$CONC.pcap"
  [[ -s $mix ]] || $PY "$here/gen_synthetic.py" "$mix" --connections "$CONNS" \
    --concurrency "$CONC" 2> "$mix.log" || die "generator failed"
  cat "$mix.log"
  packets=$(grep -o '[0-9]* packets' "$mix.log" | cut -d' ' -f1)
  eal_mb=$(( packets * 512 / 1048576 + 512 ))
}

# Waits up to 300 s for a line matching the extended regex $2 in file $1 while process $3 lives;
# false if none came.
wait_for_line() {
  local t
  for ((t = 0; t < 600; t++)); do
    grep -qaE "$2" "$1" && return 0
    kill -0 "$3" 2> /dev/null || break
    sleep 0.5
  done
  grep -qaE "$2" "$1"
}

# Runs "$@" (a gateway on an endless vdev, --progress among its options) in the background with
# its stderr in file $1 (given first), waits for its first progress line (packets flowing, its
# SIGINT handler in place: a script's background job starts with SIGINT ignored, so a SIGINT
# during a slow start-up was lost and the run never ended), lets it run DURATION seconds, then
# stops it with SIGINT and waits for its exit lines.
gateway_for_duration() {
  local log=$1 pid
  shift
  : > "$log"  # emptied here, not by the child's redirection: it may come after the first look
  "$@" > /dev/null 2> "$log" &
  pid=$!
  if ! wait_for_line "$log" '^dpdk: [0-9]+ packets, ' "$pid"; then
    kill -TERM "$pid" 2> /dev/null || true
    wait "$pid" || true
    die "gateway never started polling: $(tail -3 "$log")"
  fi
  sleep "$DURATION"
  kill -INT "$pid"
  wait "$pid" || die "gateway failed: $(tail -3 "$log")"
}
