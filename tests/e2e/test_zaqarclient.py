"""The unmodified python-zaqarclient (v2, noauth) against a real server.

What the client sends and parses is in ``zaqarclient/queues/v2/{core,queues,
claim,message}.py``; anything it cannot parse is a server bug.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from zaqarclient.queues import client as zaqar
from zaqarclient.queues.v2 import core
from zaqarclient.queues.v2.claim import Claim
from zaqarclient.queues.v2.queues import Queue
from zaqarclient.transport import errors as zaqar_errors

from tests.e2e.harness import RunningServer

pytestmark = pytest.mark.slow

CLAIM_TTL, CLAIM_GRACE = 120, 60


def new_client(server: RunningServer, project: str) -> Any:
    """Return a zaqarclient v2 client with its own random Client-ID, in ``project``."""
    return zaqar.Client(server.url, version=2,
                        conf={"auth_opts": {"backend": "noauth", "options": {"os_project_id": project}}})


@pytest.fixture
def client(server: RunningServer, project: str) -> Any:
    """A zaqarclient client in the test's project."""
    return new_client(server, project)


@pytest.fixture
def queue(client: Any, queue_name: str) -> Iterator[Queue]:
    """A queue created through zaqarclient with ``force_create=True``."""
    created = client.queue(queue_name, force_create=True)
    yield created
    created.delete()


def post(queue: Queue, bodies: list[Any], ttl: int = 600) -> list[str]:
    """Post bodies with zaqarclient and return the new message ids, in order."""
    result = queue.post([{"body": body, "ttl": ttl} for body in bodies])
    return [href.rsplit("/", 1)[1] for href in result["resources"]]


def claim(queue: Queue, limit: int) -> Claim:
    """Claim up to ``limit`` messages with explicit ttl and grace (zaqarclient sends null otherwise)."""
    return queue.claim(ttl=CLAIM_TTL, grace=CLAIM_GRACE, limit=limit)


def test_a_force_created_queue_is_listed_with_its_count(client: Any, queue: Queue) -> None:
    listed, count = client.queues(with_count=True)

    assert [q.name for q in listed] == [queue.name]
    assert count == 1


def test_metadata_set_through_zaqarclient_is_read_back_with_the_reserved_defaults(queue: Queue) -> None:
    returned = queue.metadata(new_meta={"color": "blue", "retries": 3, "nested": {"a": [1, 2]}})
    reloaded = queue.metadata(force_reload=True)

    assert reloaded == returned
    assert {k: reloaded[k] for k in ("color", "retries", "nested")} == {
        "color": "blue", "retries": 3, "nested": {"a": [1, 2]}}
    assert reloaded["_default_message_ttl"] == 3600
    assert reloaded["_max_messages_post_size"] == 262144
    assert reloaded["_dead_letter_queue"] is None


def test_detailed_queue_listing_carries_the_metadata_as_get_shows_it(client: Any, queue: Queue) -> None:
    queue.metadata(new_meta={"owner": "billing"})

    listed = list(client.queues(detailed=True)[0])

    assert [q.name for q in listed] == [queue.name]
    assert listed[0]._metadata["owner"] == "billing"
    assert listed[0]._metadata["_default_message_ttl"] == 3600
    assert listed[0]._metadata == queue.metadata(force_reload=True)


def test_posted_messages_come_back_in_order_with_their_ids_bodies_and_ttls(queue: Queue) -> None:
    bodies = [{"event": "created", "id": 7}, ["a", 1, None], "plain text", 42, {"unicode": "h\u00e9 \u2603"}]
    ids = post(queue, bodies, ttl=900)

    listed = list(queue.messages(echo=True, limit=10))

    assert [m.id for m in listed] == ids
    assert [m.body for m in listed] == bodies
    assert {m.ttl for m in listed} == {900}
    assert {m.claim_count for m in listed} == {0}
    assert all(m.claim_id is None for m in listed)
    assert queue.message(ids[2]).body == "plain text"


def test_listing_follows_next_links_across_pages(queue: Queue) -> None:
    ids = post(queue, list(range(7)))

    streamed = list(queue.messages(echo=True, limit=3).stream())

    assert [m.id for m in streamed] == ids


def test_listing_without_echo_hides_the_callers_own_messages(server: RunningServer, project: str,
                                                             client: Any, queue: Queue) -> None:
    ids = post(queue, ["mine"])
    other = new_client(server, project).queue(queue.name, auto_create=False)

    assert list(queue.messages()) == []
    assert [m.id for m in other.messages()] == ids


def test_a_claim_hands_out_each_message_to_one_claim_only(queue: Queue) -> None:
    ids = post(queue, [f"job-{n}" for n in range(5)])

    first = claim(queue, limit=2)
    first_messages = list(first)
    second = claim(queue, limit=10)
    second_messages = list(second)
    third = claim(queue, limit=10)

    assert [m.id for m in first_messages] == ids[:2]
    assert [m.id for m in second_messages] == ids[2:]
    assert {m.claim_id for m in first_messages} == {first.id}
    assert {m.claim_id for m in second_messages} == {second.id}
    assert first.id != second.id
    assert {m.claim_count for m in first_messages + second_messages} == {1}
    assert third.id is None and list(third) == []


