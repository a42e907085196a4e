"""The live loop end to end, briefly: run.py --smoke (a /24 reaches USE_ESTIMATE from live
traffic through the mirror, the agent applies it, the kernel's initial window of the next spand
connections is the applied one). Needs root and a build; SPAND_BUILD names the build directory
(default: build/ at the top of the repository). Registered as the integration test benefit_smoke."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root (namespaces, cgroups, BPF)')
def test_live_loop_smoke(tmp_path):
    build = os.environ.get('SPAND_BUILD', os.path.join(REPO, 'build'))
    r = subprocess.run(['/usr/bin/python3', os.path.join(HERE, 'run.py'),
                        os.path.join(HERE, 'scenarios', 'idle.toml'), '--smoke',
                        '--build', build, '--out', str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    sys.stderr.write(r.stderr)
    if r.returncode == 77:
        pytest.skip('this machine cannot run the lab: ' + r.stderr[-300:])
    assert r.returncode == 0, r.stderr[-3000:]
