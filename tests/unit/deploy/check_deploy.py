"""The deployment files against the code: every metric a Grafana panel queries is one the
gateway, the estimate service or the agent exports (a renamed metric would leave a panel empty
without any error), every panel uses the dashboard's data source variable, no two panels
overlap, every job in the Prometheus configuration scrapes the port its component listens on by
default and in the example configurations (deploy/config), and the example agent asks the
example replica's port. Usage: check_deploy.py SOURCE_ROOT"""
import glob
import json
import os
import re
import sys
import tomllib

root = sys.argv[1]
errors = []

# Metric names as the code registers them: prometheus-cpp's .Name("...") and the service's own
# collectables, which write their family names as string literals too.
exported = set()
for path in glob.glob(os.path.join(root, "gateway", "**", "*.cpp"), recursive=True) + \
        glob.glob(os.path.join(root, "agents", "**", "*.cpp"), recursive=True) + \
        glob.glob(os.path.join(root, "common", "*.cpp")):
    with open(path) as f:
        exported.update(re.findall(r'"((?:spand|process)_[a-z0-9_]+)"', f.read()))

queried = 0
panels = 0
dashboards = sorted(glob.glob(os.path.join(root, "deploy", "grafana", "*.json")))
if not dashboards:
    errors.append("no dashboard in deploy/grafana")
for path in dashboards:
    with open(path) as f:
        dash = json.load(f)
    names = [v["name"] for v in dash["templating"]["list"]]
    if names[:3] != ["datasource", "job", "instance"]:
        errors.append("%s: variables %s, expected datasource, job, instance first" % (path, names))
    boxes = []
    for p in dash["panels"]:
        panels += 1
        g = p["gridPos"]
        boxes.append((p["title"], g["x"], g["y"], g["w"], g["h"]))
        if p["type"] == "row":
            continue
        if p["datasource"].get("uid") != "${datasource}":
            errors.append("panel %r does not use ${datasource}" % p["title"])
        for t in p["targets"]:
            if '$job' not in t["expr"] or '$instance' not in t["expr"]:
                errors.append("panel %r: a query without the job/instance filter" % p["title"])
            for name in re.findall(r"\b(spand_[a-z0-9_]+)", t["expr"]):
                queried += 1
                base = re.sub(r"_(bucket|count|sum)$", "", name)
                if name not in exported and base not in exported:
                    errors.append("panel %r queries %s, which nothing exports" % (p["title"], name))
    for i, (ta, xa, ya, wa, ha) in enumerate(boxes):
        for tb, xb, yb, wb, hb in boxes[i + 1:]:
            if xa < xb + wb and xb < xa + wa and ya < yb + hb and yb < ya + ha:
                errors.append("panels %r and %r overlap" % (ta, tb))

# Default listen ports, read from the code that sets them.
def default_port(path, pattern):
    with open(os.path.join(root, path)) as f:
        m = re.search(pattern, f.read())
    return m.group(1) if m else None

defaults = {
    "spand-agent": default_port("agents/spand-agent/src/config.hpp",
                                r'metrics_listen = "[0-9.]+:(\d+)"'),
}
with open(os.path.join(root, "deploy", "prometheus", "prometheus.yml")) as f:
    prom = f.read()
jobs = dict(re.findall(r"job_name: (\S+)\s+static_configs:\s+- targets: \['[^:]+:(\d+)'\]", prom))
for job, port in defaults.items():
    if jobs.get(job) != port:
        errors.append("prometheus.yml: job %s scrapes port %s, the default is %s"
                      % (job, jobs.get(job), port))
if not {"spand-gateway", "spand-estimates", "spand-agent"} <= set(jobs):
    errors.append("prometheus.yml: jobs %s, expected spand-gateway, spand-estimates, spand-agent"
                  % sorted(jobs))

# The example configurations (deploy/config, installed in /etc/spand) fit together: the agent
# asks the replica's gRPC port, and Prometheus scrapes each daemon's metrics_listen port.
def config(name):
    with open(os.path.join(root, "deploy", "config", name), "rb") as f:
        return tomllib.load(f)

def port_of(address):
    return address.rsplit(":", 1)[1] if address else None

examples = {"spand-gateway": config("gateway.toml"), "spand-estimates": config("estimates.toml")}
agent_cfg = config("agent.toml")["agent"]
replica_grpc = port_of(examples["spand-estimates"].get("grpc_listen"))
if port_of(agent_cfg.get("estimate_server")) != replica_grpc:
    errors.append("agent.toml: estimate_server %s, but estimates.toml's replica listens on port %s"
                  % (agent_cfg.get("estimate_server"), replica_grpc))
examples["spand-agent"] = agent_cfg
for job, cfg in examples.items():
    if port_of(cfg.get("metrics_listen")) != jobs.get(job):
        errors.append("prometheus.yml: job %s scrapes port %s, its example configuration's "
                      "metrics_listen is %s" % (job, jobs.get(job), cfg.get("metrics_listen")))

# Every metric the Prometheus rules use (recording rules' own names hold a colon).
with open(os.path.join(root, "deploy", "prometheus", "spand-rules.yml")) as f:
    rules = f.read()
rule_refs = set(re.findall(r"(?<![:\w])((?:spand|process)_[a-z0-9_]+)", rules))
for name in sorted(rule_refs):
    base = re.sub(r"_(bucket|count|sum)$", "", name)
    if name not in exported and base not in exported:
        errors.append("spand-rules.yml uses %s, which nothing exports" % name)

print("%d dashboards, %d panels, %d metric references, %d metric names exported, jobs %s"
      % (len(dashboards), panels, queried, len(exported), sorted(jobs)))
for e in errors:
    print("FAIL:", e)
sys.exit(1 if errors else 0)
