"""A storage-free falcon app with zaqar-lite's benchmarked routes, served like zaqar-lite.

It answers the requests of ``http_load.py`` with fixed bodies and the status
codes zaqar-lite gives, so the pair measures what zaqar-lite adds on top of
HTTP parsing, falcon routing and gunicorn. It runs under zaqar-lite's own
gunicorn application class with only ``load()`` replaced, so workers, worker
class and every other gunicorn option are the same by construction.

Usage: ``python benchmarks/minimal_app.py --bind 127.0.0.1:8889 --workers 2``
"""

from __future__ import annotations

import argparse

import falcon

from zaqar_lite.config import load_settings
from zaqar_lite.server.gunicorn import Server

MESSAGE_ID = "6b0e4a3c-1f1d-4f4e-9c53-0d6e8f6f2a11"
CLAIM_ID = "a4b9c2d0-8d3e-4a0b-b1f7-5e2c7d9e0f33"


class Ping:
    """``/v2/ping``: always healthy."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Answer 204."""
        resp.status = falcon.HTTP_204

    on_head = on_get


class MessageCollection:
    """``/v2/queues/{queue}/messages``: POST answers one created message."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Answer 201 as if one message had been posted."""
        resp.status = falcon.HTTP_201
        resp.location = f"/v2/queues/{queue}/messages?ids={MESSAGE_ID}"
        resp.media = {"resources": [f"/v2/queues/{queue}/messages/{MESSAGE_ID}"]}


class MessageItem:
    """``/v2/queues/{queue}/messages/{message_id}``: DELETE always succeeds."""

    def on_delete(self, req: falcon.Request, resp: falcon.Response, queue: str, message_id: str) -> None:
        """Answer 204."""
        resp.status = falcon.HTTP_204


class ClaimCollection:
    """``/v2/queues/{queue}/claims``: POST always claims ``limit`` messages (1 by default), the same ones."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Answer 201 with ``limit`` claimed messages whose hrefs carry the claim id."""
        limit = req.get_param_as_int("limit", min_value=1, max_value=20) or 1
        resp.status = falcon.HTTP_201
        resp.location = f"/v2/queues/{queue}/claims/{CLAIM_ID}"
        messages = []
        for n in range(limit):
            message_id = MESSAGE_ID[:-2] + f"{n:02d}" if n else MESSAGE_ID
            href = f"/v2/queues/{queue}/messages/{message_id}?claim_id={CLAIM_ID}"
            messages.append({"id": message_id, "href": href, "ttl": 3600, "age": 0,
                             "body": {"event": "bench", "n": 1}, "claim_count": 1})
        resp.media = {"messages": messages}


def create_app(messages: object | None = None) -> falcon.App:
    """Build the app with the same URI templates as zaqar-lite; ``messages`` serves the messages'
    collection in place of :class:`MessageCollection` (``floor_app.py``)."""
    app = falcon.App()
    q = "/v2/queues/{queue}"
    app.add_route("/v2/ping", Ping())
    app.add_route(q + "/messages", messages or MessageCollection())
    app.add_route(q + "/messages/{message_id}", MessageItem())
    app.add_route(q + "/claims", ClaimCollection())
    return app


class MinimalServer(Server):
    """zaqar-lite's gunicorn application serving the minimal app instead."""

    def load(self) -> falcon.App:
        """Build the minimal app inside a worker."""
        return create_app()


def main(argv: list[str] | None = None) -> None:
    """Serve the minimal app until stopped."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True, help="HOST:PORT to listen on")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    args = parser.parse_args(argv)
    MinimalServer(load_settings(None, bind=args.bind, workers=args.workers)).run()


if __name__ == "__main__":
    main()
