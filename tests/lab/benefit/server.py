"""The benefit lab's server: one listener per port, each with its arm and congestion control.

usage: server.py LOG_JSONL PORT:ARM:CC [PORT:ARM:CC ...]

Protocol (one line per request, several requests on a persistent connection):
    client -> server   "SIZE ARM\n"
    server -> client   SIZE bytes
The server answers until the client closes. Per connection it logs one JSON line at accept
(the kernel's initial cwnd and ssthresh, read with TCP_INFO before any data is sent: what the
agent's sock_ops program applied, or the kernel default) and one at close (retransmissions,
DSACKs, reordering, RTT), keyed by the client's address and port.

Which arm a connection gets is decided by the listener it reached: the agent's sock_ops program
sees a socket by its cgroup and local port at the handshake, before any request line, so the
port (and the process the run put into a cgroup) is the only place that can decide it. The ARM
word in the request is checked against the listener's arm.
"""
import json
import socket
import struct
import sys
import threading
import time

CHUNK = b'\x5a' * 65536
_log_lock = threading.Lock()


def tcp_info(sock):
    """The fields of struct tcp_info (linux/tcp.h) the lab reads."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    raw = raw.ljust(232, b'\0')
    u32 = lambda off: struct.unpack_from('I', raw, off)[0]
    u64 = lambda off: struct.unpack_from('Q', raw, off)[0]
    return {
        'ca_state': raw[1], 'rto_us': u32(8), 'snd_mss': u32(16),
        'rtt_us': u32(68), 'rttvar_us': u32(72), 'ssthresh': u32(76), 'cwnd': u32(80),
        'total_retrans': u32(100), 'pacing_rate': u64(104), 'max_pacing_rate': u64(112),
        'segs_out': u32(136), 'min_rtt_us': u32(148), 'data_segs_out': u32(156),
        'bytes_retrans': u64(208), 'dsack_dups': u32(216), 'reord_seen': u32(220),
    }


def log(out, rec):
    with _log_lock:
        out.write(json.dumps(rec) + '\n')
        out.flush()


def serve_conn(conn, peer, port, arm, cc, out):
    with conn:
        info = tcp_info(conn)
        used = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b'\0').decode()
        log(out, {'ev': 'accept', 't': time.time(), 'port': port, 'arm': arm, 'cc': used,
                  'src': peer[0], 'sport': peer[1], 'init_cwnd': info['cwnd'],
                  'init_ssthresh': info['ssthresh'], 'max_pacing_rate': info['max_pacing_rate'],
                  'priority': conn.getsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY)})
        requests = 0
        reader = conn.makefile('rb')
        try:
            while True:
                line = reader.readline()
                if not line:
                    break
                words = line.split()
                size = int(words[0])
                if len(words) > 1 and words[1].decode() != arm:
                    log(out, {'ev': 'arm_mismatch', 'port': port, 'arm': arm,
                              'asked': words[1].decode()})
                left = size
                while left > 0:
                    left -= conn.send(CHUNK[:min(left, len(CHUNK))])
                requests += 1
        except (OSError, ValueError):
            pass
        rec = {'ev': 'close', 't': time.time(), 'port': port, 'arm': arm, 'src': peer[0],
               'sport': peer[1], 'requests': requests}
        try:
            rec.update(tcp_info(conn))
        except OSError:
            pass
        log(out, rec)


def make_listener(port, cc):
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit it; in a network namespace only root may pick cubic.
    lsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    lsock.bind(('0.0.0.0', port))
    lsock.listen(1024)
    return lsock


def accept_loop(lsock, port, arm, cc, out):
    while True:
        conn, peer = lsock.accept()
        threading.Thread(target=serve_conn, args=(conn, peer, port, arm, cc, out),
                         daemon=True).start()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = open(sys.argv[1], 'a')
    for spec in sys.argv[2:]:
        port, arm, cc = spec.split(':')
        lsock = make_listener(int(port), cc)
        threading.Thread(target=accept_loop, args=(lsock, int(port), arm, cc, out),
                         daemon=True).start()
    print('ready', flush=True)
    threading.Event().wait()


if __name__ == '__main__':
    main()
