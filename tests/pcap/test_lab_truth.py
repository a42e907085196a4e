"""The gateway on captures made by this project's lab (pcaps/lab/, tests/lab/netlab.sh) against
the server kernel's own trace of the same transfers (tcp:tcp_probe and tcp_cong_state_set,
recorded while the capture ran). Unlike tests/lab, this needs no network namespaces: the truth
is stored beside the capture, so it is a deterministic regression test of the inference.

Measured when these captures were made (2026-11-22, gateway at the commit that added them):
  reno:  W_c in congestion avoidance within 1 segment 117/120 (98%); loss events exact 27/30
  cubic: W_c in congestion avoidance within 1 segment 93/107 (87%); loss events exact 27/30
Thresholds sit a little below, so a regression of a few samples fails the test.
"""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.join(HERE, '..', '..', 'pcaps', 'lab')
COMPARE = os.path.join(HERE, '..', 'lab', 'compare_truth.py')
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')
SUMMARY = re.compile(r'connections (\d+); W_c in CA within 1 segment: (\d+)/(\d+) .*'
                     r'loss events exact: (\d+)/(\d+)')
MIN = {'reno': (0.95, 0.85), 'cubic': (0.84, 0.85)}  # (W_c within 1 segment, events exact)


@pytest.mark.parametrize('cc', ['reno', 'cubic'])
def test_inference_matches_kernel(cc, tmp_path):
    base = os.path.join(LAB, f'{cc}_3nets')
    flows, samples = tmp_path / 'flows.jsonl', tmp_path / 'samples.jsonl'
    subprocess.run([GATEWAY, '--pcap', base + '.pcap', '--flows-out', str(flows),
                    '--samples-out', str(samples)], check=True, capture_output=True)
    out = subprocess.run([sys.executable, COMPARE, base + '.tcp_probe.txt.gz',
                          base + '.realtime_minus_mono', str(flows), str(samples)],
                         capture_output=True, text=True, check=True).stdout
    m = SUMMARY.search(out)
    assert m, out
    conns, wc_ok, wc_n, ev_ok, ev_n = map(int, m.groups())
    assert conns == 30
    assert wc_n >= 50, 'the capture holds enough losses in congestion avoidance'
    assert wc_ok / wc_n >= MIN[cc][0], out
    assert ev_ok / ev_n >= MIN[cc][1], out
