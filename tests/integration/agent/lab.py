"""Network-namespace lab for spand-agent's integration tests: a server and a client namespace
joined by a veth pair with offloads off, a cgroup v2 directory for the server, a tracefs
instance with tcp:tcp_probe, and helpers that wait for output lines (never for time)."""
import os
import queue
import re
import signal
import subprocess
import threading
import time

CGROUP2 = "/sys/fs/cgroup/unified" if os.path.exists("/sys/fs/cgroup/unified/cgroup.procs") \
    else "/sys/fs/cgroup"
TRACEFS = "/sys/kernel/tracing"
MSS = 1448  # 1500-byte MTU, IPv4, TCP timestamps
WAIT_S = 20  # upper bound for any condition; reaching it is a failure, not a pass


def sh(cmd, check=True):
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True)


class Proc:
    """A child process whose stdout and stderr lines are collected as they come."""

    def __init__(self, argv, cgroup=None, env=None):
        def enter_cgroup():
            if cgroup:
                with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
        self.argv = argv
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  preexec_fn=enter_cgroup, env=env)
        self.lines = queue.Queue()
        self.all = []
        for stream, tag in ((self.p.stdout, "out"), (self.p.stderr, "err")):
            threading.Thread(target=self._pump, args=(stream, tag), daemon=True).start()

    def _pump(self, stream, tag):
        for line in stream:
            self.lines.put((tag, line.rstrip("\n")))

    def wait_line(self, pattern, timeout=WAIT_S):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no line matching %r from %s; got:\n%s"
                                     % (pattern, self.argv[0], "\n".join(self.all)))
            try:
                tag, line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            self.all.append(line)
            m = rx.search(line)
            if m:
                return m

    def drain(self):
        while True:
            try:
                self.all.append(self.lines.get_nowait()[1])
            except queue.Empty:
                return self.all

    def stop(self, sig=signal.SIGTERM, timeout=WAIT_S):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        rc = self.p.wait(timeout=timeout)
        time.sleep(0)  # let the pump threads see EOF
        return rc


