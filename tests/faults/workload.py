"""The clients of a run: producers post numbered messages, consumers claim them and delete, release
(with a reason) or abandon each one, and a final read lists both queues once the faults have healed.
An extended run also posts to a queue with two webhook subscriptions (a :class:`Receiver` records
every delivery) and starts redrive tasks of the DLQ now and then.

Every request goes into the :class:`~tests.faults.history.History` with its times and answer. The
source queue has ``_max_claim_count`` :data:`MAX_CLAIM_COUNT` and a dead-letter queue, and claims
last :data:`CLAIM_TTL` seconds (the server runs with ``min_claim_ttl = 1``, :data:`SERVER_CONFIG`),
so claims lapse and messages move to the DLQ within a short run.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

from tests.e2e.harness import ApiSession
from tests.faults.history import FAIL, INFO, OK, History, Op

PROJECT, QUEUE, DLQ = "faults", "faults", "faults-dlq"
#: a queue whose messages nobody claims: each expires (ttl :data:`EXPIRY_TTL`) into its DLQ
EXPIRY_QUEUE, EXPIRY_DLQ, EXPIRY_TTL = "faults-expiry", "faults-expiry-dlq", 2
#: a queue nobody claims, with :data:`SUBSCRIBERS` webhook subscriptions (extended runs)
NOTIFY_QUEUE, SUBSCRIBERS = "faults-notify", ("a", "b")
#: seconds between two posts to the subscribed queue, and between two redrive task starts
NOTIFY_EVERY, REDRIVE_EVERY = 1.0, 3.0
MAX_CLAIM_COUNT = 3
CLAIM_TTL, CLAIM_GRACE = 2, 1
#: a client gives up on a request after this long; the server's store timeouts are shorter
CLIENT_TIMEOUT = 15.0
#: short claims, and a sweeper that moves exhausted messages soon after their last claim lapses
SERVER_CONFIG = """\
[server]
sweep_interval = 0.5

[limits]
min_claim_ttl = 1
min_claim_grace = 1
min_message_ttl = 1

[notifier]
allowed_targets = 127.0.0.1
request_timeout = 2
lease_seconds = 6
"""
#: how long the final read keeps trying before it says the server did not recover
RECOVERY_TIMEOUT = 60.0


def _outcome(status: int) -> str:
    if status < 400:
        return OK
    return FAIL if status < 500 else INFO


class Client:
    """One client thread's session, recording each request it makes."""

    def __init__(self, url: str, history: History, process: str) -> None:
        self.session = ApiSession(url, project=PROJECT)
        self.history = history
        self.process = process

    def request(self, f: str, method: str, path: str, value: dict[str, Any],
                **kwargs: Any) -> tuple[requests.Response | None, Op]:
        """Send a request and record it; return the response (None without one) and its operation."""
        invoke = self.history.now()
        try:
            response = self.session.request(method, path, timeout=CLIENT_TIMEOUT, **kwargs)
        except requests.RequestException as exc:
            op = Op(self.process, f, invoke, self.history.now(), INFO, None,
                    {**value, "error": f"{type(exc).__name__}: {exc}"[:300]})
            self.history.add(op)
            return None, op
        op = Op(self.process, f, invoke, self.history.now(), _outcome(response.status_code),
                response.status_code, value)
        self.history.add(op)
        return response, op

    def close(self) -> None:
        self.session.close()


def set_up(url: str) -> None:
    """Create the queues (before any fault)."""
    with ApiSession(url, project=PROJECT) as api:
        api.put(f"/v2/queues/{DLQ}").raise_for_status()
        api.put(f"/v2/queues/{QUEUE}", json={"_max_claim_count": MAX_CLAIM_COUNT,
                                             "_dead_letter_queue": DLQ}).raise_for_status()
        api.put(f"/v2/queues/{EXPIRY_DLQ}").raise_for_status()
        # a message moved on expiry gets its ttl again in the DLQ: this one keeps it there an hour
        api.put(f"/v2/queues/{EXPIRY_QUEUE}", json={
            "_dead_letter_on_expiry": True, "_dead_letter_queue": EXPIRY_DLQ,
            "_dead_letter_queue_messages_ttl": 3600}).raise_for_status()


