"""Claim resources: create, get, renew, release."""

from __future__ import annotations

import falcon

from zaqar_lite import validation
from zaqar_lite.api.bodies import MessageRenderer, read_json
from zaqar_lite.service import Messaging

CLAIM_BODY_MAX = 4096


class ClaimCollection:
    """``POST /v2/queues/{queue}/claims?limit=N``."""

    def __init__(self, messaging: Messaging) -> None:
        self.messaging = messaging
        self.limits = messaging.limits

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Claim up to limit messages: 201 with them, or 204 when none are claimable."""
        validation.queue_name(queue, self.limits)
        limit = validation.page_limit(req.get_param("limit"), self.limits.max_messages_per_claim_or_pop,
                                      self.limits.default_page_size)
        document, _ = read_json(req, CLAIM_BODY_MAX)
        ttl, grace = validation.claim_options(document, self.limits)
        render = MessageRenderer(req, queue, self.messaging.settings.include_dead_letter)
        claim_id, claimed, now = self.messaging.claim(req.context.project, queue, limit, ttl, grace)
        if not claimed:
            resp.status = falcon.HTTP_204
            return
        resp.status = falcon.HTTP_201
        resp.location = f"/v2/queues/{queue}/claims/{claim_id}"
        resp.media = {"messages": render.many(claimed, now)}


class ClaimItem:
    """``/v2/queues/{queue}/claims/{claim_id}``."""

    def __init__(self, messaging: Messaging) -> None:
        self.messaging = messaging
        self.limits = messaging.limits

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str, claim_id: str) -> None:
        """Return a live claim with the messages it holds; 404 if absent or expired."""
        validation.queue_name(queue, self.limits)
        render = MessageRenderer(req, queue, self.messaging.settings.include_dead_letter)
        claim, messages, now = self.messaging.get_claim(req.context.project, queue, claim_id)
        resp.media = {
            "age": claim.age(now),
            "ttl": claim.ttl,
            "href": f"/v2/queues/{queue}/claims/{claim.id}",
            "messages": render.many(messages, now),
        }

    def on_patch(self, req: falcon.Request, resp: falcon.Response, queue: str, claim_id: str) -> None:
        """Renew a claim from now with a new ttl and grace."""
        validation.queue_name(queue, self.limits)
        document, _ = read_json(req, CLAIM_BODY_MAX)
        ttl, grace = validation.claim_options(document, self.limits)
        self.messaging.renew_claim(req.context.project, queue, claim_id, ttl, grace)
        resp.status = falcon.HTTP_204

    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str, claim_id: str) -> None:
        """Release a claim; its messages are claimable at once."""
        validation.queue_name(queue, self.limits)
        self.messaging.release_claim(req.context.project, queue, claim_id)
        resp.status = falcon.HTTP_204
