"""The client id key (gateway/estimates/README.md, "Client ids"; docs/redis-schema.md, "The client
id key's fingerprint"), with a real redis-server and the real binaries:

- a writer to Redis without --client-key-file does not start (exit 2, the message says how to
  make a key);
- the first writer stores its key's fingerprint, SipHash-2-4 of a fixed label under the key,
  which this test computes with its own SipHash (checked against the reference vectors);
- a gateway with another key writes nothing (Redis byte for byte as before), says why with both
  fingerprints, and exits 5; a replica with another key shows it in /metrics, refuses Report
  calls (FAILED_PRECONDITION: it could not write their samples) and exits 5, one with the same
  key answers Report and exits 0;
- key rotation as documented: delete the fingerprint, the next writer (the new key) claims it;
- --prefix-summary files its W_c clients under --client-key-file's key when one is given.
"""
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
ROOT = os.path.join(HERE, '..', '..', '..')
LAB = os.path.join(ROOT, 'pcaps', 'lab', 'cubic_3nets.pcap')
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')
ESTIMATES = os.environ.get('SPAND_ESTIMATES', 'spand-estimates')
FP_KEY = 'spand:{g}:client_key_fp'

M = (1 << 64) - 1


def rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & M


def siphash24(k0, k1, data):
    """SipHash-2-4 (Aumasson and Bernstein 2012), written from the paper for this test."""
    v = [k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d,
         k0 ^ 0x6c7967656e657261, k1 ^ 0x7465646279746573]

    def sipround():
        v[0] = (v[0] + v[1]) & M; v[1] = rotl(v[1], 13); v[1] ^= v[0]; v[0] = rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & M; v[3] = rotl(v[3], 16); v[3] ^= v[2]
        v[0] = (v[0] + v[3]) & M; v[3] = rotl(v[3], 21); v[3] ^= v[0]
        v[2] = (v[2] + v[1]) & M; v[1] = rotl(v[1], 17); v[1] ^= v[2]; v[2] = rotl(v[2], 32)

    end = len(data) - len(data) % 8
    for i in range(0, end, 8):
        m = int.from_bytes(data[i:i + 8], 'little')
        v[3] ^= m; sipround(); sipround(); v[0] ^= m
    b = ((len(data) & 0xff) << 56) | int.from_bytes(data[end:], 'little')
    v[3] ^= b; sipround(); sipround(); v[0] ^= b
    v[2] ^= 0xff
    for _ in range(4):
        sipround()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def test_siphash_reference_vectors():
    # The reference implementation's vectors.h: key 00..0f, message 00..(n-1).
    k0, k1 = 0x0706050403020100, 0x0f0e0d0c0b0a0908
    msg = bytes(range(64))
    assert siphash24(k0, k1, msg[:0]) == 0x726fdb47dd0e0e31
    assert siphash24(k0, k1, msg[:15]) == 0xa129ca6149be45e5
    assert siphash24(k0, k1, msg[:63]) == 0x958a324ceb064572


