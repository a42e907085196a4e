"""Agent safety (issue 12, item 7), on the real kernel in network namespaces: one agent per pin
directory and one per pacing device (a second one refuses to start and leaves the first alone),
per-instance pin directories, and a policy that ends in the kernel by itself once its estimate is too old, so an
agent killed with SIGKILL stops applying within its max age (tcp_probe as the truth). Every
test uses its own pin directory, never the default /sys/fs/bpf/spand. Run as root."""
import json
import os
import signal
import tempfile
import time

import pytest

from lab import Lab, MSS, first_flight, sh
from test_agent import (AGENT, EXPECTED, PAPER, PORT, SIZE, cgroup_progs, est, estimates_file,
                        start_server)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (netns, BPF, tracefs)")

STAT_EXPIRED = 17  # enum spand_stat in agents/libspand/spand_maps.h
EXIT_BUSY = 6      # docs/exit-status.md: another agent holds the pin directory or a pacing device
KERNEL_IW = 10     # Linux's initial window
NO_SSTHRESH = 0x7fffffff


def pin_dir(name):
    return "/sys/fs/bpf/spand_test_" + name


def stats(pins):
    dump = json.loads(sh("bpftool -j map dump pinned %s/stats" % pins).stdout)
    return {e["formatted"]["key"]: sum(v["value"] for v in e["formatted"]["values"])
            for e in dump}


def policies(pins):
    return json.loads(sh("bpftool -j map dump pinned %s/prefix_policy" % pins).stdout)


def agent_args(lab, pins, ef, *extra, cgroup=None):
    return [AGENT, *PAPER, "--metrics", "", "--mode", "bpf", "--cgroup", cgroup or lab.cgroup,
            "--pin-dir", pins, "-f", ef, "-p", "%d:%d" % (PORT, SIZE), "-P", "10.77.1.0/24",
            *extra]


def first_window(lab):
    lab.probe_start(PORT)
    port = lab.fetch("10.77.0.1", PORT, SIZE)
    cwnd, ssthresh, _ = first_flight(lab.probe_events(), port)
    return cwnd, ssthresh


def remove_leftovers(lab, pins, ef):
    """A killed agent's link and pins stay: a new agent on the same directory cleans them."""
    if os.path.isdir(pins):
        a = lab.start(lab.in_srv(agent_args(lab, pins, ef, "--once")))
        assert a.p.wait(timeout=20) == 0, "\n".join(a.drain())
    assert not os.path.exists(pins)


def test_second_agent_on_a_pin_directory_refuses_and_leaves_the_first_alone():
    with Lab("sf1") as lab:
        pins, pins_b = pin_dir("sf1"), pin_dir("sf1b")
        other_cgroup = lab.cgroup + "_b"
        os.makedirs(other_cgroup, exist_ok=True)
        ef = estimates_file([est("10.77.1.0/24")])
        try:
            first = lab.start(lab.in_srv(agent_args(lab, pins, ef)))
            first.wait_line(r"applied port=8080 prefix=10.77.1.0/24 init_cwnd=%d " % EXPECTED)
            for mode in ("bpf", "auto"):  # auto must not fall back to routes either
                args = agent_args(lab, pins, ef)
                args[args.index("--mode") + 1] = mode
                second = lab.start(lab.in_srv(args))
                assert second.p.wait(timeout=20) == EXIT_BUSY
                out = "\n".join(second.drain())
                print(out)
                assert "another spand-agent (pid %d) holds %s" % (first.p.pid, pins) in out
                assert "applied" not in out
            assert "proto 245" not in sh("ip -n %s route show table all" % lab.srv).stdout
            # The first one's program, pins and policy are untouched and still apply.
            assert cgroup_progs(lab).count("spand_sockops") == 1
            assert os.path.exists(pins + "/sockops_link")
            assert len(policies(pins)) == 1
            start_server(lab)
            assert first_window(lab) == (EXPECTED, EXPECTED)
            # Another pin directory is another instance (here for another cgroup).
            other = lab.start(lab.in_srv(agent_args(lab, pins_b, ef, cgroup=other_cgroup)))
            other.wait_line(r"applied port=8080")
            assert "spand_sockops" in sh("bpftool cgroup show %s" % other_cgroup).stdout
            assert other.stop() == 0
            assert not os.path.exists(pins_b)
            assert cgroup_progs(lab).count("spand_sockops") == 1
            assert first.stop() == 0
            assert "spand_sockops" not in cgroup_progs(lab)
            assert not os.path.exists(pins)
        finally:
            remove_leftovers(lab, pins, ef)
            remove_leftovers(lab, pins_b, ef)
            os.rmdir(other_cgroup)


