"""The DPDK source (net_pcap vdev, EAL convention) against the libpcap source (--pcap).

DESIGN.md's contract: both paths produce identical results. The records carry times, so this
also checks that the DPDK path takes time from the pcap record (the mbuf rx timestamp that
net_pcap fills) and not from the clock: a clock-based time would change every record.

Environment: SPAND_GATEWAY (binary), SPAND_PCAPS (pcaps/real), SPAND_GEN_SYNTHETIC (generator).
"""
import glob
import os
import re
import signal
import subprocess
import sys

import pytest

GATEWAY = os.environ.get("SPAND_GATEWAY", "spand-gateway")
PCAPS = os.environ.get("SPAND_PCAPS", "")
GEN = os.environ.get("SPAND_GEN_SYNTHETIC", "")
# No hugepages, no PCI scan, no shared config file: tests run anywhere and side by side.
EAL = ["--no-huge", "-m", "256", "--no-pci", "--no-shconf", "--log-level=lib.eal:warning"]
LCORE_MODES = {
    "main+worker": ["-l", "0,1"],  # worker lcore polls, main lcore drains
    "main-only": ["-l", "0"],      # one lcore polls and drains in turn
}


def run(args, timeout=300):
    return subprocess.run([GATEWAY] + args, capture_output=True, text=True, timeout=timeout)


def via_pcap(capture, out, extra=()):
    r = run(["--pcap", capture] + list(extra) + out)
    assert r.returncode == 0, r.stderr
    return r


def via_dpdk(capture, out, lcores, extra=()):
    return via_dpdk_files([capture], out, lcores, extra)


def via_dpdk_files(files, out, lcores, extra=()):
    """One net_pcap port, one rx queue per file."""
    vdev = "net_pcap0," + ",".join("rx_pcap=" + f for f in files)
    r = run(EAL + lcores + ["--vdev", vdev, "--"] + list(extra) + out)
    assert r.returncode == 0, r.stderr
    return r


def sorted_lines(path):
    with open(path) as f:
        return sorted(f.read().splitlines())


def assert_same_flows(capture, tmp_path, lcores, extra=()):
    a, b = tmp_path / "pcap.jsonl", tmp_path / "dpdk.jsonl"
    via_pcap(capture, ["--flows-out", str(a)], extra)
    via_dpdk(capture, ["--flows-out", str(b)], lcores, extra)
    la, lb = sorted_lines(a), sorted_lines(b)
    assert la, "no flow records from --pcap: nothing was compared"
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert x == y
    return la


def real_captures():
    files = []
    for pattern in ("*.pcap", "*.pcapng", "*.dmp"):
        files += glob.glob(os.path.join(PCAPS, pattern))
    return sorted(files)


@pytest.mark.parametrize("lcores", LCORE_MODES.values(), ids=LCORE_MODES.keys())
@pytest.mark.parametrize("capture", real_captures(), ids=os.path.basename)
def test_real_capture_same_flows(capture, lcores, tmp_path):
    assert_same_flows(capture, tmp_path, lcores)


def test_real_captures_present():
    # The parametrized test above silently shrinks if the captures are missing.
    assert len(real_captures()) >= 10, f"captures missing under {PCAPS}"


# --- captures made here -------------------------------------------------------------------

def handmade_frames():
    """Connections that exercise the parser's branches: IPv4, IPv6, 802.1Q, a loss with a
    retransmission, an unanswered SYN, two server ports (for the filter test)."""
    from scapy.all import IP, IPv6, TCP, Dot1Q, Ether, Raw

    frames = []
    t = 1_600_000_000.0

    def add(pkt, dt):
        nonlocal t
        t += dt
        pkt.time = t
        frames.append(pkt)

    def conn(l3c, l3s, cport, sport, nseg, lose=None, vlan=None):
        def eth(x):
            return Ether() / Dot1Q(vlan=vlan) / x if vlan else Ether() / x

        opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1000, 0)), ("NOP", None), ("WScale", 7)]
        c, s = 5000, 90000
        add(eth(l3c / TCP(sport=cport, dport=sport, flags="S", seq=c, options=opts)), 0.001)
        add(eth(l3s / TCP(sport=sport, dport=cport, flags="SA", seq=s, ack=c + 1, options=opts)), 0.020)
        add(eth(l3c / TCP(sport=cport, dport=sport, flags="A", seq=c + 1, ack=s + 1)), 0.020)
        add(eth(l3c / TCP(sport=cport, dport=sport, flags="PA", seq=c + 1, ack=s + 1) / Raw(b"G" * 100)), 0.001)
        s += 1
        for k in range(nseg):
            seg = eth(l3s / TCP(sport=sport, dport=cport, flags="A", seq=s + k * 1000, ack=c + 101) / Raw(b"d" * 1000))
            add(seg, 0.002)
            if k == lose:
                add(eth(l3c / TCP(sport=cport, dport=sport, flags="A", seq=c + 101, ack=s + k * 1000)), 0.020)
                add(seg.copy(), 0.250)
            add(eth(l3c / TCP(sport=cport, dport=sport, flags="A", seq=c + 101, ack=s + (k + 1) * 1000)), 0.020)
        end = s + nseg * 1000
        add(eth(l3s / TCP(sport=sport, dport=cport, flags="FA", seq=end, ack=c + 101)), 0.001)
        add(eth(l3c / TCP(sport=cport, dport=sport, flags="FA", seq=c + 101, ack=end + 1)), 0.020)
        add(eth(l3s / TCP(sport=sport, dport=cport, flags="A", seq=end + 1, ack=c + 102)), 0.020)

    conn(IP(src="198.51.100.7", dst="203.0.113.1"), IP(src="203.0.113.1", dst="198.51.100.7"), 40000, 443, 8)
    conn(IP(src="198.51.100.8", dst="203.0.113.1"), IP(src="203.0.113.1", dst="198.51.100.8"), 40001, 80, 12, lose=5)
    conn(IPv6(src="2001:db8::7", dst="2001:db8:1::1"), IPv6(src="2001:db8:1::1", dst="2001:db8::7"), 40002, 443, 6, lose=2)
    conn(IP(src="198.51.100.9", dst="203.0.113.2"), IP(src="203.0.113.2", dst="198.51.100.9"), 40003, 80, 4, vlan=42)
    add(Ether() / IP(src="198.51.100.10", dst="203.0.113.3") / TCP(sport=40004, dport=443, flags="S"), 0.5)
    return frames


