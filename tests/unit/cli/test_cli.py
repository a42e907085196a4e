"""The command line of every spand binary, as an operator meets it: --version, exit status 2 on
a bad option, the option names shared across binaries (old names still accepted), TOML
configuration files read back from --print-config with flags over the file and errors that name
the file and line, and JSON Lines outputs whose lines are whole while the gateway still runs.
Binaries come from the environment (meson sets SPAND_GATEWAY, SPAND_ESTIMATES, SPANDCTL,
SPAND_AGENT); a binary this build lacks is skipped."""
import os
import re
import socket
import sys
import subprocess
import tempfile
import threading
import time
import tomllib
import urllib.request

import pytest

ROOT = os.environ.get("SPAND_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BINARIES = {
    "spand-gateway": os.environ.get("SPAND_GATEWAY"),
    "spand-estimates": os.environ.get("SPAND_ESTIMATES"),
    "spandctl": os.environ.get("SPANDCTL"),
    "spand-agent": os.environ.get("SPAND_AGENT"),
}
PCAP = os.path.join(ROOT, "pcaps", "real", "tcptrace_http.dmp")


def binary(name):
    path = BINARIES[name]
    if not path:
        pytest.skip("%s is not built in this configuration" % name)
    return path


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, **kw)


def body(toml_text):
    """The key lines of a --print-config output (comments name the file read)."""
    return [l for l in toml_text.splitlines() if l.strip() and not l.startswith("#")]


def write(text, suffix=".toml"):
    f = tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False)
    f.write(text)
    f.close()
    return f.name


@pytest.mark.parametrize("name", sorted(BINARIES))
def test_version_names_program_version_and_git(name):
    r = run(binary(name), "--version")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    with open(os.path.join(ROOT, "meson.build")) as f:
        version = re.search(r"version: '([^']+)'", f.read()).group(1)
    assert re.fullmatch(r"%s %s \(git \S+\)" % (re.escape(name), re.escape(version)), lines[0])
    # Every binary but the gateway built without estimates links gRPC; the gateway, libpcap.
    if name != "spand-gateway":
        assert any(re.fullmatch(r"gRPC \d+\.\d+\.\d+", l) for l in lines[1:]), lines
    else:
        assert any(l.startswith("libpcap version") for l in lines[1:]), lines


@pytest.mark.parametrize("name", sorted(BINARIES))
@pytest.mark.parametrize("bad", [["--no-such-option"], ["--no-such-option=1"]])
def test_bad_option_exits_2(name, bad):
    r = run(binary(name), *bad)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "no-such-option" in r.stderr


@pytest.mark.parametrize("name,args", [
    ("spand-gateway", ["--prefix-len-v4", "x"]),
    ("spand-gateway", ["--window-s", "0"]),
    ("spand-estimates", ["--bucket-s", "x"]),
    ("spand-estimates", ["--clock", "sundial"]),
    ("spand-estimates", ["--redis", "redis://127.0.0.1:1", "--redis-key-prefix", "a{b}",
                         "--client-key-file", "public"]),
    ("spand-gateway", ["--pcap", PCAP, "--redis", "redis://127.0.0.1:1",
                       "--redis-key-prefix", "", "--client-key-file", "public"]),
    # A writer to Redis without a client id key (gateway/estimates/README.md, "Client ids").
    ("spand-gateway", ["--pcap", PCAP, "--redis", "redis://127.0.0.1:1"]),
    ("spand-estimates", ["--redis", "redis://127.0.0.1:1"]),
    ("spand-agent", ["--prefix-len-v4", "33", "-f", "/dev/null", "-p", "80:1000"]),
    # The client id key: a missing file, and a first line that is not 32 hex digits.
    ("spand-gateway", ["--pcap", PCAP, "--redis", "redis://127.0.0.1:1",
                       "--client-key-file", "/nonexistent/client.key"]),
    ("spand-estimates", ["--redis", "redis://127.0.0.1:1", "--client-key-file",
                         os.path.join(ROOT, "README.md")]),
])
def test_bad_values_exit_2(name, args):
    r = run(binary(name), *args)
    assert r.returncode == 2, (r.returncode, r.stderr)