def test_second_agent_on_a_pacing_device_refuses_and_leaves_the_first_alone():
    """Two agents on different pin directories (different cgroups) but one --pace-device: the
    second would replace the first one's HTB root qdisc and delete it at exit. It refuses with
    exit 6 (busy) before changing anything, naming the first; the first's qdisc and classes stay."""
    with Lab("sf3") as lab:
        pins, pins_b = pin_dir("sf3"), pin_dir("sf3b")
        other_cgroup = lab.cgroup + "_b"
        os.makedirs(other_cgroup, exist_ok=True)
        dev = lab.name + "v"
        ef = estimates_file([est("10.77.1.0/24")])

        def tc(what):
            return sh("ip netns exec %s tc %s show dev %s" % (lab.srv, what, dev)).stdout
        started = []

        def start(*args, **kw):
            started.append(lab.start(lab.in_srv(agent_args(lab, *args, **kw))))
            return started[-1]
        try:
            first = start(pins, ef, "--pace-device", dev)
            first.wait_line(r"applied port=8080 prefix=10.77.1.0/24 init_cwnd=%d " % EXPECTED)
            classes = tc("class")
            assert "qdisc htb 5350: root" in tc("qdisc") and classes.count("class htb") > 0
            second = start(pins_b, ef, "--pace-device", dev, cgroup=other_cgroup)
            second.wait_line(r"pacing device %s: another spand-agent \(pid %d\) paces it: one "
                             r"agent per pacing device" % (dev, first.p.pid))
            assert second.p.wait(timeout=20) == EXIT_BUSY
            assert "applied" not in "\n".join(second.drain())
            assert "spand_sockops" not in sh("bpftool cgroup show %s" % other_cgroup).stdout
            assert not os.path.exists(pins_b + "/sockops_link")
            # The first one's qdisc and classes are as they were, and its program still runs.
            assert tc("class") == classes
            assert cgroup_progs(lab).count("spand_sockops") == 1
            # Without the device the second agent starts (another pin directory, another cgroup).
            other = start(pins_b, ef, cgroup=other_cgroup)
            other.wait_line(r"applied port=8080")
            assert other.stop() == 0
            assert tc("class") == classes
            assert first.stop() == 0
            assert "5350:" not in tc("qdisc")
            # Once the first is gone the device is free again.
            again = start(pins_b, ef, "--pace-device", dev, cgroup=other_cgroup)
            again.wait_line(r"applied port=8080")
            assert "qdisc htb 5350: root" in tc("qdisc")
            assert again.stop() == 0
        finally:
            for a in started:  # on a failure, before the leftovers are removed
                a.stop()
            remove_leftovers(lab, pins, ef)
            remove_leftovers(lab, pins_b, ef)
            os.rmdir(other_cgroup)


def test_policy_of_an_agent_killed_with_sigkill_expires_in_the_kernel():
    max_age_s = 5
    with Lab("sf2") as lab:
        pins = pin_dir("sf2")
        ef = estimates_file([dict(est("10.77.1.0/24"), age_s=0)])
        cfg = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        cfg.write("[policy]\nmax_age_s = %d\n" % max_age_s)
        cfg.close()
        try:
            agent = lab.start(lab.in_srv(agent_args(lab, pins, ef, "-c", cfg.name)))
            agent.wait_line(r"applied port=8080 prefix=10.77.1.0/24 init_cwnd=%d " % EXPECTED)
            applied_at = time.monotonic()  # the estimate arrived before this
            start_server(lab)
            assert first_window(lab) == (EXPECTED, EXPECTED)
            agent.stop(signal.SIGKILL)  # removes nothing: link, map and policy stay
            assert cgroup_progs(lab).count("spand_sockops") == 1
            assert len(policies(pins)) == 1
            left = applied_at + max_age_s - time.monotonic()
            if left > 1:  # not checkable on a machine slow enough to use up the max age
                assert first_window(lab) == (EXPECTED, EXPECTED)
                print("killed agent's policy still applied %.1f s before its deadline" % left)
            # Waiting for time itself: the deadline is at most max_age_s after the estimate came.
            time.sleep(max(0.0, applied_at + max_age_s + 0.5 - time.monotonic()))
            assert cgroup_progs(lab).count("spand_sockops") == 1
            assert len(policies(pins)) == 1  # still in the map, no longer applied
            expired_before = stats(pins).get(STAT_EXPIRED, 0)
            assert first_window(lab) == (KERNEL_IW, NO_SSTHRESH)
            assert stats(pins).get(STAT_EXPIRED, 0) > expired_before
        finally:
            remove_leftovers(lab, pins, ef)
            os.unlink(cfg.name)


