"""Release outcomes over HTTP: a release's ``outcome`` and a claim's ``?outcome=`` (docs/api.rst).

Retry counts toward ``_max_claim_count``, postpone does not, reject dead-letters
at once; the claim count a consumer sees and the ``dead_letter`` block say which
happened.
"""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error, headers, post

MESSAGES = "/v2/queues/jobs/messages"
NO_DELAY = "outcome reject takes no delay: the message is dead-lettered at once."


@pytest.fixture
def jobs(client):
    """The jobs queue, dead-lettering into jobs-dlq after 2 claims."""
    assert client.simulate_put("/v2/queues/jobs-dlq", json={}).status_code == 201
    assert client.simulate_put("/v2/queues/jobs", json={
        "_dead_letter_queue": "jobs-dlq", "_max_claim_count": 2}).status_code == 201
    return client


def claim(client, queue="jobs", limit=1, ttl=60):
    """Claim and return (claim id, [messages]); ([], None) when nothing is claimable."""
    result = client.simulate_post(f"/v2/queues/{queue}/claims", params={"limit": limit},
                                  json={"ttl": ttl, "grace": 60})
    if result.status_code == 204:
        return None, []
    assert result.status_code == 201, result.text
    return result.headers["location"].rsplit("/", 1)[1], result.json["messages"]


def release(client, message_id, claim_id, document=None):
    return client.simulate_post(f"{MESSAGES}/{message_id}/release", params={"claim_id": claim_id},
                                json=document)


def dead_letter(client, message_id):
    result = client.simulate_get(f"/v2/queues/jobs-dlq/messages/{message_id}",
                                 params={"include_dead_letter": "true"})
    assert result.status_code == 200, result.text
    return result.json["dead_letter"]


def test_a_postpone_does_not_count_the_claim_the_consumer_sees(jobs, clock):
    message_id, = post(jobs, "jobs", "job")
    for _ in range(3):
        claim_id, claimed = claim(jobs)
        assert claimed[0]["claim_count"] == 1
        assert release(jobs, message_id, claim_id, {"outcome": "postpone", "delay": 30}).status_code == 204
        assert claim(jobs) == (None, [])
        clock.advance(30)
    shown = jobs.simulate_get(f"{MESSAGES}/{message_id}").json
    assert shown["claim_count"] == 0
    assert not {"outcome", "outcomes", "postponed", "failures"} & set(shown)  # Zaqar's shape, nothing added


def test_retry_without_an_outcome_counts_as_ever(jobs, clock):
    message_id, = post(jobs, "jobs", "job")
    for count in (1, 2):
        claim_id, claimed = claim(jobs)
        assert claimed[0]["claim_count"] == count
        assert release(jobs, message_id, claim_id, {"outcome": "retry"} if count == 1 else None) \
            .status_code == 204
    assert claim(jobs) == (None, [])
    assert dead_letter(jobs, message_id)["reason"] == "max_claims"
    assert "outcomes" not in dead_letter(jobs, message_id)  # retries alone: as before


def test_a_reject_dead_letters_at_once_and_the_block_counts_the_outcomes(jobs, clock):
    message_id, = post(jobs, "jobs", "job")
    claim_id, _ = claim(jobs)
    assert release(jobs, message_id, claim_id, {"outcome": "postpone", "delay": 0}).status_code == 204
    claim_id, _ = claim(jobs)
    rejected = release(jobs, message_id, claim_id, {"outcome": "reject", "error": "not JSON",
                                                   "error_type": "ValueError"})
    assert rejected.status_code == 204, rejected.text
    assert jobs.simulate_get(f"{MESSAGES}/{message_id}").status_code == 404
    block = dead_letter(jobs, message_id)
    assert block["reason"] == "rejected"
    assert block["claim_count"] == 1
    assert block["outcomes"] == {"retry": 0, "postpone": 1, "reject": 1}
    assert [(f["outcome"], f["error"], f["postponed"]) for f in block["failures"]] == [
        ("postpone", None, 1), ("reject", "not JSON", 1)]


def test_a_reject_without_a_dead_letter_queue_discards_the_message(client):
    message_id, = post(client, "plain", "job")
    claim_id, _ = claim(client, "plain")
    result = client.simulate_post(f"/v2/queues/plain/messages/{message_id}/release",
                                  params={"claim_id": claim_id}, json={"outcome": "reject"})
    assert result.status_code == 204
    assert client.simulate_get(f"/v2/queues/plain/messages/{message_id}").status_code == 404


