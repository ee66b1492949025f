"""The DLQ report shows which source queues are paused, by their dead-letter breaker or an operator.

The selection is a plain function on literal metadata; one test runs the
real report on a real SQLite store where a breaker tripped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs import dlq_report, report_html
from spark_jobs.sources.plan import Target, dead_letter_queues, paused_sources
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage

BREAKER_RECORD = {"by": "dead_letter_breaker", "at": "2026-11-28T12:03:30Z",
                  "rule": "more than 50 dead letters within 60 s",
                  "window_started": "2026-11-28T12:02:59Z", "dead_letters": 57, "claimed": 0}
QUEUES = [
    ("shop", "orders-dlq", {}),
    ("shop", "orders", {"_dead_letter_queue": "orders-dlq", "_paused": True, "_paused_by": BREAKER_RECORD}),
    ("shop", "refunds", {"_dead_letter_queue": "orders-dlq", "_paused": True}),
    ("shop", "payments", {"_dead_letter_queue": "orders-dlq"}),
    ("shop", "resumed", {"_dead_letter_queue": "orders-dlq", "_paused": False}),
    # paused, but its DLQ is not reported (another project's, or no DLQ at all)
    ("shop", "idle", {"_paused": True}),
    ("other", "orders", {"_dead_letter_queue": "orders-dlq", "_paused": True}),
]


def test_only_paused_queues_feeding_a_reported_dlq_are_selected_and_who_paused_them():
    found = paused_sources(QUEUES, [Target("shop", "orders-dlq")])
    assert [(p.project, p.queue, p.source_queue, p.by) for p in found] == [
        ("shop", "orders-dlq", "orders", "dead_letter_breaker"),
        ("shop", "orders-dlq", "refunds", "operator"),
    ]
    assert found[0].paused_by() == BREAKER_RECORD
    assert found[1].paused_by() == {}


def test_no_paused_queue_selects_nothing():
    unpaused = [(p, q, {k: v for k, v in m.items() if not k.startswith("_paused")}) for p, q, m in QUEUES]
    assert paused_sources(unpaused, dead_letter_queues(unpaused)) == []


def test_an_operator_record_is_never_taken_for_the_breakers():
    queues = [("shop", "dlq", {}),
              ("shop", "a", {"_dead_letter_queue": "dlq", "_paused": True, "_paused_by": {"by": "alice"}}),
              ("shop", "b", {"_dead_letter_queue": "dlq", "_paused": True, "_paused_by": {"by": "operator"}})]
    assert [(p.source_queue, p.by) for p in paused_sources(queues, [Target("shop", "dlq")])] == [
        ("a", "operator"), ("b", "operator")]


def test_the_pause_is_said_in_words_from_its_record():
    assert report_html.pause_text("orders", "dead_letter_breaker", BREAKER_RECORD) == (
        "orders was paused at 12:03:30 UTC on 2026-11-28 by its dead-letter breaker: 57 dead letters "
        "in 31 s (rule: more than 50 dead letters within 60 s)")
    share = {**BREAKER_RECORD, "rule": "dead letters above 0.5 of the messages claimed (from 10 claimed on) "
             "within 60 s", "dead_letters": 6, "claimed": 10}
    assert report_html.pause_text("orders", "dead_letter_breaker", share) == (
        "orders was paused at 12:03:30 UTC on 2026-11-28 by its dead-letter breaker: 6 dead letters of 10 "
        "messages claimed in 31 s (rule: dead letters above 0.5 of the messages claimed (from 10 claimed "
        "on) within 60 s)")
    assert report_html.pause_text("refunds", "operator", {}) == (
        "refunds was paused by an operator, not by its dead-letter breaker")
    assert report_html.pause_text("refunds", "operator", {"by": "alice", "at": "2026-11-28T09:00:00Z"}) == (
        "refunds was paused at 09:00:00 UTC on 2026-11-28 by an operator (alice), "
        "not by its dead-letter breaker")
    # a record an operator wrote by hand: whatever it holds, words and no error
    odd = {"by": "dead_letter_breaker", "at": "yesterday", "dead_letters": "many", "rule": 7}
    assert report_html.pause_text("x", "dead_letter_breaker", odd) == (
        "x was paused by its dead-letter breaker")


@pytest.mark.slow
def test_the_report_shows_the_source_queue_its_breaker_paused(spark, tmp_path: Path):
    uri = f"sqlite:///{tmp_path}/zaqar.db"
    store = open_storage(uri)
    clock = ManualClock()
    messaging = Messaging(store, load_settings(None, storage_uri=uri), clock)
    messaging.create_queue("shop", "orders-dlq", {})
    messaging.create_queue("shop", "orders", {"_dead_letter_queue": "orders-dlq", "_max_claim_count": 1,
                                              "_dead_letter_breaker": {"seconds": 60, "max_dead_letters": 2}})
    messaging.create_queue("shop", "refunds", {"_dead_letter_queue": "orders-dlq", "_paused": True})
    messaging.post("shop", "orders", "client-id-1", [
        {"body": {"n": n}, "ttl": None, "delay": None, "dlq_eligible": True} for n in range(3)], 100)
    messaging.claim("shop", "orders", 20, 60, 60)
    clock.advance(61)  # the claim lapses: the next claim finds them exhausted, moves them and trips
    messaging.claim("shop", "orders", 20, 60, 60)
    record = store.get_queue_metadata("shop", "orders")["_paused_by"]
    store.close()
    assert record["by"] == "dead_letter_breaker" and record["dead_letters"] == 3

    out = tmp_path / "report"
    lines: list[str] = []
    document = dlq_report.run(spark, dlq_report.Options(storage=uri, out=out), lines.append)

    assert document["summary"]["dead_letters"] == 3
    assert [(p["queue"], p["source_queue"], p["by"], p["paused_by"]) for p in document["paused"]] == [
        ("orders-dlq", "orders", "dead_letter_breaker", record), ("orders-dlq", "refunds", "operator", {})]
    breaker_text = document["paused"][0]["text"]
    assert breaker_text.startswith("orders was paused at ")
    assert "by its dead-letter breaker: 3 dead letters" in breaker_text
    assert breaker_text.endswith(f"(rule: {record['rule']})")
    assert "; 2 paused source queues" in lines[0]
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<h2>Paused source queues</h2>" in page
    assert page.index("Paused source queues") < page.index("Top failure signatures")
    assert breaker_text in page and "refunds was paused by an operator" in page


def test_a_report_without_paused_queues_has_no_such_section():
    page = report_html.render(_minimal_document())
    assert "Paused source queues" not in page


def _minimal_document() -> dict[str, object]:
    return {
        "generated_at": "2026-11-28T13:00:00Z", "source": {"storage": "sqlite:////srv/zaqar.db"},
        "summary": {"dead_letters": 0, "source_queues": 0, "signatures": 0, "by_reason": {}, "queues": [],
                    "first_dead_lettered_at": None, "last_dead_lettered_at": None},
        "rules": [], "paused": [], "signatures": [], "shapes": [],
        "time": {"bucket_seconds": 60, "over_time": [], "claim_counts": [], "time_to_dead_letter": [],
                 "time_to_dead_letter_stats": []},
    }


def test_an_operators_record_is_escaped_on_the_page():
    record = {"by": "<script>x</script>", "at": "<b>noon</b>"}
    document = {**_minimal_document(), "paused": [
        {"project": "shop", "queue": "orders-dlq", "source_queue": "refunds", "by": "operator",
         "paused_by": record, "text": report_html.pause_text("refunds", "operator", record)}]}
    page = report_html.render(document)
    assert "Paused source queues" in page
    assert "<script>x" not in page and "<b>noon" not in page
    assert "by an operator (&lt;script&gt;x&lt;/script&gt;)" in page and "&lt;b&gt;noon&lt;/b&gt;" in page
