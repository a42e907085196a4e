#!/usr/bin/python3
"""Cross-check parse_frame against scapy, an independent dissector.

Builds randomized frames with scapy (every link type spand decodes, VLAN tags, IPv4 options,
IPv6 extension headers, every TCP option kind we decode plus unknown ones, fragments, UDP, ARP,
snap-length cuts, Ethernet padding), takes the expected fields from scapy's own dissection of
the same bytes, runs them through the parse_dump helper and compares field by field.

Usage: scapy_vectors.py PARSE_DUMP [--count N] [--seed S] [--keep FILE]
Exit status: 0 all agree, 1 a mismatch, 77 scapy missing (meson counts 77 as skipped).
"""

import argparse
import random
import socket
import subprocess
import sys

try:
    from scapy.all import (AH, ARP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPOption_NOP,
                           IPOption_RR, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                           IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, Raw)
    from scapy.layers.l2 import CookedLinux, CookedLinuxV2
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"scapy not importable ({e}); skipping", file=sys.stderr)
    sys.exit(77)

LINK_ETHERNET, LINK_RAW, LINK_SLL, LINK_IPV4, LINK_IPV6, LINK_SLL2 = 1, 101, 113, 228, 229, 276
ETH_IPV4, ETH_IPV6 = 0x0800, 0x86DD


def rand_v4(rng):
    return socket.inet_ntoa(rng.getrandbits(32).to_bytes(4, "big"))


def rand_v6(rng):
    return socket.inet_ntop(socket.AF_INET6, rng.getrandbits(128).to_bytes(16, "big"))


def rand_tcp_options(rng):
    """A random option list that fits in 40 bytes, no kind twice."""
    candidates = [
        (4, ("MSS", rng.randrange(0, 65536))),
        (3, ("WScale", rng.choice([0, 1, 7, 9, 14, 15, 200, 255]))),
        (2, ("SAckOK", b"")),
        (10, ("Timestamp", (rng.getrandbits(32), rng.getrandbits(32)))),
        (6, (30, rng.randbytes(4))),   # MPTCP-like, unknown to us: skipped by length
        (4, (34, rng.randbytes(2))),   # TFO cookie, unknown
        (1, ("NOP", None)),
    ]
    rng.shuffle(candidates)
    opts, used = [], 0
    for size, opt in candidates:
        if rng.random() < 0.5 and used + size <= 40:
            opts.append(opt)
            used += size
    if rng.random() < 0.4:
        room = (40 - used - 2) // 8
        blocks = min(room, rng.randint(1, 4))
        if blocks > 0:
            vals = []
            for _ in range(blocks):
                vals += [rng.getrandbits(32), rng.getrandbits(32)]
            opts.append(("SAck", tuple(vals)))
    return opts


