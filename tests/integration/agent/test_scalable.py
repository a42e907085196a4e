"""Scalable TCP as a BPF congestion control (agents/spand-agent/bpf/spand_scalable.bpf.c),
registered by spand-agent, on the real kernel. A server, a delay and a client namespace
(tests/lab/delay_line.py: 10 ms each way) with a TBF drop-tail bottleneck towards the client;
the kernel's tcp:tcp_probe (snd_cwnd, ssthresh, snd_una, snd_nxt on every ACK) and
tcp:tcp_cong_state_set (entries into Recovery and Loss) are the truth. Checked:
- registration (tcp_available_congestion_control, bpftool), selection by the agent's per-prefix
  policy (high_bdp_cc) and by setsockopt(TCP_CONGESTION), unregistration on SIGTERM, a leftover
  registration after SIGKILL, a second agent;
- above the legacy window of 16 segments: +1 segment per 100 ACKed segments, so x1.01 per
  round trip, and ssthresh = cwnd - cwnd/8 at a loss; at or below it, Reno (+1 per round trip,
  halved);
- friendliness against Reno and CUBIC on a shared bottleneck (measured and printed; only
  sanity is asserted);
- windows in range through recoveries and undos: on a small buffer shared by many flows, no
  cwnd or ssthresh beyond what the windows seen before could lead to (a lab run once saw
  6 -> 667073280 segments on the way out of a recovery, docs/results/lab_truth.md). On a kernel
  that does not run BPF programs for its init process's threads (bpf_skips_init()), a socket's
  windows are judged up to its first event processed in such a thread: from there on the
  values are not the program's (agent README, "Scalable TCP", "Out-of-range windows").
Run alone for the figures: python3 -m pytest -s tests/integration/agent/test_scalable.py
(as root, with SPAND_AGENT and DELAY_LINE set; meson test sets them)."""
import json
import math
import os
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time

import pytest

from lab import DelayLab, MSS, WAIT_S, sh

AGENT = os.environ.get("SPAND_AGENT", "spand-agent")
DELAY_LINE = os.environ.get("DELAY_LINE", "")
CC = "spand_scalable"
LOCK = "/run/spand-agent-scalable.lock"
PORT = 8080
ONE_WAY_MS = 10
LEGACY = 16
INF = 0x7fffffff

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (netns, BPF, tracefs)"),
    pytest.mark.skipif(not DELAY_LINE, reason="DELAY_LINE unset"),
]

# A server that answers "SIZE CC\n" with SIZE bytes (0: until the client closes), switching
# the accepted socket to CC first unless CC is "-", and says which congestion control the
# socket has once accepted (the agent's sock_ops program sets it before accept returns).
SERVER = r"""
import socket, sys, threading
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("0.0.0.0", int(sys.argv[1])))
ls.listen(64)
print("ready", flush=True)
def serve(c, peer):
    f = c.makefile("rb")
    size, cc = f.readline().split()
    size = int(size)
    if cc != b"-":
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc)
    now = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0]
    print("conn port=%d cc=%s" % (peer[1], now.decode()), flush=True)
    buf = b"x" * 65536
    sent = 0
    try:
        while size == 0 or sent < size:
            sent += c.send(buf if size == 0 else buf[:min(len(buf), size - sent)])
        c.shutdown(socket.SHUT_WR)
        while c.recv(4096):
            pass
    except OSError:
        pass
    print("done port=%d" % peer[1], flush=True)
    c.close()
while True:
    c, peer = ls.accept()
    threading.Thread(target=serve, args=(c, peer), daemon=True).start()
"""

