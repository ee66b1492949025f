"""``GET /metrics``: the Prometheus text format, the queue gauges, the counters and who may read them.

The counters are the process's own (these tests run the app in this process),
so the tests compare them before and after a workload; the queue gauges are
read from the test's own store, so they are compared as they are.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import uuid

import falcon.testing
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.api.helpers import assert_error, claim, headers, post
from zaqar_lite import errors, metrics
from zaqar_lite.api.app import create_app
from zaqar_lite.api.metrics import CensusCache
from zaqar_lite.config import MetricsSettings
from zaqar_lite.server.sweeper import sweep_once
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage

TOKENS = {"admin-token": ("project-a", "admin"), "member-token": ("project-a", "member")}


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: falcon.testing.TestClient, **kwargs) -> Samples:
    """GET /metrics and return every sample as {(name, sorted labels): value}."""
    result = client.simulate_get("/metrics", **kwargs)
    assert result.status_code == 200, result.text
    samples = {}
    for family in text_string_to_metric_families(result.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    """Return one sample's value, 0 when the series is absent (a counter not yet counted)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def settings(settings):
    """The suite's settings, with queue gauges read afresh at every scrape (the tests scrape after
    each change); :func:`test_scrapes_within_census_max_age_share_one_read` tests the reuse."""
    return settings.replace(metrics=MetricsSettings(census_max_age=0))


def test_metrics_answers_the_prometheus_text_format_without_any_header(bare):
    result = bare.simulate_get("/metrics")
    assert result.status_code == 200
    assert result.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# TYPE zaqar_lite_messages_posted_total counter" in result.text
    assert "# TYPE zaqar_lite_http_request_duration_seconds histogram" in result.text


def test_queue_gauges_count_ready_delayed_and_claimed_messages_and_the_oldest_age(client, clock):
    post(client, "orders", {"n": 1}, {"n": 2})
    post(client, "orders", {"n": 3}, delay=300)
    clock.advance(30)
    claim(client, "orders", limit=1)
    samples = scrape(client)
    where = {"project": "project-a", "queue": "orders"}
    assert value(samples, "zaqar_lite_queue_messages", state="ready", **where) == 1
    assert value(samples, "zaqar_lite_queue_messages", state="delayed", **where) == 1
    assert value(samples, "zaqar_lite_queue_messages", state="claimed", **where) == 1
    assert value(samples, "zaqar_lite_queue_depth", **where) == 3
    assert value(samples, "zaqar_lite_queue_oldest_message_age_seconds", **where) == 30
    assert value(samples, "zaqar_lite_queues") == 1


def test_a_dead_letter_queue_has_a_depth_series_and_its_source_has_none(client):
    assert client.simulate_put("/v2/queues/orders-dlq", json={}).status_code == 201
    assert client.simulate_put("/v2/queues/orders", json={
        "_dead_letter_queue": "orders-dlq", "_max_claim_count": 2}).status_code == 201
    post(client, "orders-dlq", {"n": 1}, {"n": 2})
    samples = scrape(client)
    assert value(samples, "zaqar_lite_dead_letter_queue_depth", project="project-a", queue="orders-dlq") == 2
    assert ("zaqar_lite_dead_letter_queue_depth",
            (("project", "project-a"), ("queue", "orders"))) not in samples


def test_an_empty_queue_reads_zero_everywhere(client):
    assert client.simulate_put("/v2/queues/empty", json={}).status_code == 201
    samples = scrape(client)
    for state in ("ready", "delayed", "claimed"):
        assert value(samples, "zaqar_lite_queue_messages", project="project-a", queue="empty",
                     state=state) == 0
    assert samples[("zaqar_lite_queue_oldest_message_age_seconds",
                    (("project", "project-a"), ("queue", "empty")))] == 0


def test_queues_beyond_max_labelled_queues_are_added_up_dead_letter_queues_first(make_client):
    client = make_client(headers("project-a"), metrics=MetricsSettings(max_labelled_queues=2))
    # the dead-letter queue z-dlq sorts last by name and is labelled first all the same
    for name, metadata in (("z-dlq", {}), ("a", {"_dead_letter_queue": "z-dlq"}), ("c", {}), ("d", {})):
        assert client.simulate_put(f"/v2/queues/{name}", json=metadata).status_code == 201
    post(client, "c", {"n": 1})
    post(client, "d", {"n": 2}, {"n": 3})
    samples = scrape(client)
    labelled = {dict(labels)["queue"] for name, labels in samples if name == "zaqar_lite_queue_depth"}
    assert labelled == {"z-dlq", "a", "(other)"}
    assert value(samples, "zaqar_lite_queue_depth", project="(other)", queue="(other)") == 3
    assert value(samples, "zaqar_lite_queue_messages", project="(other)", queue="(other)", state="ready") == 3
    assert value(samples, "zaqar_lite_queues") == 4


