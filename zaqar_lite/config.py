"""Settings: the only place that reads the configuration file and the environment.

The file is an ini file (see ``etc/zaqar-lite.conf`` for every key with its
default). Environment variables ``ZAQAR_LITE_<SECTION>_<KEY>`` override the
file, e.g. ``ZAQAR_LITE_STORAGE_URI=redis://127.0.0.1:6379/0``.

What may be written where is read off the dataclasses below and nothing else:
a field of :class:`Settings` that is itself a settings dataclass is a section
of its name (``[limits]``, ``[notifier]``, ``[smtp]``) whose keys are its
fields; any other field names its section and key with :func:`setting`. Each
field's type (int, float, bool, str, tuple of str) and its rule (range,
choices, a check) decide how a value is parsed and what a refusal says, so a
new setting is one field here and one commented line in etc/zaqar-lite.conf.
An unknown section, key or ``ZAQAR_LITE_<SECTION>_...`` variable, and a value
of the wrong type or range, raise :class:`ConfigError`: one line naming the
file (or the variable), the section, the key and what is allowed.
"""

from __future__ import annotations

import base64
import binascii
import configparser
import dataclasses
import difflib
import email.utils
import importlib.util
import ipaddress
import json
import os
import re
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from zaqar_lite.models import QueueTemplate

CONFIG_ENV = "ZAQAR_LITE_CONFIG"
#: who decides a request's project and role: nobody (``X-Project-ID``), ``[tokens]``, or a Keystone
AUTH_STRATEGIES = ("noauth", "token", "keystone")
#: the section prefix of a queue template in the configuration file
TEMPLATE_SECTION = "queue_template:"
ENV_PREFIX = "ZAQAR_LITE_"
#: queues whose key names and metadata a storage driver may remember, per worker process
QUEUE_CACHE_SIZE = 10_000


#: the queue-name rule (claims/names.py applies it): these characters, 1..max_queue_name_length
#: of them, and not a dot segment that path-normalising clients turn into another path
QUEUE_NAME = re.compile(r"[a-zA-Z0-9_.-]+")
DOT_SEGMENTS = (".", "..")


class ConfigError(ValueError):
    """A configuration file or variable names something unknown or holds a value out of its rule."""


def valid_queue_name(name: Any, max_length: int) -> bool:
    """Return whether a value is a valid queue name: ``^[a-zA-Z0-9_.-]+$``, 1..max chars, not ``.``/``..``."""
    return (isinstance(name, str) and 0 < len(name) <= max_length
            and QUEUE_NAME.fullmatch(name) is not None and name not in DOT_SEGMENTS)


def default_data_dir() -> Path:
    """Return the per-user directory where the default SQLite file lives."""
    try:
        import platformdirs

        return Path(platformdirs.user_data_dir("zaqar-lite", appauthor=False))
    except ImportError:  # pragma: no cover - platformdirs is a base dependency
        return Path.home() / ".local" / "share" / "zaqar-lite"


def default_storage_uri() -> str:
    """Return the SQLite URI used when no storage is configured."""
    return "sqlite:///" + str(default_data_dir() / "zaqar.db")


# -- the rules a value must follow -----------------------------------------------

@dataclasses.dataclass(frozen=True)
class Rule:
    """Where a setting lives in the file and what its values may be, beyond its type."""

    #: section and key of a field of Settings itself (a section dataclass's fields take
    #: the section's name and their own)
    section: str | None = None
    key: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    #: the value must be greater than this (a duration that cannot be 0)
    above: float | None = None
    #: the values allowed (compared in any letter case; a list setting takes some of them)
    choices: tuple[str, ...] = ()
    #: what is allowed, in words, when the type and range do not say it (with ``check``)
    words: str = ""
    #: returns whether a parsed value is allowed (``words`` says what is)
    check: Callable[[Any], bool] | None = None
    #: kept exactly as written, surrounding blanks included (a password)
    verbatim: bool = False
    #: never repeated in a refusal (a key)
    secret: bool = False


def setting(default: Any = dataclasses.MISSING, *, factory: Callable[[], Any] | None = None,
            secret: bool = False, **rule: Any) -> Any:
    """Return a dataclass field with its default and the :class:`Rule` its values follow."""
    metadata = {"rule": Rule(**{"verbatim": secret, "secret": secret, **rule})}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata, repr=not secret)
    return dataclasses.field(default=default, metadata=metadata, repr=not secret)


def _positive(default: int) -> Any:
    return setting(default, minimum=1)


