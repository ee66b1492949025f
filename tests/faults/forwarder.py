"""A userspace link between two TAP devices that can delay and drop frames, one way or both.

The kernel's ``sch_netem`` is missing on the machines the harness runs on, so a fault run joins a
store's namespace to the host with two TAP devices and this process between them: it reads each
Ethernet frame from one device's file descriptor and writes it to the other's, and while a fault
is on it holds each frame a random time (a timer heap, so that frames of one direction keep their
order unless jitter reorders them, as netem's do) or drops it at random (seeded). TCP on either
side then sees real losses and delays, and retransmits.

It creates both devices (not persistent: they go when this process ends, however it ends), says
``ready`` on stdout, and then reads commands on stdin, one a line, answering each with a line:

``delay DIRECTION MEAN_MS JITTER_MS``
    hold each frame MEAN ± JITTER milliseconds (uniform);
``loss DIRECTION PERCENT SEED``
    drop each frame with that probability, drawn from a generator seeded with SEED;
``clear``
    forward everything at once again (frames already held still leave at their time);
``stats``
    answer ``stats`` and, per direction, the frames forwarded, delayed and dropped so far.

DIRECTION is ``to`` (from the first device to the second), ``from`` (back) or ``both``. It ends
at the end of its stdin (its parent gone) or after ``--lifetime`` seconds, whichever comes first.

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


class Direction:
    """What happens to the frames going one way."""

    def __init__(self) -> None:
        self.delay = (0.0, 0.0)
        self.loss = 0.0
        self.choose = random.Random(0)
        self.forwarded = self.delayed = self.dropped = 0


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
            return "ok"
        if words[0] == "stats":
            return "stats " + " ".join(f"{name}={way.forwarded},{way.delayed},{way.dropped}"
                                       for name, way in zip(("to", "from"), self.ways, strict=True))
        try:
            if words[0] == "delay" and len(words) == 4:
                for index in DIRECTIONS[words[1]]:
                    self.ways[index].delay = (float(words[2]) / 1000, float(words[3]) / 1000)
                return "ok"
            if words[0] == "loss" and len(words) == 4:
                for index in DIRECTIONS[words[1]]:
                    self.ways[index].loss = float(words[2]) / 100
                    self.ways[index].choose = random.Random(f"{words[3]}-{index}")
                return "ok"
        except (KeyError, ValueError):
            pass
        return f"error {line.strip()}"

    def receive(self, index: int, now: float) -> None:
        """Read every frame waiting on device ``index`` and forward, hold or drop each."""
        way, source, target = self.ways[index], self.fds[index], self.fds[1 - index]
        for _ in range(256):
            try:
                frame = os.read(source, FRAME)
            except BlockingIOError:
                return
            if way.loss and way.choose.random() < way.loss:
                way.dropped += 1
            elif way.delay[0] or way.delay[1]:
                mean, jitter = way.delay
                way.delayed += 1
                due = now + max(0.0, way.choose.uniform(mean - jitter, mean + jitter))
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
