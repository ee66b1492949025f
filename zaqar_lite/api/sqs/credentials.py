"""Who an SQS request acts for: the account its access key names, and (under auth) its signature checked.

Under ``noauth`` the access key id of the request's Signature Version 4
credential names the account (a 12-digit key is that account; any other key,
or none, is ``[sqs] default_account``) and the signature is not checked.
Under ``token`` or ``keystone`` auth the key must be one of ``[sqs]
credentials`` (``ACCESS_KEY:SECRET:PROJECT``): the request acts for its
project, and its signature is computed again with the secret by botocore's
own Signature Version 4 code (the ``sqs`` extra) and must match, within
``[sqs] max_clock_skew`` of the server's clock.
"""

from __future__ import annotations

import calendar
import hmac
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from zaqar_lite.config import Settings
from zaqar_lite.errors import SqsRefused
from zaqar_lite.rules.sqs import names as sqs_names

#: the signature of a Signature Version 4 ``Authorization`` header
_SIGNATURE = "Signature="
_SIGNED_HEADERS = "SignedHeaders="


def keys_of(settings: Settings) -> dict[str, tuple[str, str]]:
    """Return ``[sqs] credentials`` as access key id -> (secret, project).

    Loading the settings made sure botocore, which checks the signatures, is
    installed when they are to be checked (the ``sqs`` extra).
    """
    found = {}
    for entry in settings.sqs.credentials:
        key, secret, project = entry.split(":")
        found[key.strip()] = (secret.strip(), project.strip())
    return found


def _field(authorization: str, name: str) -> str:
    for part in authorization[len("AWS4-HMAC-SHA256"):].split(","):
        part = part.strip()
        if part.startswith(name):
            return part[len(name):]
    return ""


def _amz_time(value: str) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(value, "%Y%m%dT%H%M%SZ")))
    except (TypeError, ValueError):
        return None


def check_signature(method: str, url: str, headers: Mapping[str, str], body: bytes,
                    query: Mapping[str, str], secret: str, key: str, region: str, service: str,
                    now: float, max_skew: int) -> None:
    """Check a Signature Version 4 request (header or query string) against the secret of its key.

    Args:
        headers: the request's headers by lower-case name.
        query: the query string's parameters (a pre-signed URL carries its signature there).

    Raises:
        SqsRefused: ``IncompleteSignature``, ``RequestExpired`` or ``SignatureDoesNotMatch``.
    """
    from botocore.auth import SigV4Auth  # type: ignore[import-untyped]  # checked at start (keys_of)
    from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
    from botocore.credentials import Credentials  # type: ignore[import-untyped]

    authorization = headers.get("authorization", "")
    if authorization.startswith("AWS4-HMAC-SHA256"):
        signature, signed = _field(authorization, _SIGNATURE), _field(authorization, _SIGNED_HEADERS)
        stamp = headers.get("x-amz-date", "")
        presigned = False
    else:
        signature, signed = query.get("X-Amz-Signature", ""), query.get("X-Amz-SignedHeaders", "")
        stamp = query.get("X-Amz-Date", "")
        presigned = True
    if not signature or not signed or not stamp:
        raise SqsRefused("IncompleteSignature", "The request signature does not conform to AWS standards.")
    at = _amz_time(stamp)
    if at is None or abs(now - at) > max_skew:
        raise SqsRefused("RequestExpired" if at is not None else "IncompleteSignature",
                         f"Signature expired: {stamp} is not within {max_skew} seconds of the server's time.")
    names = [name for name in signed.split(";") if name]
    kept = {name: headers.get(name, "") for name in names}
    if presigned:
        parts = urllib.parse.urlsplit(url)
        pairs = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
                 if k != "X-Amz-Signature"]
        url = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(pairs)))
    request = AWSRequest(method=method, url=url, data=body, headers=kept)
    request.context["timestamp"] = stamp
    auth = SigV4Auth(Credentials(key, secret), service, region)
    if presigned:
        request.context["payload_signing_enabled"] = False
        canonical = _presigned_canonical(auth, request)
    else:
        canonical = auth.canonical_request(request)
    expected = auth.signature(auth.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected, signature):
        raise SqsRefused("SignatureDoesNotMatch", "The request signature we calculated does not match the "
                         "signature you provided. Check your AWS Secret Access Key and signing method.")


def _presigned_canonical(auth: Any, request: Any) -> str:
    """Return the canonical request of a pre-signed URL (its payload is not signed)."""
    lines = [request.method.upper(), auth._normalize_url_path(urllib.parse.urlsplit(request.url).path),
             auth.canonical_query_string(request),
             auth.canonical_headers(auth.headers_to_sign(request)) + "\n",
             auth.signed_headers(auth.headers_to_sign(request)), "UNSIGNED-PAYLOAD"]
    return "\n".join(lines)


def account_of(settings: Settings, access_key: str | None, keys: Mapping[str, tuple[str, str]]
               ) -> tuple[str, str | None]:
    """Return ``(account, secret)`` of a request's access key: the secret to check its signature with,
    None under noauth (nothing is checked).

    Raises:
        SqsRefused: under auth, no key (``MissingAuthenticationToken``) or an
            unknown one (``InvalidClientTokenId``).
    """
    if settings.auth_strategy == "noauth":
        return sqs_names.noauth_account(access_key, settings.sqs.default_account), None
    if not access_key:
        raise SqsRefused("MissingAuthenticationToken", "Request is missing Authentication Token")
    found = keys.get(access_key)
    if found is None:
        raise SqsRefused("InvalidClientTokenId", "The security token included in the request is invalid.")
    secret, project = found
    return project, secret
