"""How well failure signatures group labelled log lines, against drain3, on LogPAI's Loghub-2k sets.

Each set is a CSV of 2,000 log lines (``Content``), each labelled with its
template (``EventTemplate``): the sets are not part of the repository, pass
their directory (``--data``; LogPAI's ``*_2k.log_structured*.csv`` files,
keep their LICENSE and CITATION with them). For each set, the lines are
grouped twice, in the same run:

* ``ours``: by failure signature (``zaqar_lite.claims.signatures``), each
  line taken as a failure's ``error`` text. By default the signature
  function is called directly; ``--through-report`` sends every line
  through a real server instead (``zaqar-lite serve`` on a fresh SQLite
  file): posted to a queue whose dead-letter queue takes a message at its
  first release, claimed, released with the line as the failure's
  ``error``, so dead-lettered; then the real report (``python -m
  spark_jobs.dlq_report``) runs on that store and its ``signatures.json``
  names the groups, and the redrive filter's ids (``GET .../dead_letters``
  grouped by the console's code) are checked to agree with it;
* ``drain3``: drain3's ``TemplateMiner`` with its default settings, fed
  the same lines in order (its clusters after the last line are the
  groups).

And scored with LogPAI's definitions (Loghub-2.0's ``evaluator``):

* GA, grouping accuracy: the share of lines whose group is exactly the set
  of lines of their template;
* FGA: the F1 of the groups that are exactly a template's lines (precision
  over the groups found, recall over the templates);
* PA, parsing accuracy: the share of lines whose template text is the
  labelled one (ours: the masked text with each placeholder such as
  ``<n>`` read as ``<*>``, runs of ``<*>`` and spaces normalised).

Lines per second are those of the grouping alone, in this Python process
(``ours``: ``signature`` on every line; ``drain3``: ``add_log_message``),
the fastest of three runs; the ``mean`` row's are every line over the
seconds of every set.
Run from the repository root::

    .venv/bin/python benchmarks/loghub_grouping.py --data /path/to/loghub-2k
    .venv/bin/python benchmarks/loghub_grouping.py --data /path/to/loghub-2k --through-report
    .venv/bin/python benchmarks/loghub_grouping.py --data /path/to/loghub-2k --json > figures.json

drain3 is a benchmark-only dependency (``pip install -e .[bench]``).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zaqar_lite.claims import signatures  # noqa: E402

DEFAULT_DATA = Path("/work/shared/data/loghub-2k")
_PLACEHOLDER = re.compile(r"<[a-z]+>|<\*>")
_STARS = re.compile(r"<\*>(?:[ ]*<\*>)*")
_SPACES = re.compile(r"\s+")


def load(path: Path) -> tuple[list[str], list[str]]:
    """Return the contents and the labelled templates of one set."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [r["Content"] for r in rows], [r["EventTemplate"] for r in rows]


def normalised(template: str) -> str:
    """Return a template with its placeholders read as ``<*>``, runs of them and of spaces made one."""
    text = _PLACEHOLDER.sub("<*>", template)
    text = _STARS.sub("<*>", text)
    return _SPACES.sub(" ", text).strip()


def scores(truth: Sequence[str], groups: Sequence[str],
           templates: Sequence[str] | None = None) -> dict[str, float]:
    """Return GA, FGA and (given each line's template text) PA of a grouping against the labels."""
    truth_size = Counter(truth)
    members: dict[str, list[int]] = defaultdict(list)
    for line, group in enumerate(groups):
        members[group].append(line)
    exact_lines = exact_groups = 0
    for lines in members.values():
        labels = {truth[i] for i in lines}
        if len(labels) == 1 and truth_size[next(iter(labels))] == len(lines):
            exact_lines += len(lines)
            exact_groups += 1
    precision = exact_groups / len(members) if members else 0.0
    recall = exact_groups / len(truth_size) if truth_size else 0.0
    fga = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    result = {"GA": exact_lines / len(truth), "FGA": fga}
    if templates is not None:
        same = sum(normalised(t) == normalised(g) for t, g in zip(templates, truth, strict=True))
        result["PA"] = same / len(truth)
    return result


#: timed runs of each grouping (the fastest counts: the others are the machine's noise)
RUNS = 3


