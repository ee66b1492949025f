"""Running notifiers as processes: in the foreground, as a pool, or beside the API server.

``run_foreground`` runs one notifier in the calling process until SIGTERM or
SIGINT. ``NotifierPool`` starts N child processes (``python -m
zaqar_lite.notify``, handed the settings on stdin), restarts any that dies, and
stops them all with SIGTERM. Children are plain subprocesses rather than
:mod:`multiprocessing` ones because the pool also lives in the gunicorn master,
whose forked workers must not inherit anything that would try to join them. A
child whose parent disappears (``kill -9`` of the parent) stops by itself,
releasing its leases.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from zaqar_lite.config import Settings

LOG = logging.getLogger(__name__)

#: seconds a child gets to finish its attempts in flight before it is killed
STOP_TIMEOUT = 30.0
RESTART_DELAY = 1.0
CHECK_SECONDS = 0.5


def configure_logging(level: str) -> None:
    """Log like the rest of zaqar-lite: time, pid, level, logger, message."""
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")


def run_foreground(settings: Settings, parent_pid: int | None = None) -> None:
    """Run one notifier in this process until SIGTERM or SIGINT (or until the parent is gone).

    Args:
        settings: the loaded settings.
        parent_pid: stop when this process is no longer our parent.
    """
    from zaqar_lite.notify.worker import Notifier
    from zaqar_lite.storage import open_deployment

    storage = open_deployment(settings)
    notifier = Notifier(storage, settings)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        LOG.info("notifier %s: signal %d, stopping", notifier.id, signum)
        notifier.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if parent_pid is not None:
        threading.Thread(target=_watch_parent, args=(parent_pid, notifier.stop), daemon=True,
                         name="zaqar-lite-parent-watch").start()
    try:
        notifier.run()
    finally:
        storage.close()


def _watch_parent(parent_pid: int, stop: Callable[[], None]) -> None:
    while os.getppid() == parent_pid:
        time.sleep(CHECK_SECONDS)
    LOG.warning("notifier: parent process %d is gone, stopping", parent_pid)
    stop()


def child_main() -> None:
    """Entry point of a pool child: the parent pid in argv, the pickled settings on stdin."""
    parent_pid = int(sys.argv[1])
    settings: Settings = pickle.load(sys.stdin.buffer)
    configure_logging(settings.log_level)
    run_foreground(settings, parent_pid)


class NotifierPool:
    """N notifier child processes, kept running until :meth:`stop`."""

    def __init__(self, settings: Settings, workers: int) -> None:
        self.settings = settings
        self.workers = workers
        self._owner_pid = os.getpid()
        self._children: list[subprocess.Popen[bytes]] = []
        self._stopping = threading.Event()

    def start(self) -> None:
        """Start the children and a thread that restarts any that dies."""
        self._children = [self._spawn() for _ in range(self.workers)]
        threading.Thread(target=self._supervise, daemon=True, name="zaqar-lite-notifier-supervisor").start()

    def _spawn(self) -> subprocess.Popen[bytes]:
        child = subprocess.Popen([sys.executable, "-m", "zaqar_lite.notify", str(os.getpid())],
                                 stdin=subprocess.PIPE)
        assert child.stdin is not None
        child.stdin.write(pickle.dumps(self.settings))
        child.stdin.close()
        LOG.info("notifier process %d started", child.pid)
        return child

    def pids(self) -> list[int]:
        """Return the pids of the children."""
        return [child.pid for child in self._children]

    def _supervise(self) -> None:
        while not self._stopping.wait(CHECK_SECONDS):
            for index, child in enumerate(self._children):
                if child.poll() is None or self._stopping.is_set():
                    continue
                LOG.warning("notifier process %d exited (%s); starting another", child.pid, child.returncode)
                time.sleep(RESTART_DELAY)
                if not self._stopping.is_set():
                    self._children[index] = self._spawn()

    def request_stop(self) -> None:
        """Ask :meth:`wait` to return (safe in a signal handler)."""
        self._stopping.set()

    def wait(self) -> None:
        """Block until :meth:`request_stop` or :meth:`stop` is called."""
        while not self._stopping.wait(1.0):
            pass

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM every child, wait for them, and SIGKILL the ones still running after ``timeout``.

        Only the process that started the pool stops it: a process forked from
        it (a gunicorn worker) leaving the same ``finally`` block does nothing.
        """
        if os.getpid() != self._owner_pid:
            return
        self._stopping.set()
        for child in self._children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in self._children:
            try:
                child.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                LOG.warning("notifier process %d did not stop; killing it", child.pid)
                child.kill()
                child.wait()


def run_pool(settings: Settings, workers: int) -> None:
    """Run ``workers`` notifiers until SIGTERM or SIGINT: in this process when there is one."""
    if workers == 1:
        run_foreground(settings)
        return
    pool = NotifierPool(settings, workers)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        pool.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    pool.start()
    pool.wait()
    pool.stop()
