"""Captures without a tcptrace reading (tcptrace cannot read pcapng) and trap-specific checks.

References: the capture manifest (pcaps/real/MANIFEST.tsv, counted by the people who collected
the captures, not by this project) and the traps listed in pcaps/README.md.
"""
import json
import os
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
PCAPS = os.path.join(HERE, '..', '..', 'pcaps', 'real')
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')


def run(name, *extra):
    proc = subprocess.run([GATEWAY, '--pcap', os.path.join(PCAPS, name), '--flows-out', '-',
                           *extra], capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def test_pcapng_alexa_connections_and_timeouts():
    flows, _ = run('ndpi_alexa-app.pcapng')
    # MANIFEST.tsv: 121 TCP connections, 116 of them with a handshake.
    assert len(flows) == 121
    assert sum(f['handshake'] and f['syn_synack_us'] is not None for f in flows) >= 116
    # The manifest describes "many tail/RTO-style retransmissions of small segments": most
    # retransmissions must be classified as timeout-driven, as Tstat would.
    timeout = sum(f['c2s']['rexmt_timeout'] + f['s2c']['rexmt_timeout'] for f in flows)
    fast = sum(f['c2s']['rexmt_fast'] + f['s2c']['rexmt_fast'] for f in flows)
    assert timeout > 2 * fast


def test_asymmetric_vlan_is_one_connection():
    flows, _ = run('sv_syn_retransmit_with_ts.pcap')
    assert len(flows) == 1
    assert flows[0]['vlan'] == 3136  # only the client's direction carries the tag


def test_ultrasurf_midstream_pickup_is_tracked():
    flows, _ = run('ndpi_ultrasurf.pcap')
    picked_up = [f for f in flows if not f['handshake']]
    assert len(picked_up) == 1
    assert picked_up[0]['s2c']['data_packets'] + picked_up[0]['c2s']['data_packets'] > 0
    assert all(f['vlan'] != 0 for f in flows)


def test_snaplen_cut_payload_comes_from_ip_header():
    flows, _ = run('tcptrace_dsack.dmp')
    # MANIFEST.tsv: payload 16787352 bytes (resends included) in one connection, captured with
    # a headers-only snap length; the sender's unique payload bytes are 2^24.
    (f,) = flows
    assert f['c2s']['bytes'] + f['s2c']['bytes'] == 16787352
    assert f["c2s"]["unique_bytes"] == 2**24


def test_dsack_marks_a_spurious_retransmission():
    flows, _ = run('tcptrace_dsack.dmp')
    (f,) = flows
    sender = f['c2s'] if f['c2s']['bytes'] > f['s2c']['bytes'] else f['s2c']
    # The capture carries exactly one DSACK block (MANIFEST.tsv). It reports segment
    # 2659977 (relative) delivered twice, but the monitor saw that segment sent only once
    # (frame 2428): the network duplicated it. So: one DSACK, and no spurious resend.
    assert sender['dsacks'] == 1
    assert sender['rexmt_spurious'] == 0
    # tcptrace and the manifest: 7 fast retransmits after dupacks.
    assert sender['rexmt_fast'] == 7 and sender['rexmt_timeout'] == 0


def test_time_jump_between_concatenated_traces():
    flows, _ = run('tcptrace_http.dmp')
    assert len(flows) == 61
    # Every connection lives seconds, not the four years between the two traces.
    assert max(f['last_ts_ns'] - f['first_ts_ns'] for f in flows) < 600 * 10**9


def test_filter_keeps_only_matching_connections():
    flows, _ = run('zeek_bro.org.pcap', '--filter', 'tcp port 80 and host 10.0.2.15')
    everything, _ = run('zeek_bro.org.pcap')
    assert 0 < len(flows) <= len(everything)
    assert all(f['server_port'] == 80 or f['client_port'] == 80 for f in flows)


def to_bsd_loopback(src, dst, linktype, family_bytes):
    """Rewrites an Ethernet pcap as LINKTYPE_NULL (0) or LOOP (108): each untagged IPv4 or IPv6
    frame loses its 14-byte Ethernet header and gains the 4-byte address family in its place;
    other frames (ARP, tagged ones) are left out. Returns the frames kept."""
    with open(src, 'rb') as f:
        data = f.read()
    magic = data[:4]
    order = '<' if magic in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') else '>'
    header = bytearray(data[:24])
    struct.pack_into(order + 'I', header, 20, linktype)
    out = [bytes(header)]
    kept = 0
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, caplen, wire = struct.unpack_from(order + 'IIII', data, pos)
        frame = data[pos + 16:pos + 16 + caplen]
        pos += 16 + caplen
        if caplen < 14 or frame[12:14] not in (b'\x08\x00', b'\x86\xdd'):
            continue
        family = family_bytes[4 if frame[12:14] == b'\x08\x00' else 6]
        body = family + frame[14:]
        out.append(struct.pack(order + 'IIII', sec, frac, len(body), wire - 10) + body)
        kept += 1
    with open(dst, 'wb') as f:
        f.write(b''.join(out))
    return kept


def test_bsd_loopback_captures_match_ethernet(tmp_path):
    # The same packets framed as a macOS (NULL, little-endian, AF_INET6 30), a big-endian
    # FreeBSD (NULL, 28) or an OpenBSD (LOOP, network order, 24) loopback capture give the
    # records and samples of the Ethernet original: the link layer carries nothing they use.
    framings = {
        'null_le': (0, {4: struct.pack('<I', 2), 6: struct.pack('<I', 30)}),
        'null_be': (0, {4: struct.pack('>I', 2), 6: struct.pack('>I', 28)}),
        'loop': (108, {4: struct.pack('>I', 2), 6: struct.pack('>I', 24)}),
    }
    for name in ('ndpi_reddit.pcap', 'sv_tls-subjectaltname.pcap'):  # the first has IPv6 too
        ref = subprocess.run([GATEWAY, '--pcap', os.path.join(PCAPS, name), '--flows-out', '-',
                              '--samples-out', str(tmp_path / 'ref.samples')],
                             capture_output=True, text=True, check=True, timeout=120)
        ref_samples = (tmp_path / 'ref.samples').read_text()
        assert len(ref.stdout.splitlines()) > 50 and ref_samples
        for framing, (linktype, families) in framings.items():
            path = tmp_path / f'{framing}.pcap'
            assert to_bsd_loopback(os.path.join(PCAPS, name), path, linktype, families) > 1000
            got = subprocess.run([GATEWAY, '--pcap', str(path), '--flows-out', '-',
                                  '--samples-out', str(tmp_path / 'got.samples')],
                                 capture_output=True, text=True, check=False, timeout=120)
            assert got.returncode == 0, got.stderr
            assert got.stdout == ref.stdout, (name, framing)
            assert (tmp_path / 'got.samples').read_text() == ref_samples, (name, framing)


def encapsulated(src, dst, kind):
    """Rewrites an Ethernet pcap as a remote span delivers it: each frame inside outer Ethernet,
    IPv4 and either UDP + VXLAN (RFC 7348, port 4789) or GRE + ERSPAN type II (sequence number,
    8-byte ERSPAN header), as AWS traffic mirroring and a switch's ERSPAN session send it."""
    with open(src, 'rb') as f:
        data = f.read()
    order = '<' if data[:4] in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') else '>'
    header = bytearray(data[:24])
    struct.pack_into(order + 'I', header, 16, 65535)  # snap length: room for the outer headers
    out = [bytes(header)]
    pos, seq = 24, 0
    while pos + 16 <= len(data):
        sec, frac, caplen, wire = struct.unpack_from(order + 'IIII', data, pos)
        frame = data[pos + 16:pos + 16 + caplen]
        pos += 16 + caplen
        seq += 1
        if kind == 'vxlan':
            tunnel = struct.pack('>HHHH', 40000 + seq % 1000, 4789, 8 + 8 + wire, 0)
            tunnel += struct.pack('>BBHI', 0x08, 0, 0, 0x123 << 8)
            proto = 17
        else:
            tunnel = struct.pack('>HHI', 0x1000, 0x88be, seq)
            tunnel += struct.pack('>HHI', 0x1000 | 100, 5, 0)  # version 1, VLAN 100, session 5
            proto = 47
        ip = struct.pack('>BBHHHBBH4s4s', 0x45, 0, 20 + len(tunnel) + wire, seq & 0xffff, 0x4000,
                         64, proto, 0, bytes([10, 9, 9, 1]), bytes([10, 9, 9, 2]))
        outer = bytes.fromhex('020000000a0a' '020000000a0b' '0800') + ip + tunnel
        out.append(struct.pack(order + 'IIII', sec, frac, len(outer) + caplen, len(outer) + wire)
                   + outer + frame)
    with open(dst, 'wb') as f:
        f.write(b''.join(out))


def test_remote_span_tunnels_match_the_original(tmp_path):
    # The same packets delivered in VXLAN or ERSPAN give, with --decap, the records and samples
    # of the capture itself; without it the tunnels are counted and nothing is tracked.
    for name in ('ndpi_reddit.pcap', 'tcptrace_dsack.dmp'):  # IPv6 and IPv4; the second cut at 200 B
        ref = subprocess.run([GATEWAY, '--pcap', os.path.join(PCAPS, name), '--flows-out', '-',
                              '--samples-out', str(tmp_path / 'ref.samples')],
                             capture_output=True, text=True, check=True, timeout=120)
        ref_samples = (tmp_path / 'ref.samples').read_text()
        assert ref.stdout and ref_samples
        for kind in ('vxlan', 'erspan'):
            path = tmp_path / f'{kind}.pcap'
            encapsulated(os.path.join(PCAPS, name), path, kind)
            got = subprocess.run([GATEWAY, '--pcap', str(path), '--decap', kind, '--flows-out',
                                  '-', '--samples-out', str(tmp_path / 'got.samples')],
                                 capture_output=True, text=True, check=False, timeout=120)
            assert got.returncode == 0, got.stderr
            assert got.stdout == ref.stdout, (name, kind)
            assert (tmp_path / 'got.samples').read_text() == ref_samples, (name, kind)
            plain = subprocess.run([GATEWAY, '--pcap', str(path), '--flows-out', '-'],
                                   capture_output=True, text=True, check=False, timeout=120)
            assert plain.returncode == 0 and plain.stdout == ''
            assert '0 TCP packets tracked' in plain.stderr and 'not_tcp' in plain.stderr
