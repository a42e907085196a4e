"""--pcap on one thread and on two (--workers 1 and 2) give the same bytes: flow records, sample
records, prefix summary and exit summary (its timing line aside), on every capture under pcaps/,
with the default table and with a table small enough to evict (the order of records depends on
the table, so this also pins that both paths track packets in the file's order)."""
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PCAPS = os.path.join(HERE, '..', '..', 'pcaps')
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')

CAPTURES = sorted(os.path.relpath(os.path.join(d, f), PCAPS)
                  for d, _, files in os.walk(PCAPS) for f in files
                  if f.endswith(('.pcap', '.pcapng', '.dmp')))


def replay(tmp_path, capture, workers, extra):
    out = tmp_path / f'w{workers}'
    out.mkdir()
    p = subprocess.run([GATEWAY, '--pcap', os.path.join(PCAPS, capture), '--workers', str(workers),
                        '--flows-out', str(out / 'flows'), '--samples-out', str(out / 'samples'),
                        '--prefix-summary'] + extra,
                       capture_output=True, text=True, check=False, timeout=120)
    assert p.returncode == 0, p.stderr
    summary = [l for l in p.stderr.splitlines() if not l.startswith('elapsed:')]
    return (out / 'flows').read_bytes(), (out / 'samples').read_bytes(), p.stdout, summary


@pytest.mark.parametrize('extra', [[], ['--flow-capacity', '16']], ids=['default', 'tiny_table'])
@pytest.mark.parametrize('capture', CAPTURES)
def test_two_threads_same_bytes_as_one(capture, extra, tmp_path):
    one = replay(tmp_path, capture, 1, extra)
    two = replay(tmp_path, capture, 2, extra)
    assert one[0], 'no flow records: nothing compared'
    for name, a, b in zip(['flows', 'samples', 'prefix summary', 'summary'], one, two):
        assert a == b, f'{name} differs'