def test_gateway_config_round_trip_and_flags_override():
    gw = binary("spand-gateway")
    cfg = write('# a gateway as a service\n'
                'interface = "span0"\n'
                'redis_cluster = ["10.0.0.1:7000", "10.0.0.2:7000"]\n'
                'prefix_len_v4 = 22\n'
                'flush_interval_ms = 500\n'
                'max_wc_cv = 1.5\n'
                'prefix_summary = true\n'
                'eal_args = ["-l", "0-1", "--vdev", "net_pcap0,rx_pcap=x.pcap"]\n')
    first = run(gw, "--config", cfg, "--print-config")
    assert first.returncode == 0, first.stderr
    keys = dict(l.split(" = ", 1) for l in body(first.stdout))
    assert keys["interface"] == '"span0"'
    assert keys["redis_cluster"] == '["10.0.0.1:7000", "10.0.0.2:7000"]'
    assert keys["prefix_len_v4"] == "22" and keys["prefix_len_v6"] == "48"
    assert keys["flush_interval_ms"] == "500" and keys["max_wc_cv"] == "1.5"
    assert keys["prefix_summary"] == "true" and keys["keep_serving"] == "false"
    assert keys["eal_args"] == '["-l", "0-1", "--vdev", "net_pcap0,rx_pcap=x.pcap"]'
    # What --print-config prints reads back to the same configuration.
    again = run(gw, "--config", write(first.stdout), "--print-config")
    assert again.returncode == 0, again.stderr
    assert body(again.stdout) == body(first.stdout)
    # Flags win over the file; a list given by flags replaces the file's list.
    over = run(gw, "--config", cfg, "--print-config", "--flush-interval-ms", "250",
               "--redis-cluster", "10.0.0.9:7000")
    keys = dict(l.split(" = ", 1) for l in body(over.stdout))
    assert keys["flush_interval_ms"] == "250" and keys["redis_cluster"] == '["10.0.0.9:7000"]'
    assert keys["prefix_len_v4"] == "22"


def test_replica_config_round_trip_and_old_names():
    rep = binary("spand-estimates")
    first = run(rep, "--print-config", "--cluster", "a:1,b:2", "--prefix-v4", "20",
                "--grpc-listen", "0.0.0.0:50052", "--clock", "wall")
    assert first.returncode == 0, first.stderr
    keys = dict(l.split(" = ", 1) for l in body(first.stdout))
    assert keys["redis_cluster"] == '["a:1", "b:2"]' and keys["prefix_len_v4"] == "20"
    assert keys["grpc_listen"] == '"0.0.0.0:50052"' and keys["clock"] == '"wall"'
    again = run(rep, "--config", write(first.stdout), "--print-config")
    assert body(again.stdout) == body(first.stdout)
    # An empty address in the file turns the default listener off.
    off = run(rep, "--config", write('grpc_listen = ""\n'), "--print-config")
    assert 'grpc_listen = ""' in off.stdout


@pytest.mark.parametrize("text,line,what", [
    ('redis = "redis://127.0.0.1:6379"\n\nwindow_s = 0\n', 3, "window_s"),
    ('redis = "redis://127.0.0.1:6379"\nno_such_key = 3\n', 2, "unknown key"),
    ('window_s = "300"\n', 1, "expected a number"),
    ('redis = 6379\n', 1, "expected a string"),
    ('keep_serving = 1\n', 1, "expected true or false"),
    ('window_s = 300\nwindow_s = 301\n', 2, "window_s"),
    ('[redis]\nurl = 1\n', 1, "no [sections]"),
])
@pytest.mark.parametrize("name", ["spand-gateway", "spand-estimates"])
def test_config_errors_name_file_and_line(name, text, line, what):
    if name == "spand-estimates" and "keep_serving" in text:
        pytest.skip("the replica has no keep_serving")
    path = write(text)
    r = run(binary(name), "--config", path, "--print-config")
    assert r.returncode == 2, (r.returncode, r.stdout)
    assert "%s:%d:" % (path, line) in r.stderr and what in r.stderr, r.stderr


