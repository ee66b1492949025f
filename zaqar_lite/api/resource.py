"""What every resource over the messaging service starts from."""

from __future__ import annotations

import falcon

from zaqar_lite.api.bodies import MessageRenderer
from zaqar_lite.service import Messaging


class Resource:
    """A resource over the messaging service, with its ``limits`` and ``settings`` at hand.

    The queue name of a route's ``{queue}`` field is checked before any
    responder runs (:class:`zaqar_lite.api.middleware.QueueNameCheck`), so
    responders take it as valid.
    """

    def __init__(self, messaging: Messaging) -> None:
        self.messaging = messaging
        self.limits = messaging.limits
        self.settings = messaging.settings

    def renderer(self, req: falcon.Request, queue: str) -> MessageRenderer:
        """Return the renderer of a request's messages, with the deployment's dead-letter default."""
        return MessageRenderer(req, queue, self.settings.include_dead_letter)
