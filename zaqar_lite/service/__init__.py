"""The messaging service: turns validated requests into policy decisions and storage calls.

The API's resources call it for every queue, message, claim and redrive
operation (subscriptions, topics, pools and long polling have services of
their own, built on it or beside it), and so do the sweeper, the redrive
task runner and the console. It owns the clock, the id generator, the sleep
and the random source of backoff jitter, so tests inject them and move time
without sleeping. Its parts live in
rooms of their own (queues, messages and claims, redrive, store-wide
operations) and meet in :class:`Messaging`.
"""

from __future__ import annotations

from zaqar_lite.service.core import ServiceBase, new_id, nobody_waits
from zaqar_lite.service.messages import Messages
from zaqar_lite.service.operations import Operations
from zaqar_lite.service.queues import Queues
from zaqar_lite.service.redrive import Redrive

__all__ = ["Messaging", "ServiceBase", "new_id", "nobody_waits"]


class Messaging(Queues, Messages, Redrive, Operations):
    """Queue, message, claim, redrive and store-wide operations with zaqar-lite's policy applied."""
