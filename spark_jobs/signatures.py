"""Failure signatures for the report: the one implementation is :mod:`zaqar_lite.claims.signatures`.

The redrive filter ``signature`` and the report must compute the same ids,
so both use that module; it is re-exported here under its old name.
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

__all__ = ["ID_LENGTH", "MASKS", "MAX_LENGTH", "NO_REASON", "failure_signature_id", "mask_error",
           "signature", "signature_id"]
