"""Reads tcptrace's long output (`tcptrace -l -r -n`) into per-connection dicts.

Only the fields the golden tests compare are kept: endpoints, "RTT from 3WHS" and
"rexmt data pkts" per direction (a->b, b->a; host a sent the connection's first packet).
"""
import ipaddress
import re

_HOST = re.compile(r'^\s*host (\w+):\s+(\S+)$')
_PAIR = re.compile(r'^\s*(.+?):\s+(\S+)(?:\s+(\S+))?\s+(.+?):\s+(\S+)(?:\s+(\S+))?\s*$')


def _split_endpoint(text):
    addr, port = text.rsplit(':', 1)
    return str(ipaddress.ip_address(addr)), int(port)


def parse(path):
    conns = []
    cur = None
    with open(path, encoding='utf-8', errors='replace') as f:
        for line in f:
            m = _HOST.match(line)
            if m:
                if cur is None or 'b' in cur:
                    cur = {'a': _split_endpoint(m.group(2))}
                    conns.append(cur)
                else:
                    cur['b'] = _split_endpoint(m.group(2))
                continue
            if cur is None:
                continue
            if 'rexmt data pkts:' in line:
                nums = re.findall(r'rexmt data pkts:\s+(\d+)', line)
                cur['rexmt_ab'], cur['rexmt_ba'] = int(nums[0]), int(nums[1])
            elif 'RTT from 3WHS:' in line and 'hs_ab_ms' not in cur:
                nums = re.findall(r'RTT from 3WHS:\s+([\d.]+) ms', line)
                cur['hs_ab_ms'], cur['hs_ba_ms'] = float(nums[0]), float(nums[1])
            elif 'complete conn:' in line:
                cur['complete'] = line.split(':', 1)[1].strip()
    return conns
