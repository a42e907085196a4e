#!/usr/bin/env python3
"""spand's benefit lab: the whole loop (live mirror -> gateway -> Redis -> estimate service ->
agent -> kernel) against Linux's own senders, on one machine, in network namespaces.

usage: sudo python3 tests/lab/benefit/run.py SCENARIO.toml [--build DIR] [--out DIR] [--smoke]
       sudo python3 tests/lab/benefit/run.py --cleanup

Topology (names start with "sb-"; addresses fixed, see README.md next to this file):

  sb-srv  s0 10.0.0.1 ----- r0 \\                      /-- d0  sb-dly  d1 ----- c0  sb-cli
          m1 (mirror) ----- m0  sb-rtr  r1 [TBF] -----                             10.1.1.10/.11
  sb-srv2 s0 10.0.2.1 ----- r2 /        (bottleneck)   (delay line, both ways)     10.1.2.10/.11
                                                                                   10.1.3.10/.11
                                                                                   10.1.9.10 cross

sb-srv holds redis-server, spand-gateway (live on m1, the tc mirror of r0 and r2, both
directions), its gRPC estimate service, spand-agent (BPF mode, HTB pacing on s0) and two server
processes: one in the agent's cgroup (the spand arm) and one in a cgroup the agent does not
manage (default, bbr, reno arms). sb-srv2 holds the reno server with
net.ipv4.tcp_slow_start_after_idle=0 (a per-namespace sysctl). Everything is removed at exit,
on Ctrl-C and on exceptions, and at start if an earlier run was killed (--cleanup does only that).

Exit status: 0 done (smoke: the loop works), 1 smoke check failed or the run failed, 2 usage,
77 this machine cannot run the lab (not root, a spand-agent of someone else is running).
"""
import argparse
import datetime
import fcntl
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.dirname(HERE)                      # tests/lab: delay_line.py
REPO = os.path.dirname(os.path.dirname(LAB))
sys.path.insert(0, HERE)
import analyze  # noqa: E402

PY = '/usr/bin/python3'
LOCK_PATH = '/tmp/spand-benefit-lab.lock'
NS_SRV, NS_SRV2, NS_RTR, NS_DLY, NS_CLI = 'sb-srv', 'sb-srv2', 'sb-rtr', 'sb-dly', 'sb-cli'
ALL_NS = (NS_SRV, NS_SRV2, NS_RTR, NS_DLY, NS_CLI)
CG_ROOT = '/sys/fs/cgroup/unified' if os.path.exists('/sys/fs/cgroup/unified/cgroup.procs') \
    else '/sys/fs/cgroup'
CG_SPAND = os.path.join(CG_ROOT, 'spand_bench_spand')
CG_PLAIN = os.path.join(CG_ROOT, 'spand_bench_plain')
# The lab's agent pins in a directory of its own: an agent elsewhere on the machine (the default
# /sys/fs/bpf/spand, an integration test's) neither shares nor detaches its program.
BPF_PINS = '/sys/fs/bpf/spand_lab'
SERVER, SERVER2 = '10.0.0.1', '10.0.2.1'
NETS = ('10.1.1', '10.1.2', '10.1.3')            # the measured client /24s
CLIENTS = [f'{n}.{h}' for n in NETS for h in (10, 11)]
CROSS_SRC = '10.1.9.10'                          # cross traffic's own /24
GRPC, GW_METRICS, AGENT_METRICS = '127.0.0.1:50051', '127.0.0.1:9108', '127.0.0.1:9464'
PORT_BULK, PORT_TELNET, PORT_UDP, PORT_SPAND0 = 8009, 8023, 9999, 9000

# arm -> (server namespace, cgroup, port, congestion control, persistent connections)
ARMS = {
    'default': (NS_SRV, CG_PLAIN, 8001, 'cubic', False),   # Linux: CUBIC, IW10
    'bbr': (NS_SRV, CG_PLAIN, 8002, 'bbr', False),
    'reno': (NS_SRV, CG_PLAIN, 8005, 'reno', False),
    'reno-ssr': (NS_SRV, CG_PLAIN, 8003, 'reno', True),     # persistent, slow start after idle
    'reno-nossr': (NS_SRV2, None, 8004, 'reno', True),      # persistent, cwnd kept over idle
    # Scalable TCP (Kelly 2003) as the agent's BPF congestion control, for every transfer of
    # the arm (IW10, slow start): the agent registers it (its [agent] scalable = true).
    'scalable': (NS_SRV, CG_PLAIN, 8006, 'spand_scalable', False),
    'spand': (NS_SRV, CG_SPAND, None, 'cubic', False),     # port per size: PORT_SPAND0 + index
}


def say(*a):
    print('lab:', *a, file=sys.stderr, flush=True)


def sh(cmd, check=True, timeout=60):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode:
        raise RuntimeError(f'{cmd}: exit {r.returncode}: {r.stderr.strip()}')
    return r.stdout


def in_ns(ns, argv):
    """nsenter, not `ip netns exec`: the latter remounts /sys and hides /sys/fs/cgroup and
    /sys/fs/bpf, which the agent and the cgroup'd servers need."""
    return ['nsenter', f'--net=/var/run/netns/{ns}'] + argv


class Proc:
    """A child process, its output in a file; stderr lines optionally time-stamped and kept."""

    def __init__(self, name, argv, log_path, cgroup=None, keep_lines=False, t0=None):
        self.name, self.argv, self.lines = name, argv, []
        self.t0 = t0 if t0 is not None else time.monotonic()

        def pre():
            os.setsid()  # our own session: Ctrl-C reaches us, and we stop children in order
            if cgroup:
                with open(os.path.join(cgroup, 'cgroup.procs'), 'w') as f:
                    f.write(str(os.getpid()))
        self.log = open(log_path, 'a')
        if keep_lines:
            self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.PIPE, text=True,
                                      preexec_fn=pre)
            threading.Thread(target=self._pump, daemon=True).start()
        else:
            self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                      preexec_fn=pre)

    def _pump(self):
        for line in self.p.stderr:
            t = time.monotonic()
            self.lines.append((t, line.rstrip('\n')))
            self.log.write('%.3f %s' % (t - self.t0, line))
            self.log.flush()

    def wait_line(self, pattern, timeout):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            while seen < len(self.lines):
                m = rx.search(self.lines[seen][1])
                seen += 1
                if m:
                    return m
            if self.p.poll() is not None:
                time.sleep(0.2)
                if seen >= len(self.lines):
                    break
            time.sleep(0.05)
        raise RuntimeError(f'{self.name}: no line matching {pattern!r} (exit {self.p.poll()}); '
                           f'see {self.log.name}')

    def stop(self, sig=signal.SIGTERM, wait_s=10):
        if self.p.poll() is None:
            try:
                self.p.send_signal(sig)
                self.p.wait(wait_s)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)
        self.log.close()
        return self.p.returncode


