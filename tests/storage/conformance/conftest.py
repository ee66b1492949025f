"""What the conformance suite's rooms share: the names of its queues and clients, and its helpers.

The suite holds every driver to the same behaviour: each test runs once per
driver (the ``driver`` fixture of ``tests/storage/conftest.py``, on a real
store) and goes through :class:`~zaqar_lite.service.Messaging` with a manual
clock, so the policy inputs reach each driver exactly as in production and
no test sleeps. Expected values are literals of the documented contract
(``docs/api.rst``).
"""

from __future__ import annotations

P, Q, DLQ = "project-a", "orders", "orders-dlq"
CLIENT, OTHER_CLIENT = "5f0cbf39-7d2c-4b1f-8f0e-2a4a7fd1b3a1", "9a7c2b1e-0000-4000-8000-000000000001"


def post(messaging, *bodies, queue=Q, project=P, client=CLIENT, **fields):
    """Post one message per body with the given optional fields; return their ids."""
    items = [{"body": b, "ttl": fields.get("ttl"), "delay": fields.get("delay"),
              "dlq_eligible": fields.get("dlq_eligible", True)} for b in bodies]
    return messaging.post(project, queue, client, items, 10)


def claim(messaging, limit=10, ttl=60, grace=60, queue=Q, project=P):
    """Claim and return (claim_id, [ids])."""
    claim_id, claimed, _ = messaging.claim(project, queue, limit, ttl, grace)
    return claim_id, [m.id for m in claimed]


def listed(messaging, queue=Q, project=P, **flags):
    """Return the ids listed in a queue (echo on, all flags off unless given)."""
    options = {"echo": True, "include_claimed": False, "include_delayed": False, **flags}
    found, _ = messaging.list_messages(project, queue, client_id=CLIENT, marker=None, limit=20, **options)
    return [m.id for m in found]


def with_dlq(messaging, max_claims=2, **extra):
    """Create Q with a DLQ configured, and the DLQ."""
    messaging.create_queue(P, DLQ, {})
    metadata = {"_max_claim_count": max_claims, "_dead_letter_queue": DLQ, **extra}
    assert messaging.create_queue(P, Q, metadata) is True


def exhaust(messaging, clock, message_id, times):
    """Hand a message out ``times`` times: lapsed, released, released with reason, in turn."""
    for attempt in range(times):
        claim_id, claimed, _ = messaging.claim(P, Q, 1, 60, 60)
        assert [m.id for m in claimed] == [message_id]
        if attempt % 3 == 0:
            clock.advance(61)
        elif attempt % 3 == 1:
            messaging.release_claim(P, Q, claim_id)
        else:
            messaging.release_message(P, Q, message_id, claim_id,
                                      {"error": "db timeout 30s", "error_type": "TimeoutError"})

