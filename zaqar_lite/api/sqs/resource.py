"""The SQS face's endpoints: ``POST /`` (and ``GET /?Action=...``) and the queue URLs ``/{account}/{queue}``.

A request that is no SQS call gets the answer it got before the face existed
(``GET /``: the versions document; another path: 404).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

import falcon

from zaqar_lite import errors
from zaqar_lite.api.sqs import credentials, wire
from zaqar_lite.api.sqs import errors as sqs_errors
from zaqar_lite.api.sqs.actions import UNSUPPORTED, SqsActions
from zaqar_lite.api.sqs.base import Caller
from zaqar_lite.api.versions import VERSIONS
from zaqar_lite.clock import Clock
from zaqar_lite.config import Settings
from zaqar_lite.rules.sqs import names as sqs_names

LOG = logging.getLogger(__name__)
FORM = "application/x-www-form-urlencoded"
#: the actions a queue URL does not serve (they name no queue), as SQS answers them there
NOT_ON_A_QUEUE = ("CreateQueue", "ListQueues")
#: the first path segments of the Zaqar API's own routes: no queue URL of SQS starts with them


def wants_json(req: falcon.Request) -> bool:
    """Return whether a query-protocol call asks for its answer in JSON (``Accept: application/json``)."""
    accept = req.get_header("Accept") or ""
    return "application/json" in accept and "xml" not in accept


class SqsFace:
    """Reads SQS calls, checks who makes them, runs their action and answers in the call's protocol."""

    def __init__(self, settings: Settings, actions: SqsActions, clock: Clock) -> None:
        self.settings = settings
        self.actions = actions.table()
        self.clock = clock
        self.keys = credentials.keys_of(settings)

    def answer(self, req: falcon.Request, resp: falcon.Response, queue_path: tuple[str, str] | None,
               queue_region: str | None = None) -> bool:
        """Answer an SQS call; return False (nothing answered) when the request is none."""
        target = req.get_header("X-Amz-Target")
        content_type = (req.content_type or "").split(";")[0].strip().lower()
        is_json = wire.is_json_call(target) or content_type == wire.JSON_TYPE
        if not is_json and content_type != FORM and "Action" not in req.params:
            return False
        request_id = str(uuid.uuid4())
        body = b""
        try:
            body = self._body(req)
            form = body if content_type == FORM else b""
            call = wire.read_json(target or "", body) if is_json \
                else wire.read_query(wire.form_params(form, req.query_string))
            if not call.action:
                return False
            caller = self._caller(req, body, queue_path, queue_region)
            action = self.actions.get(call.action)
            if queue_path is not None and call.action in NOT_ON_A_QUEUE:
                raise errors.SqsRefused("InvalidAction", f"The action {call.action} is not valid for this "
                                        "endpoint.")
            if action is None:
                code = "UnsupportedOperation" if call.action in UNSUPPORTED else "InvalidAction"
                where = "web service" if queue_path is None else "endpoint"  # a queue URL is SQS's endpoint
                raise errors.SqsRefused(code, UNSUPPORTED.get(
                    call.action, f"The action {call.action} is not valid for this {where}."))
            result = action(caller, call.params)
        except errors.ZaqarLiteError as exc:
            self._error(resp, sqs_errors.from_domain(exc), is_json, request_id, wants_json(req))
            return True
        resp.status = falcon.HTTP_200
        resp.set_header("x-amzn-RequestId", request_id)
        if is_json:
            resp.content_type = wire.JSON_TYPE
            resp.data = wire.json_answer(result)
        elif wants_json(req):
            resp.content_type = "application/json"
            resp.data = wire.query_json_answer(call.action, result, request_id)
        else:
            resp.content_type = wire.XML_TYPE
            resp.data = wire.xml_answer(call.action, result, request_id)
        return True

    @staticmethod
    def _body(req: falcon.Request) -> bytes:
        length = req.content_length or 0
        if length > wire.MAX_BODY:
            raise errors.SqsRefused("BatchRequestTooLong", f"The request body may not exceed {wire.MAX_BODY} "
                                    "bytes.")
        return req.bounded_stream.read() if length else b""

    def _caller(self, req: falcon.Request, body: bytes, queue_path: tuple[str, str] | None,
                queue_region: str | None = None) -> Caller:
        params: Mapping[str, Any] = req.params
        credential = params.get("X-Amz-Credential") or params.get("AWSAccessKeyId")
        signed = sqs_names.access_key_of(req.get_header("Authorization"),
                                         credential if isinstance(credential, str) else None)
        key, region = signed if signed is not None else (None, None)
        account, secret = credentials.account_of(self.settings, key, self.keys)
        if secret is not None and key is not None:
            credentials.check_signature(
                req.method, req.url, {name.lower(): value for name, value in req.headers.items()}, body,
                {k: v for k, v in params.items() if isinstance(v, str)}, secret, key,
                region or self.settings.sqs.region, "sqs", self.clock(), self.settings.sqs.max_clock_skew)
        return Caller(account=account, region=region or self.settings.sqs.region, base_url=req.prefix,
                      restricted=secret is not None, queue_path=queue_path, queue_region=queue_region,
                      trace_header=req.get_header("X-Amzn-Trace-Id"))

    @staticmethod
    def _error(resp: falcon.Response, error: sqs_errors.SqsError, is_json: bool, request_id: str,
               as_json: bool = False) -> None:
        resp.status = falcon.code_to_http_status(error.status)
        resp.set_header("x-amzn-RequestId", request_id)
        resp.set_header("x-amzn-query-error", error.query_header)
        if is_json:
            resp.content_type = wire.JSON_TYPE
            resp.data = wire.json_error(error.json_type, error.message)
        elif as_json:
            resp.content_type = "application/json"
            resp.data = wire.query_json_error(error.query_code or error.code, error.query_message,
                                              error.sender, request_id)
        else:
            resp.content_type = wire.XML_TYPE
            resp.data = wire.xml_error(error.query_code or error.code, error.query_message, error.sender,
                                       request_id)


