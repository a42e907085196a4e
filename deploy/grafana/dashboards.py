#!/usr/bin/env python3
"""spand's Grafana dashboards, as code (grafana-foundation-sdk, the release built for Grafana
11.6, pinned in requirements.txt). Writes one JSON file per dashboard beside this script:

  spand-capture.json         capture health: frames, bytes, drops by reason, loss before the gateway
                             (share per gateway; frames per port and cause)
  spand-reconstruction.json  connections, samples by kind, unsound W_c by reason, loss events by class
  spand-store.json           Redis flushes, backlog, errors, rejected samples, the store's clock
  spand-service.json         gRPC rate and latency by method and code, verdicts, Report
  spand-agents.json          applied / skipped by reason, kernel state, program events
  spand-benefit.json         first windows applied and paced, TCP_INFO samples reported

Every dashboard has the data source, `job` and `instance` variables; every query is filtered by
them. Usage: dashboards.py [--check]   (--check: exit 1 if a file differs from what it would
write). The queries are listed by panel with `--list` (the deployment test runs each against a
real Prometheus)."""
import json
import os
import sys

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.builders import stat
from grafana_foundation_sdk.builders import timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dm

HERE = os.path.dirname(os.path.abspath(__file__))
DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
SEL = 'job=~"$job",instance=~"$instance"'


def q(expr, legend):
    """A Prometheus query; {S} in `expr` is the job/instance selector."""
    return (prom.Dataquery().expr(expr.replace("{S}", SEL)).legend_format(legend)
            .datasource(DS).range())


def ref_ids(panel, queries):
    for i, query in enumerate(queries):
        panel = panel.with_target(query.ref_id(chr(ord("A") + i)))
    return panel


def series(title, desc, unit, *queries, stack=False):
    p = (timeseries.Panel().title(title).description(desc).unit(unit).datasource(DS)
         .height(8).span(12).fill_opacity(10).min(0))
    p = ref_ids(p, queries)
    if stack:
        p = p.stacking(db_stacking())
    return p


def db_stacking():
    from grafana_foundation_sdk.builders import common
    from grafana_foundation_sdk.models import common as cm
    return common.StackingConfig().mode(cm.StackingMode.NORMAL)


def single(title, desc, unit, query):
    return ref_ids(stat.Panel().title(title).description(desc).unit(unit).datasource(DS)
                   .height(4).span(6), [query])


def variables(d, job_metric):
    ds = (db.DatasourceVariable("datasource").label("Data source").type("prometheus")
          .current(dm.VariableOption(selected=True, text="Prometheus", value="prometheus")))
    job = (db.QueryVariable("job").label("job").datasource(DS)
           .query("label_values(%s, job)" % job_metric)
           .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).include_all(True).multi(True)
           .all_value(".*")
           .current(dm.VariableOption(selected=True, text="All", value="$__all")))
    inst = (db.QueryVariable("instance").label("instance").datasource(DS)
            .query('label_values(%s{job=~"$job"}, instance)' % job_metric)
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED).include_all(True).multi(True)
            .all_value(".*")
            .current(dm.VariableOption(selected=True, text="All", value="$__all")))
    return d.with_variable(ds).with_variable(job).with_variable(inst)


def board(uid, title, desc, job_metric, panels):
    d = (db.Dashboard(title).uid(uid).description(desc).tags(["spand"]).refresh("30s")
         .time("now-1h", "now").timezone("browser").editable())
    d = variables(d, job_metric)
    for p in panels:
        d = d.with_panel(p)
    return d.build()


