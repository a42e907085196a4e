"""The gateway against the kernel's truth on a matrix of paths and senders (issue 15, point 5).

One netlab.sh run per (path, sender): the gateway reads the capture, compare_truth.py scores it
against the server kernel's tcp_probe trace, sender_truth.py says which flavour the wire could
show. Prints per run and per sender: W_c at losses in congestion avoidance within one segment
(all, and the knowable ones: compare_truth.py marks a kernel window left unused in the round
trip before the loss), loss-free W_c within 10 %, the median decrease (ours and the kernel's),
connections whose loss events (fast / timeout) are exactly the kernel's, and senders identified
among connections with two or more losses whose decrease the wire showed.

usage: truth_matrix.py OUTDIR GATEWAY [--seed N] [--transfers N] [--only NAME,...]
         [--scalable-obj BUILD/agents/spand-agent/spand_scalable.bpf.o] [--report-only]
Root only (netlab.sh). Each run holds /tmp/spand-netlab.lock for its own length only (about
20 s); HyStart (tcp_cubic's global module parameter) is set for the run and restored after,
inside the lock; the BPF Scalable TCP is registered for its runs and unregistered after, unless
a registration (a running agent's) was already there.
"""
import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sender_truth  # noqa: E402

LOCK = '/tmp/spand-netlab.lock'
HYSTART = '/sys/module/tcp_cubic/parameters/hystart'
SEGMENT_BITS = 1448 * 8

# Paths: name, one-way delay (ms), rate (tc syntax, Mbit/s), buffer (bytes), quick ACKs.
# BDP in segments = rate x 2 x delay / (1448 x 8); the buffer as a multiple of it.
PATHS = [
    ('b5_q2', 5, 6, 15000, False),     # BDP 5.2, buffer 1.9 BDP
    ('b5_q1_qa', 5, 6, 7500, True),    # BDP 5.2, buffer 1.0 BDP, an ACK per segment
    ('b35_q025', 20, 10, 12500, False),  # BDP 34.5, buffer 0.25 BDP
    ('b35_q1_qa', 20, 10, 50000, True),  # BDP 34.5, buffer 1.0 BDP, an ACK per segment
    ('b100_q05', 30, 20, 75000, False),  # BDP 104, buffer 0.5 BDP
    ('b200_q025', 30, 40, 75000, False),  # BDP 207, buffer 0.25 BDP
    ('b200_q2', 30, 40, 600000, False),   # BDP 207, buffer 2.0 BDP
]
# Senders: name, congestion control, HyStart (cubic only).
COUNTS = ('connections', 'wc_total', 'wc_close', 'wc_unknowable', 'events_exact', 'events_knowable',
          'lossfree_total', 'lossfree_close', 'lossfree_unknowable')
SENDERS = [('reno', 'reno', None), ('cubic', 'cubic', 1), ('cubic_nohs', 'cubic', 0),
           ('scalable', 'spand_scalable', None)]


def scalable_ids():
    out = subprocess.run(['bpftool', 'struct_ops', 'show'], capture_output=True, text=True).stdout
    return [line.split(':')[0] for line in out.splitlines()
            if len(line.split()) > 1 and line.split()[1] == 'spand_scalable']


