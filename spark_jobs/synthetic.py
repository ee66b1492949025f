"""Synthetic dead-letter traffic with planted failure causes, to demonstrate and test the DLQ report.

The model: three producer queues of a shop (``orders``, ``payments``,
``notifications``), each with ``_max_claim_count`` and a DLQ
(``commerce-dlq`` takes orders and payments, ``notifications-dlq`` the
rest), bodies posted by several clients, and a consumer that fails
deterministically on five planted causes (:data:`CAUSES`) and transiently,
once, on a share of the other messages:

* ``missing_customer``: orders posted by ``partner-api-7`` lack ``customer.id``
  -> ``ValidationError`` (every body names its poster in ``producer``, the
  report's client label);
* ``amex_timeout``: orders of the shop paid by a card whose nested
  ``card.network`` is ``amex`` time out at authorisation (JPY orders go
  another way) -> ``AuthorizationTimeout``;
* ``jpy_gateway``: payments in ``JPY`` -> ``GatewayError`` (an upstream 502); every
  dead letter of ``payments`` is one, so the source queue and the body field
  both carry this cause and the report must name the body field only;
* ``legacy_template``: notifications with template ``legacy_v1`` -> ``TemplateNotFound``;
* ``fax_crash``: notifications on channel ``fax`` crash the consumer, which
  releases them without a reason.

:func:`run_http` drives a running server through the HTTP API (posts, claims,
releases with reasons, deletes), so messages reach the DLQ exactly as in
production. :func:`seed_store` writes already dead-lettered messages of the
same model straight into a store, for sizes the API would take too long to
produce. Both return the :class:`Plan`: what was planted, with counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: source queue -> its DLQ
QUEUES = {"orders": "commerce-dlq", "payments": "commerce-dlq", "notifications": "notifications-dlq"}
MAX_CLAIMS = 3
#: share of the other messages that fail once (then succeed) with a transient error
TRANSIENT_SHARE = 0.05
SHOP_CLIENTS = ("web-shop", "mobile-app")
PARTNER = "partner-api-7"


@dataclasses.dataclass(frozen=True)
class Cause:
    """A planted failure cause: what the report must find."""

    name: str
    source_queue: str
    error_type: str | None
    #: the masked signature the report must show
    signature: str
    #: the item pattern mining must relate to ``error_type=...``
    rule_item: str


CAUSES = {
    c.name: c
    for c in (
        Cause(
            "missing_customer",
            "orders",
            "ValidationError",
            "ValidationError: order <*> rejected: missing field <*>",
            f"client={PARTNER}",
        ),
        Cause(
            "amex_timeout",
            "orders",
            "AuthorizationTimeout",
            "AuthorizationTimeout: card authorization for order <*> timed out after <*> ms",
            "card.network=amex",
        ),
        Cause(
            "jpy_gateway",
            "payments",
            "GatewayError",
            "GatewayError: upstream <*>:<*> returned <*> for txn <*> after <*> ms",
            "currency=JPY",
        ),
        Cause(
            "legacy_template",
            "notifications",
            "TemplateNotFound",
            "TemplateNotFound: template <*> not found (request <*>",
            "template=legacy_v1",
        ),
        Cause("fax_crash", "notifications", None, "(no reason given)", "channel=fax"),
    )
}


@dataclasses.dataclass(frozen=True)
class Produced:
    """One message to post: its queue, the posting client, its body and its planted cause (if any)."""

    queue: str
    client_id: str
    body: dict[str, Any]
    cause: str | None


@dataclasses.dataclass
class Plan:
    """What a generator run did: messages posted per queue and dead letters planted per cause."""

    project: str
    posted: dict[str, int] = dataclasses.field(default_factory=dict)
    planted: dict[str, int] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Return the plan with each cause's expected signature and rule item."""
        return {
            "project": self.project,
            "posted": self.posted,
            "causes": [
                {**dataclasses.asdict(CAUSES[name]), "messages": count}
                for name, count in sorted(self.planted.items())
            ],
        }