class Receiver:
    """The webhook subscribers: an HTTP server on 127.0.0.1 that answers 204 to every delivery and
    records it in the history (``deliver``: the subscription, the message id and body number, when)."""

    def __init__(self, history: History) -> None:
        self.history = history
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                at = receiver.history.now()
                value = {"subscription_id": self.headers.get("X-Zaqar-Lite-Subscription-Id"),
                         "path": self.path, "id": self.headers.get("X-Zaqar-Lite-Message-Id"),
                         "n": json.loads(body)["body"]["n"]}
                receiver.history.add(Op("webhook", "deliver", at, at, OK, 204, value))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def subscribe(url: str, history: History, receiver: Receiver) -> None:
    """Subscribe the receiver to the notified queue (before any fault), recording each subscription."""
    client = Client(url, history, "subscriber")
    for name in SUBSCRIBERS:
        response, op = client.request("subscribe", "POST", f"/v2/queues/{NOTIFY_QUEUE}/subscriptions",
                                      {"subscriber": f"{receiver.url}/{name}"},
                                      json={"subscriber": f"{receiver.url}/{name}", "ttl": 3600})
        assert response is not None and response.status_code == 201, response
        op.value["subscription_id"] = response.json()["subscription_id"]
    client.close()


def _message(entry: dict[str, Any]) -> dict[str, Any]:
    return {"id": entry["href"].split("?")[0].rsplit("/", 1)[1], "n": entry["body"]["n"],
            "claim_count": entry["claim_count"]}


