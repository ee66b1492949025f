"""Checks every API request passes before it reaches a resource (SPEC 1.1, 1.9)."""

from __future__ import annotations

from typing import Any

import falcon

from zaqar_lite import errors
from zaqar_lite.api import PROJECT_ENVIRON, inputs
from zaqar_lite.config import Limits, Settings

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def is_public(resource: object) -> bool:
    """Return whether a resource answers without headers or credentials (only ``GET /``)."""
    return getattr(resource, "public", False) is True


class RequestContext:
    """Sets ``req.context.project``, ``client_id`` and ``role`` or rejects the request.

    The checks run on the resource falcon routed the request to, whatever the
    path looked like (``//v2/queues`` reaches the same resource as
    ``/v2/queues``), so no spelling of a path can skip them: every resource but
    the public versions document gets a checked context or is never called.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object,
                         params: dict[str, Any]) -> None:
        """Validate headers, content negotiation and credentials before a resource is called."""
        if resource is None or is_public(resource):
            return
        if not req.client_accepts_json:
            raise falcon.HTTPNotAcceptable(description="This API only answers application/json.")
        if req.content_type and req.content_type.split(";")[0].strip().lower() in FORM_TYPES:
            raise errors.InvalidBody("Form-encoded bodies are not accepted; send JSON.")
        req.context.client_id = inputs.client_id(req.get_header("Client-ID"), self.settings)
        header_project = req.get_header("X-Project-ID")
        if self.settings.auth_strategy == "token":
            token = req.get_header("X-Auth-Token")
            if not token or token not in self.settings.tokens:
                raise errors.Unauthorized("A valid X-Auth-Token header is required.")
            project, role = self.settings.tokens[token]
            if header_project is not None and header_project != project:
                raise errors.Forbidden("X-Project-ID does not match the project of the token.")
            req.context.project, req.context.role = project, role
        else:
            req.context.project = inputs.project_id(header_project, self.settings.limits)
            req.context.role = "admin"
        req.env[PROJECT_ENVIRON] = req.context.project


class QueueNameCheck:
    """Refuses a route whose ``{queue}`` field is not a valid queue name (400), in one place.

    It runs after :class:`RequestContext` (headers and credentials first, as
    before) and only when the resource has a responder for the method: a
    method the route does not serve still gets falcon's 405, and ``OPTIONS``
    its ``Allow`` list.
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: object,
                         params: dict[str, Any]) -> None:
        """Check ``params["queue"]`` before the responder is called."""
        queue = params.get("queue")
        if queue is None or not callable(getattr(resource, "on_" + req.method.lower(), None)):
            return
        inputs.queue_name(queue, self.limits)


def require_admin(req: falcon.Request) -> None:
    """Refuse a request whose credentials are not an admin's."""
    if getattr(req.context, "role", None) != "admin":
        raise errors.Forbidden("This resource needs the admin role.")
