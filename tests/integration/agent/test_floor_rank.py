"""Rule 12 gated by rank on the real kernel (docs/DESIGN.md, rule 12, "The gate is now the
socket's rank"): where sharing leaves a client network no better window, the agent leaves it
to the kernel's IW10 and the sock_ops program counts those first windows in flight per host;
the n-th keeps the kernel's unpaced burst while n x IW10 fits in what the buffer has free (the
buffer in time, capped at the propagation RTT, minus the handshake's queue, at the measured
rate), the later ones are paced at that rate (SO_MAX_PACING_RATE, one HTB class at the rate
itself) and sent by BBR. Behind a queue (a handshake that waited 2 ms or more) the first of a
batch sends the whole window the transfer would get alone where it fits (share_floor_burst):
this lab's handshakes wait in none (1 ms or more), so there the rank gate alone decides, and the prediction
below follows the whole rule either way.

Server, client and a delay line (tests/lab/delay_line.py) in network namespaces, a TBF drop-tail
bottleneck towards the client whose buffer is longer than the propagation RTT (so the cap
decides the room). The agent gets no estimate and no test hook: the policy comes from its own
path readings of warm-up traffic (ACK trains for the rate, batches of concurrent transfers for
the senders, a bulk transfer that overflows the buffer for the queue). Then a batch of
connections is opened at once and each socket's state is read independently of the program's
counters: by the server itself right after accept (TCP_CONGESTION, SO_PRIORITY,
SO_MAX_PACING_RATE), by `ss -ti`, by the HTB class counters and by a capture of each first
window on the server's device. Run as root (meson test --suite integration)."""
import json
import os
import re
import subprocess
import tempfile
import time

import pytest

from lab import DelayLab, MSS, WAIT_S, sh
from test_agent import agent_map_id, active_counts

AGENT = os.environ.get("SPAND_AGENT", "spand-agent")
DELAY_LINE = os.environ.get("DELAY_LINE", "")
PORT = 8080
ONE_WAY_MS = 20
RTT_S = 2 * ONE_WAY_MS / 1000
RATE_KBIT = 10_500                 # the bottleneck, bits/s on the wire (TBF counts frames)
FRAME = MSS + 66                   # wire bytes of a full segment (Ethernet 14, IP 20, TCP 32)
RATE_BPS = RATE_KBIT * 1000 // 8   # 1,312,500 B/s of frames
PAYLOAD_BPS = RATE_BPS * MSS / FRAME  # 1,255,300 B/s of TCP payload: what an ACK train reads
BUFFER_BYTES = 131_250             # 100 ms of the bottleneck: 2.5 x the propagation RTT
KERNEL_IW = 10
RESPONSE = 30_000                  # 21 segments: 2 rounds from IW10, 1 with a window of 21
BATCH = 8                          # the lab's 8 clients starting together
BULK = 1_500_000                   # overflows the buffer from slow start (retransmissions)
STAT_FLOOR_PACED, STAT_FLOOR_LEFT = 21, 22  # enum spand_stat in agents/libspand/spand_maps.h
STAT_CC_FAILED, STAT_PACE_CLASSED, STAT_PACE_SKIPPED = 5, 11, 13
FLAG_SET_CC, FLAG_PACE_QUEUED, FLAG_PACE_RANK = 0x1, 0x20, 0x80
NO_LIMIT = 2**64 - 1               # sk_max_pacing_rate when nothing set it

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (netns, BPF, tc)"),
    pytest.mark.skipif(not DELAY_LINE, reason="DELAY_LINE unset"),
]


QUEUED_MIN_S = 0.002  # rule 12: a handshake 2 ms or more over the propagation RTT waited
BURST_QUEUED_MIN_S = 0.001  # ... 1 ms or more: the first of a batch sends its whole window
BORDER_S = 0.0005     # the capture's and the kernel's times of one handshake differ by less


def fits(n, queued_s):
    """DESIGN's rule 12 by rank, on this lab's numbers (not the agent's): the n-th first window
    in flight keeps the kernel's burst while n x IW10 fits in what the buffer has free: the
    buffer in time (BUFFER_BYTES at the bottleneck, 100 ms) capped at the propagation RTT (2 x
    ONE_WAY_MS: the TBF's 2-frame bucket lets a frame through an empty queue without waiting),
    minus what the handshake waited, at the bottleneck's payload rate."""
    room_s = min(BUFFER_BYTES / RATE_BPS, RTT_S)
    return queued_s < room_s and n * KERNEL_IW <= PAYLOAD_BPS * (room_s - queued_s) / MSS