class Lab:
    """Server namespace <name>s (10.77.0.1/24) and client namespace <name>c (10.77.1.2/24,
    10.77.2.2/24: two client prefixes), each with a default route over the veth, so the client
    /24s are served by the default route (route mode needs a less specific route to copy)."""

    def __init__(self, name):
        self.name = name
        self.srv = name + "s"
        self.cli = name + "c"
        self.cgroup = os.path.join(CGROUP2, "spand_test_" + name)
        self.trace = os.path.join(TRACEFS, "instances", "spand_test_" + name)
        self.procs = []

    def __enter__(self):
        self.close_ns()
        for ns in (self.srv, self.cli):
            sh("ip netns add %s" % ns)
            sh("ip -n %s link set lo up" % ns)
        sh("ip link add %sv type veth peer name %sw" % (self.name, self.name))
        sh("ip link set %sv netns %s" % (self.name, self.srv))
        sh("ip link set %sw netns %s" % (self.name, self.cli))
        sh("ip -n %s addr add 10.77.0.1/24 dev %sv" % (self.srv, self.name))
        sh("ip -n %s addr add 10.77.1.2/24 dev %sw" % (self.cli, self.name))
        sh("ip -n %s addr add 10.77.2.2/24 dev %sw" % (self.cli, self.name))
        for ns, dev in ((self.srv, self.name + "v"), (self.cli, self.name + "w")):
            sh("ip -n %s link set %s up" % (ns, dev))
            sh("ip -n %s route add default dev %s" % (ns, dev))
            # Real segments on the wire: no TSO/GSO super-segments, no GRO merging.
            sh("ip netns exec %s ethtool -K %s tx off tso off gso off gro off" % (ns, dev))
        # Reno: the paper's sender; the default here (bbr) sets its own ssthresh and pacing.
        sh("ip netns exec %s sysctl -qw net.ipv4.tcp_congestion_control=reno" % self.srv)
        # No cached per-host metrics from an earlier connection.
        sh("ip netns exec %s sysctl -qw net.ipv4.tcp_no_metrics_save=1" % self.srv)
        os.makedirs(self.cgroup, exist_ok=True)
        if not os.path.ismount(TRACEFS):
            sh("mount -t tracefs nodev %s" % TRACEFS)
        os.makedirs(self.trace, exist_ok=True)
        return self

    def close_ns(self):
        for ns in (self.srv, self.cli):
            sh("ip netns del %s" % ns, check=False)

    def __exit__(self, *exc):
        for p in self.procs:
            if p.p.poll() is None:
                p.p.kill()
                p.p.wait()
        self.close_ns()
        if os.path.isdir(self.trace):
            with open(os.path.join(self.trace, "events/tcp/tcp_probe/enable"), "w") as f:
                f.write("0")
            os.rmdir(self.trace)
        if os.path.isdir(self.cgroup):
            try:
                os.rmdir(self.cgroup)
            except OSError:
                pass

    def in_srv(self, argv):
        return ["nsenter", "--net=/run/netns/" + self.srv] + argv

    def in_cli(self, argv):
        return ["nsenter", "--net=/run/netns/" + self.cli] + argv

    def start(self, argv, cgroup=None, env=None):
        p = Proc(argv, cgroup=cgroup, env=env)
        self.procs.append(p)
        return p

    def probe_start(self, port):
        with open(os.path.join(self.trace, "events/tcp/tcp_probe/filter"), "w") as f:
            f.write("sport == %d" % port)
        with open(os.path.join(self.trace, "events/tcp/tcp_probe/enable"), "w") as f:
            f.write("1")
        with open(os.path.join(self.trace, "trace"), "w") as f:
            f.write("")

    def probe_events(self):
        """tcp_probe events as dicts (dest port, snd_nxt, snd_una, snd_cwnd, ssthresh, srtt)."""
        out = []
        with open(os.path.join(self.trace, "trace")) as f:
            for line in f:
                if "tcp_probe" not in line:
                    continue
                ev = dict(re.findall(r"(\w+)=(\S+)", line))
                ev["dport"] = int(ev["dest"].rsplit(":", 1)[1])
                for k in ("snd_cwnd", "ssthresh", "srtt"):
                    ev[k] = int(ev[k])
                ev["snd_nxt"] = int(ev["snd_nxt"], 16)
                ev["snd_una"] = int(ev["snd_una"], 16)
                out.append(ev)
        return out

    def fetch(self, server_ip, port, size, source_ip="10.77.1.2", timeout=WAIT_S):
        """One connection from the client namespace: send the size, read it all. Returns the
        client's local port."""
        code = ("import socket,sys\n"
                "s=socket.socket(); s.bind((%r,0)); s.connect((%r,%d))\n"
                "print(s.getsockname()[1], flush=True)\n"
                "s.sendall(b'%d\\n'); n=0\n"
                "while True:\n"
                "    d=s.recv(1<<16)\n"
                "    if not d: break\n"
                "    n+=len(d)\n"
                "assert n==%d, n\n" % (source_ip, server_ip, port, size, size))
        r = subprocess.run(self.in_cli(["/usr/bin/python3", "-c", code]), capture_output=True,
                           text=True, timeout=timeout)
        assert r.returncode == 0, r.stderr
        return int(r.stdout.split()[0])



class DelayLab(Lab):
    """<name>s (NET.0.1) -- <name>d (a user-space delay line; a TBF towards the client) --
    <name>c (the `clients` addresses): one L2 segment with real round-trip times. Subclasses
    add what they need before the delay line starts (prepare())."""

    def __init__(self, name, net, clients, one_way_ms, delay_line):
        super().__init__(name)
        self.dly = name + "d"
        self.net = net
        self.clients = clients
        self.one_way_ms = one_way_ms
        self.delay_line = delay_line

    def close_ns(self):
        super().close_ns()
        sh("ip netns del %s" % self.dly, check=False)

    def bottleneck(self, mbit, limit_bytes):
        """The delay line's sends towards the client go through this qdisc."""
        sh("ip netns exec %s tc qdisc replace dev %sb root tbf rate %dmbit burst 3028 limit %d"
           % (self.dly, self.name, mbit, limit_bytes))

    def prepare(self):
        pass

    def __enter__(self):
        self.close_ns()
        for ns in (self.srv, self.cli, self.dly):
            sh("ip netns add %s" % ns)
            sh("ip -n %s link set lo up" % ns)
        n = self.name
        sh("ip link add %sv netns %s type veth peer name %sa netns %s" % (n, self.srv, n, self.dly))
        sh("ip link add %sb netns %s type veth peer name %sw netns %s" % (n, self.dly, n, self.cli))
        for ns, dev in ((self.srv, n + "v"), (self.dly, n + "a"), (self.dly, n + "b"),
                        (self.cli, n + "w")):
            sh("ip netns exec %s ethtool -K %s tx off tso off gso off gro off" % (ns, dev))
            sh("ip -n %s link set %s up" % (ns, dev))
        for dev in (n + "a", n + "b"):
            sh("ip -n %s link set %s promisc on" % (self.dly, dev))
        sh("ip -n %s addr add %s.0.1/24 dev %sv" % (self.srv, self.net, n))
        sh("ip -n %s route add %s.0.0/16 dev %sv" % (self.srv, self.net, n))
        for a in self.clients:
            sh("ip -n %s addr add %s dev %sw" % (self.cli, a, n))
        sh("ip netns exec %s sysctl -qw net.ipv4.tcp_congestion_control=reno" % self.srv)
        sh("ip netns exec %s sysctl -qw net.ipv4.tcp_no_metrics_save=1" % self.srv)
        if not os.path.ismount(TRACEFS):
            sh("mount -t tracefs nodev %s" % TRACEFS)
        os.makedirs(self.trace, exist_ok=True)
        self.prepare()
        self.start(["ip", "netns", "exec", self.dly, "/usr/bin/python3", self.delay_line,
                    n + "a", n + "b", str(self.one_way_ms)])
        return self

