#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, made from the captures under pcaps/ (and, for the targets
whose input is not a capture, from the agent's example configuration and a few hand-written
texts). Each input follows the layout its target's header comment describes.

Usage: seeds.py KIND OUTDIR [--source-root DIR]   (KIND: parse pipeline pcap resp address
agent_config)"""
import argparse
import math
import os
import struct
import sys

# The fuzz targets' link type order (fuzz_check.hpp kLinks) by libpcap DLT / LINKTYPE value.
LINK_INDEX = {1: 0, 101: 1, 12: 1, 14: 1, 113: 2, 276: 3, 228: 4, 229: 5, 0: 6}


def read_capture(path):
    """(dlt, [(ts_ns, bytes)]) of a pcap or pcapng file; pcapng: the first interface's type."""
    data = open(path, 'rb').read()
    magic = data[:4]
    frames = []
    if magic in (b'\xd4\xc3\xb2\xa1', b'\xa1\xb2\xc3\xd4', b'\x4d\x3c\xb2\xa1', b'\xa1\xb2\x3c\x4d'):
        e = '<' if magic in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') else '>'
        nano = magic in (b'\x4d\x3c\xb2\xa1', b'\xa1\xb2\x3c\x4d')
        dlt = struct.unpack(e + 'I', data[20:24])[0] & 0x0fffffff
        off = 24
        while off + 16 <= len(data):
            sec, frac, incl, _orig = struct.unpack(e + 'IIII', data[off:off + 16])
            off += 16
            frames.append((sec * 10**9 + frac * (1 if nano else 1000), data[off:off + incl]))
            off += incl
        return dlt, frames
    if magic == b'\x0a\x0d\x0d\x0a':
        e = '<' if data[8:12] == b'\x4d\x3c\x2b\x1a' else '>'
        off, dlt = 0, None
        while off + 12 <= len(data):
            btype, blen = struct.unpack(e + 'II', data[off:off + 8])
            if blen < 12:
                break
            body = data[off + 8:off + blen - 4]
            if btype == 1 and dlt is None:
                dlt = struct.unpack(e + 'H', body[:2])[0]
            elif btype == 6:
                _ifc, hi, lo, caplen, _orig = struct.unpack(e + 'IIIII', body[:20])
                frames.append((((hi << 32) | lo) * 1000, body[20:20 + caplen]))
            off += blen
        return dlt, frames
    return None, []


def captures(root):
    for sub in ('real', 'lab'):
        d = os.path.join(root, 'pcaps', sub)
        for name in sorted(os.listdir(d)):
            if name.endswith(('.pcap', '.pcapng', '.dmp')):
                yield os.path.join(d, name)


def write(outdir, name, data):
    with open(os.path.join(outdir, name), 'wb') as f:
        f.write(data)


def time_step(delta_ns):
    """fuzz_pipeline.cpp's ctl time step nearest to a gap: 0, or k for 2^(k+9) ns."""
    if delta_ns <= 0:
        return 0
    return max(1, min(31, round(math.log2(delta_ns)) - 9))


def seeds_parse(root, out):
    for path in captures(root):
        dlt, frames = read_capture(path)
        if dlt not in LINK_INDEX:
            continue
        base = os.path.basename(path)
        picked = list(range(min(40, len(frames)))) + list(range(40, len(frames), 97))[:40]
        for i in picked:
            write(out, f'{base}.{i}', bytes([LINK_INDEX[dlt], 0]) + frames[i][1][:256])


def seeds_pipeline(root, out):
    for path in captures(root):
        dlt, frames = read_capture(path)
        if dlt not in LINK_INDEX:
            continue
        base = os.path.basename(path)
        for start in range(0, min(len(frames), 3 * 48), 48):
            for live in (0, 1) if start == 0 else (0,):
                buf = bytearray([live])
                prev = frames[start][0]
                for ts, frame in frames[start:start + 48]:
                    frame = frame[:255]
                    buf += bytes([LINK_INDEX[dlt] | time_step(ts - prev) << 3, len(frame)]) + frame
                    prev = ts
                write(out, f'{base}.{start}.{"live" if live else "replay"}', bytes(buf))


