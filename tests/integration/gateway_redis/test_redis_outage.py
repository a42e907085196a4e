"""The gateway when Redis goes away: it keeps working, keeps a bounded backlog, shows the gap in
/metrics, and writes everything once Redis is back. Real redis-server, real gateway binary.

Sequence: the gateway replays a capture with Redis down (every flush fails), keeps serving; the
test reads /metrics (errors > 0, backlog > 0), starts Redis on the same port, waits for the
backlog to drain, and checks Redis holds one window hash per client prefix of --samples-out.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PCAPS = os.path.join(HERE, '..', '..', '..', 'pcaps', 'real')
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')
DEADLINE_S = 60


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def poll(fn, what):
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f'timed out waiting for {what}')


def metric(port, name):
    try:
        text = urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics', timeout=2).read().decode()
    except OSError:
        return None
    m = re.search(rf'^{name}(?:{{[^}}]*}})? (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


@pytest.mark.skipif(shutil.which('redis-server') is None, reason='redis-server not installed')
def test_gateway_survives_redis_outage_and_catches_up():
    tmp = tempfile.mkdtemp(prefix='spand-outage-')
    redis_port, metrics_port, grpc_port = free_port(), free_port(), free_port()
    samples = os.path.join(tmp, 'samples.jsonl')
    gw = subprocess.Popen(
        [GATEWAY, '--pcap', os.path.join(PCAPS, 'ndpi_reddit.pcap'), '--samples-out', samples,
         '--redis', f'redis://127.0.0.1:{redis_port}', '--client-key-file', 'public',
         '--flush-interval-ms', '100',
         '--metrics-listen', f'127.0.0.1:{metrics_port}', '--grpc-listen',
         f'127.0.0.1:{grpc_port}', '--keep-serving'],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, 'gw.log'), 'w'))
    redis = None
    try:
        # Redis is down: the replay finishes anyway and the failures show in /metrics.
        poll(lambda: (metric(metrics_port, 'spand_redis_flush_errors_total') or 0) > 0,
             'flush errors while Redis is down')
        poll(lambda: (metric(metrics_port, 'spand_redis_backlog_updates') or 0) > 0,
             'a backlog while Redis is down')
        # The first flush fails 100 ms in, possibly before the replay ends (a loaded machine):
        # wait for the replay, then every frame of the capture must have been read
        # (MANIFEST.tsv: 1942), and no more.
        poll(lambda: (metric(metrics_port, 'spand_packets_received_total') == 1942
                      or gw.poll() is not None), 'the replay to read all 1942 frames')
        assert gw.poll() is None, 'the gateway must keep running without Redis'
        assert metric(metrics_port, 'spand_packets_received_total') == 1942

        redis = subprocess.Popen(['redis-server', '--port', str(redis_port), '--bind',
                                  '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmp],
                                 stdout=subprocess.DEVNULL)
        poll(lambda: metric(metrics_port, 'spand_redis_backlog_updates') == 0,
             'the backlog to drain after Redis came back')
        # W_c and RTT samples are aggregated; decrease readings are --samples-out only.
        records = [json.loads(l) for l in open(samples)]
        prefixes = {r['prefix'] for r in records if r['kind'] in ('wc', 'rtt')}
        assert prefixes
        keys = subprocess.run(['redis-cli', '-p', str(redis_port), '--scan', '--pattern',
                               'spand:{*}:w'], capture_output=True, text=True,
                              check=True).stdout.split()
        stored = {k[len('spand:{'):-len('}:w')] for k in keys}
        assert prefixes <= stored, f'missing in Redis: {prefixes - stored}'
    finally:
        gw.send_signal(signal.SIGTERM)
        try:
            gw.wait(timeout=20)
        except subprocess.TimeoutExpired:
            gw.kill()
        if redis:
            redis.terminate()
            redis.wait(timeout=10)
        log = open(os.path.join(tmp, 'gw.log')).read()
        shutil.rmtree(tmp, ignore_errors=True)
    # The outage was said on stderr (rate limited), and nothing was lost in the end: exit 0.
    assert 'spand-gateway: Redis: ' in log and 'failed flushes' in log, log
    assert gw.returncode == 0, log
