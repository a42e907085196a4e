"""TLS and mutual TLS from the clients (spandctl, spand-agent) to spand.v1 (docs/api.md,
"Security"), with the test PKI of tests/unit/service/test_certs.hpp (a CA, a certificate for
localhost / 127.0.0.1, a client certificate).

A fake spand.v1 server (grpcio, TLS that requires a client certificate signed by the CA, messages
from the build's descriptor set) answers Get with a fixed estimate, so a call that gets through
shows in the client's output; spandctl is also run against the real spand-estimates with mutual
TLS (Redis unreachable: a call that gets through is answered 'estimate store unavailable')."""
import os
import re
import signal
import subprocess
import threading
from concurrent import futures

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CERTS_HPP = os.path.join(HERE, '..', 'service', 'test_certs.hpp')
SPANDCTL = os.environ.get('SPANDCTL')
AGENT = os.environ.get('SPAND_AGENT')
ESTIMATES = os.environ.get('SPAND_ESTIMATES')
DESC = os.environ.get('SPAND_DESC')
PREFIX = '198.51.100.0/24'


@pytest.fixture(scope='module')
def pki(tmp_path_factory):
    text = open(CERTS_HPP).read()
    pems = dict(re.findall(r'inline constexpr const char\* (\w+) = R"pem\((.*?)\)pem";', text,
                           re.S))
    d = tmp_path_factory.mktemp('pki')
    files = {}
    for name, key in (('ca', 'kTestCaPem'), ('server_cert', 'kTestServerCertPem'),
                      ('server_key', 'kTestServerKeyPem'), ('client_cert', 'kTestClientCertPem'),
                      ('client_key', 'kTestClientKeyPem')):
        files[name] = str(d / (name + '.pem'))
        with open(files[name], 'w') as f:
            f.write(pems[key])
    files['token'] = str(d / 'token')
    with open(files['token'], 'w') as f:
        f.write('s3cret\n')
    return files


