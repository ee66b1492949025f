"""SQS names in zaqar-lite's terms: accounts, queue URLs and ARNs, receipt and task handles, page tokens.

An SQS account is a zaqar-lite project; a queue's URL is
``<base URL>/<account>/<name>`` and its ARN ``arn:aws:sqs:<region>:<account>:<name>``.
A receipt handle is a claim: it names the queue, the message and the claim
that took it. A message-move task handle names a redrive task of a queue.
Handles and page tokens are URL-safe base64 of text, opaque to clients.
"""

from __future__ import annotations

import base64
import binascii
import re
import urllib.parse

from zaqar_lite.errors import SqsRefused
from zaqar_lite.rules.sqs import invalid_parameter

#: an SQS queue name: letters, digits, ``-`` and ``_``, 1 to 80, a FIFO queue's ending in ``.fifo``
QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
FIFO_SUFFIX = ".fifo"
#: an AWS account id, as a 12-digit access key id names one under noauth
ACCOUNT_ID = re.compile(r"\d{12}")
#: the credential of a Signature Version 4 ``Authorization`` header (or ``X-Amz-Credential``)
CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/([^/,\s]+)/aws4_request")
ARN = re.compile(r"arn:aws[a-z-]*:sqs:([^:]*):([^:]+):([^:]+)")
#: an AWS region's name (us-east-1, eu-central-1, us-gov-west-1, ...)
REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}")
#: the first path segment of a queue URL that names its region: ``/queue/<region>/<account>/<name>``
REGION_PATH = "queue"
#: what separates the parts of a handle before its encoding (no queue name, id or account holds it)
_SEPARATOR = " "


def is_fifo(name: str) -> bool:
    """Return whether a queue name is a FIFO queue's (ends in ``.fifo``)."""
    return name.endswith(FIFO_SUFFIX)


def check_queue_name(name: object, fifo: bool) -> str:
    """Return a queue name a CreateQueue may use.

    Raises:
        SqsRefused: the name breaks SQS's rule, or a FIFO queue's name does not
            end in ``.fifo`` (or a standard queue's does).
    """
    if not isinstance(name, str):
        raise SqsRefused("MissingParameter", "The request must contain the parameter QueueName.")
    stem = name[:-len(FIFO_SUFFIX)] if is_fifo(name) else name
    if not QUEUE_NAME.fullmatch(stem) or len(name) > 80:
        raise invalid_parameter("Can only include alphanumeric characters, hyphens, or underscores. "
                                "1 to 80 in length")
    if fifo != is_fifo(name):
        raise invalid_parameter("The name of a FIFO queue can only include alphanumeric characters, "
                                "hyphens, or underscores, must end with .fifo suffix. 1 to 80 in length"
                                if fifo else "Can only include alphanumeric characters, hyphens, or "
                                "underscores. 1 to 80 in length")
    return name


def access_key_of(authorization: str | None, credential: str | None) -> tuple[str, str | None] | None:
    """Return ``(access key id, region)`` a request is signed with, or None when unsigned.

    Args:
        authorization: the ``Authorization`` header (Signature Version 4, or
            version 2's ``AWS key:signature``).
        credential: the ``X-Amz-Credential`` (or ``AWSAccessKeyId``) query parameter.
    """
    if authorization:
        found = CREDENTIAL.search(authorization)
        if found:
            return found.group(1), found.group(3)
        if authorization.startswith("AWS ") and ":" in authorization:
            return authorization[4:].split(":", 1)[0].strip(), None
    if credential:
        key, _, rest = credential.partition("/")
        parts = rest.split("/")
        return key, parts[1] if len(parts) > 1 else None
    return None


def noauth_account(access_key: str | None, default_account: str) -> str:
    """Return the account a request acts for under noauth: a 12-digit access key id, else the default."""
    if access_key is not None and ACCOUNT_ID.fullmatch(access_key):
        return access_key
    return default_account


def project_of(account: str, region: str, home_region: str) -> str:
    """Return the project holding an account's queues of a region.

    The home region's (``[sqs] region``) are the account's own project; another
    region's are ``<account>.<region>``, so that a queue name is one queue per
    account and region, as in SQS (docs/api.rst, "SQS-compatible endpoint").
    """
    return account if region == home_region else f"{account}.{region}"


def place_of(project: str, home_region: str) -> tuple[str, str]:
    """Return ``(account, region)`` of a project :func:`project_of` names."""
    account, _, region = project.rpartition(".")
    if account and REGION.fullmatch(region) and region != home_region:
        return account, region
    return project, home_region


def queue_url(base_url: str, account: str, name: str, region: str | None = None) -> str:
    """Return a queue's URL: ``<base URL>/<account>/<name>``; a queue of another region than the
    home region's (``region`` given) is at ``<base URL>/queue/<region>/<account>/<name>``."""
    if region is not None:
        return f"{base_url.rstrip('/')}/{REGION_PATH}/{region}/{account}/{name}"
    return f"{base_url.rstrip('/')}/{account}/{name}"


