"""`meson install` as an operator gets it, into a scratch DESTDIR: the binaries, the systemd
units with the installation's own paths (they pass `systemd-analyze verify` and their
`systemd-analyze security` exposure stays under the measured bounds), the example
configurations (each binary reads its own), man pages, bash completion that offers the
binaries' options, the documentation, and a pkg-config file a C program builds against.
Environment: SPAND_BUILD_ROOT (the meson build directory), SPAND_SOURCE_ROOT."""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

BUILD = os.environ["SPAND_BUILD_ROOT"]
ROOT = os.environ["SPAND_SOURCE_ROOT"]
UNITS = ["spand-gateway.service", "spand-estimates.service", "spand-agent.service"]
# systemd-analyze security's exposure (0 best, 10 worst), measured with systemd 252; the issue
# asks at most 4.0 for the replica and as low as the capabilities allow for the others.
EXPOSURE_MAX = {"spand-estimates.service": 1.5, "spand-gateway.service": 2.0,
                "spand-agent.service": 3.0}


@pytest.fixture(scope="module")
def dest():
    d = tempfile.mkdtemp(prefix="spand-install-")
    r = subprocess.run(["meson", "install", "-C", BUILD, "--destdir", d, "--no-rebuild",
                        "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    yield d
    shutil.rmtree(d)


def build_options():
    out = subprocess.run(["meson", "introspect", "--buildoptions", BUILD], capture_output=True,
                         text=True, check=True).stdout
    return {o["name"]: o["value"] for o in json.loads(out)}


def build_option(name):
    value = build_options()[name]
    return ",".join(value) if isinstance(value, list) else str(value)


def meson_dir(name):
    """An installation directory as meson configured it (absolute)."""
    opts = build_options()
    value = opts[name]
    return value if os.path.isabs(value) else os.path.join(opts["prefix"], value)


def installed(dest, path):
    return dest + path


def one(dest, pattern):
    found = glob.glob(dest + pattern, recursive=True)
    assert len(found) == 1, (pattern, found)
    return found[0]


def test_binaries_units_configs_docs_are_installed(dest):
    bindir, sbindir = meson_dir("bindir"), meson_dir("sbindir")
    for b in ["spand-gateway", "spand-estimates", "spandctl"]:
        assert os.access(installed(dest, os.path.join(bindir, b)), os.X_OK), b
    assert os.access(installed(dest, os.path.join(sbindir, "spand-agent")), os.X_OK)
    for u in UNITS:
        one(dest, "/**/lib/systemd/system/" + u)
    for c in ["gateway.toml", "estimates.toml", "agent.toml"]:
        assert os.path.isfile(installed(dest, os.path.join(meson_dir("sysconfdir"), "spand", c)))
    for p in ["spand-gateway", "spand-estimates", "spandctl", "spand-agent"]:
        one(dest, "/**/share/bash-completion/completions/" + p)
    for d in ["README.md", "deploy.md", "metrics.md", "examples/prometheus.yml"]:
        one(dest, "/**/share/doc/spand/" + d)
    if shutil.which("help2man"):
        for m in ["man1/spand-gateway.1", "man1/spand-estimates.1", "man1/spandctl.1",
                  "man8/spand-agent.8"]:
            one(dest, "/**/share/man/" + m)


def unit_text(dest, unit):
    return open(one(dest, "/**/lib/systemd/system/" + unit)).read()


@pytest.mark.parametrize("unit", UNITS)
def test_units_name_installed_paths_and_verify(dest, unit, tmp_path):
    text = unit_text(dest, unit)
    exe, config = re.search(r"^ExecStart=(\S+) --config (\S+)$", text, re.M).groups()
    assert os.access(installed(dest, exe), os.X_OK), exe
    assert os.path.isfile(installed(dest, config)), config
    # The installed binary reads the installed example configuration.
    r = subprocess.run([installed(dest, exe), "--config", installed(dest, config),
                        "--print-config"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze not installed")
    # verify checks that ExecStart is executable: point it into DESTDIR.
    local = tmp_path / unit
    local.write_text(text.replace("ExecStart=" + exe, "ExecStart=" + installed(dest, exe)))
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(local)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    r = subprocess.run(["systemd-analyze", "security", "--offline=true", str(local)],
                       capture_output=True, text=True)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    assert m, r.stdout + r.stderr
    print("%s: exposure %s" % (unit, m.group(1)))
    assert float(m.group(1)) <= EXPOSURE_MAX[unit]


def test_dpdk_drop_in_verifies(dest, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze not installed")
    text = unit_text(dest, "spand-gateway.service")
    exe = re.search(r"^ExecStart=(\S+)", text, re.M).group(1)
    drop_in = open(one(dest, "/**/share/doc/spand/examples/spand-gateway-dpdk.conf")).read()
    local = tmp_path / "spand-gateway.service"
    local.write_text(text.replace("ExecStart=" + exe, "ExecStart=" + installed(dest, exe)) +
                     "\n" + drop_in)
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(local)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr


@pytest.mark.parametrize("unit", ["spand-gateway.service", "spand-estimates.service"])
def test_redis_password_drop_in_verifies(dest, unit, tmp_path):
    """The units run as a DynamicUser, which cannot read a root-owned 0640 password file: the
    drop-in hands it over as a credential, and the name the configuration must use is the one
    systemd gives it."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze not installed")
    text = unit_text(dest, unit)
    assert re.search(r"^DynamicUser=yes$", text, re.M)
    exe = re.search(r"^ExecStart=(\S+)", text, re.M).group(1)
    drop_in = open(one(dest, "/**/share/doc/spand/examples/spand-redis-password.conf")).read()
    cred = re.search(r"^LoadCredential=([^:]+):(\S+)$", drop_in, re.M)
    assert cred and cred.group(2) == "/etc/spand/redis.password", drop_in
    # The path its comment tells the operator to configure is where systemd puts the credential.
    assert "/run/credentials/spand-gateway.service/%s" % cred.group(1) in drop_in, drop_in
    local = tmp_path / unit
    local.write_text(text.replace("ExecStart=" + exe, "ExecStart=" + installed(dest, exe)) +
                     "\n" + drop_in)
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(local)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr


def test_pkg_config_builds_a_c_program(dest, tmp_path):
    if not shutil.which("pkg-config") or not shutil.which("cc"):
        pytest.skip("pkg-config or cc missing")
    pc = os.path.dirname(one(dest, "/**/pkgconfig/libspand.pc"))
    env = dict(os.environ, PKG_CONFIG_LIBDIR=pc, PKG_CONFIG_SYSROOT_DIR=dest)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "--static", "libspand"],
                           capture_output=True, text=True, env=env, check=True)
    assert dest in flags.stdout, flags.stdout  # resolved inside DESTDIR, not the host's /usr
    exe = tmp_path / "c_api"
    # A sanitizer build installs an instrumented libspand.a: link the program with the same.
    sanitize = build_option("b_sanitize")
    extra = ["-fsanitize=" + sanitize] if sanitize not in ("none", "") else []
    subprocess.run(["cc", "-std=c11", os.path.join(ROOT, "tests", "unit", "libspand",
                                                    "c_api_test.c"), "-o", str(exe),
                    *flags.stdout.split(), *extra], check=True)
    assert subprocess.run([str(exe)]).returncode == 0


def test_bash_completion_offers_the_options(dest):
    bc = "/usr/share/bash-completion/bash_completion"
    if not os.path.isfile(bc):
        pytest.skip("bash-completion not installed")
    bindir = installed(dest, meson_dir("bindir"))
    script = one(dest, "/**/share/bash-completion/completions/spand-gateway")
    r = subprocess.run(["bash", "-c",
                        'source %s; source %s; COMP_WORDS=(spand-gateway --print-c); '
                        'COMP_CWORD=1; COMP_LINE="spand-gateway --print-c"; COMP_POINT=23; '
                        '_spand spand-gateway --print-c spand-gateway; echo "${COMPREPLY[@]}"'
                        % (bc, script)],
                       capture_output=True, text=True, env=dict(os.environ, PATH=bindir + ":" +
                                                                os.environ["PATH"]))
    assert r.stdout.split() == ["--print-config"], r.stdout + r.stderr


def test_bash_completion_offers_spandctl_commands(dest):
    """spandctl's commands (as its --help lists them) complete after global options too."""
    bc = "/usr/share/bash-completion/bash_completion"
    if not os.path.isfile(bc):
        pytest.skip("bash-completion not installed")
    script = one(dest, "/**/share/bash-completion/completions/spandctl")

    def complete(*words):
        line = " ".join(words)
        r = subprocess.run(["bash", "-c",
                            'source %s; source %s; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
                            'COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; '
                            '_spand spandctl "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"; '
                            'echo "${COMPREPLY[@]}"' % (bc, script), "complete", *words],
                           capture_output=True, text=True)
        assert r.returncode == 0, line + ": " + r.stderr
        return r.stdout.split()

    spandctl = installed(dest, os.path.join(meson_dir("bindir"), "spandctl"))
    if not os.access(spandctl, os.X_OK):
        pytest.skip("spandctl is not built in this configuration")
    # The commands of spandctl's own --help (its "commands:" block).
    help_text = subprocess.run([spandctl, "--help"], capture_output=True, text=True).stdout
    block = help_text.split("commands:", 1)[1].split("options:", 1)[0]
    commands = re.findall(r"^  (\w+)\b", block, re.M)
    assert "losses" in commands, commands
    assert complete("spandctl", "") == commands
    assert complete("spandctl", "--server", "127.0.0.1:50052", "--json", "") == commands
    assert complete("spandctl", "--timeout-ms", "100", "lo") == ["losses"]
    assert complete("spandctl", "top", "") == []
