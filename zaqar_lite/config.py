"""Settings: the only place that reads the configuration file and the environment.

The file is an ini file (see ``etc/zaqar-lite.conf`` for every key with its
default). Environment variables ``ZAQAR_LITE_<SECTION>_<KEY>`` override the
file, e.g. ``ZAQAR_LITE_STORAGE_URI=redis://127.0.0.1:6379/0``.
"""

from __future__ import annotations

import configparser
import dataclasses
import email.utils
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from zaqar_lite.models import QueueTemplate

CONFIG_ENV = "ZAQAR_LITE_CONFIG"
#: queues whose key names and metadata a storage driver may remember, per worker process
QUEUE_CACHE_SIZE = 10_000


#: the queue-name rule (claims/names.py applies it): these characters, 1..max_queue_name_length
#: of them, and not a dot segment that path-normalising clients turn into another path
QUEUE_NAME = re.compile(r"[a-zA-Z0-9_.-]+")
DOT_SEGMENTS = (".", "..")


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


@dataclasses.dataclass(frozen=True)
class Limits:
    """Request limits of SPEC 1.2; every one is configurable in ``[limits]``."""

    max_queues_per_page: int = 20
    max_messages_per_page: int = 20
    max_messages_per_claim_or_pop: int = 20
    max_subscriptions_per_page: int = 20
    default_page_size: int = 10
    max_queue_name_length: int = 64
    max_project_id_length: int = 256
    min_message_ttl: int = 60
    max_message_ttl: int = 1209600
    default_message_ttl: int = 3600
    min_claim_ttl: int = 60
    max_claim_ttl: int = 43200
    default_claim_ttl: int = 300
    min_claim_grace: int = 60
    max_claim_grace: int = 43200
    default_claim_grace: int = 60
    max_message_delay: int = 900
    max_messages_post_size: int = 262144
    max_queue_metadata: int = 65536
    min_subscription_ttl: int = 60
    default_subscription_ttl: int = 3600
    failure_history_length: int = 10
    max_redrive_messages: int = 1000
    max_redrive_ids: int = 1000
    max_redrive_seconds: int = 20
    #: most messages a second a redrive task moves (its ``max_per_second``, and its rate without one)
    max_redrive_rate: int = 500
    #: ended redrive tasks remembered per queue (the most recent)
    redrive_tasks_kept: int = 10


@dataclasses.dataclass(frozen=True)
class NotifierSettings:
    """Subscription delivery settings of SPEC 4; every one is configurable in ``[notifier]``."""

    #: subscriber URI schemes accepted: a subset of Zaqar's ``subscriber_types``
    subscriber_schemes: tuple[str, ...] = ("http", "https", "mailto", "trust+http", "trust+https")
    #: seconds a notifier holds a subscription without renewing its lease
    lease_seconds: float = 30.0
    #: seconds between two looks at the store for new messages
    poll_interval: float = 0.25
    #: seconds to connect, and seconds to wait for the answer, of one webhook request
    #: (an SMTP session gets as long in all as a webhook request: twice this)
    request_timeout: float = 10.0
    #: subscriptions one notifier process delivers to at the same time
    threads: int = 4
    #: notifier processes ``zaqar-lite notifier`` starts when --workers is not given
    workers: int = 1


_NOTIFIER_SCHEMES = ("http", "https", "mailto", "trust+http", "trust+https")


def _notifier_settings(get: Callable[[str, str], str | None]) -> NotifierSettings:
    values: dict[str, Any] = {}
    for field in dataclasses.fields(NotifierSettings):
        raw = get("notifier", field.name)
        if raw is None:
            continue
        if field.name == "subscriber_schemes":
            schemes = tuple(s.strip().lower() for s in raw.split(",") if s.strip())
            if not schemes or set(schemes) - set(_NOTIFIER_SCHEMES):
                raise ValueError("[notifier] subscriber_schemes must list some of "
                                 + ", ".join(_NOTIFIER_SCHEMES))
            values[field.name] = schemes
            continue
        kind = int if field.name in ("threads", "workers") else float
        try:
            values[field.name] = kind(raw)
        except ValueError:
            raise ValueError(f"[notifier] {field.name} must be a number, got {raw!r}") from None
        if values[field.name] <= 0:
            raise ValueError(f"[notifier] {field.name} must be positive, got {raw!r}")
    settings = NotifierSettings(**values)
    if settings.lease_seconds < 2 * settings.request_timeout + 2:
        raise ValueError("[notifier] lease_seconds must be at least 2 * request_timeout + 2")
    return settings


