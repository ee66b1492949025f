"""The versions document (``GET /``) and the v2 JSON-Home document (``GET /v2/``)."""

from __future__ import annotations

import json

import falcon

VERSIONS = {
    "versions": [{
        "id": "2",
        "status": "CURRENT",
        "updated": "2014-09-24T04:06:47Z",
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.messaging-v2+json"}],
        "links": [{"rel": "self", "href": "/v2/"}],
    }]
}


def _resource(template: str, hints: list[str], **variables: str) -> dict[str, object]:
    return {
        "href-template": template,
        "href-vars": variables,
        "hints": {"allow": hints, "formats": {"application/json": {}}},
    }


QUEUE = "param/queue_name"
HOME = {
    "resources": {
        "rel/queues": _resource("/v2/queues{?marker,limit,detailed,name,with_count}", ["GET"],
                                marker="param/marker", limit="param/queue_limit", detailed="param/detailed"),
        "rel/queue": _resource("/v2/queues/{queue_name}", ["PUT", "GET", "PATCH", "DELETE"],
                               queue_name=QUEUE),
        "rel/queue_stats": _resource("/v2/queues/{queue_name}/stats", ["GET"], queue_name=QUEUE),
        "rel/queue_share": _resource("/v2/queues/{queue_name}/share", ["POST"], queue_name=QUEUE),
        "rel/queue_purge": _resource("/v2/queues/{queue_name}/purge", ["POST"], queue_name=QUEUE),
        "rel/queue_redrive": _resource("/v2/queues/{queue_name}/redrive", ["POST"], queue_name=QUEUE),
        "rel/redrive_tasks": _resource("/v2/redrive/tasks", ["GET"]),
        "rel/queue_redrive_tasks": _resource("/v2/queues/{queue_name}/redrive/tasks", ["GET"],
                                             queue_name=QUEUE),
        "rel/queue_redrive_task": _resource("/v2/queues/{queue_name}/redrive/tasks/{task_id}", ["GET"],
                                            queue_name=QUEUE, task_id="param/task_id"),
        "rel/queue_redrive_task_cancel": _resource(
            "/v2/queues/{queue_name}/redrive/tasks/{task_id}/cancel", ["POST"],
            queue_name=QUEUE, task_id="param/task_id"),
        "rel/messages": _resource(
            "/v2/queues/{queue_name}/messages{?marker,limit,echo,include_claimed,include_delayed,ids,pop}",
            ["GET", "POST", "DELETE"], queue_name=QUEUE),
        "rel/message": _resource("/v2/queues/{queue_name}/messages/{message_id}{?claim_id}",
                                 ["GET", "PATCH", "DELETE"], queue_name=QUEUE,
                                 message_id="param/message_id"),
        "rel/message_release": _resource(
            "/v2/queues/{queue_name}/messages/{message_id}/release{?claim_id}", ["POST"],
            queue_name=QUEUE, message_id="param/message_id"),
        "rel/claims": _resource("/v2/queues/{queue_name}/claims{?limit}", ["POST"], queue_name=QUEUE),
        "rel/claim": _resource("/v2/queues/{queue_name}/claims/{claim_id}", ["GET", "PATCH", "DELETE"],
                               queue_name=QUEUE, claim_id="param/claim_id"),
        "rel/subscriptions": _resource("/v2/queues/{queue_name}/subscriptions{?marker,limit}",
                                       ["GET", "POST"], queue_name=QUEUE),
        "rel/subscription": _resource("/v2/queues/{queue_name}/subscriptions/{subscription_id}",
                                      ["GET", "PATCH", "DELETE"], queue_name=QUEUE,
                                      subscription_id="param/subscription_id"),
        "rel/subscription_confirm": _resource(
            "/v2/queues/{queue_name}/subscriptions/{subscription_id}/confirm", ["PUT"],
            queue_name=QUEUE, subscription_id="param/subscription_id"),
        "rel/subscription_resume": _resource(
            "/v2/queues/{queue_name}/subscriptions/{subscription_id}/resume", ["POST"],
            queue_name=QUEUE, subscription_id="param/subscription_id"),
        "rel/subscriber_resume": _resource("/v2/subscriptions/resume", ["POST"]),
        "rel/ping": _resource("/v2/ping", ["GET", "HEAD"]),
        "rel/health": _resource("/v2/health", ["GET"]),
    }
}


class VersionsResource:
    """``GET /``: the API versions, answered with 300 Multiple Choices as Zaqar does."""

    #: answered without Client-ID, project or token (see api/middleware.py)
    public = True

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Return the versions document."""
        resp.status = falcon.HTTP_300
        resp.media = VERSIONS


class HomeResource:
    """``GET /v2/``: the JSON-Home document listing the v2 resources."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Return the JSON-Home document."""
        resp.content_type = "application/json-home"
        resp.text = json.dumps(HOME)
