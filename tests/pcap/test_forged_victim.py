"""Forged flows merged into a victim /24's legitimate traffic leave its estimate as it was (issue
12, "How it is checked"). The victim is 10.170.3.0/24 of pcaps/lab/reno_3nets.pcap (two clients,
89 W_c samples: 75 of the paper's and 14 first losses in slow start, as many as the kernel trace
has; 944 RTT samples, USE_ESTIMATE); each forgery is built here, packet by packet,
stamped inside the capture's 12 s and merged in by time:

  seq_jump     six connections from six victim addresses, each a handshake and two server
               segments the second of which lies 7.2 MB further on (issue 12: W_c 5,255)
  mid_stream   six pairs of one server data segment and one client ACK (issue 12: W_c 2)
  ack_flood    200,000 lone ACKs from random victim addresses and ports, run with
               --flow-capacity 64 (issue 12: real connections split into pieces, W_c 1-2)
  one_client   six complete, well-formed connections from one victim address whose server
               sends 400 segments in slow start: sound samples, nothing for the tracker to
               refuse; only the per-prefix aggregation (one client, one vote) stands in the way

For each the victim's --prefix-summary line (W_c median, RTT median, verdict) is compared with
the one of the legitimate traffic alone. Equal, except where the forged flows add samples the
rules keep on purpose: handshake RTTs of forged connections (the RTT median may move by as many
ranks as forged samples, checked against the legitimate samples' order statistics) and
one_client's W_c, a third client's mean (the lower median of three means lies between the two
honest clients' means).

By hand, the numbers for each capture (old and new gateways side by side):
    python3 tests/pcap/test_forged_victim.py BUILD/spand-gateway [OLD_BUILD/spand-gateway ...]
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

import pytest

GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEGIT = os.path.join(ROOT, 'pcaps', 'lab', 'reno_3nets.pcap')
VICTIM = '10.170.3'
SERVER, SPORT = '10.170.0.1', 5001
T0 = 1795315502.0  # inside the capture (1795315501.8 to 1795315514.1)
MSS = 1448


def _ip(a):
    return bytes(int(x) for x in a.split('.'))


def _csum(b):
    if len(b) % 2:
        b += b'\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def frame(src, dst, sport, dport, flags, seq, ack, payload=0):
    """Ethernet + IPv4 + TCP (window 65535, no options), checksums filled in."""
    fl = sum({'F': 1, 'S': 2, 'R': 4, 'P': 8, 'A': 16}[c] for c in flags)
    data = b'x' * payload
    tcp = struct.pack('!HHIIBBHHH', sport, dport, seq & 0xffffffff, ack & 0xffffffff, 5 << 4, fl,
                      65535, 0, 0)
    pseudo = _ip(src) + _ip(dst) + struct.pack('!BBH', 0, 6, len(tcp) + len(data))
    tcp = tcp[:16] + struct.pack('!H', _csum(pseudo + tcp + data)) + tcp[18:]
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(tcp) + len(data), 0, 0x4000, 64, 6, 0,
                     _ip(src), _ip(dst))
    ip = ip[:10] + struct.pack('!H', _csum(ip)) + ip[12:]
    return b'\x02\0\0\0\0\x02' + b'\x02\0\0\0\0\x01' + b'\x08\x00' + ip + tcp + data


class Forgery:
    def __init__(self):
        self.pkts = []  # (time, frame)

    def add(self, t, *args, **kw):
        self.pkts.append((t, frame(*args, **kw)))


def seq_jump(f):
    for i in range(6):
        cli, port, t = f'{VICTIM}.{50 + i}', 40000 + i, T0 + i
        c, s = 1000, 50000
        f.add(t, cli, SERVER, port, SPORT, 'S', c, 0)
        f.add(t + 0.001, SERVER, cli, SPORT, port, 'SA', s, c + 1)
        f.add(t + 0.002, cli, SERVER, port, SPORT, 'A', c + 1, s + 1)
        f.add(t + 0.003, SERVER, cli, SPORT, port, 'A', s + 1, c + 1, payload=1400)
        f.add(t + 0.004, SERVER, cli, SPORT, port, 'FA', s + 1 + 7_200_000, c + 1, payload=1400)
        f.add(t + 0.005, cli, SERVER, port, SPORT, 'FA', c + 1, s + 1 + 7_200_000 + 1401)


def mid_stream(f):
    for i in range(6):
        cli, port, t = f'{VICTIM}.{50 + i}', 41000 + i, T0 + i
        f.add(t, SERVER, cli, SPORT, port, 'A', 9000, 5000, payload=1400)
        f.add(t + 0.02, cli, SERVER, port, SPORT, 'A', 5000, 10400)


def ack_flood(f, n=200_000):
    rnd = random.Random(12)
    for i in range(n):
        cli = f'{VICTIM}.{rnd.randrange(1, 255)}'
        f.add(T0 + 11.0 * i / n, cli, SERVER, rnd.randrange(1024, 65536), SPORT, 'A',
              rnd.getrandbits(32), rnd.getrandbits(32))


def one_client(f):
    """Six connections from one address; the server sends 400 segments in slow start (10, 20,
    40, ... per round of 40 ms), each round acked in full, then both sides close."""
    cli = f'{VICTIM}.66'
    for i in range(6):
        port, t = 42000 + i, T0 + 1.5 * i
        c, s = 7000, 900_000
        f.add(t, cli, SERVER, port, SPORT, 'S', c, 0)
        f.add(t + 0.040, SERVER, cli, SPORT, port, 'SA', s, c + 1)
        f.add(t + 0.080, cli, SERVER, port, SPORT, 'PA', c + 1, s + 1, payload=100)
        t += 0.080
        sent, cwnd, c = 0, 10, c + 101
        while sent < 400:
            burst = min(cwnd, 400 - sent)
            for k in range(burst):
                f.add(t + 0.0001 * k, SERVER, cli, SPORT, port, 'A', s + 1 + (sent + k) * MSS, c,
                      payload=MSS)
            t += 0.040
            for k in range(0, burst, 2):  # delayed ACKs, every second segment
                f.add(t + 0.0001 * k, cli, SERVER, port, SPORT, 'A', c,
                      s + 1 + (sent + min(k + 2, burst)) * MSS)
            sent += burst
            cwnd *= 2
            t += 0.001
        end = s + 1 + sent * MSS
        f.add(t, SERVER, cli, SPORT, port, 'FA', end, c)
        f.add(t + 0.040, cli, SERVER, port, SPORT, 'FA', c, end + 1)
        f.add(t + 0.080, SERVER, cli, SPORT, port, 'A', end + 1, c + 1)


FORGERIES = {'seq_jump': (seq_jump, []), 'mid_stream': (mid_stream, []),
             'ack_flood': (ack_flood, ['--flow-capacity', '64']), 'one_client': (one_client, [])}


def read_pcap(path):
    with open(path, 'rb') as fh:
        head = fh.read(24)
        magic, = struct.unpack('<I', head[:4])
        assert magic == 0xa1b2c3d4, 'microsecond little-endian pcap expected'
        assert struct.unpack('<I', head[20:24])[0] == 1, 'Ethernet expected'
        out = []
        while True:
            rec = fh.read(16)
            if len(rec) < 16:
                return head, out
            s, us, incl, orig = struct.unpack('<IIII', rec)
            out.append((s + us / 1e6, rec + fh.read(incl)))


def merged(path, forgery):
    """The legitimate capture with the forgery's frames merged in by time."""
    head, legit = read_pcap(LEGIT)
    forged = []
    for t, fr in forgery.pkts:
        s, us = int(t), int(round((t - int(t)) * 1e6))
        if us == 1_000_000:
            s, us = s + 1, 0
        forged.append((s + us / 1e6, struct.pack('<IIII', s, us, len(fr), len(fr)) + fr))
    forged.sort(key=lambda x: x[0])
    out, i, j = [], 0, 0
    while i < len(legit) or j < len(forged):  # stable: legit first at equal times
        if j == len(forged) or (i < len(legit) and legit[i][0] <= forged[j][0]):
            out.append(legit[i][1])
            i += 1
        else:
            out.append(forged[j][1])
            j += 1
    with open(path, 'wb') as fh:
        fh.write(head)
        fh.writelines(out)