def _host_and_port(value: str) -> bool:
    if value.startswith("unix:"):
        return len(value) > len("unix:")
    host, _, port = value.rpartition(":")
    return bool(host) and port.isascii() and port.isdigit() and 0 <= int(port) <= 65535


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


#: the id of a message encryption key: what each ciphertext names its key by
ENCRYPTION_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: bytes of an AES-256 key
ENCRYPTION_KEY_BYTES = 32


def encryption_key(entry: str) -> tuple[str, bytes]:
    """Return ``(id, key)`` of one ``[encryption] keys`` entry, ``ID:BASE64`` (32 bytes once decoded).

    Raises:
        ValueError: the entry is not of that form (the message never repeats the key).
    """
    key_id, sep, encoded = entry.partition(":")
    if not sep or not ENCRYPTION_KEY_ID.fullmatch(key_id):
        raise ValueError("an entry is not ID:BASE64 with an ID of 1 to 64 letters, digits, _ . or -")
    try:
        key = base64.b64decode(encoded.strip(), validate=True)
    except binascii.Error:
        raise ValueError(f"key {key_id} is not base64") from None
    if len(key) != ENCRYPTION_KEY_BYTES:
        raise ValueError(f"key {key_id} is {len(key)} bytes once decoded; AES-256 takes 32")
    return key_id, key


