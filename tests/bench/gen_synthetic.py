#!/usr/bin/python3
"""Synthetic TCP capture for the gateway benchmark (pcap, Ethernet, microsecond timestamps).

Two shapes:
  mix        many concurrent connections with a web-like size mix: handshakes with the usual
             Linux SYN options, a request, a response of 1..100 MSS segments (70 % 1-3, 25 % 4-20,
             5 % 21-100), delayed ACKs every second segment, about 1 % of data segments lost and
             recovered either by fast retransmit (3 dupacks) or by timeout, and a close by FIN
             (85 %), RST (10 %) or none (5 %, still open at the end of the capture).
  handshakes N handshakes (SYN, SYN-ACK, ACK) and nothing else: N live connections at the end.

Frames are cut at --snaplen (header-only capture, as span-port analysers usually run); the pcap
record keeps the wire length and the IP total length stays true, so payload sizes are real.
Deterministic for a given --seed. Prints what it wrote (packets, connections, peak concurrency)
on stderr.

Usage: gen_synthetic.py OUT.pcap [--shape mix|handshakes] [--connections N] [--concurrency N]
                        [--snaplen B] [--seed S]
"""
import argparse
import random
import struct
import sys

SYN, ACK, FIN, RST, PSH = 0x02, 0x10, 0x01, 0x04, 0x08
MSS = 1448
ETH = bytes.fromhex("020000000002" "020000000001" "0800")
C2S, S2C = 0, 1


def ip_checksum(hdr):
    s = sum(struct.unpack("!10H", hdr))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