def run(gateway, pcap, extra=()):
    """The victim's --prefix-summary line as a dict, and its samples from --samples-out."""
    with tempfile.NamedTemporaryFile(suffix='.jsonl') as samples:
        p = subprocess.run([gateway, '--pcap', pcap, '--prefix-summary', '--samples-out',
                            samples.name, *extra], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        rows = [json.loads(line) for line in open(samples.name)]
    lines = p.stdout.splitlines()
    names = lines[0].split()
    victim = {}
    for line in lines[1:]:
        cols = line.split()
        if cols[0] == VICTIM + '.0/24':
            victim = dict(zip(names, cols))
    mine = [r for r in rows if r.get('prefix') == VICTIM + '.0/24']
    return victim, mine


_legit_cache = {}


def legit(gateway):
    if gateway not in _legit_cache:
        _legit_cache[gateway] = run(gateway, LEGIT)
    return _legit_cache[gateway]


def forged(gateway, name, tmp):
    make, extra = FORGERIES[name]
    f = Forgery()
    make(f)
    path = os.path.join(tmp, name + '.pcap')
    merged(path, f)
    return run(gateway, path, extra)


def test_legitimate_victim_has_an_estimate():
    # The premise: without forgery the victim is USE_ESTIMATE from two clients (so that every
    # comparison below is against a live estimate, not two SLOW_STARTs).
    v, _ = legit(GATEWAY)
    assert v['verdict'] == 'USE_ESTIMATE' and v['clients'] == '2' and v['wc_n'] == str(75 + 14), v


@pytest.mark.parametrize('name', ['seq_jump', 'mid_stream', 'ack_flood'])
def test_forged_flows_give_no_wc_and_leave_the_estimate(name, tmp_path):
    want, want_rows = legit(GATEWAY)
    got, got_rows = forged(GATEWAY, name, str(tmp_path))
    for col in ('wc_n', 'wc_mean', 'wc_median', 'clients', 'verdict'):
        assert got[col] == want[col], (name, col, got, want)
    # RTT: the forged handshakes are sound RTT samples (seq_jump: six, of about 1 ms). A median
    # of n samples with f added moves at most f ranks: between the legitimate samples at ranks
    # n/2 - f and n/2 + f, within the histogram's 25 % (gateway/estimates/README.md).
    legit_rtt = sorted(r['rtt_us'] for r in want_rows if r['kind'] == 'rtt')
    f = max(0, int(got['rtt_n']) - len(legit_rtt))
    if name == 'ack_flood':  # the flood may cost an RTT sample (one of 1,582 measured) and adds none
        assert f == 0 and int(got['rtt_n']) >= len(legit_rtt) - 5, got
    n = len(legit_rtt)
    lo, hi = legit_rtt[max(0, (n - 1) // 2 - f)] / 1000, legit_rtt[min(n - 1, n // 2 + f)] / 1000
    assert lo / 1.25 <= float(got['rtt_median_ms']) <= hi * 1.25, (name, got, lo, hi)
    if f == 0 and name != 'ack_flood':
        assert got['rtt_median_ms'] == want['rtt_median_ms'], (name, got, want)


def test_one_client_cannot_lift_the_wc(tmp_path):
    want, want_rows = legit(GATEWAY)
    got, got_rows = forged(GATEWAY, 'one_client', str(tmp_path))
    forged_wc = [r['wc_segments'] for r in got_rows
                 if r['kind'] == 'wc' and r['client'] == VICTIM + '.66']
    # The forgery works on the samples: six sound W_c samples far above the honest ones, which
    # move the mean of the samples (what the estimate was before the median).
    assert len(forged_wc) == 6 and min(forged_wc) > 100, forged_wc
    assert float(got['wc_mean']) > 2 * float(want['wc_mean']), (got, want)
    # It does not move the estimate beyond the honest clients: the lower median of three client
    # means (two honest, one forged) is the larger honest mean.
    by_client = {}
    for r in want_rows:
        if r['kind'] == 'wc':
            by_client.setdefault(r['client'], []).append(r['wc_segments'])
    honest = sorted(sum(v) / len(v) for v in by_client.values())
    assert len(honest) == 2
    assert abs(float(got['wc_median']) - honest[1]) < 0.005, (got, honest)
    assert got['verdict'] == want['verdict'] == 'USE_ESTIMATE'
    assert got['clients'] == '3'


if __name__ == '__main__':
    with tempfile.TemporaryDirectory() as d:
        cols = ('wc_n', 'wc_mean', 'wc_stddev', 'wc_median', 'rtt_n', 'rtt_median_ms', 'clients', 'verdict')
        for gw in sys.argv[1:]:
            v, _ = legit(gw)
            print(f'{gw}\n  {"legitimate":11s}', ' '.join(f'{c}={v.get(c, "-")}' for c in cols))
            for name in FORGERIES:
                v, _ = forged(gw, name, d)
                print(f'  {name:11s}', ' '.join(f'{c}={v.get(c, "-")}' for c in cols))
