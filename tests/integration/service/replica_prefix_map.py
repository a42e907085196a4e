#!/usr/bin/python3
"""spand-estimates --prefix-map (network-aware clustering) end to end: a real redis-server, the
gateway replaying pcaps/lab/reno_3nets.pcap into it with a prefix map, then the stateless replica
with the same map answering Get, BatchGet and Watch for client ADDRESSES with the estimate of the
longest prefix that covers them; an address no prefix covers keeps the /24 and is counted in
/metrics; the map is re-read when the file changes; a bad file is refused with exit 2 naming the
line; `prefix_map` is the configuration file's key.

Expected values, by hand from the /24 rows of the same capture without a map (docs/records.md,
"--prefix-summary"; columns: W_c samples, W_c mean, RTT samples, RTT min ms, distinct clients):
  10.170.1.0/24    9  20.78   71  40.392  1
  10.170.2.0/24   54  11.74  567  40.320  2
  10.170.3.0/24   89   9.58  944  40.231  2
(the W_c counts since 2026-11-29 include one lower-bound sample per connection whose first loss
came in slow start: 3, 9 and 14, as many as the capture's kernel trace shows).
With the map {10.170.0.0/16, 10.170.2.0/23}: 10.170.1.x falls in the /16 only (9 W_c samples,
71 RTT samples, minimum 40.392 ms; one client, so the W_c the service answers, the lower median
of per-client means, is that client's mean 20.78); 10.170.2.x and 10.170.3.x in the /23
(54 + 89 = 143 W_c samples, 567 + 944 = 1511 RTT samples, minimum min(40.320, 40.231) = 40.231).

usage: replica_prefix_map.py BUILD_ROOT SOURCE_ROOT
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

BUILD, SOURCE = sys.argv[1], sys.argv[2]
GATEWAY = os.path.join(BUILD, "spand-gateway")
REPLICA = os.path.join(BUILD, "gateway", "control", "spand-estimates")
DESCRIPTOR = os.path.join(BUILD, "proto", "spand", "v1", "estimates.desc")
CAPTURE = os.path.join(SOURCE, "pcaps", "lab", "reno_3nets.pcap")
MAP = "10.170.0.0/16\n10.170.2.0/23   # 10.170.2 and 10.170.3\n2001:db8::/32\n"

failures, procs = [], []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll(fn, what, deadline_s=20.0):
    end, last = time.monotonic() + deadline_s, None
    while time.monotonic() < end:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # not up yet
            last = e
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what} (last: {last!r})")


fds = descriptor_pb2.FileDescriptorSet()
fds.ParseFromString(open(DESCRIPTOR, "rb").read())
pool = descriptor_pool.DescriptorPool()
for f in fds.file:
    pool.Add(f)
_factory = message_factory.MessageFactory(pool)


def msg(name):
    return _factory.GetPrototype(pool.FindMessageTypeByName("spand.v1." + name))


GetRequest, Estimate = msg("GetRequest"), msg("Estimate")
BatchGetRequest, BatchGetResponse = msg("BatchGetRequest"), msg("BatchGetResponse")
WatchRequest, WatchEvent = msg("WatchRequest"), msg("WatchEvent")


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{}"):
            return float(line.split()[-1])
    raise KeyError(name)


def run(tmp):
    map_path = os.path.join(tmp, "map.txt")
    with open(map_path, "w") as f:
        f.write(MAP)
    rport = free_port()
    procs.append(subprocess.Popen(
        ["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", tmp],
        stdout=open(os.path.join(tmp, "redis.log"), "w"), stderr=subprocess.STDOUT))

    def redis_up():
        with socket.create_connection(("127.0.0.1", rport), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    poll(redis_up, "redis-server")
    redis = f"redis://127.0.0.1:{rport}"

    # The published client id key: a replay in a test (the replica must use the same one).
    gw = subprocess.run([GATEWAY, "--pcap", CAPTURE, "--redis", redis, "--prefix-map", map_path,
                         "--client-key-file", "public", "--prefix-summary"],
                        capture_output=True, text=True, timeout=60)
    if not check(gw.returncode == 0, f"gateway replay: {gw.returncode} {gw.stderr[-1000:]}"):
        return
    check("10.170.0.0/16" in gw.stdout and "10.170.2.0/23" in gw.stdout,
          f"gateway summary without the map's prefixes: {gw.stdout}")

    # A bad map: exit 2, the line named, before anything is served.
    bad = os.path.join(tmp, "bad.txt")
    with open(bad, "w") as f:
        f.write("10.170.0.0/16\n10.170.2.1/23\n")
    p = subprocess.run([REPLICA, "--redis", redis, "--grpc-listen", "127.0.0.1:0",
                        "--client-key-file", "public", "--prefix-map", bad],
                       capture_output=True, text=True, timeout=20)
    check(p.returncode == 2 and "line 2" in p.stderr,
          f"bad map: exit {p.returncode}, stderr {p.stderr!r}")
    p = subprocess.run([REPLICA, "--redis", redis, "--client-key-file", "public",
                        "--prefix-map", os.path.join(tmp, "none")],
                       capture_output=True, text=True, timeout=20)
    check(p.returncode == 2 and "cannot read" in p.stderr,
          f"missing map: exit {p.returncode}, stderr {p.stderr!r}")

    # The configuration file's key, read back by --print-config.
    conf = os.path.join(tmp, "estimates.toml")
    with open(conf, "w") as f:
        f.write(f'redis = "{redis}"\nprefix_map = "{map_path}"\nclient_key_file = "public"\n')
    p = subprocess.run([REPLICA, "--config", conf, "--print-config"], capture_output=True,
                       text=True, timeout=20)
    check(p.returncode == 0 and f'prefix_map = "{map_path}"' in p.stdout,
          f"--print-config: {p.returncode} {p.stdout[-2000:]} {p.stderr}")

    gport, mport = free_port(), free_port()
    log = os.path.join(tmp, "replica.log")
    rep = subprocess.Popen([REPLICA, "--config", conf, "--grpc-listen", f"127.0.0.1:{gport}",
                            "--metrics-listen", f"127.0.0.1:{mport}", "--min-clients", "1",
                            "--cache-ttl-ms", "0"],
                           stdout=open(log, "w"), stderr=subprocess.STDOUT)
    procs.append(rep)
    channel = grpc.insecure_channel(f"127.0.0.1:{gport}")
    base = "/spand.v1.Estimates/"
    get = channel.unary_unary(base + "Get", request_serializer=GetRequest.SerializeToString,
                              response_deserializer=Estimate.FromString)
    batch = channel.unary_unary(base + "BatchGet",
                                request_serializer=BatchGetRequest.SerializeToString,
                                response_deserializer=BatchGetResponse.FromString)
    watch = channel.unary_stream(base + "Watch", request_serializer=WatchRequest.SerializeToString,
                                 response_deserializer=WatchEvent.FromString)
    # Served, and the store's clock read (samples > 0 once "now" is the capture's time).
    poll(lambda: get(GetRequest(address="10.170.3.200"), timeout=2).samples > 0,
         "the replica answering from the store")

    e16 = get(GetRequest(address="10.170.1.99"), timeout=5)
    check(e16.prefix == "10.170.0.0/16", f"10.170.1.99 -> {e16.prefix}")
    check(e16.samples == 9 and e16.rtt_samples == 71,
          f"/16 samples {e16.samples} W_c, {e16.rtt_samples} RTT; expected 9, 71")
    check(abs(e16.wc_segments - 20.78) < 0.006, f"/16 W_c {e16.wc_segments}, expected 20.78")
    check(abs(e16.min_rtt_ms - 40.392) < 0.0006, f"/16 min RTT {e16.min_rtt_ms}, expected 40.392")
    e23 = get(GetRequest(address="10.170.3.200"), timeout=5)
    check(e23.prefix == "10.170.2.0/23", f"10.170.3.200 -> {e23.prefix}")
    check(e23.samples == 143 and e23.rtt_samples == 1511,
          f"/23 samples {e23.samples} W_c, {e23.rtt_samples} RTT; expected 143, 1511")
    check(abs(e23.min_rtt_ms - 40.231) < 0.0006, f"/23 min RTT {e23.min_rtt_ms}, expected 40.231")

    b = batch(BatchGetRequest(requests=[GetRequest(address="10.170.2.5"),
                                        GetRequest(address="10.170.1.10"),
                                        GetRequest(address="192.0.2.7")]), timeout=5)
    got = [(x.prefix, x.samples) for x in b.estimates]
    check(got == [("10.170.2.0/23", 143), ("10.170.0.0/16", 9), ("192.0.2.0/24", 0)],
          f"BatchGet: {got}")

    stream = watch(WatchRequest(prefixes=["10.170.1.7"], initial=True), timeout=5)
    first = next(iter(stream))
    check(first.estimate.prefix == "10.170.0.0/16" and first.estimate.samples == 9,
          f"Watch initial: {first.estimate.prefix} {first.estimate.samples}")
    stream.cancel()

    # /metrics: the map's size, and one more uncovered lookup per Get of an uncovered address
    # (none for a covered one). Published every 250 ms.
    poll(lambda: metric(mport, "spand_prefix_map_prefixes") == 3, "spand_prefix_map_prefixes 3")
    time.sleep(0.5)
    before = metric(mport, "spand_prefix_map_uncovered_total")
    check(before >= 1, f"the BatchGet of 192.0.2.7 not counted: {before}")
    get(GetRequest(address="10.170.1.99"), timeout=5)
    get(GetRequest(address="198.51.100.1"), timeout=5)
    get(GetRequest(address="198.51.100.2"), timeout=5)
    time.sleep(0.6)
    after = metric(mport, "spand_prefix_map_uncovered_total")
    check(after - before == 2, f"uncovered lookups went {before} -> {after}, expected +2")

    # Reload: a /24 added under the /16 takes 10.170.1.99 (nothing stored there: 0 samples);
    # 10.170.0.0/24 covers the /16's network address, but a query for the CIDR 10.170.0.0/16
    # (as the agent asks for the map's prefixes) still answers the /16, which holds all of it.
    with open(map_path + ".new", "w") as f:
        f.write(MAP + "10.170.1.0/24\n10.170.0.0/24\n")
    os.replace(map_path + ".new", map_path)
    try:
        poll(lambda: get(GetRequest(address="10.170.1.99"), timeout=2).prefix == "10.170.1.0/24",
             "the replica reloading the map", deadline_s=10)
    except RuntimeError as e:
        check(False, str(e))
    check(get(GetRequest(address="10.170.3.1"), timeout=2).prefix == "10.170.2.0/23",
          "after the reload 10.170.3.1 left the /23")
    poll(lambda: metric(mport, "spand_prefix_map_prefixes") == 5, "spand_prefix_map_prefixes 5")
    e = get(GetRequest(address="10.170.0.0/16"), timeout=2)
    check((e.prefix, e.samples) == ("10.170.0.0/16", 9), f"10.170.0.0/16 -> {e.prefix} {e.samples}")
    e = get(GetRequest(address="10.170.0.9"), timeout=2)
    check((e.prefix, e.samples) == ("10.170.0.0/24", 0), f"10.170.0.9 -> {e.prefix} {e.samples}")
    # A file that no longer parses keeps the map in use.
    with open(map_path + ".new", "w") as f:
        f.write("nonsense\n")
    os.replace(map_path + ".new", map_path)
    time.sleep(2.5)
    check(get(GetRequest(address="10.170.1.99"), timeout=2).prefix == "10.170.1.0/24",
          "a broken map file replaced the map in use")
    check(rep.poll() is None, "the replica exited on a broken map file")

    rep.send_signal(signal.SIGTERM)
    rep.wait(10)
    check(rep.returncode == 0, f"replica exit {rep.returncode}: {open(log).read()[-1000:]}")


def main():
    tmp = tempfile.mkdtemp(prefix="spand-replica-map-")
    try:
        run(tmp)
    except Exception as e:
        check(False, f"{type(e).__name__}: {e}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if failures:
            print(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
