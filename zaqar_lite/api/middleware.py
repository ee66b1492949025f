"""Checks every API request passes before it reaches a resource.

docs/api.rst, "Headers" and "Authentication".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import falcon

from zaqar_lite import errors
from zaqar_lite.api import PROJECT_ENVIRON, inputs, keystone
from zaqar_lite.clock import Clock, wall_clock
from zaqar_lite.config import Limits, Settings
from zaqar_lite.rules import signed_urls

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
#: the cookie holding the console's session id under token auth (HttpOnly, SameSite=Strict,
#: Path=/console); the token itself stays in the store (``Messaging.open_console_session``)
CONSOLE_SESSION_COOKIE = "zaqar_console_session"
#: what a session id looks like (:func:`secrets.token_urlsafe` of 32 bytes); any other cookie
#: value is no session, and is never looked up
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{43}")


def is_public(resource: object) -> bool:
    """Return whether a resource answers without headers or credentials (only ``GET /``)."""
    return getattr(resource, "public", False) is True


def is_console(resource: object) -> bool:
    """Return whether a resource is a page of the operators' console (HTML, not the API)."""
    return getattr(resource, "console", False) is True


def console_session(req: falcon.Request) -> str | None:
    """Return the session id of the console's login cookie, if the request carries a well-formed one."""
    values = req.get_cookie_values(CONSOLE_SESSION_COOKIE) or []
    return values[0] if values and SESSION_ID.fullmatch(values[0]) else None


def no_sessions(session_id: str) -> str | None:
    """Return None: the session lookup of an app without a console."""
    return None


def signed_request(req: falcon.Request, clock: Clock) -> signed_urls.SignedRequest | None:
    """Return what a request signed with a pre-signed URL presents; None without ``URL-Signature``."""
    signature = req.get_header("URL-Signature")
    if signature is None:
        return None
    return signed_urls.SignedRequest(
        signature=signature, expires=req.get_header("URL-Expires"), methods=req.get_header("URL-Methods"),
        paths=req.get_header("URL-Paths"), method=req.method, path=req.path, at=clock())


def credentials(settings: Settings, token: str | None, project: str | None,
                signed: signed_urls.SignedRequest | None = None,
                identity: Mapping[str, str | None] | None = None) -> tuple[str, str]:
    """Return the ``(project, role)`` a request acts as: the one check of the API and the console.

    A request signed with a pre-signed URL acts for the project it names
    (``X-Project-ID``, which the signature covers), as a member, whatever the
    strategy: the signature replaces the token. Otherwise, under token auth
    the token decides the project and the role, and a project named besides
    (``X-Project-ID``, or the console's URL) must be the token's; under keystone
    auth ``identity`` (the headers keystonemiddleware set from the token, see
    :mod:`zaqar_lite.api.keystone`) does; under noauth
    the named project is trusted, as an admin.

    Raises:
        Unauthorized: token auth, and the token is missing or unknown.
        Forbidden: the named project is not the token's; or the signed request
            is not allowed (``rules.signed_urls.authorise`` says why).
        ValidationFailed: noauth or a signed request, and the project is missing or malformed.
    """
    if signed is not None:
        if settings.auth_strategy == "keystone":  # keystonemiddleware strips X-Project-Id
            project = (identity or {}).get(keystone.NAMED_PROJECT)
        named = inputs.project_id(project, settings.limits)
        signed_urls.authorise(settings.signed_url_secret_key, signed, named, settings.signed_url_max_lifetime)
        return named, "member"
    if settings.auth_strategy == "keystone":
        return keystone.credentials(identity or {}, project)
    if settings.auth_strategy == "token":
        if not token or token not in settings.tokens:
            raise errors.Unauthorized("A valid X-Auth-Token header is required.")
        token_project, role = settings.tokens[token]
        if project is not None and project != token_project:
            raise errors.Forbidden("X-Project-ID does not match the project of the token.")
        return token_project, role
    return inputs.project_id(project, settings.limits), "admin"


def console_project(project: str, limits: Limits) -> str:
    """Check a project named in a console URL or its chooser, by the rules of ``X-Project-ID``.

    Raises:
        ValidationFailed: the project breaks one of them (the message says which).
    """
    try:
        return inputs.project_id(project, limits)
    except errors.ValidationFailed as exc:
        raise errors.ValidationFailed(f"The project is not a valid project id, which follows the rules "
                                      f"of the X-Project-ID header: {exc}") from None


def identity(req: falcon.Request) -> dict[str, str | None]:
    """Return the identity headers keystonemiddleware set (it strips any a client sent), and the
    ``X-Project-ID`` the client sent (:data:`~zaqar_lite.api.keystone.NAMED_PROJECT`)."""
    found = {name: req.get_header(name) for name in keystone.IDENTITY_HEADERS}
    return {**found, keystone.NAMED_PROJECT: req.env.get(keystone.NAMED_PROJECT)}