def test_messages_are_counted_as_posted_claimed_released_and_deleted(client):
    before = scrape(client)
    ids = post(client, "orders", {"n": 1}, {"n": 2}, {"n": 3}, {"n": 4})
    claim_id, claimed = claim(client, "orders", limit=2)
    released = client.simulate_post(f"/v2/queues/orders/messages/{claimed[0]['id']}/release",
                                    params={"claim_id": claim_id}, json={})
    assert released.status_code == 204, released.text
    deleted = client.simulate_delete(f"/v2/queues/orders/messages/{claimed[1]['id']}",
                                     params={"claim_id": claim_id})
    assert deleted.status_code == 204
    assert client.simulate_delete("/v2/queues/orders/messages", params={"ids": ids[2]}).status_code == 204
    popped = client.simulate_delete("/v2/queues/orders/messages", params={"pop": 1})
    assert popped.status_code == 200
    assert client.simulate_delete(f"/v2/queues/orders/claims/{claim_id}").status_code == 204
    after = scrape(client)
    for name, grown in (("zaqar_lite_messages_posted_total", 4), ("zaqar_lite_messages_claimed_total", 2),
                        ("zaqar_lite_messages_released_total", 1), ("zaqar_lite_messages_deleted_total", 3),
                        ("zaqar_lite_claims_released_total", 1)):
        assert value(after, name) - value(before, name) == grown, name


def test_requests_are_counted_by_route_template_and_status_never_by_raw_path(client):
    before = scrape(client)
    assert client.simulate_get("/v2/queues/alpha/stats").status_code == 200
    assert client.simulate_get("/v2/queues/beta/stats").status_code == 200
    assert client.simulate_get("/v2/no-such-thing").status_code == 404
    after = scrape(client)
    route = "/v2/queues/{queue}/stats"
    assert value(after, "zaqar_lite_http_requests_total", method="GET", route=route, status="200") \
        - value(before, "zaqar_lite_http_requests_total", method="GET", route=route, status="200") == 2
    assert value(after, "zaqar_lite_http_requests_total", method="GET", route="unmatched", status="404") \
        - value(before, "zaqar_lite_http_requests_total", method="GET", route="unmatched", status="404") == 1
    duration = {"method": "GET", "route": route, "status": "200"}
    assert value(after, "zaqar_lite_http_request_duration_seconds_count", **duration) \
        - value(before, "zaqar_lite_http_request_duration_seconds_count", **duration) == 2
    assert not any("alpha" in dict(labels).get("route", "") for _, labels in after)


#: the labels of dead letters moved from project-a's jobs into jobs-dlq
JOBS_ARRIVALS = {"project": "project-a", "queue": "jobs", "dead_letter_queue": "jobs-dlq"}


def test_the_sweep_counts_dead_letters_by_reason_and_discarded_messages(client, settings, clock):
    assert client.simulate_put("/v2/queues/jobs-dlq", json={}).status_code == 201
    assert client.simulate_put("/v2/queues/jobs", json={
        "_dead_letter_queue": "jobs-dlq", "_max_claim_count": 1}).status_code == 201
    post(client, "jobs", {"n": 1})
    post(client, "other", {"n": 2}, ttl=60)
    claim_id, _ = claim(client, "jobs", limit=1)
    assert client.simulate_delete(f"/v2/queues/jobs/claims/{claim_id}").status_code == 204
    clock.advance(61)
    before = scrape(client)
    result = Messaging(open_storage(settings.storage_uri), settings, clock).sweep()
    assert (result.dead_lettered, result.discarded) == (1, 1)
    after = scrape(client)
    assert value(after, "zaqar_lite_messages_dead_lettered_total", reason="max_claims", **JOBS_ARRIVALS) \
        - value(before, "zaqar_lite_messages_dead_lettered_total", reason="max_claims", **JOBS_ARRIVALS) == 1
    assert value(after, "zaqar_lite_messages_discarded_total") \
        - value(before, "zaqar_lite_messages_discarded_total") == 1
    assert value(after, "zaqar_lite_dead_letter_queue_depth", project="project-a", queue="jobs-dlq") == 1


