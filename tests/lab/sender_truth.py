"""The kernel's truth for sender identification, from one lab run (netlab.sh's OUTDIR).

Per connection traced by the server kernel: its loss events (tcp_cong_state_set entering
recovery or loss from the open state, an RTO during recovery one more, as compare_truth.py
counts them), the kernel's snd_cwnd at each, and the flavour the wire can show given the lab's
congestion control (the run's `params`, chosen by the lab, never read from the capture):
- bbr: bbr (told by pacing, at any window);
- window-based senders show their flavour in a decrease: a fast recovery that ended back in
  the open state (no RTO inside it; `shown` below), from a window of 9 segments or more: below
  9, Reno's max(W/2, 2) and CUBIC's max(0.7 W, 2) are less than two whole segments apart, within
  what a flight seen on the wire can tell (a segment in transit, one of growth). Without such a
  decrease: `-` (unknowable). With one:
- reno: reno; cubic: cubic;
- spand_scalable: scalable when some loss came at a window above its legacy window of 16
  segments (there it keeps 7/8); else reno, since below 16 it is Reno by definition.
Writes `client_addr client_port cc losses expected shown cwnds_at_losses` lines (tab-separated):
shown is the kernel's snd_cwnd at the start of each recovery that showed its decrease.

usage: sender_truth.py RUN_DIR [OUT]   (OUT defaults to RUN_DIR/sender_truth.tsv)
       sender_truth.py PARAMS TCP_PROBE_TXT[.gz] OUT
"""
import gzip
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_truth import STATE, endpoint  # noqa: E402

PROBE = re.compile(r'\s(\d+\.\d+): tcp_probe: .*?dest=(\S+) .*?snd_nxt=0x([0-9a-f]+) .*?'
                   r'snd_cwnd=(\d+) ')

LEGACY_SEGMENTS = 16
SHOWING_WINDOW = 9


def losses_by_peer(trace_path):
    """Per peer: the kernel's snd_cwnd at each loss event, and at each loss whose fast recovery
    ended back in the open state (no RTO within it) and was followed by new data (snd_nxt moved
    on before the next loss or the end): the decreases the wire could show."""
    probes, states = {}, {}
    opener = gzip.open if trace_path.endswith('.gz') else open
    with opener(trace_path, 'rt', errors='replace') as f:
        for line in f:
            m = PROBE.search(line)
            if m:
                t, dst, nxt, cwnd = m.groups()
                probes.setdefault(endpoint(dst), []).append((float(t), int(cwnd), int(nxt, 16)))
                continue
            m = STATE.search(line)
            if m:
                t, port, addr, st = m.groups()
                states.setdefault((addr, int(port)), []).append((float(t), int(st)))
    out = {}
    def nxt_at(acks, t):
        return ([a for a in acks if a[0] <= t] or acks[:1])[-1][2]

    def moved_on(nxt_then, nxt_now):  # snd_nxt advanced (modulo 2^32)
        return 0 < (nxt_now - nxt_then) % 2**32 < 2**31

    for peer, acks in probes.items():
        # pending: (cwnd at the loss, snd_nxt when its recovery ended), until new data shows
        cwnds, shown, prev, entry, pending = [], [], 0, None, None
        for t, st in states.get(peer, []):
            if (st in (3, 4) and prev not in (3, 4)) or (st == 4 and prev == 3):
                if pending is not None and moved_on(pending[1], nxt_at(acks, t)):
                    shown.append(pending[0])
                pending = None
                before = [a for a in acks if a[0] <= t] or acks[:1]
                cwnds.append(before[-1][1])
                entry = before[-1][1] if st == 3 else None
            elif st in (0, 1) and prev == 3 and entry is not None:
                pending = (entry, nxt_at(acks, t))
                entry = None
            prev = st
        if pending is not None and moved_on(pending[1], acks[-1][2]):
            shown.append(pending[0])
        out[peer] = (cwnds, shown)
    return out


def expected(cc, shown):
    if cc == 'bbr':
        return 'bbr'
    if cc not in ('reno', 'cubic', 'spand_scalable'):
        raise SystemExit(f'sender_truth: unknown congestion control {cc}')
    if not any(w >= SHOWING_WINDOW for w in shown):
        return '-'
    if cc == 'spand_scalable':
        return 'scalable' if any(w > LEGACY_SEGMENTS for w in shown) else 'reno'
    return cc


def main():
    if len(sys.argv) == 4:
        params_path, trace_path, out_path = sys.argv[1:]
    elif len(sys.argv) in (2, 3):
        run = sys.argv[1]
        params_path = os.path.join(run, 'params')
        trace_path = os.path.join(run, 'tcp_probe.txt')
        out_path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(run, 'sender_truth.tsv')
    else:
        sys.exit(__doc__)
    params = dict(line.strip().split('=', 1) for line in open(params_path) if '=' in line)
    cc = params['cc']
    rows = []
    for (addr, port), (cwnds, shown) in sorted(losses_by_peer(trace_path).items()):
        rows.append(f'{addr}\t{port}\t{cc}\t{len(cwnds)}\t{expected(cc, shown)}\t'
                    f'{",".join(map(str, shown)) or "-"}\t{",".join(map(str, cwnds)) or "-"}\n')
    with open(out_path, 'w') as f:
        f.write('# client_addr\tclient_port\tcc\tlosses\texpected\tcwnds_at_shown_decreases\t'
                'cwnds_at_losses\n')
        f.writelines(rows)


if __name__ == '__main__':
    main()