# ---------------------------------------------------------------------------------------------
# Cleanup: everything this lab creates has a fixed name, so a killed run's leftovers are found.

def other_agents(pins_only=False):
    """spand-agent processes that are not ours; with pins_only, those pinned at BPF_PINS (they
    would share our program). One running in our own server namespace is ours (left by a
    killed run); cleanup() ends it."""
    ours = set()
    for ns in ALL_NS:
        try:
            ours.add(os.stat(f'/var/run/netns/{ns}').st_ino)
        except OSError:
            pass
    found = []
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            try:
                comm = open(f'/proc/{pid}/comm').read().strip()
            except OSError:
                continue
            if comm == 'spand-agent':
                try:
                    if os.stat(f'/proc/{pid}/ns/net').st_ino in ours:
                        continue
                    argv = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\0')
                except OSError:
                    continue
                if pins_only and BPF_PINS.encode() not in argv:
                    continue
                found.append(int(pid))
    return found


def cleanup(procs=()):
    for p in reversed(list(procs)):
        try:
            p.stop()
        except Exception as err:  # keep cleaning
            say(f'stopping {p.name}: {err}')
    existing = sh('ip netns list', check=False)
    for ns in ALL_NS:
        if re.search(rf'^{re.escape(ns)}(\s|$)', existing, re.M):
            # Whatever still runs in our own namespaces was started by this lab.
            for pid in sh(f'ip netns pids {ns}', check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            time.sleep(0.2)
            sh(f'ip netns del {ns}', check=False)
    # An agent stopped by SIGTERM removes its pins; one killed leaves them (and the program
    # attached through the pinned link). Only ours can exist when no agent runs.
    if os.path.isdir(BPF_PINS) and not other_agents(pins_only=True):
        shutil.rmtree(BPF_PINS, ignore_errors=True)
    for cg in (CG_SPAND, CG_PLAIN):
        if os.path.isdir(cg):
            try:
                for pid in open(os.path.join(cg, 'cgroup.procs')).read().split():
                    os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
            for _ in range(20):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
    sh('rm -rf /var/run/dpdk/spandbench', check=False)


# ---------------------------------------------------------------------------------------------
# Topology

def topology(cfg):
    path = cfg['path']
    # The bbr arm and the agent's rule 12 (share_floor_cc) need BBR listed as available; the
    # agent reads the list when it starts. Best effort: a kernel without it leaves CUBIC.
    sh('modprobe tcp_bbr', check=False)
    for ns in ALL_NS:
        sh(f'ip netns add {ns}')
        sh(f'ip -n {ns} link set lo up')
    links = [(NS_SRV, 's0', NS_RTR, 'r0'), (NS_SRV2, 's0', NS_RTR, 'r2'),
             (NS_RTR, 'r1', NS_DLY, 'd0'), (NS_DLY, 'd1', NS_CLI, 'c0'),
             (NS_RTR, 'm0', NS_SRV, 'm1')]
    for a_ns, a, b_ns, b in links:
        sh(f'ip link add sbtmp0 type veth peer name sbtmp1')
        sh(f'ip link set sbtmp0 netns {a_ns} name {a}')
        sh(f'ip link set sbtmp1 netns {b_ns} name {b}')
        for ns, dev in ((a_ns, a), (b_ns, b)):
            # Real segments on the wire and in the capture: no TSO/GSO super-segments, no GRO.
            sh(f'ip netns exec {ns} ethtool -K {dev} tx off tso off gso off gro off')
            sh(f'ip -n {ns} link set {dev} up')
    for ns, dev in ((NS_DLY, 'd0'), (NS_DLY, 'd1'), (NS_SRV, 'm1')):
        sh(f'ip -n {ns} link set {dev} promisc on')
    sh(f'ip netns exec {NS_SRV} sysctl -qw net.ipv6.conf.m1.disable_ipv6=1', check=False)
    sh(f'ip -n {NS_SRV} addr add {SERVER}/24 dev s0')
    sh(f'ip -n {NS_SRV} route add default via 10.0.0.254')
    sh(f'ip -n {NS_SRV2} addr add {SERVER2}/24 dev s0')
    sh(f'ip -n {NS_SRV2} route add default via 10.0.2.254')
    sh(f'ip -n {NS_RTR} addr add 10.0.0.254/24 dev r0')
    sh(f'ip -n {NS_RTR} addr add 10.0.2.254/24 dev r2')
    for net in NETS + ('10.1.9',):
        sh(f'ip -n {NS_RTR} addr add {net}.1/24 dev r1')
    for addr in CLIENTS + [CROSS_SRC]:
        sh(f'ip -n {NS_CLI} addr add {addr}/24 dev c0')
    sh(f'ip -n {NS_CLI} route add default via 10.1.1.1')
    sh(f'ip netns exec {NS_RTR} sysctl -qw net.ipv4.ip_forward=1')
    for ns, ssai in ((NS_SRV, 1), (NS_SRV2, 0)):
        # No cached per-destination metrics: each connection starts from the kernel's defaults.
        sh(f'ip netns exec {ns} sysctl -qw net.ipv4.tcp_no_metrics_save=1')
        sh(f'ip netns exec {ns} sysctl -qw net.ipv4.tcp_slow_start_after_idle={ssai}')
    # The bottleneck toward the clients: TBF, drop-tail buffer of buffer_bytes.
    burst = int(path.get('burst_bytes', 3028))
    sh(f'ip netns exec {NS_RTR} tc qdisc add dev r1 root tbf rate {path["rate"]} '
       f'burst {burst} limit {int(path["buffer_bytes"])}')
    # Multi-bottleneck scenarios: a second bottleneck per client network after the shared one
    # (an access link), on the delay line's client-side port d1 (the frames the delay line
    # sends there go through its qdisc): HTB, one class per /24 with its rate, a drop-tail
    # buffer; other networks pass unshaped.
    access = cfg.get('access', {})
    if access:
        sh(f'ip netns exec {NS_DLY} tc qdisc add dev d1 root handle 1: htb default 99')
        sh(f'ip netns exec {NS_DLY} tc class add dev d1 parent 1: classid 1:99 htb rate 10gbit')
        for i, (net, a) in enumerate(sorted(access.items()), start=1):
            if net not in NETS:
                raise ValueError(f'[access] {net}: not a client network ({", ".join(NETS)})')
            sh(f'ip netns exec {NS_DLY} tc class add dev d1 parent 1: classid 1:{i} htb '
               f'rate {a["rate"]} ceil {a["rate"]}')
            sh(f'ip netns exec {NS_DLY} tc qdisc add dev d1 parent 1:{i} bfifo '
               f'limit {int(a["buffer_bytes"])}')
            sh(f'ip netns exec {NS_DLY} tc filter add dev d1 parent 1: protocol ip prio 1 u32 '
               f'match ip dst {net}.0/24 flowid 1:{i}')
    # The span port: both directions of both server links, mirrored to m0 (-> m1 in sb-srv).
    for dev in ('r0', 'r2'):
        sh(f'ip netns exec {NS_RTR} tc qdisc add dev {dev} clsact')
        for d in ('ingress', 'egress'):
            sh(f'ip netns exec {NS_RTR} tc filter add dev {dev} {d} protocol all u32 match u32 0 0 '
               f'action mirred egress mirror dev m0')
    os.makedirs(CG_SPAND, exist_ok=True)
    os.makedirs(CG_PLAIN, exist_ok=True)


def gateway_source_args(cfg, iface):
    """The gateway's live source, in one place. Today: DPDK's net_af_packet vdev (one timestamp
    per receive burst; framecnt=16384, the default 512 silently missed 30 % of frames). Once the
    gateway has its libpcap live source, capture = "pcap" gives `--interface IF` instead."""
    gw = cfg.get('gateway', {})
    if gw.get('capture', 'af_packet') == 'pcap':
        return [], ['--interface', iface]
    eal = ['-l', str(gw.get('lcore', 1)), '--no-huge', '-m', '512', '--no-pci',
           '--file-prefix', 'spandbench', '--log-level=lib.eal:warning',
           '--vdev', f'net_af_packet0,iface={iface},framecnt={gw.get("framecnt", 16384)}', '--']
    return eal, []


def spand_ports(cfg):
    return {size: PORT_SPAND0 + i for i, size in enumerate(sizes_of(cfg))}


def sizes_of(cfg):
    sizes = set(cfg['traffic']['sizes'])
    if 'friendliness' in cfg:
        sizes.add(cfg['friendliness']['size'])
    return sorted(sizes)


def start_services(cfg, build, out, t0):
    procs = []

    def start(name, argv, cgroup=None, keep=False):
        p = Proc(name, argv, os.path.join(out, name + '.log'), cgroup=cgroup, keep_lines=keep, t0=t0)
        procs.append(p)
        return p

    gw = cfg.get('gateway', {})
    agent_cfg = cfg.get('agent', {})
    start('redis', in_ns(NS_SRV, ['redis-server', '--port', '6379', '--bind', '127.0.0.1',
                                  '--save', '', '--appendonly', 'no', '--dir', out]))
    for _ in range(50):
        if sh(f'ip netns exec {NS_SRV} redis-cli ping', check=False).strip() == 'PONG':
            break
        time.sleep(0.1)
    else:
        raise RuntimeError('redis-server did not answer')
    eal, src = gateway_source_args(cfg, 'm1')
    gateway = start('gateway', in_ns(NS_SRV, [
        os.path.join(build, 'spand-gateway')] + eal + src + [
        '--redis', 'redis://127.0.0.1:6379', '--client-key-file', 'public',
        '--grpc-listen', GRPC, '--metrics-listen', GW_METRICS,
        '--samples-out', os.path.join(out, 'samples.jsonl'),
        '--flows-out', os.path.join(out, 'flows.jsonl'),
        '--inside', '10.0.0.0/16',
        '--flow-capacity', str(gw.get('flow_capacity', 1024)),
        '--closing-timeout-ms', str(gw.get('closing_timeout_ms', 2000))] +
        [str(x) for x in gw.get('extra_args', [])]), keep=True)
    # The service answers once its port is open.
    for _ in range(100):
        if f':{GRPC.split(":")[1]} ' in sh(f'ip netns exec {NS_SRV} ss -ltnH', check=False):
            break
        if gateway.p.poll() is not None:
            raise RuntimeError(f'spand-gateway exited {gateway.p.returncode}; see {out}/gateway.log')
        time.sleep(0.1)
    else:
        raise RuntimeError('the estimate service did not open its port')
    ports = spand_ports(cfg)
    argv = [os.path.join(build, 'agents/spand-agent/spand-agent'), '--mode', 'bpf',
            '--cgroup', CG_SPAND, '--pin-dir', BPF_PINS, '--server', GRPC,
            '--metrics', AGENT_METRICS]
    for size, port in ports.items():
        argv += ['-p', f'{port}:{size}:{agent_cfg.get("acked_per_ack", 1)}']
    for net in NETS:
        argv += ['-P', f'{net}.0/24']
    if agent_cfg.get('pace_htb', True):
        argv += ['--pace-device', 's0']
    scalable = 'scalable' in cfg['traffic']['arms']
    if agent_cfg.get('policy') or scalable:
        # [agent.policy]: the agent's [policy] table (deploy/config/agent.toml), as a file; the
        # scalable arm needs the agent to register spand_scalable ([agent] scalable).
        path = os.path.join(out, 'agent.toml')
        with open(path, 'w') as f:
            if scalable:
                f.write('[agent]\nscalable = true\n')
            f.write('[policy]\n')
            for k, v in agent_cfg.get('policy', {}).items():
                f.write(f'{k} = {json.dumps(v)}\n')
        argv += ['--config', path]
    argv += [str(x) for x in agent_cfg.get('extra_args', [])]
    agent = start('agent', in_ns(NS_SRV, argv), keep=True)
    time.sleep(1.0)
    if agent.p.poll() is not None:
        raise RuntimeError(f'spand-agent exited {agent.p.returncode}; see {out}/agent.log')
    # Servers: the spand arm in the agent's cgroup, the others in a cgroup it does not manage.
    # (spand_scalable exists only while the agent registers it: only when the arm runs.)
    plain = [f'{p}:{arm}:{cc}' for arm, (ns, cg, p, cc, _) in ARMS.items()
             if ns == NS_SRV and cg == CG_PLAIN and (arm != 'scalable' or scalable)]
    plain += [f'{PORT_BULK}:bulk:cubic']
    spand = [f'{port}:spand:{ARMS["spand"][3]}' for port in ports.values()]
    srv2 = [f'{ARMS["reno-nossr"][2]}:reno-nossr:reno']
    for name, ns, cg, specs in (('server_plain', NS_SRV, CG_PLAIN, plain),
                                ('server_spand', NS_SRV, CG_SPAND, spand),
                                ('server_srv2', NS_SRV2, None, srv2)):
        p = start(name, in_ns(ns, [PY, os.path.join(HERE, 'server.py'),
                                   os.path.join(out, name + '.jsonl')] + specs), cgroup=cg)
        deadline = time.monotonic() + 10
        while 'ready' not in open(p.log.name).read():
            if time.monotonic() > deadline or p.p.poll() is not None:
                raise RuntimeError(f'{name} did not start; see {p.log.name}')
            time.sleep(0.05)
    start('delay_line', ['ip', 'netns', 'exec', NS_DLY, PY, os.path.join(LAB, 'delay_line.py'),
                         'd0', 'd1', str(cfg['path']['delay_ms'])])
    return procs, gateway, agent


def start_cross(cfg, out, procs, t0):
    cross = cfg.get('cross', {})

    def start(name, argv):
        procs.append(Proc(name, argv, os.path.join(out, name + '.log'), t0=t0))

    if cross.get('telnet', 0):
        start('telnet_server', in_ns(NS_SRV, [PY, os.path.join(HERE, 'cross.py'), 'telnet-server',
                                              str(PORT_TELNET)]))
        time.sleep(0.5)
        start('telnet_client', in_ns(NS_CLI, [PY, os.path.join(HERE, 'cross.py'), 'telnet-client',
                                              SERVER, str(PORT_TELNET), CROSS_SRC,
                                              str(cross['telnet']),
                                              str(cross.get('telnet_gap_s', 0.5)), '1']))
    if 'udp_onoff' in cross:
        u = cross['udp_onoff']
        start('udp_sink', in_ns(NS_CLI, [PY, os.path.join(HERE, 'cross.py'), 'udp-sink',
                                         str(PORT_UDP)]))
        start('udp_onoff', in_ns(NS_SRV, [PY, os.path.join(HERE, 'cross.py'), 'udp-onoff',
                                          CROSS_SRC, str(PORT_UDP), str(u['rate_bps']),
                                          str(u.get('on_s', 1)), str(u.get('off_s', 2)), '2']))
    if cross.get('bulk', 0):
        for i in range(int(cross['bulk'])):
            start(f'bulk{i}', in_ns(NS_CLI, [PY, os.path.join(HERE, 'cross.py'), 'bulk', SERVER,
                                             str(PORT_BULK), CROSS_SRC]))
    if 'competing' in cross:
        c = cross['competing']
        start('competing', in_ns(NS_CLI, [
            PY, os.path.join(HERE, 'cross.py'), 'competing', SERVER, str(ARMS['default'][2]),
            ','.join(CLIENTS), str(c.get('flows', 2)), str(c.get('min_bytes', 10000)),
            str(c.get('max_bytes', 100000)), str(c.get('mean_gap_s', 2.0)), '3']))


# ---------------------------------------------------------------------------------------------
# Plans

def endpoint(cfg, arm, size):
    ns, _, port, _, persistent = ARMS[arm]
    if arm == 'spand':
        port = spand_ports(cfg)[size]
    return (SERVER2 if ns == NS_SRV2 else SERVER), port, persistent


def slot(cfg, rng, arm, size, src, jitter_ms, group=None):
    host, port, persistent = endpoint(cfg, arm, size)
    group = group or arm
    if cfg['traffic'].get('by_network'):  # multi-bottleneck: each client network apart
        group = f'{group}@{src.rsplit(".", 1)[0]}'
    return {'arm': arm, 'group': group, 'size': size, 'src': src, 'host': host,
            'port': port, 'persistent': persistent,
            'jitter_s': round(rng.uniform(0, jitter_ms / 1000), 4)}


def batches(cfg):
    """Every batch of the measurement: a list of (arm, group, size) started together."""
    t = cfg['traffic']
    out = []
    concs = t.get('concurrency', 1)
    concs = concs if isinstance(concs, list) else [concs]
    for _ in range(int(t.get('repeats', 0))):
        block = [[(arm, arm, size)] * conc for arm in t['arms'] for size in t['sizes']
                 for conc in concs]
        out.append(block)
    f = cfg.get('friendliness')
    if f:
        n, k = int(f['concurrency']), int(round(f['concurrency'] * f.get('spand_share', 0.5)))
        for _ in range(int(f['repeats'])):
            out.append([[('default', 'default/pure', f['size'])] * n,
                        [('default', 'default/mixed', f['size'])] * (n - k) +
                        [('spand', 'spand/mixed', f['size'])] * k])
    return out


def measure_plan(cfg, rng):
    """Rounds in blocks: each block holds every batch kind once, in random order, so the arms
    are interleaved and see the same path conditions."""
    t = cfg['traffic']
    lo, hi = t.get('idle_s', [0.3, 0.8])
    rounds = []
    for block in batches(cfg):
        rng.shuffle(block)
        for batch in block:
            off = rng.randrange(len(CLIENTS))
            slots = [slot(cfg, rng, arm, size, CLIENTS[(off + i) % len(CLIENTS)],
                          t.get('jitter_ms', 20), group) for i, (arm, group, size) in enumerate(batch)]
            rng.shuffle(slots)
            rounds.append({'round': len(rounds), 'phase': 'measure',
                           'idle_s': round(rng.uniform(lo, hi), 3), 'slots': slots})
    return rounds


def prime_rounds(cfg, rng):
    """One connection per source (two where batches are larger) for every persistent arm, so the
    measured requests run on connections that already exist (the P-HTTP comparison)."""
    arms = [a for a in cfg['traffic']['arms'] if ARMS[a][4]]
    concs = cfg['traffic'].get('concurrency', 1)
    per_src = math.ceil(max(concs if isinstance(concs, list) else [concs]) / len(CLIENTS))
    rounds = []
    for arm in arms:
        slots = [slot(cfg, rng, arm, 10000, src, 0) for src in CLIENTS for _ in range(per_src)]
        rounds.append({'round': -1, 'phase': 'prime', 'idle_s': 0.2, 'slots': slots})
    return rounds


def warmup_rounds(cfg, rng, n):
    # Both the default arm and the spand arm: before the agent applies anything the spand arm is
    # default TCP too, and its connections are the ones the agent's program sees (its cgroup),
    # so they give the agent its own path readings (ACK trains, delivery rate).
    # Every size's port (the agent applies per port), but 100 KB at most per transfer: the
    # warm-up fills the estimate window, and eight 1 MB transfers on Scenario 3's path (10-18 s
    # each) outlast the client's 120 s.
    sizes = cfg['traffic']['sizes']
    arms = ['default', 'spand'] if 'spand' in cfg['traffic']['arms'] else ['default']
    rounds = []
    for _ in range(n):
        s = slot(cfg, rng, rng.choice(arms), rng.choice(sizes), rng.choice(CLIENTS), 0)
        s['size'] = min(s['size'], 100000)
        rounds.append({'round': -1, 'phase': 'warmup', 'idle_s': round(rng.uniform(0.1, 0.3), 3),
                       'slots': [s]})
    return rounds


def start_path_change(cfg, t_first, results):
    """[change]: after_s seconds into the measurement, the shared bottleneck's rate (and
    buffer) change; the agent's `applied` lines after it show how soon spand follows."""
    ch = cfg.get('change')
    if not ch:
        return None
    path = cfg['path']

    def run():
        time.sleep(float(ch['after_s']))
        burst = int(path.get('burst_bytes', 3028))
        limit = int(ch.get('buffer_bytes', path['buffer_bytes']))
        sh(f'ip netns exec {NS_RTR} tc qdisc change dev r1 root tbf rate {ch["rate"]} '
           f'burst {burst} limit {limit}')
        results['path_changed_at_s'] = round(time.monotonic() - t_first, 3)
        say(f'path changed: {path["rate"]} -> {ch["rate"]}, buffer {limit} B')
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def label_by_change(cfg, out):
    """[change] runs: each measured transfer's group gets the time since the change it started
    in (@before, @0-30s, @30s+; the analysis compares every arm with default of the same label).
    The measure client's start_s counts from the start of the measurement, as after_s does."""
    ch = cfg.get('change')
    path = os.path.join(out, 'transfers.jsonl')
    if not ch or not os.path.exists(path):
        return
    after = float(ch['after_s'])
    lines = []
    for line in open(path):
        t = json.loads(line)
        if t.get('phase') == 'measure' and '@' not in t['group']:
            dt = t['start_s'] - after
            t['group'] += '@before' if dt < 0 else '@0-30s' if dt < 30 else '@30s+'
        lines.append(json.dumps(t) + '\n')
    with open(path, 'w') as f:
        f.writelines(lines)


def run_client(out, name, rounds, timeout_s=30, wait_s=None):
    plan = os.path.join(out, name + '.plan.json')
    json.dump({'timeout_s': timeout_s, 'rounds': rounds}, open(plan, 'w'))
    r = subprocess.run(in_ns(NS_CLI, [PY, os.path.join(HERE, 'client.py'), plan,
                                      os.path.join(out, 'transfers.jsonl')]),
                       timeout=wait_s, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f'client {name}: exit {r.returncode}: {r.stderr[-2000:]}')


# ---------------------------------------------------------------------------------------------
# Observations of the loop

def service_get(build, size):
    """What the service says for each measured /24 at one transfer size (`spandctl --json get`):
    the parsed answer, or {'error': ...} when it is not JSON."""
    r = subprocess.run(in_ns(NS_SRV, [os.path.join(build, 'tools/spandctl'), '--server', GRPC,
                                      '--json', 'get'] + [f'{n}.10' for n in NETS] +
                             ['--bytes', str(size), '--mss', '1448']),
                       capture_output=True, text=True, timeout=20)
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        return {'error': (r.stdout + r.stderr).strip()[-500:]}


def estimates(cfg, build):
    """What the service says for each measured /24, for each spand size (cwnd_opt)."""
    return {size: service_get(build, size) for size in sizes_of(cfg)}


def applied_lines(agent, t_first):
    out = []
    for t, line in list(agent.lines):
        m = re.search(r'applied port=(\d+) prefix=(\S+) init_cwnd=(\d+) ssthresh=(\S+) '
                      r'pacing_Bps=(\d+) syn_rto_ms=(\d+)(?: cwnd=(\d+))?', line)
        if m:
            out.append({'t_s': round(t - t_first, 3), 'port': int(m.group(1)), 'prefix': m.group(2),
                        'init_cwnd': int(m.group(3)), 'ssthresh': m.group(4),
                        'pacing_Bps': int(m.group(5)), 'syn_rto_ms': int(m.group(6)),
                        # the cwnd set (above init_cwnd when it raises the kernel's pacing)
                        'cwnd': int(m.group(7) or m.group(3))})
    return out


def nstat():
    vals = {}
    for line in sh(f'ip netns exec {NS_SRV} nstat -asz', check=False).splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            vals[parts[0]] = int(parts[1])
    return vals


NSTAT_KEYS = ('TcpOutSegs', 'TcpRetransSegs', 'TcpExtTCPDSACKRecv', 'TcpExtTCPDSACKRecvSegs',
              'TcpExtTCPDSACKOfoRecv', 'TcpExtTCPFastRetrans', 'TcpExtTCPSlowStartRetrans',
              'TcpExtTCPTimeouts', 'TcpExtTCPLossProbes', 'TcpExtTCPSpuriousRTOs',
              'TcpExtTCPSACKReorder', 'TcpExtTCPTSReorder', 'TcpExtTCPRenoReorder',
              'TcpExtTCPLostRetransmit', 'TcpExtTCPDSACKUndo', 'TcpExtTCPLossUndo')


def scrape(addr):
    return sh(f'ip netns exec {NS_SRV} curl -s --max-time 5 http://{addr}/metrics', check=False)


def metric_values(text, names):
    out = {}
    for line in text.splitlines():
        if line.startswith('#'):
            continue
        for n in names:
            if line.startswith(n):
                out[line.rsplit(' ', 1)[0]] = float(line.rsplit(' ', 1)[1])
    return out


def path_rtt(out):
    """The true round trip from the clients' side: TCP connect times (SYN to SYN-ACK, small
    frames) of every transfer that opened a connection; the minimum is the propagation RTT."""
    xs = []
    for line in open(os.path.join(out, 'transfers.jsonl')):
        t = json.loads(line)
        if t.get('ok') and not t.get('reused') and t.get('connect_s'):
            xs.append(t['connect_s'] * 1e3)
    xs.sort()
    return {'n': len(xs), 'min_ms': xs[0], 'median_ms': xs[len(xs) // 2]} if xs else {}


def gateway_samples(out, t_first_wall):
    """RTT and W_c samples the gateway wrote, per prefix: how many RTT samples were 0 us, and
    the W_c samples' spread."""
    path = os.path.join(out, 'samples.jsonl')
    res = {}
    if not os.path.exists(path):
        return res
    for line in open(path):
        try:
            s = json.loads(line)
        except json.JSONDecodeError:
            continue
        if s.get('prefix', '').rsplit('.', 1)[0] + '.0/24' not in [n + '.0/24' for n in NETS] and \
                s.get('prefix') not in [n + '.0/24' for n in NETS]:
            continue
        p = res.setdefault(s['prefix'], {'rtt_us': [], 'wc': [], 'wc_reasons': {}, 'decrease': 0})
        if s['kind'] == 'rtt':
            p['rtt_us'].append(s['rtt_us'])
        elif s['kind'] == 'wc':
            p['wc'].append(s['wc_segments'])
            p['wc_reasons'][s['reason']] = p['wc_reasons'].get(s['reason'], 0) + 1
        else:
            p['decrease'] += 1
    summary = {}
    for prefix, p in sorted(res.items()):
        rtt = sorted(p['rtt_us'])
        wc = sorted(p['wc'])
        summary[prefix] = {
            'rtt_samples': len(rtt), 'rtt_zero': sum(1 for x in rtt if x == 0),
            'rtt_below_1ms': sum(1 for x in rtt if x < 1000),
            'rtt_median_ms': rtt[len(rtt) // 2] / 1e3 if rtt else None,
            'rtt_p10_ms': rtt[len(rtt) // 10] / 1e3 if rtt else None,
            'rtt_mean_ms': sum(rtt) / len(rtt) / 1e3 if rtt else None,
            'wc_samples': len(wc), 'wc_mean': sum(wc) / len(wc) if wc else None,
            'wc_median': wc[len(wc) // 2] if wc else None,
            'wc_min': wc[0] if wc else None, 'wc_max': wc[-1] if wc else None,
            'wc_reasons': p['wc_reasons'], 'decrease_samples': p['decrease']}
    return summary


def join_server_logs(out):
    """Adds the server's view (initial cwnd at accept, retransmissions, DSACKs) to transfers."""
    accept, close = {}, {}
    for name in ('server_plain', 'server_spand', 'server_srv2'):
        path = os.path.join(out, name + '.jsonl')
        if not os.path.exists(path):
            continue
        for line in open(path):
            e = json.loads(line)
            # A client port is reused across server ports: the server port is part of the key.
            key = (e.get('src'), e.get('sport'), e.get('port'))
            (accept if e['ev'] == 'accept' else close if e['ev'] == 'close' else {})[key] = e
    rows = []
    path = os.path.join(out, 'transfers.jsonl')
    for line in open(path):
        t = json.loads(line)
        key = (t['src'], t.get('sport'), t['port'])
        for k in ('init_cwnd', 'init_ssthresh', 'cc', 'total_retrans', 'dsack_dups', 'reord_seen',
                  'min_rtt_us', 'rtt_us', 'bytes_retrans', 'data_segs_out', 'cwnd', 'ssthresh'):
            t.pop(k, None)  # a second join starts afresh
        if key in accept:
            a = accept[key]
            t.update(init_cwnd=a['init_cwnd'], init_ssthresh=a['init_ssthresh'], cc=a['cc'])
        if key in close and not t.get('reused') and close[key].get('requests') == 1:
            c = close[key]
            t.update({k: c[k] for k in ('total_retrans', 'dsack_dups', 'reord_seen', 'min_rtt_us',
                                        'rtt_us', 'bytes_retrans', 'data_segs_out', 'cwnd',
                                        'ssthresh') if k in c})
        rows.append(t)
    with open(path, 'w') as f:
        for t in rows:
            f.write(json.dumps(t) + '\n')


def machine():
    cpu = ''
    for line in open('/proc/cpuinfo'):
        if line.startswith('model name'):
            cpu = line.split(':', 1)[1].strip()
            break
    commit = sh(f'git -C {REPO} rev-parse HEAD', check=False).strip()
    dirty = bool(sh(f'git -C {REPO} status --porcelain --untracked-files=no', check=False).strip())
    return {'kernel': os.uname().release, 'cpu': cpu, 'cpus': os.cpu_count(),
            'loadavg_start': open('/proc/loadavg').read().split()[:3],
            'commit': commit + ('-dirty' if dirty else '')}


# ---------------------------------------------------------------------------------------------

def watch_interference(our_agent, t_first, results):
    """Another spand-agent started during the run (an integration test, say) shares the CPU
    (and, if it pins at BPF_PINS, our program): record when, so the run can be judged."""
    seen = results.setdefault('interference', [])

    def loop():
        while True:
            others = [p for p in other_agents() if p != our_agent]
            if others:
                seen.append({'t_s': round(time.monotonic() - t_first, 1), 'spand_agent_pids': others})
            time.sleep(2)
    threading.Thread(target=loop, daemon=True).start()


def watch_use_estimate(cfg, build, t_first, results, period_s=2.0):
    """The issue's target "a new /24 reaches USE_ESTIMATE within 60 s of live traffic", read
    over the whole run (the warm-up stops as soon as the agent applies, often before the
    service says USE_ESTIMATE): the service is asked every period_s from the first transfer
    on, and the first USE_ESTIMATE answer per measured /24 is kept (seconds from the first
    transfer; resolution period_s plus one spandctl call). Stops once every /24 has one."""
    first = {}
    results['use_estimate_s'] = {}
    want = {f'{n}.0/24' for n in NETS}
    size = min(sizes_of(cfg))

    def loop():
        while set(first) < want:
            try:
                snap = service_get(build, size)
            except (subprocess.TimeoutExpired, OSError):
                snap = []
            t = round(time.monotonic() - t_first, 1)
            for e in snap if isinstance(snap, list) else []:
                if (isinstance(e, dict) and e.get('verdict') == 'USE_ESTIMATE' and
                        e.get('prefix') not in first):
                    first[e.get('prefix')] = t
                    results['use_estimate_s'] = dict(first)  # one assignment: no torn read
            time.sleep(period_s)
    threading.Thread(target=loop, daemon=True).start()


def warm_up(cfg, out, agent, rng, max_s, t_first, build):
    """Default-arm traffic from every measured /24 until the agent applies an estimate for each
    of them on every spand port (USE_ESTIMATE from live traffic), or max_s. Returns per prefix
    the seconds from the first transfer to the agent's first `applied` line and to the service's
    first USE_ESTIMATE answer."""
    # The agent leaves transfers that IW10 sends in one round to the kernel (no_gain): only the
    # larger sizes' ports must see an `applied` line.
    ports = {port for size, port in spand_ports(cfg).items() if size > 10 * 1448}
    want = {f'{n}.0/24' for n in NETS}
    service_first = {}
    done = False
    while time.monotonic() - t_first < max_s:
        run_client(out, 'warmup', warmup_rounds(cfg, rng, 8), wait_s=120)
        lines = applied_lines(agent, t_first)
        have = {p for p in want if {l['port'] for l in lines if l['prefix'] == p} >= ports
                and (ports or p in service_first)}
        snap = estimates(cfg, build).get(sizes_of(cfg)[0], [])
        if isinstance(snap, list):
            for e in snap:
                if e.get('verdict') == 'USE_ESTIMATE' and e['prefix'] not in service_first:
                    service_first[e['prefix']] = round(time.monotonic() - t_first, 1)
        say(f'warmup {time.monotonic() - t_first:.0f} s: agent applied for {sorted(have)}; '
            f'service: ' + ', '.join(f"{e.get('prefix')} {e.get('verdict')} n={e.get('samples')}"
                                     for e in snap if isinstance(e, dict)))
        if have == want:
            done = True
            break
        if 'spand' not in cfg['traffic']['arms']:
            break               # no arm waits for the agent: one warm-up pass is enough
    lines = applied_lines(agent, t_first)
    first = {}
    for l in lines:
        first.setdefault(l['prefix'], l['t_s'])
    return {'reached': done, 'seconds_to_agent_applied': first,
            'seconds_to_service_use_estimate': service_first,
            'warmup_s': round(time.monotonic() - t_first, 1)}


def smoke_check(cfg, out, agent, t_first):
    """A few spand transfers from every measured /24: the window the kernel gave each (TCP_INFO
    at accept, what `ss -ti` shows, before any data is sent) must be the agent's applied one."""
    rng = random.Random(7)
    # A size the agent tunes (it leaves what IW10 sends in one round to the kernel).
    size = next((s for s in cfg['traffic']['sizes'] if s > 10 * 1448), cfg['traffic']['sizes'][-1])
    port = spand_ports(cfg)[size]
    rounds = [{'round': i, 'phase': 'smoke', 'idle_s': 0.3,
               'slots': [slot(cfg, rng, 'spand', size, src, 0)]}
              for i, src in enumerate(CLIENTS)]
    began = time.monotonic() - t_first
    run_client(out, 'smoke', rounds, wait_s=60)
    join_server_logs(out)
    # The windows a socket may have got: the one in effect when the smoke began and any the
    # agent applied while it ran (the smoke's own connections are samples too and can move an
    # estimate by a segment between one transfer and the next).
    allowed = {}
    for l in applied_lines(agent, t_first):
        if l['port'] != port:
            continue
        if l['t_s'] <= began:
            allowed[l['prefix']] = [l['cwnd']]
        else:
            seen = allowed.setdefault(l['prefix'], [])
            if l['cwnd'] not in seen:
                seen.append(l['cwnd'])
    ok = True
    for line in open(os.path.join(out, 'transfers.jsonl')):
        t = json.loads(line)
        if t.get('phase') != 'smoke':
            continue
        prefix = t['src'].rsplit('.', 1)[0] + '.0/24'
        want = allowed.get(prefix)
        good = t.get('ok') and want is not None and t.get('init_cwnd') in want
        ok &= bool(good)
        say(f"smoke: {t['src']} {size} B in {t.get('response_s')} s: kernel cwnd "
            f"{t.get('init_cwnd')} ssthresh {t.get('init_ssthresh')}, agent applied {want}: "
            f"{'ok' if good else 'MISMATCH'}")
    return ok


def main():
    # Debian's Python (tomllib, matplotlib from apt), whatever `python3` is first on PATH.
    if os.path.realpath(sys.executable) != os.path.realpath(PY) and os.access(PY, os.X_OK):
        os.execv(PY, [PY] + sys.argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('scenario', nargs='?')
    ap.add_argument('--build', default=os.path.join(REPO, 'build'))
    ap.add_argument('--out')
    ap.add_argument('--smoke', action='store_true', help='check the live loop end to end (<2 min)')
    ap.add_argument('--cleanup', action='store_true', help='remove leftovers of a killed run')
    ap.add_argument('--rejoin', metavar='OUTDIR', help='join the server logs of OUTDIR again and '
                    're-analyze it (no root needed)')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--repeats', type=int, help='override [traffic] (and [friendliness]) repeats')
    ap.add_argument('--arms', help='override [traffic] arms, comma-separated')
    ap.add_argument('--sizes', help='override [traffic] sizes (bytes), comma-separated')
    args = ap.parse_args()
    if args.rejoin:
        join_server_logs(args.rejoin)
        path = os.path.join(args.rejoin, 'results.json')
        results = json.load(open(path))
        results['summary'] = analyze.analyze(args.rejoin, results['scenario']['name'],
                                             results['scenario']['path'])
        json.dump(results, open(path, 'w'), indent=1, default=str)
        print(analyze.table(results['summary']))
        if results['summary'].get('by_start_order'):
            print(analyze.order_table(results['summary']))
        return 0
    if os.geteuid() != 0:
        say('needs root (namespaces, cgroups, BPF)')
        return 77
    # One lab at a time on a machine: a second run (or the integration suite's smoke run) would
    # remove the first one's namespaces at its start and kill its transfers. The lock is held
    # until exit; it is not the file an outer `flock` may hold, so wrapping a run in one is fine.
    lock = open(LOCK_PATH, 'a')
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say(f'another lab run holds {LOCK_PATH}; waiting for it')
        fcntl.flock(lock, fcntl.LOCK_EX)
    if args.cleanup:
        cleanup()
        return 0
    if not args.scenario:
        ap.print_usage()
        return 2
    cfg = tomllib.load(open(args.scenario, 'rb'))
    cfg.setdefault('name', os.path.splitext(os.path.basename(args.scenario))[0])
    if args.repeats is not None:
        cfg['traffic']['repeats'] = args.repeats
        if 'friendliness' in cfg:
            cfg['friendliness']['repeats'] = args.repeats
    if args.arms:
        cfg['traffic']['arms'] = args.arms.split(',')
    if args.sizes:
        cfg['traffic']['sizes'] = [int(x) for x in args.sizes.split(',')]
    unknown = set(cfg['traffic']['arms']) - set(ARMS)
    if unknown:
        say(f'unknown arms {sorted(unknown)}; known: {sorted(ARMS)}')
        return 2
    if args.smoke:
        cfg['traffic'].update(arms=['default', 'spand'], sizes=[30000], repeats=0)
        cfg.pop('friendliness', None)
        cfg['cross'] = {}
        cfg.setdefault('warmup', {})['max_s'] = min(cfg.get('warmup', {}).get('max_s', 90), 90)
    build = os.path.abspath(args.build)
    for b in ('spand-gateway', 'agents/spand-agent/spand-agent', 'tools/spandctl'):
        if not os.access(os.path.join(build, b), os.X_OK):
            say(f'{build}/{b} missing: build first (meson setup build && ninja -C build)')
            return 2
    if other_agents(pins_only=True):
        say(f'another spand-agent runs (pids {other_agents(pins_only=True)}): it would share '
            f'{BPF_PINS}')
        return 77
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime('%Y%m%dT%H%M%SZ')
    out = os.path.abspath(args.out or os.path.join('results', f'{cfg["name"]}-{stamp}'))
    os.makedirs(out, exist_ok=True)
    for f in ('transfers.jsonl', 'samples.jsonl', 'flows.jsonl'):
        if os.path.exists(os.path.join(out, f)):
            os.unlink(os.path.join(out, f))

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f'signal {signum}')
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    rng = random.Random(args.seed)
    results = {'scenario': cfg, 'date': datetime.datetime.now(datetime.timezone.utc).isoformat(),
               'machine': machine(), 'smoke': args.smoke}
    procs = []
    status = 1
    cleanup()  # an earlier run that was killed
    t0 = time.monotonic()
    try:
        topology(cfg)
        procs, gateway, agent = start_services(cfg, build, out, t0)
        results['path_rtt_configured_ms'] = 2 * cfg['path']['delay_ms']
        start_cross(cfg, out, procs, t0)
        t_first = time.monotonic()
        watch_interference(agent.p.pid, t_first, results)
        watch_use_estimate(cfg, build, t_first, results)
        results['warmup'] = warm_up(cfg, out, agent, rng, cfg.get('warmup', {}).get('max_s', 120),
                                    t_first, build)
        results['estimates_after_warmup'] = estimates(cfg, build)
        if args.smoke:
            ok = results['warmup']['reached'] and smoke_check(cfg, out, agent, t_first)
            status = 0 if ok else 1
            say('smoke: ' + ('the live loop works' if ok else 'FAILED'))
        else:
            plan = prime_rounds(cfg, rng) + measure_plan(cfg, rng)
            before = nstat()
            t_meas = time.monotonic()
            say(f'measuring: {len(plan)} rounds')
            changer = start_path_change(cfg, t_first, results)
            run_client(out, 'measure', plan, wait_s=3600)
            if changer:
                changer.join()
            results['measure_s'] = round(time.monotonic() - t_meas, 1)
            after = nstat()
            results['nstat_server_delta'] = {k: after.get(k, 0) - before.get(k, 0)
                                             for k in NSTAT_KEYS}
            results['estimates_at_end'] = estimates(cfg, build)
            status = 0
        # Another spand-agent pinning at BPF_PINS detaches ours (its start-up cleanup detaches
        # whatever link is pinned there): then the spand arm silently ran with kernel defaults.
        # Say so.
        attached = 'spand_sockops' in sh(f'bpftool cgroup show {CG_SPAND}', check=False)
        results['program_attached_at_end'] = attached
        if not attached:
            say('WARNING: the agent\'s sock_ops program is no longer attached to its cgroup '
                '(another spand-agent started?): the spand arm is not valid')
            if args.smoke:
                status = 1
        results['agent_applied'] = applied_lines(agent, t_first)
        results['gateway_metrics'] = metric_values(scrape(GW_METRICS), (
            'spand_packets', 'spand_drops', 'spand_connections', 'spand_samples',
            'spand_estimates', 'spand_bytes', 'spand_redis_flush_errors'))
        results['agent_metrics'] = metric_values(scrape(AGENT_METRICS), (
            'spand_agent_estimates', 'spand_agent_program_events_total', 'spand_agent_grpc'))
        results['mirror_counters'] = sh(f'ip -n {NS_SRV} -s link show m1', check=False)
        results['bottleneck_qdisc'] = sh(f'ip netns exec {NS_RTR} tc -s qdisc show dev r1',
                                         check=False)
        results['loadavg_end'] = open('/proc/loadavg').read().split()[:3]
    except KeyboardInterrupt as err:
        say(f'interrupted ({err}): cleaning up')
        status = 130
    except Exception as err:
        say(f'failed: {err}')
        results['error'] = str(err)
        status = 1
    finally:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not stop the cleanup
        cleanup(procs)
    if os.path.exists(os.path.join(out, 'gateway.log')):
        results['gateway_exit_summary'] = open(os.path.join(out, 'gateway.log')).read()[-4000:]
    if os.path.exists(os.path.join(out, 'transfers.jsonl')):
        label_by_change(cfg, out)
        join_server_logs(out)
        results['gateway_samples'] = gateway_samples(out, None)
        results['path_rtt_tcp_connect'] = path_rtt(out)
        if not args.smoke:
            try:
                results['summary'] = analyze.analyze(out, cfg['name'], cfg['path'])
            except Exception as err:  # keep the rest of the results
                say(f'analysis failed: {err}')
    results.setdefault('use_estimate_s', {})
    json.dump(results, open(os.path.join(out, 'results.json'), 'w'), indent=1, default=str)
    if results['use_estimate_s']:
        say('USE_ESTIMATE from live traffic, seconds after the first transfer: ' +
            ', '.join(f'{p} {t}' for p, t in sorted(results['use_estimate_s'].items())))
    if 'summary' in results:
        print(analyze.table(results['summary']))
        if results['summary'].get('by_start_order'):
            print(analyze.order_table(results['summary']))
    say(f'results in {out}/results.json (exit {status})')
    return status


if __name__ == '__main__':
    sys.exit(main())