# Client: "fetch SRC SIZE CC" reads SIZE bytes and prints its port; "race DURATION WARMUP
# SRC:CC..." opens one streaming connection per SRC:CC at once and prints, as JSON, each one's
# goodput in Mbit/s over [WARMUP, WARMUP + DURATION] seconds.
CLIENT = r"""
import json, socket, sys, threading, time
server, port = sys.argv[1], int(sys.argv[2])
def connect(src, size, cc):
    s = socket.socket()
    s.bind((src, 0))
    s.connect((server, port))
    s.sendall(b"%d %s\n" % (size, cc.encode()))
    return s
if sys.argv[3] == "fetch":
    src, size, cc = sys.argv[4], int(sys.argv[5]), sys.argv[6]
    s = connect(src, size, cc)
    print(s.getsockname()[1], flush=True)
    n = 0
    while True:
        d = s.recv(1 << 16)
        if not d:
            break
        n += len(d)
    assert n == size, n
else:
    duration, warmup = float(sys.argv[4]), float(sys.argv[5])
    flows = [a.split(":") for a in sys.argv[6:]]
    socks = [connect(src, 0, cc) for src, cc in flows]
    counts = [0] * len(socks)
    marks = [None] * len(socks)
    t0 = time.monotonic()
    def pump(i):
        s = socks[i]
        while True:
            d = s.recv(1 << 16)
            if not d:
                return
            counts[i] += len(d)
            if time.monotonic() - t0 >= warmup + duration:
                return
    threads = [threading.Thread(target=pump, args=(i,)) for i in range(len(socks))]
    for t in threads:
        t.start()
    time.sleep(warmup)
    start = list(counts)
    time.sleep(duration)
    end = list(counts)
    for t in threads:
        t.join()
    for s in socks:
        s.close()
    print(json.dumps([{"cc": cc, "mbit_s": (e - b) * 8 / duration / 1e6}
                      for (src, cc), b, e in zip(flows, start, end)]))
"""


