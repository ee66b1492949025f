"""A real Prometheus scrapes a real two-worker server and finds what a known workload did.

The server is the test's own (its counters start at zero), Prometheus scrapes
it every second, and the assertions read Prometheus's HTTP API
(``/api/v1/query``): the counters of both workers added up, the queue gauges,
and the example alert rules evaluating without error on the real series. Its
sweeper waits an hour, so the dead letter of the workload is moved by a claim
on its way, never by a sweep (the sweep's counts: ``tests/api/test_metrics.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from tests.e2e.harness import ApiSession
from tests.e2e.prometheus import Prometheus, start_prometheus

#: seconds to wait for Prometheus to have scraped what the workload did
SETTLE_TIMEOUT = 40.0
#: a server whose sweeper does not run during the test: only claims move dead letters
NO_SWEEP_CONFIG = """\
[server]
sweep_interval = 3600
"""


@pytest.fixture
def prometheus(tmp_path) -> Iterator[Callable[..., Prometheus]]:
    """A function starting Prometheus against a server; stopped when the test ends."""
    started: list[Prometheus] = []

    def start(url: str, token: str | None = None) -> Prometheus:
        workdir = tmp_path / "prometheus"
        workdir.mkdir()
        server = start_prometheus(url.removeprefix("http://"), workdir, token=token)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def settled(prometheus: Prometheus, expected: dict[str, float]) -> dict[str, float | None]:
    """Query each expression until all answer their expected single value; return the last answers."""
    answers: dict[str, float | None] = {}
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        for expression in expected:
            vector = prometheus.query(expression)
            answers[expression] = next(iter(vector.values())) if len(vector) == 1 else None
        if answers == expected:
            break
        time.sleep(0.5)
    return answers


def dead_letter_workload(api: ApiSession) -> None:
    """Post 5 messages, claim 3, delete 2 of them, release the claim, claim again.

    The second claim dead-letters the third message (its claim count is used
    up) on its way and takes the last two.
    """
    posted = api.post("/v2/queues/jobs/messages", json={"messages": [{"body": n} for n in range(5)]})
    assert posted.status_code == 201
    claimed = api.post("/v2/queues/jobs/claims", params={"limit": 3}, json={"ttl": 300, "grace": 60})
    assert claimed.status_code == 201
    claim_id = claimed.headers["Location"].rsplit("/", 1)[1]
    for message in claimed.json()["messages"][:2]:
        deleted = api.delete(f"/v2/queues/jobs/messages/{message['id']}", params={"claim_id": claim_id})
        assert deleted.status_code == 204
    assert api.delete(f"/v2/queues/jobs/claims/{claim_id}").status_code == 204
    again = api.post("/v2/queues/jobs/claims", params={"limit": 3}, json={"ttl": 300, "grace": 60})
    assert again.status_code == 201
    assert [m["body"] for m in again.json()["messages"]] == [3, 4]
    assert api.get("/v2/queues/jobs-dlq/stats").json()["messages"]["total"] == 1


def test_prometheus_finds_the_counts_of_both_workers_and_the_queue_gauges(
        store, start_server_for_test, prometheus, tmp_path):
    config = tmp_path / "no-sweep.conf"
    config.write_text(NO_SWEEP_CONFIG)
    server = start_server_for_test(store.uri(tmp_path / "data"), workers=2,
                                   extra_args=["--config", str(config)])
    scraper = prometheus(server.url)
    with ApiSession(server.url, project="shop") as api:
        assert api.put("/v2/queues/jobs-dlq", json={}).status_code == 201
        assert api.put("/v2/queues/jobs", json={"_dead_letter_queue": "jobs-dlq",
                                                "_max_claim_count": 1}).status_code == 201
        empty = 'zaqar_lite_dead_letter_queue_depth{project="shop",queue="jobs-dlq"}'
        assert settled(scraper, {empty: 0.0}) == {empty: 0.0}, scraper.log_tail()  # seen empty first
        dead_letter_workload(api)
    where = 'project="shop",queue="jobs"'
    expected = {
        'up{job="zaqar-lite"}': 1.0,
        "zaqar_lite_messages_posted_total": 5.0,
        "zaqar_lite_messages_claimed_total": 5.0,
        "zaqar_lite_messages_deleted_total": 2.0,
        "zaqar_lite_claims_released_total": 1.0,
        'zaqar_lite_messages_dead_lettered_total{reason="max_claims",project="shop",queue="jobs",'
        'dead_letter_queue="jobs-dlq"}': 1.0,
        f'zaqar_lite_queue_messages{{{where},state="ready"}}': 0.0,
        f'zaqar_lite_queue_messages{{{where},state="claimed"}}': 2.0,
        f"zaqar_lite_queue_depth{{{where}}}": 2.0,
        'zaqar_lite_dead_letter_queue_depth{project="shop",queue="jobs-dlq"}': 1.0,
        "zaqar_lite_queues": 2.0,
        'sum(zaqar_lite_http_requests_total{method="POST",route="/v2/queues/{queue}/messages",'
        'status="201"})': 1.0,
        'sum(zaqar_lite_http_requests_total{method="DELETE",route="/v2/queues/{queue}/messages/{message_id}",'
        'status="204"})': 2.0,
        'sum(zaqar_lite_http_request_duration_seconds_count{method="POST",route="/v2/queues/{queue}/claims",'
        'status="201"})': 2.0,
    }
    assert settled(scraper, expected) == expected, scraper.log_tail()
    # the series carry route templates only, never a raw path
    routes = scraper.get("/api/v1/label/route/values")
    assert "/v2/queues/{queue}/messages" in routes
    assert not [route for route in routes if "jobs" in route]
    # the example alert rules evaluate on these series without an error; the growing
    # dead-letter queue (seen at 0, now at 1) makes its alert pending (it fires after 10 minutes)
    groups = scraper.get("/api/v1/rules")["groups"]
    rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
    assert sorted(rules) == ["ZaqarLiteDeadLetterQueueGrowing", "ZaqarLiteDeadLettersArriving",
                             "ZaqarLiteOldestMessageTooOld", "ZaqarLiteStorageErrors"]
    assert {name: rule["health"] for name, rule in rules.items()} == dict.fromkeys(rules, "ok")
    alerts = pending_alerts(scraper)
    assert alerts == [({"alertname": "ZaqarLiteDeadLetterQueueGrowing", "instance": server.url.removeprefix("http://"),
                        "job": "zaqar-lite", "project": "shop", "queue": "jobs-dlq", "severity": "warning"},
                       "pending")], scraper.log_tail()


def pending_alerts(scraper: Prometheus) -> list[tuple[dict[str, str], str]]:
    """Return the alerts once there are some (rules are evaluated every second), labels and state."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        alerts = [(alert["labels"], alert["state"]) for alert in scraper.get("/api/v1/alerts")["alerts"]]
        if alerts or time.monotonic() > deadline:
            return alerts
        time.sleep(0.5)


