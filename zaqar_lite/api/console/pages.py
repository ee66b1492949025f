"""The console's pages: one resource per page, rendered on the server from the messaging service.

Every page is a :class:`ConsolePage`: ``RequestContext`` checks its
credentials as the API's (``api/middleware.py``), its ``{queue}`` passes the
API's queue-name check, and each page calls the service as the API's
resources do (never the store). Templates are Jinja2 with autoescaping, so
every value a page shows (a message body, an error text, a queue name) is
HTML-escaped.
"""

from __future__ import annotations

import importlib.resources
import json
import math
import urllib.parse
from typing import Any

import falcon
import jinja2

from zaqar_lite import errors
from zaqar_lite.api import schemas
from zaqar_lite.api.console import forms
from zaqar_lite.api.middleware import CONSOLE_SESSION_COOKIE, console_project, console_session, credentials
from zaqar_lite.api.redrive import checked_task_id, task_body
from zaqar_lite.api.resource import Resource
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims import pause, policy
from zaqar_lite.claims import redrive as redrive_policy
from zaqar_lite.models import Message, QueueStats

#: queues one page of the queue list shows
PAGE_SIZE = 50
HOME = "/console"
LOGIN = "/console/login"
ACTIONS = ("preview", "redrive")

TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("zaqar_lite.api.console", "templates"),
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def project_url(project: str) -> str:
    """Return the path of a project's queue list."""
    return f"/console/projects/{urllib.parse.quote(project, safe='')}/queues"


def queue_url(project: str, queue: str) -> str:
    """Return the path of one queue's page."""
    return f"{project_url(project)}/{queue}"


def duration(seconds: float | None) -> str:
    """Return seconds as an operator reads them: ``45 s``, ``12 min``, ``3 h 5 min``, ``2 d 3 h``."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    for size, unit, smaller, small_unit in ((86400, "d", 3600, "h"), (3600, "h", 60, "min")):
        if whole >= size:
            rest = (whole % size) // smaller
            return f"{whole // size} {unit} {rest} {small_unit}" if rest else f"{whole // size} {unit}"
    return f"{whole // 60} min" if whole >= 60 else f"{whole} s"


def see_other(resp: falcon.Response, location: str) -> None:
    """Answer 303 See Other: the browser GETs ``location`` next."""
    resp.status = falcon.HTTP_303
    resp.location = location


def dead_letter_queue(queue: str, stored: dict[str, Any], default: str) -> str | None:
    """Return where a queue dead-letters: its own DLQ, else the server's default when it uses it."""
    wanted = meta.wanted_default_dead_letter_queue(queue, stored, default)
    return meta.dead_letter_policy(stored, wanted).queue


class ConsolePage(Resource):
    """A page of the console: HTML, credentials from its URL and cookie, forms checked for forgery."""

    console = True

    def render(self, req: falcon.Request, resp: falcon.Response, template: str, **context: Any) -> None:
        """Answer with a rendered template; every page gets the form token and whether one is logged in."""
        acting = getattr(req.context, "project", None) is not None
        resp.content_type = falcon.MEDIA_HTML
        resp.text = TEMPLATES.get_template(template).render(
            csrf_field=forms.CSRF_FIELD, csrf_token=forms.csrf_token(req, resp),
            signed_in=acting and self.settings.auth_strategy == "token", **context)

    def posted_form(self, req: falcon.Request) -> dict[str, list[str]]:
        """Read a posted form that this console's own page sent (else 403)."""
        forms.check_same_site(req)
        form = forms.read_form(req, schemas.redrive_body_size(self.limits), self.limits.max_redrive_ids + 8)
        forms.check_form_token(req, form)
        return form


class Home(ConsolePage):
    """``GET /console``: the project chooser (noauth), or the way to the token's project."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Send the browser to a project's queues, or show the chooser."""
        if self.settings.auth_strategy == "token":
            token = req.get_header("X-Auth-Token")
            session = console_session(req)
            if token is None and session is not None:
                token = self.messaging.console_session_token(session)
            try:
                project, _ = credentials(self.settings, token, None)
            except errors.Unauthorized:
                see_other(resp, LOGIN)
                return
            see_other(resp, project_url(project))
            return
        chosen = req.get_param("project")
        if chosen is not None:
            see_other(resp, project_url(console_project(chosen, self.limits)))
            return
        self.render(req, resp, "home.html")


