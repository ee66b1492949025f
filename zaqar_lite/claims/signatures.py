"""Failure signatures: an error text with its variable parts masked, and a short stable id for it.

This module is plain Python (no Spark): the redrive filter ``signature``
(:mod:`zaqar_lite.claims.redrive`) computes here the same signature id as the
DLQ report, which re-exports it as ``spark_jobs.signatures``. The report
applies the very same :data:`MASKS`, in order, with Spark's
``regexp_replace`` (Java regular expressions): every pattern here is written
in the subset where Python's ``re`` and ``java.util.regex`` agree (explicit
ASCII classes, no ``\\w``, ``\\d`` or ``\\b``), and a test checks both give the
same text.

A signature is ``"<error_type>: <masked error>"`` (either part may be
missing; both missing reads :data:`NO_REASON`), and its id is the first 12
hex digits of the SHA-1 of that text in UTF-8.
"""

from __future__ import annotations

import hashlib
import re

#: (pattern, replacement), applied in this order
MASKS: tuple[tuple[str, str], ...] = (
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
ID_LENGTH = 12
_COMPILED = tuple((re.compile(pattern), replacement) for pattern, replacement in MASKS)


def mask_error(text: str | None) -> str:
    """Return an error text with numbers, ids, hex, quoted values, paths, IPs, URLs and e-mails masked."""
    masked = text or ""
    for pattern, replacement in _COMPILED:
        masked = pattern.sub(replacement, masked)
    return masked.strip(" ")[:MAX_LENGTH]


def signature(error_type: str | None, error: str | None) -> str:
    """Return the signature text of one failure."""
    kind = (error_type or "").strip(" ")
    parts = [p for p in (kind, mask_error(error)) if p]
    return ": ".join(parts) if parts else NO_REASON


def signature_id(text: str) -> str:
    """Return the short stable id of a signature text."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:ID_LENGTH]


def failure_signature_id(error_type: str | None, error: str | None) -> str:
    """Return the signature id of one failure (what a redrive filter by signature compares)."""
    return signature_id(signature(error_type, error))
