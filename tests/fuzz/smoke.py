#!/usr/bin/env python3
"""Runs one fuzz target: its regression inputs (tests/fuzz/regressions/KIND/), then, with
--fuzzer, libFuzzer for --seconds from the seed corpus (seeds.py, made from pcaps/) and prints
executions and coverage; with --replay, the target built without libFuzzer (replay_main.cpp) on
the regression inputs and the seeds. A crash, a sanitizer report or a failed property fails the
run; libFuzzer leaves the input as WORK/crash-* (tests/fuzz/README.md: reproduce, minimize, keep).

Usage: smoke.py --fuzzer BIN --kind KIND [--seconds 20] [--work DIR] [--source-root DIR]
                [-- extra libFuzzer flags]
       smoke.py --replay BIN --kind KIND [--work DIR] [--source-root DIR]"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seeds  # noqa: E402

# Longest input libFuzzer makes per target: a frame, some dozens of frames, a small capture, a
# pipeline of replies, an address, a configuration file.
MAX_LEN = {'parse': 512, 'pipeline': 16384, 'pcap': 32768, 'resp': 4096, 'address': 128,
           'agent_config': 8192}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument('--fuzzer', help='libFuzzer binary (-Dfuzz=true build)')
    g.add_argument('--replay', help='replay binary (ordinary build)')
    ap.add_argument('--kind', required=True, choices=sorted(seeds.KINDS))
    ap.add_argument('--seconds', type=int, default=20)
    ap.add_argument('--work', default='fuzz-work')
    ap.add_argument('--source-root',
                    default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
    ap.add_argument('extra', nargs='*', help='more libFuzzer flags (after --)')
    a = ap.parse_args()

    root = os.path.abspath(a.source_root)
    work = os.path.abspath(a.work)
    seed_dir = os.path.join(work, 'seeds-' + a.kind)
    if not os.path.isdir(seed_dir):  # made once per build directory
        tmp = seed_dir + '.tmp'
        shutil.rmtree(tmp, ignore_errors=True)
        seeds.make(a.kind, tmp, root)
        os.rename(tmp, seed_dir)
    reg_dir = os.path.join(root, 'tests', 'fuzz', 'regressions', a.kind)
    regressions = sorted(os.path.join(reg_dir, f) for f in os.listdir(reg_dir)) \
        if os.path.isdir(reg_dir) else []
    env = dict(os.environ)
    env.setdefault('UBSAN_OPTIONS', 'halt_on_error=1:print_stacktrace=1')
    env.setdefault('ASAN_OPTIONS', 'detect_leaks=1')

    if a.replay:
        rc = subprocess.call([a.replay] + regressions + [seed_dir], env=env)
        print(f'{a.kind}: {len(regressions)} regression inputs and the seeds replayed, exit {rc}')
        return rc

    if regressions:
        rc = subprocess.call([a.fuzzer] + regressions, env=env)
        if rc != 0:
            print(f'{a.kind}: a regression input fails again (exit {rc})')
            return rc
        print(f'{a.kind}: {len(regressions)} regression inputs pass')
    corpus = os.path.join(work, 'corpus-' + a.kind)
    os.makedirs(corpus, exist_ok=True)
    cmd = [a.fuzzer, f'-max_total_time={a.seconds}', f'-max_len={MAX_LEN[a.kind]}',
           '-timeout=10', '-rss_limit_mb=2048', '-print_final_stats=1',
           f'-artifact_prefix={work}/{a.kind}-'] + a.extra + [corpus, seed_dir]
    print(' '.join(cmd), flush=True)
    start = time.monotonic()
    p = subprocess.run(cmd, env=env, stderr=subprocess.PIPE, text=True, errors='replace')
    elapsed = time.monotonic() - start
    log = p.stderr
    sys.stderr.write(log[-20000:] if p.returncode else log[-3000:])
    execs = re.findall(r'stat::number_of_executed_units:\s*(\d+)', log)
    status = re.findall(r'#(\d+)\s+(?:DONE|pulse|NEW|REDUCE|INITED)\s+cov: (\d+) ft: (\d+) corp: (\d+)',
                        log)
    if status:
        _, cov, ft, corp = status[-1]
        print(f'{a.kind}: {execs[-1] if execs else "?"} executions in {elapsed:.0f} s, '
              f'cov {cov} (edges), ft {ft} (features), corpus {corp} inputs, exit {p.returncode}')
    else:
        print(f'{a.kind}: no libFuzzer status line; exit {p.returncode}')
    return p.returncode


if __name__ == '__main__':
    sys.exit(main())
