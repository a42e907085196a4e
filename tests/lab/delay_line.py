"""Fixed one-way delay between two Ethernet ports, in user space.

usage: delay_line.py PORT_A PORT_B DELAY_MS

Every frame that arrives on one port is sent out of the other DELAY_MS later, in both
directions. The lab needs real round-trip times and this machine's kernel has no netem, so the
delay namespace bridges its two veth ends through this program (precision about 1 ms, from the
poll timeout and the Python loop). A fixed delay keeps frames in arrival order, so each
direction is a plain FIFO of (due time, frame).
"""
import collections
import select
import socket
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23  # linux/if_packet.h, since 4.20: do not see our own sends
PACKET_OUTGOING = 4
MAX_FRAME_BYTES = 65535  # offloads are off on the lab's veths, but never truncate a frame
RCVBUF_BYTES = 8 << 20


def open_port(ifname):
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    except OSError:
        pass  # older kernels: the pkttype check in drain() does the same job
    sock.bind((ifname, 0))
    sock.setblocking(False)
    return sock


def drain(sock, queue, due_ns):
    """Moves every waiting frame of sock into queue, each due at due_ns."""
    while True:
        try:
            frame, addr = sock.recvfrom(MAX_FRAME_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:  # the port is gone: the lab is being torn down
            sys.exit(f'delay_line: {err}')
        if addr[2] != PACKET_OUTGOING:
            queue.append((due_ns, frame))


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
    poller = select.poll()
    for fd in sock_for:
        poller.register(fd, select.POLLIN)
    while True:
        heads = [q[0][0] for q in queue_from.values() if q]
        timeout_ms = None
        if heads:
            timeout_ms = max(0, -(-(min(heads) - time.monotonic_ns()) // 1_000_000))
        ready = poller.poll(timeout_ms)
        now_ns = time.monotonic_ns()
        for fd, _ in ready:
            drain(sock_for[fd], queue_from[fd], now_ns + delay_ns)
        now_ns = time.monotonic_ns()
        for fd, queue in queue_from.items():
            release(queue, out_for[fd], now_ns)


if __name__ == '__main__':
    main()
