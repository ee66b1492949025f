"""A userspace link between two TAP devices that can delay and drop frames, one way or both.

The kernel's ``sch_netem`` is missing on the machines the harness runs on, so a fault run joins a
store's namespace to the host with two TAP devices and this process between them: it reads each
Ethernet frame from one device's file descriptor and writes it to the other's, and while a fault
is on it holds each frame a random time (a timer heap, so that frames of one direction keep their
order unless jitter reorders them, as netem's do) or drops it at random (seeded). TCP on either
side then sees real losses and delays, and retransmits.

It creates both devices (not persistent: they go when this process ends, however it ends), says
``ready`` on stdout, and then reads commands on stdin, one a line, answering each with a line:

``delay DIRECTION MEAN_MS JITTER_MS [port PORT]``
    hold each frame MEAN ± JITTER milliseconds (uniform);
``loss DIRECTION PERCENT SEED [port PORT]``
    drop each frame with that probability, drawn from a generator seeded with SEED;
``drop DIRECTION [port PORT]``
    drop every frame (a partition, one way or both);
``clear``
    forward everything at once again, every port's frames too (frames already held still leave
    at their time);
``stats``
    answer ``stats`` and, per direction, the frames forwarded, delayed and dropped so far.

DIRECTION is ``to`` (from the first device to the second), ``from`` (back) or ``both``. With
``port PORT`` a fault acts only on the IPv4 TCP frames whose source or destination port is PORT
(one store process among several listening on the same address, e.g. one Redis Cluster node),
and replaces that port's earlier fault in that direction; every other frame (other ports, ARP,
anything not TCP) goes on as the faults without a port say. It ends at the end of its stdin (its
parent gone) or after ``--lifetime`` seconds, whichever comes first.

Usage: ``python forwarder.py HOST_TAP STORE_TAP [--lifetime SECONDS]``; it needs CAP_NET_ADMIN.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import heapq
import itertools
import math
import os
import random
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
#: larger than any frame the devices pass (their MTU is 1500 and they get no offloaded segments)
FRAME = 65536
DIRECTIONS = {"to": (0,), "from": (1,), "both": (0, 1)}


def open_tap(name: str) -> int:
    """Create the TAP device ``name`` (or attach to it) and return its non-blocking descriptor."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), IFF_TAP | IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