class Login(ConsolePage):
    """``/console/login``: under token auth, the form that opens a session on a token.

    The browser's cookie holds the session's random id only; the token is kept
    in the store (every worker and server reads it) until the session expires
    or its user logs out.
    """

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Show the login form (noauth needs none: back to the chooser)."""
        if self.settings.auth_strategy != "token":
            see_other(resp, HOME)
            return
        self.render(req, resp, "login.html")

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Check the token as the API does, open a session on it, and go to its project."""
        form = self.posted_form(req)
        if self.settings.auth_strategy != "token":
            see_other(resp, HOME)
            return
        token = forms.one_value(form, "token")
        try:
            project, _ = credentials(self.settings, token, None)
        except errors.Unauthorized:
            raise errors.Unauthorized("That token is not valid here.") from None
        assert token is not None  # credentials accepted it
        forms.set_cookie(req, resp, CONSOLE_SESSION_COOKIE, self.messaging.open_console_session(token))
        see_other(resp, project_url(project))


class Logout(ConsolePage):
    """``POST /console/logout``: close the session, on every server."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Remove the session from the store and its cookie, and go back to the front page."""
        self.posted_form(req)
        session = console_session(req)
        if session is not None:
            self.messaging.close_console_session(session)
        resp.unset_cookie(CONSOLE_SESSION_COOKIE, path=forms.COOKIE_PATH, same_site="Strict")
        see_other(resp, HOME)


class StyleSheet:
    """``GET /console/console.css``: the console's only style sheet (no scripts at all)."""

    console = True

    def __init__(self) -> None:
        self.text = importlib.resources.files(__package__).joinpath("static/console.css").read_text("utf-8")

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Answer the style sheet."""
        resp.content_type = "text/css; charset=utf-8"
        resp.text = self.text


class QueueList(ConsolePage):
    """``GET /console/projects/{project}/queues``: every queue with its depth, oldest age and DLQ."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, project: str) -> None:
        """List a page of queues (``?marker=`` the last name of the previous page)."""
        project = req.context.project
        page = self.messaging.list_queues(project, marker=req.get_param("marker"), limit=PAGE_SIZE,
                                          name=None, filters={})
        stats: dict[str, tuple[QueueStats, float]] = {}

        def stats_of(queue: str) -> tuple[QueueStats, float]:
            if queue not in stats:
                stats[queue] = self.messaging.queue_stats(project, queue)
            return stats[queue]

        rows = []
        for name, stored in page:
            counts, now = stats_of(name)
            dlq = dead_letter_queue(name, stored, self.settings.default_dead_letter_queue)
            rows.append({
                "name": name, "url": queue_url(project, name), "stats": counts,
                "oldest_age": duration(counts.oldest.age(now) if counts.oldest else None),
                "dlq": dlq, "dlq_url": queue_url(project, dlq) if dlq else None,
                "dlq_depth": stats_of(dlq)[0].total if dlq else None,
                "paused": pause.is_paused(stored),
            })
        dead_letter_queues = {row["dlq"] for row in rows if row["dlq"]}
        next_url = None
        if len(page) == PAGE_SIZE:
            next_url = project_url(project) + "?" + urllib.parse.urlencode({"marker": page[-1][0]})
        self.render(req, resp, "queues.html", project=project, rows=rows, next_url=next_url,
                    dead_letter_queues=dead_letter_queues, project_url=project_url(project))


def message_view(message: Message, now: float) -> dict[str, Any]:
    """Return what the console shows of one dead letter: provenance, failures, body as JSON text."""
    last = redrive_policy.last_failure(message) or {}
    return {
        "id": message.id,
        "claimed": message.is_claimed(now),
        "age": duration(message.age(now)),
        "provenance": policy.provenance(message),
        "last_error_type": last.get("error_type"),
        "last_error": last.get("error"),
        "body": json.dumps(message.body, indent=2, ensure_ascii=False, sort_keys=True),
    }


