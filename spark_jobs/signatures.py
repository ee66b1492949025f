"""Failure signatures for the report: the one implementation is :mod:`zaqar_lite.claims.signatures`.

The redrive filter ``signature`` and the report must compute the same ids,
so both use that module; it is re-exported here under its old name, with
:data:`MASK_NEEDLES`, what lets Spark skip a mask that cannot match.
"""

from __future__ import annotations

from zaqar_lite.claims.signatures import (
    ID_LENGTH,
    MASKS,
    MAX_LENGTH,
    NO_REASON,
    failure_signature_id,
    mask_error,
    signature,
    signature_id,
)

__all__ = ["ID_LENGTH", "MASKS", "MASK_NEEDLES", "MAX_LENGTH", "NO_REASON", "failure_signature_id",
           "mask_error", "signature", "signature_id"]

#: literal texts every match of a mask contains (any one of them): without one, the mask is skipped
MASK_NEEDLES: dict[str, tuple[str, ...]] = {
    r'"[^"]*"': ('"',),
    r"(?<![A-Za-z0-9])'[^']*'": ("'",),
    r"[A-Za-z][A-Za-z0-9+.-]*://[^ \t\n\x0B\f\r'\"<>]+": ("://",),
    r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+": ("@",),
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}": ("-",),
    r"(?<![0-9.])[0-9]{1,3}(\.[0-9]{1,3}){3}(:[0-9]{1,5})?(?![0-9.])": (".",),
    r"(?<![A-Za-z0-9_.<>/])(/[A-Za-z0-9_.~@%+-]+)+/?": ("/",),
    r"0[xX][0-9a-fA-F]+": ("0x", "0X"),
    # one space for one space changes nothing: only runs of spaces and other white space count
    r"[ \t\n\x0B\f\r]+": ("  ", "\t", "\n", "\x0b", "\f", "\r"),
}
