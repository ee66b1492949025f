"""Topic resources (Zaqar v2 shapes): list, create, metadata, patch, delete, stats, purge,
post messages and read one, and the subscriptions of a topic with their confirm (and resume, ours).

The ``{topic}`` of every route is checked by the queue-name rule before a
responder runs (:class:`zaqar_lite.api.middleware.QueueNameCheck`). Bodies
are checked by :mod:`zaqar_lite.api.schemas` as a queue's are, the topic's
metadata by its own schema; the work is the topic service's
(:mod:`zaqar_lite.service.topics`).
"""

from __future__ import annotations

from typing import Any

import falcon

from zaqar_lite import errors
from zaqar_lite.api import inputs, schemas, subscriptions
from zaqar_lite.api.bodies import next_links, read_json, read_json_patch, read_message_post, stats_body
from zaqar_lite.api.resource import ResourceBase
from zaqar_lite.clock import Clock
from zaqar_lite.config import Settings
from zaqar_lite.rules import topics as rules
from zaqar_lite.service.subscriptions import Subscriptions
from zaqar_lite.service.topics import Topics

COLLECTION = "/v2/topics"
LIST_PARAMS = {"marker", "limit", "detailed", "name"}


def message_href(topic: str, message_id: str) -> str:
    """Return the path of one message of a topic, as Zaqar writes it."""
    return f"{COLLECTION}/{topic}/messages/{message_id}"


class TopicResource(ResourceBase):
    """A resource over the topic service."""

    def __init__(self, settings: Settings, topics: Topics) -> None:
        super().__init__(settings)
        self.topics = topics


class TopicCollection(TopicResource):
    """``GET /v2/topics``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """List topics by name, with marker pagination, ``name`` and metadata filters, ``detailed``."""
        limit = inputs.page_limit(req.get_param("limit"), self.limits.max_queues_per_page,
                                  self.limits.default_page_size)
        detailed = inputs.boolean(req.get_param("detailed"), "detailed")
        filters = {k: v for k, v in req.params.items() if k not in LIST_PARAMS and isinstance(v, str)}
        page = self.topics.page(req.context.project, marker=req.get_param("marker"), limit=limit,
                                name=req.get_param("name"), filters=filters)
        listed = []
        for topic, stored in page:
            item: dict[str, Any] = {"name": topic, "href": f"{COLLECTION}/{topic}"}
            if detailed:
                item["metadata"] = rules.with_defaults(stored, self.limits)
            listed.append(item)
        links: list[dict[str, str]] = []
        if listed:
            links = next_links(COLLECTION, {**req.params, "marker": listed[-1]["name"], "limit": str(limit)})
        resp.media = {"topics": listed, "links": links}


class TopicItem(TopicResource):
    """``/v2/topics/{topic}``: create, read metadata, patch, delete."""

    def on_put(self, req: falcon.Request, resp: falcon.Response, topic: str) -> None:
        """Create a topic; 201 if created, 204 if it existed (metadata unchanged)."""
        document, _ = read_json(req, self.limits.max_queue_metadata)
        if self.topics.create(req.context.project, topic, schemas.topic_metadata(document)):
            resp.status = falcon.HTTP_201
        else:
            resp.status = falcon.HTTP_204
        resp.location = f"{COLLECTION}/{topic}"

    def on_get(self, req: falcon.Request, resp: falcon.Response, topic: str) -> None:
        """Return the metadata with Zaqar's reserved defaults; 404 if there is no such topic."""
        resp.media = self.topics.metadata(req.context.project, topic)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, topic: str) -> None:
        """Apply a JSON-patch to the metadata and return the whole result."""
        document, _ = read_json_patch(req, self.limits.max_queue_metadata, "topic")
        operations = schemas.topic_patch_operations(document)
        resp.media = self.topics.update(req.context.project, topic, operations)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, topic: str) -> None:
        """Delete the topic with its messages and subscriptions (idempotent)."""
        self.topics.delete(req.context.project, topic)
        resp.status = falcon.HTTP_204


class TopicStats(TopicResource):
    """``GET /v2/topics/{topic}/stats``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, topic: str) -> None:
        """Return claimed/free/delayed/total counts and the oldest and newest message."""
        stats, now = self.topics.stats(req.context.project, topic)
        resp.media = stats_body(stats, now, lambda message_id: message_href(topic, message_id))


class TopicPurge(TopicResource):
    """``POST /v2/topics/{topic}/purge``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, topic: str) -> None:
        """Remove every message and/or subscription of the topic."""
        document, _ = read_json(req, self.limits.max_queue_metadata)
        self.topics.purge(req.context.project, topic, schemas.purge_resource_types(document))
        resp.status = falcon.HTTP_204