def run_lab(run_dir, path, sender, args):
    name, delay, rate, limit, quick = path
    _, cc, hystart = sender
    env = dict(os.environ, LAB_DEADLINE_S='60', LAB_QUICKACK='1' if quick else '0')
    with open(LOCK, 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old_hs, mine = None, []
        try:
            if hystart is not None:
                old_hs = open(HYSTART).read().strip()
                with open(HYSTART, 'w') as f:
                    f.write(str(hystart))
            if cc == 'spand_scalable' and not scalable_ids():
                subprocess.run(['bpftool', 'struct_ops', 'register', args.scalable_obj],
                               check=True, capture_output=True)
                mine = scalable_ids()
            rc = subprocess.run([os.path.join(HERE, 'netlab.sh'), run_dir, cc, str(delay),
                                 f'{rate}mbit', str(limit), str(args.transfers), str(args.seed)],
                                env=env, capture_output=True, text=True).returncode
        finally:
            for i in mine:
                subprocess.run(['bpftool', 'struct_ops', 'unregister', 'id', i],
                               capture_output=True)
            if old_hs is not None:
                with open(HYSTART, 'w') as f:
                    f.write(old_hs)
    return rc


def score(run_dir, gateway):
    flows, samples = os.path.join(run_dir, 'flows.jsonl'), os.path.join(run_dir, 'samples.jsonl')
    subprocess.run([gateway, '--pcap', os.path.join(run_dir, 'trace.pcap'), '--flows-out', flows,
                    '--samples-out', samples], check=True, capture_output=True)
    out = os.path.join(run_dir, 'compare.json')
    text = subprocess.run([sys.executable, os.path.join(HERE, 'compare_truth.py'),
                           os.path.join(run_dir, 'tcp_probe.txt'),
                           os.path.join(run_dir, 'realtime_minus_mono'), flows, samples,
                           '--json', out], check=True, capture_output=True, text=True).stdout
    with open(os.path.join(run_dir, 'compare.txt'), 'w') as f:
        f.write(text)
    result = json.load(open(out))
    # Sender identification: the flavour the wire could show (sender_truth.py) against ours.
    cc = dict(line.strip().split('=', 1) for line in open(os.path.join(run_dir, 'params'))
              if '=' in line)['cc']
    ours = {(f['client'], f['client_port']): f['s2c'].get('sender', 'unknown')
            for f in map(json.loads, open(flows)) if f['server_port'] == 5001}
    ids = []
    for peer, (cwnds, shown) in sender_truth.losses_by_peer(
            os.path.join(run_dir, 'tcp_probe.txt')).items():
        want = sender_truth.expected(cc, shown)
        if len(cwnds) >= 2 and peer in ours:
            ids.append((f'{peer[0]}:{peer[1]}', len(cwnds), want, ours[peer]))
    result['sender_ids'] = ids
    return result


def pct(a, b):
    return f'{a}/{b} ({100 * a / b:.0f}%)' if b else '-'


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('outdir')
    ap.add_argument('gateway')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--transfers', type=int, default=30)
    ap.add_argument('--only', help='comma-separated path or sender names')
    ap.add_argument('--scalable-obj', default='')
    ap.add_argument('--report-only', action='store_true',
                    help='score the runs already in OUTDIR again (a new gateway), no lab runs')
    args = ap.parse_args()
    only = set(args.only.split(',')) if args.only else None
    totals = {}
    for path in PATHS:
        for sender in SENDERS:
            if only and path[0] not in only and sender[0] not in only:
                continue
            if sender[1] == 'spand_scalable' and not args.scalable_obj and not args.report_only:
                continue
            run_dir = os.path.join(args.outdir, f'{sender[0]}_{path[0]}')
            if not args.report_only:
                rc = run_lab(run_dir, path, sender, args)
                if rc != 0:
                    print(f'{sender[0]} {path[0]}: netlab.sh exited {rc} (see {run_dir}/params)')
            if not os.path.exists(os.path.join(run_dir, 'tcp_probe.txt')):
                continue
            r = score(run_dir, args.gateway)
            t = totals.setdefault(sender[0], {k: 0 for k in COUNTS})
            for k in COUNTS:
                t[k] += r[k]
            t.setdefault('dec_ours', []).extend(r['decrease_ours'])
            t.setdefault('dec_kernel', []).extend(r['decrease_kernel'])
            t.setdefault('ids', []).extend(r['sender_ids'])
            t.setdefault('misses', []).extend([f'{path[0]} {m[0]} kernel {m[2]} ours {m[3]}'
                                               + (f' ({m[4]})' if m[4] else '')
                                               for m in r['misses']])
            print(f"{sender[0]:10} {path[0]:10} conns {r['connections']:2} W_c "
                  f"{pct(r['wc_close'], r['wc_total'])} unknowable {r['wc_unknowable']} "
                  f"loss-free {pct(r['lossfree_close'], r['lossfree_total'])} events "
                  f"{pct(r['events_exact'], r['connections'])} (but for silent recoveries "
                  f"{r['events_knowable']})", flush=True)
    print()
    for name, t in totals.items():
        known = t['wc_total'] - t['wc_unknowable']
        med = (lambda v: f'{statistics.median(v):.3f} ({len(v)})' if v else '-')
        ids = [i for i in t['ids'] if i[2] != '-']
        right = sum(i[2] == i[3] for i in ids)
        print(f"{name}: W_c within 1 {pct(t['wc_close'], t['wc_total'])}, of the knowable "
              f"{pct(t['wc_close'], known)}; loss-free within 10 % "
              f"{pct(t['lossfree_close'], t['lossfree_total'])}, of the knowable "
              f"{pct(t['lossfree_close'], t['lossfree_total'] - t['lossfree_unknowable'])}; "
              f"decrease median ours "
              f"{med(t['dec_ours'])} kernel {med(t['dec_kernel'])}; loss events exact "
              f"{pct(t['events_exact'], t['connections'])}, but for silent recoveries "
              f"{pct(t['events_knowable'], t['connections'])}; sender identified "
              f"{pct(right, len(ids))} (of {len(t['ids'])} with 2+ losses, "
              f"{len(t['ids']) - len(ids)} unknowable)")
        for m in t['misses']:
            print(f'  W_c miss {m}')
        for i in ids:
            if i[2] != i[3]:
                print(f'  sender miss {i[0]}: {i[1]} losses, expected {i[2]}, ours {i[3]}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