class RequestContext:
    """Sets ``req.context.project``, ``client_id`` and ``role`` or rejects the request.

    The checks run on the resource falcon routed the request to, whatever the
    path looked like (``//v2/queues`` reaches the same resource as
    ``/v2/queues``), so no spelling of a path can skip them: every resource but
    the public versions document gets a checked context or is never called.
    """

    def __init__(self, settings: Settings, clock: Clock = wall_clock,
                 session_token: Callable[[str], str | None] = no_sessions) -> None:
        self.settings = settings
        self.clock = clock
        #: the token of an open console session (``Messaging.console_session_token``), else None
        self.session_token = session_token
        #: resource class -> whether its resources are public, and whether they are console pages
        self._kinds: dict[type, tuple[bool, bool]] = {}

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object,
                         params: dict[str, Any]) -> None:
        """Validate headers, content negotiation and credentials before a resource is called."""
        if resource is None:
            return
        kind = self._kinds.get(type(resource))
        if kind is None:  # found once per resource class
            kind = self._kinds[type(resource)] = is_public(resource), is_console(resource)
        public, console = kind
        if public:
            return
        if console:
            self.console_context(req, params)
            return
        env = req.env
        accept = env.get("HTTP_ACCEPT")
        if accept and accept != "*/*" and not req.client_accepts_json:
            raise falcon.HTTPNotAcceptable(description="This API only answers application/json.")
        content_type = env.get("CONTENT_TYPE")
        if content_type and content_type.split(";")[0].strip().lower() in FORM_TYPES:
            raise errors.InvalidBody("Form-encoded bodies are not accepted; send JSON.")
        settings = self.settings
        req.context.client_id = inputs.client_id(env.get("HTTP_CLIENT_ID"), settings)
        # only keystone auth reads the identity headers, and only a signed request its
        # signature: no request pays for them otherwise
        keystone_identity = identity(req) if settings.auth_strategy == "keystone" else None
        signed = signed_request(req, self.clock) if "HTTP_URL_SIGNATURE" in env else None
        req.context.project, req.context.role = credentials(
            settings, env.get("HTTP_X_AUTH_TOKEN"), env.get("HTTP_X_PROJECT_ID"), signed, keystone_identity)
        env[PROJECT_ENVIRON] = req.context.project

    def console_context(self, req: falcon.Request, params: dict[str, Any]) -> None:
        """Check a console page's credentials: the project of its URL, the token of its cookie.

        The console is a browser's, which cannot send ``X-Project-ID``: the
        project is the ``{project}`` of the page's URL, and under token auth
        the token is the one the console's session cookie opens in the store
        (or an ``X-Auth-Token`` header a proxy adds). They pass
        :func:`credentials`, as the API's headers do.
        Pages without a project (the front page, login, logout, the style
        sheet) act for nobody and check what they need themselves.
        """
        project = params.get("project")
        if project is None:
            return
        if self.settings.auth_strategy == "noauth":
            project = console_project(project, self.settings.limits)
        token = req.get_header("X-Auth-Token")
        session = console_session(req) if token is None and self.settings.auth_strategy == "token" else None
        if session is not None:
            token = self.session_token(session)
        req.context.project, req.context.role = credentials(self.settings, token, project,
                                                            identity=identity(req))
        req.env[PROJECT_ENVIRON] = req.context.project


class QueueNameCheck:
    """Refuses a route whose ``{queue}`` (or ``{topic}``) is not a valid queue name (400), in one place.

    It runs after :class:`RequestContext` (headers and credentials first, as
    before) and only when the resource has a responder for the method: a
    method the route does not serve still gets falcon's 405, and ``OPTIONS``
    its ``Allow`` list.
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        #: resource class -> the methods it has a responder for, found once per class
        self._served: dict[type, frozenset[str]] = {}
        #: checks a (name, kind): a name found valid is remembered (the 4,096 latest), as clients send
        #: the same few; an invalid one raises, and is checked again each time
        self._checked_name = functools.lru_cache(maxsize=4096)(self._check_name)

    def _check_name(self, name: str, kind: str) -> str:
        return inputs.queue_name(name, self.limits, kind)

    def served(self, resource: object) -> frozenset[str]:
        """Return the HTTP methods a resource has a responder (``on_<method>``) for."""
        found = self._served.get(type(resource))
        if found is None:
            found = self._served[type(resource)] = frozenset(
                method for method in falcon.constants.COMBINED_METHODS
                if callable(getattr(resource, "on_" + method.lower(), None)))
        return found

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object,
                         params: dict[str, Any]) -> None:
        """Check ``params["queue"]`` (or a topic's, ``params["topic"]``) before the responder is called."""
        if not params or req.method not in (self._served.get(type(resource)) or self.served(resource)):
            return
        queue, topic = params.get("queue"), params.get("topic")
        if queue is not None:
            self._checked_name(queue, "Queue")
        if topic is not None:
            self._checked_name(topic, "Topic")


def require_admin(req: falcon.Request) -> None:
    """Refuse a request whose credentials are not an admin's."""
    if getattr(req.context, "role", None) != "admin":
        raise errors.Forbidden("This resource needs the admin role.")


def require_operator(req: falcon.Request, settings: Settings) -> None:
    """Refuse a request to an operator's route (pools, flavors, queue templates) unless an admin's.

    Under noauth every caller is an admin, so these routes, which make the
    server open stores and shape every project's queues, answer 403 there
    unless ``[auth] noauth_admin_routes`` turns them on.
    """
    require_admin(req)
    if settings.auth_strategy == "noauth" and not settings.noauth_admin_routes:
        raise errors.Forbidden("The pools, flavors and queue templates routes are off under [auth] "
                               "strategy = noauth, where every caller is an admin: use token or keystone "
                               "auth, or set [auth] noauth_admin_routes = true where every caller is "
                               "trusted.")