def paused_by(record: Any) -> str:
    """Return who paused a queue and why, in words, from its ``_paused_by`` (None: an operator)."""
    if not isinstance(record, dict):
        return "Paused by an operator."
    if record.get("by") == pause.BY_BREAKER:
        return (f"Paused by its dead-letter breaker at {record.get('at')}: {record.get('dead_letters')} "
                f"dead letters and {record.get('claimed')} messages claimed since "
                f"{record.get('window_started')} (the rule: {record.get('rule')}).")
    return "Paused: " + json.dumps(record, ensure_ascii=False, sort_keys=True)


class QueuePage(ConsolePage):
    """``GET /console/projects/{project}/queues/{queue}``: a queue, and its dead letters by signature."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, project: str, queue: str) -> None:
        """Show the queue's counts and DLQ, and its dead letters grouped by last failure signature."""
        project = req.context.project
        stored = self.messaging.existing_queue_metadata(project, queue)
        counts, now = self.messaging.queue_stats(project, queue)
        letters, more, read_at = self.messaging.dead_letters(project, queue, self.limits.max_redrive_messages)
        dlq = dead_letter_queue(queue, stored, self.settings.default_dead_letter_queue)
        groups = [{"id": group.signature_id, "signature": group.signature,
                   "messages": [message_view(m, read_at) for m in group.messages],
                   "share": share(len(group.messages), len(letters)),
                   "oldest_age": duration(max(m.age(read_at) for m in group.messages))}
                  for group in redrive_policy.by_last_signature(letters)]
        self.render(req, resp, "queue.html", project=project, queue=queue, stats=counts,
                    oldest_age=duration(counts.oldest.age(now) if counts.oldest else None),
                    dlq=dlq, dlq_url=queue_url(project, dlq) if dlq else None,
                    groups=groups, dead_letter_count=len(letters), more=more,
                    project_url=project_url(project), queue_url=queue_url(project, queue),
                    redrive_tasks=self.redrive_tasks(project, queue),
                    paused=pause.is_paused(stored), paused_by=paused_by(stored.get(pause.PAUSED_BY)),
                    breaker=pause.breaker_of(stored))

    def redrive_tasks(self, project: str, queue: str) -> list[dict[str, Any]]:
        """Return the redrive tasks of a queue, newest first, as the API shows them (status,
        moved and remaining counts, times), each running one with the path that cancels it:
        its "Redrive tasks" section lists them."""
        tasks_url = queue_url(project, queue) + "/redrive/tasks"
        return [{**task_body(task), "cancel_url": f"{tasks_url}/{task.id}/cancel"}
                for task in self.messaging.redrive_tasks(project, queue)]


def share(count: int, total: int) -> str:
    """Return a group's share of the dead letters read, as a whole percentage (``67%``)."""
    return f"{100 * count / total:.0f}%" if total else "-"


def task_document(form: dict[str, list[str]]) -> dict[str, Any]:
    """Return the redrive API's body (``"async": true``) a console task form stands for.

    The form names at most one ``signature`` (none: every dead letter) and may
    give ``max_per_second``; the rest is the task's defaults.

    Raises:
        ValidationFailed: ``max_per_second`` is not a number.
    """
    signature = forms.one_value(form, "signature")
    document: dict[str, Any] = {"async": True, "filter": {"signature": signature} if signature else {}}
    rate = forms.one_value(form, "max_per_second")
    if rate is not None:
        try:
            document["max_per_second"] = float(rate)
        except ValueError:
            raise errors.ValidationFailed(
                f"The form field max_per_second must be a number of messages a second, got {rate[:40]!r}."
            ) from None
        if not math.isfinite(document["max_per_second"]):
            raise errors.ValidationFailed("The form field max_per_second must be a finite number.")
    return document