@dataclasses.dataclass(frozen=True)
class SmtpSettings:
    """The SMTP server that delivers to ``mailto:`` subscribers; configurable in ``[smtp]``."""

    host: str = "localhost"
    port: int = 25
    #: upgrade the connection with STARTTLS before logging in and sending
    starttls: bool = False
    #: speak TLS from the first byte (SMTPS, usually port 465), as Zaqar's ``self_local`` mode
    ssl: bool = False
    #: PEM file of the authorities that sign the server's certificate ("": the system's)
    ca_file: str = ""
    #: log in with these when ``username`` is not empty
    username: str = ""
    password: str = dataclasses.field(default="", repr=False)
    #: the ``From`` of a mail whose subscription has no ``from`` option
    from_address: str = "zaqar-lite <no-reply@localhost>"


_SMTP_FLAGS = ("starttls", "ssl")


def _smtp_settings(get: Callable[[str, str], str | None]) -> SmtpSettings:
    values: dict[str, Any] = {}
    for field in dataclasses.fields(SmtpSettings):
        raw = get("smtp", field.name)
        if raw is None:
            continue
        if field.name in _SMTP_FLAGS:
            values[field.name] = _boolean(raw.strip(), f"[smtp] {field.name}")
        elif field.name == "port":
            try:
                values["port"] = int(raw)
            except ValueError:
                raise ValueError(f"[smtp] port must be an integer, got {raw!r}") from None
            if not 1 <= values["port"] <= 65535:
                raise ValueError(f"[smtp] port must be between 1 and 65535, got {raw!r}")
        else:
            values[field.name] = raw.strip() if field.name != "password" else raw
    settings = SmtpSettings(**values)
    if settings.starttls and settings.ssl:
        raise ValueError("[smtp] starttls and ssl exclude each other: ssl is TLS from the start, "
                         "starttls upgrades a plain connection")
    if not settings.host:
        raise ValueError("[smtp] host may not be empty")
    if "@" not in email.utils.parseaddr(settings.from_address)[1]:
        raise ValueError(f"[smtp] from_address must be a mail address such as "
                         f"'Name <name@example.com>', got {settings.from_address!r}")
    return settings


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting of zaqar-lite, loaded once and never mutated."""

    storage_uri: str = dataclasses.field(default_factory=default_storage_uri)
    queue_cache_size: int = QUEUE_CACHE_SIZE
    bind: str = "127.0.0.1:8888"
    workers: int = 2
    log_level: str = "INFO"
    sweep_interval: float = 1.0
    #: seconds a server holds a redrive task without renewing its lease: how long a task whose
    #: server died waits before another server (or the restarted one) resumes it
    redrive_task_lease: float = 30.0
    #: the worker model, a key of WORKER_CLASSES: "gevent" (a greenlet per connection, read
    #: deadlines; the default) or "gthread" (gunicorn's thread pool)
    worker_class: str = "gevent"
    #: gthread only: request threads per worker
    threads: int = 8
    #: seconds a connection has to send a request's line and headers, from its opening or
    #: the end of the previous answer (an idle kept-alive connection closes after as long)
    header_timeout: float = 10.0
    #: seconds a request's body has to arrive after its headers (gevent only)
    body_timeout: float = 30.0
    client_id_uuid_safe: str = "strict"
    min_length_client_id: int = 10
    max_length_client_id: int = 36
    message_delete_with_claim_id: bool = False
    include_dead_letter: bool = False
    #: the project's queue of this name is the dead-letter queue of queues that count claims or
    #: dead-letter on expiry without a ``_dead_letter_queue`` of their own ("": none, as Zaqar)
    default_dead_letter_queue: str = ""
    #: queue templates of ``[queue_template:NAME]`` sections (their metadata is checked by
    #: ``claims.templates`` when the server starts)
    queue_templates: tuple[QueueTemplate, ...] = ()
    auth_strategy: str = "noauth"
    #: serve the operators' web console at /console (off by default)
    console_enabled: bool = False
    tokens: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    #: ``[keystone_authtoken]`` as written, handed to keystonemiddleware under ``strategy = keystone``
    keystone_authtoken: Mapping[str, str] = dataclasses.field(default_factory=dict)
    limits: Limits = dataclasses.field(default_factory=Limits)
    notifier: NotifierSettings = dataclasses.field(default_factory=NotifierSettings)
    smtp: SmtpSettings = dataclasses.field(default_factory=SmtpSettings)

    def replace(self, **changes: Any) -> Settings:
        """Return a copy with the given fields changed."""
        return dataclasses.replace(self, **changes)


_SERVER_KEYS = {"bind": str, "workers": int, "log_level": str, "sweep_interval": float,
                "worker_class": str, "threads": int, "header_timeout": float, "body_timeout": float,
                "redrive_task_lease": float}
#: ``[server] worker_class`` -> the gunicorn worker class it runs (gevent: see
#: zaqar_lite/gevent_worker.py; gthread: gunicorn's own thread pool)
WORKER_CLASSES = {"gevent": "zaqar_lite.gevent_worker.Worker", "gthread": "gthread"}


def _check_server(values: dict[str, Any]) -> None:
    if values.get("worker_class", Settings.worker_class) not in WORKER_CLASSES:
        names = " or ".join(f"'{name}'" for name in WORKER_CLASSES)
        raise ValueError(f"[server] worker_class must be {names}")
    for key in ("threads", "header_timeout", "body_timeout", "redrive_task_lease"):
        if key in values and values[key] <= 0:
            raise ValueError(f"[server] {key} must be positive, got {values[key]!r}")


def _boolean(raw: str, where: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise ValueError(f"{where} must be true or false, got {raw!r}")
    return raw.lower() == "true"


def _transport_values(get: Callable[[str, str], str | None]) -> dict[str, Any]:
    """Read ``[transport]``: Zaqar's names and defaults, plus ``include_dead_letter``."""
    values: dict[str, Any] = {}
    raw = get("transport", "client_id_uuid_safe")
    if raw is not None:
        if raw not in ("strict", "off"):
            raise ValueError("[transport] client_id_uuid_safe must be 'strict' or 'off'")
        values["client_id_uuid_safe"] = raw
    for key in ("min_length_client_id", "max_length_client_id"):
        raw = get("transport", key)
        if raw is not None:
            if not raw.strip().isdigit() or int(raw) < 1:
                raise ValueError(f"[transport] {key} must be a positive integer, got {raw!r}")
            values[key] = int(raw)
    for key in ("message_delete_with_claim_id", "include_dead_letter"):
        raw = get("transport", key)
        if raw is not None:
            values[key] = _boolean(raw, f"[transport] {key}")
    low = values.get("min_length_client_id", Settings.min_length_client_id)
    high = values.get("max_length_client_id", Settings.max_length_client_id)
    if low > high:
        raise ValueError("[transport] min_length_client_id may not exceed max_length_client_id")
    return values


