"""``report.html``: one self-contained page (inline CSS and SVG, no script, no external asset).

Rendered from the ``report.json`` document alone, so a saved report can be
rendered again. Every text taken from messages (errors, queue names, body
paths, client ids) is HTML-escaped: error texts come from clients.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
TOP_SIGNATURES = 25
TOP_RULES = 25
TOP_SHAPES = 15
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1200px;
color:#222;padding:0 16px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ddd;
padding-bottom:4px}.muted{color:#666}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:130px}
.card b{display:block;font-size:22px}table{border-collapse:collapse;width:100%;margin:8px 0}
th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f6f6;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px/1.3 ui-monospace,SFMono-Regular,Menlo,monospace;background:#f3f3f3;padding:1px 3px;
border-radius:3px;word-break:break-word}.item{display:inline-block;margin:1px 2px}
.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:10px;height:10px;
margin-right:4px}figure{margin:0 0 16px}svg text{font:11px system-ui,sans-serif;fill:#444}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return ""
    if digits:
        return f"{float(value):,.{digits}f}"
    return f"{int(value):,}"


def _seconds(value: Any) -> str:
    if value is None:
        return ""
    seconds = float(value)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _nice_max(value: float) -> float:
    """Return a round axis maximum at or above ``value``."""
    if value <= 5:
        return 5.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return float(step * magnitude)
    return float(10 * magnitude)


def bar_chart(
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    title: str,
    width: int = 1100,
    height: int = 260,
) -> str:
    """Return an inline SVG of stacked bars: one bar per label, one colour per series."""
    left, right, top, bottom = 48, 10, 24, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum(values[i] for values in series.values()) for i in range(len(labels))]
    top_value = _nice_max(max(totals, default=0))
    slot = plot_w / max(1, len(labels))
    bar = min(60.0, max(1.0, slot * 0.8))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{_e(title)}"><title>{_e(title)}</title>'
    ]
    for tick in range(6):
        value = top_value * tick / 5
        y = top + plot_h - plot_h * tick / 5
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_num(value)}</text>'
        )
    every = max(1, len(labels) // 24)
    for i, label in enumerate(labels):
        x = left + i * slot + (slot - bar) / 2
        y = top + plot_h
        for colour, (name, values) in zip(_colours(len(series)), series.items(), strict=True):
            h = plot_h * values[i] / top_value
            if h > 0:
                y -= h
                parts.append(
                    f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" fill="{colour}">'
                    f"<title>{_e(name)} {_e(label)}: {_num(values[i])}</title></rect>"
                )
        if i % every == 0:
            cx = left + i * slot + slot / 2
            parts.append(
                f'<text x="{cx:.1f}" y="{top + plot_h + 14}" text-anchor="end" '
                f'transform="rotate(-35 {cx:.1f} {top + plot_h + 14})">{_e(label)}</text>'
            )
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#999"/>'
    )
    parts.append("</svg>")
    legend = "".join(
        f'<span><i style="background:{c}"></i>{_e(name)}</span>'
        for c, name in zip(_colours(len(series)), series, strict=True)
    )
    return (
        f"<figure><figcaption>{_e(title)}</figcaption>{''.join(parts)}"
        f'<div class="legend">{legend}</div></figure>'
    )


def _colours(count: int) -> list[str]:
    return [PALETTE[i % len(PALETTE)] for i in range(count)]


def _queue_label(row: Mapping[str, Any], projects: int) -> str:
    return f"{row['project']}/{row['source_queue']}" if projects > 1 else str(row["source_queue"])


def _series(
    rows: Sequence[Mapping[str, Any]],
    key: str,
    labels: Sequence[Any],
    projects: int,
    top: int = len(PALETTE) - 1,
) -> dict[str, list[float]]:
    """Return per source queue the counts at each label; queues past ``top`` are summed as "other"."""
    by_queue: dict[str, dict[Any, float]] = defaultdict(dict)
    for row in rows:
        by_queue[_queue_label(row, projects)][row[key]] = (
            by_queue[_queue_label(row, projects)].get(row[key], 0) + row["messages"]
        )
    ranked = sorted(by_queue, key=lambda q: (-sum(by_queue[q].values()), q))
    series = {q: [by_queue[q].get(label, 0) for label in labels] for q in ranked[:top]}
    if len(ranked) > top:
        series["other"] = [sum(by_queue[q].get(label, 0) for q in ranked[top:]) for label in labels]
    return series


#: strftime of a time-chart label per bucket width (seconds): the smallest width at or above it
_BUCKET_LABELS = ((60, "%m-%d %H:%M"), (3600, "%m-%d %H:00"), (86400, "%Y-%m-%d"))


def _bucket_name(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}s" if count > 1 else unit
    return f"{seconds} s"


def _time_chart(report: Mapping[str, Any], projects: int) -> str:
    from datetime import datetime

    section = report["time"]
    rows, width = section["over_time"], int(section["bucket_seconds"])
    if not rows:
        return '<p class="muted">No dead letters.</p>'
    first = min(r["start_seconds"] for r in rows)
    last = max(r["start_seconds"] for r in rows)
    starts = list(range(first, last + width, width))
    pattern = next((p for size, p in reversed(_BUCKET_LABELS) if width >= size), _BUCKET_LABELS[0][1])
    labels = [datetime.fromtimestamp(start, UTC).strftime(pattern) for start in starts]
    series = _series(rows, "start_seconds", starts, projects)
    return bar_chart(labels, series, f"Dead letters per {_bucket_name(width)} (UTC), by source queue")


def _distribution_charts(report: Mapping[str, Any], projects: int) -> str:
    claims = report["time"]["claim_counts"]
    counts = sorted({r["claim_count"] for r in claims})
    delays = report["time"]["time_to_dead_letter"]
    buckets = sorted({(r["bucket"], r["label"]) for r in delays})
    charts = []
    if counts:
        charts.append(
            bar_chart(
                [str(c) for c in counts],
                _series(claims, "claim_count", counts, projects),
                "Claim count of dead letters",
                width=540,
            )
        )
    if buckets:
        charts.append(
            bar_chart(
                [label for _, label in buckets],
                _series(delays, "bucket", [b for b, _ in buckets], projects),
                "Time from first post to dead-lettering",
                width=540,
            )
        )
    return '<div style="display:flex;flex-wrap:wrap;gap:16px">' + "".join(charts) + "</div>"


def render(report: Mapping[str, Any]) -> str:
    """Return the HTML page of a report document (the ``report.json`` schema)."""
    summary = report["summary"]
    projects = len({q["project"] for q in summary["queues"]})
    cards = [
        ("dead letters", _num(summary["dead_letters"])),
        ("DLQs", _num(len({(q["project"], q["queue"]) for q in summary["queues"]}))),
        ("source queues", _num(summary["source_queues"])),
        ("signatures", _num(summary["signatures"])),
        ("payload shapes", _num(len(report["shapes"]))),
        ("cause rules", _num(len(report["rules"]))),
    ]
    for reason, count in sorted(summary["by_reason"].items()):
        cards.append((f"reason {reason}", _num(count)))
    if summary.get("encrypted_dead_letters"):
        cards.append(("encrypted at rest: bodies not read", _num(summary["encrypted_dead_letters"])))
    page = [
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>DLQ report</title>'
        f"<style>{CSS}</style></head><body>",
        "<h1>Dead-letter report</h1>",
        f'<p class="muted">Generated {_e(report["generated_at"])} from {_e(report["source"]["storage"])}; '
        f"dead-lettered between {_e(summary['first_dead_lettered_at'])} and "
        f"{_e(summary['last_dead_lettered_at'])}.</p>",
        '<div class="cards">'
        + "".join(f'<div class="card"><b>{v}</b>{_e(k)}</div>' for k, v in cards)
        + "</div>",
    ]

    page.append(
        '<h2>Top causes</h2><p class="muted">What the dead letters of a failure have in common: '
        "association rules (FP-Growth over the items that separate a failure from the rest of its "
        "queue) concluding an error type or a signature, most explaining first. A rule that only "
        "names the source queue, shape, message type or client is left out when a body field "
        "explains the same dead letters. <i>Explained</i>: dead letters beyond what the failure's "
        "own rate predicts; confidence: share of the dead letters with the left side that have "
        "the right side; lift: how many times likelier than on average.</p>"
    )
    names = {s["id"]: s["signature"] for s in report["signatures"]}

    def item(text: str) -> str:
        kind, _, value = text.partition("=")
        title = f' title="{_e(names[value])}"' if kind == "signature" and value in names else ""
        return f'<code class="item"{title}>{_e(text)}</code>'

    page.append(
        _table(
            ["when", "then", "dead letters", "explained", "confidence", "lift"],
            [
                [
                    " ".join(item(i) for i in r["antecedent"]),
                    " ".join(item(i) for i in r["consequent"]),
                    _num(r["messages"]),
                    _num(r["explained"]),
                    _num(r["confidence"], 3),
                    _num(r["lift"], 2),
                ]
                for r in report["rules"][:TOP_RULES]
            ],
            numeric=(2, 3, 4, 5),
        )
        if report["rules"]
        else '<p class="muted">No rule reached the support and confidence thresholds.</p>'
    )

    page.append("<h2>Dead-letter queues</h2>")
    page.append(
        _table(
            ["project", "DLQ", "source queue", "reason", "messages", "first", "last"],
            [
                [
                    _e(q["project"]),
                    _e(q["queue"]),
                    _e(q["source_queue"]),
                    _e(q["reason"]),
                    _num(q["messages"]),
                    _e(q["first"]),
                    _e(q["last"]),
                ]
                for q in summary["queues"]
            ],
            numeric=(4,),
        )
    )

    page.append(
        '<h2>Top failure signatures</h2><p class="muted">Error texts with numbers, ids, hex, quoted '
        "values, paths and addresses masked. The ids of the messages of each signature are in "
        "<code>signatures/&lt;project&gt;/&lt;DLQ&gt;/&lt;id&gt;.txt</code> (a redrive filter).</p>"
    )
    page.append(
        _table(
            ["signature", "DLQ", "source queue", "messages", "failures", "first seen", "last seen",
             "example"],
            [
                [
                    f'<code>{_e(s["signature"])}</code><br><span class="muted">{_e(s["ids_file"])}</span>',
                    _e(s["queue"]),
                    _e(_queue_label(s, projects)),
                    _num(s["messages"]),
                    _num(s["failures"]),
                    _e(s["first_seen"]),
                    _e(s["last_seen"]),
                    f"<code>{_e(s['example_error'])}</code><br>"
                    f'<span class="muted">{_e(", ".join(s["examples"]))}</span>',
                ]
                for s in report["signatures"][:TOP_SIGNATURES]
            ],
            numeric=(3, 4),
        )
    )

    page.append("<h2>Time</h2>")
    page.append(_time_chart(report, projects))
    page.append(_distribution_charts(report, projects))
    page.append(
        _table(
            ["source queue", "messages", "median to dead letter", "90th percentile", "max"],
            [
                [
                    _e(_queue_label(s, projects)),
                    _num(s["messages"]),
                    _seconds(s["p50_seconds"]),
                    _seconds(s["p90_seconds"]),
                    _seconds(s["max_seconds"]),
                ]
                for s in report["time"]["time_to_dead_letter_stats"]
            ],
            numeric=(1,),
        )
    )

    page.append(
        '<h2>Payload shapes</h2><p class="muted">JSON key paths and value types of the bodies; '
        "<i>missing</i> lists paths other shapes of the same queue have.</p>"
    )
    page.append(
        _table(
            ["shape", "source queue", "messages", "missing", "paths", "examples"],
            [
                [
                    _e(s["id"]),
                    _e(_queue_label(s, projects)),
                    _num(s["messages"]),
                    " ".join(f'<code class="item">{_e(p)}</code>' for p in s["missing_paths"]),
                    " ".join(f'<code class="item">{_e(p)}</code>' for p in s["paths"]),
                    _e(", ".join(s["examples"])),
                ]
                for s in report["shapes"][:TOP_SHAPES]
            ],
            numeric=(2,),
        )
    )
    page.append("</body></html>")
    return "\n".join(page)
