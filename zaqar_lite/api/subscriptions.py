"""Subscription resources: create, list, get, update, delete, confirm, resume (Zaqar v2 shapes).

A subscription is shown as Zaqar shows it (``id``, ``source``, ``subscriber``,
``ttl``, ``age``, ``options``, ``confirmed``) plus zaqar-lite's delivery state:
``status`` (``active`` or ``suspended``) and ``delivery`` (counts, the last
error and when it happened, when delivery was suspended).
"""

from __future__ import annotations

from typing import Any

import falcon

from zaqar_lite.api import inputs
from zaqar_lite.api.bodies import next_links, read_json
from zaqar_lite.api.resource import ResourceBase
from zaqar_lite.clock import Clock, iso_utc
from zaqar_lite.config import Settings
from zaqar_lite.notify import options
from zaqar_lite.notify.state import Delivery, Subscription
from zaqar_lite.rules import topics
from zaqar_lite.service.subscriptions import Subscriptions

#: largest subscription request body, in bytes
BODY_MAX = 65536


class SubscriptionResource(ResourceBase):
    """A resource over the subscription service, built once by ``create_app``.

    ``COLLECTION`` is the path its sources are under and :meth:`owner` the
    project their records are stored under: a queue's here, a topic's in
    :mod:`zaqar_lite.api.topics`, which serves the same responders.
    """

    COLLECTION = "/v2/queues"

    def __init__(self, settings: Settings, service: Subscriptions, clock: Clock) -> None:
        """``clock`` gives the time a subscription's ``age`` is shown at."""
        super().__init__(settings)
        self.service = service
        self.clock = clock

    def owner(self, req: falcon.Request) -> str:
        """Return the project the source's subscriptions are stored under."""
        project: str = req.context.project
        return project

    def href(self, source: str, subscription_id: str) -> str:
        """Return the path of one subscription of a source."""
        return f"{self.COLLECTION}/{source}/subscriptions/{subscription_id}"

    def creator_token(self, req: falcon.Request) -> str | None:
        """Return the token a request authenticated with (None in ``noauth`` mode, where none counts)."""
        if self.settings.auth_strategy == "noauth":
            return None
        return req.get_header("X-Auth-Token")


def _iso(when: float | None) -> str | None:
    return iso_utc(when) if when is not None else None


def subscription_view(subscription: Subscription, delivery: Delivery, now: float) -> dict[str, Any]:
    """Render a subscription as Zaqar does, plus its delivery state."""
    return {
        "id": subscription.id,
        "source": subscription.queue,
        "subscriber": subscription.subscriber,
        "ttl": subscription.ttl,
        "age": max(0, int(now - subscription.created)),
        "options": options.masked(subscription.options),
        "confirmed": subscription.confirmed,
        "status": "suspended" if delivery.suspended else "active",
        "delivery": {
            "delivered": delivery.delivered,
            "last_delivered_at": _iso(delivery.last_delivered_at),
            "failed_attempts": delivery.attempts,
            "last_error": delivery.last_error,
            "last_error_at": _iso(delivery.last_error_at),
            "suspended_at": _iso(delivery.suspended_at),
        },
    }


class SubscriptionCollection(SubscriptionResource):
    """``/v2/queues/{queue}/subscriptions``: create and list."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Create a subscription: 201 with its id; 409 if the subscriber has a confirmed one here."""
        document, _ = read_json(req, BODY_MAX)
        subscription_id, _created = self.service.create(self.owner(req), queue, document,
                                                        self.creator_token(req))
        resp.status = falcon.HTTP_201
        resp.location = self.href(queue, subscription_id)
        resp.media = {"subscription_id": subscription_id}

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """List a queue's subscriptions by id, with marker pagination."""
        limit = inputs.page_limit(req.get_param("limit"), self.limits.max_subscriptions_per_page,
                                      self.limits.default_page_size)
        page = self.service.list(self.owner(req), queue, marker=req.get_param("marker"), limit=limit)
        now = self.clock()
        links: list[dict[str, str]] = []
        if page:
            query = {"marker": page[-1][0].id, "limit": limit}
            links = next_links(f"{self.COLLECTION}/{queue}/subscriptions", query)
        resp.media = {"subscriptions": [subscription_view(s, d, now) for s, d in page], "links": links}


class SubscriptionItem(SubscriptionResource):
    """``/v2/queues/{queue}/subscriptions/{subscription_id}``: get, update, delete."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, queue: str, subscription_id: str) -> None:
        """Return one subscription with its delivery state; 404 if absent or expired."""
        subscription, delivery = self.service.get(self.owner(req), queue, subscription_id)
        resp.media = subscription_view(subscription, delivery, self.clock())

    def on_patch(self, req: falcon.Request, resp: falcon.Response, queue: str,
                 subscription_id: str) -> None:
        """Change subscriber, ttl and/or options: 204; 404 if absent; 409 if the subscriber is taken."""
        document, _ = read_json(req, BODY_MAX)
        self.service.update(self.owner(req), queue, subscription_id, document,
                            self.creator_token(req))
        resp.status = falcon.HTTP_204

    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str,
                  subscription_id: str) -> None:
        """Delete a subscription and its delivery state (idempotent): 204."""
        self.service.delete(self.owner(req), queue, subscription_id)
        resp.status = falcon.HTTP_204


class SubscriptionConfirm(SubscriptionResource):
    """``PUT /v2/queues/{queue}/subscriptions/{subscription_id}/confirm``."""

    def on_put(self, req: falcon.Request, resp: falcon.Response, queue: str, subscription_id: str) -> None:
        """Set ``confirmed`` from ``{"confirmed": bool}``: 204; 404 if absent."""
        document, _ = read_json(req, BODY_MAX)
        self.service.confirm(self.owner(req), queue, subscription_id, document)
        resp.status = falcon.HTTP_204


class SubscriptionResume(SubscriptionResource):
    """``POST /v2/queues/{queue}/subscriptions/{subscription_id}/resume``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str, subscription_id: str) -> None:
        """Restart delivery from the first undelivered message: 204; 404 if absent."""
        self.service.resume(self.owner(req), queue, subscription_id)
        resp.status = falcon.HTTP_204


class SubscriberResume(SubscriptionResource):
    """``POST /v2/subscriptions/resume``: resume a subscriber URL in every queue and topic of the project."""

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Resume every suspended subscription of ``{"subscriber": url}``: 200 with how many."""
        document, _ = read_json(req, BODY_MAX)
        project = req.context.project
        resumed = sum(self.service.resume_subscriber(owner, document)
                      for owner in (project, topics.namespace(project)))
        resp.media = {"resumed": resumed}