def _order(rng: random.Random, n: int) -> Produced:
    partner = rng.random() < 0.2
    client = PARTNER if partner else rng.choice(SHOP_CLIENTS)
    customer: dict[str, Any] = {
        "tier": rng.choice(("gold", "silver", "basic")),
        "country": rng.choice(("DE", "FR", "US", "JP", "GB")),
    }
    if not partner:
        customer["id"] = f"c-{rng.randrange(10**6):06d}"
    networks = ("visa", "mastercard") if partner else ("visa", "mastercard", "amex")
    network = rng.choice(networks)
    body: dict[str, Any] = {
        "type": "order.created",
        "producer": client,
        "order_id": 100000 + n,
        "customer": customer,
        "items": [
            {"sku": f"SKU-{rng.randrange(1000):04d}", "qty": rng.randint(1, 4)}
            for _ in range(rng.randint(1, 3))
        ],
        "card": {"network": network, "last4": f"{rng.randrange(10**4):04d}"},
        "currency": rng.choice(("EUR", "USD")) if partner else rng.choice(("EUR", "USD", "GBP", "JPY")),
        "region": rng.choice(("eu", "us")),
        "total": round(rng.uniform(5, 500), 2),
    }
    amex = network == "amex" and body["currency"] != "JPY"
    cause = "missing_customer" if partner else "amex_timeout" if amex else None
    return Produced("orders", client, body, cause)


def _payment(rng: random.Random, n: int) -> Produced:
    currency = rng.choice(("EUR", "USD", "GBP", "JPY", "EUR"))
    body = {
        "type": "payment.requested",
        "producer": "billing",
        "txn": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "amount": round(rng.uniform(1, 900), 2),
        "currency": currency,
        "method": rng.choice(("card", "sepa", "paypal")),
    }
    return Produced("payments", "billing", body, "jpy_gateway" if currency == "JPY" else None)


def _notification(rng: random.Random, n: int) -> Produced:
    channel = rng.choice(("email", "email", "sms", "push", "fax"))
    templates = (
        ("welcome", "receipt", "password_reset")
        if channel == "fax"
        else ("welcome", "receipt", "password_reset", "legacy_v1")
    )
    template = rng.choice(templates)
    body = {
        "type": "notification",
        "producer": "mailer",
        "channel": channel,
        "template": template,
        "lang": rng.choice(("en", "de", "fr")),
        "to": f"user{rng.randrange(10**5)}@example.com",
    }
    cause = "fax_crash" if channel == "fax" else "legacy_template" if template == "legacy_v1" else None
    return Produced("notifications", "mailer", body, cause)


def produce(count: int, seed: int = 7) -> Iterator[Produced]:
    """Yield ``count`` messages of the model, in a reproducible order for a seed."""
    rng = random.Random(seed)
    makers = (_order, _order, _payment, _notification)
    for n in range(count):
        yield makers[n % len(makers)](rng, n)


def _planted_reason(cause: str, body: dict[str, Any], rng: random.Random) -> dict[str, str]:
    """Return the release reason of a planted cause (``{}``: released without one)."""
    reasons: dict[str, Callable[[], dict[str, str]]] = {
        "missing_customer": lambda: {
            "error_type": "ValidationError",
            "error": f"order {body['order_id']} rejected: missing field 'customer.id'",
        },
        "amex_timeout": lambda: {
            "error_type": "AuthorizationTimeout",
            "error": f"card authorization for order {body['order_id']} timed out after "
            f"{rng.randrange(5000, 30000)} ms",
        },
        "jpy_gateway": lambda: {
            "error_type": "GatewayError",
            "error": f"upstream 10.0.{rng.randrange(8)}.{rng.randrange(2, 250)}:8443 returned 502 for txn "
            f"{body['txn']} after {rng.randrange(1000, 30000)} ms",
        },
        "legacy_template": lambda: {
            "error_type": "TemplateNotFound",
            "error": f"template /srv/templates/{body['lang']}/legacy_v1.html not found "
            f"(request f0{rng.getrandbits(40):010x})",
        },
        "fax_crash": dict,
    }
    return reasons[cause]()


def failure_for(produced: Produced, attempt: int, rng: random.Random) -> dict[str, str] | None:
    """Return the release reason of a consumer attempt (``{}``: released without one), or None on success."""
    if produced.cause:
        return _planted_reason(produced.cause, produced.body, rng)
    if attempt == 1 and rng.random() < TRANSIENT_SHARE:
        return {"error_type": "TimeoutError", "error": f"read timed out after {rng.uniform(1, 9):.1f} s"}
    return None


