"""Settings: the only place that reads the configuration file and the environment.

The file is an ini file (see ``etc/zaqar-lite.conf`` for every key with its
default). Environment variables ``ZAQAR_LITE_<SECTION>_<KEY>`` override the
file, e.g. ``ZAQAR_LITE_STORAGE_URI=redis://127.0.0.1:6379/0``.
"""

from __future__ import annotations

import configparser
import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping

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


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting of zaqar-lite, loaded once and never mutated."""

    storage_uri: str = dataclasses.field(default_factory=default_storage_uri)
    bind: str = "127.0.0.1:8888"
    workers: int = 2
    log_level: str = "INFO"
    sweep_interval: float = 1.0
    client_id_uuid_safe: str = "strict"
    auth_strategy: str = "noauth"
    tokens: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    limits: Limits = dataclasses.field(default_factory=Limits)

    def replace(self, **changes: Any) -> "Settings":
        """Return a copy with the given fields changed."""
        return dataclasses.replace(self, **changes)


_SERVER_KEYS = {"bind": str, "workers": int, "log_level": str, "sweep_interval": float}


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
            values[key] = kind(raw)
    for key in ("client_id_uuid_safe",):
        raw = get("transport", key)
        if raw is not None:
            if raw not in ("strict", "off"):
                raise ValueError("[transport] client_id_uuid_safe must be 'strict' or 'off'")
            values[key] = raw
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
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values)
