"""The table of every key of the file, read off the dataclasses, and how one value is read and checked.

:data:`PLACES` lists each key's :class:`Place` (section, key, the field it
fills, its type and rule); :func:`allowed` says in words what a key allows and
``_value`` parses a raw text or raises :class:`~zaqar_lite.config.rules.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable
from typing import Any

from zaqar_lite.config.rules import ConfigError, Rule
from zaqar_lite.config.settings import TEMPLATE_SECTION, Settings

ENV_PREFIX = "ZAQAR_LITE_"


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
