#!/usr/bin/python3
"""Splits a classic pcap file into N files by connection, both directions of a connection in the
same file: what symmetric RSS does on a NIC, for net_pcap (one rx queue per rx_pcap file) and
spand-gateway's --queues-by-flow.

The file of a packet is a hash of its unordered pair of (address, port) endpoints, modulo N;
frames that are not TCP or UDP over IPv4 or IPv6 (behind Ethernet, with up to two VLAN tags) go to
the first file. Records are copied unchanged, in order, with the input's file header.

Usage: split_by_flow.py IN.pcap OUT_PREFIX [N]   (writes OUT_PREFIX.0.pcap ... OUT_PREFIX.N-1.pcap)
"""
import struct
import sys
import zlib

MAGICS = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">",   # microseconds
          b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\x3c\x4d": ">"}   # nanoseconds
LINKTYPE_ETHERNET = 1


def endpoints(frame):
    """The canonical (lower, higher) endpoint pair of a TCP/UDP frame, or None."""
    off = 12
    if len(frame) < off + 2:
        return None
    ethertype = int.from_bytes(frame[off:off + 2], "big")
    off += 2
    for _ in range(2):
        if ethertype not in (0x8100, 0x88A8) or len(frame) < off + 4:
            break
        ethertype = int.from_bytes(frame[off + 2:off + 4], "big")
        off += 4
    if ethertype == 0x0800 and len(frame) >= off + 20:
        ihl = (frame[off] & 0x0F) * 4
        proto = frame[off + 9]
        src, dst = frame[off + 12:off + 16], frame[off + 16:off + 20]
        l4 = off + ihl
    elif ethertype == 0x86DD and len(frame) >= off + 40:
        proto = frame[off + 6]
        src, dst = frame[off + 8:off + 24], frame[off + 24:off + 40]
        l4 = off + 40
    else:
        return None
    if proto not in (6, 17) or len(frame) < l4 + 4:
        return None
    a, b = src + frame[l4:l4 + 2], dst + frame[l4 + 2:l4 + 4]
    return (a, b) if a <= b else (b, a)


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[-1])
    n = int(argv[3]) if len(argv) == 4 else 2
    if n < 1:
        sys.exit("split_by_flow: N must be at least 1")
    with open(argv[1], "rb") as f:
        data = f.read()
    if len(data) < 24 or data[:4] not in MAGICS:
        sys.exit(f"split_by_flow: {argv[1]}: not a classic pcap file (pcapng is not read here)")
    order = MAGICS[data[:4]]
    if struct.unpack(order + "I", data[20:24])[0] & 0xFFFF != LINKTYPE_ETHERNET:
        sys.exit(f"split_by_flow: {argv[1]}: only Ethernet captures are split")
    outs = [open(f"{argv[2]}.{i}.pcap", "wb") for i in range(n)]
    counts = [0] * n
    for o in outs:
        o.write(data[:24])
    rec = struct.Struct(order + "IIII")
    pos = 24
    while pos + 16 <= len(data):
        _, _, caplen, _ = rec.unpack_from(data, pos)
        end = pos + 16 + caplen
        if end > len(data):
            sys.exit(f"split_by_flow: {argv[1]}: truncated record at byte {pos}")
        ep = endpoints(data[pos + 16:end])
        i = zlib.crc32(ep[0] + ep[1]) % n if ep else 0
        outs[i].write(data[pos:end])
        counts[i] += 1
        pos = end
    for o in outs:
        o.close()
    print(f"split_by_flow: {sum(counts)} packets: " +
          ", ".join(f"{argv[2]}.{i}.pcap {c}" for i, c in enumerate(counts)), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
