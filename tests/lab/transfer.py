"""Traffic for the lab: a plan of transfers, a server that sends, a client that fetches.

usage:
  transfer.py plan SEED COUNT CLIENT_ADDR...     prints "START_S CLIENT_ADDR BYTES" lines
  transfer.py serve PORT CC                      serves until killed
  transfer.py fetch PLAN SERVER PORT DEADLINE_S  runs a plan, prints one result line per transfer

Protocol: the client sends the byte count it wants as one ASCII line; the server sends that many
bytes and then waits for the client to close first. The server socket therefore stays
ESTABLISHED until its last byte is acknowledged, and the kernel's tcp_probe tracepoint (which
fires on ACKs in that state) sees every ACK of the transfer.
"""
import os
import random
import socket
import sys
import threading
import time

# Sizes: many short web-like objects, some medium ones, a few bulk transfers that live long enough
# to reach congestion avoidance and lose segments there.
SHORT_BYTES = (4_000, 60_000)
MEDIUM_BYTES = (100_000, 400_000)
LONG_BYTES = (800_000, 2_000_000)
SHARE_SHORT, SHARE_MEDIUM = 0.5, 0.3
MEAN_GAP_S = 0.25  # exponential gaps between starts: transfers overlap on the bottleneck
SEND_CHUNK = b'\x5a' * 65536


def plan(seed, count, clients):
    rng = random.Random(seed)
    start_s = 0.0
    for _ in range(count):
        draw = rng.random()
        if draw < SHARE_SHORT:
            lo, hi = SHORT_BYTES
        elif draw < SHARE_SHORT + SHARE_MEDIUM:
            lo, hi = MEDIUM_BYTES
        else:
            lo, hi = LONG_BYTES
        print(f'{start_s:.3f} {rng.choice(clients)} {rng.randint(lo, hi)}')
        start_s += rng.expovariate(1.0 / MEAN_GAP_S)


def serve_one(conn, cc):
    with conn:
        wanted = int(conn.makefile('rb').readline())
        used = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b'\0')
        if used.decode() != cc:
            print(f'congestion control mismatch: {used.decode()} instead of {cc}', flush=True)
        left = wanted
        while left > 0:
            left -= conn.send(SEND_CHUNK[:min(left, len(SEND_CHUNK))])
        while conn.recv(4096):
            pass


def serve(port, cc):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit the listener's congestion control. Inside a network namespace
    # only root may pick one that is not in tcp_allowed_congestion_control (e.g. cubic).
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    listener.bind(('0.0.0.0', port))
    listener.listen(1024)
    print(f'serving on {port} with {cc}', flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve_one, args=(conn, cc), daemon=True).start()


# LAB_QUICKACK=1 (netlab.sh passes the environment through): the client acknowledges every
# segment at once (TCP_QUICKACK before each read) instead of Linux's delayed ACKs.
QUICKACK = os.environ.get('LAB_QUICKACK') == '1'


def fetch_one(server, port, src, size, timeout_s, results, index):
    began = time.monotonic()
    got = 0
    local = '-'
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.bind((src, 0))
            sock.connect((server, port))
            local = f'{src}:{sock.getsockname()[1]}'
            sock.sendall(b'%d\n' % size)
            while got < size:
                if QUICKACK:  # not sticky: Linux may return to delayed ACKs after a while
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                data = sock.recv(65536)
                if not data:
                    break
                got += len(data)
    except OSError as err:
        local += f' error={err.__class__.__name__}'
    results[index] = f'{local} wanted={size} got={got} seconds={time.monotonic() - began:.3f}'


def fetch(plan_path, server, port, deadline_s):
    rows = [line.split() for line in open(plan_path) if line.strip()]
    results = [None] * len(rows)
    threads = []
    t0 = time.monotonic()
    for index, (start_s, src, size) in enumerate(rows):
        delay_s = t0 + float(start_s) - time.monotonic()
        if delay_s > 0:
            time.sleep(delay_s)
        remaining_s = max(1.0, deadline_s - (time.monotonic() - t0))
        thread = threading.Thread(target=fetch_one, daemon=True,
                                  args=(server, port, src, int(size), remaining_s, results, index))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(max(0.0, deadline_s - (time.monotonic() - t0)))
    failed = 0
    for row, result in zip(rows, results):
        print(result or f'{row[1]} wanted={row[2]} unfinished')
        failed += result is None or f'got={row[2]} ' not in result
    return 1 if failed else 0


def main():
    cmd, args = sys.argv[1] if len(sys.argv) > 1 else '', sys.argv[2:]
    if cmd == 'plan' and len(args) >= 3:
        plan(int(args[0]), int(args[1]), args[2:])
    elif cmd == 'serve' and len(args) == 2:
        serve(int(args[0]), args[1])
    elif cmd == 'fetch' and len(args) == 4:
        return fetch(args[0], args[1], int(args[2]), float(args[3]))
    else:
        sys.exit(__doc__)
    return 0


if __name__ == '__main__':
    sys.exit(main())
