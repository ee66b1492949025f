"""End to end: planted failures through a real server's API, then the report finds each of them.

A real ``zaqar-lite serve`` on SQLite and on Redis; the synthetic generator
posts traffic and consumes it, releasing planted failures with their reasons
until they exhaust ``_max_claim_count``; the report then runs on ``local[2]``
straight against the store and must name every planted cause, with its
count, as a signature and as a rule. The HTML page is rendered in headless
Chromium and a screenshot taken.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
import redis

from spark_jobs import synthetic
from tests.e2e.harness import start_server, stop_server

pytestmark = pytest.mark.slow
MESSAGES = 160
STAGES = ["plan", "extract", "fields", "rules", "signatures", "time", "write"]
#: the Redis database of these tests (the storage suites empty database 0 between their tests)
REDIS_DB = 7


def png_pixels(data: bytes) -> bytes:
    """Return the decompressed (still filtered) pixel rows of a PNG file."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        if kind == b"IDAT":
            chunks.append(data[offset + 8 : offset + 8 + length])
        offset += 12 + length
    return zlib.decompress(b"".join(chunks))


def _store_uri(kind: str, request: pytest.FixtureRequest, directory: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{directory}/zaqar.db"
    server = request.getfixturevalue("redis_server")
    with redis.Redis(host="127.0.0.1", port=server.port, db=REDIS_DB) as client:
        client.flushdb()
    return server.uri(REDIS_DB)


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def report(request, spark, tmp_path_factory):
    """Planted traffic through a real server on one store, then the report: (plan, report.json, out dir)."""
    from spark_jobs import dlq_report

    directory = tmp_path_factory.mktemp(f"dlq-e2e-{request.param}")
    uri = _store_uri(request.param, request, directory)
    server = start_server(uri, directory)
    try:
        plan = synthetic.run_http(server.url, MESSAGES)
    finally:
        stop_server(server)
    out = directory / "report"
    lines: list[str] = []
    document = dlq_report.run(spark, dlq_report.Options(storage=uri, out=out), lines.append)
    assert [line.split(":")[0] for line in lines] == STAGES
    return plan, document, out


def test_every_planted_cause_is_a_signature_with_its_count(report):
    plan, document, out = report
    assert set(plan.planted) == set(synthetic.CAUSES)
    assert document["summary"]["dead_letters"] == sum(plan.planted.values())
    found = {(s["source_queue"], s["signature"]): s for s in document["signatures"]}
    for name, count in plan.planted.items():
        cause = synthetic.CAUSES[name]
        signature = found[(cause.source_queue, cause.signature)]
        assert signature["messages"] == count, name
        dlq = synthetic.QUEUES[cause.source_queue]
        assert signature["ids_file"] == f"signatures/{plan.project}/{dlq}/{signature['id']}.txt"
        ids = (out / signature["ids_file"]).read_text().split()
        assert len(ids) == count and ids == sorted(ids), name


def test_the_headline_counts_one_id_file_per_signature(report):
    plan, document, out = report
    files = sorted(str(p.relative_to(out)) for p in (out / "signatures").rglob("*.txt"))
    assert document["summary"]["signatures"] == len(files) == len(synthetic.CAUSES)
    assert sorted(s["ids_file"] for s in document["signatures"]) == files


def test_every_planted_cause_is_predicted_by_its_planted_item(report):
    plan, document, _ = report
    rules = {(tuple(r["antecedent"]), tuple(r["consequent"])): r for r in document["rules"]}
    for name, count in plan.planted.items():
        cause = synthetic.CAUSES[name]
        rule = rules[((synthetic.rule_item(cause),), (f"error_type={cause.error_type or '(none)'}",))]
        assert (rule["confidence"], rule["messages"]) == (1.0, count), name
        assert rule["lift"] > 1.0


def test_a_nested_body_field_is_a_candidate_cause(report):
    plan, document, _ = report
    assert "card.network" in document["parameters"]["fields"]
    rules = [r for r in document["rules"] if r["antecedent"] == ["card.network=amex"]]
    assert [(r["consequent"], r["messages"]) for r in rules] == [
        (["error_type=AuthorizationTimeout"], plan.planted["amex_timeout"])
    ]


def test_a_cause_carried_by_a_body_field_and_its_source_queue_is_named_once_by_the_field(report):
    # every dead letter of payments is a JPY gateway failure: queue=payments, its type and its shape
    # say as much as currency=JPY, and the report names the body field alone
    plan, document, _ = report
    gateway = [r for r in document["rules"] if r["consequent"] == ["error_type=GatewayError"]]
    assert [(r["antecedent"], r["messages"]) for r in gateway] == [
        (["currency=JPY"], plan.planted["jpy_gateway"])
    ]
    assert document["parameters"]["source_fields"] == ["type"]


def test_the_client_is_named_by_the_label_its_messages_carry(report):
    _, document, _ = report
    clients = {i for r in document["rules"] for i in r["antecedent"] if i.startswith("client=")}
    assert clients == {"client=partner-api-7"}


def test_rules_that_explain_more_come_first(report):
    _, document, _ = report
    explained = [r["explained"] for r in document["rules"]]
    assert explained == sorted(explained, reverse=True)
    page = (report[2] / "report.html").read_text()
    assert page.index("<h2>Top causes</h2>") < page.index("<h2>Top failure signatures</h2>")


def test_the_time_section_counts_every_dead_letter(report):
    plan, document, _ = report
    total = sum(plan.planted.values())
    time_section = document["time"]
    assert sum(r["messages"] for r in time_section["over_time"]) == total
    # the planted traffic is dead-lettered within minutes: minute buckets, not hours
    assert time_section["bucket_seconds"] == 60
    assert {(r["claim_count"], r["messages"]) for r in time_section["claim_counts"]} <= {
        (synthetic.MAX_CLAIMS, n) for n in range(1, total + 1)
    }
    assert sum(r["messages"] for r in time_section["time_to_dead_letter"]) == total


def test_the_html_report_is_one_self_contained_page(report):
    _, document, out = report
    page = (out / "report.html").read_text()
    assert page.count("<svg") >= 3
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "no external asset"
    assert "<script" not in page
    for cause in synthetic.CAUSES.values():
        assert cause.signature.replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#x27;") in page
    assert json.loads((out / "report.json").read_text())["summary"] == document["summary"]


def test_the_html_report_renders_in_headless_chromium(report, tmp_path):
    from tests.conftest import missing_server

    _, _, out = report
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        missing_server("chromium")
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            # a closed machine: no update, sync or background connections
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            "--window-size=1280,2400",
            f"--screenshot={shot}",
            (out / "report.html").as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    pixels = png_pixels(shot.read_bytes())
    assert len(set(pixels)) > 16, "the screenshot is not blank: it shows text and charts"
