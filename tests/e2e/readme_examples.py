"""The README's examples as data: its shell and Python examples, in order, and how an answer matches.

``tests/e2e/test_readme.py`` runs them against a real server. The README shows
commands as ``$ command`` lines in literal blocks, each followed by the answer
it gives (or by nothing); Python examples are ``.. code-block:: python``
blocks, followed by the lines they print when the paragraph after them ends
in ``prints::``. An answer matches what the README shows by shape where the
value changes from run to run (docs/api.rst is the contract; this is the
README's own notation):

* a JSON ``...`` in an object stands for more keys, in a list for more items;
  ``{...}`` and ``[...]`` are any object and any list;
* in a string, an id (a UUID or 32 hex digits), or hex digits followed by
  ``...`` (``"0c858ad1-..."``), stand for any id, an ISO time for any ISO time, and any other ``...`` for
  any text;
* ``age`` is any whole number of seconds, and ``ttl`` may differ from the one
  shown by the few seconds a message spent before a move;
* ``HTTP/1.1 201 Created`` is the status, and a header line shown must be
  among the answer's headers.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[2] / "README.rst"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
#: an id: a UUID, or 32 hex digits (subscription ids)
ID = rf"(?:{UUID}|[0-9a-f]{{32}})"
#: how the README abbreviates an id: its first hex digits, then ...
SHORT_ID = r"[0-9a-f][0-9a-f-]{3,}\.\.\."
ISO_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
#: the seconds a shown ttl may differ by (the time a message spent before a move)
TTL_SLACK = 3
MORE = "\u2026more"


@dataclasses.dataclass(frozen=True)
class Step:
    """One ``$`` command of a shell example and the lines the README shows after it."""

    line: int
    command: str
    shown: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Example:
    """A literal block of ``$`` commands, or a Python code block, in the README."""

    section: str
    line: int
    kind: str  # "shell" or "python"
    text: str
    steps: tuple[Step, ...] = ()
    #: for Python, what it prints (None: the README shows nothing, so it prints nothing)
    prints: str | None = None

    @property
    def first_line(self) -> str:
        """Return the example's first command or line of code, which names it."""
        return self.steps[0].command.splitlines()[0] if self.steps else self.text.splitlines()[0]


@dataclasses.dataclass(frozen=True)
class Block:
    line: int
    text: str
    python: bool
    #: the paragraph before the block (its last line ends with ``::``, or the directive)
    intro: str
    section: str


def _underline(line: str) -> bool:
    return len(line) >= 3 and len(set(line)) == 1 and line[0] in "=-~^"


def blocks(text: str) -> list[Block]:
    """Return the literal and code blocks of an RST text, in order, with the section each is in."""
    lines = text.splitlines()
    found: list[Block] = []
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and _underline(lines[i + 1]) and not line.startswith(" "):
            section = line.strip()
        python = line.strip() == ".. code-block:: python"
        if python or (line.rstrip().endswith("::") and not line.lstrip().startswith("..")):
            start = i + 1
            while start < len(lines) and not lines[start].strip():
                start += 1
            indent = len(lines[start]) - len(lines[start].lstrip()) if start < len(lines) else 0
            base = len(line) - len(line.lstrip())
            end = start
            while end < len(lines) and (not lines[end].strip()
                                        or len(lines[end]) - len(lines[end].lstrip()) > base):
                end += 1
            if indent > base and start < len(lines):
                body = "\n".join(raw[indent:] for raw in lines[start:end]).strip("\n")
                found.append(Block(start + 1, body, python, line.strip(), section))
            i = end
            continue
        i += 1
    return found


def _complete(command: str) -> bool:
    if command.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return False
    return True


def shell_steps(block: Block) -> tuple[Step, ...]:
    """Return the ``$`` commands of a literal block, each with the lines shown after it."""
    steps: list[Step] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        start, command = i, lines[i][2:]
        i += 1
        while not _complete(command) and i < len(lines):
            command += "\n" + lines[i]
            i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        while shown and not shown[-1].strip():
            shown.pop()
        steps.append(Step(block.line + start, command, tuple(shown)))
    return tuple(steps)


