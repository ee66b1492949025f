"""Delayed messages on every driver: hidden until due, the queue's default delay, edits while they wait."""

from __future__ import annotations

import threading

import pytest

from tests.storage.conformance.conftest import DLQ, P, Q, claim, listed, post, with_dlq
from zaqar_lite import errors

# -- delays ------------------------------------------------------------------

def test_delayed_message_is_invisible_until_its_delay_passes(messaging, clock):
    late, = post(messaging, "late", delay=120)
    now_ready, = post(messaging, "now")
    assert claim(messaging, ttl=600)[1] == [now_ready]
    assert messaging.pop(P, Q, 5)[0] == []
    assert listed(messaging) == []
    assert listed(messaging, include_delayed=True, include_claimed=True) == [late, now_ready]
    clock.advance(120)
    assert claim(messaging)[1] == [late]


def test_queue_default_delay_applies_and_message_delay_overrides_it(messaging, clock):
    messaging.create_queue(P, Q, {"_default_message_delay": 300})
    default_delayed, = post(messaging, "default")
    immediate, = post(messaging, "immediate", delay=0)
    short, = post(messaging, "short", delay=30)
    assert claim(messaging, ttl=600)[1] == [immediate]
    clock.advance(30)
    assert claim(messaging, ttl=600)[1] == [short]
    clock.advance(270)
    assert claim(messaging, ttl=600)[1] == [default_delayed]


def test_matured_delayed_messages_keep_fifo_order_with_ready_ones(messaging, clock):
    first, = post(messaging, "first", delay=10)
    second, = post(messaging, "second")
    clock.advance(10)
    assert claim(messaging, limit=2)[1] == [first, second]


def test_message_whose_ttl_is_shorter_than_its_delay_is_never_seen(messaging, clock):
    post(messaging, "ghost", ttl=60, delay=120)
    clock.advance(121)
    assert claim(messaging)[1] == []
    assert listed(messaging, include_delayed=True) == []


def test_delayed_message_expiring_unseen_is_dead_lettered_on_expiry(messaging, clock):
    with_dlq(messaging, max_claims=5, _dead_letter_on_expiry=True)
    ghost, = post(messaging, "ghost", ttl=60, delay=120)
    clock.advance(61)
    messaging.sweep()
    assert listed(messaging, queue=DLQ) == [ghost]
    assert messaging.get_messages(P, DLQ, [ghost])[0][0].expires == clock() + 60


def test_ready_claims_are_not_blocked_by_many_delayed_messages(messaging, clock):
    delayed = post(messaging, *range(15), delay=600)
    ready = post(messaging, "ready-1", "ready-2")
    assert claim(messaging, limit=5)[1] == ready
    assert len(delayed) == 15


# -- editing a delayed message ------------------------------------------------

def edit(messaging, message_id, queue=Q, **changes):
    """Edit a delayed message; return it as stored after the edit."""
    return messaging.edit_delayed_message(P, queue, message_id, changes, 10)[0]


def test_a_delayed_message_is_edited_and_read_back_as_edited(messaging, clock):
    held, = post(messaging, {"v": 1}, delay=120, ttl=300)
    clock.advance(20)
    result = edit(messaging, held, body={"v": 2}, ttl=600)
    assert (result.body, result.ttl(), result.delay_until) == ({"v": 2}, 620, clock.now - 20 + 120)
    stored, = messaging.get_messages(P, Q, [held])[0]
    assert (stored.body, stored.ttl(), stored.delay_until, stored.marker) == (
        {"v": 2}, 620, clock.now - 20 + 120, result.marker)
    assert claim(messaging)[1] == []
    clock.advance(100)
    assert claim(messaging)[1] == [held]


def test_a_new_delay_counts_from_the_edit_and_zero_frees_the_message_at_once(messaging, clock):
    first, second = post(messaging, "first", "second", delay=60)
    clock.advance(50)
    edit(messaging, first, delay=30)
    edit(messaging, second, delay=0)
    assert listed(messaging) == [second]
    clock.advance(10)
    assert claim(messaging)[1] == [second]
    clock.advance(20)
    assert claim(messaging)[1] == [first]