def small_windows_panel(rate):
    """TCP Smart Framing's case (docs/api.md, "Loss figures"): the share of finished
    connections whose server's flight never reached 4 segments, too few for the 3 duplicate ACKs
    of a fast retransmit (per prefix: spandctl get, FLOWS NEVER4% LOSSES RTO%)."""
    return series("Flows that never reached 4 segments",
                  "Finished connections whose server sent data and whose flight never reached 4 "
                  "segments (too few for the 3 duplicate ACKs of a fast retransmit: their losses "
                  "mostly wait for a timeout), as a share of all "
                  "such connections; per prefix: spandctl get", "percentunit",
                  q('sum by (instance) (rate(spand_server_flows_total{{S},flight="below_4"}%s)) / '
                    "sum by (instance) (rate(spand_server_flows_total{{S}}%s))" % (rate, rate),
                    "{{instance}}"))


def dashboards():
    rate = "[$__rate_interval]"
    out = {}
    out["spand-capture"] = board(
        "spand-capture", "spand / capture health",
        "Frames the gateway reads and the ones it cannot use: drops by reason, loss before it.",
        "spand_packets_received_total", [
            series("Frames received", "Frames read from the capture source, per gateway",
                   "pps", q("sum by (instance) (rate(spand_packets_received_total{{S}}%s))" % rate,
                            "{{instance}}")),
            series("Bytes received", "Wire bytes of those frames", "Bps",
                   q("sum by (instance) (rate(spand_bytes_received_total{{S}}%s))" % rate,
                     "{{instance}}")),
            series("Drops by reason", "Frames not used (parse, flow table full, ...), samples lost "
                   "to a full ring", "pps",
                   q("sum by (reason) (rate(spand_drops_total{{S}}%s)) > 0" % rate, "{{reason}}")),
            series("Loss before the gateway", "Frames the kernel or NIC dropped (libpcap "
                   "ps_drop + ps_ifdrop, DPDK imissed + rx_nombuf), as a share of all frames",
                   "percentunit",
                   q("sum by (instance) (rate(spand_capture_dropped_total{{S}}%s)) / "
                     "(sum by (instance) (rate(spand_packets_received_total{{S}}%s)) + "
                     "sum by (instance) (rate(spand_capture_dropped_total{{S}}%s)))"
                     % (rate, rate, rate), "{{instance}}")),
            series("Loss before the gateway, by port and cause", "Frames dropped per capture "
                   "port (DPDK device) or interface (libpcap), by cause: imissed (the NIC had no "
                   "free descriptor: add workers), rx_nombuf (mbuf pool empty), kernel (the "
                   "ring was full: buffer_mb), interface (the driver dropped)", "pps",
                   q("sum by (instance, port, cause) "
                     "(rate(spand_capture_port_dropped_total{{S}}%s))" % rate,
                     "{{instance}} {{port}} {{cause}}")),
            single("Interface down events", "Times a live interface went down or away", "short",
                   q("sum(increase(spand_capture_interface_down_total{{S}}[$__range]))", "down")),
        ])
    out["spand-reconstruction"] = board(
        "spand-reconstruction", "spand / reconstruction",
        "Connections tracked and the samples taken from them.", "spand_connections_active", [
            series("Connections", "In the flow tables now, and directions holding a LossState",
                   "short", q("sum by (instance) (spand_connections_active{{S}})", "active {{instance}}"),
                   q("sum by (instance) (spand_connection_directions_in_loss{{S}})",
                     "in loss {{instance}}")),
            series("Connections created and evicted", "Inserted, and removed from a full table",
                   "ops", q("sum(rate(spand_connections_created_total{{S}}%s))" % rate, "created"),
                   q("sum(rate(spand_connections_evicted_total{{S}}%s))" % rate, "evicted")),
            series("Samples by kind", "W_c and RTT samples taken from capture", "ops",
                   q("sum by (kind) (rate(spand_samples_total{{S}}%s))" % rate, "{{kind}}")),
            small_windows_panel(rate),
            series("Unsound W_c by reason", "W_c samples not taken: seq_jump, pickup, evicted",
                   "ops", q("sum by (reason) (rate(spand_wc_unsound_total{{S}}%s))" % rate,
                            "{{reason}}")),
            series("Loss events by class", "Loss events as the gateway classifies them, by how "
                   "the sender recovered (fast_retransmit, timeout: a resent SYN counts as a "
                   "timeout) and by direction (s2c: servers' data). Timeouts cost a "
                   "retransmission timer each: a rising share is what slow start's first "
                   "window can cause", "ops",
                   q("sum by (class, direction) (rate(spand_loss_events_total{{S}}%s))" % rate,
                     "{{direction}} {{class}}")),
        ])
    out["spand-store"] = board(
        "spand-store", "spand / estimate store (Redis)",
        "The Redis writer of gateways and replicas: flushes, backlog, errors, the store's clock.",
        "spand_redis_backlog_updates", [
            series("Flush latency", "p50 and p99 of one pipelined flush", "s",
                   q("histogram_quantile(0.5, sum by (le) (rate("
                     "spand_redis_flush_duration_seconds_bucket{{S}}%s)))" % rate, "p50"),
                   q("histogram_quantile(0.99, sum by (le) (rate("
                     "spand_redis_flush_duration_seconds_bucket{{S}}%s)))" % rate, "p99")),
            series("Flushes and errors", "Flushes done and flushes that failed", "ops",
                   q("sum(rate(spand_redis_flush_duration_seconds_count{{S}}%s))" % rate, "flushes"),
                   q("sum(rate(spand_redis_flush_errors_total{{S}}%s))" % rate, "errors")),
            series("Backlog", "Bucket updates waiting for Redis, per process", "short",
                   q("spand_redis_backlog_updates{{S}}", "{{instance}}")),
            series("Dropped and rejected", "Updates dropped from the full backlog; samples the "
                   "writer refused, by reason", "ops",
                   q("sum(rate(spand_redis_backlog_dropped_updates_total{{S}}%s))" % rate,
                     "dropped updates"),
                   q("sum by (reason) (rate(spand_samples_rejected_total{{S}}%s))" % rate,
                     "rejected {{reason}}")),
            series("Store clock lag", "Wall time minus the service's now (capture time in the "
                   "gateway, spand:{g}:clock in a replica)", "s",
                   q("time() - (spand_store_clock_seconds{{S}} > 0)", "{{instance}}")),
        ])
    out["spand-service"] = board(
        "spand-service", "spand / estimate service",
        "spand.v1 over gRPC in gateways and replicas: rate, latency, verdicts, Report.",
        "spand_grpc_requests_total", [
            series("Requests by method and code", "Calls handled", "reqps",
                   q("sum by (method, code) (rate(spand_grpc_requests_total{{S}}%s))" % rate,
                     "{{method}} {{code}}")),
            series("Latency p50 and p99", "Handling time (streams: the whole stream)", "s",
                   q("histogram_quantile(0.5, sum by (le, method) (rate("
                     "spand_grpc_request_duration_seconds_bucket{{S}}%s)))" % rate, "p50 {{method}}"),
                   q("histogram_quantile(0.99, sum by (le, method) (rate("
                     "spand_grpc_request_duration_seconds_bucket{{S}}%s)))" % rate, "p99 {{method}}")),
            series("Verdicts", "Estimates answered by Get and BatchGet", "ops",
                   q("sum by (verdict) (rate(spand_estimates_total{{S}}%s))" % rate, "{{verdict}}")),
            single("Answers that skip slow start", "Share of USE_ESTIMATE over the range",
                   "percentunit",
                   q('sum(increase(spand_estimates_total{verdict="use_estimate",{S}}[$__range])) / '
                     "sum(increase(spand_estimates_total{{S}}[$__range]))", "share")),
            series("Report: samples and rejections", "Samples received from agents by kind; "
                   "messages rejected by reason", "ops",
                   q("sum by (kind) (rate(spand_report_samples_total{{S}}%s))" % rate, "{{kind}}"),
                   q("sum by (reason) (rate(spand_report_rejected_total{{S}}%s)) > 0" % rate,
                     "rejected {{reason}}")),
            single("Processes up", "Scrape targets of the selected jobs that answer", "short",
                   q("sum(up{{S}})", "up")),
        ])
    out["spand-agents"] = board(
        "spand-agents", "spand / agents",
        "spand-agent on the servers: what it applied, what it skipped, the kernel's state.",
        "spand_agent_program_attached", [
            series("Applied and skipped", "Policies written to the kernel; estimates not "
                   "applied, by reason", "ops",
                   q("sum(rate(spand_agent_estimates_applied_total{{S}}%s))" % rate, "applied"),
                   q("sum by (reason) (rate(spand_agent_estimates_skipped_total{{S}}%s)) > 0" % rate,
                     "skipped {{reason}}")),
            series("Kernel state", "Program attached (1/0), routes installed, pacing devices",
                   "short", q("spand_agent_program_attached{{S}}", "attached {{instance}}"),
                   q("spand_agent_routes_installed{{S}}", "routes {{instance}}"),
                   q("spand_agent_pacing_devices{{S}}", "pacing devices {{instance}}")),
            series("sock_ops program events", "The program's own counts, by event", "ops",
                   q("sum by (event) (rate(spand_agent_program_events_total{{S}}%s)) > 0" % rate,
                     "{{event}}")),
            series("Service calls", "Failed Get/Report calls; connections whose prefix had a "
                   "cached estimate", "ops",
                   q("sum(rate(spand_agent_grpc_errors_total{{S}}%s))" % rate, "gRPC errors"),
                   q("sum(rate(spand_agent_cache_hits_total{{S}}%s))" % rate, "cache hits")),
        ])
    out["spand-benefit"] = board(
        "spand-benefit", "spand / benefit",
        "Where agents report it: first windows the kernel took from spand, and the TCP_INFO "
        "samples that feed the estimates back.", "spand_agent_program_attached", [
            series("First windows applied", "Connections whose initial cwnd came from spand "
                   "(sock_ops event applied), paced first windows (pace_classed)", "ops",
                   q('sum(rate(spand_agent_program_events_total{event="applied",{S}}%s))' % rate,
                     "applied"),
                   q('sum(rate(spand_agent_program_events_total{event="pace_classed",{S}}%s))'
                     % rate, "paced")),
            series("TCP_INFO samples reported", "Samples the service accepted, by kind; "
                   "dropped while it was away", "ops",
                   q("sum by (kind) (rate(spand_agent_tcp_info_samples_sent_total{{S}}%s))" % rate,
                     "{{kind}}"),
                   q("sum(rate(spand_agent_tcp_info_samples_dropped_total{{S}}%s))" % rate,
                     "dropped")),
            series("Sockets sampled", "Socket snapshots read, sockets tracked", "short",
                   q("sum(rate(spand_agent_tcp_info_sockets_sampled_total{{S}}%s))" % rate,
                     "snapshots/s"),
                   q("sum(spand_agent_tcp_info_sockets_tracked{{S}})", "tracked")),
        ])
    return out


def render(d):
    obj = json.loads(json.dumps(d, cls=JSONEncoder))
    # The SDK writes the interval variables' auto* fields on every variable; @grafana/schema's
    # VariableModel has no such keys (tsc --strict: excess property), and only interval
    # variables use them.
    for v in obj["templating"]["list"]:
        if v.get("type") != "interval":
            for k in ("auto", "auto_count", "auto_min"):
                v.pop(k, None)
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def main(argv):
    boards = dashboards()
    if "--list" in argv:
        for name, d in boards.items():
            for p in json.loads(render(d))["panels"]:
                for t in p.get("targets", []):
                    print("%s\t%s\t%s" % (name, p["title"], t["expr"]))
        return 0
    stale = []
    for name, d in boards.items():
        path = os.path.join(HERE, name + ".json")
        text = render(d)
        old = open(path).read() if os.path.exists(path) else None
        if "--check" in argv:
            if old != text:
                stale.append(path)
        elif old != text:
            with open(path, "w") as f:
                f.write(text)
    for s in stale:
        print("stale (run deploy/grafana/dashboards.py): %s" % s)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
