#!/usr/bin/env bash
# The dashboards as code, checked: deploy/grafana/*.json must be what dashboards.py writes
# (grafana-foundation-sdk, pinned in requirements.txt), and each must type-check as
# @grafana/schema's Dashboard with tsc --strict (versions pinned in tsc/package.json). Needs pip
# and npm (their registries). Usage: bash deploy/grafana/check.sh [WORKDIR]  (default
# ./build-grafana, reused between runs)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(realpath -m "${1:-$here/../../build-grafana}")
mkdir -p "$work"
[ -x "$work/venv/bin/python" ] || python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q -r "$here/requirements.txt"
"$work/venv/bin/python" "$here/dashboards.py" --check
cp "$here/tsc/package.json" "$here/tsc/tsconfig.json" "$work/"
(cd "$work" && npm install --no-audit --no-fund --loglevel=error > /dev/null)
python3 - "$here" "$work/check.ts" <<'PY'
import glob, os, sys
here, out = sys.argv[1], sys.argv[2]
lines = ["import type { Dashboard } from '@grafana/schema';", ""]
for p in sorted(glob.glob(os.path.join(here, "*.json"))):
    name = os.path.basename(p)[:-5].replace("-", "_")
    lines.append("export const %s: Dashboard = %s;" % (name, open(p).read()))
open(out, "w").write("\n".join(lines) + "\n")
print("dashboards: %d checked against @grafana/schema" % (len(lines) - 2))
PY
(cd "$work" && npx --no-install tsc -p .)
echo "dashboards: up to date with dashboards.py, tsc --strict clean"