def first_flight(events, dport):
    """(cwnd, ssthresh, flight_bytes) at the first ACK of data of the connection from dport:
    tcp_probe runs before the ACK is processed, so this is the initial window's state."""
    for ev in events:
        if ev["dport"] == dport and ev["snd_nxt"] != ev["snd_una"]:
            return ev["snd_cwnd"], ev["ssthresh"], (ev["snd_nxt"] - ev["snd_una"]) % (1 << 32)
    raise AssertionError("no data ACK for port %d in %d tcp_probe events" % (dport, len(events)))


def cwnd_opt(wc, transfer_segments, b):
    """DESIGN.md Eq. 1-4 written out independently of libspand, with plain loops: the
    loss-free end (Eq. 3), Eq. 2 when no m fits, and the shift (Eq. 4)."""
    def s(m):  # b * sum_{i=m}^{wc} i
        return b * (m + wc) * (wc - m + 1) // 2
    fe = s((wc + 1) // 2) + 2 * wc + 1
    r = transfer_segments % fe
    if r == 0:
        return (wc + 1) // 2
    m = next((m for m in range(wc, 0, -1) if s(m) >= r), None)
    if m is None:
        m = next(m for m in range(wc + 1, 0, -1) if s(m) + 2 * wc + 1 >= r)
        m = min(m, wc)
    delta = (s(m) - r) // (b * (wc - m + 1))
    return m - delta


FRAME = MSS + 66  # bytes on the wire per full segment: Ethernet 14, IPv4 20, TCP 20 + 12 (timestamps)


def htb_class_rate(rate):
    """The pacing class rate the agent's HTB gives a socket paced at `rate` bytes/s, from the
    rules in spand_maps.h and the sock_ops program's pace_class(): the class is asked for 1.25
    times the kernel's rate; 8 bins per octave from 8 KiB/s, each bin at its lower edge
    (8 + m) * 2^(e - 3), the highest edge not above what is asked."""
    asked = min(rate + rate // 4, 0xffffffff)
    edges = [(8 + m) << (e - 3) for e in range(13, 32) for m in range(8)]
    return max([edges[0]] + [x for x in edges if x <= asked])


def segment_times(pcap, n_segments):
    """Capture times (s) of the first n_segments distinct data segments in `pcap`."""
    out = sh("tshark -r %s -Y 'tcp.len>0' -T fields -e frame.time_epoch -e tcp.seq" % pcap).stdout
    seen, times = set(), []
    for line in out.splitlines():
        t, seq = line.split()
        if seq not in seen:
            seen.add(seq)
            times.append(float(t))
    return times[:n_segments]


def window_timing(times, class_rate):
    """(span_s, ideal_s, gaps, longest_burst) of a first window sent through an HTB class of
    `class_rate`: a full bucket (4 frames) leaves at once and every further frame waits for its
    tokens; a burst is a run of segments less than a quarter frame time apart."""
    frame_s = FRAME / class_rate
    gaps = [b - a for a, b in zip(times, times[1:])]
    burst = run = 1
    for g in gaps:
        run = run + 1 if g < 0.25 * frame_s else 1
        burst = max(burst, run)
    return times[-1] - times[0], (len(times) - 4) * frame_s, gaps, burst