def _env(section: str, key: str) -> str | None:
    return os.environ.get(f"ZAQAR_LITE_{section}_{key}".upper())


def _read_tokens(lines: list[tuple[str, str]], where: str) -> dict[str, tuple[str, str]]:
    tokens = {}
    for token, value in lines:
        project, _, role = value.strip().partition(":")
        role = role.strip() or "member"
        if not project or role not in ("admin", "member"):
            raise ValueError(
                f"{where}: token {token!r} must map to 'project:admin' or 'project:member'"
            )
        tokens[token.strip()] = (project.strip(), role)
    return tokens


def _read_token_file(path: str) -> dict[str, tuple[str, str]]:
    pairs = []
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        token, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"{path}: expected 'token = project:role', got {line!r}")
        pairs.append((token.strip(), value.strip()))
    return _read_tokens(pairs, path)


def _storage_values(get: Callable[[str, str], str | None]) -> dict[str, Any]:
    """Read ``[storage]``."""
    values: dict[str, Any] = {}
    uri = get("storage", "uri")
    if uri:
        values["storage_uri"] = uri
    raw = get("storage", "queue_cache_size")
    if raw is not None:
        if not (raw.strip().isascii() and raw.strip().isdigit()):
            raise ValueError(f"[storage] queue_cache_size must be a whole number (0 or more), got {raw!r}")
        values["queue_cache_size"] = int(raw)
    return values


def _server_values(get: Callable[[str, str], str | None]) -> dict[str, Any]:
    """Read and check ``[server]``."""
    values: dict[str, Any] = {}
    for key, kind in _SERVER_KEYS.items():
        raw = get("server", key)
        if raw is not None:
            try:
                values[key] = kind(raw)
            except ValueError:
                what = {int: "an integer", float: "a number"}.get(kind, kind.__name__)
                raise ValueError(f"[server] {key} must be {what}, got {raw!r}") from None
    _check_server(values)
    return values


#: who decides a request's project and role: nobody (``X-Project-ID``), ``[tokens]``, or a Keystone
AUTH_STRATEGIES = ("noauth", "token", "keystone")