def seeds_pcap(root, out):
    for path in captures(root):
        data = open(path, 'rb').read()
        base = os.path.basename(path)
        if data[:4] == b'\x0a\x0d\x0d\x0a':  # pcapng: the first blocks, whole
            e = '<' if data[8:12] == b'\x4d\x3c\x2b\x1a' else '>'
            off = 0
            for _ in range(40):
                if off + 8 > len(data):
                    break
                off += struct.unpack(e + 'I', data[off + 4:off + 8])[0]
            write(out, base, data[:off])
            continue
        e = '<' if data[:4] in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') else '>'
        hdr = bytearray(data[:24])
        struct.pack_into(e + 'I', hdr, 16, 256)  # snap length 256: records cut like the gateway's
        buf, off = bytearray(hdr), 24
        for _ in range(40):
            if off + 16 > len(data):
                break
            sec, frac, incl, orig = struct.unpack(e + 'IIII', data[off:off + 16])
            keep = min(incl, 256)
            buf += struct.pack(e + 'IIII', sec, frac, keep, orig) + data[off + 16:off + 16 + keep]
            off += 16 + incl
        write(out, base, bytes(buf))


def bulk(s):
    s = s.encode()
    return b'$%d\r\n%s\r\n' % (len(s), s)


def seeds_resp(_root, out):
    # Packed bucket values as redis_schema.hpp documents them (9 fields, the W_c clients mask,
    # the RTT histogram, the W_c client table, the loss figures and created_s), and the replies
    # a window read, AUTH or an error gives.
    b1 = '3 30 310 2 20000 9000 1700000000000000000 3 0 5 1700000000'
    b2 = '1 12 144 0 0 0 1700000005000000000 1 0 1700000005'
    b3 = ('3 54 1106 4 81250 18250 1700000017123456789 7 0 5 41:3,43:1 '
          '0,1047061807:2:34,3382158211:1:20 1763776510')
    b4 = ('3 54 1106 4 81250 18250 1700000017123456789 7 0 5 41:3,43:1 '
          '0,1047061807:2:34,3382158211:1:20 21:8:2:3 1763776510')
    seeds = {
        'ok': b'+OK\r\n',
        'error': b'-NOAUTH Authentication required.\r\n',
        'moved': b'-MOVED 3999 127.0.0.1:6381\r\n',
        'integer': b':42\r\n',
        'bulk': bulk('hello'),
        'nil': b'$-1\r\n',
        'hmget_empty': b'*3\r\n$-1\r\n$-1\r\n$-1\r\n',
        'hmget_one': b'*3\r\n$-1\r\n' + bulk(b1) + b'$-1\r\n',
        'hmget_two': b'*2\r\n' + bulk(b1) + bulk(b2),
        'hmget_tables': b'*2\r\n' + bulk(b3) + bulk(b3),
        'hmget_loss': b'*2\r\n' + bulk(b4) + bulk(b3),
        'pipeline': b'+OK\r\n*2\r\n' + bulk(b1) + b'$-1\r\n*1\r\n' + bulk(b2) + b'-ERR x\r\n',
        'nil_array': b'*-1\r\n',
    }
    for name, data in seeds.items():
        write(out, name, data)


def seeds_address(_root, out):
    texts = ['198.51.100.7', '198.51.100.0/24', '198.51.100.0/25', '10.0.0.0/8', '2001:db8::1',
             '2001:db8:1::/48', '2001:db8:1:2::/64', '::ffff:1.2.3.4', '::', '0.0.0.0/0',
             '[2001:db8::1]:6380', '127.0.0.1:6379', 'redis://user:pw@127.0.0.1:6379/0',
             'redis://localhost', 'redis://[::1]:7000']
    for i, t in enumerate(texts):
        write(out, f'address.{i}', bytes([23, 47]) + t.encode())  # /24 and /48


def seeds_agent_config(root, out):
    with open(os.path.join(root, 'deploy', 'config', 'agent.toml'), 'rb') as f:
        write(out, 'agent.toml', f.read())
    write(out, 'minimal', b'[agent]\nestimate_server = "127.0.0.1:50051"\n[[port]]\nport = 0\n'
          b'response_bytes = 15000\n')
    write(out, 'policy', b'[policy]\nwindow_rule = "paper"\nmax_initial_cwnd = 32\n'
          b'[[port]]\nport = 80\nresponse_bytes = 100000\nacked_per_ack = 2\n')


KINDS = {'parse': seeds_parse, 'pipeline': seeds_pipeline, 'pcap': seeds_pcap,
         'resp': seeds_resp, 'address': seeds_address, 'agent_config': seeds_agent_config}


def make(kind, outdir, root):
    os.makedirs(outdir, exist_ok=True)
    KINDS[kind](root, outdir)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('kind', choices=sorted(KINDS))
    ap.add_argument('outdir')
    ap.add_argument('--source-root', default=os.path.join(os.path.dirname(__file__), '..', '..'))
    a = ap.parse_args()
    make(a.kind, a.outdir, a.source_root)
    print(f'{len(os.listdir(a.outdir))} seeds in {a.outdir}')


if __name__ == '__main__':
    sys.exit(main())
