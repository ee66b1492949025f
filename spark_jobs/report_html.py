"""``report.html``: one self-contained page (inline CSS and SVG, no script, no external asset).

Rendered from the ``report.json`` document alone, so a saved report can be
rendered again. The page is the Jinja2 template ``templates/report.html``
(package data, as the console's pages are); this module works out what it
shows: the headline cards, the queue labels, and the geometry of the charts.
Autoescaping is on, so every text taken from messages (errors, queue names,
body paths, client ids) is HTML-escaped: error texts come from clients.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import jinja2
import markupsafe

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


def _escaped(value: Any) -> Any:
    """Escape a shown value as :func:`html.escape` does (``&quot;``, ``&#x27;``); markup passes as it is.

    The template environment's ``finalize``: what autoescaping then receives
    is markup already, so every value is escaped once, in these entities.
    """
    if isinstance(value, markupsafe.Markup):
        return value
    return markupsafe.Markup(html.escape("" if value is None else str(value), quote=True))


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


def _percent(value: Any) -> str:
    """Format a share (0..1) as a whole percentage, ``99.5%`` and ``0.4%`` keeping a decimal."""
    share = 100 * float(value)
    return f"{share:.0f}%" if round(share, 1) == round(share) else f"{share:.1f}%"


def _item_text(text: str) -> str:
    """Return an item as shown: a negated one ``path!=value`` spaced as ``path != value``."""
    path, equals, value = text.partition("=")
    return f"{path.removesuffix('!')} != {value}" if equals and path.endswith("!") else text


TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("spark_jobs", "templates"),
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    finalize=_escaped)
TEMPLATES.filters.update(num=_num, seconds=_seconds, percent=_percent, item_text=_item_text,
                         px=lambda value: f"{value:.1f}")
#: the error type item of a dead letter whose last failure had none (``transforms.NO_ERROR_TYPE``)
NO_ERROR_TYPE = "(none)"


def rule_counts(support: float, confidence: float, lift: float, base: int) -> dict[str, Any]:
    """Return what a rule counts, in dead letters, from its shares of the ``base`` dead letters mined.

    ``messages``: with the condition and the conclusion; ``condition_messages``:
    with the condition; ``cause_messages``: with the conclusion; ``expected``:
    how many of the condition's would have the conclusion at its rate among
    all dead letters; ``explained``: ``messages - expected`` (``messages x (1 -
    1/lift)``); ``risk_ratio``: how many times likelier the conclusion is with
    the condition than without it (None: never without it).
    """
    messages = int(round(support * base))
    explained = int(round(messages * (1 - 1 / lift)))
    condition = int(round(support / confidence * base))
    cause = int(round(confidence / lift * base))
    outside, others = cause - messages, base - condition
    risk_ratio = None if outside <= 0 or others <= 0 else (messages / condition) / (outside / others)
    return {
        "messages": messages,
        "explained": explained,
        "condition_messages": condition,
        "cause_messages": cause,
        "expected": messages - explained,
        "risk_ratio": risk_ratio,
    }


def _parsed_time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def _whole_number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def pause_text(source_queue: str, by: str, record: Mapping[str, Any]) -> str:
    """Return why a source queue is paused, in words, from its ``_paused_by`` record (any object).

    ``orders was paused at 12:03:30 UTC on 2026-11-28 by its dead-letter
    breaker: 57 dead letters in 31 s (rule: more than 50 dead letters within 60 s)``.
    """
    at = _parsed_time(record.get("at"))
    when = f" at {at:%H:%M:%S} UTC on {at:%Y-%m-%d}" if at else ""
    if by != "dead_letter_breaker":
        who = record.get("by")
        named = f" ({who})" if isinstance(who, str) and who and who != "operator" else ""
        return f"{source_queue} was paused{when} by an operator{named}, not by its dead-letter breaker"
    counts = []
    dead_letters, claimed = _whole_number(record.get("dead_letters")), _whole_number(record.get("claimed"))
    if dead_letters is not None:
        counts.append(f"{dead_letters:,} dead letters")
    if claimed:
        counts.append(f"of {claimed:,} messages claimed")
    started = _parsed_time(record.get("window_started"))
    if counts and at and started:
        counts.append(f"in {max(0, int((at - started).total_seconds()))} s")
    rule = record.get("rule")
    text = f"{source_queue} was paused{when} by its dead-letter breaker"
    text += f": {' '.join(counts)}" if counts else ""
    return text + (f" (rule: {rule})" if isinstance(rule, str) and rule else "")


def _conclusion(item: str, names: Mapping[str, str]) -> str:
    """Return what a rule concludes, in words: ``error type X``, ``no error type``, ``signature <text>``."""
    kind, _, value = item.partition("=")
    if kind == "error_type":
        return "no error type" if value == NO_ERROR_TYPE else f"error type {value}"
    return f"signature {names.get(value, value)}"


def _rule_rows(report: Mapping[str, Any], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Return the rules shown, each with its counts (computed for a report saved without them)."""
    base = report["summary"]["dead_letters"]
    return [
        {**rule_counts(r["support"], r["confidence"], r["lift"], base), **r,
         "conclusion": _conclusion(r["consequent"][0], names)}
        for r in report["rules"][:TOP_RULES]
    ]


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
) -> dict[str, Any]:
    """Return the geometry of stacked bars (one per label, one colour per series) the template draws."""
    left, right, top, bottom = 48, 10, 24, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum(values[i] for values in series.values()) for i in range(len(labels))]
    top_value = _nice_max(max(totals, default=0))
    slot = plot_w / max(1, len(labels))
    bar = min(60.0, max(1.0, slot * 0.8))
    colours = _colours(len(series))
    every = max(1, len(labels) // 24)
    bars = []
    for i, label in enumerate(labels):
        y = top + plot_h
        stack = []
        for colour, (name, values) in zip(colours, series.items(), strict=True):
            h = plot_h * values[i] / top_value
            if h > 0:
                y -= h
                stack.append({"y": y, "height": h, "colour": colour, "name": name, "value": values[i]})
        bars.append({"x": left + i * slot + (slot - bar) / 2, "label": label, "stack": stack,
                     "label_x": left + i * slot + slot / 2 if i % every == 0 else None})
    return {
        "title": title, "width": width, "height": height, "left": left, "right": width - right,
        "base": top + plot_h, "bar": bar, "bars": bars, "legend": list(zip(colours, series, strict=True)),
        "ticks": [(top + plot_h - plot_h * tick / 5, top_value * tick / 5) for tick in range(6)],
    }


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


def _time_chart(report: Mapping[str, Any], projects: int) -> dict[str, Any] | None:
    """Return the chart of dead letters over time, or None when there are none."""
    section = report["time"]
    rows, width = section["over_time"], int(section["bucket_seconds"])
    if not rows:
        return None
    first = min(r["start_seconds"] for r in rows)
    last = max(r["start_seconds"] for r in rows)
    starts = list(range(first, last + width, width))
    pattern = next((p for size, p in reversed(_BUCKET_LABELS) if width >= size), _BUCKET_LABELS[0][1])
    labels = [datetime.fromtimestamp(start, UTC).strftime(pattern) for start in starts]
    series = _series(rows, "start_seconds", starts, projects)
    return bar_chart(labels, series, f"Dead letters per {_bucket_name(width)} (UTC), by source queue")


def _distribution_charts(report: Mapping[str, Any], projects: int) -> list[dict[str, Any]]:
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
    return charts


def _cards(report: Mapping[str, Any]) -> list[tuple[str, int]]:
    """Return the headline counts: (what, how many)."""
    summary = report["summary"]
    cards = [
        ("dead letters", summary["dead_letters"]),
        ("DLQs", len({(q["project"], q["queue"]) for q in summary["queues"]})),
        ("source queues", summary["source_queues"]),
        ("signatures", summary["signatures"]),
        ("payload shapes", len(report["shapes"])),
        ("cause rules", len(report["rules"])),
    ]
    cards += [(f"reason {reason}", count) for reason, count in sorted(summary["by_reason"].items())]
    if summary.get("encrypted_dead_letters"):
        cards.append(("encrypted at rest: bodies not read", summary["encrypted_dead_letters"]))
    return cards


def render(report: Mapping[str, Any]) -> str:
    """Return the HTML page of a report document (the ``report.json`` schema)."""
    projects = len({q["project"] for q in report["summary"]["queues"]})
    names = {s["id"]: s["signature"] for s in report["signatures"]}
    return TEMPLATES.get_template("report.html").render(
        report=report,
        summary=report["summary"],
        cards=_cards(report),
        names=names,
        no_error_type=NO_ERROR_TYPE,
        rules=_rule_rows(report, names),
        signatures=report["signatures"][:TOP_SIGNATURES],
        paused=report.get("paused", []),
        shapes=report["shapes"][:TOP_SHAPES],
        time_chart=_time_chart(report, projects),
        distribution_charts=_distribution_charts(report, projects),
        label=lambda row: _queue_label(row, projects),
    )