class Writer:
    def __init__(self, path, snaplen):
        self.f = open(path, "wb")
        self.snaplen = snaplen
        self.f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))
        self.buf = []
        self.packets = 0
        self.ip_id = 0

    def frame(self, t_us, src, dst, sport, dport, seq, ack, flags, payload_len, opts):
        tcp_len = 20 + len(opts)
        total = 20 + tcp_len + payload_len
        self.ip_id = (self.ip_id + 1) & 0xFFFF
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, self.ip_id, 0x4000, 64, 6, 0, src, dst)
        ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
        tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                          (tcp_len // 4) << 4, flags, 1024, 0, 0) + opts
        wire = 14 + total
        frame = ETH + ip + tcp
        if len(frame) < wire:
            frame += bytes(min(wire, self.snaplen) - len(frame))
        frame = frame[: self.snaplen]
        self.buf.append(struct.pack("<IIII", t_us // 1_000_000, t_us % 1_000_000, len(frame), wire))
        self.buf.append(frame)
        self.packets += 1
        if len(self.buf) >= 65536:
            self.flush()

    def flush(self):
        self.f.write(b"".join(self.buf))
        self.buf = []

    def close(self):
        self.flush()
        self.f.close()


def syn_opts(tsval, tsecr):
    # MSS, SACK permitted, timestamps, NOP, window scale 7: what Linux sends.
    return struct.pack("!BBHBBBBIIBBBB", 2, 4, MSS, 4, 2, 8, 10, tsval, tsecr, 1, 3, 3, 7)


def ts_opts(tsval, tsecr):
    return struct.pack("!BBBBII", 1, 1, 8, 10, tsval, tsecr)


def conn_events(rng):
    """The connection's segments in order: (direction, flags, seq offset, ack offset, payload)."""
    ev = [(C2S, SYN, 0, 0, 0), (S2C, SYN | ACK, 0, 1, 0), (C2S, ACK, 1, 1, 0)]
    c = 1  # next client sequence offset
    s = 1  # next server sequence offset
    req = rng.randint(80, 600)
    ev.append((C2S, PSH | ACK, c, s, req))
    c += req
    r = rng.random()
    nseg = rng.randint(1, 3) if r < 0.70 else rng.randint(4, 20) if r < 0.95 else rng.randint(21, 100)
    seg = []
    for k in range(nseg):
        ln = MSS if k < nseg - 1 else rng.randint(1, MSS)
        seg.append((s, ln))
        s += ln
    k = 0
    unacked = 0
    while k < nseg:
        off, ln = seg[k]
        ev.append((S2C, ACK | (PSH if k == nseg - 1 else 0), off, c, ln))
        if rng.random() < 0.01:
            if k + 3 < nseg:
                # Fast retransmit: three later segments, each drawing a duplicate ACK.
                for j in range(1, 4):
                    o2, l2 = seg[k + j]
                    ev.append((S2C, ACK, o2, c, l2))
                    ev.append((C2S, ACK, c, off, 0))
                ev.append((S2C, ACK, off, c, ln))
                end = seg[k + 3][0] + seg[k + 3][1]
                ev.append((C2S, ACK, c, end, 0))
                k += 4
                unacked = 0
                continue
            # Timeout: nothing comes back until the sender resends.
            ev.append((S2C, ACK, off, c, ln))
        unacked += 1
        if unacked == 2 or k == nseg - 1:
            ev.append((C2S, ACK, c, off + ln, 0))
            unacked = 0
        k += 1
    r = rng.random()
    if r < 0.85:
        ev.append((S2C, FIN | ACK, s, c, 0))
        ev.append((C2S, FIN | ACK, c, s + 1, 0))
        ev.append((S2C, ACK, s + 1, c + 1, 0))
    elif r < 0.95:
        ev.append((C2S, RST | ACK, c, s, 0))
    return ev


class Conn:
    __slots__ = ("cip", "sip", "cport", "sport", "isn", "ev", "i", "tsval", "last_tsval")

    def __init__(self, idx, rng, events):
        self.cip = struct.pack("!BBBB", 10, (idx >> 16) & 0xFF, (idx >> 8) & 0xFF, idx & 0xFF)
        self.sip = struct.pack("!BBBB", 192, 0, 2, 1 + idx % 16)
        self.cport = 1024 + (idx * 7919) % 60000
        self.sport = 443
        self.isn = (rng.getrandbits(32), rng.getrandbits(32))
        self.ev = events
        self.i = 0
        self.tsval = [rng.getrandbits(31), rng.getrandbits(31)]
        self.last_tsval = [0, 0]

    def emit(self, w, t_us):
        d, flags, seq_off, ack_off, ln = self.ev[self.i]
        self.i += 1
        ms = t_us // 1000
        tsval = (self.tsval[d] + ms) & 0xFFFFFFFF
        tsecr = 0 if flags == SYN else self.last_tsval[1 - d]  # echo the peer's latest
        self.last_tsval[d] = tsval
        opts = syn_opts(tsval, tsecr) if flags & SYN else ts_opts(tsval, tsecr)
        seq = self.isn[d] + seq_off
        ack = self.isn[1 - d] + ack_off if flags & ACK else 0
        if d == C2S:
            w.frame(t_us, self.cip, self.sip, self.cport, self.sport, seq, ack, flags, ln, opts)
        else:
            w.frame(t_us, self.sip, self.cip, self.sport, self.cport, seq, ack, flags, ln, opts)
        return self.i == len(self.ev)


def gen_mix(w, rng, connections, concurrency, t0_us, rtt_us):
    active = []
    started = 0
    open_now = 0  # first packet written, last one not yet
    peak = 0
    t = float(t0_us)
    while started < min(concurrency, connections):
        active.append(Conn(started, rng, conn_events(rng)))
        started += 1
    while active:
        i = rng.randrange(len(active))
        # Each connection sends about once per rtt_us whatever the number of live ones.
        t += rtt_us / len(active)
        done = active[i].emit(w, int(t))
        if active[i].i == 1:
            open_now += 1
            peak = max(peak, open_now)
        if done:
            open_now -= 1
            if started < connections:
                active[i] = Conn(started, rng, conn_events(rng))
                started += 1
            else:
                active[i] = active[-1]
                active.pop()
    return started, peak


def gen_handshakes(w, rng, connections, t0_us):
    # SYN of i, SYN-ACK of i-1000, ACK of i-2000: every connection is live at the end.
    conns = [None] * connections
    lag = 1000
    for i in range(connections + 2 * lag):
        t = t0_us + i
        if i < connections:
            conns[i] = Conn(i, rng, [(C2S, SYN, 0, 0, 0), (S2C, SYN | ACK, 0, 1, 0), (C2S, ACK, 1, 1, 0)])
            conns[i].emit(w, t)
        for j in (i - lag, i - 2 * lag):
            if 0 <= j < connections:
                if conns[j].emit(w, t):
                    conns[j] = None
    return connections, connections


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--shape", choices=["mix", "handshakes"], default="mix")
    ap.add_argument("--connections", type=int, default=130_000)
    ap.add_argument("--concurrency", type=int, default=115_000)
    ap.add_argument("--snaplen", type=int, default=128)
    ap.add_argument("--rtt-us", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.connections > 1 << 24:
        sys.exit("gen_synthetic: at most 16M connections (client addresses are 10.x.y.z)")
    rng = random.Random(a.seed)
    w = Writer(a.out, a.snaplen)
    t0_us = 1_700_000_000 * 1_000_000
    if a.shape == "mix":
        conns, peak = gen_mix(w, rng, a.connections, a.concurrency, t0_us, a.rtt_us)
    else:
        conns, peak = gen_handshakes(w, rng, a.connections, t0_us)
    w.close()
    print(f"gen_synthetic: {a.out}: {w.packets} packets, {conns} connections, "
          f"peak {peak} concurrent, snaplen {a.snaplen}", file=sys.stderr)


if __name__ == "__main__":
    main()
