"""Plain records exchanged between the API, the policy and the storage drivers."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass
class Message:
    """One message as stored.

    Times are POSIX seconds (floats). ``delay_until`` is the spec's ``d``: the
    message is invisible to claim, pop and default listings while
    ``delay_until > now``; ``0`` means "never delayed" and costs nothing.
    ``claim_id``/``claim_expires`` describe the last claim that took it; the
    message is claimed only while ``claim_expires > now``. ``dedup_id`` is
    the client's deduplication id (None: none); ``dedup_until``, set only on a
    message being posted, is when the store may forget that id
    (:mod:`zaqar_lite.claims.dedup`). ``group`` is its ordered message group
    (None: none; :mod:`zaqar_lite.claims.groups`).
    """

    id: str
    body: Any
    created: float
    expires: float
    delay_until: float = 0.0
    client_id: str = ""
    claim_id: str | None = None
    claim_expires: float | None = None
    claim_count: int = 0
    dlq_eligible: bool = True
    failures: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    dead_letter: dict[str, Any] | None = None
    marker: int = 0
    dedup_id: str | None = None
    dedup_until: float = 0.0
    group: str | None = None
    #: the W3C trace context of its post (``traceparent``, ``tracestate`` if sent), None without
    trace: dict[str, str] | None = None

    def claimed(self, claim_id: str, claim_expires: float, claim_count: int, expires: float,
                delay_until: float) -> Message:
        """Return a copy of the message in a claim's state, the message itself unchanged.

        What ``dataclasses.replace`` returns, at a seventh of its cost (no
        per-field checks): a claim copies each message it takes.
        """
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.claim_id, copy.claim_expires, copy.claim_count = claim_id, claim_expires, claim_count
        copy.expires, copy.delay_until = expires, delay_until
        return copy

    def is_claimed(self, now: float) -> bool:
        """Return whether a live claim holds the message at ``now``."""
        return self.claim_id is not None and (self.claim_expires or 0) > now

    def is_delayed(self, now: float) -> bool:
        """Return whether the message is still invisible because of its delay (a claimed one is claimed).

        A claim of a queue with a ``_retry_backoff`` stores the wait after it
        in ``delay_until`` already: the message is delayed once the claim ends.
        """
        return self.delay_until > now and not self.is_claimed(now)

    def ttl(self) -> int:
        """Return the message's lifetime in seconds: from its post to its expiry.

        Counted from the post as :meth:`age` is, so a live message's ttl is
        never below its age; a dead letter whose move gave it a new expiry
        reads the time it spent before the move plus the time it was given.
        """
        return int(round(self.expires - self.created))

    def age(self, now: float) -> int:
        """Return whole seconds since the message was posted."""
        return max(0, int(now - self.created))


def stored_message(fields: dict[str, Any]) -> Message:
    """Return the :class:`Message` whose fields are ``fields``, every one of them by name, as read.

    What ``Message(**fields)`` returns, without the generated ``__init__``,
    which runs three instructions a field (about 55 a message): a store
    rebuilds every message a claim takes or a listing shows. The dictionary
    becomes the message's own (``tests/storage`` checks each driver's gives
    every field).
    """
    message = object.__new__(Message)
    message.__dict__ = fields
    return message


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim: a lease on some messages of one queue."""

    id: str
    ttl: int
    grace: int
    created: float
    expires: float

    def age(self, now: float) -> int:
        """Return whole seconds since the claim was made or last renewed."""
        return max(0, int(now - self.created))


@dataclasses.dataclass(frozen=True)
class DeadLetterPolicy:
    """The dead-letter inputs handed to a claim or a sweep, derived from queue metadata.

    ``max_claim_count`` ``None`` means messages are never dead-lettered by count;
    ``queue`` ``None`` means there is no dead-letter queue; ``messages_ttl`` is the
    new ttl of a moved message (``None`` keeps its expiry); ``on_expiry`` moves
    expired messages instead of discarding them; ``default_queue`` says that
    ``queue`` is the server's default dead-letter queue.
    """

    max_claim_count: int | None = None
    queue: str | None = None
    messages_ttl: int | None = None
    on_expiry: bool = False
    #: ``queue`` is the server's default dead-letter queue (the provenance says so)
    default_queue: bool = False

    @property
    def counts_claims(self) -> bool:
        """Return whether claims may exhaust messages under this policy."""
        return self.max_claim_count is not None and self.queue is not None


