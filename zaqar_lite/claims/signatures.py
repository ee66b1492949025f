"""Failure signatures: an error text with its variable parts masked, and a short stable id for it.

This module is plain Python (no Spark): the redrive filter ``signature``
(:mod:`zaqar_lite.claims.redrive`) and the console compute here the same
signature id as the DLQ report, which re-exports it as
``spark_jobs.signatures``. The report applies the very same :data:`MASKS`,
in order, with Spark's ``regexp_replace`` (Java regular expressions): every
pattern here is written in the subset where Python's ``re`` and
``java.util.regex`` agree (explicit ASCII classes, no ``\\w``, ``\\d`` or
``\\b``, fixed-length lookbehind, possessive ``*+``), and a test checks both
give the same text.

The masking is per token. A token is a run of characters between
delimiters (white space and ``, ; : [ ] { } < > " ' =``; parentheses are
not delimiters, so ``LOCAL(127.0.0.1)`` is one token); what is variable
becomes ``<*>``:

* a quoted string (``"..."`` or ``'...'`` starting a token);
* a URL (``scheme://...``);
* a hex-and-colon group with a digit (a MAC or IPv6 address, ``12:30:45``);
* the value of ``key=value``;
* a path (a token starting with ``/``, ``./``, ``../`` or ``~/``);
* a day or month name (``Mon``... ``Sun``, ``Jan``... ``Dec``);
* any token with a digit in it (numbers, ids such as ``blk_-1608999687919862906``,
  ``user42``, IPs, hex), with a size unit that follows it (``5 KB``);

and a run of such parts separated by white space only is one ``<*>`` (a
list of ids of any length reads the same). Then white space is collapsed.

A signature is ``"<error_type>: <masked error>"`` (either part may be
missing; both missing reads :data:`NO_REASON`), and its id is
:data:`SCHEME` (``v2-``) and the first 12 hex digits of the SHA-1 of that
text in UTF-8.

The first scheme (:data:`LEGACY_MASKS`, ids of 12 hex digits without a
prefix, placeholders ``<n>``, ``<hex>``, ``<str>``...) is kept so that an id
a report of that scheme printed still finds its dead letters
(:func:`legacy_failure_signature_id`, what a redrive filter compares with an
id without the prefix).
"""

from __future__ import annotations

import hashlib
import re