def ours(lines: Sequence[str]) -> tuple[list[str], float]:
    """Return the signature of every line and the seconds taken (fastest of :data:`RUNS`)."""
    signature = signatures.signature
    best = float("inf")
    for _ in range(RUNS):
        start = time.perf_counter()
        result = [signature(None, line) for line in lines]
        best = min(best, time.perf_counter() - start)
    return result, best


def drain(lines: Sequence[str]) -> tuple[list[str], list[str], float]:
    """Return each line's drain3 cluster id and final template, and the seconds the mining took.

    drain3's ``TemplateMiner`` with its default settings (no masking, no
    persistence), a fresh one for each of :data:`RUNS` runs (the fastest counts).
    """
    from drain3 import TemplateMiner  # type: ignore[import-not-found, unused-ignore]
    from drain3.template_miner_config import TemplateMinerConfig  # type: ignore[import-not-found, unused-ignore]

    best = float("inf")
    for _ in range(RUNS):
        miner = TemplateMiner(config=TemplateMinerConfig())
        start = time.perf_counter()
        ids = [miner.add_log_message(line)["cluster_id"] for line in lines]
        best = min(best, time.perf_counter() - start)
    templates = {c.cluster_id: c.get_template() for c in miner.drain.clusters}
    return [str(i) for i in ids], [templates[i] for i in ids], best


PROJECT = "loghub"
#: messages per post and per claim (within the server's defaults)
BATCH = 10


def dead_letter_lines(api: Any, queue: str, lines: Sequence[str]) -> dict[str, int]:
    """Post each line's message to a queue, claim it, release it with the line as ``error``: dead-lettered.

    The queue hands a message out once (``_max_claim_count`` 1), so its first
    release exhausts it and the server moves it to ``<queue>-dlq``. Returns
    the line number of each message id.
    """
    dlq = f"{queue}-dlq"
    assert api.put(f"/v2/queues/{dlq}", json={}).status_code in (201, 204)
    metadata = {"_max_claim_count": 1, "_dead_letter_queue": dlq}
    assert api.put(f"/v2/queues/{queue}", json=metadata).status_code in (201, 204)
    line_of: dict[str, int] = {}
    for start in range(0, len(lines), BATCH):
        numbers = range(start, min(start + BATCH, len(lines)))
        posted = api.post(f"/v2/queues/{queue}/messages",
                          json={"messages": [{"body": {"line": n}, "ttl": 86400} for n in numbers]})
        assert posted.status_code == 201, posted.text
        for href, n in zip(posted.json()["resources"], numbers, strict=True):
            line_of[href.rsplit("/", 1)[1]] = n
    while True:
        claimed = api.post(f"/v2/queues/{queue}/claims", json={"ttl": 300, "grace": 60},
                           params={"limit": BATCH})
        if claimed.status_code == 204:
            break
        assert claimed.status_code == 201, claimed.text
        claim_id = claimed.headers["Location"].rsplit("/", 1)[1]
        for message in claimed.json()["messages"]:
            released = api.post(f"/v2/queues/{queue}/messages/{message['id']}/release",
                                params={"claim_id": claim_id}, json={"error": lines[message["body"]["line"]]})
            assert released.status_code == 204, released.text
    return line_of