def _installed(module: str) -> bool:
    """Return whether a library can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module made unimportable (sys.modules[name] = None)
        return False


def _encryption_keys(entries: tuple[str, ...]) -> bool:
    try:
        keys = [encryption_key(entry) for entry in entries]
    except ValueError:
        return False
    return len({key_id for key_id, _ in keys}) == len(keys) and len({key for _, key in keys}) == len(keys)


@dataclasses.dataclass(frozen=True)
class Limits:
    """Request limits of SPEC 1.2; every one is configurable in ``[limits]``."""

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
    max_message_delay: int = setting(900, minimum=0)
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
    """Subscription delivery settings of SPEC 4; every one is configurable in ``[notifier]``."""

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


#: ``[server] worker_class`` -> the gunicorn worker class it runs (gevent: see
#: zaqar_lite/server/gevent_worker.py; gthread: gunicorn's own thread pool)
WORKER_CLASSES = {"gevent": "zaqar_lite.server.gevent_worker.Worker", "gthread": "gthread"}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


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


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting of zaqar-lite, loaded once and never mutated."""

    storage_uri: str = setting(factory=default_storage_uri, section="storage", key="uri", check=bool,
                               words="a storage URI (sqlite://, redis://, rediss://, mongodb://, swift://)")
    queue_cache_size: int = setting(QUEUE_CACHE_SIZE, section="storage", key="queue_cache_size", minimum=0)
    bind: str = setting("127.0.0.1:8888", section="server", key="bind", check=_host_and_port,
                        words="HOST:PORT (a port from 0 to 65535) or unix:PATH")
    workers: int = setting(2, section="server", key="workers", minimum=1)
    log_level: str = setting("INFO", section="server", key="log_level", choices=LOG_LEVELS)
    sweep_interval: float = setting(1.0, section="server", key="sweep_interval", above=0)
    #: the worker model, a key of WORKER_CLASSES: "gevent" (a greenlet per connection, read
    #: deadlines; the default) or "gthread" (gunicorn's thread pool)
    worker_class: str = setting("gevent", section="server", key="worker_class",
                                choices=tuple(WORKER_CLASSES))
    #: gthread only: request threads per worker
    threads: int = setting(8, section="server", key="threads", minimum=1)
    #: seconds a connection has to send a request's line and headers, from its opening or
    #: the end of the previous answer (an idle kept-alive connection closes after as long)
    header_timeout: float = setting(10.0, section="server", key="header_timeout", above=0)
    #: seconds a request's body has to arrive after its headers (gevent only)
    body_timeout: float = setting(30.0, section="server", key="body_timeout", above=0)
    #: gevent only: connections one worker holds at a time (waiting long polls included)
    worker_connections: int = setting(10000, section="server", key="worker_connections", minimum=1)
    #: one line per request in the server log (method, path, status, milliseconds, project)
    access_log: bool = setting(True, section="server", key="access_log")
    #: seconds a server holds a redrive task without renewing its lease: how long a task whose
    #: server died waits before another server (or the restarted one) resumes it
    redrive_task_lease: float = setting(30.0, section="server", key="redrive_task_lease", above=0)
    client_id_uuid_safe: str = setting("strict", section="transport", key="client_id_uuid_safe",
                                       choices=("strict", "off"))
    min_length_client_id: int = setting(10, section="transport", key="min_length_client_id", minimum=1)
    max_length_client_id: int = setting(36, section="transport", key="max_length_client_id", minimum=1)
    message_delete_with_claim_id: bool = setting(False, section="transport",
                                                 key="message_delete_with_claim_id")
    include_dead_letter: bool = setting(False, section="transport", key="include_dead_letter")
    #: the project's queue of this name is the dead-letter queue of queues that count claims or
    #: dead-letter on expiry without a ``_dead_letter_queue`` of their own ("": none, as Zaqar)
    default_dead_letter_queue: str = setting("", section="queues", key="default_dead_letter_queue")
    #: queue templates of ``[queue_template:NAME]`` sections (their metadata is checked by
    #: ``rules.templates`` when the server starts)
    queue_templates: tuple[QueueTemplate, ...] = setting((), section=TEMPLATE_SECTION)
    #: serve the operators' web console at /console (off by default)
    console_enabled: bool = setting(False, section="console", key="enabled")
    #: seconds a console login lasts (token auth): its session is kept in the store until then
    console_session_lifetime: float = setting(28800.0, section="console", key="session_lifetime", above=0)
    #: ``[claims] max_wait``: the longest ``wait`` (seconds) of a long-polling claim
    claim_max_wait: int = setting(20, section="claims", key="max_wait", minimum=1)
    auth_strategy: str = setting("noauth", section="auth", key="strategy", choices=AUTH_STRATEGIES)
    #: under noauth (every caller an admin), serve the pools, flavors and queue templates routes
    #: (off: they answer 403)
    noauth_admin_routes: bool = setting(False, section="auth", key="noauth_admin_routes")
    #: a file of more tokens, one ``token = project:role`` a line ("": none)
    token_file: str = setting("", section="auth", key="token_file")
    #: token -> (project, role), from the ``[tokens]`` section and then ``token_file``
    tokens: Mapping[str, tuple[str, str]] = setting(factory=dict, section="tokens")
    #: the key pre-signed URLs are signed with (``[signed_urls] secret_key``; "": no signed URLs)
    signed_url_secret_key: str = setting("", section="signed_urls", key="secret_key", secret=True)
    #: the longest a signed URL may be valid, in seconds from its signing (``[signed_urls] max_lifetime``)
    signed_url_max_lifetime: int = setting(604800, section="signed_urls", key="max_lifetime", minimum=1)
    #: keys that encrypt message bodies at rest, ``ID:BASE64`` each: the first encrypts, all decrypt
    encryption_keys: tuple[str, ...] = setting(
        (), section="encryption", key="keys", secret=True, check=_encryption_keys,
        words="ID:BASE64 entries separated by commas: distinct IDs of 1 to 64 letters, digits, _ . or -, "
              "each with a distinct key of 32 bytes in base64")
    #: ``[keystone_authtoken]`` as written, handed to keystonemiddleware under ``strategy = keystone``
    keystone_authtoken: Mapping[str, str] = setting(factory=dict, section="keystone_authtoken")
    limits: Limits = dataclasses.field(default_factory=Limits)
    notifier: NotifierSettings = dataclasses.field(default_factory=NotifierSettings)
    smtp: SmtpSettings = dataclasses.field(default_factory=SmtpSettings)
    metrics: MetricsSettings = dataclasses.field(default_factory=MetricsSettings)
    pools: PoolSettings = dataclasses.field(default_factory=PoolSettings)

    def replace(self, **changes: Any) -> Settings:
        """Return a copy with the given fields changed."""
        return dataclasses.replace(self, **changes)


# -- the table of every key, read off the dataclasses -------------------------------

@dataclasses.dataclass(frozen=True)
class Place:
    """One key of the file: where it is, which field it fills, its type and its rule."""

    section: str
    key: str
    #: the field's name in Settings, or in the section dataclass named ``group``
    field: str
    group: str | None
    kind: Any
    rule: Rule
    #: the field may be None (``int | None``): an empty value means None
    optional: bool = False

    @property
    def variable(self) -> str:
        """Return the environment variable that overrides this key."""
        return f"{ENV_PREFIX}{self.section}_{self.key}".upper()


#: sections whose keys are free (``[tokens]``: one key per token; ``[keystone_authtoken]``:
#: keystonemiddleware's options), read from the file only
FREE_SECTIONS = ("tokens", "keystone_authtoken")