def queue_arn(region: str, account: str, name: str) -> str:
    """Return a queue's ARN: ``arn:aws:sqs:<region>:<account>:<name>``."""
    return f"arn:aws:sqs:{region}:{account}:{name}"


def parse_queue_url(url: object) -> tuple[str, str]:
    """Return ``(account, name)`` of a queue URL (see :func:`locate_queue`)."""
    return locate_queue(url)[1:]


def locate_queue(url: object) -> tuple[str | None, str, str]:
    """Return ``(region, account, name)`` of a queue URL (any host: the path names the queue); a bare
    queue name has account "" (the caller's), and only ``/queue/<region>/...`` names a region.

    Raises:
        SqsRefused: ``InvalidAddress``, the URL is no queue URL; ``QueueDoesNotExist``, it has no
            path; ``MissingParameter`` without one.
    """
    if not isinstance(url, str) or not url:
        raise SqsRefused("MissingParameter", "The request must contain the parameter QueueUrl.")
    path = urllib.parse.urlsplit(url).path if "://" in url else url
    parts = [part for part in path.split("/") if part]
    if "://" not in url and len(parts) == 1:  # a queue's name: the caller's own account's queue
        return None, "", parts[0]
    if not parts:  # a host alone names no queue there is (as SQS answers)
        raise SqsRefused("QueueDoesNotExist", "The specified queue does not exist.")
    if len(parts) == 4 and parts[0] == REGION_PATH and REGION.fullmatch(parts[1]):
        return parts[1], parts[2], parts[3]
    if len(parts) != 2:
        raise SqsRefused("InvalidAddress", "The address " + ("given" if len(url) > 256 else url)
                         + " is not valid for this endpoint.")
    return None, parts[0], parts[1]


def parse_arn(arn: object, parameter: str) -> tuple[str, str, str]:
    """Return ``(region, account, name)`` of a queue ARN.

    Raises:
        SqsRefused: ``InvalidParameterValue`` naming the parameter.
    """
    found = ARN.fullmatch(arn) if isinstance(arn, str) else None
    if found is None:
        raise invalid_parameter(f"Value for parameter {parameter} is invalid. Reason: it is not a queue ARN "
                                "(arn:aws:sqs:<region>:<account>:<name>).")
    return found.group(1), found.group(2), found.group(3)


def _encode(*parts: str) -> str:
    return base64.urlsafe_b64encode(_SEPARATOR.join(parts).encode()).decode().rstrip("=")


def _decode(handle: object, count: int) -> list[str] | None:
    if not isinstance(handle, str) or not handle or len(handle) > 1024:
        return None
    try:
        text = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode()
    except (binascii.Error, ValueError):
        return None
    parts = text.split(_SEPARATOR)
    return parts if len(parts) == count and all(parts) else None


def receipt_handle(queue: str, message_id: str, claim_id: str) -> str:
    """Return the receipt handle of a message a claim took: the queue, the message and the claim."""
    return _encode(queue, message_id, claim_id)


def parse_receipt_handle(handle: object, queue: str) -> tuple[str, str]:
    """Return ``(message id, claim id)`` of a receipt handle of ``queue``.

    Raises:
        SqsRefused: ``ReceiptHandleIsInvalid``: not a handle, or another queue's.
    """
    parts = _decode(handle, 3)
    if parts is None or parts[0] != queue:
        shown = handle if isinstance(handle, str) and len(handle) <= 256 else "given"
        raise SqsRefused("ReceiptHandleIsInvalid", f'The input receipt handle "{shown}" is not a valid '
                         "receipt handle.")
    return parts[1], parts[2]


def task_handle(account: str, region: str, queue: str, task_id: str) -> str:
    """Return the handle of a message-move task: the redrive task ``task_id`` of ``queue``."""
    return _encode(account, region, queue, task_id)


def parse_task_handle(handle: object) -> tuple[str, str, str, str]:
    """Return ``(account, region, queue, task id)`` of a message-move task handle.

    Raises:
        SqsRefused: ``ResourceNotFoundException``: not a task handle.
    """
    parts = _decode(handle, 4)
    if parts is None:
        raise SqsRefused("ResourceNotFoundException", "Task does not exist.")
    return parts[0], parts[1], parts[2], parts[3]


def page_token(last_name: str) -> str:
    """Return the ``NextToken`` of a queue listing that ended at ``last_name``."""
    return _encode("queues", last_name)


def parse_page_token(token: object) -> str:
    """Return the queue name a listing's ``NextToken`` continues after.

    Raises:
        SqsRefused: ``InvalidParameterValue``: not a token this endpoint gave.
    """
    parts = _decode(token, 2)
    if parts is None or parts[0] != "queues":
        raise invalid_parameter("Invalid NextToken value.")
    return parts[1]
