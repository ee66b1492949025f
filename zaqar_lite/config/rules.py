"""What a setting may hold: the :class:`Rule` of each field and :func:`setting` that attaches it.

Also the checks more than one group of sections uses (a ``HOST:PORT``, a queue
name) and :class:`ConfigError`, the one error of a refused configuration.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

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
