"""Keystone tokens: keystonemiddleware's ``auth_token`` validates them in front of the app.

Under ``[auth] strategy = keystone`` the server's WSGI app is wrapped in
``auth_token``, configured by ``[keystone_authtoken]`` as written. It strips
the identity headers from every incoming request and sets them again only from
a token Keystone confirmed, so a client cannot name its own project or roles;
:func:`credentials` reads them in the API's one credential check
(``api/middleware.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

from zaqar_lite import errors

#: a WSGI application, as gunicorn calls it
WsgiCallable: TypeAlias = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

#: the headers ``auth_token`` sets from a validated token, and removes from every request it gets
IDENTITY_HEADERS = ("X-Identity-Status", "X-Project-Id", "X-Roles")
#: the WSGI environ key holding the ``X-Project-ID`` the client sent: ``auth_token`` replaces
#: that header (it is its ``X-Project-Id``) with the token's project, and a client cannot set
#: an environ key that is not an ``HTTP_`` one
NAMED_PROJECT = "zaqar_lite.named_project"


def wrap(app: WsgiCallable, options: Mapping[str, str]) -> WsgiCallable:
    """Return ``app`` behind keystonemiddleware's ``auth_token``, configured by ``options``.

    The decision is always left to the app (``delay_auth_decision``): a request
    without a valid token then reaches :func:`credentials`, which answers the
    API's own 401 body, and the public versions document stays public.

    Raises:
        ValueError: keystonemiddleware is not installed (the ``keystone`` extra).
    """
    try:
        from keystonemiddleware import auth_token
    except ImportError:
        raise ValueError("[auth] strategy = keystone needs keystonemiddleware: "
                         "pip install 'zaqar-lite[keystone]'") from None
    conf = {**options, "delay_auth_decision": "true"}
    checked: WsgiCallable = auth_token.AuthProtocol(app, conf)

    def keep_named_project(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ[NAMED_PROJECT] = environ.get("HTTP_X_PROJECT_ID")
        return checked(environ, start_response)

    return keep_named_project


def credentials(identity: Mapping[str, str | None], project: str | None) -> tuple[str, str]:
    """Return the ``(project, role)`` of the token ``auth_token`` validated.

    Args:
        identity: the values of :data:`IDENTITY_HEADERS` in the request, and under
            :data:`NAMED_PROJECT` the ``X-Project-ID`` the client sent.
        project: the project the request names otherwise (the console's URL), if any.

    Raises:
        Unauthorized: no token, or one Keystone did not confirm (unknown, expired, revoked).
        Forbidden: the token is not scoped to a project, or ``project`` is another one.
    """
    if identity.get("X-Identity-Status") != "Confirmed":
        raise errors.Unauthorized("A valid Keystone token is required in the X-Auth-Token header.")
    token_project = identity.get("X-Project-Id")
    if not token_project:
        raise errors.Forbidden("The Keystone token is not scoped to a project.")
    project = identity.get(NAMED_PROJECT) or project
    if project is not None and project != token_project:
        raise errors.Forbidden("X-Project-ID does not match the project of the token.")
    roles = {role.strip().lower() for role in (identity.get("X-Roles") or "").split(",")}
    return token_project, "admin" if "admin" in roles else "member"
