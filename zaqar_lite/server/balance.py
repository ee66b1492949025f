"""The open connections of each gunicorn worker, in memory shared through the fork.

The gevent worker (:mod:`zaqar_lite.server.gevent_worker`) reads them to balance its
accepts; this module imports no gevent, so the master of a gthread server does
not load it either.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

#: seconds of accept delay per connection a worker holds more than the least loaded one
ACCEPT_DELAY_STEP = 0.02
#: the longest accept delay, in seconds
ACCEPT_DELAY_MAX = 0.1
#: seconds between a delaying worker's looks at the counts: a worker that has become the least
#: loaded meanwhile (the others' connections closed) accepts at once instead of at the end of
#: the delay it was given. Without it, short connections (one a request) found both workers
#: delaying, each on counts from before the other's connections closed: 4 clients posting on a
#: new connection a request waited 26 ms a request on 2 workers, 7 ms on one.
ACCEPT_RELOOK = 0.002
#: the share of the least loaded worker's connections another may hold on top of them
#: and still accept at once: without it, in a burst of new connections each worker waits
#: a step after every accept that puts it one ahead, and a backlog drains at about two
#: connections a step (2,000 long polls took 10 s to be accepted, and a ping behind them)
ACCEPT_SLACK = 0.1


class AcceptBalance:
    """The number of open connections of each worker slot, in memory shared by the workers.

    Made in the gunicorn master before the workers fork; the master gives each
    new worker a free slot (``pre_fork``) and clears a dead worker's slot
    (``child_exit``); each worker writes its own slot only.
    """

    def __init__(self, workers: int) -> None:
        self.counts = multiprocessing.RawArray("l", workers)

    def pre_fork(self, arbiter: Any, worker: Any) -> None:
        """gunicorn hook (master): give the worker about to fork a slot no live worker holds."""
        used = {getattr(w, "balance_slot", None) for w in arbiter.WORKERS.values()}
        worker.balance_slot = min(set(range(len(self.counts))) - used, default=0)
        self.counts[worker.balance_slot] = 0

    def child_exit(self, arbiter: Any, worker: Any) -> None:
        """gunicorn hook (master): a dead worker holds no connection."""
        slot = getattr(worker, "balance_slot", None)
        if slot is not None:
            self.counts[slot] = 0

    def delay(self, slot: int) -> float:
        """Seconds a worker in ``slot`` waits to accept: none within the slack, a step a connection beyond."""
        counts: list[int] = list(self.counts)
        least = min(counts)
        ahead = counts[slot] - least - int(least * ACCEPT_SLACK)
        return min(max(ahead, 0) * ACCEPT_DELAY_STEP, ACCEPT_DELAY_MAX)
