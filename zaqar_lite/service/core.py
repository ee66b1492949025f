"""The service's shared state: the store, the settings, the clock and the id source."""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zaqar_lite.claims import metadata as meta
from zaqar_lite.clock import Clock, wall_clock
from zaqar_lite.config import Settings
from zaqar_lite.service.templates import QueueTemplates
from zaqar_lite.storage.base import Storage
from zaqar_lite.storage.breaker_windows import BreakerWindows
from zaqar_lite.storage.encrypted import encrypted
from zaqar_lite.storage.tasks import RedriveTasks

if TYPE_CHECKING:
    from zaqar_lite.service.waiting.channels import Channel

LOG = logging.getLogger("zaqar_lite.service")


def nobody_waits(project: str, queue: str) -> None:
    """Do nothing: the wake-up hook of a service whose claims never wait."""


def new_id() -> str:
    """Return a fresh message or claim id: a random (version 4) UUID's text, as ``str(uuid.uuid4())``.

    Written from 16 random bytes directly (:func:`uuid4_text`): ``uuid.UUID``
    checks and converts its arguments in about 140 bytecode instructions, a
    thirtieth of a post's.
    """
    return uuid4_text(os.urandom(16))


def uuid4_text(random_bytes: bytes) -> str:
    """Return the text of the version 4 UUID made of 16 random bytes, as ``str(uuid.UUID(bytes=...,
    version=4))`` writes it: the version in the high nibble of byte 6, RFC 4122's variant in byte 8."""
    text = random_bytes.hex()
    # byte 6's high digit is the version, 4; byte 8's is RFC 4122's variant: 10 and its own low two bits
    return f"{text[:8]}-{text[8:12]}-4{text[13:16]}-{_VARIANT_DIGITS[text[16]]}{text[17:20]}-{text[20:]}"


#: the hex digit of byte 8's high four bits once the variant is set: 10 followed by their low two bits
_VARIANT_DIGITS = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


class ServiceBase:
    """What every part of the messaging service shares, and the reads more than one part makes."""

    def __init__(self, storage: Storage, settings: Settings, clock: Clock = wall_clock,
                 ids: Callable[[], str] = new_id, sleep: Callable[[float], None] = time.sleep,
                 draw: Callable[[], float] = random.random, templates: QueueTemplates | None = None) -> None:
        #: the deployment seen through encryption at rest (bodies sealed where a queue asks)
        self.storage = encrypted(storage, settings)
        self.settings = settings
        self.limits = settings.limits
        self.clock = clock
        self.ids = ids
        self.sleep = sleep
        #: the queue templates new queues start from (``create_app`` hands in the ones its
        #: template resources serve; by default the deployment's own)
        self.templates = templates if templates is not None else QueueTemplates(storage, settings)
        #: the redrive tasks, kept in the deployment's records
        self.tasks = RedriveTasks(storage)
        #: the dead-letter breakers' windows, kept in the deployment's records
        self.breaker_windows = BreakerWindows(storage)
        #: called with (project, queue) after a write that may make messages of the queue
        #: claimable; long polling (``service/waiting/``) sets it to its channel's ``publish``
        self.wake_up: Callable[[str, str], None] = nobody_waits
        #: called with (project, queue) after a post stored messages or a release: ``wake_up``, or
        #: nothing where the store's own post and release wake the waiting claims (:meth:`wake_ups_through`)
        self.wake_up_after_post_or_release: Callable[[str, str], None] = nobody_waits
        #: the random source of ``_retry_backoff`` jitter: a number in [0, 1) per call
        self.draw = draw

    def wake_ups_through(self, channel: Channel) -> None:
        """Send the wake-ups of this service's writes through a long-polling channel."""
        self.wake_up = channel.publish
        self.wake_up_after_post_or_release = nobody_waits if channel.store_wakes_up else channel.publish

    def check_room_for_queue(self, project: str, queue: str) -> None:
        """Refuse to create ``queue`` when it is new and its project has ``max_queues_per_project`` queues.

        Raises:
            QueueLimitReached: the queue does not exist and the project has no room for it.
        """
        if self.storage.get_queue_metadata(project, queue) is None:
            meta.check_room_for_queue(project, self.storage.count_queues(project),
                                      self.limits.max_queues_per_project)

    def _every_queue(self, project: str) -> list[tuple[str, dict[str, Any]]]:
        """Return every queue of a project with its stored metadata, read a page at a time."""
        found: list[tuple[str, dict[str, Any]]] = []
        marker = None
        while True:
            page = self.storage.list_queues(project, marker=marker, limit=1000)
            found.extend(page)
            if len(page) < 1000:
                return found
            marker = page[-1][0]

    def _existing_default_dlq(self, project: str, queue: str) -> str | None:
        """Return the default dead-letter queue's name when it is set, is not ``queue`` and exists."""
        name = self.settings.default_dead_letter_queue
        if not name or name == queue or self.storage.get_queue_metadata(project, name) is None:
            return None
        return name

