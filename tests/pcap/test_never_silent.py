"""Failures are never silent (issue 12, item 6): a write error on --flows-out/--samples-out, a
Redis that cannot be reached, and SIGINT/SIGTERM during --pcap each give a message, a complete
summary and a documented exit status (gateway/control/README.md: 5 = records or samples lost)."""
import json
import os
import signal
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.join(HERE, '..', '..', 'pcaps', 'lab', 'reno_3nets.pcap')
GATEWAY = os.environ.get('SPAND_GATEWAY', 'spand-gateway')
EXIT_OUTPUT_LOSS = 5


def run(*args):
    return subprocess.run([GATEWAY, *args], capture_output=True, text=True, timeout=60,
                          check=False)


def test_flows_out_dev_full_exits_5_with_a_message():
    p = run('--pcap', LAB, '--flows-out', '/dev/full')
    assert p.returncode == EXIT_OUTPUT_LOSS, p.stderr
    assert "writing '/dev/full'" in p.stderr
    assert 'No space left on device' in p.stderr
    assert 'WRITE FAILED' in p.stderr
    assert 'summary:' in p.stderr


def test_samples_out_dev_full_exits_5_with_a_message():
    p = run('--pcap', LAB, '--samples-out', '/dev/full')
    assert p.returncode == EXIT_OUTPUT_LOSS, p.stderr
    assert "writing '/dev/full'" in p.stderr
    assert '(--samples-out)' in p.stderr


def test_good_outputs_still_exit_0(tmp_path):
    p = run('--pcap', LAB, '--flows-out', str(tmp_path / 'f'), '--samples-out',
            str(tmp_path / 's'))
    assert p.returncode == 0, p.stderr
    assert 'WRITE FAILED' not in p.stderr


def test_unreachable_redis_exits_5_and_says_how_many_samples():
    p = run('--pcap', LAB, '--redis', 'redis://127.0.0.1:1', '--client-key-file', 'public')
    if 'no estimates component' in p.stderr:
        return  # a build without Redis: nothing to lose
    assert p.returncode == EXIT_OUTPUT_LOSS, p.stderr
    assert 'samples lost' in p.stderr
    # The capture's W_c and RTT samples (test_prefix_map.py: 6 + 71 + 45 + 567 + 75 + 944) and
    # its 26 first losses in slow start (3 + 9 + 14, the kernel trace's): none reached Redis.
    assert f'({1708 + 26} samples) not written at exit' in p.stderr


def test_sigterm_during_pcap_finishes_lines_and_prints_the_summary(tmp_path):
    # --samples-out into a FIFO read slowly: the replay is blocked on the pipe when the signal
    # arrives, so the signal lands mid-replay every time.
    fifo = tmp_path / 'samples.fifo'
    os.mkfifo(fifo)
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen([GATEWAY, '--pcap', LAB, '--samples-out', str(fifo)],
                                stderr=subprocess.PIPE, text=True)
        with open(fifo, 'rb') as reader:
            data = reader.read(4096)
            time.sleep(0.2)  # the pipe is full: the gateway waits in write()
            proc.send_signal(sig)
            data += reader.read()
        err = proc.stderr.read()
        assert proc.wait(timeout=30) == 0, err
        assert 'stopped by a signal' in err
        assert 'summary:' in err and 'outputs:' in err
        lines = data.decode().splitlines()
        assert data.endswith(b'\n')
        assert 0 < len(lines) < 1842  # the full replay writes 1842
        for line in lines:
            json.loads(line)  # every line whole


def test_numeric_options_out_of_range_are_refused():
    # Each error names the option; nothing is read (exit 2 before the capture is opened).
    for opt, value in (('--flush-interval-ms', '0'), ('--backlog-max', '0'),
                       ('--min-samples', '0'), ('--min-clients', '0'), ('--clock-skew-s', '0')):
        p = run('--pcap', LAB, opt, value)
        assert p.returncode == 2, (opt, p.stderr)
        assert opt in p.stderr, (opt, p.stderr)
    p = run('--pcap', LAB, '--redis', 'redis://127.0.0.1:1', '--client-key-file', 'public',
            '--grpc-listen', '127.0.0.1:99999')
    if 'no estimates component' not in p.stderr:
        assert p.returncode == 2, p.stderr
        assert 'port must be 0-65535' in p.stderr
