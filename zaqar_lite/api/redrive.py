"""The redrive resource (our extension, SPEC 1.8): dead letters back to their queues."""

from __future__ import annotations

import falcon

from zaqar_lite.api import schemas
from zaqar_lite.api.bodies import MessageRenderer, read_json
from zaqar_lite.api.resource import Resource


class QueueRedrive(Resource):
    """``POST /v2/queues/{queue}/redrive``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Redrive the selected dead letters (200 ``{"redriven": n}``), or preview them with ``dry_run``.

        A dry run answers ``{"matched": n, "sample": [...]}``: the first
        messages selected, as listed in the queue, each with the
        ``destination`` it would go to and, unless ``include_dead_letter=false``,
        its provenance: no Zaqar client calls this route, and the sample is
        there to be read.
        """
        render = MessageRenderer(req, queue, default_dead_letter=True)
        document, _ = read_json(req, schemas.redrive_body_size(self.limits))
        request = schemas.redrive_request(document, queue, self.limits)
        result, now = self.messaging.redrive(req.context.project, queue, request)
        if not request.dry_run:
            resp.media = {"redriven": result.redriven}
            return
        sample = [{**render(message, now), "destination": target} for message, target in result.sample]
        resp.media = {"matched": result.matched, "sample": sample}
