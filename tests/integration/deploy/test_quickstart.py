#!/usr/bin/env python3
"""Runs deploy/quickstart.sh (the README's first command) on this build: a throwaway
redis-server, the bundled capture replayed through spand-gateway into it, spand-estimates and
`spandctl get` reading one estimate back. The script's setup.sh and build steps are skipped
(SPAND_BUILD: CI has just run them). Usage: test_quickstart.py BUILD_DIR. Exit 0 on success, 77
(skipped) without redis-server."""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(build):
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        print("redis-server or redis-cli missing: skipped")
        return 77
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, SPAND_BUILD=os.path.abspath(build), SPAND_QUICKSTART_OUT=out,
                   SPAND_QUICKSTART_REDIS_PORT=str(free_port()),
                   SPAND_QUICKSTART_GRPC_PORT=str(free_port()))
        r = subprocess.run(["bash", os.path.join(ROOT, "deploy", "quickstart.sh")], env=env,
                           capture_output=True, text=True, timeout=120)
        text = r.stdout + r.stderr
        failures = []
        if r.returncode != 0:
            failures.append("exit status %d" % r.returncode)
        keys = re.search(r"Redis now holds (\d+) spand keys", text)
        if not keys or int(keys.group(1)) == 0:
            failures.append("no spand key in Redis")
        # The estimate read back: spandctl's table row for the first sample's prefix, with the
        # demo's 1 sample / 1 client threshold met.
        samples, flows = os.path.join(out, "samples.jsonl"), os.path.join(out, "flows.jsonl")
        first = open(samples).readline() if os.path.exists(samples) else ""
        prefix = re.search(r'"prefix":"([^"]+)"', first)
        prefix = prefix.group(1) if prefix else None
        if not prefix:
            failures.append("no sample written")
        elif not re.search(r"^\S+\s+%s\s.*USE_ESTIMATE" % re.escape(prefix), r.stdout, re.M):
            failures.append("no USE_ESTIMATE row for %s" % prefix)
        # The gateway's prefix summary says the same of that prefix: both run with the demo's
        # thresholds (1 sample, 1 client), and the bundled capture gives each /24 more W_c
        # samples than that from at least one client (its first /24 has one client host).
        if prefix and not re.search(r"^%s\s.*USE_ESTIMATE\s*$" % re.escape(prefix), text, re.M):
            failures.append("the prefix summary does not say USE_ESTIMATE for %s" % prefix)
        if not os.path.exists(flows) or not os.path.getsize(flows):
            failures.append("no flow record")
        if failures:
            print(text[-4000:])
            print("FAILED: " + "; ".join(failures))
            return 1
        print("quickstart: %s spand keys, estimate for %s read back" % (keys.group(1), prefix))
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
