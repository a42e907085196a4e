"""The live libpcap source (--interface) on a veth between two network namespaces: per-packet
kernel timestamps (no RTT of 0), records of closed connections written on time on
a link that has gone quiet (closing_timeout_ms + 1 s, whatever --flow-capacity), an interface
that goes away and comes back (said, counted, exit status 4, flows kept), bad options.
Needs root and network namespaces; skipped otherwise."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

GATEWAY = os.environ.get("SPAND_GATEWAY", "spand-gateway")
NS_S, NS_C = "spandlive_s", "spandlive_c"
WAIT_S = 20  # bound on any condition; reaching it fails the test

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


def sh(cmd, check=True):
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True)


@pytest.fixture
def net():
    for ns in (NS_S, NS_C):
        sh("ip netns del %s" % ns, check=False)
    for ns in (NS_S, NS_C):
        sh("ip netns add %s" % ns)
        sh("ip -n %s link set lo up" % ns)
    sh("ip link add lvs type veth peer name lvc")
    sh("ip link set lvs netns %s" % NS_S)
    sh("ip link set lvc netns %s" % NS_C)
    sh("ip -n %s addr add 10.88.0.1/16 dev lvs" % NS_S)
    sh("ip -n %s addr add 10.88.1.2/16 dev lvc" % NS_C)
    for ns, dev in ((NS_S, "lvs"), (NS_C, "lvc")):
        sh("ip -n %s link set %s up" % (ns, dev))
        sh("ip netns exec %s ethtool -K %s tx off tso off gso off gro off" % (ns, dev))
    yield
    for ns in (NS_S, NS_C):
        sh("ip netns del %s" % ns, check=False)


def in_ns(ns, argv):
    return ["ip", "netns", "exec", ns] + argv


SERVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.88.0.1", 5001)); s.listen(16); print("ready", flush=True)
while True:
    c, _ = s.accept(); n = int(c.recv(64).split()[0]); c.sendall(b"x" * n); c.close()
"""
CLIENT = r"""
import socket, sys, time
for i in range(int(sys.argv[1])):
    c = socket.create_connection(("10.88.0.1", 5001)); c.sendall(b"%d\n" % int(sys.argv[2]))
    got = 0
    while True:
        b = c.recv(65536)
        if not b: break
        got += len(b)
    c.close(); assert got == int(sys.argv[2])
print("done", time.time(), flush=True)
"""


def start_gateway(tmp_path, *extra):
    flows = tmp_path / "flows.jsonl"
    samples = tmp_path / "samples.jsonl"
    gw = subprocess.Popen(in_ns(NS_S, [GATEWAY, "--interface", "lvs", "--flows-out", str(flows),
                                       "--samples-out", str(samples), *extra]),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The gateway says it is reading before any packet is sent.
    deadline = time.monotonic() + WAIT_S
    line = ""
    while "live:" not in line:
        assert time.monotonic() < deadline and gw.poll() is None, gw.stderr.read()
        line = gw.stderr.readline()
    return gw, flows, samples


def records(path):
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.endswith("}")]


def wait_records(path, n, deadline_s):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        r = records(path)
        if len(r) >= n:
            return r, time.monotonic()
        time.sleep(0.05)
    return records(path), None


