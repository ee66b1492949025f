"""The redrive resources (our extension): dead letters back to their queues, now or as a task.

docs/api.rst, "Redrive (zaqar-lite extension)" and "Redrive tasks".
"""

from __future__ import annotations

import uuid
from typing import Any

import falcon

from zaqar_lite.api import inputs, schemas
from zaqar_lite.api.bodies import MessageRenderer, next_links, read_json
from zaqar_lite.api.resource import Resource
from zaqar_lite.claims import redrive as redrive_policy
from zaqar_lite.clock import iso_utc
from zaqar_lite.errors import RedriveTaskDoesNotExist
from zaqar_lite.models import RedriveTask


def task_href(task: RedriveTask) -> str:
    """Return the path of a redrive task."""
    return f"/v2/queues/{task.queue}/redrive/tasks/{task.id}"


def task_body(task: RedriveTask) -> dict[str, Any]:
    """Return a redrive task as the API shows it (docs/api.rst, "Redrive tasks")."""
    wanted = task.filter
    criteria: dict[str, Any] = {key: value for key, value in (
        ("source_queue", wanted.source_queue), ("error_type", wanted.error_type),
        ("signature", wanted.signature)) if value is not None}
    if wanted.ids is not None:
        criteria["ids"] = sorted(wanted.ids)
    return {
        "id": task.id,
        "href": task_href(task),
        "queue": task.queue,
        "status": task.status,
        "destination": task.destination,
        "filter": criteria,
        "limit": task.limit,
        "max_per_second": task.max_per_second,
        "moved": task.moved,
        "remaining": redrive_policy.remaining(task),
        "started": iso_utc(task.created),
        "finished": iso_utc(task.finished) if task.finished is not None else None,
        "error": task.error,
    }


def checked_task_id(task_id: str, queue: str) -> str:
    """Return a task id of the path; one that no task could have is 404 at once."""
    try:
        uuid.UUID(task_id)
    except ValueError:
        raise RedriveTaskDoesNotExist(task_id, queue) from None
    return task_id


class QueueRedrive(Resource):
    """``POST /v2/queues/{queue}/redrive``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Redrive the selected dead letters (200 ``{"redriven": n}``), or preview them with ``dry_run``.

        A dry run answers ``{"matched": n, "sample": [...]}``: the first
        messages selected, as listed in the queue, each with the
        ``destination`` it would go to and, unless ``include_dead_letter=false``,
        its provenance: no Zaqar client calls this route, and the sample is
        there to be read. With ``async`` the redrive is a task: 202 with the
        task and its ``Location``.
        """
        render = MessageRenderer(req, queue, default_dead_letter=True)
        document, _ = read_json(req, schemas.redrive_body_size(self.limits))
        request = schemas.redrive_request(document, queue, self.limits)
        if request.as_task:
            task = self.messaging.start_redrive_task(req.context.project, queue, request)
            resp.status = falcon.HTTP_202
            resp.location = task_href(task)
            resp.media = task_body(task)
            return
        result, now = self.messaging.redrive(req.context.project, queue, request)
        warning = {} if result.warning is None else {"warning": result.warning}
        if not request.dry_run:
            resp.media = {"redriven": result.redriven, **warning}
            return
        sample = [{**render(message, now), "destination": target} for message, target in result.sample]
        resp.media = {"matched": result.matched, "sample": sample, **warning}


class RedriveTaskCollection(Resource):
    """``GET /v2/queues/{queue}/redrive/tasks``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """List the queue's redrive tasks, newest first: the running one and the last ended ones."""
        tasks = self.messaging.redrive_tasks(req.context.project, queue)
        resp.media = {"tasks": [task_body(task) for task in tasks]}


class ProjectRedriveTasks(Resource):
    """``GET /v2/redrive/tasks``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """List a page of the redrive tasks of every queue of the project, newest first (marker, limit)."""
        limit = inputs.page_limit(req.get_param("limit"), self.limits.max_redrive_tasks_per_page,
                                  self.limits.default_page_size)
        after = inputs.task_marker(req.get_param("marker"))
        tasks = self.messaging.redrive_task_page(req.context.project, after, limit)
        links: list[dict[str, str]] = []
        if tasks:
            links = next_links("/v2/redrive/tasks",
                               {"marker": redrive_policy.task_marker(tasks[-1]), "limit": limit})
        resp.media = {"tasks": [task_body(task) for task in tasks], "links": links}


class RedriveTaskItem(Resource):
    """``GET /v2/queues/{queue}/redrive/tasks/{task_id}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str, task_id: str) -> None:
        """Return one redrive task; 404 if there is no such task on the queue."""
        task = self.messaging.redrive_task(req.context.project, queue, checked_task_id(task_id, queue))
        resp.media = task_body(task)


class RedriveTaskCancel(Resource):
    """``POST /v2/queues/{queue}/redrive/tasks/{task_id}/cancel``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str, task_id: str) -> None:
        """Cancel a running redrive task: 200 with it; 409 when it is no longer running."""
        task = self.messaging.cancel_redrive_task(req.context.project, queue, checked_task_id(task_id, queue))
        resp.media = task_body(task)
