"""Topics through a real server on the suite's store, beside queues that python-zaqarclient sees.

python-zaqarclient 4.7 has no topic calls, so topics are driven over HTTP;
the client shows that a queue named as a topic, and the project's queue
listing, see nothing of the topic.
"""

from __future__ import annotations

from typing import Any

from zaqarclient.queues import client as zaqar

from tests.e2e.harness import ApiSession, RunningServer


def zaqar_client(server: RunningServer, project: str) -> Any:
    return zaqar.Client(server.url, version=2,
                        conf={"auth_opts": {"backend": "noauth", "options": {"os_project_id": project}}})


def test_a_topic_lives_beside_a_queue_of_its_name_on_the_store(server: RunningServer, api: ApiSession,
                                                                 project: str, queue_name: str) -> None:
    client = zaqar_client(server, project)
    queue = client.queue(queue_name, force_create=True)
    queue.post([{"body": "to the queue", "ttl": 600}])
    assert api.put(f"/v2/topics/{queue_name}", json={"team": "t"}).status_code == 201
    subscribed = api.post(f"/v2/topics/{queue_name}/subscriptions",
                          json={"subscriber": "http://127.0.0.1:9/hook"})
    assert subscribed.status_code == 201, subscribed.text
    posted = api.post(f"/v2/topics/{queue_name}/messages",
                      json={"messages": [{"body": n, "ttl": 600} for n in (1, 2)]})
    assert posted.status_code == 201, posted.text
    first = posted.json()["resources"][0]

    stats = api.get(f"/v2/topics/{queue_name}/stats").json()["messages"]
    assert (stats["total"], stats["oldest"]["href"]) == (2, first)
    assert queue.stats["messages"]["total"] == 1
    listed, count = client.queues(with_count=True)
    assert ([q.name for q in listed], count) == ([queue_name], 1)
    topics = api.get("/v2/topics").json()["topics"]
    assert topics == [{"name": queue_name, "href": f"/v2/topics/{queue_name}"}]
    assert [s.id for s in queue.subscriptions()] == []
    assert api.get(f"/v2/topics/{queue_name}").json()["team"] == "t"

    assert api.delete(f"/v2/topics/{queue_name}").status_code == 204
    assert api.get(f"/v2/topics/{queue_name}").status_code == 404
    assert api.get(f"/v2/topics/{queue_name}/subscriptions").json()["subscriptions"] == []
    assert queue.stats["messages"]["total"] == 1
