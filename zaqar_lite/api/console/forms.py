"""The console's forms: reading a posted form, its cookies, and the check that no other site forged it.

Forgery (CSRF) is refused twice over, with no state on the server (any
worker of any machine checks any form):

- a *double-submit token*: every page sets a random token in a cookie
  (``HttpOnly``, ``SameSite=Strict``, ``Path=/console``) and writes the same
  token into its forms; a post whose field does not equal its cookie is
  refused. Another site can neither read the cookie nor, being cross-site,
  have the browser send it (``SameSite=Strict``);
- the browser's own word: a post whose ``Origin`` is not this server's
  ``Host``, or whose ``Sec-Fetch-Site`` says another site sent it, is
  refused before anything else is read.
"""

from __future__ import annotations

import hmac
import re
import secrets
import urllib.parse

import falcon

from zaqar_lite import errors
from zaqar_lite.api.bodies import refuse_oversized

CSRF_COOKIE = "zaqar_console_csrf"
CSRF_FIELD = "csrf_token"
#: every console cookie is sent to the console's pages only
COOKIE_PATH = "/console"
FORM_TYPE = "application/x-www-form-urlencoded"
#: ``Sec-Fetch-Site`` of a request a page of this server sent, or one the user typed
SAME_SITE_FETCHES = ("same-origin", "none")
#: what :func:`secrets.token_urlsafe` (32 bytes) makes
CSRF_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")
FORGED = ("This form did not come from a page of this console (its CSRF token or origin is wrong); "
          "reload the page.")


def read_form(req: falcon.Request, max_size: int, max_fields: int) -> dict[str, list[str]]:
    """Read a posted ``application/x-www-form-urlencoded`` form: each field with its values.

    Raises:
        falcon.HTTPUnsupportedMediaType: the body is not such a form.
        InvalidBody: it is larger than ``max_size`` bytes, has more than
            ``max_fields`` fields, or is not UTF-8.
    """
    if (req.content_type or "").split(";")[0].strip().lower() != FORM_TYPE:
        raise falcon.HTTPUnsupportedMediaType(description=f"Console forms are posted as {FORM_TYPE}.")
    if req.content_length is not None and req.content_length > max_size:
        refuse_oversized(req.bounded_stream, max_size)
    raw = req.bounded_stream.read(max_size + 1)
    if len(raw) > max_size:
        refuse_oversized(req.bounded_stream, max_size)
    try:
        return urllib.parse.parse_qs(raw.decode("utf-8"), max_num_fields=max_fields,
                                     errors="strict")
    except UnicodeDecodeError:
        raise errors.InvalidBody("A console form must be UTF-8.") from None
    except ValueError:
        raise errors.InvalidBody(f"A console form may not have more than {max_fields} fields.") from None


def one_value(form: dict[str, list[str]], name: str) -> str | None:
    """Return the one value of a form field, None when it is absent or empty.

    Raises:
        ValidationFailed: the field was sent more than once.
    """
    values = form.get(name, [])
    if len(values) > 1:
        raise errors.ValidationFailed(f"The form field {name} may be sent once only.")
    return values[0] if values and values[0] else None


def set_cookie(req: falcon.Request, resp: falcon.Response, name: str, value: str) -> None:
    """Set a console cookie: HttpOnly, SameSite=Strict, the console's path, Secure over HTTPS."""
    resp.set_cookie(name, value, path=COOKIE_PATH, http_only=True, same_site="Strict",
                    secure=req.forwarded_scheme == "https")


def csrf_token(req: falcon.Request, resp: falcon.Response) -> str:
    """Return the token a page writes into its forms: the browser's, or a new one set in its cookie."""
    values = req.get_cookie_values(CSRF_COOKIE) or []
    if values and CSRF_TOKEN.fullmatch(values[0]):
        return values[0]
    token = secrets.token_urlsafe(32)
    set_cookie(req, resp, CSRF_COOKIE, token)
    return token


def check_same_site(req: falcon.Request) -> None:
    """Refuse a post the browser says another site sent (403), before its body is read.

    Raises:
        Forbidden: ``Sec-Fetch-Site`` names another site, or ``Origin`` is not
            this server (``null`` included).
    """
    fetch_site = req.get_header("Sec-Fetch-Site")
    if fetch_site is not None and fetch_site.lower() not in SAME_SITE_FETCHES:
        raise errors.Forbidden(FORGED)
    origin = req.get_header("Origin")
    if origin is not None and urllib.parse.urlsplit(origin).netloc != req.get_header("Host"):
        raise errors.Forbidden(FORGED)


def check_form_token(req: falcon.Request, form: dict[str, list[str]]) -> None:
    """Refuse a posted form whose token is missing or differs from the cookie's (403).

    Raises:
        Forbidden: no valid token cookie, no or several ``csrf_token`` fields,
            or one that is not the cookie's.
    """
    cookie = (req.get_cookie_values(CSRF_COOKIE) or [""])[0]
    field = form.get(CSRF_FIELD, [""])
    if len(field) != 1 or not CSRF_TOKEN.fullmatch(cookie) \
            or not hmac.compare_digest(cookie.encode(), field[0].encode()):
        raise errors.Forbidden(FORGED)