def test_a_shortened_ttl_expires_the_delayed_message_then(messaging, clock):
    held, = post(messaging, "x", delay=600, ttl=3600)
    edit(messaging, held, ttl=60)
    clock.advance(60)
    assert messaging.get_messages(P, Q, [held])[0] == []
    with pytest.raises(errors.MessageDoesNotExist):
        edit(messaging, held, body="too late")


def test_an_edit_after_the_delay_matured_is_refused_and_changes_nothing(messaging, clock):
    held, = post(messaging, "original", delay=30)
    clock.advance(30)
    with pytest.raises(errors.MessageNotEditable, match="its delay ended at"):
        edit(messaging, held, body="changed", delay=300)
    stored, = messaging.get_messages(P, Q, [held])[0]
    assert (stored.body, stored.delay_until) == ("original", clock.now)
    assert claim(messaging)[1] == [held]


def test_a_message_never_delayed_is_not_editable(messaging):
    ready, = post(messaging, "now")
    with pytest.raises(errors.MessageNotEditable, match="never delayed"):
        edit(messaging, ready, body="changed")


def test_a_claimed_message_is_not_editable(messaging, clock):
    held, = post(messaging, "original", delay=30)
    clock.advance(30)
    assert claim(messaging, ttl=600)[1] == [held]
    with pytest.raises(errors.MessageNotEditable, match="it is claimed"):
        edit(messaging, held, delay=300)
    stored, = messaging.get_messages(P, Q, [held])[0]
    assert (stored.body, stored.is_claimed(clock.now)) == ("original", True)


def test_an_edit_of_an_absent_message_or_in_another_queue_is_not_found(messaging):
    held, = post(messaging, "x", delay=30)
    with pytest.raises(errors.MessageDoesNotExist):
        edit(messaging, "no-such-id", body="y")
    with pytest.raises(errors.MessageDoesNotExist):
        edit(messaging, held, queue="elsewhere", body="y")


def test_an_edit_never_overwrites_a_change_made_between_its_read_and_its_write(
        messaging, other_worker, clock, monkeypatch):
    held, = post(messaging, "original", delay=300, ttl=900)
    storage = messaging.storage
    done = threading.Event()

    def change_meanwhile():
        other_worker.edit_delayed_message(P, Q, held, {"body": "theirs"}, 10)
        done.set()

    if hasattr(storage, "_message_and_claim"):  # the loop of storage.base: read, decide, write
        read = storage._message_and_claim

        def read_then_let_another_worker_edit(*args):
            found = read(*args)
            if not done.is_set() and not worker.is_alive():
                worker.start()
                worker.join(3.0)  # SQLite: it waits for this edit's transaction instead
            return found

        worker = threading.Thread(target=change_meanwhile)
        monkeypatch.setattr(storage, "_message_and_claim", read_then_let_another_worker_edit)
        edit(messaging, held, ttl=60)
        worker.join(30)
    else:  # Redis: read, check and write are one script, so there is no gap to change it in
        change_meanwhile()
        edit(messaging, held, ttl=60)
    assert done.is_set()
    stored, = messaging.get_messages(P, Q, [held])[0]
    assert (stored.body, stored.expires) == ("theirs", clock.now + 60)


def test_concurrent_edits_both_land_and_a_claim_at_maturity_ends_editing(messaging, other_worker, clock):
    held, = post(messaging, "original", delay=1)
    refused = []

    def edit_body(service, body):
        try:
            service.edit_delayed_message(P, Q, held, {"body": body}, 10)
        except errors.ZaqarLiteError as exc:
            refused.append(exc)

    pairs = ((messaging, "a"), (other_worker, "b"))
    threads = [threading.Thread(target=edit_body, args=pair) for pair in pairs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    stored, = messaging.get_messages(P, Q, [held])[0]
    assert (stored.body in ("a", "b"), refused) == (True, [])
    clock.advance(1)
    assert claim(messaging)[1] == [held]
    with pytest.raises(errors.MessageNotEditable, match="it is claimed"):
        edit(messaging, held, body="late")