# -- through the HTTP API ---------------------------------------------------------------------------


class _Api:
    """A small HTTP client of one project (loopback, no proxies)."""

    def __init__(self, url: str, project: str) -> None:
        import requests

        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.headers.update({"X-Project-ID": project, "Client-ID": str(uuid.uuid4())})

    def call(
        self,
        method: str,
        path: str,
        client_id: str | None = None,
        expect: Sequence[int] = (200, 201, 204),
        **kwargs: Any,
    ) -> Any:
        headers = {"Client-ID": client_id} if client_id else None
        response = self.session.request(method, self.url + path, headers=headers, timeout=30, **kwargs)
        if response.status_code not in expect:
            raise RuntimeError(f"{method} {path} answered {response.status_code}: {response.text[:300]}")
        return response


def _client_uuid(name: str) -> str:
    """Return the Client-ID (a UUID, as Zaqar requires) a named producer posts with."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"zaqar-lite-synthetic/{name}"))


#: Client-ID -> producer name, to read reports (client ids are UUIDs on the wire)
CLIENT_NAMES = {_client_uuid(n): n for n in (*SHOP_CLIENTS, PARTNER, "billing", "mailer")}


def rule_item(cause: Cause) -> str:
    """Return the pattern-mining item of a cause as the report shows it (clients by ``producer`` label)."""
    return cause.rule_item


def configure_queues(api: _Api, max_claims: int = MAX_CLAIMS) -> None:
    """Create the DLQs, then the source queues naming them."""
    for dlq in sorted(set(QUEUES.values())):
        api.call("PUT", f"/v2/queues/{dlq}", json={})
    for queue, dlq in QUEUES.items():
        api.call(
            "PUT",
            f"/v2/queues/{queue}",
            json={"_max_claim_count": max_claims, "_dead_letter_queue": dlq, "_default_message_ttl": 3600},
        )


def post_all(api: _Api, messages: Sequence[Produced]) -> dict[str, Produced]:
    """Post the messages (20 a request, per queue and client); return them by the ids the server gave."""
    by_id: dict[str, Produced] = {}
    groups: dict[tuple[str, str], list[Produced]] = {}
    for produced in messages:
        groups.setdefault((produced.queue, produced.client_id), []).append(produced)
    for (queue, client), group in groups.items():
        for start in range(0, len(group), 20):
            batch = group[start : start + 20]
            answer = api.call(
                "POST",
                f"/v2/queues/{queue}/messages",
                client_id=_client_uuid(client),
                json={"messages": [{"ttl": 3600, "body": p.body} for p in batch]},
            ).json()
            for href, produced in zip(answer["resources"], batch, strict=True):
                by_id[href.rsplit("/", 1)[-1]] = produced
    return by_id


def consume(api: _Api, queue: str, by_id: dict[str, Produced], rng: random.Random) -> None:
    """Claim until the queue is drained: delete successes, release failures with their reasons.

    A planted message fails on every attempt, so after ``_max_claim_count``
    claims the next claim moves it into the DLQ.
    """
    while True:
        answer = api.call("POST", f"/v2/queues/{queue}/claims?limit=20", json={"ttl": 60, "grace": 60})
        if answer.status_code == 204:
            return
        claimed = answer.json()["messages"]
        claim_id = claimed[0]["href"].rsplit("claim_id=", 1)[1]
        done = []
        for message in claimed:
            reason = failure_for(by_id[message["id"]], message["claim_count"], rng)
            if reason is None:
                done.append(message["id"])
            else:
                api.call(
                    "POST",
                    f"/v2/queues/{queue}/messages/{message['id']}/release?claim_id={claim_id}",
                    json=reason,
                )
        if done:
            api.call("DELETE", f"/v2/queues/{queue}/messages?ids={','.join(done)}")


def run_http(url: str, messages: int, project: str = "synthetic", seed: int = 7) -> Plan:
    """Post ``messages`` messages through the API, consume them, and return what was planted."""
    api = _Api(url, project)
    configure_queues(api)
    produced = list(produce(messages, seed))
    by_id = post_all(api, produced)
    rng = random.Random(seed + 1)
    for queue in QUEUES:
        consume(api, queue, by_id, rng)
    return _plan(project, produced)


def _plan(project: str, produced: Sequence[Produced]) -> Plan:
    plan = Plan(project)
    for p in produced:
        plan.posted[p.queue] = plan.posted.get(p.queue, 0) + 1
        if p.cause:
            plan.planted[p.cause] = plan.planted.get(p.cause, 0) + 1
    return plan


# -- straight into a store --------------------------------------------------------------------------


def dead_lettered_messages(
    count: int, seed: int = 7, now: float | None = None, hours: int = 48
) -> Iterator[tuple[str, Any]]:
    """Yield ``(dlq, Message)``: ``count`` dead letters of the model as the move stores them.

    Posted over the last ``hours``, each failed :data:`MAX_CLAIMS` times a few
    seconds to minutes apart, with provenance as ``claims.policy.dead_lettered``
    writes it.
    """
    from zaqar_lite.clock import iso_utc
    from zaqar_lite.models import Message

    now = time.time() if now is None else now
    rng = random.Random(seed)
    made = 0
    for produced in produce(count * 8, seed):
        if made >= count:
            return
        if produced.cause is None:
            continue
        made += 1
        created = now - rng.uniform(0, hours * 3600)
        at = created
        failures = []
        for attempt in range(1, MAX_CLAIMS + 1):
            at += rng.uniform(1, 300)
            reason = failure_for(produced, attempt, rng) or {}
            failures.append(
                {
                    "at": iso_utc(at),
                    "claim_count": attempt,
                    "error_type": reason.get("error_type"),
                    "error": reason.get("error"),
                }
            )
        moved = at + rng.uniform(1, 120)
        message = Message(
            id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            body=produced.body,
            created=created,
            expires=now + 7 * 86400,
            client_id=_client_uuid(produced.client_id),
            claim_count=MAX_CLAIMS,
            failures=failures if produced.cause != "fax_crash" else [f for f in failures if f["error_type"]],
            dead_letter={
                "source_queue": produced.queue,
                "reason": "max_claims",
                "dead_lettered_at": moved,
                "claim_count": MAX_CLAIMS,
                "last_claim_id": str(uuid.UUID(int=rng.getrandbits(128))),
            },
        )
        yield QUEUES[produced.queue], message


def seed_store(
    storage_uri: str, count: int, project: str = "synthetic", seed: int = 7, batch: int = 500
) -> int:
    """Write ``count`` dead letters straight into a store, through the storage contract; return how many."""
    from zaqar_lite.storage import open_storage

    store = open_storage(storage_uri)
    now = time.time()
    try:
        for queue, dlq in QUEUES.items():
            store.create_queue(project, dlq, {}, now)
            store.create_queue(
                project, queue, {"_max_claim_count": MAX_CLAIMS, "_dead_letter_queue": dlq}, now
            )
        pending: dict[str, list[Any]] = {}
        written = 0
        for dlq, message in dead_lettered_messages(count, seed, now):
            pending.setdefault(dlq, []).append(message)
            if len(pending[dlq]) >= batch:
                store.post_messages(project, dlq, pending.pop(dlq), now)
                written += batch
        for dlq, messages in pending.items():
            store.post_messages(project, dlq, messages, now)
            written += len(messages)
        return written
    finally:
        store.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``zaqar-lite dlq-generate``: plant failure causes through the API (or straight into a store)."""
    import json

    p = argparse.ArgumentParser(prog="zaqar-lite dlq-generate", description=__doc__.split("\n\n")[0])
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="a running zaqar-lite, e.g. http://127.0.0.1:8888")
    target.add_argument("--storage", help="write dead letters straight into this store instead (fast, large)")
    p.add_argument(
        "--messages",
        type=int,
        default=400,
        help="messages to post (--url) or dead letters to write (--storage); default 400",
    )
    p.add_argument("--project", default="synthetic", help="project (default synthetic)")
    p.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    args = p.parse_args(argv)
    started = time.monotonic()
    if args.url:
        plan = run_http(args.url, args.messages, args.project, args.seed)
        print(json.dumps(plan.as_dict(), indent=2))
    else:
        written = seed_store(args.storage, args.messages, args.project, args.seed)
        print(json.dumps({"project": args.project, "dead_letters": written}))
    print(f"dlq-generate: done in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
