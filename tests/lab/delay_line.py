"""Fixed one-way delay between two Ethernet ports, in user space.

usage: delay_line.py PORT_A PORT_B DELAY_MS

Every frame that arrives on one port is sent out of the other DELAY_MS later, in both
directions. The lab needs real round-trip times and this machine's kernel has no netem, so the
delay namespace bridges its two veth ends through this program. A fixed delay keeps frames in
arrival order, so each direction is a plain FIFO of (due time, frame).

Spacing is kept: a frame is due DELAY_MS after the kernel received it (SO_TIMESTAMPNS, not when
this loop got to it), and the loop sleeps until the next frame is due with microsecond timeouts
(select), not whole milliseconds. With millisecond poll timeouts, frames 257 us apart (45 Mbit/s)
left in clumps, and a sender timing its ACK train read rates 80 times the bottleneck's. What is
left is the loop's own latency (tens of microseconds on an idle core, more under load).
"""
import collections
import select
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23  # linux/if_packet.h, since 4.20: do not see our own sends
PACKET_OUTGOING = 4
MAX_FRAME_BYTES = 65535  # offloads are off on the lab's veths, but never truncate a frame
RCVBUF_BYTES = 8 << 20
SO_TIMESTAMPNS = 35  # asm-generic/socket.h (SO_TIMESTAMPNS_OLD; SCM_TIMESTAMPNS the same)
TIMESPEC = struct.Struct('@qq')


def open_port(ifname):
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    except OSError:
        pass  # older kernels: the pkttype check in drain() does the same job
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((ifname, 0))
    sock.setblocking(False)
    return sock


def drain(sock, queue, delay_ns):
    """Moves every waiting frame of sock into queue, each due delay_ns after the kernel received
    it (CLOCK_REALTIME, as time.time_ns())."""
    while True:
        try:
            frame, anc, _flags, addr = sock.recvmsg(MAX_FRAME_BYTES, 64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:  # the port is gone: the lab is being torn down
            sys.exit(f'delay_line: {err}')
        if addr[2] == PACKET_OUTGOING:
            continue
        rx_ns = None
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
                sec, nsec = TIMESPEC.unpack_from(data)
                rx_ns = sec * 1_000_000_000 + nsec
        queue.append(((rx_ns or time.time_ns()) + delay_ns, frame))


def release(queue, out, now_ns):
    while queue and queue[0][0] <= now_ns:
        _, frame = queue.popleft()
        try:
            out.send(frame)
        except OSError:
            pass  # a full tx queue drops the frame, as a wire would


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    port_a, port_b = open_port(sys.argv[1]), open_port(sys.argv[2])
    delay_ns = int(float(sys.argv[3]) * 1e6)
    # queue_from[x]: frames that arrived on x and wait to leave through the other port.
    queue_from = {port_a.fileno(): collections.deque(), port_b.fileno(): collections.deque()}
    out_for = {port_a.fileno(): port_b, port_b.fileno(): port_a}
    sock_for = {port_a.fileno(): port_a, port_b.fileno(): port_b}
    fds = list(sock_for)
    while True:
        heads = [q[0][0] for q in queue_from.values() if q]
        timeout_s = None
        if heads:
            timeout_s = max(0.0, (min(heads) - time.time_ns()) / 1e9)
        ready, _, _ = select.select(fds, [], [], timeout_s)
        for fd in ready:
            drain(sock_for[fd], queue_from[fd], delay_ns)
        now_ns = time.time_ns()
        for fd, queue in queue_from.items():
            release(queue, out_for[fd], now_ns)


if __name__ == '__main__':
    main()
