"""Cross traffic for the benefit lab. Every mode runs until it is killed.

usage:
  cross.py telnet-server PORT
  cross.py telnet-client SERVER PORT SRC FLOWS MEAN_GAP_S SEED
  cross.py udp-sink PORT
  cross.py udp-onoff DEST PORT RATE_BPS ON_S OFF_S SEED
  cross.py bulk SERVER PORT SRC
  cross.py competing SERVER PORT SRC[,SRC...] FLOWS MIN_BYTES MAX_BYTES MEAN_GAP_S SEED

telnet-like flows: FLOWS persistent connections; the client sends a few bytes (a keystroke or a
short command) after exponential think times, the server echoes it and answers with a short
line now and then (40..400 bytes). ON/OFF UDP: RATE_BPS (bits/s, 1000-byte datagrams) for
exponential ON periods (mean ON_S), silent for exponential OFF periods (mean OFF_S). bulk: one
TCP download that never ends (the server is the lab's server.py on a bulk port). competing:
FLOWS loops of default-arm downloads of uniform random size with exponential gaps, from the
given sources (the same /24s as the measured transfers: the gateway learns from them too).
"""
import random
import socket
import sys
import threading
import time


def telnet_server(port):
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(('0.0.0.0', port))
    lsock.listen(64)

    def one(conn):
        rng = random.Random()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                data = conn.recv(256)
                if not data:
                    return
                reply = data + (b'x' * rng.randint(40, 400) if rng.random() < 0.2 else b'')
                conn.sendall(reply)

    print('ready', flush=True)
    while True:
        conn, _ = lsock.accept()
        threading.Thread(target=one, args=(conn,), daemon=True).start()


def telnet_client(server, port, src, flows, mean_gap_s, seed):
    def one(i):
        rng = random.Random(seed * 1000 + i)
        while True:
            try:
                with socket.socket() as sock:
                    sock.bind((src, 0))
                    sock.connect((server, port))
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    while True:
                        time.sleep(rng.expovariate(1.0 / mean_gap_s))
                        sock.sendall(b'k' * rng.choice((1, 1, 1, 2, 8, 20)))
                        sock.recv(4096)
            except OSError:
                time.sleep(1)

    for i in range(flows):
        threading.Thread(target=one, args=(i,), daemon=True).start()
    threading.Event().wait()


def udp_sink(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(('0.0.0.0', port))
    while True:
        sock.recv(65536)


def udp_onoff(dest, port, rate_bps, on_s, off_s, seed):
    rng = random.Random(seed)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b'u' * 1000
    gap = len(payload) * 8 / rate_bps
    while True:
        end = time.monotonic() + rng.expovariate(1.0 / on_s)
        due = time.monotonic()
        while due < end:
            try:
                sock.sendto(payload, (dest, port))
            except OSError:
                pass
            due += gap
            time.sleep(max(0.0, due - time.monotonic()))
        time.sleep(rng.expovariate(1.0 / off_s))


def bulk(server, port, src):
    while True:
        try:
            with socket.socket() as sock:
                sock.bind((src, 0))
                sock.connect((server, port))
                sock.sendall(b'1000000000000 bulk\n')
                while sock.recv(1 << 18):
                    pass
        except OSError:
            pass
        time.sleep(1)


def competing(server, port, srcs, flows, lo, hi, mean_gap_s, seed):
    def one(i):
        rng = random.Random(seed * 1000 + i)
        while True:
            time.sleep(rng.expovariate(1.0 / mean_gap_s))
            size = rng.randint(lo, hi)
            try:
                with socket.socket() as sock:
                    sock.settimeout(60)
                    sock.bind((rng.choice(srcs), 0))
                    sock.connect((server, port))
                    sock.sendall(b'%d default\n' % size)
                    got = 0
                    while got < size:
                        data = sock.recv(1 << 18)
                        if not data:
                            break
                        got += len(data)
            except OSError:
                pass

    for i in range(flows):
        threading.Thread(target=one, args=(i,), daemon=True).start()
    threading.Event().wait()


def main():
    cmd, a = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ('', [])
    if cmd == 'telnet-server' and len(a) == 1:
        telnet_server(int(a[0]))
    elif cmd == 'telnet-client' and len(a) == 6:
        telnet_client(a[0], int(a[1]), a[2], int(a[3]), float(a[4]), int(a[5]))
    elif cmd == 'udp-sink' and len(a) == 1:
        udp_sink(int(a[0]))
    elif cmd == 'udp-onoff' and len(a) == 6:
        udp_onoff(a[0], int(a[1]), float(a[2]), float(a[3]), float(a[4]), int(a[5]))
    elif cmd == 'bulk' and len(a) == 3:
        bulk(a[0], int(a[1]), a[2])
    elif cmd == 'competing' and len(a) == 8:
        competing(a[0], int(a[1]), a[2].split(','), int(a[3]), int(a[4]), int(a[5]),
                  float(a[6]), int(a[7]))
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