def through_report(sets: dict[str, list[str]], keep: Path | None = None) -> dict[str, list[str]]:
    """Return, for each set, the report's signature id of every line, through a real server and report.

    A ``zaqar-lite serve`` on a fresh SQLite file takes every line as a
    released failure's ``error`` (:func:`dead_letter_lines`); once every
    message is in its dead-letter queue, the console's grouping
    (``by_last_signature``, the code of the queue page and of the redrive
    filter) is read through the storage contract, and ``zaqar-lite
    dlq-report`` runs on the store: each ``signatures/<project>/<DLQ>/<id>.txt``
    it writes lists the dead letters of one signature id.
    """
    import subprocess
    import tempfile

    from tests.e2e import harness
    from zaqar_lite.claims import redrive
    from zaqar_lite.models import RedriveFilter

    with tempfile.TemporaryDirectory(dir=keep) as tmp:
        directory = Path(tmp)
        uri = f"sqlite:///{directory / 'zaqar.db'}"
        server = harness.start_server(uri, directory, workers=2)
        try:
            api = harness.ApiSession(server.url, project=PROJECT)
            started = time.perf_counter()
            line_of = {name: dead_letter_lines(api, name.lower(), lines) for name, lines in sets.items()}
            deadline = time.monotonic() + 120
            for name, lines in sets.items():
                stats = f"/v2/queues/{name.lower()}-dlq/stats"
                while api.get(stats).json()["messages"]["total"] < len(lines):
                    assert time.monotonic() < deadline, f"{name}: not every message reached its DLQ"
                    time.sleep(0.5)
            print(f"through the API: {sum(map(len, sets.values()))} dead letters in "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        finally:
            harness.stop_server(server)
        console, letters = console_groups(uri, sets, line_of)
        out = directory / "report"
        started = time.perf_counter()
        subprocess.run([str(Path(sys.executable).with_name("zaqar-lite")), "dlq-report", "--storage", uri,
                        "--out", str(out), "--master", "local[2]"], check=True, stdout=subprocess.DEVNULL)
        print(f"dlq-report: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        result: dict[str, list[str]] = {}
        for name, lines in sets.items():
            ids = [""] * len(lines)
            for ids_file in (out / "signatures" / PROJECT / f"{name.lower()}-dlq").glob("*.txt"):
                for message_id in ids_file.read_text().split():
                    ids[line_of[name][message_id]] = ids_file.stem
            assert all(ids), f"{name}: a dead letter in no signature's ids file"
            assert ids == console[name], f"{name}: the report and the console group differently"
            # the redrive filter: the report's id of a line selects that line's dead letter,
            # and so does the first scheme's
            for message, identifier in zip(letters[name], ids, strict=True):
                assert redrive.matches(message, RedriveFilter(signature=identifier)), (name, identifier)
                legacy = signatures.legacy_failure_signature_id(None, lines[line_of[name][message.id]])
                assert redrive.matches(message, RedriveFilter(signature=legacy)), (name, legacy)
            result[name] = ids
        return result


def console_groups(uri: str, sets: dict[str, list[str]],
                   line_of: dict[str, dict[str, int]]) -> tuple[dict[str, list[str]], dict[str, list[Any]]]:
    """Return each line's signature id as the console's queue page groups it, and each line's dead letter."""
    from zaqar_lite.claims import redrive
    from zaqar_lite.storage import open_storage

    store = open_storage(uri)
    result, messages = {}, {}
    for name, lines in sets.items():
        ids = [""] * len(lines)
        letters: list[Any] = []
        marker = None
        while True:  # the console's read of a DLQ (service.operations.dead_letters), every page
            page = store.list_messages(PROJECT, f"{name.lower()}-dlq", now=time.time(), marker=marker,
                                       limit=100, include_claimed=True, include_delayed=True,
                                       exclude_client_id=None)
            letters.extend(m for m in page if m.dead_letter is not None)
            if len(page) < 100:
                break
            marker = page[-1].marker
        for group in redrive.by_last_signature(letters):
            for message in group.messages:
                ids[line_of[name][message.id]] = group.signature_id
        result[name] = ids
        messages[name] = sorted(letters, key=lambda m: line_of[name][m.id])
    return result, messages


def sets_in(directory: Path, only: Sequence[str]) -> dict[str, Path]:
    """Return the sets found in a directory by name (``Apache``, ``HDFS``...), sorted."""
    found = {}
    for path in sorted(directory.glob("*_2k.log_structured*.csv")):
        name = path.name.split("_2k", 1)[0]
        if (not only or name in only) and (name not in found or "corrected" in path.name):
            found[name] = path
    return found


def table(rows: list[dict[str, Any]]) -> str:
    """Return the figures as an aligned text table, with the mean last."""
    head = (f"{'set':<12} {'GA':>6} {'FGA':>6} {'PA':>6} | {'drain3':>6} {'FGA':>6} {'PA':>6} | "
            f"{'ours l/s':>9} {'drain3 l/s':>10}")
    out = [head, "-" * len(head)]
    for r in rows:
        out.append(f"{r['set']:<12} "
                   f"{r['ours']['GA']:>6.3f} {r['ours']['FGA']:>6.3f} {r['ours']['PA']:>6.3f} | "
                   f"{r['drain3']['GA']:>6.3f} {r['drain3']['FGA']:>6.3f} {r['drain3']['PA']:>6.3f} | "
                   f"{r['ours_lines_s']:>9.0f} {r['drain3_lines_s']:>10.0f}")
    n = len(rows)

    def mean(who: str, key: str) -> float:
        return sum(r[who][key] for r in rows) / n

    out.append("-" * len(head))
    lines = sum(r["lines"] for r in rows)

    def overall(who: str) -> float:  # every line over the seconds of every set
        return lines / sum(r["lines"] / r[f"{who}_lines_s"] for r in rows)

    out.append(f"{'mean':<12} "
               f"{mean('ours', 'GA'):>6.3f} {mean('ours', 'FGA'):>6.3f} {mean('ours', 'PA'):>6.3f} | "
               f"{mean('drain3', 'GA'):>6.3f} {mean('drain3', 'FGA'):>6.3f} {mean('drain3', 'PA'):>6.3f} | "
               f"{overall('ours'):>9.0f} {overall('drain3'):>10.0f}")
    below = [r["set"] for r in rows if r["ours"]["GA"] < r["drain3"]["GA"]]
    out.append(f"sets where ours groups worse than drain3 (GA): {', '.join(below) or 'none'}")
    return "\n".join(out)


def main() -> int:
    """Score every set and print the table (or JSON)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="directory of the Loghub-2k CSV files")
    p.add_argument("--sets", nargs="*", default=[], help="only these sets (Apache, HDFS...)")
    p.add_argument("--through-report", action="store_true",
                   help="group through a real server, dead letters and the real report")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--show", type=int, default=0, help="print the N largest wrong groups of each set (ours)")
    args = p.parse_args()
    found = sets_in(args.data, args.sets)
    if not found:
        p.error(f"no *_2k.log_structured*.csv file in {args.data}")
    loaded = {name: load(path) for name, path in found.items()}
    reported: dict[str, list[str]] = {}
    if args.through_report:
        reported = through_report({name: lines for name, (lines, _) in loaded.items()})
    rows = []
    for name, (lines, truth) in loaded.items():
        texts, seconds = ours(lines)
        groups = reported.get(name, texts)
        if args.through_report:
            # the report's groups must be the signature function's, line for line
            pairs = set(zip(groups, texts, strict=True))
            assert len(pairs) == len({g for g, _ in pairs}) == len({t for _, t in pairs}), name
        ids, drain_templates, drain_seconds = drain(lines)
        rows.append({
            "set": name,
            "lines": len(lines),
            "ours": scores(truth, groups, texts),
            "drain3": scores(truth, ids, drain_templates),
            "ours_lines_s": len(lines) / seconds,
            "drain3_lines_s": len(lines) / drain_seconds,
        })
        if args.show:
            show_wrong(name, truth, texts, args.show)
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0


def show_wrong(name: str, truth: Sequence[str], groups: Sequence[str], n: int,
               out: Callable[[str], None] = print) -> None:
    """Print the largest groups that are not exactly one template's lines (to study the masks)."""
    truth_size = Counter(truth)
    members: dict[str, list[int]] = defaultdict(list)
    for line, group in enumerate(groups):
        members[group].append(line)
    by_truth: dict[str, set[str]] = defaultdict(set)
    for t, g in zip(truth, groups, strict=True):
        by_truth[t].add(g)
    wrong = [(t, gs) for t, gs in by_truth.items()
             if len(gs) > 1 or len(members[next(iter(gs))]) != truth_size[t]]
    wrong.sort(key=lambda tg: -truth_size[tg[0]])
    out(f"== {name}")
    for t, gs in wrong[:n]:
        out(f"  [{truth_size[t]}] {t}")
        for g in sorted(gs, key=lambda g: -len(members[g]))[:4]:
            mixed = {truth[i] for i in members[g]} - {t}
            also = f"   MIXED with {len(mixed)}: {next(iter(mixed))}" if mixed else ""
            out(f"     -> ({len(members[g])}) {g}{also}")


if __name__ == "__main__":
    sys.exit(main())
