"""The one frozen :class:`Settings`: every setting of zaqar-lite, its sections' dataclasses included.

A field that is not a section dataclass names its own section and key
(``[storage]``, ``[server]``, ``[transport]``, ``[queues]``, ``[console]``,
``[claims]``, ``[auth]``, ``[tokens]``, ``[signed_urls]``, ``[encryption]``,
``[keystone_authtoken]``, ``[queue_template:NAME]``) with :func:`~zaqar_lite.config.rules.setting`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zaqar_lite.config.rules import _host_and_port, setting
from zaqar_lite.config.sections import (
    Limits,
    MetricsSettings,
    NotifierSettings,
    PoolSettings,
    SmtpSettings,
    SqsSettings,
)
from zaqar_lite.models import QueueTemplate

#: who decides a request's project and role: nobody (``X-Project-ID``), ``[tokens]``, or a Keystone
AUTH_STRATEGIES = ("noauth", "token", "keystone")
#: the section prefix of a queue template in the configuration file
TEMPLATE_SECTION = "queue_template:"
#: queues whose key names and metadata a storage driver may remember, per worker process
QUEUE_CACHE_SIZE = 10_000


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


def _encryption_keys(entries: tuple[str, ...]) -> bool:
    try:
        keys = [encryption_key(entry) for entry in entries]
    except ValueError:
        return False
    return len({key_id for key_id, _ in keys}) == len(keys) and len({key for _, key in keys}) == len(keys)


#: ``[server] worker_class`` -> the gunicorn worker class it runs (gevent: see
#: zaqar_lite/server/gevent_worker.py; gthread: gunicorn's own thread pool)
WORKER_CLASSES = {"gevent": "zaqar_lite.server.gevent_worker.Worker", "gthread": "gthread"}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


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
    sqs: SqsSettings = dataclasses.field(default_factory=SqsSettings)

    def replace(self, **changes: Any) -> Settings:
        """Return a copy with the given fields changed."""
        return dataclasses.replace(self, **changes)
