"""Statistics and plots of a benefit-lab run.

usage: analyze.py OUTDIR     (re-reads OUTDIR/transfers.jsonl and OUTDIR/results.json, rewrites
                              the summary in results.json and the PNG plots)

Per group (the arm, or arm/batch kind in friendliness runs), size and concurrency: n, mean,
median, p90 of response_s (request to last byte) and total_s (connect to last byte), each with a
95 % bootstrap confidence interval (percentile method, 2000 resamples, fixed seed), and the
ratios of every arm to `default` (mean, median, p90; the mean ratio with a bootstrap CI).
"""
import json
import os
import random
import re
import statistics
import sys

BOOT = 2000


def pct(xs, q):
    s = sorted(xs)
    if not s:
        return None
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


STATS = {'mean': statistics.fmean, 'median': statistics.median, 'p90': lambda x: pct(x, 0.9)}


def boot_ci(xs, fn, rng):
    if len(xs) < 2:
        return [None, None]
    vals = sorted(fn([rng.choice(xs) for _ in xs]) for _ in range(BOOT))
    return [vals[int(0.025 * BOOT)], vals[int(0.975 * BOOT) - 1]]


def describe(xs, rng):
    out = {'n': len(xs)}
    for name, fn in STATS.items():
        out[name] = fn(xs) if xs else None
        out[name + '_ci95'] = boot_ci(xs, fn, rng)
    return out


def ratio_ci(a, b, rng):
    if len(a) < 2 or len(b) < 2:
        return [None, None]
    vals = sorted(statistics.fmean([rng.choice(a) for _ in a]) /
                  statistics.fmean([rng.choice(b) for _ in b]) for _ in range(BOOT))
    return [vals[int(0.025 * BOOT)], vals[int(0.975 * BOOT) - 1]]


def summarize(transfers, baseline='default'):
    rng = random.Random(1)
    measured = [t for t in transfers if t.get('phase') == 'measure']
    failed = [t for t in measured if not t.get('ok')]
    cells = {}
    for t in measured:
        if t.get('ok'):
            cells.setdefault((t['group'], t['size'], t['concurrency']), []).append(t)
    rows = []
    for (group, size, conc), ts in sorted(cells.items()):
        row = {'group': group, 'size': size, 'concurrency': conc}
        for metric in ('response_s', 'total_s'):
            row[metric] = describe([t[metric] for t in ts], rng)
        srv = [t for t in ts if 'init_cwnd' in t]
        if srv:
            row['init_cwnd'] = sorted({t['init_cwnd'] for t in srv})
            row['init_cwnd_median'] = statistics.median(t['init_cwnd'] for t in srv)
        closed = [t for t in ts if 'total_retrans' in t]
        if closed:
            row['with_retrans'] = sum(1 for t in closed if t['total_retrans'] > 0)
            row['with_dsack'] = sum(1 for t in closed if t.get('dsack_dups', 0) > 0)
            row['retrans_segs'] = sum(t['total_retrans'] for t in closed)
            row['server_records'] = len(closed)
        rows.append(row)
    ratios = []
    by_key = {(r['group'], r['size'], r['concurrency']): r for r in rows}
    for (group, size, conc), ts in sorted(cells.items()):
        base_group = baseline
        if '/' in group:  # friendliness: compare with the default flows of pure batches
            base_group = baseline + '/pure'
        if '@' in group:  # multi-bottleneck: with the default flows of the same network
            base_group = baseline + '@' + group.split('@', 1)[1]
        if group == base_group or (base_group, size, conc) not in cells:
            continue
        base = cells[(base_group, size, conc)]
        r = {'group': group, 'vs': base_group, 'size': size, 'concurrency': conc}
        for metric in ('response_s', 'total_s'):
            a, b = by_key[(group, size, conc)][metric], by_key[(base_group, size, conc)][metric]
            r[metric] = {k: a[k] / b[k] for k in STATS if a[k] and b[k]}
            r[metric]['mean_ci95'] = ratio_ci([t[metric] for t in ts], [t[metric] for t in base],
                                              rng)
        ratios.append(r)
    return {'cells': rows, 'ratios': ratios, 'failed': len(failed),
            'failed_examples': failed[:5]}


