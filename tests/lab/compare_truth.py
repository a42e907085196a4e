"""Compares spand-gateway's inference on a lab capture with the server kernel's own truth.

Input: a lab run's trace log (tcp_probe.txt), the offset CLOCK_REALTIME - CLOCK_MONOTONIC
(realtime_minus_mono: trace times are monotonic, capture times real) and the
gateway's --flows-out / --samples-out for trace.pcap. The truth side parses the tcp:tcp_probe,
tcp:tcp_cong_state_set, tcp:tcp_retransmit_skb and tcp:tcp_retransmit_synack trace lines
(snd_cwnd and the recovery state on every ACK, the resends) with our own reader below. Prints
per-connection agreement and totals; exit status 1 when agreement falls below the thresholds
given on the command line.
"""
import argparse
import gzip
import json
import re
import statistics
import sys

PROBE = re.compile(r'\s(\d+\.\d+): tcp_probe: .*?dest=(\S+) .*?snd_nxt=0x([0-9a-f]+) '
                   r'snd_una=0x([0-9a-f]+) snd_cwnd=(\d+) ssthresh=(\d+) .*?srtt=(\d+)')
STATE = re.compile(r'\s(\d+\.\d+): tcp_cong_state_set: .*?dport=(\d+) saddr=\S+ daddr=(\S+) '
                   r'.*cong_state=(\d+)')
REXMIT = re.compile(r'\s(\d+\.\d+): tcp_retransmit_skb: .*?dport=(\d+) saddr=\S+ daddr=(\S+) ')
# The SYN-ACK resent by the listener (its timer, or an answer to a resent SYN): recorded by
# netlab.sh since 2026-11-25; older traces have no such line.
SYNACK = re.compile(r'\s(\d+\.\d+): tcp_retransmit_synack: .*?dport=(\d+) saddr=\S+ daddr=(\S+) ')


# The lab's segment: 1500-byte MTU less IPv4, TCP and the timestamp option (netlab.sh's veths).
SEGMENT_BYTES = 1448

# A kernel loss and our W_c sample of it are the same event when this close in time (seconds):
# a quarter of the smallest lab round trip (2 x 20 ms); see the matching in main().
MATCH_S = 0.010


def endpoint(text):
    host, _, port = text.rpartition(':')
    return host.strip('[]'), int(port)


