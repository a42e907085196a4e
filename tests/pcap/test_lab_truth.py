"""The gateway on captures made by this project's lab (pcaps/lab/, tests/lab/netlab.sh) against
the server kernel's own trace of the same transfers (tcp:tcp_probe and tcp_cong_state_set,
recorded while the capture ran). Unlike tests/lab, this needs no network namespaces: the truth
is stored beside the capture, so it is a deterministic regression test of the inference.

Measured when these captures were made (2026-11-22, gateway at the commit that added them):
  reno:  W_c in congestion avoidance within 1 segment 117/120 (98%); loss events exact 27/30
  cubic: W_c in congestion avoidance within 1 segment 93/107 (87%); loss events exact 27/30
and since a full ACK that still reports a hole starts a second recovery (2026-11-23):
  reno:  W_c within 1 segment 120/120 (100%); loss events exact 29/30
  cubic: W_c within 1 segment 93/107 (87%); loss events exact 30/30
and since 2026-11-24 (docs/results/lab_truth.md, sixth session):
  a kernel loss and our sample of it are matched within 10 ms, not half a second (they lie
  0-34 us apart; the wide window paired an unsampled loss with the next loss's sample, and so
  on down the connection): cubic 100/107;
  the pipe at the full ACK bounds the window after a recovery from congestion avoidance: 101/107;
  a loss after HyStart ended slow start without one is in congestion avoidance: 103/107.
  Reno stays 120/120; its loss events exact 29/30 -> 30/30 since a resend right after an ACK
  of new data, before any retransmission timer could fire, is no timeout (10.170.2.11:44579).
  The four cubic misses left, as compare_truth.py classifies them from the
  kernel's trace: three where the kernel's window went unused in the round trip before the loss
  (the transfer had sent its last byte or the flight stayed below cwnd: the wire shows a flight,
  never a window the sender left empty, so W_c is unknowable from the capture), and one where
  HyStart set ssthresh two ACKs before the loss (10.119.3.10:45613, cwnd 49: the flight, held
  above cwnd by SACK accounting, showed no plateau to tell it from slow start).
Since 2026-11-24 (seventh session, docs/results/lab_truth.md) a third capture, of the agent's BPF
Scalable TCP (pcaps/lab/scalable_3nets: tests/lab/truth_matrix.py path b35_q025, 20 ms each
way, 10mbit, a 12500-byte buffer, a quarter of the path's 34.5-segment BDP, seed 1), whose
ssthresh the lab reads from tcp_probe like the others': W_c within 1 segment 161/162 (the miss
unknowable: the kernel window went unused), loss events exact 29/30 (30/30 but for a recovery
that resent nothing, which compare_truth.py counts apart), decrease median 0.478 against the
kernel's 0.500 (most of its losses come below its legacy window of 16, where it is Reno).
Before the replica's growth was held to Scalable TCP's 0.01 per segment acked above 16 segments
it was 156/162: five knowable misses, the replica 2-5 segments ahead.
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
DECREASE = re.compile(r'decrease median: ours ([\d.]+) over (\d+) readings, kernel ([\d.]+) '
                      r'over (\d+) recoveries')
# (W_c within 1 segment, events exact)
MIN = {'reno': (0.98, 0.96), 'cubic': (0.95, 0.93), 'scalable': (0.98, 0.93)}
MISSES = re.compile(r'W_c misses: (\d+), of them unknowable from the wire: (\d+)')
# W_c misses the wire could have shown (not the kernel's unused windows): measured 0 (reno) and
# 1 (cubic, the HyStart exit two ACKs before a loss, above).
MAX_KNOWABLE_MISSES = {'reno': 0, 'cubic': 1, 'scalable': 0}


@pytest.mark.parametrize('cc', ['reno', 'cubic', 'scalable'])
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
    m = MISSES.search(out)
    assert m, out
    misses, unknowable = int(m[1]), int(m[2])
    assert misses == wc_n - wc_ok, out
    assert misses - unknowable <= MAX_KNOWABLE_MISSES[cc], out
    # The multiplicative decrease read after each loss (one `decrease` sample per reading)
    # against the kernel's own: cwnd leaving fast recovery over cwnd entering it. Measured
    # 2026-11-23: reno 0.486 over 134 readings against 0.500 over 148 recoveries, cubic 0.624
    # over 102 against 0.667 over 133. Since 2026-11-24 (seventh session: over the whole
    # segments of the window before the loss): reno 0.500 over 135, cubic 0.666 over 102,
    # Scalable TCP 0.500 over 162 against 0.500 over 188; the target is 0.02.
    m = DECREASE.search(out)
    assert m, out
    ours, n_ours, kernel, n_kernel = float(m[1]), int(m[2]), float(m[3]), int(m[4])
    assert n_ours >= n_kernel // 2, out
    assert abs(ours - kernel) <= 0.02, out
    if cc != 'scalable':  # Scalable TCP's is 1/2 below 16 segments, 7/8 above: no one beta
        assert abs(ours - {'reno': 0.5, 'cubic': 0.7}[cc]) <= 0.1, out  # the algorithm's beta
