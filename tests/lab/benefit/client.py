"""The benefit lab's client: runs a plan of rounds, prints one JSON line per transfer.

usage: client.py PLAN_JSON [OUT_JSONL]

PLAN_JSON: {"timeout_s": 30, "rounds": [{"round": 0, "idle_s": 1.2, "phase": "measure",
            "slots": [{"arm": "default", "group": "default", "size": 30000,
                       "src": "10.1.1.10", "host": "10.0.0.1", "port": 8001,
                       "persistent": false, "jitter_s": 0.013}, ...]}, ...]}

A round waits idle_s, then starts every slot at its jitter, all at once (concurrency is the number
of slots), and ends when the last one finishes. Per transfer: response_s, from the request's
first byte sent to the response's last byte received (the paper's metric, handshake left out),
and total_s, from connect() to the last byte (equal to response_s on a reused persistent
connection, whose connect_s is 0). Persistent arms keep their connections per (arm, source) and
reuse an idle one.
"""
import json
import socket
import sys
import threading
import time

_pool = {}
_pool_lock = threading.Lock()
_out_lock = threading.Lock()


def take(slot):
    key = (slot['arm'], slot['src'], slot['host'], slot['port'])
    with _pool_lock:
        idle = _pool.get(key)
        if idle:
            return idle.pop(), key
    return None, key


def give_back(key, sock):
    with _pool_lock:
        _pool.setdefault(key, []).append(sock)


def transfer(slot, rnd, timeout_s, t0, out):
    rec = {'round': rnd['round'], 'phase': rnd.get('phase', 'measure'), 'arm': slot['arm'],
           'group': slot.get('group', slot['arm']), 'size': slot['size'], 'src': slot['src'],
           'port': slot['port'], 'concurrency': len(rnd['slots']), 'ok': False}
    time.sleep(slot.get('jitter_s', 0))
    sock, key = (None, None)
    if slot.get('persistent'):
        sock, key = take(slot)
    reused = sock is not None
    began = time.monotonic()
    rec['start_s'] = round(began - t0, 6)
    try:
        if sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(timeout_s)
            sock.bind((slot['src'], 0))
            sock.connect((slot['host'], slot['port']))
        connected = time.monotonic()
        rec['sport'] = sock.getsockname()[1]
        rec['reused'] = reused
        sock.sendall(b'%d %s\n' % (slot['size'], slot['arm'].encode()))
        sent = time.monotonic()
        got = 0
        while got < slot['size']:
            data = sock.recv(1 << 18)
            if not data:
                break
            got += len(data)
        done = time.monotonic()
        rec.update(got=got, ok=got == slot['size'], connect_s=round(connected - began, 6),
                   response_s=round(done - sent, 6), total_s=round(done - began, 6))
    except OSError as err:
        rec['error'] = f'{err.__class__.__name__}: {err}'
    if slot.get('persistent') and rec['ok']:
        give_back(key, sock)
    elif sock is not None:
        sock.close()
    with _out_lock:
        out.write(json.dumps(rec) + '\n')
        out.flush()


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    plan = json.load(open(sys.argv[1]))
    out = open(sys.argv[2], 'a') if len(sys.argv) == 3 else sys.stdout
    timeout_s = plan.get('timeout_s', 30)
    t0 = time.monotonic()
    for rnd in plan['rounds']:
        time.sleep(rnd.get('idle_s', 0))
        threads = [threading.Thread(target=transfer, args=(slot, rnd, timeout_s, t0, out),
                                    daemon=True) for slot in rnd['slots']]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout_s + 5)
    with _pool_lock:
        for socks in _pool.values():
            for sock in socks:
                sock.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