def test_a_claim_read_back_by_id_lists_its_messages_and_ttl(queue: Queue) -> None:
    ids = post(queue, ["a", "b", "c"])
    created = claim(queue, limit=2)

    fetched = queue.claim(id=created.id)

    assert fetched.ttl == CLAIM_TTL
    assert [(m.id, m.claim_id, m.body) for m in fetched] == [
        (ids[0], created.id, "a"), (ids[1], created.id, "b")]


def test_claimed_messages_are_hidden_from_the_default_listing(queue: Queue) -> None:
    ids = post(queue, ["a", "b", "c"])
    held = claim(queue, limit=2)

    visible = list(queue.messages(echo=True))
    everything = list(queue.messages(echo=True, include_claimed=True))

    assert [m.id for m in visible] == ids[2:]
    assert [m.id for m in everything] == ids
    assert [m.claim_id for m in everything] == [held.id, held.id, None]


def test_a_message_deleted_with_its_claim_is_gone(queue: Queue) -> None:
    ids = post(queue, ["done", "pending"])
    held = list(claim(queue, limit=2))

    held[0].delete()

    with pytest.raises(zaqar_errors.ResourceNotFound):
        queue.message(ids[0])
    assert queue.message(ids[1]).claim_id == held[1].claim_id
    assert queue.stats["messages"]["total"] == 1


def test_deleting_a_claimed_message_without_its_claim_is_forbidden(client: Any, queue: Queue) -> None:
    ids = post(queue, ["held"])
    claim(queue, limit=1)

    request, transport = client._request_and_transport()
    with pytest.raises(zaqar_errors.ForbiddenError):
        core.message_delete(transport, request, queue.name, ids[0])

    assert queue.message(ids[0]).body == "held"


def test_deleting_with_another_claims_id_is_refused(queue: Queue) -> None:
    ids = post(queue, ["first", "second"])
    held_first = list(claim(queue, limit=1))
    other_claim = claim(queue, limit=1)

    impostor = held_first[0]
    impostor.href = f"/v2/queues/{queue.name}/messages/{ids[0]}?claim_id={other_claim.id}"
    with pytest.raises(zaqar_errors.ForbiddenError):
        impostor.delete()

    assert queue.message(ids[0]).body == "first"


def test_releasing_a_claim_makes_its_messages_claimable_again(queue: Queue) -> None:
    ids = post(queue, ["retry me", "and me"])
    released = claim(queue, limit=2)
    list(released)

    released.delete()
    again = claim(queue, limit=2)
    again_messages = list(again)

    assert again.id != released.id
    assert [m.id for m in again_messages] == ids
    assert {m.claim_id for m in again_messages} == {again.id}
    assert [m.claim_count for m in again_messages] == [2, 2]
    with pytest.raises(zaqar_errors.ResourceNotFound):
        queue.claim(id=released.id).ttl  # noqa: B018 - reading ttl fetches the claim


def test_renewing_a_claim_sets_its_new_ttl(queue: Queue) -> None:
    post(queue, ["slow job"])
    held = claim(queue, limit=1)

    held.update(ttl=600, grace=90)

    assert queue.claim(id=held.id).ttl == 600


def test_stats_count_claimed_free_and_total_and_point_at_the_oldest_and_newest(queue: Queue) -> None:
    ids = post(queue, [f"m{n}" for n in range(5)])
    claim(queue, limit=2)

    messages = queue.stats["messages"]

    assert {k: messages[k] for k in ("claimed", "free", "delayed", "total")} == {
        "claimed": 2, "free": 3, "delayed": 0, "total": 5}
    assert messages["oldest"]["href"] == f"/v2/queues/{queue.name}/messages/{ids[0]}"
    assert messages["newest"]["href"] == f"/v2/queues/{queue.name}/messages/{ids[-1]}"
    assert messages["oldest"]["created"].endswith("Z")


def test_pop_removes_and_returns_the_oldest_visible_messages(queue: Queue) -> None:
    ids = post(queue, ["one", "two", "three"])

    popped = list(queue.pop(count=2))

    assert [(m.id, m.body) for m in popped] == [(ids[0], "one"), (ids[1], "two")]
    assert [m.id for m in queue.messages(echo=True)] == [ids[2]]


def test_deleting_a_queue_removes_it_and_its_messages(client: Any, queue_name: str) -> None:
    doomed = client.queue(queue_name, force_create=True)
    post(doomed, ["lost"])

    doomed.delete()

    listed, count = client.queues(with_count=True)
    assert list(listed) == [] and count == 0
    assert doomed.stats["messages"]["total"] == 0
    assert list(doomed.messages(echo=True)) == []


