"""Bad input to spand-gateway: each case gets a clear message and a defined exit status, and
whatever could be read is still reported. Nothing crashes (a crash is a negative status)."""
import json
import os
import shutil
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
PCAPS = os.path.join(HERE, '..', '..', 'pcaps', 'real')
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')
GOOD = os.path.join(PCAPS, 'zeek_bro.org.pcap')


def run(*args):
    return subprocess.run([GATEWAY, *args], capture_output=True, text=True, timeout=60,
                          check=False)


def test_missing_file(tmp_path):
    p = run('--pcap', str(tmp_path / 'nope.pcap'))
    assert p.returncode == 2
    assert 'nope.pcap' in p.stderr


def test_empty_file(tmp_path):
    f = tmp_path / 'empty.pcap'
    f.write_bytes(b'')
    p = run('--pcap', str(f))
    assert p.returncode == 2
    assert 'empty.pcap' in p.stderr


def test_wrong_magic(tmp_path):
    f = tmp_path / 'magic.pcap'
    data = bytearray(open(GOOD, 'rb').read())
    data[0:4] = b'\x00\x11\x22\x33'
    f.write_bytes(bytes(data))
    p = run('--pcap', str(f))
    assert p.returncode == 2
    assert 'magic' in p.stderr.lower() or 'format' in p.stderr.lower()


def test_truncated_record_keeps_what_was_read(tmp_path):
    data = open(GOOD, 'rb').read()
    # Walk the records and cut the file in the middle of the 300th record's data.
    off, n = 24, 0
    while n < 300:
        incl = struct.unpack('<I', data[off + 8:off + 12])[0]
        cut = off + 16 + incl // 2
        off += 16 + incl
        n += 1
    f = tmp_path / 'cut.pcap'
    f.write_bytes(data[:cut])
    out = tmp_path / 'flows.jsonl'
    p = run('--pcap', str(f), '--flows-out', str(out))
    assert p.returncode == 2
    assert 'truncated' in p.stderr.lower()
    assert 'after 299 packets' in p.stderr
    flows = [json.loads(line) for line in open(out)]
    assert flows, 'the connections seen before the damage are still reported'
    assert 'summary: 299 frames' in p.stderr


def test_unknown_option():
    p = run('--pcap', GOOD, '--no-such-option')
    assert p.returncode == 2
    assert 'no-such-option' in p.stderr
    assert '--help' in p.stderr


def test_no_input():
    p = run('--flows-out', '-')
    assert p.returncode == 2
    assert 'no input' in p.stderr


def test_bad_filter():
    p = run('--pcap', GOOD, '--filter', 'tcp port')
    assert p.returncode == 2
    assert 'filter' in p.stderr


def test_bad_inside_network():
    p = run('--pcap', GOOD, '--inside', '10.0.0.0/33')
    assert p.returncode == 2
    assert '10.0.0.0/33' in p.stderr


def test_unwritable_output(tmp_path):
    p = run('--pcap', GOOD, '--flows-out', str(tmp_path / 'no' / 'such' / 'dir.jsonl'))
    assert p.returncode == 2
    assert 'cannot write' in p.stderr


def test_help_explains():
    p = run('--help')
    assert p.returncode == 0
    for word in ('--pcap', '--flows-out', '--samples-out', '--filter', 'EAL'):
        assert word in p.stdout


def test_unsupported_link_type(tmp_path):
    data = bytearray(open(GOOD, 'rb').read())
    struct.pack_into('<I', data, 20, 105)  # LINKTYPE_IEEE802_11
    f = tmp_path / 'wifi.pcap'
    f.write_bytes(bytes(data))
    p = run('--pcap', str(f))
    assert p.returncode == 2
    assert 'unsupported link type 105' in p.stderr


def test_standard_input_is_the_file():
    # '-' reads the capture from standard input (a pipe: zcat, tcpdump -w -): the same records
    # and samples as the file itself, with one tracking thread or two.
    ref = run('--pcap', GOOD, '--flows-out', '-')
    assert ref.returncode == 0 and ref.stdout.count('\n') == 13  # MANIFEST.tsv: 13 connections
    for workers in ('1', '2'):
        with open(GOOD, 'rb') as f:
            p = subprocess.run([GATEWAY, '--pcap', '-', '--flows-out', '-', '--workers', workers],
                               stdin=f, capture_output=True, text=True, timeout=60, check=False)
        assert p.returncode == 0, p.stderr
        assert p.stdout == ref.stdout
    p = subprocess.run([GATEWAY, '--pcap', '-'], input='not a capture\n', capture_output=True,
                       text=True, timeout=60, check=False)
    assert p.returncode == 2
    assert 'standard input' in p.stderr


def test_compressed_file_gets_a_hint(tmp_path):
    # libpcap reads no compressed file; the message says what it is and how to feed it in.
    import gzip
    import lzma
    data = open(GOOD, 'rb').read()
    for name, packed, tool in (('c.pcap.gz', gzip.compress(data), 'zcat'),
                               ('c.pcap.xz', lzma.compress(data), 'xzcat')):
        f = tmp_path / name
        f.write_bytes(packed)
        p = run('--pcap', str(f))
        assert p.returncode == 2
        assert f'{tool} {f} | spand-gateway --pcap -' in p.stderr, p.stderr
    p = run('--pcap', os.path.join(PCAPS, 'MANIFEST.tsv'))  # not compressed: no hint
    assert p.returncode == 2 and 'compressed' not in p.stderr