class TopicMessages(TopicResource):
    """``POST /v2/topics/{topic}/messages``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, topic: str) -> None:
        """Post 1..max messages to every subscription of the topic; the topic is created if missing."""
        messages, size, trace = read_message_post(req, self.limits)
        ids = self.topics.post(req.context.project, topic, req.context.client_id, messages, size, trace)
        resp.status = falcon.HTTP_201
        resp.location = f"{COLLECTION}/{topic}/messages?ids={','.join(ids)}"
        resp.media = {"resources": [message_href(topic, i) for i in ids]}


class TopicMessage(TopicResource):
    """``GET /v2/topics/{topic}/messages/{message_id}``: the href a post and the stats answer."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, topic: str, message_id: str) -> None:
        """Return one message of the topic as a queue's is shown; 404 once it expired or was purged."""
        render = self.renderer(req, topic)
        found, now = self.topics.messages(req.context.project, topic, [message_id])
        if not found:
            raise errors.NotFound(f"Message {message_id} does not exist in topic {topic}.")
        resp.media = {**render(found[0], now), "href": message_href(topic, message_id)}


class TopicSubscriptionResource(subscriptions.SubscriptionResource):
    """The subscription responders on a topic's subscriptions, stored under its topic namespace."""

    COLLECTION = COLLECTION

    def owner(self, req: falcon.Request) -> str:
        """Return the topic namespace of the request's project."""
        return rules.namespace(req.context.project)


class TopicSubscriptionCollection(TopicSubscriptionResource, subscriptions.SubscriptionCollection):
    """``/v2/topics/{topic}/subscriptions``: create and list."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, topic: str) -> None:
        """Create a subscription (the topic is created if missing): 201 with its id."""
        super().on_post(req, resp, topic)

    def on_get(self, req: falcon.Request, resp: falcon.Response, topic: str) -> None:
        """List a topic's subscriptions by id, with marker pagination."""
        super().on_get(req, resp, topic)


class TopicSubscriptionItem(TopicSubscriptionResource, subscriptions.SubscriptionItem):
    """``/v2/topics/{topic}/subscriptions/{subscription_id}``: get, update, delete."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, topic: str,
               subscription_id: str) -> None:
        """Return one subscription with its delivery state; 404 if absent or expired."""
        super().on_get(req, resp, topic, subscription_id)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, topic: str,
                 subscription_id: str) -> None:
        """Change subscriber, ttl and/or options: 204."""
        super().on_patch(req, resp, topic, subscription_id)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, topic: str,
                  subscription_id: str) -> None:
        """Delete a subscription and its delivery state (idempotent): 204."""
        super().on_delete(req, resp, topic, subscription_id)


class TopicSubscriptionConfirm(TopicSubscriptionResource, subscriptions.SubscriptionConfirm):
    """``PUT /v2/topics/{topic}/subscriptions/{subscription_id}/confirm``."""

    def on_put(self, req: falcon.Request, resp: falcon.Response, topic: str,
               subscription_id: str) -> None:
        """Set ``confirmed`` from ``{"confirmed": bool}``: 204; 404 if absent."""
        super().on_put(req, resp, topic, subscription_id)


class TopicSubscriptionResume(TopicSubscriptionResource, subscriptions.SubscriptionResume):
    """``POST /v2/topics/{topic}/subscriptions/{subscription_id}/resume`` (our extension)."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, topic: str,
                subscription_id: str) -> None:
        """Restart delivery from the first undelivered message: 204; 404 if absent."""
        super().on_post(req, resp, topic, subscription_id)


def routes(settings: Settings, topics: Topics, subs: Subscriptions, clock: Clock) -> list[tuple[str, object]]:
    """Return the topic routes with their resources, over the services ``create_app`` built."""
    t = COLLECTION + "/{topic}"
    s = t + "/subscriptions/{subscription_id}"
    return [
        (COLLECTION, TopicCollection(settings, topics)),
        (t, TopicItem(settings, topics)),
        (t + "/stats", TopicStats(settings, topics)),
        (t + "/purge", TopicPurge(settings, topics)),
        (t + "/messages", TopicMessages(settings, topics)),
        (t + "/messages/{message_id}", TopicMessage(settings, topics)),
        (t + "/subscriptions", TopicSubscriptionCollection(settings, subs, clock)),
        (s, TopicSubscriptionItem(settings, subs, clock)),
        (s + "/confirm", TopicSubscriptionConfirm(settings, subs, clock)),
        (s + "/resume", TopicSubscriptionResume(settings, subs, clock)),
    ]
