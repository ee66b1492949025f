"""Message resources: post, list, get by ids, bulk delete, pop, get/edit/delete one, release."""

from __future__ import annotations

import falcon

from zaqar_lite import errors
from zaqar_lite.api import inputs, schemas
from zaqar_lite.api.bodies import joined_param, next_links, read_json, read_message_edit, read_message_post
from zaqar_lite.api.resource import Resource

#: largest body of a release (its failure reason), in bytes
RELEASE_BODY_MAX = 65536


class MessageCollection(Resource):
    """``/v2/queues/{queue}/messages``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Post 1..max messages; the queue is created if missing."""
        messages, size, trace = read_message_post(req, self.limits)
        ids = self.messaging.post(req.context.project, queue, req.context.client_id, messages, size, trace)
        resp.status = falcon.HTTP_201
        resp.location = f"/v2/queues/{queue}/messages?ids={','.join(ids)}"
        resp.media = {"resources": [f"/v2/queues/{queue}/messages/{i}" for i in ids]}

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """List messages FIFO (marker pagination), or get the ones named by ``ids``."""
        project = req.context.project
        ids_param = joined_param(req, "ids")
        if ids_param is not None:
            ids = inputs.id_list(ids_param, "ids", self.limits.max_messages_per_page)
            render = self.renderer(req, queue)
            found, now = self.messaging.get_messages(project, queue, ids)
            if not found:
                raise errors.NotFound("None of the requested messages exist.")
            resp.media = {"messages": render.many(found, now)}
            return
        limit = inputs.page_limit(req.get_param("limit"), self.limits.max_messages_per_page,
                                      self.limits.default_page_size)
        flags = {name: inputs.boolean(req.get_param(name), name)
                 for name in ("echo", "include_claimed", "include_delayed")}
        render = self.renderer(req, queue)
        found, now = self.messaging.list_messages(
            project, queue, client_id=req.context.client_id,
            marker=inputs.marker(req.get_param("marker")), limit=limit, **flags)
        links: list[dict[str, str]] = []
        if found:
            query = {"marker": found[-1].marker, "limit": limit,
                     **{k: str(v).lower() for k, v in flags.items()}}
            if req.get_param("include_dead_letter") is not None:
                query["include_dead_letter"] = str(render.dead_letter).lower()
            if req.get_param("include_fifo") is not None:
                query["include_fifo"] = str(render.fifo).lower()
            if render.trace:
                query["include_trace"] = "true"
            if render.schedule:
                query["include_schedule"] = "true"
            links = next_links(f"/v2/queues/{queue}/messages", query)
        resp.media = {"messages": render.many(found, now), "links": links}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Delete by ``ids`` (204) or pop ``pop`` visible messages (200 with them)."""
        ids_param, pop_param = joined_param(req, "ids"), req.get_param("pop")
        if (ids_param is None) == (pop_param is None):
            raise errors.ValidationFailed("Give exactly one of the query parameters ids and pop.")
        project = req.context.project
        render = self.renderer(req, queue)
        if pop_param is not None:
            limit = inputs.page_limit(pop_param, self.limits.max_messages_per_claim_or_pop, 1, "pop")
            popped, now = self.messaging.pop(project, queue, limit)
            shown = [render(m, now) for m in popped]
            resp.media = {"messages": [{k: v for k, v in view.items() if k != "href"} for view in shown]}
            return
        ids = inputs.id_list(ids_param, "ids", self.limits.max_messages_per_page)
        claim_ids = None
        claim_ids_param = joined_param(req, "claim_ids")
        if claim_ids_param is None and self.settings.message_delete_with_claim_id:
            raise errors.ValidationFailed(
                "This server deletes messages by id only with their claim ids: give ids and claim_ids.")
        if claim_ids_param is not None:
            claim_ids = inputs.id_list(claim_ids_param, "claim_ids",
                                           self.limits.max_messages_per_page)
        self.messaging.delete_messages(project, queue, ids, claim_ids)
        resp.status = falcon.HTTP_204


class MessageItem(Resource):
    """``/v2/queues/{queue}/messages/{message_id}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str, message_id: str) -> None:
        """Return one message; 404 if absent or expired."""
        render = self.renderer(req, queue)
        found, now = self.messaging.get_messages(req.context.project, queue, [message_id])
        if not found:
            raise errors.MessageDoesNotExist(message_id, queue)
        resp.media = render(found[0], now)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, queue: str, message_id: str) -> None:
        """Edit a message that is still delayed (our extension); 200 with it as GET shows it, else 409."""
        changes, size = read_message_edit(req, self.limits)
        render = self.renderer(req, queue)
        edited, now = self.messaging.edit_delayed_message(req.context.project, queue, message_id, changes,
                                                          size)
        resp.media = render(edited, now)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str, message_id: str) -> None:
        """Delete one message under the claim rules (docs/api.rst, "Claim rules")."""
        self.messaging.delete_message(req.context.project, queue, message_id, req.get_param("claim_id"))
        resp.status = falcon.HTTP_204


class MessageRelease(Resource):
    """``POST /v2/queues/{queue}/messages/{message_id}/release?claim_id=C`` (our extension)."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str, message_id: str) -> None:
        """Release one claimed message, recording an optional failure reason, after an optional delay."""
        claim_id = req.get_param("claim_id")
        if not claim_id:
            raise errors.ValidationFailed("claim_id is required to release a message.")
        document, _ = read_json(req, RELEASE_BODY_MAX)
        reason, delay, outcome = schemas.release_body(document, self.limits)
        self.messaging.release_message(req.context.project, queue, message_id, claim_id, reason, delay,
                                       outcome)
        resp.status = falcon.HTTP_204
