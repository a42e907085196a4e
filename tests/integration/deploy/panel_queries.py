"""Every query of every dashboard in deploy/grafana, run against a Prometheus server: the
dashboard variables become what Grafana would send ($job and $instance: all, $__rate_interval and
$__range: the given windows). Prints one line per query: dashboard, panel, query letter, the
number of series returned and their values (4 significant digits), "NO DATA" when none. Writes
the same as JSON to OUT, each row with the query as sent (expr). Usage: panel_queries.py
DASHBOARD_DIR PROMETHEUS_URL OUT.json"""
import glob
import json
import math
import os
import sys
import urllib.parse
import urllib.request


def query(url, expr):
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen("%s/api/v1/query?%s" % (url, q), timeout=10) as r:
        body = json.load(r)
    if body["status"] != "success":
        raise RuntimeError("%s: %s" % (expr, body))
    return body["data"]["result"]


def main(dashboard_dir, url, out):
    rows = []
    for path in sorted(glob.glob(os.path.join(dashboard_dir, "*.json"))):
        d = json.load(open(path))
        for p in d["panels"]:
            for t in p.get("targets", []):
                expr = (t["expr"].replace("$job", ".*").replace("$instance", ".*")
                        .replace("$__rate_interval", "20s").replace("$__range", "2m"))
                result = query(url, expr)
                # 4 significant digits: latencies in seconds stay visible. NaN (a quantile
                # without observations) once, last.
                got = [float("%.4g" % float(r["value"][1])) for r in result]
                values = sorted({v for v in got if not math.isnan(v)})
                values += [math.nan] if any(math.isnan(v) for v in got) else []
                rows.append({"dashboard": os.path.basename(path)[:-5], "panel": p["title"],
                             "ref": t.get("refId", ""), "legend": t.get("legendFormat", ""),
                             "expr": expr, "series": len(result), "values": values[:6]})
                print("%-22s %-32s %s %-22s %s" % (
                    rows[-1]["dashboard"], p["title"][:32], rows[-1]["ref"],
                    rows[-1]["legend"][:22],
                    "NO DATA" if not result else "%d series: %s" % (len(result), values[:6])))
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:4])
