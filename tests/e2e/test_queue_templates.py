"""Queue templates on the real server: from the configuration file and from the admin API."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import (
    ApiSession,
    RunningServer,
    ServerStarter,
    Store,
    serve_with_config,
)

CONFIG = """\
[auth]
noauth_admin_routes = true

[queue_template:orders]
pattern = orders-*
metadata = {"_dead_letter_queue": "orders-dlq", "_max_claim_count": 3}
"""


@pytest.fixture
def templated_server(start_server_for_test: ServerStarter, store: Store, tmp_path: Path) -> RunningServer:
    config = tmp_path / "templates.conf"
    config.write_text(CONFIG)
    return start_server_for_test(store.uri(tmp_path), extra_args=["--config", str(config)])


def test_queues_start_from_the_configured_and_the_defined_templates(templated_server: RunningServer) -> None:
    api = ApiSession(templated_server.url)
    defined = api.put("/v2/queue_templates/audit", json={"pattern": "audit-?",
                                                         "metadata": {"_default_message_delay": 30}})
    assert defined.status_code == 201
    listed = api.get("/v2/queue_templates").json()["queue_templates"]
    assert [(t["name"], t["source"]) for t in listed] == [("audit", "api"), ("orders", "config")]
    assert api.put("/v2/queues/orders-dlq", json={}).status_code == 201
    # several creations, so that both workers serve some and all see the stored template
    for name in ("orders-1", "orders-2", "audit-1", "audit-2"):
        assert api.put(f"/v2/queues/{name}", json={"team": name}).status_code == 201
    shown = {name: api.get(f"/v2/queues/{name}").json()
             for name in ("orders-1", "orders-2", "audit-1", "audit-2", "orders-dlq")}
    assert [(s.get("_queue_template"), s["_dead_letter_queue"], s["_max_claim_count"],
             s["_default_message_delay"], s.get("team")) for s in shown.values()] == [
        ("orders", "orders-dlq", 3, 0, "orders-1"),
        ("orders", "orders-dlq", 3, 0, "orders-2"),
        ("audit", None, None, 30, "audit-1"),
        ("audit", None, None, 30, "audit-2"),
        (None, None, None, 0, None),
    ]


def test_serve_refuses_a_template_that_breaks_the_metadata_rules(tmp_path: Path) -> None:
    result = serve_with_config(
        '[queue_template:orders]\npattern = orders-*\nmetadata = {"_max_claim_count": 0}\n', tmp_path)

    assert result.returncode != 0
    assert "[queue_template:orders] _max_claim_count must be at least 1, got 0." in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
