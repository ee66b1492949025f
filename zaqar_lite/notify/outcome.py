"""What one delivery attempt came to, whatever carried it (webhook or mail)."""

from __future__ import annotations

import dataclasses

MAX_ERROR_LENGTH = 500


@dataclasses.dataclass(frozen=True)
class Outcome:
    """Acknowledged (a 2xx answer, a mail accepted by the SMTP server), or an error text."""

    acknowledged: bool
    error: str | None = None


def failed(text: str) -> Outcome:
    """Return a failed outcome whose error text is cut to ``MAX_ERROR_LENGTH`` characters."""
    short = text if len(text) <= MAX_ERROR_LENGTH else text[:MAX_ERROR_LENGTH - 3] + "..."
    return Outcome(False, short)
