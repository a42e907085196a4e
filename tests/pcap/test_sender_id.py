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

The W_c samples' `sender` (the verdict as the losses so far show it; measured 2026-11-28): the
last W_c sample of the same connections, where they have one, names the flavour for 63/65 in
sender/ (bbr 18/18, cubic 13/15, reno 14/14, spand_scalable 18/18; the three BBR misses above
have no W_c sample) and 52/54 in 3nets; the misses are `unknown` at a last sample the record's
verdict needed the decrease after it for.
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
# W_c samples naming a flavour the lab did not run (before the last one of their connection):
# 1 of 1,927 in sender/ (a BBR sender's sample at its second loss, before 10 segments after its
# first showed the pacing: `reno` from one decrease reading), 0 of 405 in 3nets (2026-11-28).
MAX_SAMPLES_WRONG = 0.005


def read_truth(path):
    rows = {}
    with open(path) as f:
        for row in csv.reader((l for l in f if not l.startswith('#')), delimiter='\t'):
            addr, port, cc, losses, expected = row[:5]
            rows[(addr, int(port))] = (cc, int(losses), expected)
    return rows


def senders(pcap, tmp_path, wc_samples=None):
    """The flow records' s2c `sender` per client end; with wc_samples (a dict), also each
    connection's W_c samples in the order written."""
    flows, samples = tmp_path / 'flows.jsonl', tmp_path / 'samples.jsonl'
    subprocess.run([GATEWAY, '--pcap', str(pcap), '--flows-out', str(flows),
                    '--samples-out', str(samples)], check=True, capture_output=True)
    out = {}
    for line in flows.read_text().splitlines():
        r = json.loads(line)
        out[(r['client'], r['client_port'])] = r['s2c']['sender']
        assert r['c2s']['sender'] == 'unknown'  # the clients send a request line only
    if wc_samples is not None:
        for line in samples.read_text().splitlines():
            s = json.loads(line)
            if s['kind'] == 'wc':
                wc_samples.setdefault((s['client'], s['client_port']), []).append(s)
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


def judge_samples(truth, records, wc_samples, tally, wrong):
    """The W_c samples' `sender`: the flavour as the connection's losses so far show it. An
    end-of-connection sample (no loss) and a slow-start one (the first loss) are `unknown`; the last sample of a connection names what
    its flow record names or `unknown` (the record also has the decrease after the last loss),
    and a flavour the lab ran; an earlier one may name what later readings correct (counted in
    `wrong`: samples, samples naming a flavour the lab did not run). And the last sample of a
    connection with two or more losses whose truth is known (judged as the records) names it,
    unless `unknown`."""
    for key, samples in wc_samples.items():
        if key not in truth:
            continue
        cc = truth[key][0]
        for s in samples:
            wrong[0] += 1
            wrong[1] += s['sender'] not in ALLOWED_UNKNOWABLE[cc]
            # No loss, or the connection's first (in slow start): one loss names no flavour.
            if s['reason'] in ('end_of_connection', 'loss_in_slow_start'):
                assert s['sender'] == 'unknown', f'{key}: sample {s}'
        last = samples[-1]['sender']
        assert last in ALLOWED_UNKNOWABLE[cc], f'{key} ({cc}): last sample {samples[-1]}'
        assert last in (records[key], 'unknown'), (key, records[key], samples)
    for key, (cc, losses, expected) in truth.items():
        # The samples taken after the first loss: a slow-start one, at the first, cannot name
        # the flavour (judged above), and a connection with no other is not judged here.
        later = [s for s in wc_samples.get(key, []) if s['reason'] != 'loss_in_slow_start']
        if losses < 2 or expected == '-' or not later:
            continue
        answer = later[-1]['sender']
        assert answer in (expected, 'unknown'), f'{key} ({cc}): last sample {answer}, {expected}'
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
    sample_tally = collections.defaultdict(lambda: [0, 0])
    wrong = [0, 0]
    for run in SENDER_RUNS:
        base = os.path.join(LAB, 'sender', run)
        pcap = tmp_path / (run + '.pcap')
        pcap.write_bytes(lzma.open(base + '.pcap.xz').read())
        cc = dict(l.strip().split('=', 1) for l in open(base + '.params') if '=' in l)['cc']
        truth = read_truth(base + '.truth.tsv')
        assert {t[0] for t in truth.values()} == {cc}
        wc_samples = {}
        records = senders(pcap, tmp_path, wc_samples)
        judge(truth, records, tally)
        judge_samples(truth, records, wc_samples, sample_tally, wrong)
    assert set(tally) == {'reno', 'cubic', 'bbr', 'spand_scalable'}
    check(tally, 'pcaps/lab/sender')
    check_samples(sample_tally, wrong, 'pcaps/lab/sender')


def test_3nets_runs_identified(tmp_path):
    tally = collections.defaultdict(lambda: [0, 0])
    sample_tally = collections.defaultdict(lambda: [0, 0])
    wrong = [0, 0]
    for name in ('reno', 'cubic', 'scalable'):
        base = os.path.join(LAB, f'{name}_3nets')
        truth_path = tmp_path / f'{name}.truth.tsv'
        subprocess.run([sys.executable, TRUTH, base + '.params', base + '.tcp_probe.txt.gz',
                        str(truth_path)], check=True)
        truth = read_truth(truth_path)
        wc_samples = {}
        records = senders(base + '.pcap', tmp_path, wc_samples)
        judge(truth, records, tally)
        judge_samples(truth, records, wc_samples, sample_tally, wrong)
    check(tally, 'pcaps/lab/*_3nets')
    check_samples(sample_tally, wrong, 'pcaps/lab/*_3nets')


def check_samples(tally, wrong, label):
    """The last W_c sample of each knowable connection with two or more losses (and a W_c
    sample) names its flavour for at least MIN_RIGHT_ALL of them overall; at most
    MAX_SAMPLES_WRONG of all W_c samples name a flavour the lab did not run."""
    right = sum(r for r, _ in tally.values())
    total = sum(n for _, n in tally.values())
    report = (', '.join(f'{cc} {r}/{n}' for cc, (r, n) in sorted(tally.items())) +
              f'; samples naming a flavour the lab did not run {wrong[1]}/{wrong[0]}')
    print(f'{label}, last W_c sample: {right}/{total} ({report})', file=sys.stderr)
    assert total >= 30, f'{label}: too few connections to judge ({total})'
    assert right >= MIN_RIGHT_ALL * total, f'{label}, last W_c sample: {right}/{total} ({report})'
    assert wrong[1] <= MAX_SAMPLES_WRONG * wrong[0], f'{label}: {report}'


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
