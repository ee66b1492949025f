"""W3C trace context on every driver: kept with each message, through the DLQ and back.

Through :class:`~zaqar_lite.service.Messaging` with a manual clock, as the
conformance suite.
"""

from __future__ import annotations

from tests.storage.conformance.conftest import CLIENT, DLQ, P, Q, with_dlq
from zaqar_lite.claims import policy
from zaqar_lite.models import RedriveRequest

TRACE = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
         "tracestate": "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}


def post(messaging, *bodies, trace=None, queue=Q):
    items = [{"body": b, "ttl": None, "delay": None, "dlq_eligible": True} for b in bodies]
    return messaging.post(P, queue, CLIENT, items, 10, trace)


def test_each_message_of_a_traced_post_keeps_the_trace_context(messaging):
    traced = post(messaging, "a", "b", trace=TRACE)
    (plain,) = post(messaging, "c")
    found, _ = messaging.get_messages(P, Q, [*traced, plain])
    assert [(m.id, m.trace) for m in found] == [(traced[0], TRACE), (traced[1], TRACE), (plain, None)]


def test_list_claim_and_pop_return_the_trace_context(messaging):
    (first,) = post(messaging, "a", trace={"traceparent": TRACE["traceparent"]})
    (second,) = post(messaging, "b", trace=TRACE)
    listed, _ = messaging.list_messages(P, Q, client_id="other", marker=None, limit=10, echo=True,
                                        include_claimed=False, include_delayed=False)
    assert [m.trace for m in listed] == [{"traceparent": TRACE["traceparent"]}, TRACE]
    _, claimed, _ = messaging.claim(P, Q, 1, 60, 60)
    assert [(m.id, m.trace) for m in claimed] == [(first, {"traceparent": TRACE["traceparent"]})]
    popped, _ = messaging.pop(P, Q, 5)
    assert [(m.id, m.trace) for m in popped] == [(second, TRACE)]


def test_a_dead_letter_carries_its_trace_into_the_provenance_and_a_redrive_brings_it_back(messaging, clock):
    with_dlq(messaging, max_claims=1)
    (message_id,) = post(messaging, "poison", trace=TRACE)
    messaging.claim(P, Q, 1, 60, 60)
    clock.advance(61)
    assert messaging.claim(P, Q, 1, 60, 60)[1] == []  # exhausted: moved to the DLQ
    (dead,), _ = messaging.get_messages(P, DLQ, [message_id])
    assert policy.provenance(dead)["trace"] == TRACE
    result, _ = messaging.redrive(P, DLQ, RedriveRequest(limit=10))
    assert result.redriven == 1
    (back,), _ = messaging.get_messages(P, Q, [message_id])
    assert (back.trace, back.dead_letter, back.claim_count) == (TRACE, None, 0)


def test_the_sweep_carries_the_trace_into_the_dlq(messaging, clock):
    with_dlq(messaging, max_claims=1)
    (message_id,) = post(messaging, "poison", trace={"traceparent": TRACE["traceparent"]})
    messaging.claim(P, Q, 1, 60, 60)
    clock.advance(61)
    assert messaging.sweep().dead_lettered == 1
    (dead,), _ = messaging.get_messages(P, DLQ, [message_id])
    assert dead.trace == {"traceparent": TRACE["traceparent"]}
