#!/usr/bin/env python3
"""check_planes.py catches what it is meant to: a copy of the gateway tree passes, and the same
copy fails once a tracker file includes the worker (directly, or through a header the tracker
includes) or once the data plane includes another plane. Usage: check_planes_test.py SOURCE_ROOT"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

root = pathlib.Path(sys.argv[1])
script = root / "tests" / "check_planes.py"


def run(tree):
    r = subprocess.run([sys.executable, str(script), str(tree)], capture_output=True, text=True)
    return r.returncode, r.stdout


def with_tree(edit):
    with tempfile.TemporaryDirectory() as d:
        tree = pathlib.Path(d)
        shutil.copytree(root / "gateway", tree / "gateway")
        if edit:
            path, line = edit
            f = tree / path
            f.write_text(f.read_text().replace("#pragma once\n", "#pragma once\n" + line + "\n", 1)
                         if f.suffix == ".hpp" else line + "\n" + f.read_text())
        return run(tree)


failures = []
rc, out = with_tree(None)
if rc != 0:
    failures.append(f"the unchanged tree fails:\n{out}")
cases = [
    # A tracker file including the worker directly.
    (("gateway/dataplane/tracker_wc.cpp", '#include "dataplane/worker.hpp"'),
     "tracker_wc.cpp: reaches 'dataplane/worker.hpp'"),
    # Through a header the tracker includes: flow.hpp is below the worker too.
    (("gateway/dataplane/flow.hpp", '#include "dataplane/worker.hpp"'),
     "tracker.cpp: reaches 'dataplane/worker.hpp'"),
    # The data plane including a higher plane.
    (("gateway/dataplane/parse.cpp", '#include "capture/source.hpp"'),
     "dataplane includes higher plane"),
]
for edit, expect in cases:
    rc, out = with_tree(edit)
    if rc != 1 or expect not in out:
        failures.append(f"{edit}: expected exit 1 and '{expect}', got exit {rc}:\n{out}")
for f in failures:
    print("FAIL", f)
print(f"check_planes_test: {1 + len(cases)} cases, {len(failures)} failures")
sys.exit(1 if failures else 0)
