"""``report.html`` is the packaged Jinja2 template ``spark_jobs/templates/report.html``, escaping every text.

No Spark here: the page is rendered from a literal ``report.json`` document,
by this checkout and by the wheel built from it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from spark_jobs import report_html

ROOT = Path(__file__).resolve().parent.parent.parent
SCRIPT = "<script>alert(\"x\")</script>"
SCRIPT_SHOWN = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"


def document() -> dict[str, Any]:
    """Return a small report document whose every text taken from messages carries markup or a quote."""
    source = {"project": "shop", "source_queue": "orders<em>"}
    first, last = "2025-01-01T10:00:00Z", "2025-01-01T10:05:00Z"
    return {
        "generated_at": "2025-01-02T00:00:00Z",
        "source": {"storage": "sqlite:////srv/zaqar.db"},
        "summary": {"dead_letters": 1234, "source_queues": 1, "signatures": 1,
                    "by_reason": {"max_claims": 1234}, "encrypted_dead_letters": 7,
                    "queues": [{**source, "queue": "orders-dlq", "reason": "max_claims", "messages": 1234,
                                "first": first, "last": last}],
                    "first_dead_lettered_at": first, "last_dead_lettered_at": last},
        "rules": [{"antecedent": ["client=it's {{ 7*7 }}", "signature=abc123", "card.network!=a<b>"],
                   "consequent": ["error_type=E"], "support": 0.8914, "confidence": 0.90909, "lift": 12.345,
                   "messages": 1100, "explained": 1000, "condition_messages": 1210, "cause_messages": 1200,
                   "expected": 100, "risk_ratio": 2.5},
                  {"antecedent": ["currency=GBP"], "consequent": ["error_type=(none)"], "support": 0.01,
                   "confidence": 1.0, "lift": 3.0, "messages": 15, "explained": 10, "condition_messages": 15,
                   "cause_messages": 411, "expected": 5, "risk_ratio": None}],
        "signatures": [{**source, "id": "abc123", "signature": f"declined: {SCRIPT}", "queue": "orders-dlq",
                        "ids_file": "signatures/a.txt", "messages": 1234, "failures": 3702,
                        "first_seen": first, "last_seen": last,
                        "example_error": "card '4111' declined", "examples": ["id-1", "id<2>"]}],
        "shapes": [{**source, "id": "s1", "messages": 1234, "paths": ["card.<network>:string"],
                    "missing_paths": ["a&b:number"], "examples": ["id-1"]}],
        "time": {
            "bucket_seconds": 60,
            "over_time": [{**source, "start_seconds": 1735725600, "messages": 1234}],
            "claim_counts": [{**source, "claim_count": 3, "messages": 1234}],
            "time_to_dead_letter": [{**source, "bucket": 2, "label": "1-5 min", "messages": 1234}],
            "time_to_dead_letter_stats": [{**source, "messages": 1234, "p50_seconds": 90, "p90_seconds": 7200,
                                           "max_seconds": None}],
        },
    }


def test_every_text_from_messages_is_escaped_and_no_template_syntax_in_it_runs():
    page = report_html.render(document())

    assert "<script" not in page and "<em>" not in page
    assert f"<code>declined: {SCRIPT_SHOWN}</code>" in page
    assert f'<code class="item" title="declined: {SCRIPT_SHOWN}">signature=abc123</code>' in page
    assert '<code class="item">client=it&#x27;s {{ 7*7 }}</code>' in page
    assert "<code>card &#x27;4111&#x27; declined</code><br>" in page
    assert '<span class="muted">id-1, id&lt;2&gt;</span>' in page
    assert '<code class="item">a&amp;b:number</code>' in page
    assert "<td>orders&lt;em&gt;</td>" in page
    assert '<div class="card"><b>7</b>encrypted at rest: bodies not read</div>' in page
    assert '<code class="item">card.network != a&lt;b&gt;</code>' in page
    assert ('<td class="n">1,100</td><td class="n">1,000</td><td class="n">0.909</td><td class="n">12.35</td>'
            '<td class="n">2.50</td>') in page
    assert "<td>1.5 min</td><td>2.0 h</td><td></td>" in page
    assert page.startswith('<!DOCTYPE html><html lang="en">') and page.endswith("</body></html>")


def test_every_figure_of_a_rule_says_what_it_counts():
    page = report_html.render(document())

    for header in ("when (condition)", "then (conclusion)", "both", "explained", "confidence", "lift",
                   "risk ratio", "in words"):
        assert f"<th>{header}</th>" in page
    assert ("<td>1,100 of the 1,200 dead letters with error type E (91.7%) match the condition. "
            "Of the 1,210 dead letters matching the condition, 90.9% have error type E (confidence 0.909); "
            "at the share of all 1,234 dead letters with it (97.2%), 100 of them would: the condition "
            "explains 1,000 more. "
            "With the condition it is 2.50 times as likely as without (risk ratio).</td>") in page
    assert ("<td>15 of the 411 dead letters with no error type (3.6%) match the condition. "
            "Of the 15 dead letters matching the condition, 100% have no error type (confidence 1.000); "
            "at the share of all 1,234 dead letters with it (33.3%), 5 of them would: the condition "
            "explains 10 more. "
            "No dead letter without the condition has it.</td>") in page
    assert '<td class="n">never without</td>' in page
    assert "<th>dead letters</th><th>failures</th>" in page
    assert ("<i>Dead letters</i>: the dead letters that failed so at least once; <i>failures</i>: how many "
            "times, in all their failure histories.") in page
    assert ('<code class="item">error_type=(none)</code><br><span class="muted">no error type: the consumer '
            'released the message without one (or its claim lapsed, or it expired)</span>') in page


def test_a_report_saved_without_the_counts_of_its_rules_shows_them():
    saved = document()
    saved["summary"]["dead_letters"] = 53
    # 18 amex timeouts, 20 amex dead letters, 53 in all: support 18/53, confidence 0.9, lift 0.9 / (18/53)
    saved["rules"] = [{"antecedent": ["card.network=amex"], "consequent": ["error_type=AuthorizationTimeout"],
                       "support": 18 / 53, "confidence": 0.9, "lift": 2.65, "messages": 18, "explained": 11}]
    page = report_html.render(saved)

    assert ("<td>18 of the 18 dead letters with error type AuthorizationTimeout (100%) match the condition. "
            "Of the 20 dead letters matching the condition, 90% have error type AuthorizationTimeout "
            "(confidence 0.900); at the share of all 53 dead letters with it (34%), 7 of them would: "
            "the condition explains 11 more. "
            "No dead letter without the condition has it.</td>") in page


def test_the_page_is_the_template_the_package_ships():
    conf = (ROOT / "setup.cfg").read_text()
    assert "spark_jobs = log4j2.properties, templates/*.html" in conf
    assert (ROOT / "spark_jobs" / "templates" / "report.html").is_file()
    assert report_html.TEMPLATES.get_template("report.html").filename == str(
        ROOT / "spark_jobs" / "templates" / "report.html")


def test_the_wheel_holds_the_template_and_its_report_renders(tmp_path):
    # a copy of the sources: building in the checkout would leave build/ and *.egg-info in it
    source = tmp_path / "source"
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.rst"):
        shutil.copy(ROOT / name, source / name)
    for package in ("zaqar_lite", "spark_jobs"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(tmp_path / "dist"), str(source)], check=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("zaqar_lite-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "spark_jobs/templates/report.html" in archive.namelist()
        archive.extractall(tmp_path / "installed")

    # the wheel's spark_jobs alone, not this checkout's: a process started elsewhere, with it first
    (tmp_path / "report.json").write_text(json.dumps(document()))
    rendered = subprocess.run(
        [sys.executable, "-c",
         "import json, sys; sys.path.insert(0, sys.argv[1]); from spark_jobs import report_html; "
         "assert report_html.__file__.startswith(sys.argv[1]), report_html.__file__; "
         "print(report_html.render(json.load(open(sys.argv[2]))), end='')",
         str(tmp_path / "installed"), str(tmp_path / "report.json")],
        capture_output=True, text=True, check=True, timeout=120, cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"})
    assert rendered.stdout == report_html.render(document())
