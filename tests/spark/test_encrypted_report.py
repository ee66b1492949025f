"""The DLQ report over dead letters encrypted at rest: counted and marked, never mined from ciphertext."""

from __future__ import annotations

import json

import pytest

from spark_jobs import dlq_report
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage

pytestmark = pytest.mark.slow

KEY = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="


def dead_letters(messaging: Messaging, clock: ManualClock, queue: str, metadata: dict, reason: str,
                 count: int) -> None:
    """Post ``count`` messages to ``queue``, release each once with ``reason``, and dead-letter them."""
    messaging.create_queue("shop", f"{queue}-dlq", {})
    messaging.create_queue("shop", queue, {"_dead_letter_queue": f"{queue}-dlq", "_max_claim_count": 1,
                                           **metadata})
    messaging.post("shop", queue, "client-id-1", [
        {"body": {"card": f"4111-{n}"}, "ttl": None, "delay": None, "dlq_eligible": True}
        for n in range(count)], 100)
    claim_id, claimed, _ = messaging.claim("shop", queue, 20, 60, 60)
    for message in claimed:
        messaging.release_message("shop", queue, message.id, claim_id,
                                  {"error_type": "CardError", "error": reason})
    clock.advance(1)
    messaging.claim("shop", queue, 20, 60, 60)  # each count is used up: moved to the DLQ


def test_the_report_counts_encrypted_dead_letters_and_signs_no_ciphertext(spark, tmp_path):
    uri = f"sqlite:///{tmp_path}/zaqar.db"
    store = open_storage(uri)
    clock = ManualClock()
    messaging = Messaging(store, load_settings(None, storage_uri=uri).replace(encryption_keys=(KEY,)), clock)
    dead_letters(messaging, clock, "vault", {"_enable_encrypt_messages": True}, "card 4111 declined", 2)
    dead_letters(messaging, clock, "open", {}, "gateway timeout", 1)
    store.close()

    document = dlq_report.run(spark, dlq_report.Options(storage=uri, out=tmp_path / "report"),
                              lambda line: None)

    summary = document["summary"]
    assert (summary["dead_letters"], summary["encrypted_dead_letters"]) == (3, 2)
    assert sorted((q["queue"], q["messages"], q["encrypted"]) for q in summary["queues"]) == [
        ("open-dlq", 1, 0), ("vault-dlq", 2, 2)]
    assert sorted((s["queue"], s["signature"], s["example_error"]) for s in document["signatures"]) == [
        ("open-dlq", "CardError: gateway timeout", "gateway timeout"),
        ("vault-dlq", "CardError: (reason encrypted at rest)", "(reason encrypted at rest)")]
    report_json = (tmp_path / "report" / "report.json").read_text()
    report_html = (tmp_path / "report" / "report.html").read_text()
    assert "card 4111 declined" not in report_json + report_html
    assert "zaqar_lite:encrypted:v1" not in report_json + report_html
    assert "encrypted at rest: bodies not read" in report_html
    assert json.loads(report_json)["summary"] == summary