def kernel_truth(trace_path, offset_s):
    probes, states, rexmits, synacks = {}, {}, {}, {}
    opener = gzip.open if trace_path.endswith('.gz') else open
    for line in opener(trace_path, 'rt', errors='replace'):
        m = PROBE.search(line)
        if m:
            t, dst, nxt, una, cwnd, ssth, srtt = m.groups()
            flight = ((int(nxt, 16) - int(una, 16)) % 2**32 + SEGMENT_BYTES - 1) // SEGMENT_BYTES
            probes.setdefault(endpoint(dst), []).append(
                (float(t), int(cwnd), int(ssth), flight, int(srtt)))
            continue
        m = STATE.search(line)
        if m:
            t, port, addr, st = m.groups()
            states.setdefault((addr, int(port)), []).append((float(t), int(st)))
            continue
        m = REXMIT.search(line)
        if m:
            t, port, addr = m.groups()
            rexmits.setdefault((addr, int(port)), []).append(float(t))
            continue
        m = SYNACK.search(line)
        if m:
            t, port, addr = m.groups()
            synacks.setdefault((addr, int(port)), []).append(float(t))
    truth = {}
    for peer, acks in probes.items():
        wc_ca, fast, timeout, prev, silent = [], 0, 0, 0, 0
        decreases, entry_cwnd, open_since, ss_first = [], None, acks[0][0], None
        peer_states, peer_rexmits = states.get(peer, []), rexmits.get(peer, [])
        for i, (t, st) in enumerate(peer_states):
            # The episode's first retransmission: when the wire first shows the loss. A fast
            # recovery that ends without one (entered from the kernel's own scoreboard on an
            # ACK, e.g. right after an RTO recovery, and undone on the next) shows nothing on
            # the wire: its event and W_c are unknowable (counted apart).
            shown = None
            if st in (3, 4) and prev not in (3, 4):
                until = next((u for u, s2 in peer_states[i + 1:] if s2 not in (3, 4)),
                             float('inf'))
                shown = next((r for r in peer_rexmits if t <= r <= until), None)
                silent += st == 3 and shown is None
            # The decrease of one fast recovery: cwnd on leaving it (open or disorder) over
            # cwnd on entering it; an RTO inside the episode spoils the reading.
            if st == 3 and prev not in (3, 4):
                entry_cwnd = ([a for a in acks if a[0] <= t] or acks[:1])[-1][1]
            elif st == 4:
                entry_cwnd = None
            elif st in (0, 1) and prev == 3 and entry_cwnd:
                after = [a for a in acks if a[0] >= t]
                if after and entry_cwnd >= 4:  # the gateway reads windows of 4 or more only
                    decreases.append(after[0][1] / entry_cwnd)
                entry_cwnd = None
            # A loss event starts on entry into recovery (3) or loss (4) from the open state;
            # an RTO during fast recovery (3 then 4) is a second, timeout event, as Tstat
            # counts it, but the window then is no congestion-avoidance W_c.
            if st == 4 and prev == 3:
                timeout += 1
            elif st in (3, 4) and prev not in (3, 4):
                before = [a for a in acks if a[0] <= t] or acks[:1]
                _, cwnd, ssth, _, srtt_us = before[-1]
                if fast + timeout == 0 and ssth == 2**31 - 1 and cwnd < ssth:
                    # The connection's first loss, in its first slow start (ssthresh still the
                    # initial one): our lower-bound sample is half the window (DESIGN.md).
                    ss_first = (t + offset_s, cwnd, shown is None)
                fast += st == 3
                timeout += st == 4
                if cwnd >= ssth:  # congestion avoidance: a W_c sample (DESIGN.md)
                    why = ('the kernel window went unused'
                           if window_unused(acks, t, cwnd, srtt_us, open_since) else
                           'a recovery that resent nothing' if shown is None else
                           'HyStart ended slow start less than a round trip before the loss'
                           if hystart_exit_unseen(acks, t, srtt_us) else None)
                    # An RTO fires on a timer, not on an ACK, and tcp_probe records cwnd
                    # before it processes an ACK: the window the timer found may be one more
                    # than the last probe's (congestion avoidance adds at most one segment per
                    # ACK). Such a sample's truth is the range [cwnd - 1, cwnd].
                    wc_ca.append((t + offset_s, cwnd - 1, why,
                                  (shown if shown is not None else t) + offset_s, st == 4))
            if st in (0, 1) and prev not in (0, 1):
                open_since = t
            prev = st
        # The handshake: a SYN-ACK the listener resent (on its timer, or answering a resent SYN)
        # is a timeout event, one per handshake however many resends it took (as an RTO backing
        # off is one), as the gateway counts it (docs/metrics.md). The kernel runs no congestion
        # state for a connection it has not yet accepted, so tcp_cong_state_set never shows it;
        # tcp_retransmit_synack does (and the connection starts with cwnd 1 after two or more:
        # tcp_init_transfer). Lab truth_matrix.py, path b35_q1_qa, 2026-11-25: in two runs of its
        # four senders, 18 of 19 and 19 of 20 connections whose loss events were not the
        # kernel's had resent SYN-ACKs. A trace from before that date has no such line.
        hs_resends = len(synacks.get(peer, []))
        timeout += hs_resends > 0
        truth[peer] = {'wc_ca': wc_ca, 'fast': fast, 'timeout': timeout, 'silent': silent,
                       'end_cwnd': acks[-1][1], 'rexmit': len(peer_rexmits) + hs_resends,
                       'max_flight': max(a[3] for a in acks),
                       'decreases': decreases, 'ss_first': ss_first}
    return truth