class Workload:
    """Producers and consumers running until :meth:`stop`."""

    def __init__(self, url: str, history: History, seed: int, producers: int = 2, consumers: int = 2,
                 extended: bool = False) -> None:
        self.url = url
        self.history = history
        self.stopping = threading.Event()
        self.numbers = itertools.count(1)
        self.threads = [threading.Thread(target=self._produce, args=(f"producer-{i}",), daemon=True)
                        for i in range(producers)]
        if extended:
            self.threads += [threading.Thread(target=self._produce_notified, args=("herald-0",), daemon=True),
                             threading.Thread(target=self._redrive, args=("redriver-0", seed), daemon=True)]
        self.threads.append(threading.Thread(target=self._produce_expiring, args=("expirer-0",), daemon=True))
        self.threads += [threading.Thread(target=self._consume, args=(f"consumer-{i}", seed * 100 + i),
                                          daemon=True) for i in range(consumers)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(CLIENT_TIMEOUT * 3)

    def _produce(self, process: str) -> None:
        client = Client(self.url, self.history, process)
        while not self.stopping.is_set():
            n = next(self.numbers)
            value: dict[str, Any] = {"n": n, "id": None}
            response, op = client.request("post", "POST", f"/v2/queues/{QUEUE}/messages", value,
                                          json={"messages": [{"body": {"n": n}, "ttl": 3600}]})
            if response is not None and op.outcome == OK:
                op.value["id"] = response.json()["resources"][0].rsplit("/", 1)[1]
            if op.outcome != OK:
                self.stopping.wait(0.2)
        client.close()

    def _produce_expiring(self, process: str) -> None:
        """Post messages nobody claims to the expiry queue, every 0.2 s: each must end in its DLQ."""
        client = Client(self.url, self.history, process)
        while not self.stopping.is_set():
            n = next(self.numbers)
            value: dict[str, Any] = {"n": n, "id": None}
            response, op = client.request("post-expiring", "POST", f"/v2/queues/{EXPIRY_QUEUE}/messages",
                                          value, json={"messages": [{"body": {"n": n}, "ttl": EXPIRY_TTL}]})
            if response is not None and op.outcome == OK:
                op.value["id"] = response.json()["resources"][0].rsplit("/", 1)[1]
            self.stopping.wait(0.2)
        client.close()

    def _produce_notified(self, process: str) -> None:
        """Post to the subscribed queue every :data:`NOTIFY_EVERY` s: each acknowledged post must
        reach every subscription, in order."""
        client = Client(self.url, self.history, process)
        while not self.stopping.is_set():
            n = next(self.numbers)
            value: dict[str, Any] = {"n": n, "id": None}
            response, op = client.request("post-notified", "POST", f"/v2/queues/{NOTIFY_QUEUE}/messages",
                                          value, json={"messages": [{"body": {"n": n}, "ttl": 3600}]})
            if response is not None and op.outcome == OK:
                op.value["id"] = response.json()["resources"][0].rsplit("/", 1)[1]
            self.stopping.wait(NOTIFY_EVERY)
        client.close()

    def _redrive(self, process: str, seed: int) -> None:
        """Start a redrive task of the DLQ back to its source now and then (a 409 while one runs)."""
        client = Client(self.url, self.history, process)
        choose = random.Random(seed)
        while not self.stopping.wait(choose.uniform(0.5, 2) * REDRIVE_EVERY):
            response, op = client.request("redrive", "POST", f"/v2/queues/{DLQ}/redrive", {"task_id": None},
                                          json={"async": True})
            if response is not None and response.status_code == 202:
                op.value["task_id"] = response.json()["id"]
        client.close()

    def _consume(self, process: str, seed: int) -> None:
        client = Client(self.url, self.history, process)
        choose = random.Random(seed)
        while not self.stopping.is_set():
            value: dict[str, Any] = {"ttl": CLAIM_TTL, "claim_id": None, "messages": []}
            response, op = client.request("claim", "POST", f"/v2/queues/{QUEUE}/claims?limit=5", value,
                                          json={"ttl": CLAIM_TTL, "grace": CLAIM_GRACE})
            if response is None or response.status_code != 201:
                self.stopping.wait(0.2)
                continue
            claim_id = response.headers["Location"].rsplit("/", 1)[1]
            op.value["claim_id"] = claim_id
            op.value["messages"] = [_message(m) for m in response.json()["messages"]]
            for message in op.value["messages"]:
                self._finish(client, choose, message["id"], claim_id)

    def _finish(self, client: Client, choose: random.Random, message_id: str, claim_id: str) -> None:
        """Delete, release with a reason, or abandon (let the claim lapse) one claimed message."""
        roll = choose.random()
        path = f"/v2/queues/{QUEUE}/messages/{message_id}"
        value = {"id": message_id, "claim_id": claim_id}
        if roll < 0.4:
            client.request("delete", "DELETE", f"{path}?claim_id={claim_id}", value)
        elif roll < 0.7:
            client.request("release", "POST", f"{path}/release?claim_id={claim_id}", value,
                           json={"error": "the workload gave it back", "error_type": "Fault"})


def _list_all(api: ApiSession, queue: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    path = f"/v2/queues/{queue}/messages?include_claimed=true&echo=true&limit=20"
    while True:
        response = api.get(path, timeout=CLIENT_TIMEOUT)
        response.raise_for_status()
        if response.status_code == 204 or not response.json()["messages"]:
            return messages
        page = response.json()
        messages += [_message(m) for m in page["messages"]]
        path = next(link["href"] for link in page["links"] if link["rel"] == "next")


def _redrive_tasks(api: ApiSession) -> list[dict[str, Any]]:
    """Return the DLQ's redrive tasks once none is running (raise while one is)."""
    response = api.get(f"/v2/queues/{DLQ}/redrive/tasks", timeout=CLIENT_TIMEOUT)
    response.raise_for_status()
    tasks: list[dict[str, Any]] = response.json()["tasks"]
    if any(task["status"] == "running" for task in tasks):
        raise ValueError("a redrive task is still running")
    return [{k: task[k] for k in ("id", "status", "moved", "remaining", "error")} for task in tasks]


def final_read(url: str, history: History, settle: float, extended: bool = False) -> None:
    """Once the faults have healed, wait ``settle`` seconds (claims lapse, the sweeper moves what is
    exhausted), then list both queues, retrying until :data:`RECOVERY_TIMEOUT`. An extended run
    first waits for its redrive tasks to end (a task moving messages while the queues are listed
    would hide them), and lists them."""
    time.sleep(settle)
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    with ApiSession(url, project=PROJECT) as api:
        while True:
            invoke = history.now()
            try:
                tasks = _redrive_tasks(api) if extended else None
                value = {"queue": _list_all(api, QUEUE), "dlq": _list_all(api, DLQ),
                         "expiring": _list_all(api, EXPIRY_QUEUE), "expired": _list_all(api, EXPIRY_DLQ)}
                if tasks is not None:
                    value["redrive_tasks"] = tasks
            except (requests.RequestException, KeyError, ValueError) as exc:
                if time.monotonic() > deadline:
                    history.add(Op("final", "read", invoke, history.now(), INFO, None, {"error": str(exc)}))
                    return
                time.sleep(1)
                continue
            history.add(Op("final", "read", invoke, history.now(), OK, 200, value))
            return
