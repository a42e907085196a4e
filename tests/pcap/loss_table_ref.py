"""An independent count of `spandctl losses`'s table, from the sending kernel's own trace of a lab
run (tests/lab/netlab.sh: tcp:tcp_probe and tcp:tcp_cong_state_set), not from the gateway.

Per connection (the client's address and port): a loss event starts when tcp_cong_state_set
enters recovery (3, fast retransmit) or loss (4, timeout) from another state, and an RTO during
recovery (3 then 4) is one more, timeout, event (Tstat's classes, as tests/lab/compare_truth.py).
The flight at the event is snd_nxt - snd_una of the last tcp_probe before it (the ACK that
triggered it), in segments of MSS bytes rounded up; the flow's size is the bytes its snd_una
advanced over the connection, in segments; never4: its flight never reached 4 segments.

    python3 loss_table_ref.py TCP_PROBE.txt[.gz] [--mss 1448]   # prints the JSON counts
"""
import argparse
import gzip
import json
import re

PROBE = re.compile(r'\s(\d+\.\d+): tcp_probe: .*?dest=(\S+) .*?snd_nxt=(0x[0-9a-f]+) '
                   r'snd_una=(0x[0-9a-f]+)')
STATE = re.compile(r'\s(\d+\.\d+): tcp_cong_state_set: .*?dport=(\d+) saddr=\S+ daddr=(\S+) '
                   r'.*cong_state=(\d+)')
SIZE_UPPER = [3, 10, 30, 100, 1000, None]
SIZE_NAMES = ['1-3', '4-10', '11-30', '31-100', '101-1000', '1001+']
FLIGHT_NAMES = ['1', '2', '3', '4-7', '8-15', '16+']


def size_class(segments):
    for i, upper in enumerate(SIZE_UPPER):
        if upper is None or segments <= upper:
            return i


def flight_class(segments):
    if segments <= 3:
        return max(segments, 1) - 1
    return 3 if segments <= 7 else 4 if segments <= 15 else 5


def endpoint(text):
    host, _, port = text.rpartition(':')
    return host.strip('[]'), int(port)


def kernel_table(trace_path, mss):
    probes, states = {}, {}
    opener = gzip.open if trace_path.endswith('.gz') else open
    for line in opener(trace_path, 'rt', errors='replace'):
        m = PROBE.search(line)
        if m:
            t, dst, nxt, una = m.groups()
            probes.setdefault(endpoint(dst), []).append((float(t), int(nxt, 16), int(una, 16)))
            continue
        m = STATE.search(line)
        if m:
            t, port, addr, st = m.groups()
            states.setdefault((addr, int(port)), []).append((float(t), int(st)))
    by_size = [{'flows': 0, 'fast': 0, 'timeout': 0, 'never4': 0} for _ in SIZE_NAMES]
    by_flight = [{'fast': 0, 'timeout': 0} for _ in FLIGHT_NAMES]
    for peer, acks in probes.items():
        sent = (acks[-1][2] - acks[0][2]) % 2**32
        if sent == 0:
            continue
        flights = [(nxt - una) % 2**32 for _, nxt, una in acks]
        row = by_size[size_class(-(-sent // mss))]
        row['flows'] += 1
        row['never4'] += max(flights) < 4 * mss
        prev = 0
        for t, st in states.get(peer, []):
            kind = None
            if st == 4 and prev == 3:
                kind = 'timeout'
            elif st in (3, 4) and prev not in (3, 4):
                kind = 'fast' if st == 3 else 'timeout'
            if kind:
                before = [a for a in acks if a[0] <= t] or acks[:1]
                _, nxt, una = before[-1]
                flight = -(-((nxt - una) % 2**32) // mss)
                row[kind] += 1
                by_flight[flight_class(flight)][kind] += 1
            prev = st
    return {'by_size': dict(zip(SIZE_NAMES, by_size)),
            'by_flight': dict(zip(FLIGHT_NAMES, by_flight))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('trace')
    ap.add_argument('--mss', type=int, default=1448,
                    help='payload bytes per segment (default 1448: MTU 1500 with timestamps)')
    a = ap.parse_args()
    print(json.dumps(kernel_table(a.trace, a.mss), indent=1))


if __name__ == '__main__':
    main()