def free_segments(queued_s):
    """What the buffer has free at a handshake that waited queued_s: the buffer in time capped
    at the propagation RTT, minus the wait, at the bottleneck's payload rate, in segments."""
    room_s = min(BUFFER_BYTES / RATE_BPS, RTT_S)
    return max(0.0, PAYLOAD_BPS * (room_s - queued_s) / MSS)


def keeps_burst(n, queued_s):
    """DESIGN's rule 12 with share_floor_burst (on by default): a socket whose handshake waited
    in a queue (1 ms or more) counts the batch's first window as the whole window the transfer
    would get alone (RESPONSE: 21 segments) when that fits what is free, and the first sends
    it; the n-th keeps the kernel's burst while that window and n - 1 of IW10 fit. Without a
    wait, fits(n) alone."""
    if queued_s < BURST_QUEUED_MIN_S:
        return fits(n, queued_s)
    whole = -(-RESPONSE // MSS)
    first = whole if whole <= free_segments(queued_s) else KERNEL_IW
    return first + (n - 1) * KERNEL_IW <= free_segments(queued_s)


def expected_left():
    """How many of a batch whose handshakes waited in no queue keep the burst, and the segments
    free (34.7 here: 3 of 8, the other 5 paced)."""
    n = 0
    while fits(n + 1, 0):
        n += 1
    return n, PAYLOAD_BPS * min(BUFFER_BYTES / RATE_BPS, RTT_S) / MSS


def expect_paced(rank, n, handshake_s):
    """Whether DESIGN's rule 12 paces the n-th socket of the batch whose handshake took
    handshake_s (measured on the wire); None when the handshake is within BORDER_S of where
    the answer changes (the kernel's own reading of it may fall on either side)."""
    queued = max(0.0, handshake_s - RTT_S)
    if rank:
        answers = {not keeps_burst(n, q) for q in (max(0.0, queued - BORDER_S), queued + BORDER_S)}
    else:
        answers = {q >= QUEUED_MIN_S for q in (queued - BORDER_S, queued + BORDER_S)}
    return answers.pop() if len(answers) == 1 else None


class RankLab(DelayLab):
    """<name>s (10.79.0.1) -- delay line, TBF towards the client -- <name>c (10.79.0.2, and
    10.79.1.2: the client network whose policy is rule 12's)."""

    def __init__(self, name):
        super().__init__(name, "10.79", ["10.79.0.2/24", "10.79.1.2/24"], ONE_WAY_MS, DELAY_LINE)

    def prepare(self):
        sh("ip netns exec %s tc qdisc replace dev %sb root tbf rate %dkbit burst %d limit %d"
           % (self.dly, self.name, RATE_KBIT, 2 * FRAME, BUFFER_BYTES))
        os.makedirs(self.cgroup, exist_ok=True)


# A concurrent server: each connection sends its size and a newline; right after reading it,
# before the first byte of the response (so before the first window can end), the server reads
# the socket's congestion control, priority and SO_MAX_PACING_RATE, prints them, sends the
# response and keeps the connection until the client closes.
SERVER = r"""
import socket, struct, sys, threading
SO_MAX_PACING_RATE, TCP_CONGESTION = 47, 13
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(('0.0.0.0', %d))
ls.listen(128)
out = threading.Lock()
def say(s):
    with out:
        print(s, flush=True)
def serve(c, peer):
    req = b''
    while not req.endswith(b'\n'):
        d = c.recv(64)
        if not d:
            return
        req += d
    cc = c.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).split(b'\0')[0].decode()
    prio = c.getsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY)
    rate = struct.unpack('Q', c.getsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, 8))[0]
    say('conn port=%%d cc=%%s prio=%%d max_pacing=%%d' %% (peer[1], cc, prio, rate))
    c.sendall(b'x' * int(req))
    c.shutdown(socket.SHUT_WR)
    while c.recv(1 << 16):
        pass
    c.close()
say('ready')
while True:
    c, peer = ls.accept()
    threading.Thread(target=serve, args=(c, peer), daemon=True).start()
""" % PORT

# A batch: N connections from 10.79.1.2, opened one after another (the server establishes them
# in this order: their ranks), then every request, then every response read at once. Prints the
# client ports in connection order, then "got" once all is read; holds the connections until a
# line on stdin (so that `ss` still sees them), then closes them.
BATCH_CLIENT = r"""
import socket, sys, threading
n, size, hold = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == 'hold'
socks = []
for _ in range(n):
    s = socket.socket()
    s.bind(('10.79.1.2', 0))
    s.connect(('10.79.0.1', %d))
    socks.append(s)
print('ports ' + ' '.join(str(s.getsockname()[1]) for s in socks), flush=True)
def fetch(s):
    s.sendall(b'%%d\n' %% size)
    got = 0
    while True:
        d = s.recv(1 << 16)
        if not d:
            break
        got += len(d)
    assert got == size, got
ts = [threading.Thread(target=fetch, args=(s,)) for s in socks]
for t in ts:
    t.start()
for t in ts:
    t.join()
print('got', flush=True)
if hold:
    sys.stdin.readline()
for s in socks:
    s.close()
""" % PORT


def run_batch(lab, n, size, hold=False):
    p = subprocess.Popen(lab.in_cli(["/usr/bin/python3", "-c", BATCH_CLIENT, str(n), str(size),
                                     "hold" if hold else "go"]),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    ports = [int(x) for x in p.stdout.readline().split()[1:]]
    line = p.stdout.readline()
    if line.strip() != "got":
        p.kill()
        raise AssertionError("batch client: %r %s" % (line, p.stderr.read()))
    if not hold:
        assert p.wait(timeout=WAIT_S) == 0, p.stderr.read()
    return p, ports


def release(p):
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.wait(timeout=WAIT_S) == 0, p.stderr.read()


def pinned_json(pins, name):
    return json.loads(sh("bpftool -j map dump pinned %s/%s" % (pins, name)).stdout)


def stats(pins):
    return {e["formatted"]["key"]: sum(v["value"] for v in e["formatted"]["values"])
            for e in pinned_json(pins, "stats")}


def policy_values(pins):
    """The values of prefix_policy (struct spand_policy), by BTF field name."""
    return [e["formatted"]["value"] for e in pinned_json(pins, "prefix_policy")]


def htb_sent(lab, dev):
    """{class handle: packets sent} of the pacing qdisc's classes (`tc -s class show`)."""
    out = sh("ip netns exec %s tc -s class show dev %s" % (lab.srv, dev)).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        r"class htb (\S+) .*\n\s*Sent \d+ bytes (\d+) pkt", out)}