def build(rng):
    """Returns (link, frame bytes, kind) where kind says what the frame is meant to be."""
    link = rng.choice([LINK_ETHERNET, LINK_ETHERNET, LINK_SLL, LINK_SLL2, LINK_RAW, LINK_IPV4,
                       LINK_IPV6])
    v6 = rng.random() < 0.5
    if link == LINK_IPV4:
        v6 = False
    if link == LINK_IPV6:
        v6 = True
    kind = rng.choices(["tcp", "udp", "frag", "arp"], weights=[85, 5, 5, 5])[0]
    if kind == "arp" and link != LINK_ETHERNET:
        kind = "tcp"

    payload = Raw(rng.randbytes(rng.randrange(0, 1461))) if rng.random() < 0.8 else None
    tcp = TCP(sport=rng.randrange(65536), dport=rng.randrange(65536), seq=rng.getrandbits(32),
              ack=rng.getrandbits(32), flags=rng.randrange(256), window=rng.randrange(65536),
              options=rand_tcp_options(rng))
    l4 = UDP(sport=rng.randrange(65536), dport=53) if kind == "udp" else tcp
    if payload is not None:
        l4 = l4 / payload

    ah, l3_ref = None, None
    if v6:
        ip = IPv6(src=rand_v6(rng), dst=rand_v6(rng), hlim=rng.randrange(1, 256))
        chain = []
        for ext in (IPv6ExtHdrHopByHop, IPv6ExtHdrDestOpt, IPv6ExtHdrRouting):
            if rng.random() < 0.25:
                chain.append(ext())
        if kind == "frag":
            chain.append(IPv6ExtHdrFragment(offset=rng.randrange(1, 8192), m=rng.randrange(2),
                                            id=rng.getrandbits(32)))
        elif rng.random() < 0.2:
            chain.append(IPv6ExtHdrFragment(offset=0, m=1, id=rng.getrandbits(32)))
        rng.shuffle(chain)
        if rng.random() < 0.2:
            # scapy fills neither AH's next header nor its length: 24 bytes = (4 + 2) words. It
            # cannot dissect what follows an AH either, so the expectations come from the same
            # frame without it (ah_bytes tells the caller where the TCP header moved).
            ah = AH(nh=17 if kind == "udp" else 6, payloadlen=4, spi=rng.getrandbits(32),
                    icv=rng.randbytes(12))
        l3 = ip
        for ext in chain:
            l3 = l3 / ext
        l3_ref = l3.copy() / l4.copy()
        if ah is not None:
            l3 = l3 / ah
        l3 = l3 / l4
        ethertype = ETH_IPV6
    else:
        opts = []
        r = rng.random()
        if r < 0.2:
            opts = [IPOption_NOP()] * rng.randint(1, 8)
        elif r < 0.3:
            opts = [IPOption_RR(routers=[rand_v4(rng) for _ in range(rng.randint(0, 4))])]
        frag = rng.randrange(1, 8192) if kind == "frag" else 0
        flags = rng.choice(["", "DF", "MF"]) if frag == 0 else rng.choice(["", "MF"])
        l3 = IP(src=rand_v4(rng), dst=rand_v4(rng), id=rng.randrange(65536),
                ttl=rng.randrange(1, 256), flags=flags, frag=frag, options=opts) / l4
        ethertype = ETH_IPV4

    if kind == "arp":
        l2 = Ether(src="02:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff")
        l3 = l3_ref = ARP(psrc=rand_v4(rng))
    elif link == LINK_ETHERNET:
        l2 = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        tags = rng.choice([0, 0, 1, 2])
        if tags == 1:
            l2 = l2 / Dot1Q(vlan=rng.randrange(4096), prio=rng.randrange(8))
        elif tags == 2:
            outer = Dot1AD if rng.random() < 0.5 else Dot1Q
            l2 = l2 / outer(vlan=rng.randrange(4096)) / Dot1Q(vlan=rng.randrange(4096))
    elif link == LINK_SLL:
        l2 = CookedLinux(pkttype=rng.choice([0, 4]), lladdrtype=1, lladdrlen=6,
                         src=b"\x02\x00\x00\x00\x00\x01\x00\x00", proto=ethertype)
    elif link == LINK_SLL2:
        l2 = CookedLinuxV2(proto=ethertype, ifindex=rng.randrange(1, 10), lladdrtype=1,
                           pkttype=0, lladdrlen=6, src=b"\x02\x00\x00\x00\x00\x01\x00\x00")
    else:
        l2 = None

    def assemble(l3_part):
        frame = bytes(l3_part if l2 is None else l2.copy() / l3_part)
        if link == LINK_ETHERNET and len(frame) < 60:
            frame += bytes(60 - len(frame))  # Ethernet minimum-size padding
        return frame

    ref = assemble(l3_ref) if l3_ref is not None else None
    return link, assemble(l3), kind, ref


def dissect(link, frame):
    if link == LINK_ETHERNET:
        return Ether(frame)
    if link == LINK_SLL:
        return CookedLinux(frame)
    if link == LINK_SLL2:
        return CookedLinuxV2(frame)
    return IPv6(frame) if (frame[0] >> 4) == 6 else IP(frame)


def mapped(addr, v6):
    if v6:
        return socket.inet_pton(socket.AF_INET6, addr).hex()
    return "00" * 10 + "ffff" + socket.inet_aton(addr).hex()


