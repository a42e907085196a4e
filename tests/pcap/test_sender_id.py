"""Sender identification (the flow record's `sender`, issue 15) on lab captures whose congestion
control the lab chose: pcaps/lab/sender/ (16 runs of tests/lab/sender_captures.sh: reno, cubic,
bbr and spand_scalable, the agent's BPF Scalable TCP, on four paths) and pcaps/lab/*_3nets (the
reno, cubic and Scalable TCP runs of test_lab_truth). The truth is independent of the gateway: the flavour
from the run's parameters, and from the server kernel's own trace (tests/lab/sender_truth.py,
stored as NAME.truth.tsv, computed here from the stored trace for the 3nets runs) which losses
could show it: a fast recovery from a window of 9 segments or more that ended in the open state
and was followed by new data; and for Scalable TCP whether any came above its legacy window of
16 segments (below it Scalable TCP is Reno, and `reno` is the right answer).

Counted: connections with two or more loss events in the kernel's trace. Measured when the
captures were made (2026-11-24):
  sender/:  65/68 of the connections whose kernel trace shows a decrease or that run BBR
            (reno 14/14, cubic 15/15, spand_scalable 18/18 of which 7 `reno` below 16, bbr 18/21)
  3nets:    36/37 (reno 15/16, cubic 21/21)
  scalable_3nets (added 2026-11-24, seventh session): 17/17 (12 `reno`, 5 `scalable`)
and never a wrong flavour: every miss is `unknown`. The three BBR misses sent no new segment
after their first loss, and pacing is counted only from there (the state that counts it is the
one a loss allocates); the reno miss had all its decreases from windows of 4-10 segments, where
a flight seen on the wire rarely sets Reno's 1/2 two segments apart from CUBIC's 0.7.
Connections without such a decrease (12 in sender/, 3 in 3nets) are unknowable from the wire;
they must not be given a flavour the lab did not run.
"""
import collections
import csv
import json
import lzma
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.join(HERE, '..', '..', 'pcaps', 'lab')
TRUTH = os.path.join(HERE, '..', 'lab', 'sender_truth.py')
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')
SENDER_RUNS = sorted(f[:-len('.pcap.xz')] for f in os.listdir(os.path.join(LAB, 'sender'))
                     if f.endswith('.pcap.xz'))
# What an answer may be for a connection the wire cannot tell (truth '-'), per lab flavour.
ALLOWED_UNKNOWABLE = {'reno': {'reno', 'unknown'}, 'cubic': {'cubic', 'unknown'},
                      'spand_scalable': {'reno', 'scalable', 'unknown'}, 'bbr': {'bbr', 'unknown'}}
# Least share right per lab flavour (measured above; BBR's short connections are the known gap).
MIN_RIGHT = {'reno': 0.93, 'cubic': 0.95, 'spand_scalable': 0.95, 'bbr': 0.85}
MIN_RIGHT_ALL = 0.95


def read_truth(path):
    rows = {}
    with open(path) as f:
        for row in csv.reader((l for l in f if not l.startswith('#')), delimiter='\t'):
            addr, port, cc, losses, expected = row[:5]
            rows[(addr, int(port))] = (cc, int(losses), expected)
    return rows


def senders(pcap, tmp_path):
    flows = tmp_path / 'flows.jsonl'
    subprocess.run([GATEWAY, '--pcap', str(pcap), '--flows-out', str(flows)], check=True,
                   capture_output=True)
    out = {}
    for line in flows.read_text().splitlines():
        r = json.loads(line)
        out[(r['client'], r['client_port'])] = r['s2c']['sender']
        assert r['c2s']['sender'] == 'unknown'  # the clients send a request line only
    return out


def judge(truth, got, tally):
    for key, (cc, losses, expected) in truth.items():
        if losses < 2:
            continue
        answer = got.get(key)
        assert answer is not None, f'{key}: traced by the kernel, not in the flow records'
        if expected == '-':
            assert answer in ALLOWED_UNKNOWABLE[cc], f'{key} ({cc}, unknowable): said {answer}'
            continue
        assert answer in (expected, 'unknown'), f'{key} ({cc}): {answer}, truth {expected}'
        tally[cc][0] += answer == expected
        tally[cc][1] += 1