def tcp_ports(frame: bytes) -> tuple[int, int] | None:
    """Return the source and destination ports of an Ethernet frame holding IPv4 TCP, else None."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:  # IPv4, protocol TCP
        return None
    start = 14 + (frame[14] & 0x0F) * 4
    if len(frame) < start + 4:
        return None
    source, destination = struct.unpack_from("!HH", frame, start)
    return source, destination


class Fault:
    """What happens to the frames of one direction (or of one port in it)."""

    def __init__(self) -> None:
        self.delay = (0.0, 0.0)
        self.loss = 0.0
        self.choose = random.Random(0)


class Direction(Fault):
    """What happens to the frames going one way: its faults for every frame, and per port."""

    def __init__(self) -> None:
        super().__init__()
        self.ports: dict[int, Fault] = {}
        self.forwarded = self.delayed = self.dropped = 0

    def fault(self, frame: bytes) -> Fault:
        """Return the fault that acts on a frame: its port's, if it has one, else the direction's."""
        if self.ports:
            ports = tcp_ports(frame)
            if ports is not None:
                for port in ports:
                    if port in self.ports:
                        return self.ports[port]
        return self


class Link:
    """The two devices and the frames held between them."""

    def __init__(self, fds: tuple[int, int]) -> None:
        self.fds = fds
        self.ways = (Direction(), Direction())
        self.held: list[tuple[float, int, int, bytes]] = []  # (due, sequence, to fd, frame)
        self.sequence = itertools.count()

    def command(self, line: str) -> str:
        words = line.split()
        if not words:
            return "error empty command"
        if words[0] == "clear":
            for way in self.ways:
                way.delay, way.loss = (0.0, 0.0), 0.0
                way.ports.clear()
            return "ok"
        if words[0] == "stats":
            return "stats " + " ".join(f"{name}={way.forwarded},{way.delayed},{way.dropped}"
                                       for name, way in zip(("to", "from"), self.ways, strict=True))
        try:
            if self._set(words):
                return "ok"
        except (IndexError, KeyError, ValueError):
            pass
        return f"error {line.strip()}"

    def _set(self, words: list[str]) -> bool:
        """Set the fault a ``delay``, ``loss`` or ``drop`` command says; False: no such command."""
        port = None
        if len(words) > 2 and words[-2] == "port":
            port, words = int(words[-1]), words[:-2]
            if not 0 < port < 65536:
                raise ValueError(port)
        indexes = DIRECTIONS[words[1]]
        if words[0] == "delay" and len(words) == 4:
            delay = (float(words[2]) / 1000, float(words[3]) / 1000)
            for index in indexes:
                self._fault(index, port).delay = delay
        elif words[0] == "loss" and len(words) == 4:
            loss = float(words[2]) / 100
            for index in indexes:
                fault = self._fault(index, port)
                fault.loss, fault.choose = loss, random.Random(f"{words[3]}-{index}")
        elif words[0] == "drop" and len(words) == 2:
            for index in indexes:
                self._fault(index, port).loss = 1.0
        else:
            return False
        return True

    def _fault(self, index: int, port: int | None) -> Fault:
        """Return the fault of a direction (``port`` None) or of one port in it, made anew for a port."""
        way = self.ways[index]
        if port is None:
            return way
        way.ports[port] = Fault()
        return way.ports[port]

    def receive(self, index: int, now: float) -> None:
        """Read every frame waiting on device ``index`` and forward, hold or drop each."""
        way, source, target = self.ways[index], self.fds[index], self.fds[1 - index]
        for _ in range(256):
            try:
                frame = os.read(source, FRAME)
            except BlockingIOError:
                return
            fault = way.fault(frame)
            if fault.loss and fault.choose.random() < fault.loss:
                way.dropped += 1
            elif fault.delay[0] or fault.delay[1]:
                mean, jitter = fault.delay
                way.delayed += 1
                due = now + max(0.0, fault.choose.uniform(mean - jitter, mean + jitter))
                heapq.heappush(self.held, (due, next(self.sequence), target, frame))
            else:
                way.forwarded += 1
                _write(target, frame)

    def release(self, now: float) -> float | None:
        """Send the held frames that are due; return the seconds until the next one (None: none held)."""
        while self.held and self.held[0][0] <= now:
            _, _, target, frame = heapq.heappop(self.held)
            _write(target, frame)
        return self.held[0][0] - now if self.held else None


def _write(fd: int, frame: bytes) -> None:
    try:
        os.write(fd, frame)
    except OSError as exc:  # the other device down or its queue full: the frame is lost, as on a wire
        if exc.errno not in (errno.EIO, errno.EAGAIN, errno.ENOBUFS, errno.EINVAL):
            raise


def serve(link: Link, lifetime: float) -> None:
    ends = time.monotonic() + lifetime
    poller = select.poll()
    for fd in (*link.fds, sys.stdin.fileno()):
        poller.register(fd, select.POLLIN)
    pending = b""
    while True:
        now = time.monotonic()
        if now >= ends:
            return
        wait = link.release(now)
        timeout = ends - now if wait is None else min(wait, ends - now)
        for fd, events in poller.poll(math.ceil(max(0.0, timeout) * 1000)):
            now = time.monotonic()
            if fd == sys.stdin.fileno():
                data = os.read(fd, 4096)
                if not data:
                    return
                pending += data
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    print(link.command(line.decode()), flush=True)
            elif events & select.POLLIN:
                link.receive(link.fds.index(fd), now)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("host_tap")
    parser.add_argument("store_tap")
    parser.add_argument("--lifetime", type=float, default=3600.0, help="seconds before it ends (3600)")
    args = parser.parse_args()
    fds = (open_tap(args.host_tap), open_tap(args.store_tap))
    print("ready", flush=True)
    try:
        serve(Link(fds), args.lifetime)
    finally:
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    main()
