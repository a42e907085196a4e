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
Since 2026-11-28 the test says why each case compare_truth.py counts apart is unknowable from the
wire (UNKNOWABLE below), bounds how many there are, and holds the loss class on the knowable
connections to the issue's 99 % (all three captures: 30/30).
Since 2026-11-29 (thirteenth session) a connection's first loss in its first slow start gives a
lower-bound W_c, half the window (DESIGN.md, "W_c sample"), checked against half the kernel's
cwnd at that loss (ssthresh still the initial one): reno 26/26, cubic 22/22, Scalable TCP 29/29
within a segment or 10 %; two cubic samples where the kernel had no such loss, both HyStart
exits (10.119.3.10:45613 and :59001: the kernel had left slow start, the wire did not show it).
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
# 1 (cubic, the HyStart exit two ACKs before a loss, above), 0 since compare_truth.py counts that
# exit apart (2026-11-24); 0 for all three on 2026-11-28.
MAX_KNOWABLE_MISSES = {'reno': 0, 'cubic': 0, 'scalable': 0}
MISS = re.compile(r'^miss \S+ at [\d.]+: kernel W_c \d+, ours \w+(?:; (.*) \(unknowable\))?$', re.M)
KNOWABLE_EVENTS = re.compile(r'loss events exact but for fast recoveries that resent nothing '
                             r'\(unknowable\): (\d+)/(\d+)')
SILENT = re.compile(r'events kernel=\d+/\d+ \((\d+) silent\)')
SLOW_START = re.compile(r'slow-start W_c \(half the window at the first loss\) within 1 segment '
                        r'or 10 %: (\d+)/(\d+); ours without such a kernel loss: (\d+)')
# Our slow-start samples where the kernel's first loss was not in slow start: HyStart exits the
# wire does not show (UNKNOWABLE's third case): at most as many as the stored captures have.
MAX_SLOW_START_EXTRA = {'reno': 0, 'cubic': 2, 'scalable': 0}

# What compare_truth.py counts apart as unknowable, and why no capture can show it. The gateway
# has only the wire: the segments the sender sent and the ACKs it got. Each case below is the
# kernel deciding something that changed no segment.
UNKNOWABLE = {
    # Loss class and W_c. Linux entered fast recovery from its own SACK scoreboard on an ACK
    # (e.g. right after an RTO recovery) and left it on the next ACK without sending a segment:
    # no resend, no change in what it sent, so neither the loss event nor the window it had at
    # it is in the capture. The gateway can count no event there; such a connection is scored
    # "exact but for" that recovery.
    'a recovery that resent nothing',
    # W_c. The kernel's window at the loss went unused: in the round trip before it (outside
    # recovery) no flight came within a segment of cwnd, because the application had no more to
    # send or the transfer had sent its last byte. The wire shows the flights a sender sends,
    # never the window it left empty above them.
    'the kernel window went unused',
    # W_c. CUBIC's HyStart left slow start (set ssthresh to cwnd) on an ACK of the round already
    # under way, less than one round trip before the loss and without a loss: up to the loss the
    # sender sent as in slow start, so no segment shows the exit. Only HyStart's own test on the
    # RTT samples could tell, and the gateway runs none for a sender it has not identified.
    'HyStart ended slow start less than a round trip before the loss',
}
# Loss class right (the fast and timeout events exactly the kernel's) on the connections the wire
# can tell, those with no recovery that resent nothing counted against them: the target,
# 99 %, which on 30 connections is all 30. The stored captures meet it: 30/30 for each sender
# (2026-11-28, gateway and compare_truth.py of this commit; in all, counting those recoveries as
# misses, reno 30/30, cubic 30/30, Scalable TCP 29/30).
MIN_EVENTS_KNOWABLE = 0.99
# Cases counted apart, at most as many as the stored captures have (2026-11-28): unknowable W_c
# misses reno 0, cubic 4 (three unused windows, one HyStart exit), Scalable TCP 1 (an unused
# window); connections with a recovery that resent nothing reno 2, cubic 3, Scalable TCP 2. More,
# and the comparison has begun to excuse what the wire does show.
MAX_UNKNOWABLE = {'reno': (0, 2), 'cubic': (4, 3), 'scalable': (1, 2)}


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
    # Every miss counted apart is one of the cases the wire cannot show (UNKNOWABLE, above).
    reasons = [r for r in MISS.findall(out) if r]
    assert len(reasons) == unknowable, out
    assert set(reasons) <= UNKNOWABLE, out
    silent = [int(n) for n in SILENT.findall(out)]
    assert unknowable <= MAX_UNKNOWABLE[cc][0] and len(silent) <= MAX_UNKNOWABLE[cc][1], out
    # The loss class on the knowable connections: exact but for recoveries that resent nothing
    # (UNKNOWABLE's first case), against the 99 %.
    m = KNOWABLE_EVENTS.search(out)
    assert m, out
    ev_knowable, n = int(m[1]), int(m[2])
    assert n == conns and ev_knowable >= ev_ok, out
    assert ev_knowable / n >= MIN_EVENTS_KNOWABLE, out
    # Only a connection with such a recovery may be exact but for it.
    assert ev_knowable - ev_ok <= len(silent), out
    # The multiplicative decrease read after each loss (one `decrease` sample per reading)
    # against the kernel's own: cwnd leaving fast recovery over cwnd entering it. Measured
    # 2026-11-23: reno 0.486 over 134 readings against 0.500 over 148 recoveries, cubic 0.624
    # over 102 against 0.667 over 133. Since 2026-11-24 (seventh session: over the whole
    # segments of the window before the loss): reno 0.500 over 135, cubic 0.666 over 102,
    # Scalable TCP 0.500 over 162 against 0.500 over 188; the target is 0.02.
    # The first loss in slow start: every one the kernel had gives our half-window sample
    # (a lower bound of W_c), within a segment or 10 % of half the kernel's window there.
    m = SLOW_START.search(out)
    assert m, out
    ss_close, ss_n, ss_extra = int(m[1]), int(m[2]), int(m[3])
    assert ss_n >= 20, 'the capture holds enough first losses in slow start'
    assert ss_close == ss_n, out
    assert ss_extra <= MAX_SLOW_START_EXTRA[cc], out
    m = DECREASE.search(out)
    assert m, out
    ours, n_ours, kernel, n_kernel = float(m[1]), int(m[2]), float(m[3]), int(m[4])
    assert n_ours >= n_kernel // 2, out
    assert abs(ours - kernel) <= 0.02, out
    if cc != 'scalable':  # Scalable TCP's is 1/2 below 16 segments, 7/8 above: no one beta
        assert abs(ours - {'reno': 0.5, 'cubic': 0.7}[cc]) <= 0.1, out  # the algorithm's beta