TOKEN_AUTH_CONFIG = """\
[auth]
strategy = token

[tokens]
scrape-admin-token = ops:admin
shop-member-token = shop:member
"""


def test_under_token_auth_prometheus_scrapes_with_an_admin_token_and_nobody_else_reads_metrics(
        store, start_server_for_test, prometheus, tmp_path):
    config = tmp_path / "token.conf"
    config.write_text(TOKEN_AUTH_CONFIG)
    server = start_server_for_test(store.uri(tmp_path / "data"), workers=2,
                                   extra_args=["--config", str(config)], token="scrape-admin-token")
    with ApiSession(server.url) as anonymous:
        del anonymous.headers["X-Project-ID"]
        assert anonymous.get("/metrics").status_code == 401
        assert anonymous.get("/metrics", headers={"X-Auth-Token": "shop-member-token"}).status_code == 403
        anonymous.headers["X-Auth-Token"] = "shop-member-token"
        # a queue of its own: the cluster pass shares one store between this module's tests
        posted = anonymous.post("/v2/queues/scraped/messages", json={"messages": [{"body": 1}, {"body": 2}]})
        assert posted.status_code == 201, posted.text
    scraper = prometheus(server.url, token="scrape-admin-token")
    expected = {'up{job="zaqar-lite"}': 1.0, "zaqar_lite_messages_posted_total": 2.0,
                'zaqar_lite_queue_depth{project="shop",queue="scraped"}': 2.0}
    assert settled(scraper, expected) == expected, scraper.log_tail()


def reject_all(api: ApiSession, queue: str, count: int) -> None:
    """Post ``count`` messages to ``queue``, claim them and release each claim with outcome reject."""
    for first in range(0, count, 20):  # at most 20 a post
        posted = api.post(f"/v2/queues/{queue}/messages",
                          json={"messages": [{"body": n} for n in range(first, min(count, first + 20))]})
        assert posted.status_code == 201, posted.text
    while True:
        claimed = api.post(f"/v2/queues/{queue}/claims", params={"limit": 20}, json={"ttl": 300, "grace": 60})
        if claimed.status_code == 204:
            return
        claim = claimed.headers["Location"]
        assert api.delete(claim, params={"outcome": "reject"}).status_code == 204


# the reject itself on every store: tests/storage/conformance/test_release_outcomes.py
@pytest.mark.store_independent
def test_a_storm_of_rejects_drained_from_the_dead_letter_queue_makes_the_arrivals_alert_pending(
        store, start_server_for_test, prometheus, tmp_path):
    config = tmp_path / "no-sweep.conf"
    config.write_text(NO_SWEEP_CONFIG)
    server = start_server_for_test(store.uri(tmp_path / "data"), workers=2,
                                   extra_args=["--config", str(config)])
    scraper = prometheus(server.url)
    arrivals = ('zaqar_lite_messages_dead_lettered_total{reason="rejected",project="shop",queue="payments",'
                'dead_letter_queue="payments-dlq"}')
    with ApiSession(server.url, project="shop") as api:
        assert api.put("/v2/queues/payments-dlq", json={}).status_code == 201
        assert api.put("/v2/queues/payments", json={"_dead_letter_queue": "payments-dlq"}).status_code == 201
        reject_all(api, "payments", 1)  # the series exists from here on: rate() sees what follows
        assert settled(scraper, {arrivals: 1.0}) == {arrivals: 1.0}, scraper.log_tail()
        reject_all(api, "payments", 100)
        # a consumer drains the dead-letter queue as it fills: its depth shows nothing
        while api.delete("/v2/queues/payments-dlq/messages", params={"pop": 20}).json()["messages"]:
            pass
    assert settled(scraper, {arrivals: 101.0}) == {arrivals: 101.0}, scraper.log_tail()
    # 100 arrivals in the 5-minute window: 20 a minute, above the rule's 10
    wanted = {"alertname": "ZaqarLiteDeadLettersArriving", "project": "shop", "queue": "payments",
              "dead_letter_queue": "payments-dlq", "severity": "warning"}
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        alerts = [(alert["labels"], alert["state"]) for alert in scraper.get("/api/v1/alerts")["alerts"]]
        if (wanted, "pending") in alerts:
            break
        time.sleep(0.5)
    assert (wanted, "pending") in alerts, scraper.log_tail()
