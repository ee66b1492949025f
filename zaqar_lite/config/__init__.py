"""Settings: the only place that reads the configuration file and the environment.

The file is an ini file (see ``etc/zaqar-lite.conf`` for every key with its
default). Environment variables ``ZAQAR_LITE_<SECTION>_<KEY>`` override the
file, e.g. ``ZAQAR_LITE_STORAGE_URI=redis://127.0.0.1:6379/0``.

What may be written where is read off the dataclasses and nothing else:
a field of :class:`Settings` that is itself a settings dataclass is a section
of its name (``[limits]``, ``[notifier]``, ``[smtp]``) whose keys are its
fields; any other field names its section and key with :func:`setting`. Each
field's type (int, float, bool, str, tuple of str) and its rule (range,
choices, a check) decide how a value is parsed and what a refusal says, so a
new setting is one field (in ``settings.py`` or ``sections.py``) and one
commented line in etc/zaqar-lite.conf.
An unknown section, key or ``ZAQAR_LITE_<SECTION>_...`` variable, and a value
of the wrong type or range, raise :class:`ConfigError`: one line naming the
file (or the variable), the section, the key and what is allowed.

Where each part lives (every name is imported from ``zaqar_lite.config``):

``rules.py``
    :class:`Rule`, :func:`setting`, :class:`ConfigError` and the checks shared
    by several sections (a ``HOST:PORT``, :func:`valid_queue_name`).
``sections.py``
    the section dataclasses: :class:`Limits`, :class:`NotifierSettings`,
    :class:`SmtpSettings`, :class:`MetricsSettings`, :class:`PoolSettings`.
``settings.py``
    :class:`Settings` and its own keys (``[storage]``, ``[server]``,
    ``[transport]``, ``[auth]``, ``[encryption]``, ...), with their constants
    (``WORKER_CLASSES``, ``QUEUE_CACHE_SIZE``, :func:`encryption_key`, ...).
``table.py``
    the table of every key read off the dataclasses (``PLACES``, ``KEYS``),
    what each allows in words and how one value is parsed and checked.
``loading.py``
    :func:`load_settings`: reading the file and the environment, and the
    rules between keys.
"""

from __future__ import annotations

from zaqar_lite.config.loading import CONFIG_ENV, load_settings
from zaqar_lite.config.rules import DOT_SEGMENTS, QUEUE_NAME, ConfigError, Rule, setting, valid_queue_name
from zaqar_lite.config.sections import (
    NOTIFIER_SCHEMES,
    Limits,
    MetricsSettings,
    NotifierSettings,
    PoolSettings,
    SmtpSettings,
    SqsSettings,
)
from zaqar_lite.config.settings import (
    AUTH_STRATEGIES,
    ENCRYPTION_KEY_BYTES,
    ENCRYPTION_KEY_ID,
    LOG_LEVELS,
    QUEUE_CACHE_SIZE,
    TEMPLATE_SECTION,
    WORKER_CLASSES,
    Settings,
    default_data_dir,
    default_storage_uri,
    encryption_key,
)
from zaqar_lite.config.table import (
    ENV_PREFIX,
    FREE_SECTIONS,
    KEYS,
    NUMBER,
    PARSERS,
    PLACES,
    SECTION_NAMES,
    SECTIONS,
    Place,
    allowed,
)

__all__ = [
    "AUTH_STRATEGIES", "CONFIG_ENV", "DOT_SEGMENTS", "ENCRYPTION_KEY_BYTES", "ENCRYPTION_KEY_ID",
    "ENV_PREFIX", "FREE_SECTIONS", "KEYS", "LOG_LEVELS", "NOTIFIER_SCHEMES", "NUMBER", "PARSERS", "PLACES",
    "QUEUE_CACHE_SIZE", "QUEUE_NAME", "SECTIONS", "SECTION_NAMES", "TEMPLATE_SECTION", "WORKER_CLASSES",
    "ConfigError", "Limits", "MetricsSettings", "NotifierSettings", "Place", "PoolSettings", "Rule",
    "SqsSettings",
    "Settings", "SmtpSettings", "allowed", "default_data_dir", "default_storage_uri", "encryption_key",
    "load_settings", "setting", "valid_queue_name",
]
