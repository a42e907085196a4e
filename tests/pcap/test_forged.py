"""Forged captures (issue 12, items 3 and 4) leave a victim /24 without W_c samples: sequence
jumps (a handshake and two server segments, the second 7.2 MB further on) and mid-stream pairs
(one data segment, one ACK). Built with scapy; skipped when it is missing.

Also usable by hand to print what each capture yields:
    python3 tests/pcap/test_forged.py BUILD/spand-gateway
"""
import os
import subprocess
import sys
import tempfile

import pytest

GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')
SERVER = '203.0.113.10'


def _scapy():
    try:
        from scapy.all import IP, TCP, Ether, wrpcap  # noqa: F401
        return True
    except ImportError:
        return False


def seq_jump_capture(path, victim='198.51.100', conns=6):
    from scapy.all import IP, TCP, Ether, wrpcap
    pkts, t = [], 1_700_000_000.0
    for i in range(conns):
        cli, sport = f'{victim}.{10 + i}', 40000 + i
        c, s = 1000, 50000

        def add(src, dst, sp, dp, **kw):
            nonlocal t
            p = Ether() / IP(src=src, dst=dst) / TCP(sport=sp, dport=dp, **kw)
            p.time = t
            t += 0.001
            pkts.append(p)
        add(cli, SERVER, sport, 80, flags='S', seq=c)
        add(SERVER, cli, 80, sport, flags='SA', seq=s, ack=c + 1)
        add(cli, SERVER, sport, 80, flags='A', seq=c + 1, ack=s + 1)
        add(SERVER, cli, 80, sport, flags='A', seq=s + 1, ack=c + 1)
        pkts[-1] = pkts[-1] / (b'x' * 1400)
        add(SERVER, cli, 80, sport, flags='FA', seq=s + 1 + 7_200_000, ack=c + 1)
        pkts[-1] = pkts[-1] / (b'x' * 1400)
        add(cli, SERVER, sport, 80, flags='FA', seq=c + 1, ack=s + 1 + 7_200_000 + 1401)
    wrpcap(path, pkts)


def mid_stream_capture(path, victim='198.51.100', conns=6):
    from scapy.all import IP, TCP, Ether, wrpcap
    pkts, t = [], 1_700_000_000.0
    for i in range(conns):
        cli, sport = f'{victim}.{10 + i}', 40000 + i
        d = Ether() / IP(src=SERVER, dst=cli) / TCP(sport=80, dport=sport, flags='A', seq=9000,
                                                    ack=5000) / (b'x' * 1400)
        d.time = t
        a = Ether() / IP(src=cli, dst=SERVER) / TCP(sport=sport, dport=80, flags='A', seq=5000,
                                                    ack=10400)
        a.time = t + 0.02
        pkts += [d, a]
        t += 0.1
    wrpcap(path, pkts)


def wc_samples(gateway, pcap):
    out = subprocess.run([gateway, '--pcap', pcap, '--samples-out', '-'], capture_output=True,
                         text=True, check=True).stdout
    return [line for line in out.splitlines() if '"kind":"wc"' in line]


@pytest.mark.skipif(not _scapy(), reason='scapy not installed')
def test_sequence_jumps_give_no_wc():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, 'jump.pcap')
        seq_jump_capture(p)
        assert wc_samples(GATEWAY, p) == []


@pytest.mark.skipif(not _scapy(), reason='scapy not installed')
def test_mid_stream_pairs_give_no_wc():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, 'pairs.pcap')
        mid_stream_capture(p)
        assert wc_samples(GATEWAY, p) == []


if __name__ == '__main__':
    with tempfile.TemporaryDirectory() as d:
        for name, make in (('seq_jump', seq_jump_capture), ('mid_stream', mid_stream_capture)):
            p = os.path.join(d, name + '.pcap')
            make(p)
            for gw in sys.argv[1:]:
                import json
                vals = [json.loads(x)['wc_segments'] for x in wc_samples(gw, p)]
                print(f'{name}: {gw}: {len(vals)} W_c samples {vals}')