def _place(section: str, key: str, field: str, group: str | None, kind: Any, rule: Rule) -> Place:
    """Return a key's place; ``X | None`` is read as X, an empty value meaning None."""
    kinds = typing.get_args(kind)
    if type(None) in kinds and len(kinds) == 2:
        real = next(k for k in kinds if k is not type(None))
        return Place(section, key, field, group, real, rule, optional=True)
    return Place(section, key, field, group, kind, rule)


def _places() -> list[Place]:
    """Return every key of the file: a section dataclass's fields, then each field's own place."""
    places: list[Place] = []
    hints = typing.get_type_hints(Settings)
    for field in dataclasses.fields(Settings):
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind):
            group_hints = typing.get_type_hints(kind)
            places.extend(_place(field.name, sub.name, sub.name, field.name, group_hints[sub.name],
                                 sub.metadata.get("rule", Rule()))
                          for sub in dataclasses.fields(kind))
            continue
        rule = field.metadata.get("rule", Rule())
        if rule.section in FREE_SECTIONS or rule.section == TEMPLATE_SECTION:
            continue
        if rule.section is None or rule.key is None:
            raise TypeError(f"Settings.{field.name} needs setting(..., section=, key=) to be configurable")
        places.append(_place(rule.section, rule.key, field.name, None, kind, rule))
    return places


#: every key of the file, in the order of the dataclasses
PLACES = _places()
#: section -> key -> its place
KEYS: dict[str, dict[str, Place]] = {}
for _known in PLACES:
    KEYS.setdefault(_known.section, {})[_known.key] = _known
SECTIONS = sorted([*KEYS, *FREE_SECTIONS])
#: how the unknown-section message names the queue template sections
SECTION_NAMES = sorted([*SECTIONS, TEMPLATE_SECTION + "NAME"])


def _range_words(rule: Rule) -> str:
    if rule.above is not None:
        return f" above {rule.above:g}"
    if rule.minimum is not None and rule.maximum is not None:
        return f" from {rule.minimum:g} to {rule.maximum:g}"
    if rule.minimum is not None:
        return f" of at least {rule.minimum:g}"
    if rule.maximum is not None:
        return f" of at most {rule.maximum:g}"
    return ""


def allowed(place: Place) -> str:
    """Return what a key allows, in words (the end of every refusal of its value)."""
    words = _allowed_value(place)
    return f"{words}, or empty for none" if place.optional else words


def _allowed_value(place: Place) -> str:
    rule, kind = place.rule, place.kind
    if rule.words:
        return rule.words
    if rule.choices:
        listed = ", ".join(rule.choices)
        return f"some of {listed}, separated by commas" if kind is not str else f"one of {listed}"
    if kind is bool:
        return "true or false"
    if kind is int:
        return "a whole number" + _range_words(rule)
    if kind is float:
        return "a number" + _range_words(rule)
    return "a text"


#: a decimal number as the file may write it (no underscores, no inf or nan)
NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class _Refused(Exception):
    """A value does not follow its place's type or rule."""


def _chosen(word: str, rule: Rule) -> str:
    for choice in rule.choices:
        if word.lower() == choice.lower():
            return choice
    raise _Refused


def _boolean(text: str, rule: Rule) -> bool:
    if text.lower() not in ("true", "false"):
        raise _Refused
    return text.lower() == "true"


def _whole_number(text: str, rule: Rule) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise _Refused
    return int(text)


def _number(text: str, rule: Rule) -> float:
    if not NUMBER.fullmatch(text):
        raise _Refused
    return float(text)


def _words(text: str, rule: Rule) -> tuple[str, ...]:
    words = tuple(word.strip() for word in text.split(",") if word.strip())
    if not words:
        raise _Refused
    return tuple(_chosen(word, rule) for word in words) if rule.choices else words


#: a field's type -> how a value of the file or the environment is read as it (else: text)
PARSERS: dict[Any, Callable[[str, Rule], Any]] = {
    bool: _boolean, int: _whole_number, float: _number, tuple[str, ...]: _words,
}


def _parsed(place: Place, raw: str) -> Any:
    rule, text = place.rule, raw.strip()
    if place.optional and not text:
        return None
    if place.kind in PARSERS:
        return PARSERS[place.kind](text, rule)
    if rule.choices:
        return _chosen(text, rule)
    return raw if rule.verbatim else text


def _follows_rule(place: Place, value: Any) -> bool:
    rule = place.rule
    if value is None:
        return place.optional
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if rule.above is not None and not value > rule.above:
            return False
        if rule.minimum is not None and value < rule.minimum:
            return False
        if rule.maximum is not None and value > rule.maximum:
            return False
    return rule.check is None or rule.check(value)