def test_a_claim_counts_the_dead_letters_it_moves_on_its_way_as_max_claims(client):
    assert client.simulate_put("/v2/queues/jobs-dlq", json={}).status_code == 201
    assert client.simulate_put("/v2/queues/jobs", json={
        "_dead_letter_queue": "jobs-dlq", "_max_claim_count": 1,
        "_dead_letter_on_expiry": True}).status_code == 201
    post(client, "jobs", {"n": 1}, {"n": 2})
    claim_id, _ = claim(client, "jobs", limit=2)
    assert client.simulate_delete(f"/v2/queues/jobs/claims/{claim_id}").status_code == 204
    post(client, "jobs", {"n": 3})
    before = scrape(client)
    _, claimed = claim(client, "jobs", limit=5)
    assert [m["body"] for m in claimed] == [{"n": 3}]
    after = scrape(client)
    # a sweep of this queue could not tell the reason (expired_or_max_claims); a claim can
    for reason, grown in (("max_claims", 2), ("expired_or_max_claims", 0), ("expired", 0)):
        assert value(after, "zaqar_lite_messages_dead_lettered_total", reason=reason, **JOBS_ARRIVALS) \
            - value(before, "zaqar_lite_messages_dead_lettered_total", reason=reason, **JOBS_ARRIVALS) \
            == grown, reason
    assert value(after, "zaqar_lite_messages_claimed_total") \
        - value(before, "zaqar_lite_messages_claimed_total") == 1
    assert value(after, "zaqar_lite_dead_letter_queue_depth", project="project-a", queue="jobs-dlq") == 2


def test_redriven_messages_are_counted(client):
    assert client.simulate_put("/v2/queues/jobs-dlq", json={}).status_code == 201
    assert client.simulate_put("/v2/queues/jobs", json={
        "_dead_letter_queue": "jobs-dlq", "_max_claim_count": 1}).status_code == 201
    post(client, "jobs", {"n": 1}, {"n": 2})
    claim_id, _ = claim(client, "jobs", limit=2)
    assert client.simulate_delete(f"/v2/queues/jobs/claims/{claim_id}").status_code == 204
    assert client.simulate_post("/v2/queues/jobs/claims", json={}).status_code == 204  # both dead-lettered
    before = scrape(client)
    result = client.simulate_post("/v2/queues/jobs-dlq/redrive", json={})
    assert result.json == {"redriven": 2}
    after = scrape(client)
    assert value(after, "zaqar_lite_messages_redriven_total") \
        - value(before, "zaqar_lite_messages_redriven_total") == 2


def test_metrics_can_be_turned_off(make_client):
    client = make_client(metrics=MetricsSettings(enabled=False))
    assert_error(client.simulate_get("/metrics"), 404)


def test_under_token_auth_metrics_needs_an_admin_token_unless_told_otherwise(make_client):
    client = make_client(auth_strategy="token", tokens=TOKENS)
    assert_error(client.simulate_get("/metrics"), 401)
    assert client.simulate_get("/metrics", headers={"Authorization": "Bearer admin-token"}).status_code == 200
    opened = make_client(auth_strategy="token", tokens=TOKENS, metrics=MetricsSettings(require_token=False))
    assert opened.simulate_get("/metrics").status_code == 200


def test_under_noauth_metrics_stays_open(bare):
    assert bare.simulate_get("/metrics").status_code == 200


@pytest.mark.parametrize(("sent", "status"), [
    ({}, 401),
    ({"Authorization": "Bearer wrong"}, 401),
    ({"Authorization": "Bearer member-token"}, 403),
    ({"Authorization": "Bearer admin-token"}, 200),
    ({"X-Auth-Token": "admin-token"}, 200),
])
def test_a_required_token_must_be_an_admins(make_client, sent, status):
    client = make_client(auth_strategy="token", tokens=TOKENS,
                         metrics=MetricsSettings(require_token=True))
    result = client.simulate_get("/metrics", headers=sent)
    if status == 200:
        assert result.status_code == 200
    else:
        assert_error(result, status)