@pytest.fixture(scope="module")
def handmade(tmp_path_factory):
    scapy = pytest.importorskip("scapy.all")
    path = str(tmp_path_factory.mktemp("cap") / "handmade.pcap")
    scapy.wrpcap(path, handmade_frames())
    return path


@pytest.fixture(scope="module")
def handmade_sll(tmp_path_factory):
    """The same traffic as Linux cooked frames: net_pcap passes bytes whatever the link type,
    so the DPDK source must take the link type from the file."""
    scapy = pytest.importorskip("scapy.all")
    frames = []
    for f in handmade_frames():
        inner = f[scapy.Ether].payload
        # SLL carries the ethertype of what follows, as Ethernet did.
        c = scapy.CookedLinux(pkttype=0, lladdrtype=1, lladdrlen=6, src=b"\x02\0\0\0\0\x01\0\0",
                              proto=f[scapy.Ether].type) / inner
        c.time = f.time
        frames.append(c)
    path = str(tmp_path_factory.mktemp("cap") / "handmade_sll.pcap")
    scapy.wrpcap(path, frames, linktype=113)
    return path


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cap") / "synthetic.pcap")
    subprocess.run([sys.executable, GEN, path, "--connections", "3000", "--concurrency", "1500",
                    "--seed", "7"], check=True, capture_output=True)
    return path


@pytest.mark.parametrize("lcores", LCORE_MODES.values(), ids=LCORE_MODES.keys())
def test_handmade_same_flows(handmade, lcores, tmp_path):
    lines = assert_same_flows(handmade, tmp_path, lcores)
    assert len(lines) == 5  # four connections and the lone SYN


def test_linux_cooked_same_flows(handmade_sll, tmp_path):
    lines = assert_same_flows(handmade_sll, tmp_path, LCORE_MODES["main+worker"])
    assert len(lines) == 5


@pytest.mark.parametrize("lcores", LCORE_MODES.values(), ids=LCORE_MODES.keys())
def test_synthetic_same_flows(synthetic, lcores, tmp_path):
    lines = assert_same_flows(synthetic, tmp_path, lcores)
    assert len(lines) == 3000


def test_filter_same_flows(handmade, tmp_path):
    lines = assert_same_flows(handmade, tmp_path, LCORE_MODES["main+worker"],
                              extra=["--filter", "tcp port 443"])
    # Port 443 carries the first IPv4 connection, the IPv6 one and the lone SYN.
    assert len(lines) == 3
    assert all('"server_port":443' in l or '"server_port": 443' in l for l in lines)


def test_samples_same(synthetic, tmp_path):
    a, b = tmp_path / "pcap.jsonl", tmp_path / "dpdk.jsonl"
    via_pcap(synthetic, ["--samples-out", str(a)])
    via_dpdk(synthetic, ["--samples-out", str(b)], LCORE_MODES["main+worker"])
    la, lb = sorted_lines(a), sorted_lines(b)
    assert len(la) > 1000
    assert la == lb


# --- two workers on queues split by flow ----------------------------------------------------
# Three lcores on CPU 0 (the main lcore and two workers): runs on a machine of any size.
TWO_WORKERS = ["--lcores", "0@0,1@0,2@0"]


@pytest.fixture(scope="module")
def synthetic_split(synthetic, tmp_path_factory):
    """The synthetic capture split by connection into two files (what symmetric RSS does)."""
    prefix = str(tmp_path_factory.mktemp("split") / "part")
    split = os.path.join(os.path.dirname(GEN), "split_by_flow.py")
    subprocess.run([sys.executable, split, synthetic, prefix, "2"], check=True,
                   capture_output=True)
    return [prefix + ".0.pcap", prefix + ".1.pcap"]


