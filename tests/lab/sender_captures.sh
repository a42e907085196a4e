#!/usr/bin/env bash
# Lab captures for sender identification (issue 15): one netlab.sh run per congestion control
# (reno, cubic, bbr, spand_scalable) and per path, so each capture's flavour is known because the
# lab chose it. spand_scalable is the agent's BPF Scalable TCP, registered with bpftool from the
# built object for the length of its runs and unregistered after.
#
# usage: sender_captures.sh OUTDIR BPF_OBJECT [TRANSFERS] [SEED]
#   OUTDIR      one subdirectory per run: CC_PATH (netlab.sh's outputs)
#   BPF_OBJECT  BUILD/agents/spand-agent/spand_scalable.bpf.o
#   TRANSFERS   per run (default 6); SEED (default 2): the stored captures (pcaps/lab/sender/)
# Paths (name: one-way delay ms, rate, buffer bytes), all with losses at the TBF bottleneck:
#   p1: 20 10mbit 30000    BDP ~34 segments, buffer ~20
#   p2: 10 20mbit 60000    BDP ~34, buffer ~41
#   p3: 30 8mbit 20000     BDP ~41, buffer ~14
#   p4: 5 4mbit 6000       BDP ~3,  buffer ~4: windows of 2-15 segments (under Scalable TCP's legacy
#                          window, CUBIC's Reno-friendly region)
# Each run holds /tmp/spand-netlab.lock only while it captures. Root only (netlab.sh exits 77).
set -u
if (($# < 2 || $# > 4)); then
  sed -n '7,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
OUT=$1 OBJ=$2 TRANSFERS=${3:-6} SEED=${4:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
LOCK=/tmp/spand-netlab.lock
PATHS=("p1 20 10mbit 30000" "p2 10 20mbit 60000" "p3 30 8mbit 20000" "p4 5 4mbit 6000")
[[ -r $OBJ ]] || { echo "sender_captures: no BPF object $OBJ" >&2; exit 2; }

scalable_ids() {
  bpftool struct_ops show 2>/dev/null | awk '$2 == "spand_scalable" { sub(":", "", $1); print $1 }'
}

run_one() {  # CC NAME DELAY RATE LIMIT
  local cc=$1 name=$2 delay=$3 rate=$4 limit=$5
  (
    local rc id
    flock 9
    local mine=""
    # A registration already there (a running agent's) is used as it is and left alone.
    if [[ $cc == spand_scalable && -z $(scalable_ids) ]]; then
      bpftool struct_ops register "$OBJ" >/dev/null || exit 1
      mine=$(scalable_ids)
    fi
    "$HERE/netlab.sh" "$OUT/${cc}_$name" "$cc" "$delay" "$rate" "$limit" "$TRANSFERS" "$SEED"
    rc=$?
    for id in $mine; do bpftool struct_ops unregister id "$id" >/dev/null; done
    exit $rc
  ) 9>"$LOCK"
}

status=0
for p in "${PATHS[@]}"; do
  read -r name delay rate limit <<<"$p"
  for cc in reno cubic bbr spand_scalable; do
    run_one "$cc" "$name" "$delay" "$rate" "$limit" || status=1
  done
done
exit $status