def examples(text: str) -> list[Example]:
    """Return the README's shell examples (blocks with ``$`` lines) and Python examples, in order."""
    found: list[Example] = []
    every = blocks(text)
    for index, block in enumerate(every):
        if block.python:
            following = every[index + 1] if index + 1 < len(every) else None
            prints = following.text if following is not None and not following.python \
                and following.intro.lower().endswith("prints::") else None
            found.append(Example(block.section, block.line, "python", block.text, prints=prints))
        elif any(line.startswith("$ ") for line in block.text.splitlines()):
            found.append(Example(block.section, block.line, "shell", block.text, shell_steps(block)))
    return found


def setup_script(text: str) -> str:
    """Return the README's shell set-up block: the one that defines ``zq``."""
    setups = [b.text for b in blocks(text) if "zq() {" in b.text]
    assert len(setups) == 1, f"the README should define zq once, found {len(setups)}"
    return setups[0]


# -- what an answer is compared with ------------------------------------------------------------

def _with_more(shown: str) -> str:
    """Return shown JSON with each bare ``...`` made a marker key (in an object) or item (in a list)."""
    out: list[str] = []
    stack: list[str] = []
    in_string = escaped = False
    i = 0
    while i < len(shown):
        char = shown[i]
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif shown.startswith("...", i):
            out.append(f'"{MORE}": null' if stack and stack[-1] == "{" else f'"{MORE}"')
            i += 3
            continue
        else:
            if char == '"':
                in_string = True
            elif char in "{[":
                stack.append(char)
            elif char in "}]":
                stack.pop()
            out.append(char)
        i += 1
    return "".join(out)


def shown_json(shown: str) -> Any:
    """Return the JSON value the README shows, with its ``...`` as markers."""
    return json.loads(_with_more(shown))


def string_pattern(shown: str) -> re.Pattern[str]:
    """Return the pattern a shown string stands for (see the module's docstring)."""
    token = re.compile(rf"({ID}|{SHORT_ID}|{ISO_TIME}|\.\.\.)")
    parts = []
    for piece in token.split(shown):
        if re.fullmatch(ID, piece) or re.fullmatch(SHORT_ID, piece):
            parts.append(ID)
        elif re.fullmatch(ISO_TIME, piece):
            parts.append(ISO_TIME)
        elif piece == "...":
            parts.append(".*")
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts), re.DOTALL)


def differences(shown: Any, actual: Any, where: str = "answer", key: str = "") -> list[str]:
    """Return where ``actual`` differs from what the README shows, by the rules of the module."""
    if isinstance(shown, dict):
        return _object_differences(shown, actual, where)
    if isinstance(shown, list):
        return _list_differences(shown, actual, where)
    return [] if _scalar_matches(shown, actual, key) else [f"{where}: README shows {shown!r}, got {actual!r}"]


def _scalar_matches(shown: Any, actual: Any, key: str) -> bool:
    if isinstance(shown, str):
        return isinstance(actual, str) and string_pattern(shown).fullmatch(actual) is not None
    if key == "age":
        return type(actual) is int and actual >= 0
    if key == "ttl" and type(actual) is int and type(shown) is int:
        return abs(actual - shown) <= TTL_SLACK
    return type(shown) is type(actual) and shown == actual


def _object_differences(shown: dict[str, Any], actual: Any, where: str) -> list[str]:
    if not isinstance(actual, dict):
        return [f"{where}: README shows an object, got {actual!r}"]
    more = MORE in shown
    keys = [k for k in shown if k != MORE]
    problems = [f"{where}: README shows key {k!r}, missing" for k in keys if k not in actual]
    if not more:
        problems += [f"{where}: key {k!r} not shown in the README" for k in actual if k not in shown]
    for k in keys:
        if k in actual:
            problems += differences(shown[k], actual[k], f"{where}.{k}", k)
    return problems


def _list_differences(shown: list[Any], actual: Any, where: str) -> list[str]:
    if not isinstance(actual, list):
        return [f"{where}: README shows a list, got {actual!r}"]
    items = [item for item in shown if item != MORE]
    more = len(items) < len(shown)
    if len(actual) < len(items) or (not more and len(actual) != len(items)):
        return [f"{where}: README shows {len(items)} items{' or more' if more else ''}, got {len(actual)}"]
    problems: list[str] = []
    for n, (item, got) in enumerate(zip(items, actual, strict=False)):
        problems += differences(item, got, f"{where}[{n}]")
    return problems
