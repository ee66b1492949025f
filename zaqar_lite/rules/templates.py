"""Queue templates: which template a new queue matches, and the metadata it starts with.

A template (Solace's endpoint templates) is a name pattern and reserved
metadata. A queue created with a name the pattern matches starts with the
template's metadata, under what the creating request sets: the request's keys
win, and a reserved key the request sets to null is left unset. The queue's
metadata then records the template's name under ``_queue_template``, which
only the server writes.

Patterns are shell-style (:func:`fnmatch.fnmatchcase`): ``*`` matches any run
of characters, ``?`` one character; everything else matches itself, case
included. When several templates match, the most specific wins: the pattern
with the most literal characters, then the template name first in sort order.
A template never applies to the queue its own ``_dead_letter_queue`` names
(a DLQ created by a name that matches its template would otherwise be its own
dead-letter queue).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims.names import is_queue_name
from zaqar_lite.config import Limits, Settings
from zaqar_lite.errors import ValidationFailed
from zaqar_lite.models import QueueTemplate

#: the metadata key naming the template a queue was created from (written by the server only)
TEMPLATE_KEY = "_queue_template"
#: a pattern: queue-name characters and the wildcards ``*`` and ``?``
PATTERN = re.compile(r"[a-zA-Z0-9_.\-*?]+")
WILDCARDS = "*?"


def template_keys(limits: Limits) -> set[str]:
    """Return the metadata keys a template may carry: the reserved ones."""
    return meta.reserved_keys(limits) | {meta.RETRY_POLICY}


def check_name(name: Any, limits: Limits) -> str:
    """Check a template's name (the queue-name rule) and return it.

    Raises:
        ValidationFailed: it breaks the rule.
    """
    if not is_queue_name(name, limits):
        raise ValidationFailed(
            f"A template name follows the queue-name rule (letters, digits, _ . -, 1 to "
            f"{limits.max_queue_name_length} characters, not . or ..), got {json.dumps(name)}.")
    return str(name)


def check_pattern(pattern: Any, limits: Limits) -> str:
    """Check a template's name pattern and return it.

    Raises:
        ValidationFailed: not a string of queue-name characters and wildcards,
            or longer than a queue name may be.
    """
    if not isinstance(pattern, str) or PATTERN.fullmatch(pattern) is None:
        raise ValidationFailed(
            f"pattern must be a string of queue-name characters (letters, digits, _ . -) and the "
            f"wildcards * and ?, got {json.dumps(pattern)}.")
    if len(pattern) > limits.max_queue_name_length:
        raise ValidationFailed(
            f"pattern may have at most {limits.max_queue_name_length} characters, got {len(pattern)}.")
    return pattern


def check_template(name: str, pattern: Any, metadata: Any, limits: Limits,
                   default_dead_letter_queue: str | None = None) -> QueueTemplate:
    """Check a template's name, pattern and metadata on their own; return the template.

    The metadata is checked by the rules of a queue's own metadata (types and
    ranges, keys that need another); whether its dead-letter queue exists is
    checked in each project when a queue is created from the template.

    Raises:
        ValidationFailed: naming the field and the rule broken.
    """
    check_name(name, limits)
    check_pattern(pattern, limits)
    if not isinstance(metadata, dict):
        raise ValidationFailed("metadata must be a JSON object of reserved queue metadata.")
    unknown = sorted(set(metadata) - template_keys(limits))
    if unknown:
        raise ValidationFailed(
            f"metadata of a template carries reserved keys only; {', '.join(unknown)} "
            f"{'is' if len(unknown) == 1 else 'are'} not one: known keys are "
            f"{', '.join(sorted(template_keys(limits)))}.")
    stored = meta.validate(metadata, limits, default_dead_letter_queue)
    return QueueTemplate(name=name, pattern=pattern, metadata=stored)


def specificity(pattern: str) -> int:
    """Return how many characters of a pattern match only themselves."""
    return sum(1 for char in pattern if char not in WILDCARDS)


def matching(queue: str, templates: Iterable[QueueTemplate]) -> QueueTemplate | None:
    """Return the template a new queue of this name starts from, or None.

    The most specific matching pattern wins (most literal characters, then the
    template name); a template never applies to its own dead-letter queue.
    """
    found = [t for t in templates
             if fnmatch.fnmatchcase(queue, t.pattern) and t.metadata.get(meta.DEAD_LETTER_QUEUE) != queue]
    if not found:
        return None
    return min(found, key=lambda t: (-specificity(t.pattern), t.name))


def refuse_template_key(keys: Iterable[str]) -> None:
    """Refuse a client's metadata keys (or patch paths) that touch the server-written ``_queue_template``."""
    if TEMPLATE_KEY in keys:
        raise ValidationFailed(f"{TEMPLATE_KEY} is set by the server to the template a queue was "
                               "created from; a request cannot set it.")


def merged(template: QueueTemplate, requested: Mapping[str, Any]) -> dict[str, Any]:
    """Return a new queue's metadata: the template's, under the request's, with the template named."""
    combined = {**template.metadata, **requested}
    combined[TEMPLATE_KEY] = template.name
    return combined


def configured(settings: Settings) -> tuple[QueueTemplate, ...]:
    """Check the templates of the configuration file and return them, checked.

    Raises:
        ValueError: naming the section and what is wrong (the server does not start).
    """
    checked = []
    for template in settings.queue_templates:
        try:
            valid = check_template(template.name, template.pattern, template.metadata,
                                   settings.limits, settings.default_dead_letter_queue)
        except ValidationFailed as exc:
            raise ValueError(f"[queue_template:{template.name}] {exc}") from None
        checked.append(QueueTemplate(valid.name, valid.pattern, valid.metadata, source="config"))
    return tuple(checked)
