"""The pure rules of the SQS-compatible face (docs/api.rst, "SQS-compatible endpoint").

What an SQS name, attribute or handle means in zaqar-lite's terms, as values
in and values out: queue URLs, ARNs, accounts and the handles SQS hands out
(``names``), queue attributes and their place in queue metadata
(``attributes``), message bodies, message attributes and their MD5s as SQS
computes them (``messages``). The SQS face (``api/sqs/``) applies them over
the messaging service; no driver knows of SQS.
"""

from __future__ import annotations

from zaqar_lite.errors import SqsRefused


def invalid_parameter(message: str) -> SqsRefused:
    """Return SQS's ``InvalidParameterValue`` error with its message."""
    return SqsRefused("InvalidParameterValue", message)


def missing_parameter(name: str) -> SqsRefused:
    """Return SQS's ``MissingParameter`` error for a parameter the action needs."""
    return SqsRefused("MissingParameter", f"The request must contain the parameter {name}.")


#: the parameters whose bounds SQS words as ">= low and <= high" rather than "between low and high"
_WORDED_AS_COMPARISONS = ("WaitTimeSeconds",)


def whole_number(value: object, name: str, low: int, high: int) -> int:
    """Return a parameter as an integer within ``[low, high]`` (the query protocol sends text).

    Raises:
        SqsRefused: ``InvalidParameterValue`` naming the parameter and its bounds.
    """
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and len(value) <= 20 and value.strip().lstrip("-").isascii() \
            and value.strip().lstrip("-").isdigit():
        number = int(value)
    if number is None or not low <= number <= high:
        bounds = f">= {low} and <= {high}" if name in _WORDED_AS_COMPARISONS else f"between {low} and {high}"
        raise invalid_parameter(f"Value {value} for parameter {name} is invalid. Reason: Must be {bounds}, "
                                "if provided.")
    return number
