"""Domain errors to HTTP errors, in one place, plus the catch-all for the unexpected."""

from __future__ import annotations

import logging
from typing import Any

import falcon

from zaqar_lite import errors

LOG = logging.getLogger(__name__)

UNAVAILABLE = "Service temporarily unavailable"
UNAVAILABLE_TEXT = "The storage backend cannot be reached. Please try again in a few seconds."

#: domain error class -> (HTTP status, title); the first match in MRO order wins
MAPPING: dict[type[errors.ZaqarLiteError], tuple[str, str]] = {
    errors.InvalidBody: (falcon.HTTP_400, "Invalid request body"),
    errors.ValidationFailed: (falcon.HTTP_400, "Invalid API request"),
    errors.NotFound: (falcon.HTTP_404, "Not found"),
    errors.Conflict: (falcon.HTTP_409, "Resource conflict"),
    errors.MessageIsClaimed: (falcon.HTTP_403, "Message is claimed"),
    errors.MessageIsClaimedBy: (falcon.HTTP_403, "Message is claimed by another claim"),
    errors.InvalidClaim: (falcon.HTTP_400, "Invalid claim"),
    errors.MessageNotClaimed: (falcon.HTTP_400, "Message is not claimed"),
    errors.StorageUnavailable: (falcon.HTTP_503, UNAVAILABLE),
    # the server's keys, not the request, are at fault, and an operator can mend them: 503, no Retry-After
    errors.MessageUnreadable: (falcon.HTTP_503, "Message cannot be decrypted"),
    errors.EncryptionUnavailable: (falcon.HTTP_503, "Encryption is not configured"),
    errors.Unauthorized: (falcon.HTTP_401, "Unauthorized"),
    errors.QueueLimitReached: (falcon.HTTP_403, "Queue limit reached"),
    errors.Forbidden: (falcon.HTTP_403, "Forbidden"),
}

#: titles for falcon's own errors (unknown route, wrong method, ...)
STATUS_TITLES = {
    400: "Invalid API request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found",
    405: "Method not allowed", 406: "Not acceptable", 409: "Resource conflict",
    411: "Length required", 413: "Request body too large", 415: "Unsupported media type",
    500: "Internal server error", 503: UNAVAILABLE,
}


def to_http(exc: errors.ZaqarLiteError) -> falcon.HTTPError:
    """Return the HTTP error a domain error stands for."""
    for cls in type(exc).__mro__:
        if cls in MAPPING:
            status, title = MAPPING[cls]
            break
    else:
        status, title = falcon.HTTP_500, STATUS_TITLES[500]
    description = UNAVAILABLE_TEXT if isinstance(exc, errors.StorageUnavailable) else str(exc)
    if isinstance(exc, errors.StorageUnavailable):
        LOG.warning("storage unavailable: %s", exc)
        return falcon.HTTPServiceUnavailable(title=title, description=description, retry_after=1)
    return falcon.HTTPError(status, title=title, description=description)


def handle_domain_error(req: falcon.Request, resp: falcon.Response, exc: errors.ZaqarLiteError,
                        params: dict[str, Any]) -> None:
    """Falcon error handler for every domain error."""
    handle_http_error(req, resp, to_http(exc), params)


def handle_http_error(req: falcon.Request, resp: falcon.Response, exc: falcon.HTTPError,
                      params: dict[str, Any]) -> None:
    """Serialise falcon's own errors with readable titles and a description."""
    code = exc.status_code
    title = exc.title
    if not title or title.startswith(str(code)):
        title = STATUS_TITLES.get(code, title or str(code))
    body = {"title": title, "description": exc.description or title}
    resp.status = exc.status
    resp.media = body
    if exc.headers:
        resp.set_headers(exc.headers)


def handle_unexpected(req: falcon.Request, resp: falcon.Response, exc: Exception,
                      params: dict[str, Any]) -> None:
    """Log an unexpected exception with its traceback; the client sees a plain 500."""
    LOG.exception("unexpected error in %s %s", req.method, req.path)
    resp.status = falcon.HTTP_500
    resp.media = {"title": STATUS_TITLES[500],
                  "description": "An unexpected error occurred; it has been logged."}
