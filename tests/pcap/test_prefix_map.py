"""--prefix-map (network-aware clustering) on the real binary: prefixes by longest match, the
fixed /24 for addresses no prefix covers, and a bad map file refused with its line number.

Expected values: pcaps/lab/reno_3nets.pcap's /24 rows without a map (docs/records.md:
10.170.1.0/24 6 W_c and 71 RTT samples, 10.170.2.0/24 45 and 567, 10.170.3.0/24 75 and 944),
summed by hand over the map's prefixes; since 2026-11-29 each /24's W_c count also has one
lower-bound sample per connection whose first loss came in its first slow start, as many as the
capture's kernel trace shows (tests/lab/compare_truth.py on reno_3nets.tcp_probe.txt.gz: 3, 9
and 14)."""
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURE = os.path.join(HERE, '..', '..', 'pcaps', 'lab', 'reno_3nets.pcap')
# W_c samples per /24: the paper's (losses in congestion avoidance, loss-free ends) plus the
# first losses in slow start.
WC1, WC2, WC3 = 6 + 3, 45 + 9, 75 + 14
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')


def summary(stdout):
    rows = {}
    for line in stdout.splitlines()[1:]:
        f = line.split()
        rows[f[0]] = (int(f[1]), int(f[4]))
    return rows


def run(tmp_path, map_text, *extra):
    m = tmp_path / 'map.txt'
    m.write_text(map_text)
    return subprocess.run([GATEWAY, '--pcap', CAPTURE, '--prefix-summary', '--prefix-map', str(m),
                           *extra], capture_output=True, text=True)


def test_longest_match_groups_the_prefix_summary(tmp_path):
    p = run(tmp_path, '10.170.0.0/16\n10.170.2.0/23  # 10.170.2 and 10.170.3\n2001:db8::/32\n')
    assert p.returncode == 0, p.stderr
    assert summary(p.stdout) == {'10.170.2.0/23': (WC2 + WC3, 567 + 944), '10.170.0.0/16': (WC1, 71)}
    assert 'prefix map: 3 prefixes, 0 lookups of addresses no prefix covers' in p.stderr


def test_uncovered_addresses_keep_the_fixed_length_and_are_counted(tmp_path):
    samples = tmp_path / 'samples.jsonl'
    p = run(tmp_path, '10.170.2.0/24\n', '--samples-out', str(samples))
    assert p.returncode == 0, p.stderr
    assert summary(p.stdout) == {'10.170.3.0/24': (WC3, 944), '10.170.2.0/24': (WC2, 567),
                                 '10.170.1.0/24': (WC1, 71)}
    # Every aggregated sample from 10.170.1 and .3 is looked up once for the summary, and every
    # sample once more for its --samples-out line.
    recs = [json.loads(line) for line in open(samples)]
    outside = sum(not r['client'].startswith('10.170.2.') for r in recs)
    aggregated = sum(not r['client'].startswith('10.170.2.') and r['kind'] in ('wc', 'rtt')
                     for r in recs)
    assert aggregated == WC1 + 71 + WC3 + 944
    assert f'{outside + aggregated} lookups of addresses no prefix covers' in p.stderr
    assert {r['prefix'] for r in recs if r['client'].startswith('10.170.2.')} == {'10.170.2.0/24'}


def test_bad_map_file_is_refused_with_its_line(tmp_path):
    p = run(tmp_path, '10.170.0.0/16\n10.170.2.1/23\n')
    assert p.returncode == 2
    assert 'line 2' in p.stderr and 'host bits' in p.stderr
    p = subprocess.run([GATEWAY, '--pcap', CAPTURE, '--prefix-map', str(tmp_path / 'none')],
                       capture_output=True, text=True)
    assert p.returncode == 2 and 'cannot read' in p.stderr
