"""docs/deploy.md, run: every block marked `sh` runs, in order, in one bash script (set -e)
against the installed Debian package, inside a network namespace whose `span0` is a veth
carrying real TCP transfers from a second namespace, with /etc/spand on a scratch tmpfs. Where
the guide says "the test starts the units' own ExecStart command lines", the test starts the
gateway and the replica exactly as the installed units would (their ExecStart), and runs HTTP
downloads from two client addresses through span0 until the replica answers for their network.
Then every query of the installed dashboards runs against a real Prometheus scraping the gateway,
the replica and the agent (SPAND_DASHBOARDS=DIR takes the dashboards from DIR instead;
SPAND_PANEL_REPORT=FILE keeps the results: FILE.md as a table of every panel's query and what it
returned, any other name as JSON). Blocks marked `sh norun` are not run (each says why in the
guide). Run by deploy/package-test.sh
right after it installs the package it built (not from meson: an older installed package would
be tested); needs root and `ip netns`, skipped without the package."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = os.environ.get("SPAND_SOURCE_ROOT",
                      os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DOC = os.path.join(ROOT, "docs", "deploy.md")
SRV, CLI = "spdoc-srv", "spdoc-cli"
MARK = "<!-- deploy_doc: the units start here -->"
# Queries that may stay empty in this setup, and why (those that keep only series above 0, when
# what they count does not happen here): none now. Every query must return data (the UDP
# datagrams of the traffic loop are frames the gateway does not use: "Drops by reason" shows them
# as not_tcp).
NEEDS_MORE = {}
# The cgroup of the agent's sock_ops program: this test's own, so that the program sees only its
# web server's connections. `ip netns exec` mounts a sysfs of its own without the cgroup and BPF
# file systems: the script mounts both (the bpffs a new instance: its pins are seen by no other
# agent on the machine, and go with the namespace's mounts).
CGROUP_NAME = "spand-doc"


def cgroup2():
    """The first cgroup2 mount (the agent's own default)."""
    for line in open("/proc/mounts"):
        f = line.split()
        if f[2] == "cgroup2":
            return f[1]
    pytest.skip("no cgroup2 mount")


def installed():
    return subprocess.run(["dpkg-query", "-W", "-f=${Status}", "spand"], capture_output=True,
                          text=True).stdout == "install ok installed"


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    pytest.mark.skipif(shutil.which("dpkg-query") is None or not installed(),
                       reason="the spand package is not installed (deploy/package-test.sh)"),
]


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, capture_output=True, text=True, **kw)


def doc_script():
    """The guide's runnable blocks, and the test's own steps at the marker."""
    text = open(DOC).read()
    assert MARK in text, "docs/deploy.md lost the marker where the units start"
    before, after = text.split(MARK)
    block = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
    return block.findall(before), block.findall(after)


def exec_start(unit):
    path = sh("dpkg -L spand | grep -E '/systemd/system/%s$'" % unit).stdout.strip()
    return re.search(r"^ExecStart=(.+)$", open(path).read(), re.M).group(1)