def test_an_unreachable_store_leaves_the_queue_gauges_out_and_is_counted_against_its_driver(
        store_client, storage, monkeypatch):
    post(store_client, "orders", {"n": 1})
    assert value(scrape(store_client), "zaqar_lite_storage_reachable") == 1
    before = scrape(store_client)

    def down(*args, **kwargs):
        raise errors.StorageUnavailable("connection refused")

    monkeypatch.setattr(storage, "queue_stats", down)
    monkeypatch.setattr(storage, "get_queue_metadata", down)
    assert store_client.simulate_get("/v2/queues/orders").status_code == 503
    during = scrape(store_client)
    assert value(during, "zaqar_lite_storage_reachable") == 0
    assert not [name for name, _ in during if name.startswith("zaqar_lite_queue_")]
    assert value(during, "zaqar_lite_messages_posted_total") >= 1  # the counters are still served
    after = scrape(store_client)
    driver = storage.name
    # the 503 answer and the first scrape that could not read the queues (the second
    # scrape has served the counters by the time it finds the store down in its turn)
    assert value(after, "zaqar_lite_storage_errors_total", driver=driver) \
        - value(before, "zaqar_lite_storage_errors_total", driver=driver) == 2


@pytest.mark.parametrize(("spelling", "status"), [
    ("/metrics/", 401), ("//metrics", 401), ("//metrics//", 404),
    ("/./metrics", 404), ("/v2/../metrics", 404)])
def test_no_spelling_of_metrics_skips_a_required_token(make_client, spelling, status):
    client = make_client(auth_strategy="token", tokens=TOKENS, metrics=MetricsSettings(require_token=True))
    assert_error(client.simulate_get(spelling), status)


def test_a_sweep_skipped_for_an_unreachable_store_is_counted_against_its_driver(client, settings, clock):
    storage = open_storage(settings.storage_uri)

    def down(now):
        raise errors.StorageUnavailable("connection refused")

    storage.due_queues = down
    before = scrape(client)
    sweep_once(Messaging(storage, settings, clock))
    after = scrape(client)
    assert value(after, "zaqar_lite_storage_errors_total", driver=storage.name) \
        - value(before, "zaqar_lite_storage_errors_total", driver=storage.name) == 1


def label_values(samples: Samples, name: str, label: str) -> set[str]:
    """Return every value a label takes in a series' samples."""
    return {dict(labels)[label] for series, labels in samples if series == name}


@pytest.mark.filterwarnings("ignore::wsgiref.validate.WSGIWarning")
def test_methods_no_route_serves_collapse_into_one_series(client):
    invented = [f"X{uuid.uuid4().hex[:10].upper()}" for _ in range(50)]
    for method in invented:
        result = client.simulate_request(method, "/v2/queues")
        assert 400 <= result.status_code < 500, (method, result.status_code)
    for method in invented[:10]:
        assert 400 <= client.simulate_request(method, f"/v2/no-route-{method}").status_code < 500
    samples = scrape(client)
    methods = label_values(samples, "zaqar_lite_http_requests_total", "method")
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
    assert "other" in methods
    assert label_values(samples, "zaqar_lite_http_request_duration_seconds_count", "method") <= methods
    assert not [route for route in label_values(samples, "zaqar_lite_http_requests_total", "route")
                if "no-route" in route]
    assert value(samples, "zaqar_lite_http_requests_total", method="other", route="/v2/queues",
                 status="400") >= 50


def test_a_subscriber_scheme_the_notifier_does_not_know_is_counted_as_other():
    assert metrics.scheme_of("HTTPS://example.com/hook") == "https"
    assert metrics.scheme_of("mailto:ops@example.com") == "mailto"
    assert metrics.scheme_of("x-made-up-scheme-7f3a://whatever") == "other"
    assert metrics.scheme_of("no scheme at all") == "other"


def counting_census_reads(storage, monkeypatch) -> list[int]:
    """Count the reads of the queue list (one per census)."""
    reads: list[int] = []
    every_queue = storage.all_queues

    def all_queues():
        reads.append(1)
        return every_queue()

    monkeypatch.setattr(storage, "all_queues", all_queues)
    return reads


def test_concurrent_scrapes_share_one_census_read(settings, clock, storage, monkeypatch):
    app = create_app(settings, storage=storage, clock=clock)  # census_max_age = 0
    client = falcon.testing.TestClient(app, headers=headers("project-a"))
    post(client, "orders", {"n": 1})
    asked = threading.Semaphore(0)
    ask = CensusCache.census

    def census(cache):
        asked.release()
        return ask(cache)

    monkeypatch.setattr(CensusCache, "census", census)
    reads = counting_census_reads(storage, monkeypatch)
    every_queue = storage.all_queues

    def all_queues():
        # the read ends only after all eight scrapes asked for the census, however slow
        # the machine is at starting them; the pause covers the instant between a
        # scrape's count and its clock reading
        for _ in range(8):
            assert asked.acquire(timeout=60)
        time.sleep(0.2)
        return every_queue()

    monkeypatch.setattr(storage, "all_queues", all_queues)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        scraped = list(pool.map(lambda _: scrape(client), range(8)))
    assert len(reads) == 1
    assert {value(s, "zaqar_lite_queue_depth", project="project-a", queue="orders") for s in scraped} == {1}
    monkeypatch.setattr(storage, "all_queues", every_queue)
    monkeypatch.setattr(CensusCache, "census", ask)
    scrape(client)  # a scrape after the read ended reads again (census_max_age = 0)
    assert len(reads) == 2


