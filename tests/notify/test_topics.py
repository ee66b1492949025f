"""A topic's messages reach every subscription of the topic: a webhook, and a queue it fans out into.

A real ``zaqar-lite serve`` and a real notifier process share one SQLite
store. The fan-out subscriber is Zaqar's ``trust+http://.../v2/queues/Q/messages``
with a ``post_data`` template, pointing at the server itself; the queue it
fills is read with the unmodified python-zaqarclient, and its dead-letter
queue takes the messages claimed too often, as any queue's does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from zaqarclient.queues import client as zaqar

from tests.notify.conftest import NotifierProcesses, wait_until

#: what a subscriber of topic ``news`` gets for the three messages posted, in order (Zaqar's webhook body)
NOTIFICATIONS = [{"body": {"n": n}, "ttl": 300, "queue_name": "news", "Message_Type": "Notification"}
                 for n in (0, 1, 2)]


@pytest.fixture(scope="module")
def notifier(storage_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotifierProcesses]:
    """One notifier process serving every test of the module (each test has its own project)."""
    processes = NotifierProcesses(storage_uri, tmp_path_factory.mktemp("notifier"))
    processes.start()
    yield processes
    processes.stop_all()


def created(result) -> None:
    assert result.status_code == 201, result.text


def total(api, path: str) -> int:
    return int(api.get(path + "/stats").json()["messages"]["total"])


def test_a_topic_message_reaches_a_webhook_and_fans_out_into_a_queue_with_its_dlq(api, receiver, notifier,
                                                                                  server):
    project = api.headers["X-Project-ID"]
    created(api.put("/v2/queues/fan-dlq"))
    created(api.put("/v2/queues/fan", json={"_max_claim_count": 1, "_dead_letter_queue": "fan-dlq"}))
    created(api.put("/v2/queues/news"))  # a queue named as the topic: it gets none of the topic's messages
    created(api.post("/v2/queues/news/subscriptions", json={"subscriber": receiver.url("queue-news")}))
    created(api.post("/v2/topics/news/subscriptions", json={"subscriber": receiver.url("hook")}))
    fan_out = {"subscriber": f"trust+{server.url}/v2/queues/fan/messages",
               "options": {"post_data": {"messages": [{"body": "$zaqar_message$", "ttl": 900}]},
                           "post_headers": {"X-Project-ID": project, "Client-ID": str(uuid.uuid4())}}}
    created(api.post("/v2/topics/news/subscriptions", json=fan_out))

    posted = api.post("/v2/topics/news/messages",
                      json={"messages": [{"body": {"n": n}, "ttl": 300} for n in range(3)]})
    assert posted.status_code == 201, posted.text
    ids = [href.rsplit("/", 1)[1] for href in posted.json()["resources"]]

    wait_until(lambda: len(receiver.acknowledged("hook")) >= 3, 30, "three webhooks")
    wait_until(lambda: total(api, "/v2/queues/fan") == 3, 30, "three messages in the fanned-out queue")
    hooks = receiver.acknowledged("hook")
    assert [d.body for d in hooks] == NOTIFICATIONS
    assert [d.headers["X-Zaqar-Lite-Message-Id"] for d in hooks] == ids
    assert receiver.deliveries("queue-news") == []
    assert total(api, "/v2/queues/news") == 0

    client = zaqar.Client(server.url, version=2,
                          conf={"auth_opts": {"backend": "noauth", "options": {"os_project_id": project}}})
    fan = client.queue("fan")
    claim = fan.claim(ttl=60, grace=60, limit=3)
    claimed = list(claim)
    assert [m.body for m in claimed] == NOTIFICATIONS
    for message in claimed:
        released = api.post(f"/v2/queues/fan/messages/{message.id}/release", params={"claim_id": claim.id})
        assert released.status_code == 204, released.text
    assert list(fan.claim(ttl=60, grace=60, limit=3)) == []  # each was claimed once already: dead-lettered
    assert total(api, "/v2/queues/fan-dlq") == 3
    assert total(api, "/v2/queues/fan") == 0
    assert total(api, "/v2/topics/news") == 3  # the topic keeps its messages until their ttl runs out
