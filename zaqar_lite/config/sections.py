"""The section dataclasses: ``[limits]``, ``[notifier]``, ``[smtp]``, ``[metrics]`` and ``[pools]``.

Each is a field of :class:`~zaqar_lite.config.settings.Settings` named for its
section, whose keys are its own fields; the checks only they use sit here too.
"""

from __future__ import annotations

import dataclasses
import email.utils
import ipaddress

from zaqar_lite.config.rules import _host_and_port, _positive, setting


def _absolute_or_empty(value: str) -> bool:
    return not value or value.startswith("/")


def _host_ports(entries: tuple[str, ...]) -> bool:
    return all(not entry.startswith("unix:") and _host_and_port(entry) for entry in entries)


def _mail_address(value: str) -> bool:
    return "@" in email.utils.parseaddr(value)[1]


def _networks(entries: tuple[str, ...]) -> bool:
    try:
        for entry in entries:
            ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
    return True


def _senders(value: str) -> bool:
    """A list of ``name@domain`` addresses and ``domain`` names (blank: none)."""
    if not value.strip():
        return True
    for entry in (entry.strip() for entry in value.split(",")):
        local, _, domain = entry.rpartition("@")
        if not domain or "@" in local or any(c.isspace() or c in "<>," for c in entry):
            return False
    return True


@dataclasses.dataclass(frozen=True)
class Limits:
    """The limits of docs/api.rst, "Limits"; every one is configurable in ``[limits]``."""

    max_queues_per_page: int = _positive(20)
    #: queues one project may have (those its posts and subscriptions create included)
    max_queues_per_project: int = _positive(10000)
    max_messages_per_page: int = _positive(20)
    max_messages_per_claim_or_pop: int = _positive(20)
    max_subscriptions_per_page: int = _positive(20)
    default_page_size: int = _positive(10)
    max_queue_name_length: int = _positive(64)
    max_project_id_length: int = _positive(256)
    min_message_ttl: int = _positive(60)
    max_message_ttl: int = _positive(1209600)
    default_message_ttl: int = _positive(3600)
    min_claim_ttl: int = _positive(60)
    max_claim_ttl: int = _positive(43200)
    default_claim_ttl: int = _positive(300)
    min_claim_grace: int = _positive(60)
    max_claim_grace: int = _positive(43200)
    default_claim_grace: int = _positive(60)
    #: longest ``delay`` (and farthest ``deliver_at``) of a message: Zaqar's 900 s, at most 7 days
    max_message_delay: int = setting(900, minimum=0, maximum=604800)
    max_messages_post_size: int = _positive(262144)
    max_queue_metadata: int = _positive(65536)
    min_subscription_ttl: int = _positive(60)
    default_subscription_ttl: int = _positive(3600)
    #: most live subscriptions one queue (or topic) may have: a post fans out to at most this many
    max_subscriptions_per_queue: int = _positive(100)
    failure_history_length: int = _positive(10)
    max_redrive_messages: int = _positive(1000)
    max_redrive_ids: int = _positive(1000)
    max_redrive_seconds: int = _positive(20)
    #: most messages a second a redrive task moves (its ``max_per_second``, and its rate without one)
    max_redrive_rate: int = _positive(500)
    #: ended redrive tasks remembered per queue (the most recent)
    redrive_tasks_kept: int = _positive(10)
    #: largest ``limit`` of ``GET /v2/redrive/tasks``
    max_redrive_tasks_per_page: int = _positive(20)


#: subscriber URI schemes zaqar-lite can deliver to (Zaqar's ``subscriber_types``)
NOTIFIER_SCHEMES = ("http", "https", "mailto", "trust+http", "trust+https")


@dataclasses.dataclass(frozen=True)
class NotifierSettings:
    """Subscription delivery settings; every one is configurable in ``[notifier]``.

    docs/api.rst, "Subscriptions and webhook delivery".
    """

    #: subscriber URI schemes accepted: a subset of Zaqar's ``subscriber_types``
    subscriber_schemes: tuple[str, ...] = setting(NOTIFIER_SCHEMES, choices=NOTIFIER_SCHEMES)
    #: seconds a notifier holds a subscription without renewing its lease
    lease_seconds: float = setting(30.0, above=0)
    #: seconds between two looks at the store for new messages
    poll_interval: float = setting(0.25, above=0)
    #: seconds to connect, and seconds to wait for the answer, of one webhook request
    #: (an SMTP session gets as long in all as a webhook request: twice this)
    request_timeout: float = setting(10.0, above=0)
    #: subscriptions one notifier process delivers to at the same time
    threads: int = _positive(4)
    #: notifier processes ``zaqar-lite notifier`` starts when --workers is not given
    workers: int = _positive(1)
    #: networks webhooks may go to although not public (loopback, private, link-local ...)
    allowed_targets: tuple[str, ...] = setting((), check=_networks,
                                               words="networks such as 10.1.0.0/16, 127.0.0.1 or fd00::/8")
    #: networks webhooks may never go to, even when public or allowed above
    denied_targets: tuple[str, ...] = setting((), check=_networks,
                                              words="networks such as 203.0.113.0/24 or 2001:db8::/32")


