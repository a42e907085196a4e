#!/usr/bin/env bash
# The gateway on every capture of a directory (a check, not a test: the captures are not ours,
# e.g. tcpdump's own test suite, `tests/*.pcap*` of its source tree). For each file: the exit
# status (0 read, 2 refused with a message; anything else, a signal above all, is a failure), the
# first message, and the TCP packets tracked against tshark's count of unfragmented TCP packets
# when tshark is installed (an independent decoder; tunnels, which the gateway does not open, and
# deliberately malformed files are where the two may differ). Prints a table of the files that
# failed or differ, then counts; exits 1 if any file failed.
#
# Usage: tests/bench/capture_corpus.sh DIR [BUILD_DIR] [GATEWAY_ARGS...]
#   e.g. tests/bench/capture_corpus.sh ~/src/tcpdump/tests build -- --workers 2
# A BUILD_DIR holds spand-gateway (default: build). Environment: TIMEOUT per file (s, default 60).
set -euo pipefail
dir=${1:?usage: $0 DIR [BUILD_DIR] [-- GATEWAY_ARGS...]}
build=${2:-build}
shift $(($# >= 2 ? 2 : 1))
[[ ${1:-} == -- ]] && shift
gw=$build/spand-gateway
[[ -x $gw ]] || { echo "capture_corpus: no $gw" >&2; exit 2; }
[[ -d $dir ]] || { echo "capture_corpus: no directory $dir" >&2; exit 2; }
have_tshark=0
command -v tshark >/dev/null && have_tshark=1
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); gateway: $("$gw" --version | head -1); dir: $dir"
echo "extra arguments: ${*:-none}; tshark: $([[ $have_tshark == 1 ]] && tshark --version 2>/dev/null | head -1 || echo absent)"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
files=0 read_ok=0 refused=0 failed=0 same=0 differ=0
declare -A why
printf '%-48s %6s %8s %8s  %s\n' file status ours tshark message
while IFS= read -r -d '' f; do
  files=$((files + 1))
  rc=0
  timeout "${TIMEOUT:-60}" "$gw" --pcap "$f" --flows-out /dev/null --samples-out /dev/null "$@" \
    >/dev/null 2>"$err" || rc=$?
  msg=$(grep -m1 '^spand-gateway:' "$err" | sed "s|^spand-gateway: ${f//|/\\|}: ||" | cut -c1-90 || true)
  ours=$(awk '/^summary:/ {for (i = 1; i < NF; ++i) if ($(i + 1) == "TCP") print $i}' "$err")
  case $rc in
    0) read_ok=$((read_ok + 1)) ;;
    2)
      refused=$((refused + 1))
      key=$(sed -E 's/[0-9]+ packets/N packets/; s/after [0-9]+/after N/; s/; supported:.*//' <<<"$msg" | cut -c1-70)
      why[$key]=$((${why[$key]:-0} + 1))
      ;;
    *) failed=$((failed + 1)) ;;
  esac
  theirs=-
  if [[ $have_tshark == 1 && $rc == 0 ]]; then
    theirs=$(tshark -r "$f" -Y 'tcp && !(ip.flags.mf == 1) && !(ip.frag_offset > 0) && !ipv6.fragment' \
      -T fields -e frame.number 2>/dev/null | wc -l)
    if [[ $theirs == "${ours:-0}" ]]; then same=$((same + 1)); else differ=$((differ + 1)); fi
  fi
  if [[ $rc != 0 && $rc != 2 ]] || [[ $theirs != - && $theirs != "${ours:-0}" ]]; then
    printf '%-48s %6s %8s %8s  %s\n' "$(basename "$f")" "$rc" "${ours:--}" "$theirs" "$msg"
  fi
done < <(find "$dir" -maxdepth 1 -type f \( -name '*.pcap' -o -name '*.pcapng' -o -name '*.cap' \
  -o -name '*.dmp' \) -print0 | sort -z)
echo "files: $files; read (exit 0): $read_ok; refused (exit 2): $refused; failed (other status): $failed"
[[ $have_tshark == 1 ]] && echo "TCP packets tracked = tshark's count: $same of $read_ok (differ: $differ)"
for k in "${!why[@]}"; do printf '  refused %5d  %s\n' "${why[$k]}" "$k"; done | sort -k2,2nr
((failed == 0))
