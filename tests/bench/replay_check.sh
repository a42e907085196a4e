#!/usr/bin/env bash
# Replay outputs, recorded once and compared after a change (a tool for performance work, not a
# test): every capture under pcaps/ (and extra captures given in EXTRA_PCAPS) is replayed with
# --flows-out, --samples-out and --prefix-summary, under the default options and under options
# that drive the table's rarer paths (a tiny table: eviction; short timeouts: the sweep). What is
# kept per run: the flow records, the sample records, the prefix summary and the exit summary
# without its timing line. `compare` replays again and reports every file that differs, byte for
# byte (`cmp`); record order is part of the output.
#
# Usage: tests/bench/replay_check.sh record|compare DIR [BUILD_DIR] [-- extra gateway options]
#   record   replays into DIR (the reference: run it on the build before the change)
#   compare  replays into DIR.new and compares with DIR; exit status 1 when anything differs
# Environment: EXTRA_PCAPS (space-separated capture paths, e.g. a synthetic mix from
# gen_synthetic.py), VARIANTS (default "default tiny short").
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=${1:?record or compare}
ref=${2:?output directory}
build=${3:-build}
shift $(( $# < 3 ? $# : 3 ))
[[ ${1:-} == -- ]] && shift
extra=("$@")
[[ $build = /* ]] || build="$root/$build"
GW="$build/spand-gateway"
[[ -x $GW ]] || { echo "replay_check: no $GW" >&2; exit 2; }

case $mode in
  record) out=$ref ;;
  compare) out=$ref.new ;;
  *) echo "replay_check: record or compare, not '$mode'" >&2; exit 2 ;;
esac
rm -rf "$out"
mkdir -p "$out"

mapfile -t pcaps < <(find "$root/pcaps" -type f \( -name '*.pcap' -o -name '*.pcapng' -o -name '*.dmp' \) | sort)
# shellcheck disable=SC2206
pcaps+=(${EXTRA_PCAPS:-})

variant_opts() {
  case $1 in
    default) ;;
    tiny) echo "--flow-capacity 16" ;;  # full almost at once: eviction order and victims
    short) echo "--syn-timeout-ms 200 --idle-timeout-s 1 --closing-timeout-ms 50" ;;  # the sweep
  esac
}

for p in "${pcaps[@]}"; do
  name=$(basename "$p")
  for v in ${VARIANTS:-default tiny short}; do
    d="$out/$name.$v"
    # shellcheck disable=SC2046
    "$GW" --pcap "$p" $(variant_opts "$v") "${extra[@]}" --flows-out "$d.flows" \
      --samples-out "$d.samples" --prefix-summary > "$d.prefixes" 2> "$d.stderr" || echo "exit $?" >> "$d.stderr"
    # The exit summary without its timing line (the only part that changes run to run).
    grep -v '^elapsed:' "$d.stderr" > "$d.summary" || true
    rm "$d.stderr"
  done
done

if [[ $mode == compare ]]; then
  bad=0
  for g in "$out"/*; do  # the variants run this time
    f="$ref/$(basename "$g")"
    if ! cmp -s "$f" "$g"; then
      echo "differs: $(basename "$f")"
      bad=1
    fi
  done
  n=$(find "$out" -type f | wc -l)
  if [[ $bad == 0 ]]; then echo "replay_check: all $n files identical"; else exit 1; fi
fi