def test_queues_of_one_project_are_invisible_to_another(server: RunningServer, queue: Queue,
                                                        project: str) -> None:
    post(queue, ["private"])
    stranger = new_client(server, project + "-other")

    listed, count = stranger.queues(with_count=True)

    assert list(listed) == [] and count == 0
    assert list(stranger.queue(queue.name, auto_create=False).messages(echo=True)) == []


def test_a_message_claimed_too_often_moves_to_the_dead_letter_queue(client: Any, queue_name: str) -> None:
    dlq = client.queue(queue_name + "-dlq", force_create=True)
    request, transport = client._request_and_transport()
    core.queue_create(transport, request, queue_name,
                      metadata={"_max_claim_count": 1, "_dead_letter_queue": dlq.name})
    source = client.queue(queue_name, auto_create=False)
    ids = post(source, ["poison"])

    first = claim(source, limit=1)
    assert [m.id for m in first] == ids
    first.delete()
    second = claim(source, limit=1)

    assert second.id is None
    assert source.stats["messages"]["total"] == 0
    assert dlq.stats["messages"]["total"] == 1
    assert dlq.stats["messages"]["oldest"]["href"] == f"/v2/queues/{dlq.name}/messages/{ids[0]}"
    source.delete()
    dlq.delete()


def test_deleting_several_messages_in_one_call_deletes_them_all(queue: Queue) -> None:
    ids = post(queue, ["x", "y", "z", "kept"])

    queue.delete_messages(*ids[:3])

    assert [m.id for m in queue.messages(echo=True)] == ids[3:]


def test_getting_several_messages_by_id_returns_them_all(queue: Queue) -> None:
    ids = post(queue, ["x", "y", "z"])

    fetched = list(queue.messages(*ids))

    assert sorted((m.id, m.body) for m in fetched) == sorted(zip(ids, ["x", "y", "z"], strict=True))


def test_delayed_messages_can_be_listed_with_zaqarclient(queue: Queue) -> None:
    result = queue.post([{"body": "later", "ttl": 600, "delay": 300}])
    message_id = result["resources"][0].rsplit("/", 1)[1]

    assert list(queue.messages(echo=True)) == []
    assert [m.id for m in queue.messages(echo=True, include_delayed=True)] == [message_id]
    assert claim(queue, limit=1).id is None


def test_zaqarclient_drives_a_dead_letter_queue_end_to_end_with_no_special_parameter(
        client: Any, queue_name: str) -> None:
    dlq = client.queue(queue_name + "-dlq", force_create=True)
    request, transport = client._request_and_transport()
    core.queue_create(transport, request, queue_name,
                      metadata={"_max_claim_count": 2, "_dead_letter_queue": dlq.name})
    source = client.queue(queue_name, auto_create=False)
    shown = source.metadata(force_reload=True)
    assert (shown["_max_claim_count"], shown["_dead_letter_queue"]) == (2, dlq.name)
    ids = post(source, ["poison-1", "poison-2", "fine"])

    for _ in range(2):
        held = claim(source, limit=2)
        assert [m.id for m in held] == ids[:2]
        held.delete()
    fine = list(claim(source, limit=2))
    assert [(m.id, m.claim_count) for m in fine] == [(ids[2], 1)]
    fine[0].delete()

    # the order of the two moves (one claim, or the sweeper) is the order in the DLQ
    listed = list(dlq.messages(echo=True))
    assert sorted((m.id, m.body, m.claim_count) for m in listed) == sorted(
        [(ids[0], "poison-1", 2), (ids[1], "poison-2", 2)])
    assert dlq.message(ids[0]).body == "poison-1"
    assert sorted(m.id for m in dlq.messages(*ids[:2])) == sorted(ids[:2])
    taken = claim(dlq, limit=1)
    messages = list(taken)
    assert [(m.id, m.claim_id) for m in messages] == [(listed[0].id, taken.id)]
    messages[0].delete()
    popped = dlq.pop(count=5)
    assert [(m.id, m.body) for m in popped] == [(listed[1].id, listed[1].body)]
    assert dlq.stats["messages"]["total"] == 0
    assert source.stats["messages"]["total"] == 0
    source.delete()
    dlq.delete()


def test_zaqarclient_pauses_and_resumes_a_queue_through_its_metadata(queue: Queue) -> None:
    post(queue, ["held"])
    shown = queue.metadata(new_meta={**queue.metadata(force_reload=True), "_paused": True})
    assert shown["_paused"] is True
    post(queue, ["posted while paused"])
    assert list(claim(queue, limit=5)) == []

    resumed = queue.metadata(new_meta={k: v for k, v in shown.items() if k != "_paused"})
    assert "_paused" not in resumed
    assert [m.body for m in claim(queue, limit=5)] == ["held", "posted while paused"]