class RootEndpoint:
    """``/``: the versions document for ``GET``, the SQS endpoint for its calls."""

    #: answered without Client-ID, project or token: SQS calls carry their own credentials
    public = True

    def __init__(self, face: SqsFace) -> None:
        self.face = face

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Answer an SQS call sent as a GET, else the versions document."""
        if "Action" in req.params and self.face.answer(req, resp, None):
            return
        resp.status = falcon.HTTP_300
        resp.media = VERSIONS

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Answer an SQS call."""
        if not self.face.answer(req, resp, None):
            raise falcon.HTTPMethodNotAllowed(["GET"])


#: a queue URL: an account (no dot, not a first segment of the Zaqar API's) and a queue name, after
#: ``queue/<region>/`` for a queue of another region than the home region's. A
#: sink, not a route: falcon tries it only when no route matches, so every Zaqar path keeps its
#: answer (and its metrics' route label), and a queue URL answers what SQS answers there
QUEUE_URL = (r"^/(?!(?:v2|console|metrics)/)(?:queue/(?P<region>[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2})/)?"
             r"(?P<account>[A-Za-z0-9_-]+)/(?P<sqs_queue>[A-Za-z0-9_-][A-Za-z0-9_.-]*)$")


class QueueEndpoint:
    """``/{account}/{queue}``: a queue URL, where the query protocol may send a call (a falcon sink)."""

    def __init__(self, face: SqsFace) -> None:
        self.face = face

    def __call__(self, req: falcon.Request, resp: falcon.Response, **path: Any) -> None:
        """Answer an SQS call sent to a queue URL; a GET without one is SQS's 404, anything else Zaqar's."""
        queue = (str(path["account"]), str(path["sqs_queue"]))
        region = path.get("region")
        if req.method in ("GET", "POST") and self.face.answer(req, resp, queue, region):
            return
        if req.method != "GET":
            raise falcon.HTTPRouteNotFound()
        resp.status = falcon.HTTP_404
        resp.content_type = wire.XML_TYPE
        resp.data = b'<?xml version="1.0"?><UnknownOperationException/>'


def endpoints(settings: Settings, actions: SqsActions, clock: Clock) -> tuple[RootEndpoint, QueueEndpoint]:
    """Return the SQS face's route ``/`` and its queue-URL sink (:data:`QUEUE_URL`), over one face."""
    face = SqsFace(settings, actions, clock)
    return RootEndpoint(face), QueueEndpoint(face)