NO_DEAD_LETTER = DeadLetterPolicy()


@dataclasses.dataclass(frozen=True)
class RetryBackoff:
    """A queue's ``_retry_backoff``: the wait after a claim that ends without a delete (seconds).

    The wait after a message's ``n``-th claim is ``min(max, base * factor ** (n - 1))``,
    shortened by up to ``jitter`` of itself at random
    (:func:`zaqar_lite.claims.retry_backoff.retry_wait`).
    """

    base: float
    factor: float
    max: float
    jitter: float


@dataclasses.dataclass(frozen=True)
class ClaimRequest:
    """Everything a claim primitive needs: the claim, its times and the policy inputs."""

    claim_id: str
    now: float
    ttl: int
    grace: int
    limit: int
    dead_letter: DeadLetterPolicy = NO_DEAD_LETTER
    #: the queue's ``_retry_backoff`` (None: a claim that ends lets its messages go at once)
    backoff: RetryBackoff | None = None
    #: random draws in [0, 1), the i-th for the i-th message claimed (none: no jitter)
    draws: tuple[float, ...] = ()


@dataclasses.dataclass(frozen=True)
class QueueStats:
    """Counts of one queue's messages at an instant, plus its oldest and newest."""

    claimed: int
    free: int
    delayed: int
    oldest: Message | None = None
    newest: Message | None = None

    @property
    def total(self) -> int:
        """Return every unexpired message of the queue."""
        return self.claimed + self.free + self.delayed


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """What one sweep of one queue (or one rejecting release) did: messages moved and deleted."""

    dead_lettered: int = 0
    discarded: int = 0


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """What one claim did: the messages it took, and the exhausted ones it removed on its way.

    ``dead_lettered`` counts the messages it moved to the dead-letter queue
    (reason ``max_claims``), ``discarded`` the exhausted ones it deleted
    because they are not DLQ-eligible.
    """

    claimed: list[Message] = dataclasses.field(default_factory=list)
    dead_lettered: int = 0
    discarded: int = 0


@dataclasses.dataclass(frozen=True)
class Record:
    """A small versioned JSON document (subscriptions, delivery cursors, leases).

    ``version`` starts at 1 and grows by one with every write; writers pass the
    version they read so that two concurrent updates cannot both succeed.
    """

    key: str
    value: dict[str, Any]
    version: int


@dataclasses.dataclass(frozen=True)
class Move:
    """One message to move between queues: as it was read, and as it must be stored at its target.

    ``read`` is the state the move is guarded by (see ``Storage.move_messages``);
    ``moved`` is what the policy decided (:func:`zaqar_lite.claims.redrive.redriven`).
    """

    read: Message
    moved: Message


@dataclasses.dataclass(frozen=True)
class RedriveFilter:
    """Which dead letters a redrive selects; every criterion given must hold (None: any).

    ``error_type`` and ``signature`` are compared with the message's last
    failure (:mod:`zaqar_lite.claims.redrive`).
    """

    source_queue: str | None = None
    error_type: str | None = None
    signature: str | None = None
    ids: frozenset[str] | None = None


@dataclasses.dataclass(frozen=True)
class RedriveRequest:
    """A validated redrive call (docs/api.rst, "Redrive (zaqar-lite extension)").

    ``destination`` None sends each message back to its source queue;
    ``max_per_second`` None moves as fast as the store allows. ``as_task``
    (the body's ``async``) asks for a :class:`RedriveTask` instead of a
    blocking call; its ``limit`` 0 means none. A ``destination`` that does
    not exist is refused unless ``create_destination``.
    """

    limit: int
    destination: str | None = None
    filter: RedriveFilter = RedriveFilter()
    dry_run: bool = False
    max_per_second: float | None = None
    as_task: bool = False
    create_destination: bool = False


