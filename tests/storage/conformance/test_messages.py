"""Messages on every driver: posting, listing and its markers, expiry, pop, purge, and the delete rules."""

from __future__ import annotations

import dataclasses

import pytest

from tests.storage.conformance.conftest import CLIENT, OTHER_CLIENT, P, Q, claim, listed, post
from zaqar_lite import errors
from zaqar_lite.models import Message

# -- messages -----------------------------------------------------------------

def test_posted_messages_list_in_post_order_and_create_the_queue(messaging):
    ids = post(messaging, "one", "two", "three")
    assert listed(messaging) == ids
    assert messaging.storage.get_queue_metadata(P, Q) == {}


def test_listing_pages_by_marker(messaging):
    ids = post(messaging, *range(5))
    first, _ = messaging.list_messages(P, Q, client_id=CLIENT, marker=None, limit=2, echo=True,
                                       include_claimed=False, include_delayed=False)
    rest, _ = messaging.list_messages(P, Q, client_id=CLIENT, marker=first[-1].marker, limit=10,
                                      echo=True, include_claimed=False, include_delayed=False)
    assert [m.id for m in first + rest] == ids


def page_markers(messaging, queue, project=P):
    """Return the markers of a queue as a client sees them, one message a page, each page after the last."""
    markers: list[int] = []
    while True:
        after = markers[-1] if markers else None
        found, _ = messaging.list_messages(project, queue, client_id=CLIENT, marker=after, limit=1,
                                           echo=True, include_claimed=False, include_delayed=False)
        if not found:
            return markers
        markers.append(found[0].marker)


def test_markers_of_a_queue_do_not_reveal_the_traffic_of_other_queues_and_projects(messaging):
    post(messaging, "quiet-1", queue="quiet")
    post(messaging, "quiet-2", queue="quiet")
    post(messaging, "a-1")
    for _ in range(5):
        post(messaging, *range(10), project="project-b")
        post(messaging, *range(10), queue="other")
    post(messaging, "a-2")
    quiet, busy = page_markers(messaging, "quiet"), page_markers(messaging, Q)
    assert len(quiet) == len(busy) == 2
    assert busy[1] - busy[0] == quiet[1] - quiet[0], "100 posts elsewhere moved this queue's markers"
    assert len(page_markers(messaging, Q, project="project-b")) == 50


def test_listing_without_echo_hides_own_messages(messaging):
    mine = post(messaging, "mine")
    theirs = post(messaging, "theirs", client=OTHER_CLIENT)
    found, _ = messaging.list_messages(P, Q, client_id=CLIENT, marker=None, limit=10, echo=False,
                                       include_claimed=False, include_delayed=False)
    assert [m.id for m in found] == theirs
    assert mine[0] not in [m.id for m in found]


def test_expired_messages_are_never_returned(messaging, clock):
    ids = post(messaging, "short", ttl=60)
    clock.advance(61)
    assert listed(messaging) == []
    assert messaging.get_messages(P, Q, ids)[0] == []
    assert claim(messaging)[1] == []


def test_pop_takes_visible_messages_fifo_and_deletes_them(messaging):
    ids = post(messaging, 1, 2, 3)
    claim(messaging, limit=1)
    popped, _ = messaging.pop(P, Q, 5)
    assert [m.id for m in popped] == ids[1:]
    assert listed(messaging, include_claimed=True) == ids[:1]


def test_purge_removes_claimed_messages_too(messaging):
    post(messaging, 1, 2)
    claim(messaging, limit=1)
    messaging.purge(P, Q, ["messages"])
    assert listed(messaging, include_claimed=True) == []


# -- delete rules ------------------------------------------------------------

def test_deleting_an_absent_message_is_fine(messaging):
    messaging.delete_message(P, Q, "no-such-id", None)
    messaging.delete_message(P, Q, "no-such-id", "no-such-claim")


def test_unclaimed_message_is_deleted_without_claim_id(messaging):
    ids = post(messaging, 1)
    messaging.delete_message(P, Q, ids[0], None)
    assert listed(messaging) == []


def test_claimed_message_cannot_be_deleted_without_claim_id(messaging):
    ids = post(messaging, 1)
    claim(messaging)
    with pytest.raises(errors.MessageIsClaimed):
        messaging.delete_message(P, Q, ids[0], None)


def test_unknown_or_expired_claim_id_is_rejected(messaging, clock):
    ids = post(messaging, 1)
    claim_id, _ = claim(messaging, ttl=60)
    with pytest.raises(errors.InvalidClaim):
        messaging.delete_message(P, Q, ids[0], "not-a-claim")
    clock.advance(61)
    with pytest.raises(errors.InvalidClaim):
        messaging.delete_message(P, Q, ids[0], claim_id)


def test_claim_id_on_unclaimed_message_is_rejected(messaging):
    first, second = post(messaging, 1, 2)
    claim_id, _ = claim(messaging, limit=1)
    with pytest.raises(errors.MessageNotClaimed):
        messaging.delete_message(P, Q, second, claim_id)


def test_message_held_by_another_claim_cannot_be_deleted(messaging):
    first, second = post(messaging, 1, 2)
    claim_a, _ = claim(messaging, limit=1)
    claim(messaging, limit=1)
    with pytest.raises(errors.MessageIsClaimedBy):
        messaging.delete_message(P, Q, second, claim_a)


def test_claimed_message_is_deleted_with_its_claim_id(messaging):
    ids = post(messaging, 1)
    claim_id, _ = claim(messaging)
    messaging.delete_message(P, Q, ids[0], claim_id)
    assert listed(messaging, include_claimed=True) == []


def test_bulk_delete_with_claim_ids_keeps_messages_of_other_claims(messaging):
    first, second, third = post(messaging, 1, 2, 3)
    claim_a, _ = claim(messaging, limit=1)
    claim(messaging, limit=1)
    with pytest.raises(errors.MessageIsClaimedBy):
        messaging.delete_messages(P, Q, [first, second, third], [claim_a])
    assert listed(messaging, include_claimed=True) == [second]


def test_bulk_delete_without_claim_ids_deletes_claimed_messages(messaging):
    ids = post(messaging, 1, 2)
    claim(messaging, limit=1)
    messaging.delete_messages(P, Q, ids, None)
    assert listed(messaging, include_claimed=True) == []


def test_a_message_read_back_holds_every_field_of_a_message_and_nothing_else(messaging):
    post(messaging, {"read": "back"})
    _, claimed, _ = messaging.claim(P, Q, 10, 60, 60)
    found, _ = messaging.list_messages(P, Q, client_id=CLIENT, marker=None, limit=10, echo=True,
                                       include_claimed=True, include_delayed=False)
    names = [field.name for field in dataclasses.fields(Message)]
    for message in [*claimed, *found]:
        assert type(message) is Message
        assert sorted(vars(message)) == sorted(names)
        assert message == Message(**{name: getattr(message, name) for name in names})
    assert [m.body for m in found] == [{"read": "back"}]