def unit_stop_post_commands():
    """The ExecStopPost lines of the agent's systemd unit, as argv lists ('-' dropped)."""
    unit = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "deploy",
                        "systemd", "spand-agent.service.in")
    return [line.split("=", 1)[1].lstrip("-").split()
            for line in open(unit).read().splitlines() if line.startswith("ExecStopPost=")]


def test_route_mode_after_sigkill_ipv6_expires_ipv4_needs_the_units_stop_post():
    """Route mode has no program to check a deadline: an IPv6 route carries the policy's
    deadline as its kernel lifetime and stops applying by itself; an IPv4 route has none in
    Linux and keeps its initcwnd after SIGKILL until the unit's ExecStopPost removes it."""
    max_age_s = 5
    with Lab("sf4") as lab:
        dev = lab.name + "v"
        # An IPv6 path for the agent to copy: 2001:db8::/32 via a neighbour on the veth.
        sh("ip -n %s -6 addr add fd77::1/64 dev %s nodad" % (lab.srv, dev))
        sh("ip -n %s -6 route add 2001:db8::/32 via fd77::2 dev %s" % (lab.srv, dev))
        ef = estimates_file([dict(est("10.77.1.0/24"), age_s=0),
                             dict(est("2001:db8:77::/48"), age_s=0)])
        cfg = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        cfg.write("[policy]\nmax_age_s = %d\n" % max_age_s)
        cfg.close()

        def get(addr):
            return sh("ip -n %s route get %s" % (lab.srv, addr)).stdout

        def ours():
            return (sh("ip -n %s route show table all proto 245" % lab.srv).stdout +
                    sh("ip -n %s -6 route show table all proto 245" % lab.srv).stdout)
        try:
            agent = lab.start(lab.in_srv([AGENT, *PAPER, "--metrics", "", "--mode", "route",
                                          "-f", ef, "-c", cfg.name, "-p", "0:%d" % SIZE,
                                          "-P", "10.77.1.0/24", "-P", "2001:db8:77::/48"]))
            agent.wait_line(r"applied port=0 prefix=10.77.1.0/24 init_cwnd=%d" % EXPECTED)
            agent.wait_line(r"applied port=0 prefix=2001:db8:77::/48 init_cwnd=%d" % EXPECTED)
            applied_at = time.monotonic()  # the estimates arrived before this
            v6 = sh("ip -n %s -6 route show proto 245" % lab.srv).stdout
            print(v6)
            assert "expires" in v6 and "initcwnd %d" % EXPECTED in v6
            assert "expires" not in sh("ip -n %s route show proto 245" % lab.srv).stdout
            assert "initcwnd %d" % EXPECTED in get("2001:db8:77::5")
            agent.stop(signal.SIGKILL)  # removes nothing
            assert "initcwnd %d" % EXPECTED in get("2001:db8:77::5")
            assert "initcwnd %d" % EXPECTED in get("10.77.1.5")
            # Waiting for time itself: the deadline is at most max_age_s after the estimate came.
            time.sleep(max(0.0, applied_at + max_age_s + 1.0 - time.monotonic()))
            after = get("2001:db8:77::5")
            print(after)
            assert "initcwnd" not in after and "via fd77::2" in after  # the /32 serves again
            assert "initcwnd %d" % EXPECTED in get("10.77.1.5")  # no lifetime for IPv4
            for argv in unit_stop_post_commands():
                sh("ip netns exec %s %s" % (lab.srv, " ".join(argv)))
            assert ours() == ""
            assert "initcwnd" not in get("10.77.1.5")
        finally:
            sh("ip netns exec %s ip route flush table all proto 245" % lab.srv)
            sh("ip netns exec %s ip -6 route flush table all proto 245" % lab.srv)
            os.unlink(cfg.name)