def test_replica_names_the_clock_key_of_its_prefix():
    """With --redis-key-prefix the store's clock is PREFIX:{g}:clock: the replica's message about
    it names that key (it named spand:{g}:clock whatever the prefix)."""
    rep = binary("spand-estimates")
    p = subprocess.Popen([rep, "--redis", "redis://127.0.0.1:1", "--redis-key-prefix", "blue",
                          "--client-key-file", "public",
                          "--grpc-listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(20, p.kill)  # no line at all: fail, do not hang
    killer.start()
    try:
        lines = []
        for line in p.stderr:
            lines.append(line)
            if "clock" in line and "reading" in line:
                break
        assert any("reading blue:{g}:clock:" in l for l in lines), lines
    finally:
        killer.cancel()
        p.terminate()
        p.wait(timeout=30)
    r = run(rep, "--help")
    assert "spand:{g}:clock" not in r.stdout and "PREFIX:{g}:clock" in r.stdout, r.stdout


def doc_exit_table():
    """docs/exit-status.md's table: {status: set of binaries}."""
    text = open(os.path.join(ROOT, "docs", "exit-status.md")).read()
    rows = re.findall(r"^\| ([0-9]+) \| [^|]+ \| [^|]+ \| ([^|]+) \|$", text, re.M)
    return {int(n): {b.strip() for b in who.split(",")} for n, who in rows}


def header_exit_table():
    """common/exit_status.hpp's constants: {name: status}."""
    text = open(os.path.join(ROOT, "common", "exit_status.hpp")).read()
    return {k: int(v) for k, v in re.findall(r"constexpr int (k\w+) = ([0-9]+);", text)}


def help_exit_statuses(name):
    """The statuses listed under 'Exit status:' at the end of a binary's --help."""
    r = run(binary(name), "--help")
    assert r.returncode == 0
    tail = r.stdout.split("Exit status:", 1)
    assert len(tail) == 2, r.stdout[-500:]
    return {int(n) for n in re.findall(r"^  ([0-9])  ", tail[1], re.M)}


def test_exit_statuses_are_one_table():
    """docs/exit-status.md, common/exit_status.hpp and every binary's --help (so its man page)
    give one table: the same numbers, each binary listing exactly the rows the doc gives it."""
    doc = doc_exit_table()
    # The seven rows written out by hand (the doc's reasons): 0 ok, 2 usage, 3 runtime, 4 capture
    # loss, 5 data loss, 6 busy, 7 privileges; 1 is deliberately unused.
    assert sorted(doc) == [0, 2, 3, 4, 5, 6, 7], doc
    assert sorted(header_exit_table().values()) == sorted(doc), header_exit_table()
    assert header_exit_table()["kRuntime"] == 3 and header_exit_table()["kUsage"] == 2
    for name in BINARIES:
        listed = help_exit_statuses(name)
        expected = {n for n, who in doc.items() if name in who}
        assert listed == expected, (name, listed, expected)


def free_port():
    """A local TCP port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def busy_port():
    """A local TCP port held by a listening socket for the test's duration."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_spandctl_without_a_server_is_a_runtime_error():
    # Nothing listens on the port: the connection is refused, gRPC says UNAVAILABLE. The
    # command line is fine (the same one gets 0 from a server), so 3, not 2.
    r = run(binary("spandctl"), "--server", "127.0.0.1:%d" % free_port(), "--timeout-ms", "3000",
            "get", "198.51.100.7")
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "UNAVAILABLE" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [["get", "198.51.100.7", "not-an-address"],
                                  ["get", "1.2.3.4/33"], ["get", "2001:db8::/129"],
                                  ["watch", "198.51.100.0/24x"]])
def test_spandctl_bad_address_is_a_usage_error_without_a_server(args):
    # The text is wrong whatever a server would say: 2, before any call (nothing listens on the
    # port; a call would have been 3, UNAVAILABLE, as the test above shows).
    r = run(binary("spandctl"), "--server", "127.0.0.1:%d" % free_port(), "--timeout-ms", "3000",
            *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "is not an IPv4 or IPv6 address or CIDR prefix" in r.stderr, r.stderr
    assert "UNAVAILABLE" not in r.stderr


@pytest.mark.parametrize("option", ["--metrics-listen", "--grpc-listen"])
def test_daemons_exit_3_when_their_port_is_in_use(option, busy_port):
    """A port another process holds is a runtime failure (3): a unit restarts on it, unlike a
    configuration error (2). Redis need not be up for the service to start."""
    other = "--grpc-listen" if option == "--metrics-listen" else "--metrics-listen"
    common = ["--redis", "redis://127.0.0.1:%d" % free_port(), "--client-key-file", "public",
              other, "127.0.0.1:0",
              option, "127.0.0.1:%d" % busy_port]
    r = run(binary("spand-estimates"), "--clock", "wall", *common)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert str(busy_port) in r.stderr, r.stderr
    r = run(binary("spand-gateway"), "--pcap", PCAP, *common)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert str(busy_port) in r.stderr, r.stderr


def agent_estimates(tmp_path):
    path = tmp_path / "estimates.json"
    path.write_text('{"estimates": [{"prefix": "10.77.1.0/24", "wc_segments": 20, '
                    '"rtt_ms": 40, "samples": 50, "verdict": "USE_ESTIMATE"}]}')
    path.chmod(0o644)
    return str(path)


def test_agent_runtime_error_without_root(tmp_path, busy_port):
    """A dry run needs no privileges; its /metrics port held by another process makes it a
    runtime failure (3) after a valid command line."""
    r = run(binary("spand-agent"), "--dry-run", "--once", "-f", agent_estimates(tmp_path),
            "-p", "80:1000", "--metrics-listen", "127.0.0.1:%d" % busy_port)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "/metrics on 127.0.0.1:%d" % busy_port in r.stderr, r.stderr
    # The same command with a free port runs its one refresh and exits 0.
    r = run(binary("spand-agent"), "--dry-run", "--once", "-f", agent_estimates(tmp_path),
            "-p", "80:1000", "--metrics-listen", "127.0.0.1:%d" % free_port())
    assert r.returncode == 0, (r.returncode, r.stderr)


def test_agent_without_privileges_exits_7(tmp_path):
    """Route mode without CAP_NET_ADMIN: 7, the capability named. Run as is when not root; as
    root, with every capability dropped by setpriv (util-linux)."""
    argv = [binary("spand-agent"), "--metrics-listen", "", "--mode", "route",
            "-f", agent_estimates(tmp_path), "-p", "80:1000"]
    if os.geteuid() == 0:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all"] + argv
    r = run(*argv)
    assert r.returncode == 7, (r.returncode, r.stderr)
    assert "missing privileges" in r.stderr and "CAP_NET_ADMIN" in r.stderr, r.stderr


def test_config_file_missing_is_a_usage_error():
    r = run(binary("spand-estimates"), "--config", "/nonexistent/spand.toml")
    assert r.returncode == 2 and "/nonexistent/spand.toml" in r.stderr


@pytest.mark.parametrize("name,example", [
    ("spand-gateway", "gateway.toml"), ("spand-estimates", "estimates.toml"),
    ("spand-agent", "agent.toml")])
def test_shipped_examples_load(name, example):
    path = os.path.join(ROOT, "deploy", "config", example)
    r = run(binary(name), "--config", path, "--print-config")
    assert r.returncode == 0, r.stderr


def test_agent_print_config_round_trips():
    agent = binary("spand-agent")
    example = os.path.join(ROOT, "deploy", "config", "agent.toml")
    first = run(agent, "--config", example, "--print-config", "--metrics", "127.0.0.1:9999",
                "--prefix-len-v4", "20", "-p", "8443:30000:2", "--window-rule", "paper")
    assert first.returncode == 0, first.stderr
    cfg = tomllib.loads(first.stdout)
    assert cfg["agent"]["metrics_listen"] == "127.0.0.1:9999"
    assert cfg["agent"]["prefix_len_v4"] == 20 and cfg["policy"]["window_rule"] == "paper"
    assert {"port": 8443, "response_bytes": 30000, "acked_per_ack": 2, "enabled": True,
            "tune": False} in cfg["port"]
    with open(example, "rb") as f:
        shipped = tomllib.load(f)
    assert cfg["policy"]["max_initial_cwnd"] == shipped["policy"]["max_initial_cwnd"]
    again = run(agent, "--config", write(first.stdout), "--print-config")
    assert again.returncode == 0, again.stderr
    assert body(again.stdout) == body(first.stdout)


def test_flows_out_lines_are_whole_while_the_gateway_runs(tmp_path):
    """The capture comes through a FIFO that stays open after the last packet, so the gateway is
    still running (blocked on its input) when the test reads --flows-out: what is there must be
    whole JSON lines, the start of what a complete run writes (block buffering left a cut
    4 KiB-multiple there)."""
    gw = binary("spand-gateway")
    pcap = tmp_path / "mix.pcap"
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench", "gen_synthetic.py"),
                    str(pcap), "--connections", "3000", "--concurrency", "100"],
                   check=True, capture_output=True)
    ref = tmp_path / "ref.jsonl"
    assert run(gw, "--pcap", str(pcap), "--flows-out", str(ref)).returncode == 0
    expected = ref.read_text()
    fifo, live = tmp_path / "capture.fifo", tmp_path / "live.jsonl"
    os.mkfifo(fifo)
    p = subprocess.Popen([gw, "--pcap", str(fifo), "--flows-out", str(live)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with open(fifo, "wb") as w:
            w.write(pcap.read_bytes())
            w.flush()
            deadline = time.monotonic() + 30
            text = ""
            while time.monotonic() < deadline and not text:
                text = live.read_text() if live.exists() else ""
                time.sleep(0.02)
            assert p.poll() is None, "the gateway ended before its input did"
            assert text, "no record written while the gateway runs"
            assert text.endswith("\n") and expected.startswith(text), \
                "a cut line while the gateway runs: ...%r" % text[-40:]
        assert p.wait(timeout=60) == 0
        assert live.read_text() == expected
    finally:
        if p.poll() is None:
            p.kill()


def test_agent_prefix_map_dry_run(tmp_path):
    """--prefix-map in the agent (a dry run, no privileges): static prefixes and the estimates
    asked for are the map's longest prefixes holding them (10.170.1.0/24 and 10.170.3.0/24 under
    the map's /16 and /23; 192.0.2.0/24, which no prefix covers, keeps its /24 and has no
    estimate in the file); after the map gains 10.170.1.0/24 the agent re-keys without a
    restart; a bad map is exit 2 naming the line."""
    est = tmp_path / "estimates.json"
    # W_c 40 against a 100 kB response (69 segments) shortens the transfer, so each is applied;
    # the RTTs tell the three estimates apart.
    est.write_text('{"estimates": [' + ", ".join(
        '{"prefix": "%s", "wc_segments": 40, "rtt_ms": %d, "samples": 50, '
        '"verdict": "USE_ESTIMATE"}' % (p, rtt)
        for p, rtt in [("10.170.0.0/16", 20), ("10.170.2.0/23", 30), ("10.170.1.0/24", 40)]) +
        ']}')
    pmap = tmp_path / "map.txt"
    pmap.write_text("10.170.0.0/16\n10.170.2.0/23  # 10.170.2 and 10.170.3\n")
    args = [binary("spand-agent"), "--dry-run", "-f", str(est), "-p", "8080:100000",
            "-P", "10.170.1.0/24", "-P", "10.170.3.0/24", "-P", "192.0.2.0/24",
            "--metrics-listen", "", "--prefix-map", str(pmap)]
    r = run(*args, "--once")
    assert r.returncode == 0, r.stderr
    # The decisions are on stdout.
    applied = sorted(re.findall(r"dry-run: apply port=8080 prefix=(\S+) .*srtt_us=(\d+)", r.stdout))
    assert applied == [("10.170.0.0/16", "20000"), ("10.170.2.0/23", "30000")], r.stdout

    bad = tmp_path / "bad.txt"
    bad.write_text("10.170.0.0/16\n# comment\n10.170.2.1/23\n")
    r = run(*args[:-1], str(bad), "--once")
    assert r.returncode == 2 and "line 3" in r.stderr and "host bits" in r.stderr, r.stderr

    conf = tmp_path / "agent.toml"
    conf.write_text('[agent]\nestimates_file = "%s"\nprefix_map = "%s"\n[[port]]\nport = 80\n'
                    'response_bytes = 1000\n' % (est, pmap))
    r = run(binary("spand-agent"), "--config", str(conf), "--print-config")
    assert r.returncode == 0 and "prefix_map = '%s'" % pmap in r.stdout, (r.stdout, r.stderr)

    # Reload: the static 10.170.1.0/24 now has a prefix of its own in the map.
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []

    def read():
        for line in p.stdout:
            lines.append(line)
    t = threading.Thread(target=read, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("prefix=10.170.2.0/23" in l for l in lines):
            time.sleep(0.05)
        tmp = tmp_path / "map.new"
        tmp.write_text("10.170.0.0/16\n10.170.2.0/23\n10.170.1.0/24\n")
        os.replace(tmp, pmap)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                "apply port=8080 prefix=10.170.1.0/24" in l for l in lines):
            time.sleep(0.05)
    finally:
        p.terminate()
        p.wait(10)
        t.join(5)
    text = "".join(lines)
    assert "prefix map %s reloaded: 3 prefixes" % pmap in text, text
    assert re.search(r"apply port=8080 prefix=10.170.1.0/24 .*srtt_us=40000", text), text
    # The /16 has no static prefix or connection left under it: its policy goes.
    assert "remove port=8080 prefix=10.170.0.0/16" in text, text


def test_agent_counts_clients_no_prefix_of_the_map_covers(tmp_path):
    """spand_agent_prefix_map_uncovered_total on the agent's /metrics (a dry run, no
    privileges): a connection this test accepts on the agent's port comes from 127.0.0.1, which
    the map (10.0.0.0/8 only) does not cover, so each refresh that sees it counts one lookup."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    server, _ = listener.accept()
    pmap = tmp_path / "map.txt"
    pmap.write_text("10.0.0.0/8\n")

    mport = free_port()
    p = subprocess.Popen([binary("spand-agent"), "--dry-run", "-f", agent_estimates(tmp_path),
                          "-p", "%d:1000" % port, "--metrics-listen", "127.0.0.1:%d" % mport,
                          "--prefix-map", str(pmap)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, value = time.monotonic() + 15, None
        while time.monotonic() < deadline and not value:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport,
                                            timeout=2) as r:
                    text = r.read().decode()
            except OSError:
                text = ""
            m = re.search(r"^spand_agent_prefix_map_uncovered_total (\S+)$", text, re.M)
            value = float(m[1]) if m else None
            time.sleep(0.1)
        assert value and value >= 1, value
    finally:
        p.terminate()
        p.wait(10)
        for sock in (client, server, listener):
            sock.close()
