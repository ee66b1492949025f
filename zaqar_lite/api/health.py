"""Ping and health."""

from __future__ import annotations

import falcon

from zaqar_lite import errors
from zaqar_lite.api.middleware import require_admin
from zaqar_lite.api.resource import Resource
from zaqar_lite.service import Messaging
from zaqar_lite.service.pools import PoolAdmin


class Ping(Resource):
    """``GET|HEAD /v2/ping``: 204 when the store answers, 503 when it does not.

    The 503 is the error every other route answers when the store is down (a
    JSON body with title and description, ``Retry-After``), so its JSON content
    type describes a body that is there.
    """

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Answer 204 or 503."""
        if not self.messaging.ping():
            raise errors.StorageUnavailable("ping: the store did not answer")
        resp.status = falcon.HTTP_204

    on_head = on_get


class Health(Resource):
    """``GET /v2/health``: store reachability and this project's message volume (admin).

    With pools (``[pools] enabled``) it is also Zaqar's detailed health: the
    catalog's reachability and, under each pool's name, whether its store
    answers and the message counts of each of its queues.
    """

    def __init__(self, messaging: Messaging, pools: PoolAdmin | None, store_name: str) -> None:
        """``pools`` is the pool administration (None without pools), ``store_name`` the driver's name."""
        super().__init__(messaging)
        self.pools = pools
        self.store_name = store_name

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Return the health document."""
        require_admin(req)
        reachable = self.messaging.ping()
        body: dict[str, object] = {"storage_reachable": reachable,
                                   "storage": self.store_name}
        if reachable:
            try:
                body["message_volume"] = self.messaging.message_volume(req.context.project)
            except errors.StorageUnavailable:
                if self.pools is None:
                    raise
                # a pool is down: its entry below says which, and the project's sum is left out
        if self.pools is not None:
            body.update(self.pools.health())
        resp.media = body
