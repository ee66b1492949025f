"""What every resource starts from: the settings it reads, and for most the messaging service."""

from __future__ import annotations

import falcon

from zaqar_lite.api.bodies import MessageRenderer
from zaqar_lite.config import Settings
from zaqar_lite.service import Messaging


class ResourceBase:
    """A resource with its ``settings`` and their ``limits`` at hand; the services it calls come in too.

    The queue name of a route's ``{queue}`` field is checked before any
    responder runs (:class:`zaqar_lite.api.middleware.QueueNameCheck`), so
    responders take it as valid.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.limits = settings.limits

    def renderer(self, req: falcon.Request, queue: str) -> MessageRenderer:
        """Return the renderer of a request's messages, with the deployment's dead-letter default."""
        return MessageRenderer(req, queue, self.settings.include_dead_letter)


class Resource(ResourceBase):
    """A resource over the messaging service."""

    def __init__(self, messaging: Messaging) -> None:
        super().__init__(messaging.settings)
        self.messaging = messaging