def check(tally, label):
    right = sum(r for r, _ in tally.values())
    total = sum(n for _, n in tally.values())
    report = ', '.join(f'{cc} {r}/{n}' for cc, (r, n) in sorted(tally.items()))
    print(f'{label}: {right}/{total} ({report})', file=sys.stderr)
    assert total >= 30, f'{label}: too few connections to judge ({total})'
    assert right >= MIN_RIGHT_ALL * total, f'{label}: {right}/{total} ({report})'
    for cc, (r, n) in tally.items():
        assert r >= MIN_RIGHT[cc] * n, f'{label}: {cc} {r}/{n}'


def test_sender_runs_identified(tmp_path):
    assert len(SENDER_RUNS) == 16
    tally = collections.defaultdict(lambda: [0, 0])
    for run in SENDER_RUNS:
        base = os.path.join(LAB, 'sender', run)
        pcap = tmp_path / (run + '.pcap')
        pcap.write_bytes(lzma.open(base + '.pcap.xz').read())
        cc = dict(l.strip().split('=', 1) for l in open(base + '.params') if '=' in l)['cc']
        truth = read_truth(base + '.truth.tsv')
        assert {t[0] for t in truth.values()} == {cc}
        judge(truth, senders(pcap, tmp_path), tally)
    assert set(tally) == {'reno', 'cubic', 'bbr', 'spand_scalable'}
    check(tally, 'pcaps/lab/sender')


def test_3nets_runs_identified(tmp_path):
    tally = collections.defaultdict(lambda: [0, 0])
    for name in ('reno', 'cubic', 'scalable'):
        base = os.path.join(LAB, f'{name}_3nets')
        truth_path = tmp_path / f'{name}.truth.tsv'
        subprocess.run([sys.executable, TRUTH, base + '.params', base + '.tcp_probe.txt.gz',
                        str(truth_path)], check=True)
        judge(read_truth(truth_path), senders(base + '.pcap', tmp_path), tally)
    check(tally, 'pcaps/lab/*_3nets')


@pytest.mark.parametrize('run', ['reno_p1', 'cubic_p1', 'bbr_p1', 'spand_scalable_p2'])
def test_prefix_summary_counts_senders(run, tmp_path):
    """--prefix-summary's reno / cubic / scalable / bbr columns: per client /24, the connections
    whose flow record names that flavour; in a run of one congestion control only its column
    (and reno for Scalable TCP below its legacy window) has any."""
    base = os.path.join(LAB, 'sender', run)
    pcap = tmp_path / (run + '.pcap')
    pcap.write_bytes(lzma.open(base + '.pcap.xz').read())
    flows = tmp_path / 'flows.jsonl'
    p = subprocess.run([GATEWAY, '--pcap', str(pcap), '--flows-out', str(flows),
                        '--prefix-summary'], check=True, capture_output=True, text=True)
    want = collections.defaultdict(collections.Counter)
    for line in flows.read_text().splitlines():
        r = json.loads(line)
        want[r['client'].rsplit('.', 1)[0] + '.0/24'][r['s2c']['sender']] += 1
    lines = p.stdout.splitlines()
    names = lines[0].split()
    got = {}
    for line in lines[1:]:
        row = dict(zip(names, line.split()))
        got[row['prefix']] = {k: int(row[k]) for k in ('reno', 'cubic', 'scalable', 'bbr')}
    assert set(got) == set(want)
    for prefix, counts in got.items():
        for kind, n in counts.items():
            assert n == want[prefix][kind], (prefix, kind, counts, want[prefix])
    flavour = run.rsplit('_', 1)[0]
    allowed = {'spand_scalable': {'scalable', 'reno'}}.get(flavour, {flavour})
    assert sum(c[k] for c in got.values() for k in allowed) > 0
    assert all(n == 0 for c in got.values() for k, n in c.items() if k not in allowed), got


if __name__ == '__main__':
    sys.exit(pytest.main([__file__, '-q']))
