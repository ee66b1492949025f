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
    SCHEME,
    failure_signature_id,
    mask_error,
    signature,
    signature_id,
)

__all__ = ["ID_LENGTH", "MASKS", "MASK_NEEDLES", "MAX_LENGTH", "NO_REASON", "SCHEME", "failure_signature_id",
           "mask_error", "signature", "signature_id"]

#: literal texts every match of a mask contains (any one of them): without one, the mask is skipped
MASK_NEEDLES: dict[str, tuple[str, ...]] = {
    # MASKS[0], the variable parts, has no needle; one space for one space changes nothing:
    # only runs of spaces and other white space count
    MASKS[1][0]: ("  ", "\t", "\n", "\x0b", "\f", "\r"),
}