@dataclasses.dataclass(frozen=True)
class RedriveResult:
    """What a redrive found and did.

    ``matched`` counts the selected dead letters, ``redriven`` those actually
    moved (0 for a dry run), and ``sample`` holds the first selected messages,
    each with the queue it goes (or would go) to. ``warning`` says, when
    nothing was selected, that the queue is no queue's dead-letter queue.
    """

    matched: int
    redriven: int
    sample: list[tuple[Message, str]] = dataclasses.field(default_factory=list)
    warning: str | None = None


@dataclasses.dataclass(frozen=True)
class QueueTemplate:
    """A queue template: new queues whose name ``pattern`` matches start with its ``metadata``.

    ``source`` says where an operator defined it: ``"config"`` (a
    ``[queue_template:NAME]`` section, read-only through the API) or ``"api"``
    (``/v2/queue_templates``, kept in the store).
    """

    name: str
    pattern: str
    metadata: dict[str, Any]
    source: str = "api"


@dataclasses.dataclass(frozen=True)
class RedriveTask:
    """An asynchronous redrive of one DLQ, as its record stores it (docs/api.rst, "Redrive tasks").

    ``status`` is ``running``, ``completed``, ``cancelled`` or ``failed``.
    ``to_move`` is how many dead letters it selected when it counted them
    (None until then), ``moved`` how many it has moved. It moves the dead
    letters of ``queue`` with markers up to ``until_marker`` (the newest message
    when it started), FIFO; ``cursor`` is the marker of the last message it
    moved (every earlier one was examined) and ``pending`` the ids of the
    batch being moved. ``owner``/``lease_expires`` is the lease of the server
    running it (:class:`zaqar_lite.storage.lease.RecordLease`).
    """

    id: str
    queue: str
    status: str
    created: float
    destination: str | None = None
    filter: RedriveFilter = RedriveFilter()
    limit: int | None = None
    max_per_second: float = 1.0
    finished: float | None = None
    moved: int = 0
    to_move: int | None = None
    error: str | None = None
    until_marker: int | None = None
    cursor: int | None = None
    pending: tuple[str, ...] = ()
    owner: str | None = None
    lease_expires: float = 0.0

    def lease_is_free(self, now: float) -> bool:
        """Return whether no server holds a live lease on the task at ``now``."""
        return self.owner is None or self.lease_expires <= now

    def to_record(self) -> dict[str, Any]:
        """Return the record value (JSON)."""
        value = dataclasses.asdict(self)
        ids = self.filter.ids
        value["filter"]["ids"] = sorted(ids) if ids is not None else None
        value["pending"] = list(self.pending)
        return value

    @classmethod
    def from_record(cls, value: Mapping[str, Any]) -> RedriveTask:
        """Build a task from its record value."""
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in value.items() if k in names}
        wanted = dict(known.get("filter") or {})
        if wanted.get("ids") is not None:
            wanted["ids"] = frozenset(wanted["ids"])
        known["filter"] = RedriveFilter(**wanted)
        known["pending"] = tuple(known.get("pending") or ())
        return cls(**known)


@dataclasses.dataclass(frozen=True)
class Pool:
    """A store that holds some of a deployment's queues (Zaqar's pool).

    ``weight`` is its share of new queues (0: none); ``flavor`` the flavor it
    belongs to ("" for none); ``options`` are kept as given (Zaqar's
    driver options; zaqar-lite's drivers read theirs from the URI).
    """

    name: str
    uri: str
    weight: int
    flavor: str = ""
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        """Return the catalog record of the pool."""
        return {"uri": self.uri, "weight": self.weight, "flavor": self.flavor, "options": dict(self.options)}

    @classmethod
    def from_record(cls, name: str, value: Mapping[str, Any]) -> Pool:
        """Return the pool a catalog record holds."""
        return cls(name=name, uri=value["uri"], weight=value["weight"], flavor=value.get("flavor") or "",
                   options=value.get("options") or {})