def fingerprint(key_hex):
    """What a writer with this key file stores: the label under the key, 16 hex digits."""
    raw = bytes.fromhex(key_hex)
    k0, k1 = int.from_bytes(raw[:8], 'little'), int.from_bytes(raw[8:], 'little')
    return '%016x' % siphash24(k0, k1, b'spand client id key fingerprint v1')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def metric(port, name):
    try:
        text = urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics', timeout=2).read().decode()
    except OSError:
        return None
    m = re.search(rf'^{name} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def poll(fn, what, deadline_s=30):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f'timed out waiting for {what}')


@pytest.fixture
def redis():
    if shutil.which('redis-server') is None:
        pytest.skip('redis-server not installed')
    tmp = tempfile.mkdtemp(prefix='spand-key-')
    port = free_port()
    srv = subprocess.Popen(['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--save',
                            '', '--appendonly', 'no', '--dir', tmp], stdout=subprocess.DEVNULL)

    def cli(*args):
        return subprocess.run(['redis-cli', '-p', str(port), *args], capture_output=True,
                              text=True, check=True).stdout
    poll(lambda: subprocess.run(['redis-cli', '-p', str(port), 'ping'], capture_output=True,
                                text=True).stdout.strip() == 'PONG', 'redis-server')
    yield port, cli, tmp
    srv.terminate()
    srv.wait(timeout=10)
    shutil.rmtree(tmp, ignore_errors=True)


def key_file(tmp, name):
    key = os.urandom(16).hex()
    path = os.path.join(tmp, name)
    with open(path, 'w') as f:
        f.write(key + '\n')
    return path, key


def windows(cli):
    """Every window hash, field by field: what the writers have put in Redis."""
    keys = sorted(cli('--scan', '--pattern', 'spand:{*}:w').split())
    return {k: cli('HGETALL', k) for k in keys}


def gateway(port, *extra):
    return subprocess.run([GATEWAY, '--pcap', LAB, '--redis', f'redis://127.0.0.1:{port}',
                           *extra], capture_output=True, text=True, timeout=120)


def report_status(grpc_port):
    """One Report call with one message naming a client and no value (the service rejects the
    message, not the call): the call's status code and details."""
    import grpc
    msg = b'\x0a\x09' + b'10.99.0.9'  # field 1 (client), a 9-byte string
    with grpc.insecure_channel(f'127.0.0.1:{grpc_port}') as ch:
        report = ch.stream_unary('/spand.v1.Estimates/Report')  # bytes in, bytes out
        try:
            report(iter([msg]), timeout=10)
            return grpc.StatusCode.OK, ''
        except grpc.RpcError as e:
            return e.code(), e.details()


def test_writers_need_a_key_and_must_agree(redis):
    port, cli, tmp = redis
    # No key file: neither writer starts, and nothing reaches Redis.
    r = gateway(port)
    assert r.returncode == 2, r.stderr
    assert '--client-key-file is required' in r.stderr and 'od -An -tx1 -N16' in r.stderr
    r = subprocess.run([ESTIMATES, '--redis', f'redis://127.0.0.1:{port}', '--grpc-listen',
                        '127.0.0.1:0'], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and '--client-key-file is required' in r.stderr, r.stderr
    assert cli('DBSIZE').strip() == '0'

    path_a, key_a = key_file(tmp, 'a.key')
    path_b, key_b = key_file(tmp, 'b.key')
    fp_a, fp_b = fingerprint(key_a), fingerprint(key_b)
    r = gateway(port, '--client-key-file', path_a)
    assert r.returncode == 0, r.stderr
    assert f'client id key: fingerprint {fp_a} ({path_a})' in r.stderr, r.stderr
    assert cli('GET', FP_KEY).strip() == fp_a  # a fingerprint, not the key
    before = windows(cli)
    assert before

    # Another key: nothing written (every window hash as it was, no field of a second writer),
    # the reason on stderr with both fingerprints, exit 5.
    r = gateway(port, '--client-key-file', path_b)
    assert r.returncode == 5, r.stderr
    assert 'client id key mismatch' in r.stderr and fp_a in r.stderr and fp_b in r.stderr, r.stderr
    assert windows(cli) == before
    assert cli('GET', FP_KEY).strip() == fp_a

    # Replicas: the one with the deployment's key answers Report and exits 0; the other flags
    # the mismatch in /metrics (gauge and counter) within a few flushes, refuses Report calls
    # (their samples could not be written), says it, and exits 5.
    import grpc
    for path, mismatch in ((path_a, False), (path_b, True)):
        mport, gport = free_port(), free_port()
        rep = subprocess.Popen([ESTIMATES, '--redis', f'redis://127.0.0.1:{port}',
                                '--client-key-file', path, '--grpc-listen', f'127.0.0.1:{gport}',
                                '--metrics-listen', f'127.0.0.1:{mport}', '--flush-interval-ms',
                                '100'], stderr=subprocess.PIPE, text=True)
        try:
            if mismatch:
                poll(lambda: metric(mport, 'spand_redis_client_key_mismatch') == 1,
                     'the mismatch gauge')
                assert metric(mport, 'spand_redis_client_key_mismatch_total') >= 1
                code, details = report_status(gport)
                assert code == grpc.StatusCode.FAILED_PRECONDITION, (code, details)
                assert 'client id key' in details, details
            else:
                poll(lambda: metric(mport, 'spand_redis_client_key_mismatch') == 0, 'metrics')
                time.sleep(0.5)  # several flushes, each free to find a difference
                assert metric(mport, 'spand_redis_client_key_mismatch_total') == 0
                assert report_status(gport) == (grpc.StatusCode.OK, '')
        finally:
            rep.send_signal(signal.SIGTERM)
            _, err = rep.communicate(timeout=30)
        assert rep.returncode == (5 if mismatch else 0), err
        assert ('client id key mismatch' in err) == mismatch, err

    # Rotation (docs/redis-schema.md): delete the fingerprint, start the writers with the new
    # key: the first claims it, and its samples go in.
    cli('DEL', FP_KEY)
    r = gateway(port, '--client-key-file', path_b)
    assert r.returncode == 0, r.stderr
    assert cli('GET', FP_KEY).strip() == fp_b
    assert windows(cli) != before


def summary(path, *extra):
    r = subprocess.run([GATEWAY, '--pcap', path, '--prefix-summary', *extra], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_prefix_summary_uses_the_key_file(tmp_path):
    """The summary's wc_median comes from the 16 W_c clients with the smallest ids: with more than
    16 clients in a prefix the key decides which 16 (gateway/estimates/README.md, "Client ids").
    A synthetic mix with 20+ W_c clients per /24 (tests/bench/gen_synthetic.py) therefore gives
    another summary under a key file than under the public key; 'public' gives exactly the
    summary without the option (the replays' output stays byte-identical)."""
    pcap = str(tmp_path / 'mix.pcap')
    subprocess.run(['python3', os.path.join(ROOT, 'tests', 'bench', 'gen_synthetic.py'), pcap,
                    '--connections', '4000', '--concurrency', '400', '--seed', '1'], check=True,
                   capture_output=True)
    plain = summary(pcap)
    assert summary(pcap, '--client-key-file', 'public') == plain
    path = tmp_path / 'k.key'
    path.write_text(os.urandom(16).hex() + '\n')
    keyed = summary(pcap, '--client-key-file', str(path))
    assert keyed != plain
    # Only the client-id-dependent columns move: the lines' prefixes and sample counts agree.
    assert [l.split()[:2] for l in keyed.splitlines()] == [l.split()[:2] for l in plain.splitlines()]


def pb_fields(data):
    """A protobuf message's fields (field number -> last value): varints as ints, length-delimited
    ones as bytes; enough for Estimate's prefix (1), samples (2) and verdict (8)."""
    out, i = {}, 0
    while i < len(data):
        key, i = varint(data, i)
        kind = key & 7
        if kind == 0:
            out[key >> 3], i = varint(data, i)
        elif kind == 2:
            n, i = varint(data, i)
            out[key >> 3] = data[i:i + n]
            i += n
        elif kind == 1:
            i += 8
        elif kind == 5:
            i += 4
        else:
            raise ValueError(f'wire type {kind}')
    return out


def varint(data, i):
    v, shift = 0, 0
    while True:
        b = data[i]
        v |= (b & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not b & 0x80:
            return v, i


def get_estimate(grpc_port, address):
    """The Estimate for `address`, or None while the server is not up yet."""
    import grpc
    req = b'\x0a' + bytes([len(address)]) + address.encode()  # GetRequest.address (field 1)
    with grpc.insecure_channel(f'127.0.0.1:{grpc_port}') as ch:
        try:
            return pb_fields(ch.unary_unary('/spand.v1.Estimates/Get')(req, timeout=10))
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                return None
            raise


def redis_state(port):
    """Every key with its serialized value (DUMP): what a read-only replica must leave alone."""
    def cli(*args):
        return subprocess.run(['redis-cli', '-p', str(port), *args], capture_output=True,
                              check=True).stdout
    return {k: cli('DUMP', k) for k in sorted(cli('--scan').split())}


def test_read_only_replica(redis):
    """--read-only: no --client-key-file needed; Get answers what a writing replica answers for
    the same Redis; Report is UNIMPLEMENTED; Redis is left byte for byte as it was; exit 0."""
    import grpc
    port, cli, tmp = redis
    path_a, _ = key_file(tmp, 'a.key')
    assert gateway(port, '--client-key-file', path_a).returncode == 0
    # A prefix the replay wrote: spand:{<prefix>}:w.
    prefix = sorted(windows(cli))[0].split('{', 1)[1].split('}', 1)[0]
    address = prefix.split('/')[0]
    before = redis_state(port)

    answers = {}
    for extra in (['--read-only'], ['--client-key-file', path_a]):
        gport = free_port()
        rep = subprocess.Popen([ESTIMATES, '--redis', f'redis://127.0.0.1:{port}',
                                '--grpc-listen', f'127.0.0.1:{gport}', *extra],
                               stderr=subprocess.PIPE, text=True)
        try:
            est = poll(lambda: get_estimate(gport, address), 'Get')
            answers[extra[0]] = est
            if extra[0] == '--read-only':
                code, details = report_status(gport)
                assert code == grpc.StatusCode.UNIMPLEMENTED, (code, details)
                time.sleep(0.5)  # several flush intervals of a writing replica
                assert redis_state(port) == before
        finally:
            rep.send_signal(signal.SIGTERM)
            _, err = rep.communicate(timeout=30)
        assert rep.returncode == 0, err
        if extra[0] == '--read-only':
            assert 'read-only' in err, err
    ro, rw = answers['--read-only'], answers['--client-key-file']
    assert ro.get(1) == prefix.encode(), ro
    assert ro.get(2, 0) > 0 and ro.get(2) == rw.get(2), (ro, rw)  # W_c samples
    assert ro.get(8) == rw.get(8), (ro, rw)                          # verdict
