"""Every numeric option of every binary refuses values outside its range: exit status 2 and a
message that names the option, before any input is read or any port is bound.

spand-gateway and spand-estimates (CLI11): the numeric options are read from --help (type UINT,
INT or FLOAT), so an option added later without a range fails test_every_numeric_option_has_a_
range until it gets one (or a reason in FULL_TYPE_BY_DESIGN). Each range that --help states is
then probed just outside both ends, and with a non-number, a negative number, NaN and a value
beyond 64 bits. spandctl and spand-agent (hand-written parsers) have their options listed here.
The values come from each option's meaning (a port fits 16 bits, a timeout of 0 expires every
connection at once, NaN disables a comparison), not from the binaries' output."""
import os
import re
import subprocess

import pytest

GATEWAY = os.environ.get('SPAND_GATEWAY')
ESTIMATES = os.environ.get('SPAND_ESTIMATES')
SPANDCTL = os.environ.get('SPANDCTL')
AGENT = os.environ.get('SPAND_AGENT')
HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURE = os.path.join(HERE, '..', '..', '..', 'pcaps', 'real', 'tcptrace_long_rtt.dmp')
EXIT_USAGE = 2

# Numeric options whose whole type is valid, and why.
FULL_TYPE_BY_DESIGN = {
    '--duration-s': 'seconds of a live capture; 0 = until SIGINT/SIGTERM',
    '--report-rate': 'Report messages per second per client; 0 = no limit',
}

# Values every numeric option refuses, whatever its range.
ALWAYS_BAD = ['abc', '', '1x', '18446744073709551616', '-1e400', 'nan']


def run(argv):
    # A bad value must stop the binary at once; the timeout catches one that starts serving.
    return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)


def numeric_options(binary):
    """{option: (type, lo, hi) or (type, None, None)} from a CLI11 --help."""
    out = run([binary, '--help']).stdout
    opts = {}
    for m in re.finditer(r'^\s+(--[a-z0-9-]+) (UINT|INT|FLOAT)(?::\S+ in \[(\S+) - (\S+)\])?',
                         out, re.M):
        name, typ, lo, hi = m.groups()
        opts[name] = (typ, float(lo) if lo else None, float(hi) if hi else None)
    return opts


def probes(typ, lo, hi):
    """Values just outside [lo, hi] (none below 0 for unsigned types: ALWAYS_BAD has those)."""
    vals = []
    step = 1 if typ != 'FLOAT' else 1e-3 * max(1.0, abs(hi))
    if lo is not None and (lo > 0 or typ == 'FLOAT'):
        vals.append(lo - step)
    if hi is not None:
        vals.append(hi + step)
    return [str(int(v)) if typ != 'FLOAT' else repr(v) for v in vals] + ALWAYS_BAD


def gateway_argv(opt, value):
    return [GATEWAY, '--pcap', CAPTURE, f'{opt}={value}']


def estimates_argv(opt, value):
    argv = [ESTIMATES, '--redis', 'redis://127.0.0.1:1', '--client-key-file', 'public',
            f'{opt}={value}']
    if opt != '--grpc-listen':
        argv += ['--grpc-listen', '127.0.0.1:0']
    return argv


BINARIES = [('spand-gateway', GATEWAY, gateway_argv), ('spand-estimates', ESTIMATES, estimates_argv)]


def assert_refused(argv, opt):
    p = run(argv)
    assert p.returncode == EXIT_USAGE, (argv, p.returncode, p.stderr[-500:])
    assert opt in p.stderr, (argv, p.stderr[-500:])


@pytest.mark.parametrize('name,binary,argv_of', BINARIES)
def test_every_numeric_option_has_a_range(name, binary, argv_of):
    if not binary:
        pytest.skip(f'{name} not built')
    opts = numeric_options(binary)
    assert len(opts) >= 10, f'{name} --help lists too few numeric options: {opts}'
    unranged = [o for o, (_, lo, hi) in opts.items()
                if lo is None and o not in FULL_TYPE_BY_DESIGN]
    assert not unranged, f'{name}: numeric options without a range: {unranged}'


@pytest.mark.parametrize('name,binary,argv_of', BINARIES)
def test_out_of_range_values_are_refused_naming_the_option(name, binary, argv_of):
    if not binary:
        pytest.skip(f'{name} not built')
    for opt, (typ, lo, hi) in numeric_options(binary).items():
        for value in probes(typ, lo, hi):
            assert_refused(argv_of(opt, value), opt)


