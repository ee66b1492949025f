"""Settings: the only place that reads the configuration file and the environment.

The file is an ini file (see ``etc/zaqar-lite.conf`` for every key with its
default). Environment variables ``ZAQAR_LITE_<SECTION>_<KEY>`` override the
file, e.g. ``ZAQAR_LITE_STORAGE_URI=redis://127.0.0.1:6379/0``.
"""

from __future__ import annotations

import configparser
import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

CONFIG_ENV = "ZAQAR_LITE_CONFIG"


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


@dataclasses.dataclass(frozen=True)
class NotifierSettings:
    """Subscription delivery settings of SPEC 4; every one is configurable in ``[notifier]``."""

    #: URL schemes a subscriber may use: a subset of http and https
    subscriber_schemes: tuple[str, ...] = ("http", "https")
    #: seconds a notifier holds a subscription without renewing its lease
    lease_seconds: float = 30.0
    #: seconds between two looks at the store for new messages
    poll_interval: float = 0.25
    #: seconds to connect, and seconds to wait for the answer, of one webhook request
    request_timeout: float = 10.0
    #: subscriptions one notifier process delivers to at the same time
    threads: int = 4
    #: notifier processes ``zaqar-lite notifier`` starts when --workers is not given
    workers: int = 1


_NOTIFIER_SCHEMES = ("http", "https")


def _notifier_settings(get: Callable[[str, str], str | None]) -> NotifierSettings:
    values: dict[str, Any] = {}
    for field in dataclasses.fields(NotifierSettings):
        raw = get("notifier", field.name)
        if raw is None:
            continue
        if field.name == "subscriber_schemes":
            schemes = tuple(s.strip().lower() for s in raw.split(",") if s.strip())
            if not schemes or set(schemes) - set(_NOTIFIER_SCHEMES):
                raise ValueError("[notifier] subscriber_schemes must list http and/or https")
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
class Settings:
    """Every setting of zaqar-lite, loaded once and never mutated."""

    storage_uri: str = dataclasses.field(default_factory=default_storage_uri)
    bind: str = "127.0.0.1:8888"
    workers: int = 2
    log_level: str = "INFO"
    sweep_interval: float = 1.0
    #: gunicorn worker class: "gevent" (a greenlet per connection) or "gthread" (a thread pool)
    worker_class: str = "gevent"
    #: gthread only: request threads per worker
    threads: int = 8
    #: seconds a connection has to send a request's line and headers, from its opening or
    #: the end of the previous answer (an idle kept-alive connection closes after as long)
    header_timeout: float = 10.0
    #: seconds a request's body has to arrive after its headers (gevent only)
    body_timeout: float = 30.0
    client_id_uuid_safe: str = "strict"
    include_dead_letter: bool = True
    auth_strategy: str = "noauth"
    tokens: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    limits: Limits = dataclasses.field(default_factory=Limits)
    notifier: NotifierSettings = dataclasses.field(default_factory=NotifierSettings)

    def replace(self, **changes: Any) -> Settings:
        """Return a copy with the given fields changed."""
        return dataclasses.replace(self, **changes)


_SERVER_KEYS = {"bind": str, "workers": int, "log_level": str, "sweep_interval": float,
                "worker_class": str, "threads": int, "header_timeout": float, "body_timeout": float}
WORKER_CLASSES = ("gevent", "gthread")


def _check_server(values: dict[str, Any]) -> None:
    if values.get("worker_class", "gevent") not in WORKER_CLASSES:
        raise ValueError("[server] worker_class must be 'gevent' or 'gthread'")
    for key in ("threads", "header_timeout", "body_timeout"):
        if key in values and values[key] <= 0:
            raise ValueError(f"[server] {key} must be positive, got {values[key]!r}")


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
    uri = get("storage", "uri")
    if uri:
        values["storage_uri"] = uri
    for key, kind in _SERVER_KEYS.items():
        raw = get("server", key)
        if raw is not None:
            try:
                values[key] = kind(raw)
            except ValueError:
                what = {int: "an integer", float: "a number"}.get(kind, kind.__name__)
                raise ValueError(f"[server] {key} must be {what}, got {raw!r}") from None
    _check_server(values)
    raw = get("transport", "client_id_uuid_safe")
    if raw is not None:
        if raw not in ("strict", "off"):
            raise ValueError("[transport] client_id_uuid_safe must be 'strict' or 'off'")
        values["client_id_uuid_safe"] = raw
    raw = get("transport", "include_dead_letter")
    if raw is not None:
        if raw.lower() not in ("true", "false"):
            raise ValueError("[transport] include_dead_letter must be true or false")
        values["include_dead_letter"] = raw.lower() == "true"
    strategy = get("auth", "strategy")
    if strategy is not None:
        if strategy not in ("noauth", "token"):
            raise ValueError("[auth] strategy must be 'noauth' or 'token'")
        values["auth_strategy"] = strategy
    tokens: dict[str, tuple[str, str]] = {}
    if parser.has_section("tokens"):
        tokens.update(_read_tokens(parser.items("tokens"), "[tokens]"))
    token_file = get("auth", "token_file")
    if token_file:
        tokens.update(_read_token_file(token_file))
    values["tokens"] = tokens

    limit_values = {}
    for field in dataclasses.fields(Limits):
        raw = get("limits", field.name)
        if raw is not None:
            try:
                limit_values[field.name] = int(raw)
            except ValueError:
                raise ValueError(f"[limits] {field.name} must be an integer, got {raw!r}") from None
    values["limits"] = Limits(**limit_values)
    values["notifier"] = _notifier_settings(get)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values)