def class_rate(handle):
    """The rate (B/s) of a pacing class, from its minor as spand_maps.h defines it: minor =
    (1 + bin x 4 + copy) x 16, a bin's rate its lower edge (8 + m) << (e - 3), 8 bins an octave
    from 2^13 B/s."""
    b = ((int(handle.split(":")[1], 16) >> 4) - 1) // 4
    return (8 + b % 8) << (13 + b // 8 - 3)


def ss_congestion_controls(lab):
    """{client port: congestion control name} of the server's connections on PORT (`ss -ti`)."""
    out = sh("ip netns exec %s ss -tinH state connected '( sport = :%d )'"
             % (lab.srv, PORT)).stdout
    ccs, port = {}, None
    for line in out.splitlines():
        m = re.search(r"10\.79\.1\.2:(\d+)\s*$", line)
        if m:
            port = int(m.group(1))
            continue
        if port is not None:
            words = line.split()
            if words:
                ccs[port] = words[0]
            port = None
    return ccs


def capture_readings(pcap, ports):
    """From a capture on the server's device (after its qdisc on the way out, before the stack
    on the way in), per client port: the handshake's round trip as the server saw it (its
    SYN-ACK to the client's ACK) and the time (s) between the first and the 10th distinct data
    segment sent to it."""
    out = sh("tshark -r %s -T fields -e tcp.srcport -e tcp.dstport -e frame.time_epoch "
             "-e tcp.flags.syn -e tcp.flags.ack -e tcp.len -e tcp.seq" % pcap).stdout
    synack, handshake, data, seen = {}, {}, {p: [] for p in ports}, set()
    for line in out.splitlines():
        sport, dport, t, syn, ack, length, seq = line.split()
        sport, dport, t = int(sport), int(dport), float(t)
        syn, ack = syn in ("1", "True"), ack in ("1", "True")
        if sport == PORT and dport in data:
            if syn and ack:
                synack.setdefault(dport, t)
            elif int(length) > 0 and (dport, seq) not in seen and len(data[dport]) < KERNEL_IW:
                seen.add((dport, seq))
                data[dport].append(t)
        elif dport == PORT and sport in synack and not syn and ack:
            handshake.setdefault(sport, t - synack[sport])
    spans = {p: (ts[-1] - ts[0] if len(ts) == KERNEL_IW else None) for p, ts in data.items()}
    return {p: handshake.get(p) for p in ports}, spans


def wait_until(what, cond, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.05)


def rule12_policy(pins, rank):
    """The prefix's policy once it is rule 12's (the kernel's IW10, paced, gated by the
    handshake's queue; by rank too when `rank`), else None."""
    want = FLAG_PACE_QUEUED | (FLAG_PACE_RANK if rank else 0)
    for v in policy_values(pins):
        if v["init_cwnd_segments"] == KERNEL_IW and (v["flags"] & (FLAG_PACE_QUEUED |
                                                                   FLAG_PACE_RANK)) == want:
            return v
    return None


@pytest.mark.parametrize("rank", [True, False], ids=["rank_gate", "queue_gate"])
def test_rule12_first_windows_paced_by_rank(rank):
    name = "r12a" if rank else "r12b"
    pins = "/sys/fs/bpf/spand_test_" + name
    with RankLab(name) as lab:
        dev = lab.name + "v"
        cfg = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        cfg.write("[policy]\nshare_floor_rank = %s\n" % ("true" if rank else "false"))
        cfg.close()
        ef = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        ef.write('{"estimates": []}')
        ef.close()
        agent = lab.start(lab.in_srv([AGENT, "--metrics", "", "--mode", "bpf", "--cgroup",
                                      lab.cgroup, "--pin-dir", pins, "-f", ef.name, "-c",
                                      cfg.name, "-p", "%d:%d" % (PORT, RESPONSE), "-P",
                                      "10.79.1.0/24", "--pace-device", dev]))
        agent.wait_line(r"running mode=bpf")
        srv = lab.start(lab.in_srv(["/usr/bin/python3", "-c", SERVER]), cgroup=lab.cgroup)
        srv.wait_line(r"^ready")
        # Warm-up: the agent's own readings of the path. Batches of concurrent transfers (the
        # senders; their first flights' ACK trains give the rate), a bulk transfer that fills
        # and overflows the buffer (its smoothed RTT is the buffer, its retransmissions say the
        # buffer overflowed), until the client network's policy is rule 12's.
        policy = None
        for _ in range(8):
            run_batch(lab, BATCH, RESPONSE)
            run_batch(lab, 1, BULK)
            run_batch(lab, BATCH, RESPONSE)
            try:
                policy = wait_until("rule 12's policy", lambda: rule12_policy(pins, rank),
                                    timeout=2)
                break
            except AssertionError:
                continue
        assert policy, "no rule 12 policy after the warm-up:\n" + "\n".join(agent.drain())
        print("policy:", {k: policy[k] for k in ("flags", "pacing_rate_bytes_per_s",
                                                 "prop_rtt_us", "queue_room_us",
                                                 "path_rate_bytes_per_s", "cc_name")})
        # The lab is as arranged: the agent's readings are this lab's numbers (rate within 10 %
        # of the bottleneck's payload rate, propagation RTT within 10 % of the delay line's,
        # and the buffer it saw longer than the propagation RTT, so that the cap decides).
        left, free = expected_left()
        prop_us = RTT_S * 1e6
        assert abs(policy["path_rate_bytes_per_s"] / PAYLOAD_BPS - 1) <= 0.10, policy
        assert abs(policy["prop_rtt_us"] / prop_us - 1) <= 0.10, policy
        assert policy["queue_room_us"] >= policy["prop_rtt_us"], policy
        assert policy["flags"] & FLAG_SET_CC and policy["cc_name"] == "bbr", policy
        print("expected with no handshake queued: %.1f segments free, %d of %d keep the burst, "
              "%d paced" % (free, left if rank else BATCH, BATCH, BATCH - left if rank else 0))

        # The batch: no first window of rule 12 in flight before it (the count per host).
        wait_until("no first window in flight",
                   lambda: all(v == 0 for v in active_counts(lab).values()))
        before, classes_before = stats(pins), htb_sent(lab, dev)
        pcap = "/tmp/spand_%s_%d.pcap" % (name, os.getpid())
        td = lab.start(lab.in_srv(["tcpdump", "--immediate-mode", "-Z", "root", "-i", dev, "-n",
                                   "-U", "-w", pcap, "tcp port %d" % PORT]))
        td.wait_line(r"listening on")
        srv.drain()  # the warm-up's lines
        client, ports = run_batch(lab, BATCH, RESPONSE, hold=True)
        conns = {}
        while len(conns) < len(ports):
            m = srv.wait_line(r"conn port=(\d+) cc=(\S+) prio=(\d+) max_pacing=(\d+)")
            if int(m.group(1)) in ports:
                conns[int(m.group(1))] = (m.group(2), int(m.group(3)), int(m.group(4)))
        ccs = ss_congestion_controls(lab)
        release(client)
        td.stop()
        after, classes_after = stats(pins), htb_sent(lab, dev)
        handshakes, spans = capture_readings(pcap, ports)
        os.unlink(pcap)
        assert agent.stop() == 0

        for n, port in enumerate(ports, 1):
            cc, prio, rate = conns[port]
            print("rank %d port %d: handshake %.2f ms, cc=%s (ss: %s) prio=0x%x max_pacing=%d, "
                  "first 10 segments in %.2f ms" % (n, port, handshakes[port] * 1e3, cc,
                                                    ccs.get(port), prio, rate, spans[port] * 1e3))
        classes = {h: n - classes_before.get(h, 0) for h, n in classes_after.items()
                   if n != classes_before.get(h, 0)}
        delta = {k: after.get(k, 0) - before.get(k, 0)
                 for k in (STAT_FLOOR_PACED, STAT_FLOOR_LEFT, STAT_CC_FAILED, STAT_PACE_CLASSED,
                           STAT_PACE_SKIPPED)}
        print("classes used (packets):", classes, "; program events:", delta)

        paced_ports, left_ports = [], []
        for n, port in enumerate(ports, 1):
            cc, prio, rate = conns[port]
            if (cc, prio, rate) == ("reno", 0, NO_LIMIT):
                # The kernel's start: its congestion control, no limit, no class, and its IW10
                # leaves as one burst (as fast as the veth takes it).
                assert ccs[port] == "reno", (port, ccs)
                assert spans[port] < 2 * FRAME / PAYLOAD_BPS, (port, spans[port])
                left_ports.append(port)
            else:
                # Paced: sent by BBR, at most at the measured rate (within 10 % of the
                # bottleneck's), through a pacing class that spreads the 10 segments the kernel
                # would send back to back (the class's bucket, then a frame per frame time).
                assert cc == "bbr" and ccs[port] == "bbr", (port, conns[port], ccs)
                assert abs(rate / PAYLOAD_BPS - 1) <= 0.10, (port, rate)
                assert prio >> 16 == 0x5350, (port, hex(prio))
                handle = "%x:%x" % (prio >> 16, prio & 0xffff)
                assert spans[port] >= 0.85 * (KERNEL_IW - 4) * FRAME / class_rate(handle), \
                    (port, spans[port], handle)
                paced_ports.append(port)
            want = expect_paced(rank, n, handshakes[port])
            assert want is None or want == (port in paced_ports), (
                "rank %d (handshake %.2f ms): %s, DESIGN says %s"
                % (n, handshakes[port] * 1e3, "paced" if port in paced_ports else "left",
                   "paced" if want else "left"))
        # What this run shows: with the rank gate, later ranks paced though no handshake waited;
        # with the handshake gate, the ranks the room does not hold left whole where their
        # handshakes waited in no queue.
        later_unqueued = [p for n, p in enumerate(ports, 1)
                          if n > left and handshakes[p] - RTT_S < QUEUED_MIN_S - BORDER_S]
        assert later_unqueued, ("every handshake past rank %d waited in a queue: the run says "
                                "nothing about the gate" % left, handshakes)
        if rank:
            assert set(later_unqueued) <= set(paced_ports), (later_unqueued, paced_ports)
            # All of them through one class at the rate itself (its bin's lower edge: at most
            # 12.5 % under it, never above), which carried every paced first window.
            prios = {conns[p][1] for p in paced_ports}
            assert len(prios) == 1, prios
            prio = prios.pop()
            handle = "%x:%x" % (prio >> 16, prio & 0xffff)
            assert list(classes) == [handle], (handle, classes)
            rate = conns[paced_ports[0]][2]
            assert 0.875 * rate < class_rate(handle) <= rate, (handle, class_rate(handle), rate)
            # (TCP hands the class 2-segment packets at most at this rate.)
            assert classes[handle] >= len(paced_ports) * KERNEL_IW // 2, classes
        else:
            assert not set(later_unqueued) & set(paced_ports), (later_unqueued, paced_ports)
            assert set(classes) <= {"%x:%x" % (conns[p][1] >> 16, conns[p][1] & 0xffff)
                                    for p in paced_ports}, classes
        # The program's own counters agree with what the sockets showed.
        assert delta[STAT_FLOOR_PACED] == len(paced_ports), (delta, paced_ports)
        assert delta[STAT_FLOOR_LEFT] == len(left_ports), (delta, left_ports)
        assert delta[STAT_PACE_CLASSED] == len(paced_ports), delta
        assert delta[STAT_PACE_SKIPPED] == 0 and delta[STAT_CC_FAILED] == 0, delta