def test_a_reject_into_a_missing_default_dead_letter_queue_is_409_and_changes_nothing(make_client):
    client = make_client(headers("project-a"), default_dead_letter_queue="dead-letters")
    assert client.simulate_put("/v2/queues/jobs", json={"_max_claim_count": 3}).status_code == 201
    message_id, = post(client, "jobs", "job")
    claim_id, _ = claim(client)
    body = assert_error(release(client, message_id, claim_id, {"outcome": "reject"}), 409,
                        "Resource conflict")
    assert "dead-letters" in body["description"]
    assert "create it" in body["description"]
    held = client.simulate_get(f"/v2/queues/jobs/claims/{claim_id}").json["messages"]
    assert [m["id"] for m in held] == [message_id]
    assert client.simulate_put("/v2/queues/dead-letters", json={}).status_code == 201
    assert release(client, message_id, claim_id, {"outcome": "reject"}).status_code == 204
    shown = client.simulate_get(f"/v2/queues/dead-letters/messages/{message_id}",
                                params={"include_dead_letter": "true"}).json["dead_letter"]
    assert (shown["reason"], shown["default_dead_letter_queue"]) == ("rejected", True)


@pytest.mark.store_independent
@pytest.mark.parametrize(("document", "description"), [
    ({"outcome": "postpone"}, 'outcome postpone needs a delay: the seconds before the message may be '
                              'claimed again, e.g. {"outcome": "postpone", "delay": 60}.'),
    ({"outcome": "reject", "delay": 5}, NO_DELAY),
])
def test_an_outcome_with_the_wrong_delay_is_400(jobs, document, description):
    message_id, = post(jobs, "jobs", "job")
    claim_id, _ = claim(jobs)
    body = assert_error(release(jobs, message_id, claim_id, document), 400, "Invalid API request")
    assert body["description"] == description
    assert jobs.simulate_get(f"{MESSAGES}/{message_id}").json["claim_count"] == 1


@pytest.mark.store_independent
def test_an_unknown_outcome_is_400(jobs):
    message_id, = post(jobs, "jobs", "job")
    claim_id, _ = claim(jobs)
    body = assert_error(release(jobs, message_id, claim_id, {"outcome": "ack"}), 400)
    assert body["description"] == 'outcome must be one of "retry", "postpone" or "reject", got a string.'


def test_a_claim_released_with_outcome_postpone_counts_none_of_its_messages(jobs, clock):
    ids = post(jobs, "jobs", "a", "b")
    claim_id, claimed = claim(jobs, limit=2)
    assert [m["claim_count"] for m in claimed] == [1, 1]
    released = jobs.simulate_delete(f"/v2/queues/jobs/claims/{claim_id}",
                                    params={"outcome": "postpone", "delay": "45"})
    assert released.status_code == 204
    assert claim(jobs, limit=2) == (None, [])
    clock.advance(45)
    _, again = claim(jobs, limit=2)
    assert [(m["id"], m["claim_count"]) for m in again] == [(ids[0], 1), (ids[1], 1)]


def test_a_claim_released_with_outcome_reject_dead_letters_its_messages(jobs):
    ids = post(jobs, "jobs", "a", "b")
    claim_id, _ = claim(jobs, limit=2)
    assert jobs.simulate_delete(f"/v2/queues/jobs/claims/{claim_id}",
                                params={"outcome": "reject"}).status_code == 204
    listed = jobs.simulate_get("/v2/queues/jobs-dlq/messages", params={"echo": "true"}).json["messages"]
    assert [m["id"] for m in listed] == ids


@pytest.mark.store_independent
@pytest.mark.parametrize(("params", "description"), [
    ({"outcome": "drop"}, 'outcome must be one of retry, postpone, reject, got "drop".'),
    ({"outcome": "postpone"}, 'outcome postpone needs a delay: the seconds before the message may be '
                              'claimed again, e.g. {"outcome": "postpone", "delay": 60}.'),
    ({"delay": "1.5"}, 'delay must be a whole number of seconds from 0 to 900, got "1.5".'),
    ({"delay": "901"}, 'delay must be a whole number of seconds from 0 to 900, got "901".'),
    ({"outcome": "reject", "delay": "5"}, NO_DELAY),
])
def test_a_claim_release_with_a_bad_outcome_or_delay_is_400_and_keeps_the_claim(jobs, params, description):
    post(jobs, "jobs", "a")
    claim_id, _ = claim(jobs)
    body = assert_error(jobs.simulate_delete(f"/v2/queues/jobs/claims/{claim_id}", params=params), 400,
                        "Invalid API request")
    assert body["description"] == description
    assert jobs.simulate_get(f"/v2/queues/jobs/claims/{claim_id}").status_code == 200


def test_rejects_count_toward_the_dead_letter_breaker(client):
    assert client.simulate_put("/v2/queues/jobs-dlq", json={}).status_code == 201
    assert client.simulate_put("/v2/queues/jobs", json={
        "_dead_letter_queue": "jobs-dlq",
        "_dead_letter_breaker": {"seconds": 600, "max_dead_letters": 1}}).status_code == 201
    ids = post(client, "jobs", "a", "b", "c")
    claim_id, _ = claim(client, limit=2)
    for message_id in ids[:2]:
        assert release(client, message_id, claim_id, {"outcome": "reject"}).status_code == 204
    shown = client.simulate_get("/v2/queues/jobs").json
    assert shown["_paused"] is True
    assert shown["_paused_by"]["dead_letters"] == 2
    assert claim(client) == (None, [])  # paused: the third message waits