def expected_from_scapy(link, frame):
    """Expected parse_dump fields, read from scapy's dissection of the complete frame."""
    pkt = dissect(link, frame)
    if ARP in pkt:
        return {"drop": "not_ip"}, None
    vids = []
    layer = pkt
    while layer is not None and layer.name != "NoPayload":
        if isinstance(layer, Dot1Q):  # Dot1AD is a Dot1Q subclass
            vids.append(layer.vlan)
        layer = layer.payload if layer.payload else None
    if IPv6 in pkt:
        ip, v6 = pkt[IPv6], True
        if IPv6ExtHdrFragment in pkt and pkt[IPv6ExtHdrFragment].offset != 0:
            return {"drop": "ip_fragment"}, None
    else:
        ip, v6 = pkt[IP], False
        if ip.frag != 0:
            return {"drop": "ip_fragment"}, None
    if TCP not in pkt:
        return {"drop": "not_tcp"}, None
    tcp = pkt[TCP]
    payload = tcp.payload
    payload_len = len(payload.load) if type(payload) is Raw else 0  # Padding is not payload
    exp = {
        "drop": "none",
        "ipv": "6" if v6 else "4",
        "vlan_outer": str(vids[0] if vids else 0),
        "vlan_inner": str(vids[1] if len(vids) > 1 else 0),
        "ip_id": str(0 if v6 else ip.id),
        "src": mapped(ip.src, v6),
        "dst": mapped(ip.dst, v6),
        "sport": str(tcp.sport),
        "dport": str(tcp.dport),
        "seq": str(tcp.seq),
        "ack": str(tcp.ack),
        "flags": str(int(tcp.flags)),
        "window": str(tcp.window),
        "payload_len": str(payload_len),
        "mss": "0",
        "wscale": "255",
        "sack_permitted": "0",
        "ts": "0",
        "tsval": "0",
        "tsecr": "0",
        "malformed": "0",
        "sack": "",
    }
    for name, value in tcp.options:
        if name == "MSS":
            exp["mss"] = str(value)
        elif name == "WScale":
            exp["wscale"] = str(min(value, 14))  # RFC 7323 2.3: above 14 means 14
        elif name == "SAckOK":
            exp["sack_permitted"] = "1"
        elif name == "Timestamp":
            exp["ts"], exp["tsval"], exp["tsecr"] = "1", str(value[0]), str(value[1])
        elif name == "SAck":
            exp["sack"] = ",".join(f"{value[i]}-{value[i + 1]}" for i in range(0, len(value), 2))
    # Where the TCP header ends in the frame: the capture may be cut anywhere after it.
    header_end = len(frame) - len(bytes(tcp.payload))
    return exp, header_end


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parse_dump")
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="also write the vectors to this file")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    lines, expected = [], []
    for _ in range(args.count):
        link, frame, kind, ref = build(rng)
        exp, header_end = expected_from_scapy(link, ref if ref is not None else frame)
        if header_end is not None and ref is not None:
            header_end += len(frame) - len(ref)  # the AH header scapy could not dissect
        if kind == "tcp" and exp["drop"] != "none":
            print(f"generator bug: scapy did not see TCP in {frame.hex()}", file=sys.stderr)
            return 1
        caplen = len(frame)
        if header_end is not None and rng.random() < 0.3:
            caplen = rng.randint(header_end, len(frame))  # snap-length cut after the TCP header
        expected.append((exp, link, caplen, len(frame)))
        lines.append(f"{link} {caplen} {len(frame)} {frame[:caplen].hex()}\n")
    if args.keep:
        with open(args.keep, "w") as f:
            f.writelines(lines)

    out = subprocess.run([args.parse_dump], input="".join(lines), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    if len(out) != len(expected):
        print(f"parse_dump printed {len(out)} lines for {len(expected)} frames", file=sys.stderr)
        return 1
    mismatches, by_drop, cut = 0, {}, 0
    for (exp, link, caplen, wire_len), got_line, line in zip(expected, out, lines):
        got = dict(kv.split("=", 1) for kv in got_line.split())
        got.setdefault("sack", "")
        by_drop[exp["drop"]] = by_drop.get(exp["drop"], 0) + 1
        cut += caplen < wire_len
        diff = {k: (v, got.get(k)) for k, v in exp.items() if got.get(k) != v}
        if diff:
            mismatches += 1
            if mismatches <= 10:
                print(f"MISMATCH link {link} caplen {caplen}/{wire_len}: "
                      + ", ".join(f"{k}: scapy {a} ours {b}" for k, (a, b) in diff.items()))
                print(f"  frame {line.split()[3]}")
    print(f"{len(expected)} frames, {cut} snap-length cut; expected outcomes {by_drop}; "
          f"{mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
