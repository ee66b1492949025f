"""Reading the file and the environment: :func:`load_settings`, the one place that reads either.

It refuses an unknown section, key or variable (naming the closest known one),
reads ``[tokens]``, the token file, ``[keystone_authtoken]`` and the
``[queue_template:NAME]`` sections, and checks the rules between keys.
"""

from __future__ import annotations

import configparser
import difflib
import importlib.util
import json
import os
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from zaqar_lite.config.rules import ConfigError, valid_queue_name
from zaqar_lite.config.settings import TEMPLATE_SECTION, Settings
from zaqar_lite.config.table import (
    ENV_PREFIX,
    FREE_SECTIONS,
    KEYS,
    PLACES,
    SECTION_NAMES,
    SECTIONS,
    Place,
    _value,
)
from zaqar_lite.models import QueueTemplate

CONFIG_ENV = "ZAQAR_LITE_CONFIG"


def _installed(module: str) -> bool:
    """Return whether a library can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module made unimportable (sys.modules[name] = None)
        return False


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
    if settings.sqs.credentials and settings.auth_strategy != "noauth" and not _installed("botocore"):
        yield ("[sqs] credentials under token or keystone auth need botocore to check signatures: "
               "pip install 'zaqar-lite[sqs]'")
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