@pytest.mark.parametrize('name,binary,argv_of', BINARIES)
def test_listen_addresses_and_the_issue_cases(name, binary, argv_of):
    if not binary:
        pytest.skip(f'{name} not built')
    # issue 12: 127.0.0.1:99999 served on 34463; 0 for a flush interval, a backlog, a sample
    # minimum; NaN switched the outlier rule off.
    cases = [('--grpc-listen', '127.0.0.1:99999'), ('--grpc-listen', '127.0.0.1:port'),
             ('--metrics-listen', '127.0.0.1:65536'), ('--metrics-listen', 'nohostport'),
             ('--max-wc-cv', 'nan'), ('--max-wc-cv', 'inf'), ('--min-samples', '0'),
             ('--flush-interval-ms', '0')]
    if name == 'spand-gateway':
        cases += [('--backlog-max', '0'), ('--syn-timeout-ms', '0'), ('--idle-timeout-s', '0'),
                  ('--closing-timeout-ms', '0'), ('--hash-seed', '-1'),
                  ('--hash-seed', '0x1ffffffffffffffff')]
    else:
        cases += [('--read-connections', '0'), ('--decay-half-life-s', '-1'),
                  ('--decay-half-life-s', 'nan'), ('--window-s', '0'), ('--bucket-s', '0')]
    for opt, value in cases:
        assert_refused(argv_of(opt, value), opt)


def test_good_values_still_run():
    if not GATEWAY:
        pytest.skip('spand-gateway not built')
    p = run([GATEWAY, '--pcap', CAPTURE, '--syn-timeout-ms', '1', '--idle-timeout-s', '604800',
             '--hash-seed', '0xffffffffffffffff', '--max-wc-cv', '0'])
    assert p.returncode == 0, p.stderr


def test_spandctl_numeric_options():
    if not SPANDCTL:
        pytest.skip('spandctl not built')
    # A server that is never reached: every case must fail in argument parsing.
    cases = [(['--timeout-ms', '0', 'top'], '--timeout-ms'),
             (['--timeout-ms', '9223372036854775808', 'top'], '--timeout-ms'),
             (['--timeout-ms', '86400001', 'top'], '--timeout-ms'),
             (['--timeout-ms', '-5', 'top'], '--timeout-ms'),
             (['get', '198.51.100.7', '--bytes', '-1'], '--bytes'),
             (['get', '198.51.100.7', '--bytes', 'x'], '--bytes'),
             (['get', '198.51.100.7', '--bytes', '1000', '--mss', '0'], '--mss'),
             (['get', '198.51.100.7', '--bytes', '1000', '--mss', '65536'], '--mss'),
             (['get', '198.51.100.7', '--bytes', '1000', '--b', '0'], '--b'),
             (['watch', '198.51.100.0/24', '--count', '0'], '--count'),
             (['top', '-n', '0'], 'top'),
             (['cwnd', '--wc', '0', '--segments', '10'], '--wc'),
             (['cwnd', '--wc', '10', '--segments', '-1'], '--segments'),
             (['cwnd', '--wc', '10', '--bytes', '1000', '--mss', '0'], '--mss'),
             (['cwnd', '--wc', '10', '--segments', '10', '--srtt-ms', 'nan'], '--srtt-ms')]
    for args, opt in cases:
        p = run([SPANDCTL, '--server', '127.0.0.1:1', *args])
        assert p.returncode == EXIT_USAGE, (args, p.returncode, p.stderr)
        assert opt in p.stderr, (args, p.stderr)


def test_agent_numeric_options():
    if not AGENT:
        pytest.skip('spand-agent not built')
    base = [AGENT, '--dry-run', '--once', '-f', '/nonexistent']
    cases = [(['--max-initial-cwnd', '0'], '--max-initial-cwnd'),
             (['--max-initial-cwnd', '65536'], '--max-initial-cwnd'),
             (['--max-initial-cwnd', '-1'], '--max-initial-cwnd'),
             (['--min-samples', '-1'], '--min-samples'),
             (['--min-samples', '18446744073709551616'], '--min-samples'),
             (['--sample-interval-ms', '9'], '--sample-interval-ms'),
             (['--sample-interval-ms', '3600001'], '--sample-interval-ms'),
             (['--sample-interval-ms', '-18446744073709551606'], '--sample-interval-ms'),
             (['--port', '65536:1000'], '--port'),
             (['--port', '80:0'], '--port'),
             (['--port', '80:-5'], '--port'),           # sscanf's %llu took it as 2^64-5
             (['--port', '80:1000:3'], '--port'),
             (['--port', '80:1000x'], '--port'),        # trailing text was ignored
             (['--port', '80:9223372036854775808'], '--port')]
    for args, opt in cases:
        p = run([*base, '-p', '0:15000', *args])
        assert p.returncode == EXIT_USAGE, (args, p.returncode, p.stderr)
        assert opt in p.stderr, (args, p.stderr)
