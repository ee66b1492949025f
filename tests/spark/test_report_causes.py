"""Two causes planted in one store: one an item, one an item only without another value.

One SQLite store, one queue ``payments`` with its DLQ. Every
``AuthorizationTimeout`` is an amex payment (in every currency); every
``CurrencyNotSupported`` is a GBP payment of another network. GBP alone does
not predict it (a third of the GBP dead letters are amex timeouts), nor does
"not amex" (most visa and mastercard dead letters failed otherwise): only the
two together, one of them negated.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from spark_jobs import dlq_report
from zaqar_lite.clock import iso_utc
from zaqar_lite.models import Message
from zaqar_lite.storage import open_storage

pytestmark = pytest.mark.slow
NOW = time.time()
#: (card.network, currency, error type (None: released without one), error text, dead letters)
PLANTED = [
    *[("amex", currency, "AuthorizationTimeout", "issuer did not answer in 30 s", 6)
      for currency in ("USD", "EUR", "GBP")],
    ("amex", "USD", "Declined", "card declined", 1),
    ("amex", "EUR", "Declined", "card declined", 1),
    *[(network, "GBP", "CurrencyNotSupported", "currency GBP is not supported", 6)
      for network in ("visa", "mastercard")],
    *[(network, currency, "Declined", "card declined", 4)
      for network, currency in itertools.product(("visa", "mastercard"), ("USD", "EUR"))],
    ("visa", "USD", None, None, 3),
    ("mastercard", "EUR", None, None, 2),
]


def planted_store(directory: Path) -> str:
    """Write the planted dead letters into ``payments-dlq`` of a SQLite store; return its URI."""
    uri = f"sqlite:///{directory}/zaqar.db"
    store = open_storage(uri)
    try:
        store.create_queue("shop", "payments-dlq", {}, NOW)
        store.create_queue("shop", "payments", {"_max_claim_count": 2, "_dead_letter_queue": "payments-dlq"},
                           NOW)
        messages = []
        for n, (network, currency, error_type, error) in enumerate(
            (network, currency, error_type, error)
            for network, currency, error_type, error, count in PLANTED
            for _ in range(count)
        ):
            failures: list[dict[str, Any]] = [
                {"at": iso_utc(NOW + n + attempt), "claim_count": attempt, "error_type": error_type,
                 "error": error}
                for attempt in (1, 2)
            ]
            messages.append(Message(
                id=str(uuid.UUID(int=n + 1, version=4)),
                body={"order": 1000 + n, "amount": 10 + n, "currency": currency,
                      "card": {"network": network}},
                created=NOW - 600 + n, expires=NOW + 7 * 86400, client_id=str(uuid.UUID(int=7, version=4)),
                claim_count=2, failures=failures,
                dead_letter={"source_queue": "payments", "reason": "max_claims",
                             "dead_lettered_at": NOW + n + 5, "claim_count": 2,
                             "last_claim_id": str(uuid.UUID(int=n + 1000))},
            ))
        store.post_messages("shop", "payments-dlq", messages, NOW)
    finally:
        store.close()
    return uri


@pytest.fixture(scope="module")
def out(spark, tmp_path_factory):
    directory = tmp_path_factory.mktemp("planted-causes")
    uri = planted_store(directory)
    dlq_report.run(spark, dlq_report.Options(storage=uri, out=directory / "report"), lambda _: None)
    return directory / "report"


@pytest.fixture(scope="module")
def document(out):
    return json.loads((out / "report.json").read_text())


def causes(document: dict[str, Any], error_type: str) -> list[tuple[list[str], int, float]]:
    return [(r["antecedent"], r["messages"], r["confidence"]) for r in document["rules"]
            if r["consequent"] == [f"error_type={error_type}"]]


def test_the_planted_data_needs_the_negation():
    gbp = [(network, kind, count) for network, currency, kind, _, count in PLANTED if currency == "GBP"]
    unsupported = sum(c for _, t, c in gbp if t == "CurrencyNotSupported")
    assert unsupported / sum(c for _, _, c in gbp) < 0.8  # GBP alone is below the default confidence
    others = [(t, c) for network, _, t, _, c in PLANTED if network != "amex"]
    assert unsupported / sum(c for _, c in others) < 0.8  # so is "not amex" alone


def test_the_report_finds_the_item_cause(document):
    assert causes(document, "AuthorizationTimeout") == [(["card.network=amex"], 18, 0.9)]


def test_the_report_finds_the_cause_that_holds_only_without_another_value(document):
    assert causes(document, "CurrencyNotSupported") == [(["card.network!=amex", "currency=GBP"], 12, 1.0)]
    (rule,) = [r for r in document["rules"] if r["consequent"] == ["error_type=CurrencyNotSupported"]]
    # every one of the 12 unsupported currencies, and no dead letter without the condition
    assert (rule["condition_messages"], rule["cause_messages"], rule["risk_ratio"]) == (12, 12, None)


def test_the_negated_cause_is_shown_as_a_negation(out):
    assert '<code class="item">card.network != amex</code>' in (out / "report.html").read_text()