def redrive_document(form: dict[str, list[str]]) -> dict[str, Any]:
    """Return the redrive API's body a console redrive form stands for.

    The form names one ``signature`` or some message ``ids`` (checkboxes), and
    its ``action``: ``preview`` (a dry run) or ``redrive``.

    Raises:
        ValidationFailed: no or an unknown action, or not exactly one of a
            signature and a selection.
    """
    action = forms.one_value(form, "action")
    if action not in ACTIONS:
        raise errors.ValidationFailed("The form field action must be preview or redrive.")
    signature = forms.one_value(form, "signature")
    ids = [value for value in form.get("ids", []) if value]
    if (signature is None) == (not ids):
        raise errors.ValidationFailed(
            "Choose the messages to redrive (ids) or one signature, not both and not neither.")
    wanted: dict[str, Any] = {"signature": signature} if signature is not None else {"ids": ids}
    return {"filter": wanted, "dry_run": action == "preview"}


class Redrive(ConsolePage):
    """``POST /console/projects/{project}/queues/{queue}/redrive``: preview, then redrive, a selection."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, project: str, queue: str) -> None:
        """Preview (a dry run) or make a redrive of a signature or of selected messages.

        The form becomes the body of ``POST /v2/queues/{queue}/redrive`` and
        passes that route's checks (``schemas.redrive_request``) before the
        service runs it.
        """
        project = req.context.project
        form = self.posted_form(req)
        request = schemas.redrive_request(redrive_document(form), queue, self.limits)
        self.messaging.existing_queue_metadata(project, queue)
        result, now = self.messaging.redrive(project, queue, request)
        selection = {"signature": request.filter.signature,
                     "ids": sorted(request.filter.ids) if request.filter.ids is not None else []}
        sample = [{**message_view(message, now), "destination": target} for message, target in result.sample]
        self.render(req, resp, "redrive.html", project=project, queue=queue, dry_run=request.dry_run,
                    matched=result.matched, redriven=result.redriven, sample=sample, selection=selection,
                    project_url=project_url(project), queue_url=queue_url(project, queue))


class RedriveTaskStart(ConsolePage):
    """``POST /console/projects/{project}/queues/{queue}/redrive/tasks``: start a redrive task."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, project: str, queue: str) -> None:
        """Start a task on a signature (or every dead letter) and go back to the queue's tasks.

        The form becomes the body of ``POST /v2/queues/{queue}/redrive`` with
        ``"async": true`` and passes that route's checks; a queue with a task
        running answers 409, as the API does.
        """
        project = req.context.project
        form = self.posted_form(req)
        request = schemas.redrive_request(task_document(form), queue, self.limits)
        self.messaging.start_redrive_task(project, queue, request)
        see_other(resp, queue_url(project, queue) + "#redrive-tasks")


class RedriveTaskCancel(ConsolePage):
    """``POST /console/projects/{project}/queues/{queue}/redrive/tasks/{task_id}/cancel``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, project: str, queue: str,
                task_id: str) -> None:
        """Cancel a running task and go back to the queue's tasks; 409 when it is not running."""
        project = req.context.project
        self.posted_form(req)
        self.messaging.cancel_redrive_task(project, queue, checked_task_id(task_id, queue))
        see_other(resp, queue_url(project, queue) + "#redrive-tasks")


class QueuePause(ConsolePage):
    """``POST /console/projects/{project}/queues/{queue}/pause``: pause or resume a queue."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, project: str, queue: str) -> None:
        """Set (``paused=true``) or remove (``paused=false``) the queue's ``_paused``, as a PATCH does.

        A resume also drops the breaker's record of why the queue paused.
        """
        project = req.context.project
        form = self.posted_form(req)
        wanted = forms.one_value(form, "paused")
        if wanted not in ("true", "false"):
            raise errors.ValidationFailed("The form field paused must be true or false.")
        operation = ("add", pause.PAUSED, True) if wanted == "true" else ("remove", pause.PAUSED, None)
        self.messaging.update_queue(project, queue, [operation])
        see_other(resp, queue_url(project, queue))