def rate_bps(text):
    m = re.fullmatch(r'([\d.]+)\s*([kmg]?)(bit|bps)?', str(text).strip().lower())
    if not m:
        return None
    scale = {'': 1, 'k': 1e3, 'm': 1e6, 'g': 1e9}[m.group(2)]
    return float(m.group(1)) * scale * (8 if m.group(3) == 'bps' else 1)


def physical_limit_s(size, path):
    """One round trip (request out, first byte back) plus the response's frames at the
    bottleneck rate: no sender can do better on an idle path."""
    rate = rate_bps(path.get('rate', ''))
    if not rate:
        return None
    frames = -(-size // 1448)
    return 2 * path['delay_ms'] / 1000 + (size + frames * 66) * 8 / rate


def plots(outdir, summary, title, path=None):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('analyze: matplotlib missing (apt-get install python3-matplotlib): no plots',
              file=sys.stderr)
        return []
    made = []
    rows = summary['cells']
    groups = sorted({r['group'] for r in rows})
    markers = dict(zip(groups, 'os^vDx*+<>'))

    def errbar(ax, xs, cells, label, metric='response_s'):
        ys = [c[metric]['mean'] * 1e3 for c in cells]
        lo = [max(0.0, (c[metric]['mean'] - (c[metric]['mean_ci95'][0] or c[metric]['mean'])) * 1e3)
              for c in cells]
        hi = [max(0.0, ((c[metric]['mean_ci95'][1] or c[metric]['mean']) - c[metric]['mean']) * 1e3)
              for c in cells]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker=markers.get(label, 'o'), capsize=3,
                    label=label, linewidth=1.2)

    sizes = sorted({r['size'] for r in rows})
    concs = sorted({r['concurrency'] for r in rows})
    # Completion time against transfer size (the paper's Fig. 6-8 style): one line per arm.
    if len(sizes) > 1:
        for conc in concs:
            fig, ax = plt.subplots(figsize=(6, 4.2))
            for g in groups:
                cells = sorted((r for r in rows if r['group'] == g and r['concurrency'] == conc),
                               key=lambda r: r['size'])
                if cells:
                    errbar(ax, [c['size'] / 1000 for c in cells], cells, g)
            if path and conc == 1:
                xs = [x / 1000 for x in sizes]
                ys = [physical_limit_s(x, path) for x in sizes]
                if all(ys):
                    ax.plot(xs, [y * 1e3 for y in ys], 'k--', linewidth=1,
                            label='physical limit (RTT + size at rate)')
            ax.set_xscale('log')
            ax.set_xlabel('transfer size (KB)')
            ax.set_ylabel('mean response time (ms), 95 % CI')
            ax.set_title(f'{title}: response time vs size ({conc} at a time)')
            ax.grid(True, which='both', alpha=0.3)
            ax.legend()
            path = os.path.join(outdir, f'time_vs_size_c{conc}.png')
            fig.tight_layout()
            fig.savefig(path, dpi=120)
            plt.close(fig)
            made.append(path)
    # Completion time against the number of simultaneous connections.
    if len(concs) > 1:
        for size in sizes:
            fig, ax = plt.subplots(figsize=(6, 4.2))
            for g in groups:
                cells = sorted((r for r in rows if r['group'] == g and r['size'] == size),
                               key=lambda r: r['concurrency'])
                if cells:
                    errbar(ax, [c['concurrency'] for c in cells], cells, g)
            ax.set_xlabel('simultaneous connections')
            ax.set_ylabel('mean response time (ms), 95 % CI')
            ax.set_title(f'{title}: {size // 1000} KB vs number of connections')
            ax.grid(True, alpha=0.3)
            ax.legend()
            path = os.path.join(outdir, f'time_vs_connections_{size // 1000}k.png')
            fig.tight_layout()
            fig.savefig(path, dpi=120)
            plt.close(fig)
            made.append(path)
    # Friendliness: default flows alone vs default flows beside spand flows.
    order = {'default/pure': 0, 'default/mixed': 1, 'spand/mixed': 2}
    friend = sorted((r for r in rows if '/' in r['group']),
                    key=lambda r: (r['size'], r['concurrency'], order.get(r['group'], 9)))
    if friend:
        fig, ax = plt.subplots(figsize=(6, 4.2))
        labels = [f"{r['group']}\n{r['size'] // 1000} KB x{r['concurrency']}" for r in friend]
        means = [r['response_s']['mean'] * 1e3 for r in friend]
        err = [[m - r['response_s']['mean_ci95'][0] * 1e3 for m, r in zip(means, friend)],
               [r['response_s']['mean_ci95'][1] * 1e3 - m for m, r in zip(means, friend)]]
        colors = ['tab:blue' if r['group'].startswith('default') else 'tab:orange' for r in friend]
        ax.bar(range(len(friend)), means, yerr=err, capsize=4, color=colors)
        ax.set_xticks(range(len(friend)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel('mean response time (ms), 95 % CI')
        ax.set_title(f'{title}: default flows alone vs beside spand flows')
        ax.grid(True, axis='y', alpha=0.3)
        path = os.path.join(outdir, 'friendliness.png')
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        made.append(path)
    # Per size: distribution (CDF) of response times, one line per arm.
    for size in sizes:
        for conc in concs:
            fig, ax = plt.subplots(figsize=(6, 4.2))
            drew = False
            for g in groups:
                xs = sorted(summary.get('_raw', {}).get(f'{g}|{size}|{conc}', []))
                if xs:
                    ax.plot([x * 1e3 for x in xs], [(i + 1) / len(xs) for i in range(len(xs))],
                            label=g, drawstyle='steps-post')
                    drew = True
            if not drew:
                plt.close(fig)
                continue
            ax.set_xlabel('response time (ms)')
            ax.set_ylabel('CDF')
            ax.set_title(f'{title}: {size // 1000} KB, {conc} at a time')
            ax.grid(True, alpha=0.3)
            ax.legend()
            path = os.path.join(outdir, f'cdf_{size // 1000}k_c{conc}.png')
            fig.tight_layout()
            fig.savefig(path, dpi=120)
            plt.close(fig)
            made.append(path)
    return made


def raw_samples(transfers):
    raw = {}
    for t in transfers:
        if t.get('phase') == 'measure' and t.get('ok'):
            raw.setdefault(f"{t['group']}|{t['size']}|{t['concurrency']}", []).append(t['response_s'])
    return raw


def by_start_order(transfers):
    """Transfers started together (concurrency > 1), read by their start order within the round:
    per group, size, concurrency and rank (0 = the round's first to start), the number, the mean
    response time and the mean of the server's retransmitted segments. In a batch beside a bulk
    flow the first ones find room in the buffer and the last ones lose their first window."""
    rounds = {}
    for t in transfers:
        if t.get('phase') == 'measure' and t.get('ok') and t.get('concurrency', 1) > 1:
            rounds.setdefault((t.get('round'), t['size'], t['concurrency']), []).append(t)
    cells = {}
    for batch in rounds.values():
        for rank, t in enumerate(sorted(batch, key=lambda t: t['start_s'])):
            cells.setdefault((t['group'], t['size'], t['concurrency'], rank), []).append(t)
    out = []
    for (group, size, conc, rank), ts in sorted(cells.items()):
        retrans = [t['total_retrans'] for t in ts if t.get('total_retrans') is not None]
        out.append({'group': group, 'size': size, 'concurrency': conc, 'rank': rank, 'n': len(ts),
                    'response_mean_s': round(statistics.fmean(t['response_s'] for t in ts), 6),
                    'retrans_segs_mean': round(statistics.fmean(retrans), 2) if retrans else None})
    return out


def analyze(outdir, title, path=None):
    transfers = [json.loads(l) for l in open(os.path.join(outdir, 'transfers.jsonl')) if l.strip()]
    summary = summarize(transfers)
    summary['by_start_order'] = by_start_order(transfers)
    summary['_raw'] = raw_samples(transfers)
    made = plots(outdir, summary, title, path)
    if path:
        summary['physical_limit_ms'] = {str(size): round(physical_limit_s(size, path) * 1e3, 1)
                                        for size in sorted({r['size'] for r in summary['cells']})
                                        if physical_limit_s(size, path)}
    del summary['_raw']
    summary['plots'] = [os.path.basename(p) for p in made]
    return summary


def table(summary):
    """A plain-text table of the cells and ratios (for the terminal and the README)."""
    lines = ['| group | size | conc | n | mean ms | median ms | p90 ms | mean 95% CI | init cwnd | '
             'retrans/dsack conns | ratio mean (CI) | ratio median | ratio p90 |',
             '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |']
    ratios = {(r['group'], r['size'], r['concurrency']): r for r in summary['ratios']}
    for c in summary['cells']:
        m = c['response_s']
        r = ratios.get((c['group'], c['size'], c['concurrency']))
        rt = ('%.2f (%.2f-%.2f) | %.2f | %.2f' % (
            r['response_s']['mean'], *r['response_s']['mean_ci95'], r['response_s']['median'],
            r['response_s']['p90']) if r and r['response_s']['mean_ci95'][0] else ' | | ')
        lines.append('| %s | %d KB | %d | %d | %.1f | %.1f | %.1f | %.1f-%.1f | %s | %s | %s |' % (
            c['group'], c['size'] // 1000, c['concurrency'], m['n'], m['mean'] * 1e3,
            m['median'] * 1e3, m['p90'] * 1e3, (m['mean_ci95'][0] or 0) * 1e3,
            (m['mean_ci95'][1] or 0) * 1e3,
            ','.join(map(str, c.get('init_cwnd', [])[:6])),
            '%s/%s of %s' % (c.get('with_retrans', '-'), c.get('with_dsack', '-'),
                             c.get('server_records', '-')), rt))
    return '\n'.join(lines)


def order_table(summary):
    """by_start_order as a table: one row per group, size and concurrency, one column per rank
    (mean response ms / mean retransmitted segments)."""
    rows = {}
    for c in summary['by_start_order']:
        rows.setdefault((c['group'], c['size'], c['concurrency']), {})[c['rank']] = c
    ranks = max(c['rank'] for c in summary['by_start_order']) + 1
    lines = ['| group (by start order in the round: ms / resent segments) | size | conc | ' +
             ' | '.join('#%d' % r for r in range(ranks)) + ' |',
             '| --- | --- | --- |' + ' --- |' * ranks]
    for (group, size, conc), by_rank in sorted(rows.items()):
        cells = []
        for r in range(ranks):
            c = by_rank.get(r)
            cells.append('%.0f / %s' % (c['response_mean_s'] * 1e3, c['retrans_segs_mean'])
                         if c else '')
        lines.append('| %s | %d KB | %d | %s |' % (group, size // 1000, conc, ' | '.join(cells)))
    return '\n'.join(lines)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    path = os.path.join(outdir, 'results.json')
    results = json.load(open(path)) if os.path.exists(path) else {}
    scenario = results.get('scenario', {})
    results['summary'] = analyze(outdir, scenario.get('name', outdir), scenario.get('path'))
    json.dump(results, open(path, 'w'), indent=1)
    print(table(results['summary']))
    if results['summary']['by_start_order']:
        print(order_table(results['summary']))


if __name__ == '__main__':
    main()