_WS = r" \t\n\x0B\f\r"
#: what separates tokens
_DELIMITERS = _WS + r",;:\[\]{}<>\"'="
_TOKEN_CHAR = f"[^{_DELIMITERS}]"
_VARIABLE = f"(?<![^{_DELIMITERS}])(?:" + "|".join([
    r'"[^"]*"',
    r"'[^']*'",
    r"[A-Za-z][A-Za-z0-9+.-]*://[^ \t\n\x0B\f\r'\"<>]+",
    r"(?=[0-9A-Fa-f:]*[0-9])[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{0,4}){2,}" + f"(?!{_TOKEN_CHAR})",
    f"(?<==){_TOKEN_CHAR}+",
    f"(?:[.]{{1,2}}|~)?/{_TOKEN_CHAR}*",
    "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun|Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)" + f"(?!{_TOKEN_CHAR})",
    # possessive (*+, in Python 3.11 and Java alike): a digit-less run never gives a character back
    f"[^{_DELIMITERS}0-9]*+[0-9]{_TOKEN_CHAR}*+(?:[ ](?:[KMGTPE]i?B|B)(?![A-Za-z0-9_]))?",
]) + ")"
#: the placeholder of every variable part
PLACEHOLDER = "<*>"
#: (pattern, replacement), applied in this order
MASKS: tuple[tuple[str, str], ...] = (
    (f"{_VARIABLE}(?:[{_WS}]+{_VARIABLE})*", PLACEHOLDER),
    # a run of two or more white space characters, or one that is not a space: one space
    (f"[{_WS}]{{2,}}|[\\t\\n\\x0B\\f\\r]", " "),
)
#: the first scheme's masks (ids without a prefix), kept to find dead letters by such an id
LEGACY_MASKS: tuple[tuple[str, str], ...] = (
    (r'"[^"]*"', '"<str>"'),
    (r"(?<![A-Za-z0-9])'[^']*'", "'<str>'"),
    (r"[A-Za-z][A-Za-z0-9+.-]*://[^ \t\n\x0B\f\r'\"<>]+", "<url>"),
    (r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+", "<email>"),
    (r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
    (r"(?<![0-9.])[0-9]{1,3}(\.[0-9]{1,3}){3}(:[0-9]{1,5})?(?![0-9.])", "<ip>"),
    (r"(?<![A-Za-z0-9_.<>/])(/[A-Za-z0-9_.~@%+-]+)+/?", "<path>"),
    (r"0[xX][0-9a-fA-F]+", "<hex>"),
    (r"(?<![A-Za-z0-9])(?=[a-fA-F]*[0-9])(?=[0-9]*[a-fA-F])[0-9a-fA-F]{8,}(?![A-Za-z0-9])", "<hex>"),
    (r"[0-9]+([.,][0-9]+)*", "<n>"),
    (r"[ \t\n\x0B\f\r]+", " "),
)
#: longest masked text kept (characters)
MAX_LENGTH = 300
#: the signature of a dead letter whose failures carry no error text or type
NO_REASON = "(no reason given)"
#: what starts an id of this scheme (an id without it is of the first scheme)
SCHEME = "v2-"
#: hex digits of the SHA-1 in an id
ID_LENGTH = 12
#: an id of either scheme (what a redrive filter ``signature`` accepts)
ID_PATTERN = f"^(?:{SCHEME})?[0-9a-f]{{{ID_LENGTH}}}$"
_COMPILED = tuple((re.compile(pattern), replacement) for pattern, replacement in MASKS)
_VARIABLES, _SPACES = (pattern.sub for pattern, _ in _COMPILED)
_LEGACY = tuple((re.compile(pattern), replacement) for pattern, replacement in LEGACY_MASKS)


def mask_error(text: str | None) -> str:
    """Return an error text with its variable parts read ``<*>`` and white space collapsed."""
    if not text:
        return ""
    # the two MASKS, unrolled: the redrive filter and the console run this on every dead letter
    masked = _VARIABLES(PLACEHOLDER, text)
    # the second only changes a text with two spaces in a row or a tab, line feed, vertical tab,
    # form feed or carriage return (none is printable): without them it is skipped
    if "  " in masked or not masked.isprintable():
        masked = _SPACES(" ", masked)
    return masked.strip(" ")[:MAX_LENGTH]


def _joined(error_type: str | None, masked: str) -> str:
    kind = error_type.strip(" ") if error_type else ""
    if kind:
        return f"{kind}: {masked}" if masked else kind
    return masked or NO_REASON


def signature(error_type: str | None, error: str | None) -> str:
    """Return the signature text of one failure."""
    return _joined(error_type, mask_error(error))


def signature_id(text: str) -> str:
    """Return the short stable id of a signature text (:data:`SCHEME` and 12 hex digits)."""
    return SCHEME + hashlib.sha1(text.encode("utf-8")).hexdigest()[:ID_LENGTH]


def failure_signature_id(error_type: str | None, error: str | None) -> str:
    """Return the signature id of one failure (what a redrive filter by signature compares)."""
    return signature_id(signature(error_type, error))


def legacy_signature(error_type: str | None, error: str | None) -> str:
    """Return the signature text of one failure under the first scheme (:data:`LEGACY_MASKS`)."""
    masked = error or ""
    for pattern, replacement in _LEGACY:
        masked = pattern.sub(replacement, masked)
    return _joined(error_type, masked.strip(" ")[:MAX_LENGTH])


def legacy_failure_signature_id(error_type: str | None, error: str | None) -> str:
    """Return the first scheme's id of one failure: 12 hex digits, no prefix."""
    return hashlib.sha1(legacy_signature(error_type, error).encode("utf-8")).hexdigest()[:ID_LENGTH]


def is_legacy_id(identifier: str) -> bool:
    """Return whether a signature id is of the first scheme (no :data:`SCHEME` prefix)."""
    return not identifier.startswith(SCHEME)