class ScalableLab(DelayLab):
    """<name>s (10.79.0.1) -- delay line, TBF towards the client -- <name>c (10.79.0.2,
    10.79.1.2, 10.79.2.2, 10.79.3.2): three client prefixes."""

    def __init__(self, name, one_way_ms=ONE_WAY_MS):
        super().__init__(name, "10.79", ["10.79.0.2/24", "10.79.1.2/24", "10.79.2.2/24",
                                         "10.79.3.2/24"], one_way_ms, DELAY_LINE)

    def prepare(self):
        self.bottleneck(20, 60000)
        os.makedirs(self.cgroup, exist_ok=True)
        with open(os.path.join(self.trace, "buffer_size_kb"), "w") as f:
            f.write("16384")  # per CPU: every ACK of a few seconds of transfer

    def __exit__(self, *exc):
        for p in self.procs:  # SIGTERM first: an agent removes what it installed
            if p.p.poll() is None:
                p.p.terminate()
                try:
                    p.p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        ev = os.path.join(self.trace, "events", "tcp", "tcp_cong_state_set", "enable")
        if os.path.exists(ev):
            with open(ev, "w") as f:
                f.write("0")
        super().__exit__(*exc)

    def ack_path(self, kbit, burst=3028):
        """The delay line's sends towards the server (ACKs) through a TBF of this rate, with
        room for every ACK of the run: slowed to a trickle and back, nothing is dropped."""
        sh("ip netns exec %s tc qdisc replace dev %sa root tbf rate %dkbit burst %d "
           "limit 1000000" % (self.dly, self.name, kbit, burst))

    def trace_start(self):
        # The thread group of the task each event ran in (bpf_skips_init()): "comm-pid (tgid)".
        with open(os.path.join(self.trace, "options", "record-tgid"), "w") as f:
            f.write("1")
        ev = os.path.join(self.trace, "events", "tcp", "tcp_cong_state_set")
        with open(os.path.join(ev, "filter"), "w") as f:
            f.write("sport == %d" % PORT)
        with open(os.path.join(ev, "enable"), "w") as f:
            f.write("1")
        self.probe_start(PORT)  # enables tcp_probe, clears the buffer

    def trace_stop(self):
        for e in ("tcp_probe", "tcp_cong_state_set"):
            with open(os.path.join(self.trace, "events", "tcp", e, "enable"), "w") as f:
                f.write("0")

    def server(self):
        srv = self.start(self.in_srv(["/usr/bin/python3", "-c", SERVER, str(PORT)]),
                         cgroup=self.cgroup)
        srv.wait_line(r"^ready")
        return srv

    def fetch_cc(self, srv, src, size, cc="-", timeout=60):
        """One transfer of `size` bytes to `src`; returns (client port, the server socket's
        congestion control)."""
        r = subprocess.run(self.in_cli(["/usr/bin/python3", "-c", CLIENT, "10.79.0.1", str(PORT),
                                        "fetch", src, str(size), cc]),
                           capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, r.stderr
        port = int(r.stdout.split()[0])
        got = srv.wait_line(r"conn port=%d cc=(\S+)" % port).group(1)
        srv.wait_line(r"done port=%d" % port, timeout=timeout)
        return port, got

    def race(self, duration, warmup, flows):
        r = subprocess.run(self.in_cli(["/usr/bin/python3", "-c", CLIENT, "10.79.0.1", str(PORT),
                                        "race", str(duration), str(warmup)] +
                                       ["%s:%s" % f for f in flows]),
                           capture_output=True, text=True, timeout=duration + warmup + 60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


def clear_leftover():
    """A registration left by an earlier run that was killed: removed, so that each test starts
    from the kernel's own list (the agent would remove it too, with a message)."""
    for i in struct_ops_ids():
        print("removing a leftover %s (struct_ops map id %d)" % (CC, i))
        sh("bpftool struct_ops unregister id %d" % i, check=False)
    assert CC not in available()


def available():
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


def struct_ops_ids():
    """ids of registered struct_ops maps named like ours (bpftool struct_ops show)."""
    out = sh("bpftool struct_ops show", check=False).stdout
    return [int(m.group(1)) for m in re.finditer(r"^(\d+): %s\b" % CC, out, re.M)]


def write(text, suffix):
    f = tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False)
    f.write(text)
    f.close()
    return f.name


def start_agent(lab, *args, ca_emulate=True, mode="bpf"):
    """The agent with Scalable TCP on, selected for prefixes with W_c >= 16: 10.79.1.0/24
    (W_c 40) gets it, 10.79.2.0/24 (W_c 8) does not; 10.79.3.0/24 has no estimate."""
    ef = write(json.dumps({"estimates": [
        {"prefix": "10.79.1.0/24", "wc_segments": 40, "rtt_ms": 20, "samples": 50,
         "verdict": "USE_ESTIMATE"},
        {"prefix": "10.79.2.0/24", "wc_segments": 8, "rtt_ms": 20, "samples": 50,
         "verdict": "USE_ESTIMATE"}]}), ".json")
    cfg = write('[agent]\nscalable = true\n[policy]\nhigh_bdp_cc = "%s"\n'
                'high_bdp_wc_segments = %d\nca_emulate = %s\nwindow_rule = "paper"\n'
                % (CC, LEGACY, "true" if ca_emulate else "false"), ".toml")
    argv = [AGENT, "--metrics", "", "--mode", mode, "-c", cfg, "-f", ef,
            "-p", "%d:200000" % PORT, "-P", "10.79.1.0/24", "-P", "10.79.2.0/24", *args]
    if mode == "bpf":
        argv += ["--cgroup", lab.cgroup]
    return lab.start(lab.in_srv(argv))


# ---- reading the kernel's trace ------------------------------------------------------------

def read_trace(lab, in_init=None):
    """Per client port, the events in order: ("probe", cwnd, ssthresh, snd_una, snd_nxt) and
    ("state", new ca_state). With a dict `in_init` (and record-tgid on, trace_start), also the
    index of each port's first event that ran in a thread of the init process (tgid 1)."""
    out = {}
    with open(os.path.join(lab.trace, "trace")) as f:
        for line in f:
            if "tcp_probe:" in line:
                ev = dict(re.findall(r"(\w+)=(\S+)", line))
                p = int(ev["dest"].rsplit(":", 1)[1])
                out.setdefault(p, []).append(("probe", int(ev["snd_cwnd"]), int(ev["ssthresh"]),
                                              int(ev["snd_una"], 16), int(ev["snd_nxt"], 16)))
            elif "tcp_cong_state_set:" in line:
                p = int(re.search(r"dport=(\d+)", line).group(1))
                out.setdefault(p, []).append(
                    ("state", int(re.search(r"cong_state=(\d+)", line).group(1))))
            else:
                continue
            # "  comm-pid  (   tgid) [cpu] flags  time: event: ..."
            m = re.match(r"\s*.+?-\d+\s+\(\s*(\d+|-+)\)\s+\[", line)
            if in_init is not None and m and m.group(1) == "1":
                in_init.setdefault(p, len(out[p]) - 1)
    return out


def bpf_skips_init():
    """Whether the running kernel skips BPF programs in its init process's threads. A patch of
    the sandbox kernel this was found on (not upstream Linux) marks each BPF program "init
    owned" or not (bpf_prog_aux.init_owned) and its __bpf_prog_enter returns 0 (do not run)
    when the current task's tgid is 1 and the program is not; the x86 trampoline of a
    struct_ops member then returns an uninitialised stack slot for ssthresh() or undo_cwnd().
    Told by the field in the kernel's BTF."""
    out = sh("bpftool btf dump file /sys/kernel/btf/vmlinux format c", check=False).stdout
    m = re.search(r"^struct bpf_prog_aux \{(.*?)^\};", out, re.M | re.S)
    return bool(m and re.search(r"\binit_owned;", m.group(1)))


def after(a, b):
    """Sequence number a at or after b (mod 2^32)."""
    return ((a - b) & 0xffffffff) < 0x80000000


def decreases(events):
    """(cwnd, new ssthresh) at each loss in congestion avoidance: an entry into Recovery or Loss
    from Open or Disorder whose last tcp_probe before (the ACK being processed: the kernel's
    ssthresh() sees its cwnd) had a finite ssthresh and cwnd >= ssthresh; the new ssthresh is
    the next probe's."""
    out, state, last, pending = [], 0, None, None
    for ev in events:
        if ev[0] == "state":
            if ev[1] in (3, 4) and state in (0, 1) and last and INF > last[2] and \
                    last[1] >= last[2]:
                pending = last[1]
            state = ev[1]
        else:
            if pending is not None:
                out.append((pending, ev[2]))
                pending = None
            last = ev
    return out


def avoidance_runs(events):
    """Runs of consecutive tcp_probe events in congestion avoidance (state Open, ssthresh
    finite, cwnd >= ssthresh), as lists of (cwnd, snd_una, snd_nxt)."""
    runs, cur, state = [], [], 0
    for ev in events:
        if ev[0] == "state":
            state = ev[1]
            if cur:
                runs.append(cur)
            cur = []
            continue
        _, cwnd, ssthresh, una, nxt = ev
        if state == 0 and ssthresh < INF and cwnd >= ssthresh:
            cur.append((cwnd, una, nxt))
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    return runs


def rounds(run):
    """Round trips of a run: from a probe to the first one whose snd_una reached that probe's
    snd_nxt. Returns (cwnd at start, cwnd at end) per complete round."""
    out, i = [], 0
    while i < len(run):
        target = run[i][2]
        j = next((k for k in range(i + 1, len(run)) if after(run[k][1], target)), None)
        if j is None:
            break
        out.append((run[i][0], run[j][0]))
        i = j
    return out


def acked_per_increment(run):
    """(cwnd before, segments ACKed since the previous increment) at each +1 of cwnd."""
    out, last_una = [], None
    for (c0, _, _), (c1, una, _) in zip(run, run[1:]):
        if c1 == c0 + 1:
            if last_una is not None:
                out.append((c0, ((una - last_una) & 0xffffffff) / MSS))
            last_una = una
        elif c1 != c0:
            last_una = None
    return out


def analyse(events, scalable_region):
    """Growth and decrease of one connection, in the Scalable region (cwnd > 16) or in the
    legacy one (cwnd <= 16)."""
    inside = (lambda c: c > LEGACY) if scalable_region else (lambda c: c <= LEGACY)
    runs = avoidance_runs(events)[1:]  # after slow start's first loss: steady epochs
    rts = [r for run in runs for r in rounds(run) if inside(r[0]) and inside(r[1])]
    incs = [a for run in runs for c, a in acked_per_increment(run) if inside(c) and inside(c + 1)]
    incs_rel = [a / c for run in runs for c, a in acked_per_increment(run)
                if inside(c) and inside(c + 1)]
    dec = [(c, s) for c, s in decreases(events) if inside(c)]
    return {
        "rounds": len(rts),
        "growth_per_round": math.exp(sum(math.log(b / a) for a, b in rts) / len(rts)) if rts else 0,
        "segments_per_round": sum(b - a for a, b in rts) / len(rts) if rts else 0,
        "mean_cwnd": statistics.mean(a for a, _ in rts) if rts else 0,
        "increments": len(incs),
        "acked_per_increment_median": statistics.median(incs) if incs else 0,
        "acked_per_increment_over_cwnd_median": statistics.median(incs_rel) if incs_rel else 0,
        "decreases": dec,
    }


# ---- tests ---------------------------------------------------------------------------------

def test_registered_selected_measured_and_unregistered():
    clear_leftover()
    with ScalableLab("sc1") as lab:
        agent = start_agent(lab, ca_emulate=False)
        agent.wait_line(r"registered congestion control %s" % CC)
        agent.wait_line(r"applied port=8080 prefix=10.79.1.0/24")
        assert CC in available()
        assert len(struct_ops_ids()) == 1
        srv = lab.server()
        # Selection: the agent's policy for a high-BDP prefix (W_c 40 >= 16), not for W_c 8;
        # a socket may also ask for it itself (setsockopt TCP_CONGESTION).
        assert lab.fetch_cc(srv, "10.79.1.2", 50_000)[1] == CC
        assert lab.fetch_cc(srv, "10.79.2.2", 50_000)[1] == "reno"
        assert lab.fetch_cc(srv, "10.79.3.2", 50_000, CC)[1] == CC

        # Above the legacy window, on the agent-selected prefix: 10 Mbit/s, 20 ms, 60 kB of
        # buffer: losses at ~17 + 41 = 58 segments, epochs between ~51 and 58.
        lab.bottleneck(10, 60000)
        lab.trace_start()
        port, cc = lab.fetch_cc(srv, "10.79.1.2", 10_000_000, timeout=120)
        lab.trace_stop()
        assert cc == CC
        high = analyse(read_trace(lab)[port], True)

        # The legacy window: 3 Mbit/s, 20 ms, 12 kB of buffer: losses at ~13 segments.
        lab.bottleneck(3, 12000)
        lab.trace_start()
        port, cc = lab.fetch_cc(srv, "10.79.3.2", 2_500_000, CC, timeout=120)
        lab.trace_stop()
        assert cc == CC
        low = analyse(read_trace(lab)[port], False)

        assert agent.stop() == 0
        agent.wait_line(r"unregistered %s" % CC)
        assert CC not in available()
        assert struct_ops_ids() == []

    for name, r in (("above 16", high), ("at or below 16", low)):
        ratios = [s / c for c, s in r["decreases"]]
        print("%s: %d round trips at mean cwnd %.1f: x%.4f per round trip (%.2f segments); "
              "%d increments, median %.1f segments ACKed per +1 (%.2f x cwnd); %d losses, "
              "ssthresh/cwnd median %.3f (%s)"
              % (name, r["rounds"], r["mean_cwnd"], r["growth_per_round"],
                 r["segments_per_round"], r["increments"], r["acked_per_increment_median"],
                 r["acked_per_increment_over_cwnd_median"], len(ratios),
                 statistics.median(ratios) if ratios else 0, r["decreases"][:8]))

    # Above 16: +1 segment per 100 ACKed segments exactly (delayed ACKs count 2 at a time),
    # so about x1.01 per round trip (Reno at cwnd ~55 would be x1.018), and 7/8 at a loss.
    assert high["rounds"] >= 30 and high["increments"] >= 10
    assert 98 <= high["acked_per_increment_median"] <= 102
    assert 1.007 <= high["growth_per_round"] <= 1.013
    assert len(high["decreases"]) >= 3
    exact = [s == c - c // 8 for c, s in high["decreases"]]
    assert sum(exact) >= 0.9 * len(exact), high["decreases"]
    assert abs(statistics.median(s / c for c, s in high["decreases"]) - 0.875) <= 0.02
    # At or below 16: Reno, +1 per window of ACKs (one round trip), halved at a loss.
    assert low["rounds"] >= 20 and low["increments"] >= 5
    assert 0.85 <= low["acked_per_increment_over_cwnd_median"] <= 1.15
    assert 0.7 <= low["segments_per_round"] <= 1.3
    assert len(low["decreases"]) >= 3
    exact = [s == max(c // 2, 2) for c, s in low["decreases"]]
    assert sum(exact) >= 0.9 * len(exact), low["decreases"]


def test_leftover_and_second_agent():
    """SIGKILL leaves the registration (the kernel keeps a registered struct_ops map); the next
    agent removes it and registers its own. A second agent while the first runs uses the
    first one's registration and leaves it in place when it stops."""
    clear_leftover()
    with ScalableLab("sc2") as lab:
        first = start_agent(lab)
        first.wait_line(r"registered congestion control %s" % CC)
        first.stop(signal.SIGKILL)
        assert CC in available()
        left = struct_ops_ids()
        assert len(left) == 1
        second = start_agent(lab)
        second.wait_line(r"removed a leftover registration of %s \(struct_ops map id %d"
                         % (CC, left[0]))
        second.wait_line(r"registered congestion control %s" % CC)
        assert len(struct_ops_ids()) == 1 and struct_ops_ids() != left
        # A second agent (route mode: the sock_ops link is the first one's) borrows it.
        third = start_agent(lab, mode="route")
        third.wait_line(r"%s is registered by another spand-agent \(pid \d+\): selecting it "
                        r"without owning it" % CC)
        third.wait_line(r"running mode=route")
        assert third.stop() == 0
        assert not any("unregistered" in l for l in third.drain())
        assert CC in available()
        assert second.stop() == 0
        second.wait_line(r"unregistered %s" % CC)
        assert CC not in available() and struct_ops_ids() == []


def test_friendliness_on_a_shared_bottleneck():
    """Two long flows through one 20 Mbit/s, 20 ms bottleneck with 60 kB of buffer (about
    2.2 BDP; ~38 segments each at a loss: above the legacy window). Goodput shares over 20 s
    after 5 s of warm-up are printed; asserted: the link is used and no flow starves."""
    clear_leftover()
    results = []
    with ScalableLab("sc3") as lab:
        agent = start_agent(lab)
        agent.wait_line(r"registered congestion control %s" % CC)
        srv = lab.server()
        lab.bottleneck(20, 60000)
        for a, b in (("reno", "reno"), (CC, "reno"), (CC, "cubic"), ("cubic", "reno")):
            flows = lab.race(20, 5, [("10.79.3.2", a), ("10.79.0.2", b)])
            total = sum(f["mbit_s"] for f in flows)
            results.append((a, b, flows[0]["mbit_s"], flows[1]["mbit_s"], total))
        assert agent.stop() == 0
    for a, b, x, y, total in results:
        print("friendliness: %s %.2f Mbit/s vs %s %.2f Mbit/s: share %.2f / %.2f, link %.1f "
              "Mbit/s, Jain %.3f" % (a, x, b, y, x / total, y / total, total,
                                     (x + y) ** 2 / (2 * (x * x + y * y))))
    for a, b, x, y, total in results:
        assert total >= 0.8 * 20 * 0.95  # goodput of a 20 Mbit/s link (headers ~5 %)
        assert min(x, y) >= 0.05 * total


UNDO_COUNTERS = ("TCPFullUndo", "TCPPartialUndo", "TCPDSACKUndo", "TCPLossUndo",
                 "TCPSpuriousRTOs", "TCPDSACKRecv")


def netstat(ns):
    """TcpExt counters of a namespace (/proc/net/netstat: a name line, then a value line)."""
    lines = sh("ip netns exec %s cat /proc/net/netstat" % ns).stdout.splitlines()
    out = {}
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            out.update(zip(names.split()[1:], map(int, values.split()[1:])))
    return out


def out_of_range(events):
    """The tcp_probe events whose cwnd or ssthresh no event could have produced: above 2^20
    segments (1.5 GB in flight), or above twice the largest cwnd of the earlier events plus 16,
    or an ssthresh below 2 (the program's least; the kernel's other writers copy or restore
    one of its values: prior_ssthresh, tcp_current_ssthresh()).
    Why that bound holds for a sane sender: slow start at most doubles a window per round
    trip and tcp_probe sees every ACK; an undo restores prior_cwnd, a window the socket had;
    prior_ssthresh is max(ssthresh, 3/4 cwnd) of an earlier moment; the ssthresh tcp_probe shows
    (tcp_current_ssthresh) is max(ssthresh, 3/4 cwnd) outside a reduction. The infinite
    ssthresh of slow start (0x7fffffff) is not a window."""
    bad, top = [], 0
    for ev in events:
        if ev[0] != "probe":
            continue
        _, cwnd, ssthresh = ev[:3]
        bound = min(1 << 20, 2 * top + 16) if top else 1 << 20
        if cwnd > bound or (ssthresh != INF and (ssthresh > bound or ssthresh < 2)):
            bad.append((top, cwnd, ssthresh))
        top = max(top, min(cwnd, 1 << 20))
    return bad


def test_windows_in_range_through_recoveries_and_undos():
    """Eight Scalable TCP flows for 8 s through 6 Mbit/s and 15 kB of buffer (10 segments for
    all of them; the lab path where an out-of-range window was seen had the same rate and
    buffer): recoveries from the bottleneck's losses, and every second the ACK path held for
    400 ms (a TBF at 1 kbit/s, nothing dropped): the RTO (200 ms + srtt) fires, the held ACKs
    then show the resends spurious and the kernel undoes the reduction (tcp_try_undo_loss ->
    tcp_undo_cwnd_reduction: cwnd from undo_cwnd(), ssthresh from prior_ssthresh), as after a
    DSACK. Asserted for every connection: no cwnd or ssthresh out of range (out_of_range()),
    and that the run had recoveries and undos to check (the server namespace's TcpExt
    counters, printed). Where the kernel skips BPF programs in its init process's threads
    (bpf_skips_init()), a connection is judged up to its first event in such a thread (a
    timer or softirq that ran while one was current): ssthresh() and undo_cwnd() did not run
    there and the kernel took an uninitialised stack slot for their result (printed with the
    windows that followed: in 60 runs, 3 had one, with ssthresh 136, 1582080 and 667073280)."""
    clear_leftover()
    with ScalableLab("sc4") as lab:
        agent = start_agent(lab)
        agent.wait_line(r"registered congestion control %s" % CC)
        srv = lab.server()
        lab.bottleneck(6, 15000)
        lab.ack_path(1000000)
        before = netstat(lab.srv)
        lab.trace_start()
        stop = threading.Event()

        def hold_acks():
            while not stop.wait(0.65):
                lab.ack_path(1, 200)  # one ACK (66 bytes) per half second
                time.sleep(0.4)
                lab.ack_path(1000000)

        holder = threading.Thread(target=hold_acks)
        holder.start()
        try:
            flows = lab.race(8, 0, [("10.79.3.2", CC)] * 8)
        finally:
            stop.set()
            holder.join()
        lab.trace_stop()
        after_ = netstat(lab.srv)
        in_init = {}
        trace = read_trace(lab, in_init)
        assert agent.stop() == 0
    counters = {k: after_.get(k, 0) - before.get(k, 0) for k in UNDO_COUNTERS}
    recoveries = sum(1 for evs in trace.values() for ev in evs if ev[0] == "state" and ev[1] == 3)
    if not bpf_skips_init():
        in_init = {}
    judged = {p: evs[:in_init[p] + 1] if p in in_init else evs for p, evs in trace.items()}
    probes = sum(1 for evs in judged.values() for ev in evs if ev[0] == "probe")
    bad = {p: out_of_range(evs) for p, evs in judged.items()}
    bad = {p: b for p, b in bad.items() if b}
    # After a skipped callback (not judged): the windows out of range that followed.
    skipped = {p: (trace[p][i], out_of_range(trace[p])[:3]) for p, i in in_init.items()}
    print("windows in range: %d connections, %d tcp_probe events judged, %d recoveries, %s; "
          "goodput %.2f Mbit/s; out of range: %s; judged up to an event in the init process "
          "(BPF not run there): %s"
          % (len(trace), probes, recoveries, counters, sum(f["mbit_s"] for f in flows),
             {p: b[:3] for p, b in bad.items()}, skipped))
    assert len(trace) >= 8 and probes >= 1000
    assert recoveries >= 8
    assert sum(counters[k] for k in ("TCPFullUndo", "TCPPartialUndo", "TCPDSACKUndo",
                                     "TCPLossUndo")) >= 4
    assert not bad