def worker_packets(stderr):
    return [int(n) for n in re.findall(r"^dpdk: worker \d+: (\d+) packets", stderr, re.M)]


def test_split_halves_are_whole_connections(synthetic, synthetic_split, tmp_path):
    """Independent of the gateway's split: every connection's packets (by its ports, unique in
    the generator's output) lie in one file, and the files hold every packet between them."""
    import scapy.all as scapy
    where, total = {}, 0
    for i, f in enumerate(synthetic_split):
        for pkt in scapy.rdpcap(f):
            if scapy.TCP in pkt:
                key = frozenset([(pkt[scapy.IP].src, pkt[scapy.TCP].sport),
                                 (pkt[scapy.IP].dst, pkt[scapy.TCP].dport)])
                assert where.setdefault(key, i) == i, key
            total += 1
    assert total == len(scapy.rdpcap(synthetic))
    assert set(where.values()) == {0, 1}


def test_two_workers_queues_by_flow_same_flows_and_samples(synthetic, synthetic_split, tmp_path):
    """--queues-by-flow: queue q to worker q; both workers track, and the records and samples
    are those of one worker over the whole capture (--pcap)."""
    a, b = tmp_path / "pcap.jsonl", tmp_path / "dpdk.jsonl"
    sa, sb = tmp_path / "pcap_s.jsonl", tmp_path / "dpdk_s.jsonl"
    via_pcap(synthetic, ["--flows-out", str(a), "--samples-out", str(sa)])
    r = via_dpdk_files(synthetic_split, ["--flows-out", str(b), "--samples-out", str(sb)],
                       TWO_WORKERS, ["--queues-by-flow"])
    per_worker = worker_packets(r.stderr)
    assert len(per_worker) == 2 and all(n > 10000 for n in per_worker), r.stderr
    assert "on 2 workers" in r.stderr and "only worker 0" not in r.stderr
    la, lb = sorted_lines(a), sorted_lines(b)
    assert len(la) == 3000 and la == lb
    assert sorted_lines(sa) == sorted_lines(sb)


def test_two_workers_without_the_flag_leave_one_idle(synthetic_split, tmp_path):
    r = via_dpdk_files(synthetic_split, [], TWO_WORKERS)
    assert "no port has RSS: only worker 0 receives packets" in r.stderr
    assert worker_packets(r.stderr)[1:] == [0], r.stderr


def test_queues_by_flow_names_a_worker_without_a_queue(synthetic_split):
    r = via_dpdk_files(synthetic_split, [], ["--lcores", "0@0,1@0,2@0,3@0"], ["--queues-by-flow"])
    assert "1 worker(s) of 3 poll no queue" in r.stderr
    assert worker_packets(r.stderr)[2] == 0


def test_rx_pcap_files_of_two_link_types_are_an_error(handmade, handmade_sll):
    r = run(EAL + ["--vdev", f"net_pcap0,rx_pcap={handmade},rx_pcap={handmade_sll}", "--"])
    assert r.returncode == 2, r.stderr
    assert "a port's rx_pcap files must share one" in r.stderr


# --- errors -------------------------------------------------------------------------------

def test_bad_eal_argument_is_an_error_not_a_crash(handmade):
    r = run(EAL + ["--no-such-eal-option", "--vdev", "net_pcap0,rx_pcap=" + handmade, "--"])
    assert r.returncode == 2, r.stderr  # negative would mean killed by a signal
    assert "EAL initialization failed" in r.stderr


def test_missing_rx_pcap_file(tmp_path):
    missing = str(tmp_path / "absent.pcap")
    r = run(EAL + ["--vdev", "net_pcap0,rx_pcap=" + missing, "--"])
    assert r.returncode == 2, r.stderr
    assert "cannot read rx_pcap" in r.stderr and "absent.pcap" in r.stderr


def test_no_ports():
    r = run(EAL + ["--"])
    assert r.returncode == 2, r.stderr
    assert "no DPDK ports" in r.stderr


def test_bad_filter(handmade):
    r = run(EAL + ["--vdev", "net_pcap0,rx_pcap=" + handmade, "--", "--filter", "tcp port"])
    assert r.returncode == 2, r.stderr
    assert "bad --filter" in r.stderr


def test_sigint_stops_an_endless_port(handmade):
    """infinite_rx never ends by itself: SIGINT must stop it cleanly, with the summary."""
    p = subprocess.Popen([GATEWAY] + EAL + ["-l", "0,1", "--vdev",
                          "net_pcap0,rx_pcap=" + handmade + ",infinite_rx=1", "--", "--progress"],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        seen = []
        for line in p.stderr:  # the first progress line proves packets are flowing
            seen.append(line)
            if re.match(r"dpdk: [1-9]\d* packets, ", line):
                break
        else:
            pytest.fail("no progress line: " + "".join(seen))
        p.send_signal(signal.SIGINT)
        rest = p.stderr.read()
        assert p.wait(timeout=60) == 0, rest
    finally:
        if p.poll() is None:
            p.kill()
    m = re.search(r"summary: (\d+) frames", rest)
    assert m and int(m.group(1)) > 0, rest