def _auth_values(get: Callable[[str, str], str | None],
                 parser: configparser.ConfigParser) -> dict[str, Any]:
    """Read ``[auth]`` and the tokens, from ``[tokens]`` and then ``[auth] token_file``."""
    values: dict[str, Any] = {}
    strategy = get("auth", "strategy")
    if strategy is not None:
        if strategy not in AUTH_STRATEGIES:
            raise ValueError("[auth] strategy must be 'noauth', 'token' or 'keystone'")
        values["auth_strategy"] = strategy
    tokens: dict[str, tuple[str, str]] = {}
    if parser.has_section("tokens"):
        tokens.update(_read_tokens(parser.items("tokens"), "[tokens]"))
    token_file = get("auth", "token_file")
    if token_file:
        tokens.update(_read_token_file(token_file))
    values["tokens"] = tokens
    if parser.has_section("keystone_authtoken"):
        values["keystone_authtoken"] = dict(parser.items("keystone_authtoken"))
    return values


def _queue_values(get: Callable[[str, str], str | None], limits: Limits) -> dict[str, Any]:
    """Read ``[queues]``."""
    raw = get("queues", "default_dead_letter_queue")
    if raw is None or not raw.strip():
        return {}
    name = raw.strip()
    if not valid_queue_name(name, limits.max_queue_name_length):
        raise ValueError(
            "[queues] default_dead_letter_queue must be a valid queue name (letters, digits, _ . -, "
            f"1 to {limits.max_queue_name_length} characters, not . or ..), got {raw!r}")
    return {"default_dead_letter_queue": name}


#: the section prefix of a queue template in the configuration file
TEMPLATE_SECTION = "queue_template:"


def _queue_templates(parser: configparser.ConfigParser) -> dict[str, Any]:
    """Read each ``[queue_template:NAME]`` section: a ``pattern`` and a JSON ``metadata`` object."""
    templates = []
    for section in parser.sections():
        if not section.startswith(TEMPLATE_SECTION):
            continue
        name = section[len(TEMPLATE_SECTION):].strip()
        keys = set(parser.options(section))
        if keys != {"pattern", "metadata"}:
            raise ValueError(f"[{section}] needs exactly the keys pattern and metadata, "
                             f"got {', '.join(sorted(keys)) or 'none'}")
        try:
            metadata = json.loads(parser.get(section, "metadata"))
        except ValueError:
            raise ValueError(f"[{section}] metadata must be a JSON object") from None
        if not isinstance(metadata, dict):
            raise ValueError(f"[{section}] metadata must be a JSON object")
        templates.append(QueueTemplate(name=name, pattern=parser.get(section, "pattern").strip(),
                                       metadata=metadata, source="config"))
    return {"queue_templates": tuple(templates)} if templates else {}
def _console_values(get: Callable[[str, str], str | None]) -> dict[str, Any]:
    """Read ``[console]``."""
    raw = get("console", "enabled")
    return {} if raw is None else {"console_enabled": _boolean(raw.strip(), "[console] enabled")}


def _limits(get: Callable[[str, str], str | None]) -> Limits:
    """Read ``[limits]``."""
    limit_values = {}
    for field in dataclasses.fields(Limits):
        raw = get("limits", field.name)
        if raw is not None:
            try:
                limit_values[field.name] = int(raw)
            except ValueError:
                raise ValueError(f"[limits] {field.name} must be an integer, got {raw!r}") from None
    return Limits(**limit_values)


def load_settings(path: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Load settings from an ini file, the environment and explicit overrides.

    Args:
        path: the ini file; ``None`` uses ``$ZAQAR_LITE_CONFIG`` when set.
        **overrides: field values that win over the file and the environment
            (``None`` values are ignored, so CLI options can be passed as is).

    Returns:
        The frozen settings.

    Raises:
        ValueError: a value has the wrong type or the file is malformed.
    """
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # tokens are case-sensitive
    path = path or os.environ.get(CONFIG_ENV)
    if path:
        if not parser.read(path):
            raise ValueError(f"configuration file {path} cannot be read")

    def get(section: str, key: str) -> str | None:
        env = _env(section, key)
        if env is not None:
            return env
        if parser.has_option(section, key):
            return parser.get(section, key)
        return None

    values: dict[str, Any] = {}
    values.update(_storage_values(get))
    values.update(_server_values(get))
    values.update(_transport_values(get))
    values.update(_auth_values(get, parser))
    values.update(_console_values(get))
    values["limits"] = _limits(get)
    values.update(_queue_values(get, values["limits"]))
    values.update(_queue_templates(parser))
    values["notifier"] = _notifier_settings(get)
    values["smtp"] = _smtp_settings(get)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values)