def _value(place: Place, raw: str, origin: str) -> Any:
    """Return a raw text parsed and checked, or raise :class:`ConfigError` saying what is allowed."""
    try:
        value = _parsed(place, raw)
    except _Refused:
        value = _Refused
    if value is _Refused or not _follows_rule(place, value):
        shown = "a value not repeated here (it is secret)" if place.rule.secret else repr(raw)
        raise ConfigError(f"{origin}[{place.section}] {place.key} must be {allowed(place)}, got {shown}")
    return value


# -- reading the file and the environment -------------------------------------------

def _suggestion(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _read_file(path: str) -> configparser.ConfigParser:
    # configparser would copy the keys of a [DEFAULT] section into every section; here it is
    # a section like any other, and so an unknown one
    parser = configparser.ConfigParser(interpolation=None, default_section="\x00no default section")
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # tokens are case-sensitive
    try:
        if not parser.read(path):
            raise ConfigError(f"{path}: the configuration file cannot be read")
    except configparser.Error as exc:
        text = " ".join(str(exc).split())
        raise ConfigError(f"{path}: not an ini file zaqar-lite can read: {text}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the configuration file is not UTF-8 text") from None
    for section in parser.sections():
        if section.startswith(TEMPLATE_SECTION):  # read and checked by _queue_templates
            continue
        if section not in SECTIONS:
            raise ConfigError(f"{path}: unknown section [{section}]{_suggestion(section, SECTIONS)}; "
                              f"the sections are {', '.join(SECTION_NAMES)}")
        for key in parser.options(section):
            if section not in FREE_SECTIONS and key not in KEYS[section]:
                keys = list(KEYS[section])
                raise ConfigError(f"{path}: unknown key {key} in [{section}]{_suggestion(key, keys)}; "
                                  f"its keys are {', '.join(keys)}")
    return parser


def _unknown_variables(environ: Mapping[str, str]) -> Iterator[str]:
    """Yield ``ZAQAR_LITE_<SECTION>_...`` variables, of a known section, that name no key."""
    known = {place.variable for place in PLACES}
    prefixes = tuple(f"{ENV_PREFIX}{section.upper()}_" for section in SECTIONS)
    for name in sorted(environ):
        if name.startswith(prefixes) and name not in known:
            yield name


def _raw_values(parser: configparser.ConfigParser, path: str | None,
                environ: Mapping[str, str]) -> Iterator[tuple[Place, str, str]]:
    """Yield ``(place, raw text, origin)`` of each key given, the environment winning over the file."""
    for place in PLACES:
        if place.variable in environ:
            yield place, environ[place.variable], f"environment variable {place.variable}: "
        elif parser.has_option(place.section, place.key):
            yield place, parser.get(place.section, place.key), f"{path}: "


def _read_tokens(lines: list[tuple[str, str]], where: str) -> dict[str, tuple[str, str]]:
    tokens = {}
    for token, value in lines:
        project, _, role = value.strip().partition(":")
        role = role.strip() or "member"
        if not project or role not in ("admin", "member"):
            raise ConfigError(
                f"{where}: token {token!r} must map to 'project:admin' or 'project:member'"
            )
        tokens[token.strip()] = (project.strip(), role)
    return tokens


def _read_token_file(path: str) -> dict[str, tuple[str, str]]:
    pairs = []
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"[auth] token_file {path} cannot be read: {exc}") from None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        token, sep, value = line.partition("=")
        if not sep:
            raise ConfigError(f"{path}: expected 'token = project:role', got {line!r}")
        pairs.append((token.strip(), value.strip()))
    return _read_tokens(pairs, path)


def _queue_templates(parser: configparser.ConfigParser, path: str | None) -> dict[str, Any]:
    """Read each ``[queue_template:NAME]`` section: a ``pattern`` and a JSON ``metadata`` object."""
    templates = []
    for section in parser.sections():
        if not section.startswith(TEMPLATE_SECTION):
            continue
        where = f"{path}: [{section}]" if path else f"[{section}]"
        name = section[len(TEMPLATE_SECTION):].strip()
        keys = set(parser.options(section))
        if keys != {"pattern", "metadata"}:
            raise ConfigError(f"{where} needs exactly the keys pattern and metadata, "
                              f"got {', '.join(sorted(keys)) or 'none'}")
        try:
            metadata = json.loads(parser.get(section, "metadata"))
        except ValueError:
            metadata = None
        if not isinstance(metadata, dict):
            raise ConfigError(f"{where} metadata must be a JSON object")
        templates.append(QueueTemplate(name=name, pattern=parser.get(section, "pattern").strip(),
                                       metadata=metadata, source="config"))
    return {"queue_templates": tuple(templates)} if templates else {}


