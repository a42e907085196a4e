"""The gateway's TCP inference checked against the server kernel's own state (suite 'integration').

For each congestion control, netlab.sh runs real Linux TCP transfers through a drop-tail
bottleneck with real round-trip times, captures them where a span port would sit, and records
the server kernel's tcp_probe / tcp_cong_state_set / tcp_retransmit_skb trace. The gateway reads
only the capture; compare_truth.py checks its loss events and W_c samples against the trace.

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
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')
NETLAB = os.path.join(HERE, 'netlab.sh')
COMPARE = os.path.join(HERE, 'compare_truth.py')
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