def test_scrapes_within_census_max_age_share_one_read(settings, clock, storage, monkeypatch):
    app = create_app(settings.replace(metrics=MetricsSettings(census_max_age=60)), storage=storage,
                     clock=clock)
    client = falcon.testing.TestClient(app, headers=headers("project-a"))
    reads = counting_census_reads(storage, monkeypatch)
    post(client, "orders", {"n": 1})
    assert value(scrape(client), "zaqar_lite_queue_depth", project="project-a", queue="orders") == 1
    post(client, "orders", {"n": 2})
    # the read of the first scrape, served again: the second message is not counted yet
    assert value(scrape(client), "zaqar_lite_queue_depth", project="project-a", queue="orders") == 1
    assert len(reads) == 1


@pytest.mark.store_independent  # the pauses are the service's; 250 queue creations take minutes on Swift
def test_the_census_pauses_every_hundred_queues_so_a_worker_answers_in_between(settings, clock):
    pauses: list[float] = []
    storage = open_storage(settings.storage_uri)
    messaging = Messaging(storage, settings, clock, sleep=pauses.append)
    for n in range(250):
        assert storage.create_queue("project-a", f"q{n:03d}", {}, clock())
    census, _ = messaging.queue_census()
    assert len(census) == 250
    assert len(pauses) == 2 and all(0 < pause <= 0.01 for pause in pauses)


def test_a_reject_counts_an_arrival_of_its_queue_in_its_dead_letter_queue(client):
    assert client.simulate_put("/v2/queues/jobs-dlq", json={}).status_code == 201
    assert client.simulate_put("/v2/queues/jobs", json={"_dead_letter_queue": "jobs-dlq"}).status_code == 201
    post(client, "jobs", {"n": 1})
    claim_id, claimed = claim(client, "jobs", limit=1)
    before = scrape(client)
    released = client.simulate_post(f"/v2/queues/jobs/messages/{claimed[0]['id']}/release",
                                    params={"claim_id": claim_id}, json={"outcome": "reject"})
    assert released.status_code == 204, released.text
    after = scrape(client)
    assert value(after, "zaqar_lite_messages_dead_lettered_total", reason="rejected", **JOBS_ARRIVALS) \
        - value(before, "zaqar_lite_messages_dead_lettered_total", reason="rejected", **JOBS_ARRIVALS) == 1


def test_the_sweep_makes_a_dead_letter_link_s_series_exist_at_zero_before_its_first_arrival(
        client, settings, clock):
    assert client.simulate_put("/v2/queues/calm-dlq", json={}).status_code == 201
    assert client.simulate_put("/v2/queues/calm", json={
        "_dead_letter_queue": "calm-dlq", "_max_claim_count": 3}).status_code == 201
    post(client, "calm", {"n": 1})
    claim_id, _ = claim(client, "calm", limit=1)
    assert client.simulate_delete(f"/v2/queues/calm/claims/{claim_id}").status_code == 204
    Messaging(open_storage(settings.storage_uri), settings, clock).sweep()
    labels = {"project": "project-a", "queue": "calm", "dead_letter_queue": "calm-dlq"}
    samples = scrape(client)
    for reason in ("max_claims", "rejected"):
        key = ("zaqar_lite_messages_dead_lettered_total", tuple(sorted({**labels, "reason": reason}.items())))
        assert samples[key] == 0.0, reason


def test_dead_letter_links_beyond_the_limit_count_under_other():
    labelled = ("p", "labelled", "labelled-dlq")
    assert metrics.dead_letter_labels(*labelled, 10**6) == labelled
    # no room left: a new link is (other); one already labelled keeps its names
    assert metrics.dead_letter_labels("p", "unseen", "unseen-dlq", 0) == ("(other)", "(other)", "(other)")
    assert metrics.dead_letter_labels(*labelled, 0) == labelled