@pytest.fixture(scope='module')
def fake_server(pki):
    grpc = pytest.importorskip('grpc')
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    if not DESC:
        pytest.skip('no descriptor set (SPAND_DESC)')
    fds = descriptor_pb2.FileDescriptorSet()
    with open(DESC, 'rb') as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    factory = message_factory.MessageFactory(pool)
    get_req = factory.GetPrototype(pool.FindMessageTypeByName('spand.v1.GetRequest'))
    estimate = factory.GetPrototype(pool.FindMessageTypeByName('spand.v1.Estimate'))
    calls = []

    def get(request, context):
        calls.append(request.address)
        e = estimate(prefix=PREFIX, samples=50, wc_segments=20.0, rtt_ms=50.0, min_rtt_ms=40.0,
                     rtt_samples=50, age_s=1.0)
        e.verdict = pool.FindEnumTypeByName('spand.v1.Verdict').values_by_name[
            'USE_ESTIMATE'].number
        return e

    def watch(request, context):  # the agent's stream: nothing to say, end at once
        return iter(())

    handler = grpc.method_handlers_generic_handler('spand.v1.Estimates', {
        'Get': grpc.unary_unary_rpc_method_handler(
            get, request_deserializer=get_req.FromString,
            response_serializer=estimate.SerializeToString)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    read = lambda k: open(pki[k], 'rb').read()
    creds = grpc.ssl_server_credentials([(read('server_key'), read('server_cert'))],
                                        root_certificates=read('ca'), require_client_auth=True)
    port = server.add_secure_port('127.0.0.1:0', creds)
    server.start()
    yield port, calls
    server.stop(0)


def run(argv, timeout=30):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def spandctl(port, pki, *tls, server='127.0.0.1'):
    args = [SPANDCTL, '--server', f'{server}:{port}', '--timeout-ms', '3000', *tls]
    mapped = []
    for a in args:
        mapped.append(pki.get(a, a))
    return run(mapped + ['get', '198.51.100.7'])


# docs/exit-status.md: the server answered an error or could not be reached.
EXIT_RUNTIME = 3
MTLS = ('--tls-ca', 'ca', '--tls-cert', 'client_cert', '--tls-key', 'client_key')


def test_spandctl_mutual_tls(fake_server, pki):
    if not SPANDCTL:
        pytest.skip('spandctl not built')
    port, calls = fake_server
    p = spandctl(port, pki, *MTLS)
    assert p.returncode == 0, p.stderr
    assert PREFIX in p.stdout and 'USE_ESTIMATE' in p.stdout
    n = len(calls)
    # Refused: no client certificate; plain text to a TLS port; a CA that did not sign the
    # server's certificate (the client's own certificate as the CA); a name the certificate lacks.
    for tls in (('--tls-ca', 'ca'), (),
                ('--tls-ca', 'client_cert', '--tls-cert', 'client_cert', '--tls-key',
                 'client_key'),
                MTLS + ('--tls-server-name', 'other.example')):
        p = spandctl(port, pki, *tls)
        assert p.returncode == EXIT_RUNTIME, (tls, p.stdout, p.stderr)
        assert 'UNAVAILABLE' in p.stderr, (tls, p.stderr)
    assert len(calls) == n  # none of them reached the handler
    # The certificate names localhost: with the name given, an address works too.
    p = spandctl(port, pki, *MTLS, '--tls-server-name', 'localhost', server='127.0.0.1')
    assert p.returncode == 0, p.stderr


def test_spandctl_tls_usage_errors(pki):
    if not SPANDCTL:
        pytest.skip('spandctl not built')
    for tls, named in ((('--tls-cert', 'client_cert'), '--tls-cert'),
                       (('--tls-cert', 'client_cert', '--tls-key', 'client_key'), '--tls-ca'),
                       (('--tls-ca', '/nonexistent/ca.pem'), '--tls-ca'),
                       (('--tls-ca', 'ca', '--tls-cert', '/nonexistent', '--tls-key',
                         'client_key'), '--tls-cert')):
        p = spandctl(1, pki, *tls)
        assert p.returncode == 2, (tls, p.stderr)
        assert named in p.stderr, (tls, p.stderr)
    p = run([SPANDCTL, 'get', '198.51.100.7', '--tls-ca'])  # no value after the command
    assert p.returncode == 2 and '--tls-ca needs a value' in p.stderr, p.stderr


def test_spandctl_against_spand_estimates_with_mutual_tls(pki):
    if not SPANDCTL or not ESTIMATES:
        pytest.skip('spandctl or spand-estimates not built')
    svc = subprocess.Popen([ESTIMATES, '--redis', 'redis://127.0.0.1:1', '--clock', 'wall',
                            '--client-key-file', 'public',
                            '--grpc-listen', '127.0.0.1:0', '--grpc-tls-cert', pki['server_cert'],
                            '--grpc-tls-key', pki['server_key'], '--grpc-client-ca', pki['ca']],
                           stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in svc.stderr:
            m = re.search(r'serving spand.v1 on port (\d+)', line)
            if m:
                port = int(m.group(1))
                break
        assert port, 'spand-estimates did not start'
        threading.Thread(target=svc.stderr.read, daemon=True).start()
        p = spandctl(port, pki, *MTLS)
        assert p.returncode == EXIT_RUNTIME and 'estimate store unavailable' in p.stderr, p.stderr
        p = spandctl(port, pki, '--tls-ca', 'ca')  # no client certificate
        assert p.returncode == EXIT_RUNTIME and 'estimate store unavailable' not in p.stderr, \
            p.stderr
        assert 'UNAVAILABLE' in p.stderr
    finally:
        svc.send_signal(signal.SIGTERM)
        svc.wait(timeout=30)


def agent(port, pki, *tls):
    args = [AGENT, '--dry-run', '--once', '-s', f'127.0.0.1:{port}', '-p', '0:15000', '-P', PREFIX,
            '--metrics', '']
    return run(args + [pki.get(a, a) for a in tls])


def test_agent_mutual_tls(fake_server, pki):
    if not AGENT:
        pytest.skip('spand-agent not built')
    port, calls = fake_server
    p = agent(port, pki, *MTLS, '--report-token-file', 'token')
    assert p.returncode == 0, p.stderr
    assert f'dry-run: apply port=0 prefix={PREFIX}' in p.stderr + p.stdout, p.stderr
    n = len(calls)
    p = agent(port, pki, '--tls-ca', 'ca')  # no client certificate: no estimate, nothing applied
    assert p.returncode == 0, p.stderr
    assert 'dry-run: apply' not in p.stderr + p.stdout
    assert 'Get to the estimate service failed' in p.stderr, p.stderr  # said, not silent
    assert len(calls) == n
    for tls, named in ((('--tls-cert', 'client_cert', '--tls-key', 'client_key'), '--tls-ca'),
                       (('--tls-ca', '/nonexistent'), '--tls-ca'),
                       (('--report-token-file', '/nonexistent'), '--report-token-file')):
        p = agent(port, pki, *tls)
        assert p.returncode == 2, (tls, p.stderr)
        assert named in p.stderr, (tls, p.stderr)
