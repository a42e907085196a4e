"""Where Scalable TCP (spand_scalable, registered by spand-agent) helps and where it does not:
one long flow at a time through a drop-tail bottleneck, Scalable against Reno and CUBIC, in the
namespaces of test_scalable.py (delay line both ways, TBF towards the client). A measurement,
not a test: prints goodput per congestion control and scenario.

usage (root): SPAND_AGENT=BUILD/agents/spand-agent/spand-agent DELAY_LINE=tests/lab/delay_line.py \\
    /usr/bin/python3 tests/integration/agent/scalable_scenarios.py [SECONDS]

Scenarios: the paper's Scenario 3 (45 Mbit/s, 200 ms; buffer 0.1 BDP), and a small path
(10 Mbit/s, 20 ms; buffer 1 BDP) where windows stay near the legacy window."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_scalable import CC, ScalableLab, clear_leftover, start_agent  # noqa: E402

MSS_WIRE = 1514


def scenario(name, mbit, one_way_ms, buffer_bdp, seconds, warmup):
    bdp = mbit * 1e6 / 8 * 2 * one_way_ms / 1000
    limit = max(int(buffer_bdp * bdp), 4 * MSS_WIRE)
    out = []
    with ScalableLab("sc4", one_way_ms) as lab:
        agent = start_agent(lab)
        agent.wait_line(r"registered congestion control %s" % CC)
        lab.server()
        lab.bottleneck(mbit, limit)
        for cc in (CC, "reno", "cubic"):
            flow = lab.race(seconds, warmup, [("10.79.3.2", cc)])[0]
            out.append((cc, flow["mbit_s"]))
            print("%s (%d Mbit/s, %d ms, buffer %.2f BDP = %d B; BDP %.0f segments): %-14s "
                  "%.2f Mbit/s (%.0f %% of the link) over %d s after %d s"
                  % (name, mbit, 2 * one_way_ms, buffer_bdp, limit, bdp / 1448, cc,
                     flow["mbit_s"], 100 * flow["mbit_s"] / mbit, seconds, warmup), flush=True)
        assert agent.stop() == 0
    return out


def main():
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    clear_leftover()
    scenario("scenario 3", 45, 100, 0.1, seconds, 10)
    scenario("small path", 10, 10, 1.0, max(seconds // 3, 10), 5)


if __name__ == "__main__":
    main()
