#!/usr/bin/env python3
"""Runs the spandctl binary: `spandctl_cwnd_test.py SPANDCTL CASE`. Exit 0 on success."""
import json
import subprocess
import sys


def run(spandctl, *args):
    return subprocess.run([spandctl, *args], capture_output=True, text=True, timeout=30)


def fail(msg, proc=None):
    if proc is not None:
        msg += f"\nexit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    print(msg, file=sys.stderr)
    sys.exit(1)


def table_value(stdout, key):
    for line in stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == key:
            return parts[1]
    return None


def worked_example(spandctl):
    # The paper's Fig. 4: b = 1, W_c = 10, F = 11 -> m = 9, Delta = 4, cwnd_opt = 5.
    p = run(spandctl, "cwnd", "--wc", "10", "--segments", "11", "--b", "1")
    if p.returncode != 0:
        fail("table run failed", p)
    want = {"m": "9", "Delta": "4", "cwnd_opt": "5", "F_E": "66", "residual": "11"}
    for key, value in want.items():
        if table_value(p.stdout, key) != value:
            fail(f"table: {key} should be {value}", p)

    p = run(spandctl, "cwnd", "--wc=10", "--segments=11", "--json")
    if p.returncode != 0:
        fail("json run failed", p)
    doc = json.loads(p.stdout)
    for key, value in {"m": 9, "delta": 4, "cwnd_opt": 5, "epoch_segments": 66,
                       "residual_segments": 11, "variant": "loss-free", "shift": True}.items():
        if doc.get(key) != value:
            fail(f"json: {key} should be {value!r}", p)

    # 16000 bytes at MSS 1460 is 11 segments; 5 segments of 1460 bytes per 100 ms is
    # 73000 bytes/s = 584000 bit/s.
    p = run(spandctl, "cwnd", "--wc", "10", "--bytes", "16000", "--mss", "1460",
            "--srtt-ms", "100", "--json")
    doc = json.loads(p.stdout) if p.returncode == 0 else fail("bytes run failed", p)
    if (doc["transfer_segments"], doc["cwnd_opt"], doc["pacing_rate_bytes_per_s"],
            doc["pacing_rate_bps"]) != (11, 5, 73000, 584000):
        fail("bytes/pacing values wrong", p)

    p = run(spandctl, "cwnd", "--wc", "10", "--segments", "11", "--no-shift", "--json")
    if p.returncode != 0 or json.loads(p.stdout)["cwnd_opt"] != 9:
        fail("--no-shift should give cwnd_opt = m = 9", p)

    p = run(spandctl, "cwnd", "--help")
    if p.returncode != 0 or "--wc" not in p.stdout:
        fail("--help should print usage and exit 0", p)


def bad_usage(spandctl):
    cases = [
        (["cwnd", "--wc", "10", "--segments", "11", "--bogus"], "unknown option '--bogus'"),
        (["cwnd", "--segments", "11"], "--wc is required"),
        (["cwnd", "--wc", "10"], "--segments or --bytes is required"),
        (["cwnd", "--wc", "0", "--segments", "11"], "--wc must be >= 1"),
        (["cwnd", "--wc", "ten", "--segments", "11"], "not a non-negative integer"),
        (["cwnd", "--wc", "10", "--segments", "-3"], "not a non-negative integer"),
        (["cwnd", "--wc", "10", "--segments", "11", "--b", "0"], "--b must be >= 1"),
        (["cwnd", "--wc", "10", "--bytes", "16000"], "--bytes needs --mss"),
        (["cwnd", "--wc", "10", "--segments", "11", "--variant", "reno"], "is not loss-free"),
        (["cwnd", "--wc", "99999999999", "--segments", "11"], "too large"),
        # Parsed (it fits 32 bits) but one above SPAND_WC_MAX_SEGMENTS = 0xFFFFFFFE: libspand
        # refuses it with SPAND_ERANGE, bad input (docs/exit-status.md), 2.
        (["cwnd", "--wc", "4294967295", "--segments", "11"], "value out of range"),
        (["cwnd", "--wc"], "--wc needs a value"),
        (["frobnicate"], "unknown command"),
    ]
    for args, message in cases:
        p = run(spandctl, *args)
        if p.returncode != 2:
            fail(f"{args}: exit status should be 2", p)
        if message not in p.stderr:
            fail(f"{args}: stderr should say {message!r}", p)
        if p.stdout:
            fail(f"{args}: nothing should go to stdout", p)


def main():
    spandctl, case = sys.argv[1], sys.argv[2]
    {"worked-example": worked_example, "bad-usage": bad_usage}[case](spandctl)


if __name__ == "__main__":
    main()
