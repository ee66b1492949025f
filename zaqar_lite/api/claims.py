"""Claim resources: create, get, renew, release."""

from __future__ import annotations

import falcon

from zaqar_lite.api import inputs, schemas
from zaqar_lite.api.bodies import read_json
from zaqar_lite.api.resource import Resource, ResourceBase
from zaqar_lite.config import Settings
from zaqar_lite.service.waiting.long_poll import LongPoll

CLAIM_BODY_MAX = 4096


class ClaimCollection(ResourceBase):
    """``POST /v2/queues/{queue}/claims?limit=N[&wait=S]``: claims go through long polling's loop."""

    def __init__(self, settings: Settings, long_poll: LongPoll) -> None:
        super().__init__(settings)
        self.long_poll = long_poll

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Claim up to limit messages: 201 with them, or 204 when none are claimable (within ``wait`` s)."""
        limit = inputs.page_limit(req.get_param("limit"), self.limits.max_messages_per_claim_or_pop,
                                      self.limits.default_page_size)
        wait = inputs.wait_seconds(req.get_param("wait"), self.settings.claim_max_wait)
        document, _ = read_json(req, CLAIM_BODY_MAX)
        ttl, grace = schemas.claim_options(document, self.limits)
        render = self.renderer(req, queue)
        claim_id, claimed, now = self.long_poll.claim(req.context.project, queue, limit, ttl, grace, wait)
        if not claimed:
            resp.status = falcon.HTTP_204
            return
        resp.status = falcon.HTTP_201
        resp.location = f"/v2/queues/{queue}/claims/{claim_id}"
        resp.media = {"messages": render.many(claimed, now)}


class ClaimItem(Resource):
    """``/v2/queues/{queue}/claims/{claim_id}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str, claim_id: str) -> None:
        """Return a live claim with the messages it holds; 404 if absent or expired."""
        render = self.renderer(req, queue)
        claim, messages, now = self.messaging.get_claim(req.context.project, queue, claim_id)
        resp.media = {
            "age": claim.age(now),
            "ttl": claim.ttl,
            "href": f"/v2/queues/{queue}/claims/{claim.id}",
            "messages": render.many(messages, now),
        }

    def on_patch(self, req: falcon.Request, resp: falcon.Response, queue: str, claim_id: str) -> None:
        """Renew a claim from now with a new ttl and grace."""
        document, _ = read_json(req, CLAIM_BODY_MAX)
        ttl, grace = schemas.claim_options(document, self.limits)
        self.messaging.renew_claim(req.context.project, queue, claim_id, ttl, grace)
        resp.status = falcon.HTTP_204

    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str, claim_id: str) -> None:
        """Release a claim; its messages are claimable at once, or as ``outcome`` and ``delay`` say."""
        outcome, delay = schemas.claim_release(req.get_param("outcome"), req.get_param("delay"), self.limits)
        self.messaging.release_claim(req.context.project, queue, claim_id, outcome, delay)
        resp.status = falcon.HTTP_204
