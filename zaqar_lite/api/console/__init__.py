"""The operators' web console: HTML pages at ``/console``, served only when ``[console] enabled``.

It is not part of the v2 API (and not in ``docs/openapi.yaml``): its routes
are added by ``create_app`` (each worker's app) beside the API's when enabled, and without them
every ``/console`` path is the API's 404. How it authenticates (the project in
the URL, the token in an HttpOnly cookie) and refuses forged forms is written
in ``api/middleware.py`` and :mod:`zaqar_lite.api.console.forms`.
"""

from __future__ import annotations

from typing import Any

import falcon

from zaqar_lite.api.console import pages
from zaqar_lite.api.middleware import is_console
from zaqar_lite.service import Messaging

#: what every console answer carries: no scripts, no framing, nothing cached, no referrer to other sites
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; style-src 'self'; form-action 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # same-origin, not no-referrer: under no-referrer a browser posts forms with "Origin: null"
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def routes(messaging: Messaging) -> list[tuple[str, object]]:
    """Return the console's route table: every URI template with its page."""
    project = "/console/projects/{project}/queues"
    return [
        ("/console", pages.Home(messaging)),
        ("/console/login", pages.Login(messaging)),
        ("/console/logout", pages.Logout(messaging)),
        ("/console/console.css", pages.StyleSheet()),
        (project, pages.QueueList(messaging)),
        (project + "/{queue}", pages.QueuePage(messaging)),
        (project + "/{queue}/pause", pages.QueuePause(messaging)),
        (project + "/{queue}/redrive", pages.Redrive(messaging)),
        (project + "/{queue}/redrive/tasks", pages.RedriveTaskStart(messaging)),
        (project + "/{queue}/redrive/tasks/{task_id}/cancel", pages.RedriveTaskCancel(messaging)),
    ]


def under_console(req: falcon.Request, resource: object) -> bool:
    """Return whether a request is the console's: routed to a page, or an unknown path under it."""
    if resource is not None:
        return is_console(resource)
    return req.path.lstrip("/").split("/")[0] == "console"


class ConsolePages:
    """Makes every console answer an HTML page with the console's security headers.

    Errors are raised and mapped to HTTP exactly as the API's (``api/errors.py``);
    this turns their JSON body into a page saying the same, so a browser shows
    the title and the description, escaped.
    """

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource: object,
                         req_succeeded: bool) -> None:
        """Add the headers, and render an error's JSON body as an HTML page."""
        if not under_console(req, resource):
            return
        resp.set_headers(SECURITY_HEADERS)
        body: Any = resp.media if resp.text is None else None
        if isinstance(body, dict) and "title" in body:
            resp.content_type = falcon.MEDIA_HTML
            resp.text = pages.TEMPLATES.get_template("error.html").render(
                status=resp.status_code, title=body["title"], description=body.get("description", ""),
                login=resp.status_code == 401, signed_in=False)
