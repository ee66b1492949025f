"""The floor of ``benchmarks/http_load.py --floor``: its options, and that the floor app
(``benchmarks/floor_app.py``, under the real gunicorn server) has stored a post when it answers it."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))  # the benchmarks import each other as scripts

import http_load  # noqa: E402

pytestmark = pytest.mark.store_independent


def test_the_floor_is_off_by_default_and_stores_on_redis_or_sqlite_only() -> None:
    assert not http_load.parse_args([]).floor
    assert http_load.parse_args(["--floor", "--server", "redis"]).floor
    assert http_load.parse_args(["--floor", "--storage", "sqlite:///tmp/x.db"]).floor
    for refused in (["--floor", "--server", "mongodb"], ["--floor", "--server", "swift"],
                    ["--floor", "--storage", "mongodb://127.0.0.1:27017/db"]):
        with pytest.raises(SystemExit):
            http_load.parse_args(refused)


def test_the_floor_writes_to_zaqar_lites_redis_or_to_a_sqlite_file_of_its_own() -> None:
    assert http_load.floor_storage("redis://127.0.0.1:6400/0", "/run/b") == "redis://127.0.0.1:6400/0"
    assert http_load.floor_storage("sqlite:////data/bench.db", "/run/b") == "sqlite:////run/b/floor.db"
    assert (http_load.floor_storage("sqlite:////data/bench.db?synchronous=normal", "/run/b")
            == "sqlite:////run/b/floor.db?synchronous=normal")


def test_a_post_the_floor_acknowledges_is_in_its_sqlite_file(tmp_path: Path) -> None:
    database = tmp_path / "floor.db"
    command = [sys.executable, str(BENCHMARKS / "floor_app.py"), "--storage", f"sqlite:///{database}",
               "--workers", "1"]
    messages = {"messages": [{"body": {"event": "bench", "n": 1}}, {"body": "two", "ttl": 60}]}
    with http_load.serving(command, tmp_path / "server") as url:
        status, body = http_load.call(url, "POST", "/v2/queues/floor-q/messages", "client", messages)
        refused = http_load.call(url, "POST", "/v2/queues/floor-q/messages", "client", {"messages": 3})
        with sqlite3.connect(database) as db:
            rows = db.execute("SELECT id, queue, body, ttl FROM floor_messages").fetchall()
    assert status == 201, body
    ids = [href.rsplit("/", 1)[1] for href in json.loads(body)["resources"]]
    assert sorted(rows) == sorted([(ids[0], "floor-q", '{"event": "bench", "n": 1}', 3600),
                                   (ids[1], "floor-q", '"two"', 60)])
    assert refused[0] == 400
    assert json.loads(refused[1])["title"] == "Invalid body"