@pytest.fixture
def lab():
    subprocess.run("ip netns del %s; ip netns del %s" % (SRV, CLI), shell=True,
                   capture_output=True)
    sh("ip netns add %s && ip netns add %s" % (SRV, CLI))
    sh("ip link add span0 netns %s type veth peer name cli0 netns %s" % (SRV, CLI))
    sh("ip -n %s addr add 10.99.0.1/24 dev span0 && ip -n %s link set span0 up && "
       "ip -n %s link set lo up" % (SRV, SRV, SRV))
    sh("ip -n %s addr add 10.99.0.2/24 dev cli0 && ip -n %s addr add 10.99.0.3/24 dev cli0 && "
       "ip -n %s link set cli0 up && ip -n %s link set lo up" % (CLI, CLI, CLI, CLI))
    # A second link the gateway does not capture: connections over it come from a /24 the
    # service has never seen, for which the agent must skip (no estimate).
    sh("ip link add side0 netns %s type veth peer name side1 netns %s" % (SRV, CLI))
    sh("ip -n %s addr add 10.98.0.1/24 dev side0 && ip -n %s link set side0 up && "
       "ip -n %s addr add 10.98.0.2/24 dev side1 && ip -n %s link set side1 up"
       % (SRV, SRV, CLI, CLI))
    cg = os.path.join(cgroup2(), CGROUP_NAME)
    subprocess.run(["rmdir", cg], capture_output=True)
    tmp = tempfile.mkdtemp(prefix="spand-doc-")
    yield tmp
    subprocess.run("ip netns pids %s | xargs -r kill; ip netns pids %s | xargs -r kill; "
                   "sleep 1; ip netns del %s; ip netns del %s" % (SRV, CLI, SRV, CLI),
                   shell=True, capture_output=True)
    subprocess.run(["rmdir", cg], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


def panel_table(panels, out):
    """Markdown: every query of every panel and what it returned in this run."""
    version = re.search(r"^spand-gateway (\S+ \(git \S+\))$", out, re.M)
    lines = [
        "# Dashboard panels against a real Prometheus",
        "",
        "Written by `tests/integration/deploy/test_deploy_doc.py` (`SPAND_PANEL_REPORT=FILE.md`,",
        "run by `deploy/package-test.sh`): the installed package (spand-gateway %s), its"
        % (version.group(1) if version else "?"),
        "gateway and replica started as their units start them, the agent in BPF mode on the",
        "web server's cgroup, Prometheus scraping the three every second while HTTP downloads",
        "from two client addresses (and one UDP datagram each round) cross the span interface,",
        "downloads from a third /24 cross a link the gateway does not capture (the agent skips",
        "them: no estimate), and two Report messages the replica must reject are sent. Each",
        "query ran with `$job` and `$instance` = `.*`, `$__rate_interval` = 20s, `$__range` =",
        "2m. Values: the distinct values of the series returned (4 significant digits, at most",
        "6; NaN: a quantile of a method without calls in the window).",
        "",
        "%d queries, %d returned data, %d of them a value other than 0 in some series (a 0 is"
        % (len(panels), sum(1 for p in panels if p["series"]),
           sum(1 for p in panels if any(v == v and v != 0 for v in p["values"]))),
        "data, but says only that the metric is exported and scraped).",
        "",
        "| dashboard | panel | ref | legend | query | result |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for p in panels:
        if p["series"]:
            result = "%d series: %s" % (p["series"], ", ".join("%g" % v for v in p["values"]))
        else:
            why = NEEDS_MORE.get((p["dashboard"], p["panel"], p["ref"]), "NOT EXPECTED")
            result = "no data: %s" % why
        lines.append("| %s | %s | %s | %s | `%s` | %s |" % (
            p["dashboard"], p["panel"], p["ref"], p["legend"].replace("|", "\\|"),
            p["expr"].replace("|", "\\|"), result))
    return "\n".join(lines) + "\n"


def test_deploy_guide_commands_run(lab):
    tmp = lab
    first, second = doc_script()
    assert len(first) >= 6 and len(second) >= 2, (len(first), len(second))
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    with open(os.path.join(www, "f"), "wb") as f:
        f.write(os.urandom(300_000))
    gateway, replica = exec_start("spand-gateway.service"), exec_start("spand-estimates.service")
    cg, pins = os.path.join(tmp, "cgroup", CGROUP_NAME), os.path.join(tmp, "bpf", "spand")
    here = os.path.dirname(os.path.abspath(__file__))
    steps = [
        "set -euo pipefail",
        # /etc/spand as the package installed it, on a tmpfs of this mount namespace only.
        "mkdir -p %s/etc-spand && cp -a /etc/spand/. %s/etc-spand/" % (tmp, tmp),
        "mount -t tmpfs tmpfs /etc/spand && cp -a %s/etc-spand/. /etc/spand/" % tmp,
        "cd %s" % tmp,
        "mkdir -p cgroup bpf && mount -t cgroup2 cgroup2 cgroup && mount -t bpf bpf bpf",
        "mkdir %s" % cg,
        "trap 'kill $(jobs -p) 2>/dev/null; [ -f /run/spand-doc-redis.pid ] && "
        "kill $(cat /run/spand-doc-redis.pid)' EXIT",
    ]
    for i, b in enumerate(first):
        steps += ["echo '## doc block %d'" % (i + 1), b]
    steps += [
        "echo '## the units (their ExecStart), traffic'",
        "%s > %s/gateway.log 2>&1 &" % (gateway, tmp),
        "%s > %s/replica.log 2>&1 &" % (replica, tmp),
        # The web server in the agent's cgroup: its connections pass the sock_ops program.
        "(echo $BASHPID > %s/cgroup.procs && cd %s && "
        "exec python3 -m http.server 8080 --bind 0.0.0.0 > %s/http.log 2>&1) &" % (cg, www, tmp),
        # Downloads from two client addresses until the replica answers USE_ESTIMATE.
        "for i in $(seq 1 60); do"
        "  for src in 10.99.0.2 10.99.0.3; do"
        "    ip netns exec %s curl -s -o /dev/null --interface $src http://10.99.0.1:8080/f || true;"
        "  done;"
        "  if spandctl --server 127.0.0.1:50052 get 10.99.0.0/24 2>/dev/null |"
        "     grep -q USE_ESTIMATE; then break; fi;"
        "  sleep 0.5;"
        "done" % CLI,
    ]
    for i, b in enumerate(second):
        steps += ["echo '## doc block %d'" % (len(first) + i + 1), b]
    # Every dashboard panel's query against a real Prometheus scraping the three daemons while
    # traffic flows: the agent in BPF mode on the web server's cgroup (its own pins), downloads
    # over span0 (estimates applied) and over side0, which the gateway does not see (skipped:
    # no estimate), and two Report messages the replica must reject.
    steps += [
        "echo '## panels'",
        "cat > %s/prom.yml <<'EOF'\n"
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [/usr/share/doc/spand/examples/spand-rules.yml]\n"
        "scrape_configs:\n"
        "  - {job_name: spand-gateway, static_configs: [{targets: ['127.0.0.1:9108']}]}\n"
        "  - {job_name: spand-estimates, static_configs: [{targets: ['127.0.0.1:9109']}]}\n"
        "  - {job_name: spand-agent, static_configs: [{targets: ['127.0.0.1:9464']}]}\n"
        "EOF" % tmp,
        "spand-agent --config /etc/spand/agent.toml --mode bpf --cgroup %s --pin-dir %s "
        "> %s/agent.log 2>&1 &" % (cg, pins, tmp),
        "for i in $(seq 1 50); do grep -q 'running mode=bpf' %s/agent.log && break; sleep 0.1;"
        " done; grep -q 'running mode=bpf' %s/agent.log || { cat %s/agent.log; exit 1; }"
        % (tmp, tmp, tmp),
        "prometheus --config.file=%s/prom.yml --storage.tsdb.path=%s/tsdb "
        "--web.listen-address=127.0.0.1:9090 > %s/prometheus.log 2>&1 &" % (tmp, tmp, tmp),
        "for i in $(seq 1 40); do"
        "  for src in 10.99.0.2 10.99.0.3; do"
        "    ip netns exec %s curl -s -o /dev/null --interface $src http://10.99.0.1:8080/f || true;"
        "  done;"
        # A UDP datagram (bash's /dev/udp: no tool needed): a frame the gateway does not use.
        "  ip netns exec %s bash -c 'echo x > /dev/udp/10.99.0.1/9' || true;"
        "  spandctl --server 127.0.0.1:50052 get 10.99.0.0/24 > /dev/null 2>&1 || true;"
        "  sleep 0.5;"
        "done" % (CLI, CLI),
        # A connection from 10.98.0.2 over side0, held open 2.5 s (longer than the agent's 1 s
        # connection scan; a download would leave the server's side at once: 300 kB fit in the
        # socket buffers), so the agent sees the /24 and asks the service, which has no estimate
        # for it. The agent asks about a /24 without an estimate once per 30 s, and the panel's
        # rate looks 20 s back: this comes last.
        "ip netns exec %s bash -c 'exec 3<>/dev/tcp/10.98.0.1/8080; sleep 2.5'" % CLI,
        "%s %s 127.0.0.1:50052" % (sys.executable, os.path.join(here, "report_forge.py")),
        "sleep 3",  # two scrapes after the rejections: the 20 s rate sees them
        "python3 %s %s http://127.0.0.1:9090 %s/panels.json"
        % (os.path.join(here, "panel_queries.py"),
           os.environ.get("SPAND_DASHBOARDS", "/usr/share/doc/spand/examples/grafana"), tmp),
    ]
    script = os.path.join(tmp, "doc.sh")
    with open(script, "w") as f:
        f.write("\n".join(steps) + "\n")
    r = subprocess.run(["ip", "netns", "exec", SRV, "bash", script], capture_output=True,
                       text=True, timeout=600)
    logs = ""
    for name in ["gateway.log", "replica.log", "agent.log"]:
        p = os.path.join(tmp, name)
        if os.path.exists(p):
            logs += "\n--- %s\n%s" % (name, open(p).read()[-3000:])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:] + logs
    out = r.stdout
    # What the guide promises the operator sees.
    assert re.search(r"^spand-gateway \S+ \(git \S+\)$", out, re.M), out
    assert 'interface = "span0"' in out
    assert "USE_ESTIMATE" in out, out[-3000:] + logs
    assert re.search(r"dry-run: apply port=0 prefix=10\.99\.0\.0/24 init_cwnd=\d+", out), out[-3000:]
    assert "SUCCESS" in out  # promtool
    panels = json.load(open(os.path.join(tmp, "panels.json")))
    report = os.environ.get("SPAND_PANEL_REPORT")
    if report and report.endswith(".md"):
        with open(report, "w") as f:
            f.write(panel_table(panels, r.stdout))
    elif report:
        shutil.copy(os.path.join(tmp, "panels.json"), report)
    empty = ["%s / %s %s" % (r["dashboard"], r["panel"], r["ref"]) for r in panels
             if r["series"] == 0 and (r["dashboard"], r["panel"], r["ref"]) not in NEEDS_MORE]
    assert not empty, "panels without data: %s%s%s" % (empty, logs, out[-3000:])