def hystart_exit_unseen(acks, t, srtt_us):
    """Whether the first slow start (ssthresh still the initial 2^31 - 1) ended less than one
    srtt before a loss at t, without a loss: CUBIC's HyStart set ssthresh to cwnd on an ACK of
    the round that was already under way. Up to the loss the sender sent as in slow start (the
    ACKs after the exit are too few to show a flight held at its largest), so nothing it sent
    shows the exit; only HyStart's own test (the round trip's growth over the smallest one
    seen, or an ACK train) could tell it from the RTT samples, and the gateway does not run
    one for a sender it has not identified. Counted apart, like the unused windows."""
    in_ss = [a for a in acks if a[0] <= t and a[2] == 2**31 - 1]
    return bool(in_ss) and t - in_ss[-1][0] < srtt_us / 1e6 and any(
        a[2] < 2**31 - 1 for a in acks if in_ss[-1][0] < a[0] <= t)


def window_unused(acks, t, cwnd, srtt_us, open_since):
    """Whether the kernel's window at a loss at t went unused: in the round trip before it
    (outside recovery, whose flight counts segments the receiver holds) its flight never came
    within a segment of cwnd, because the application had no more to send or the transfer had
    sent its last byte. The wire shows a flight, never a window the sender left empty: such a
    loss's W_c is unknowable from the capture."""
    since = max(t - srtt_us / 1e6, open_since)
    flights = [a[3] for a in acks if since <= a[0] <= t]
    return bool(flights) and max(flights) < cwnd - 1


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('trace')
    ap.add_argument('offset', help='file holding CLOCK_REALTIME - CLOCK_MONOTONIC in seconds')
    ap.add_argument('flows')
    ap.add_argument('samples')
    ap.add_argument('--min-wc-within-1', type=float, default=0.0,
                    help='fraction of kernel W_c samples we must match within 1 segment')
    ap.add_argument('--min-events', type=float, default=0.0,
                    help='fraction of connections whose loss events we must count exactly')
    ap.add_argument('--json', metavar='OUT',
                    help='also write the totals as one JSON object (truth_matrix.py adds them up)')
    args = ap.parse_args()
    truth = kernel_truth(args.trace, float(open(args.offset).read()))
    flows = {(f['client'], f['client_port']): f
             for f in map(json.loads, open(args.flows)) if f['server_port'] == 5001}
    ours_wc, ours_md = {}, []
    for s in map(json.loads, open(args.samples)):
        if s['kind'] == 'wc':
            ours_wc.setdefault((s['client'], s['client_port']), []).append(s)
        elif s['kind'] == 'decrease' and (s['client'], s['client_port']) in truth:
            ours_md.append(s['md_ratio'])
    wc_total = wc_close = ev_ok = ev_ok_knowable = rx_ours = rx_kernel = 0
    errors, misses, lossfree, senders = [], [], [], []
    ss_rows, ss_extra = [], []
    for peer, t in sorted(truth.items()):
        f = flows.get(peer)
        if f is None:
            continue
        mine = [(s['ts_ns'] / 1e9, s['wc_segments']) for s in ours_wc.get(peer, [])
                if s['reason'] == 'loss_in_ca']
        # Each kernel loss in congestion avoidance is matched with our W_c sample nearest in
        # time within MATCH_S, each of ours used once. The kernel enters recovery and resends at
        # once, and the capture sits next to the server: on the stored captures a loss and our
        # sample of it lie 0-34 us apart (trace and capture clocks aligned by
        # realtime_minus_mono), while two losses of one connection lie at least a round trip
        # (40 ms here) apart. The earlier window of half a second paired a kernel loss we did
        # not sample with our sample of the next loss, and that one's with the one after: one
        # miss became six on the stored cubic capture (10.119.3.10:45613).
        # A kernel loss may show on the wire only later, at its first resend (the kernel
        # entered recovery on an ACK while the segment it deemed lost was already resent, and
        # resent it again on a later ACK): our sample is matched with the entry or that resend.
        for when, k, unused, shown, rto in t['wc_ca']:
            wc_total += 1
            gap = lambda m: min(abs(m[0] - when), abs(m[0] - shown))  # noqa: E731
            near = [m for m in mine if gap(m) < MATCH_S]
            best = min(near, key=gap) if near else None
            off_by = lambda w: min(abs(w - k), abs(w - k - 1)) if rto else abs(w - k)  # noqa: E731
            if best:
                mine.remove(best)
                errors.append(best[1] - k)
                wc_close += off_by(best[1]) <= 1
            if best is None or off_by(best[1]) > 1:
                misses.append((peer, when, k, best[1] if best else None, unused))
        # The first loss in slow start: the kernel's window there halved against our
        # loss_in_slow_start sample, within a segment or 10 % (the replica counts slow start's
        # growth per ACK from the wire; the kernel's own count may be a few ACKs ahead).
        ss_ours = [s['wc_segments'] for s in ours_wc.get(peer, [])
                   if s['reason'] == 'loss_in_slow_start']
        if t['ss_first']:
            _, k, silent_ss = t['ss_first']
            ss_rows.append((peer, k, ss_ours[0] if ss_ours else None, silent_ss))
        elif ss_ours:
            ss_extra.append((peer, ss_ours))
        events = (f['s2c']['loss_events_fast'], f['s2c']['loss_events_timeout'])
        ev_ok += events == (t['fast'], t['timeout'])
        # Exact but for fast recoveries that resent nothing (unknowable from the wire).
        ev_ok_knowable += (t['fast'] - t['silent'] <= events[0] <= t['fast'] and
                           events[1] == t['timeout'])
        senders.append((t['fast'] + t['timeout'], f['s2c'].get('sender', 'unknown')))
        # Loss-free W_c: a connection the kernel never took into recovery ends with its cwnd
        # (DESIGN.md); ours is the end-of-connection sample. Scored within 10 % of the kernel's
        # cwnd at its last ACK.
        if t['fast'] == t['timeout'] == 0:
            end = [s['wc_segments'] for s in ours_wc.get(peer, [])
                   if s['reason'] == 'end_of_connection']
            # The kernel's window at the end is unknowable when no flight ever came within a
            # segment of it: how far a sender grows a window it does not fill is its own rule
            # (HyStart's exit, Linux growing in slow start only up to twice what it has out),
            # which no segment on the wire shows.
            lossfree.append((peer, t['end_cwnd'], end[-1] if end else None,
                             t['end_cwnd'] > t['max_flight'] + 1))
        rx_ours += f['s2c']['rexmt_packets']
        rx_kernel += t['rexmit']
        silent = f" ({t['silent']} silent)" if t['silent'] else ''
        print(f"{peer[0]}:{peer[1]} kernel W_c(ca)={[w[1] for w in t['wc_ca']]} "
              f"ours={[s['wc_segments'] for s in ours_wc.get(peer, []) if s['reason'] == 'loss_in_ca']} "
              f"events kernel={t['fast']}/{t['timeout']}"
              f"{silent} "
              f"ours={events[0]}/{events[1]} "
              f"rexmit kernel={t['rexmit']} ours={f['s2c']['rexmt_packets']}")
    if errors:
        print(f'W_c error (ours - kernel) over {len(errors)} matched samples: mean '
              f'{sum(errors) / len(errors):+.2f}, mean |error| '
              f'{sum(map(abs, errors)) / len(errors):.2f} segments')
    kernel_md = sorted(d for p, t in truth.items() if p in flows for d in t['decreases'])
    if kernel_md and ours_md:
        # Readings are not matched one to one (a reading needs a whole cwnd-limited round
        # after recovery): the two distributions are compared.
        print(f'decrease median: ours {statistics.median(ours_md):.3f} over {len(ours_md)} '
              f'readings, kernel {statistics.median(kernel_md):.3f} over {len(kernel_md)} '
              f'recoveries')
    for peer, when, k, ours, unused in misses:
        print(f'miss {peer[0]}:{peer[1]} at {when:.6f}: kernel W_c {k}, ours '
              f'{"none" if ours is None else ours}'
              f'{f"; {unused} (unknowable)" if unused else ""}')
    print(f'W_c misses: {len(misses)}, of them unknowable from the wire: '
          f'{sum(bool(m[4]) for m in misses)} (the kernel window unused in the round trip before '
          f'the loss, a recovery that resent nothing, or HyStart leaving slow start within the '
          f'round trip before the loss)')
    lf_close = sum(ours is not None and abs(ours - k) <= 0.1 * k for _, k, ours, _ in lossfree)
    lf_unknowable = 0
    for peer, k, ours, unused in lossfree:
        if ours is None or abs(ours - k) > 0.1 * k:
            lf_unknowable += unused
            print(f'loss-free miss {peer[0]}:{peer[1]}: kernel cwnd at the end {k}, ours '
                  f'{"none" if ours is None else ours}'
                  f'{"; no flight ever came within a segment of it (unknowable)" if unused else ""}')
    print(f'loss-free W_c within 10 %: {lf_close}/{len(lossfree)}, misses unknowable from the '
          f'wire: {lf_unknowable}')
    ss_close = sum(o is not None and abs(o - k / 2) <= max(1.0, 0.1 * k / 2)
                   for _, k, o, _ in ss_rows)
    for peer, k, o, silent_ss in ss_rows:
        if o is None or abs(o - k / 2) > max(1.0, 0.1 * k / 2):
            print(f'slow-start miss {peer[0]}:{peer[1]}: kernel cwnd at its first loss {k}, '
                  f'ours {"none" if o is None else o}'
                  f'{"; a recovery that resent nothing (unknowable)" if silent_ss else ""}')
    for peer, o in ss_extra:
        print(f'slow-start extra {peer[0]}:{peer[1]}: ours {o}, no first loss in slow start in '
              f'the kernel')
    print(f'slow-start W_c (half the window at the first loss) within 1 segment or 10 %: '
          f'{ss_close}/{len(ss_rows)}; ours without such a kernel loss: {len(ss_extra)}')
    n = len([p for p in truth if p in flows])
    wc_frac = wc_close / wc_total if wc_total else 1.0
    ev_frac = ev_ok / n if n else 0.0
    if args.json:
        with open(args.json, 'w') as out:
            json.dump({'connections': n, 'wc_total': wc_total, 'wc_close': wc_close,
                       'wc_misses': len(misses), 'wc_unknowable': sum(bool(m[4]) for m in misses),
                       'misses': [[f'{p[0]}:{p[1]}', w, k, o, u] for p, w, k, o, u in misses],
                       'events_exact': ev_ok, 'events_knowable': ev_ok_knowable,
                       'lossfree_total': len(lossfree),
                       'lossfree_close': lf_close, 'lossfree_unknowable': lf_unknowable,
                       'slow_start_total': len(ss_rows), 'slow_start_close': ss_close,
                       'slow_start_extra': len(ss_extra),
                       'decrease_ours': ours_md,
                       'decrease_kernel': kernel_md, 'senders': senders,
                       'rexmit_kernel': rx_kernel, 'rexmit_ours': rx_ours}, out)
    print(f'connections {n}; W_c in CA within 1 segment: {wc_close}/{wc_total} ({wc_frac:.0%}); '
          f'loss events exact: {ev_ok}/{n} ({ev_frac:.0%}); resent segments kernel {rx_kernel} '
          f'ours {rx_ours}')
    print(f'loss events exact but for fast recoveries that resent nothing (unknowable): '
          f'{ev_ok_knowable}/{n}')
    return 0 if wc_frac >= args.min_wc_within_1 and ev_frac >= args.min_events else 1


if __name__ == '__main__':
    sys.exit(main())
