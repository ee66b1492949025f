"""Pre-signed URLs: ``POST /v2/queues/{queue}/share`` (Zaqar's), a signature usable instead of a token."""

from __future__ import annotations

import falcon

from zaqar_lite.api import schemas
from zaqar_lite.api.bodies import read_json
from zaqar_lite.api.resource import ResourceBase
from zaqar_lite.clock import Clock
from zaqar_lite.config import Settings
from zaqar_lite.errors import Forbidden
from zaqar_lite.rules import signed_urls


class QueueShare(ResourceBase):
    """``POST /v2/queues/{queue}/share``: sign a grant of some paths and methods of a queue until a time."""

    def __init__(self, settings: Settings, clock: Clock) -> None:
        super().__init__(settings)
        self.clock = clock

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Answer Zaqar's body: ``signature``, ``expires``, ``paths``, ``methods``, ``project``.

        Without ``[signed_urls] secret_key`` there is nothing to sign with: 403,
        saying so. The queue need not exist (as Zaqar).
        """
        key = self.settings.signed_url_secret_key
        if not key:
            raise Forbidden(signed_urls.DISABLED)
        document, _ = read_json(req, schemas.SHARE_BODY_SIZE)
        grant = signed_urls.grant_for_share(queue, req.context.project, self.clock(),
                                            **schemas.share_request(document),
                                            max_lifetime=self.settings.signed_url_max_lifetime)
        resp.media = {
            "signature": signed_urls.sign(key, grant),
            "expires": grant.expires,
            "paths": list(grant.paths),
            "methods": list(grant.methods),
            "project": grant.project,
        }