def run_transfers(count, size):
    srv = subprocess.Popen(in_ns(NS_S, [sys.executable, "-c", SERVER]), stdout=subprocess.PIPE,
                           text=True)
    assert srv.stdout.readline().strip() == "ready"
    try:
        out = subprocess.run(in_ns(NS_C, [sys.executable, "-c", CLIENT, str(count), str(size)]),
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
    finally:
        srv.kill()
        srv.wait()
    return time.monotonic()


@pytest.mark.parametrize("capacity", ["1000", "1048576"])
def test_records_on_time_on_a_quiet_link(net, tmp_path, capacity):
    gw, flows, samples = start_gateway(tmp_path, "--closing-timeout-ms", "500",
                                       "--flow-capacity", capacity)
    try:
        done = run_transfers(5, 30000)
        # Nothing more crosses the link: the last record must still come within 0.5 s + 1 s
        # (a little more for the ring block's timeout and this poll).
        recs, at = wait_records(flows, 5, 10)
        assert at is not None, "only %d of 5 records after 10 s" % len(recs)
        assert at - done <= 0.5 + 1.0 + 0.3, at - done
        assert all(r["close_reason"] in ("fin", "rst") for r in recs), recs
    finally:
        gw.send_signal(signal.SIGTERM)
        _, err = gw.communicate(timeout=WAIT_S)
    assert gw.returncode == 0, err
    assert "summary:" in err
    # Per-packet timestamps: a segment and its ACK never share a time (a per-burst clock gave
    # 0 us to 43 % of live RTT samples).
    rtts = [s for s in records(samples) if s.get("kind") == "rtt"]
    assert rtts and all(s["rtt_us"] > 0 for s in rtts)


def test_interface_down_is_said_counted_and_flows_kept(net, tmp_path):
    gw, flows, _ = start_gateway(tmp_path, "--closing-timeout-ms", "500", "--idle-timeout-s",
                                 "600")
    try:
        # One connection left open across the outage.
        s = subprocess.Popen(in_ns(NS_S, [sys.executable, "-c", SERVER]), stdout=subprocess.PIPE,
                             text=True)
        assert s.stdout.readline().strip() == "ready"
        sh("ip -n %s link del lvs" % NS_S)
        deadline = time.monotonic() + WAIT_S
        err = ""
        while "reopening" not in err:
            assert time.monotonic() < deadline, err
            err += gw.stderr.readline()
        s.kill()
        s.wait()
    finally:
        gw.send_signal(signal.SIGTERM)
        _, rest = gw.communicate(timeout=WAIT_S)
    err += rest
    assert gw.returncode == 4, err
    assert "interface down 1 times" in err, err


def test_bad_interface_and_two_inputs(tmp_path):
    r = subprocess.run([GATEWAY, "--interface", "no-such-if0"], capture_output=True, text=True)
    assert r.returncode == 2 and "no-such-if0" in r.stderr, r.stderr
    r = subprocess.run([GATEWAY, "--interface", "lo", "--pcap", "/dev/null"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "one input" in r.stderr, r.stderr


def scrape(ns, port):
    """The gateway's /metrics, from inside its namespace: {(name, labels text): value}."""
    out = subprocess.run(in_ns(ns, [sys.executable, "-c",
                                    "import urllib.request,sys; sys.stdout.write(urllib.request."
                                    "urlopen('http://127.0.0.1:%d/metrics', timeout=5).read()"
                                    ".decode())" % port]),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    series = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line)
        if m:
            series[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return series


def test_kernel_drops_per_interface_in_metrics(net, tmp_path):
    """Frames the kernel dropped while the gateway was stopped (SIGSTOP, a 1 MiB ring) show in
    /metrics per interface and cause, and their sum is spand_capture_dropped_total; the run
    exits 4 (capture loss). Redis is not running: samples wait in the backlog."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        redis_port = s.getsockname()[1]  # nothing listens there
    metrics_port = 19464
    gw, _, _ = start_gateway(tmp_path, "--buffer-mb", "1", "--redis",
                             "redis://127.0.0.1:%d" % redis_port, "--client-key-file", "public",
                             "--metrics-listen",
                             "127.0.0.1:%d" % metrics_port)
    try:
        # Both causes libpcap reports are there from the first tick on, at 0.
        keys = [("spand_capture_port_dropped_total", '{cause="%s",port="lvs"}' % cause)
                for cause in ("kernel", "interface")]
        deadline = time.monotonic() + WAIT_S
        before = scrape(NS_S, metrics_port)
        while not all(k in before for k in keys) and time.monotonic() < deadline:
            time.sleep(0.2)
            before = scrape(NS_S, metrics_port)
        assert [before.get(k) for k in keys] == [0, 0], sorted(k for k in before if "drop" in k[0])
        gw.send_signal(signal.SIGSTOP)
        # 4 transfers of 4 MB: about 11,000 full-size frames each way's data; a 1 MiB ring
        # holds a few hundred, so most of them are dropped while nobody reads the ring.
        run_transfers(4, 4_000_000)
        gw.send_signal(signal.SIGCONT)
        # The counters move once a second; a scrape may fall between the total's update and
        # the ports' (one tick), so wait for both to settle.
        deadline = time.monotonic() + WAIT_S
        while True:
            after = scrape(NS_S, metrics_port)
            kernel = after[keys[0]]
            per_port = sum(v for (name, _), v in after.items()
                           if name == "spand_capture_port_dropped_total")
            total = after[("spand_capture_dropped_total", "")]
            if (kernel > 0 and per_port == total) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert kernel > 0, sorted((k, v) for k, v in after.items() if "drop" in k[0])
        assert per_port == total, (per_port, total)
    finally:
        gw.send_signal(signal.SIGCONT)
        gw.send_signal(signal.SIGTERM)
        _, err = gw.communicate(timeout=WAIT_S)
    assert gw.returncode == 4, err  # capture loss comes before the samples Redis did not get
    assert "capture loss" in err, err