# -- rules between keys ---------------------------------------------------------------

def _between_keys(settings: Settings) -> Iterator[str]:
    """Yield what is wrong between keys that are each fine on their own."""
    limits, notifier, smtp = settings.limits, settings.notifier, settings.smtp
    if settings.min_length_client_id > settings.max_length_client_id:
        yield "[transport] min_length_client_id may not exceed max_length_client_id"
    for low, high in (("min_message_ttl", "max_message_ttl"), ("min_claim_ttl", "max_claim_ttl"),
                      ("min_claim_grace", "max_claim_grace")):
        if getattr(limits, low) > getattr(limits, high):
            yield f"[limits] {low} may not exceed {high}"
    if notifier.lease_seconds < 2 * notifier.request_timeout + 2:
        yield "[notifier] lease_seconds must be at least 2 * request_timeout + 2"
    if smtp.starttls and smtp.ssl:
        yield ("[smtp] starttls and ssl exclude each other: ssl is TLS from the start, "
               "starttls upgrades a plain connection")
    if settings.encryption_keys and not _installed("cryptography"):
        yield "[encryption] keys need the cryptography library: pip install 'zaqar-lite[encryption]'"
    name = settings.default_dead_letter_queue
    if name and not valid_queue_name(name, limits.max_queue_name_length):
        yield ("[queues] default_dead_letter_queue must be a valid queue name (letters, digits, _ . -, "
               f"1 to {limits.max_queue_name_length} characters, not . or ..), got {name!r}")


def load_settings(path: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Load settings from an ini file, the environment and explicit overrides.

    Args:
        path: the ini file; ``None`` uses ``$ZAQAR_LITE_CONFIG`` when set.
        **overrides: field values that win over the file and the environment
            (``None`` values are ignored, so CLI options can be passed as is);
            they follow the same rules.

    Returns:
        The frozen settings.

    Raises:
        ConfigError: an unknown section, key or variable, a value of the wrong
            type or range, or a file that cannot be read; the message is one line.
    """
    environ = os.environ
    path = path or environ.get(CONFIG_ENV) or None
    source = os.fspath(path) if path else None
    parser = _read_file(source) if source else configparser.ConfigParser(interpolation=None)
    _check_variables(environ)
    values: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {}
    for place, raw, origin in _raw_values(parser, source, environ):
        target = groups.setdefault(place.group, {}) if place.group else values
        target[place.field] = _value(place, raw, origin)
    values.update(_checked_overrides(overrides))
    tokens = {}
    if parser.has_section("tokens"):
        tokens = _read_tokens(parser.items("tokens"), f"{source}: [tokens]")
    if values.get("token_file"):
        tokens.update(_read_token_file(values["token_file"]))
    values.setdefault("tokens", tokens)
    if parser.has_section("keystone_authtoken"):
        values["keystone_authtoken"] = dict(parser.items("keystone_authtoken"))
    values.update(_queue_templates(parser, source))
    hints = typing.get_type_hints(Settings)
    for group, fields in groups.items():
        values[group] = hints[group](**fields)
    settings = Settings(**values)
    for problem in _between_keys(settings):
        raise ConfigError(f"{source}: {problem}" if source else problem)
    return settings


def _check_variables(environ: Mapping[str, str]) -> None:
    """Refuse a ``ZAQAR_LITE_<SECTION>_...`` variable that names no key of that section."""
    for name in _unknown_variables(environ):
        section = next(s for s in SECTIONS if name.startswith(f"{ENV_PREFIX}{s.upper()}_"))
        keys = [place.variable for place in PLACES if place.section == section]
        why = f"[{section}] is read from the configuration file only" if section in FREE_SECTIONS \
            else f"the variables of [{section}] are {', '.join(keys)}"
        raise ConfigError(f"environment variable {name} names no setting{_suggestion(name, keys)}; {why}")


def _checked_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Return the overrides given (not None), a text one checked as the key it stands for."""
    by_field = {place.field: place for place in PLACES if place.group is None}
    values = {}
    for name, value in overrides.items():
        if value is None:
            continue
        if name in by_field and isinstance(value, str):
            value = _value(by_field[name], value, "command line: ")
        values[name] = value
    return values
