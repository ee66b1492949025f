"""Queue resources: list, create, metadata, JSON-patch update, delete, stats, purge."""

from __future__ import annotations

from typing import Any

import falcon

from zaqar_lite.api import inputs, schemas
from zaqar_lite.api.bodies import message_href, next_links, read_json, read_json_patch, stats_body
from zaqar_lite.api.resource import Resource

LIST_PARAMS = {"marker", "limit", "detailed", "name", "with_count"}


class QueueCollection(Resource):
    """``GET /v2/queues``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """List queues by name, with marker pagination and metadata filters."""
        project = req.context.project
        limit = inputs.page_limit(req.get_param("limit"), self.limits.max_queues_per_page,
                                      self.limits.default_page_size)
        detailed = inputs.boolean(req.get_param("detailed"), "detailed")
        with_count = inputs.boolean(req.get_param("with_count"), "with_count")
        name = req.get_param("name")
        filters = {k: v for k, v in req.params.items() if k not in LIST_PARAMS and isinstance(v, str)}
        page = self.messaging.list_queues(project, marker=req.get_param("marker"), limit=limit,
                                          name=name, filters=filters)
        queues = []
        for queue, metadata in page:
            item: dict[str, Any] = {"name": queue, "href": f"/v2/queues/{queue}"}
            if detailed:
                item["metadata"] = self.messaging.shown_metadata(metadata)
            queues.append(item)
        links: list[dict[str, str]] = []
        if queues:
            query = {**req.params, "marker": queues[-1]["name"], "limit": str(limit)}
            links = next_links("/v2/queues", query)
        body: dict[str, Any] = {"queues": queues, "links": links}
        if with_count:
            body["count"] = self.messaging.count_queues(project)
        resp.media = body


class QueueItem(Resource):
    """``/v2/queues/{queue}``: create, read metadata, patch, delete."""

    def on_put(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Create a queue; 201 if created, 204 if it existed (metadata unchanged)."""
        metadata, _ = read_json(req, self.limits.max_queue_metadata)
        if self.messaging.create_queue(req.context.project, queue, metadata):
            resp.status = falcon.HTTP_201
            resp.location = f"/v2/queues/{queue}"
        else:
            resp.status = falcon.HTTP_204

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Return the metadata with reserved defaults filled in."""
        resp.media = self.messaging.queue_metadata(req.context.project, queue)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Apply a JSON-patch to the metadata and return the whole result."""
        document, _ = read_json_patch(req, self.limits.max_queue_metadata, "queue")
        operations = schemas.patch_operations(document)
        resp.media = self.messaging.update_queue(req.context.project, queue, operations)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Delete the queue with its messages and claims (idempotent)."""
        self.messaging.delete_queue(req.context.project, queue)
        resp.status = falcon.HTTP_204


class QueueStatsResource(Resource):
    """``GET /v2/queues/{queue}/stats``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Return claimed/free/delayed/total counts, the oldest and newest message, and ``paused`` if so."""
        stats, now = self.messaging.queue_stats(req.context.project, queue)
        body = stats_body(stats, now, lambda message_id: message_href(queue, message_id))
        paused = self.messaging.pause_state(req.context.project, queue)
        if paused is not None:  # only when paused: Zaqar's stats document is unchanged otherwise
            body["paused"] = paused
        resp.media = body


class QueuePurge(Resource):
    """``POST /v2/queues/{queue}/purge``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Remove every message (claimed ones too) and/or subscription of the queue."""
        document, _ = read_json(req, self.limits.max_queue_metadata)
        self.messaging.purge(req.context.project, queue, schemas.purge_resource_types(document))
        resp.status = falcon.HTTP_204