@dataclasses.dataclass(frozen=True)
class SmtpSettings:
    """The SMTP server that delivers to ``mailto:`` subscribers; configurable in ``[smtp]``."""

    host: str = setting("localhost", check=bool, words="a host name or address (not empty)")
    port: int = setting(25, minimum=1, maximum=65535)
    #: upgrade the connection with STARTTLS before logging in and sending
    starttls: bool = False
    #: speak TLS from the first byte (SMTPS, usually port 465), as Zaqar's ``self_local`` mode
    ssl: bool = False
    #: PEM file of the authorities that sign the server's certificate ("": the system's)
    ca_file: str = ""
    #: log in with these when ``username`` is not empty
    username: str = ""
    password: str = setting("", secret=True)
    #: the ``From`` of a mail whose subscription has no ``from`` option
    from_address: str = setting("zaqar-lite <no-reply@localhost>", check=_mail_address,
                                words="a mail address such as 'Name <name@example.com>'")
    #: every mail is From ``from_address``; a subscription's ``from`` option is refused
    fixed_from: bool = False
    #: the ``from`` options allowed, comma separated: addresses and domains ("": any)
    allowed_from: str = setting("", check=_senders,
                                words="mail addresses and domains separated by commas (ops@example.com, "
                                      "example.org)")


@dataclasses.dataclass(frozen=True)
class MetricsSettings:
    """``GET /metrics`` (Prometheus); configurable in ``[metrics]``."""

    #: serve ``GET /metrics`` (and keep the counts it needs)
    enabled: bool = setting(True)
    #: under token auth, ask ``/metrics`` for an admin token (``Authorization: Bearer`` or
    #: ``X-Auth-Token``): its queue series name every project's queues (false: open to anyone)
    require_token: bool = setting(True)
    #: seconds a worker serves the queue gauges it read for a scrape to the next scrapes before
    #: reading the store again (one read at a time per worker, whatever the number of scrapers)
    census_max_age: float = setting(5.0, minimum=0)
    #: queues that get series of their own (dead-letter queues first, then by project and
    #: name); the others are added up under ``project="(other)", queue="(other)"``
    max_labelled_queues: int = setting(1000, minimum=0)


@dataclasses.dataclass(frozen=True)
class PoolSettings:
    """Pools and flavors (``/v2/pools``, ``/v2/flavors``); configurable in ``[pools]``."""

    #: serve the pools and flavors API and place queues in the pools it registers (off: one store)
    enabled: bool = setting(False)
    #: the store of the catalog (pools, flavors, which pool holds each queue); "": the
    #: ``[storage] uri`` store
    catalog: str = ""
    #: seconds a process uses the pool table it read before reading it again (a pool registered
    #: or changed elsewhere is seen by every process within this time)
    refresh_interval: float = setting(5.0, above=0)
    #: the directory whose SQLite files a pool may name (absolute; "": no SQLite pool)
    sqlite_dir: str = setting("", check=_absolute_or_empty,
                              words="an absolute directory path, or nothing (no SQLite pool)")
    #: the network stores a pool may name (Redis, MongoDB, Swift), ``HOST:PORT`` each (none: no
    #: network pool); a URI without a port names its scheme's default port
    allowed_hosts: tuple[str, ...] = setting((), check=_host_ports,
                                             words="HOST:PORT entries separated by commas")


def _sqs_credentials(entries: tuple[str, ...]) -> bool:
    """``ACCESS_KEY:SECRET:PROJECT`` entries, each part not empty, each access key once."""
    parts = [entry.split(":") for entry in entries]
    return all(len(p) == 3 and all(p) for p in parts) and len({p[0] for p in parts}) == len(parts)


@dataclasses.dataclass(frozen=True)
class SqsSettings:
    """The SQS-compatible endpoint (docs/api.rst, "SQS-compatible endpoint"); configurable in ``[sqs]``."""

    #: answer SQS's two protocols on the server's own port (``POST /`` and queue URLs)
    enabled: bool = setting(True)
    #: the region of queue ARNs when a request is not signed for one
    region: str = setting("us-east-1", check=bool, words="a region name such as us-east-1 (not empty)")
    #: under noauth, the account (project) of a request whose access key id is not 12 digits
    default_account: str = setting("000000000000", check=bool, words="an account id (not empty)")
    #: under token or keystone auth, the access keys SQS requests may sign with: each
    #: ``ACCESS_KEY:SECRET:PROJECT``, separated by commas (none: every SQS request is refused)
    credentials: tuple[str, ...] = setting((), secret=True, check=_sqs_credentials,
                                           words="ACCESS_KEY:SECRET:PROJECT entries separated by commas, "
                                                 "each access key once")
    #: seconds a signed request's X-Amz-Date may differ from the server's clock (AWS: 15 minutes)
    max_clock_skew: int = setting(900, minimum=1)
    #: seconds after an SQS DeleteQueue during which CreateQueue refuses the name (SQS: 60; 0: never)
    recreate_after: int = setting(60, minimum=0)
