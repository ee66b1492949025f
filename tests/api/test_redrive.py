"""POST /v2/queues/{queue}/redrive: dead letters back to their queues, and every 400.

docs/api.rst, "Redrive (zaqar-lite extension)".
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.api.helpers import assert_error, claim, headers, post


def dead_letter(client, *bodies, source="src", error_type=None, error=None):
    """Make one dead letter of ``source`` (max claim count 1) per body, through the API; return their ids."""
    if client.simulate_get(f"/v2/queues/{source}").json["_dead_letter_queue"] is None:
        assert client.simulate_put("/v2/queues/dlq").status_code in (201, 204)
        metadata = {"_max_claim_count": 1, "_dead_letter_queue": "dlq"}
        assert client.simulate_put(f"/v2/queues/{source}", json=metadata).status_code == 201
    ids = post(client, source, *bodies)
    claim_id, held = claim(client, source, limit=len(ids))
    for message in held:
        reason = {"error_type": error_type, "error": error} if error_type else None
        release = client.simulate_post(f"/v2/queues/{source}/messages/{message['id']}/release",
                                       params={"claim_id": claim_id}, json=reason)
        assert release.status_code == 204, release.text
    assert client.simulate_post(f"/v2/queues/{source}/claims").status_code == 204
    return ids


def redrive(client, queue="dlq", body=None, **kwargs):
    return client.simulate_post(f"/v2/queues/{queue}/redrive", json=body, **kwargs)


def listed(client, queue):
    response = client.simulate_get(f"/v2/queues/{queue}/messages",
                                   params={"echo": "true", "include_claimed": "true", "limit": 20})
    return response.json["messages"]


def test_redrive_moves_dead_letters_back_to_their_source_queue(client):
    ids = dead_letter(client, {"order": 1}, {"order": 2})
    response = redrive(client)
    assert response.status_code == 200
    assert response.json == {"redriven": 2}
    back = listed(client, "src")
    assert [m["id"] for m in back] == ids
    assert [(m["body"], m["claim_count"]) for m in back] == [({"order": 1}, 0), ({"order": 2}, 0)]
    assert all("dead_letter" not in m for m in back)
    assert listed(client, "dlq") == []


def test_an_empty_body_or_an_empty_object_redrives_everything(client):
    dead_letter(client, 1)
    assert client.simulate_post("/v2/queues/dlq/redrive").json == {"redriven": 1}
    dead_letter(client, 2, source="other")
    assert redrive(client, body={}).json == {"redriven": 1}


def test_dry_run_answers_the_count_and_a_sample_with_destinations(client):
    ids = dead_letter(client, *range(12))
    response = redrive(client, body={"dry_run": True, "destination": "replay", "create_destination": True})
    assert response.status_code == 200
    assert response.json["matched"] == 12
    sample = response.json["sample"]
    assert [m["id"] for m in sample] == ids[:10]
    assert set(sample[0]) == {"id", "href", "ttl", "age", "body", "claim_count", "dead_letter", "destination"}
    assert sample[0]["destination"] == "replay"
    assert sample[0]["href"] == f"/v2/queues/dlq/messages/{ids[0]}"
    assert sample[0]["dead_letter"]["source_queue"] == "src"
    assert len(listed(client, "dlq")) == 12


def test_limit_caps_how_many_move_and_the_client_calls_again(client):
    dead_letter(client, 1, 2, 3)
    assert redrive(client, body={"limit": 2}).json == {"redriven": 2}
    assert redrive(client, body={"limit": 2}).json == {"redriven": 1}
    assert redrive(client, body={"limit": 2}).json == {"redriven": 0}


def test_filter_by_error_type_of_the_last_failure(client):
    timeouts = dead_letter(client, "a", error_type="TimeoutError", error="db timeout 30s")
    dead_letter(client, "b", error_type="KeyError", error="sku")
    response = redrive(client, body={"filter": {"error_type": "TimeoutError"}})
    assert response.json == {"redriven": 1}
    assert [m["id"] for m in listed(client, "src")] == timeouts


def test_filter_by_signature_id_as_the_report_writes_it(client):
    wanted = dead_letter(client, "a", error_type="TimeoutError", error="db timeout 30 s after 12 ms")
    dead_letter(client, "b", error_type="TimeoutError", error="connection refused")
    # id of "TimeoutError: db timeout <*> s after <*> ms": "v2-" and the first 12 hex digits of its SHA-1
    response = redrive(client, body={"filter": {"signature": "v2-46aeae276b00"}})
    assert response.json == {"redriven": 1}
    assert [m["id"] for m in listed(client, "src")] == wanted


def test_filter_by_signature_id_of_the_first_scheme_still_finds_its_dead_letters(client):
    wanted = dead_letter(client, "a", error_type="TimeoutError", error="db timeout 30 s after 12 ms")
    dead_letter(client, "b", error_type="TimeoutError", error="connection refused")
    # id the first scheme gave "TimeoutError: db timeout <n> s after <n> ms" (12 hex digits, no prefix)
    response = redrive(client, body={"filter": {"signature": "34ea5819c882"}})
    assert response.json == {"redriven": 1}
    assert [m["id"] for m in listed(client, "src")] == wanted


def test_filter_by_ids_and_source_queue_together(client):
    first, second = dead_letter(client, 1, 2)
    other, = dead_letter(client, 3, source="other")
    body = {"filter": {"ids": [second, other, "absent"], "source_queue": "src"}}
    assert redrive(client, body=body).json == {"redriven": 1}
    assert [m["id"] for m in listed(client, "src")] == [second]
    assert sorted(m["id"] for m in listed(client, "dlq")) == sorted([first, other])


def test_a_destination_that_does_not_exist_is_400_unless_the_request_asks_to_create_it(client):
    ids = dead_letter(client, 1)
    for body in ({"destination": "replay"}, {"destination": "replay", "create_destination": False},
                 {"destination": "replay", "dry_run": True}):
        error = assert_error(redrive(client, body=body), 400, "Invalid API request")
        assert error["description"] == ('destination queue replay does not exist in this project; create it '
                                        'first, or send "create_destination": true.')
    assert len(listed(client, "dlq")) == 1
    assert [q["name"] for q in client.simulate_get("/v2/queues").json["queues"]] == ["dlq", "src"]
    assert redrive(client, body={"destination": "replay", "create_destination": True}).json == {"redriven": 1}
    assert client.simulate_get("/v2/queues/replay/stats").json["messages"]["total"] == 1
    assert [m["id"] for m in listed(client, "replay")] == ids


def test_claimed_dead_letters_are_skipped(client):
    held, free = dead_letter(client, 1, 2)
    claim(client, "dlq", limit=1)
    assert redrive(client, body={"dry_run": True}).json["matched"] == 1
    assert redrive(client).json == {"redriven": 1}
    assert [m["id"] for m in listed(client, "src")] == [free]


def not_a_dlq(queue):
    return (f"Queue {queue} is no queue's dead-letter queue: no queue of this project names it as "
            "_dead_letter_queue, nor is it the default dead-letter queue; redrive the queue a "
            "_dead_letter_queue names.")


def test_unknown_queue_answers_zero_and_says_it_is_no_dead_letter_queue(client):
    warning = not_a_dlq("no-such-queue")
    assert redrive(client, queue="no-such-queue").json == {"redriven": 0, "warning": warning}
    assert redrive(client, queue="no-such-queue", body={"dry_run": True}).json == {
        "matched": 0, "sample": [], "warning": not_a_dlq("no-such-queue")}


def test_a_queue_that_is_no_dlq_only_has_no_dead_letters_and_the_answer_says_so(client):
    post(client, "plain", 1, 2)
    response = redrive(client, queue="plain", body={"destination": "elsewhere", "create_destination": True})
    assert response.status_code == 200
    assert response.json == {"redriven": 0, "warning": not_a_dlq("plain")}
    dry = redrive(client, queue="plain", body={"dry_run": True})
    assert dry.json == {"matched": 0, "sample": [], "warning": not_a_dlq("plain")}
    assert len(listed(client, "plain")) == 2


def test_an_empty_dlq_answers_zero_without_a_warning(client):
    dead_letter(client, 1)
    assert redrive(client).json == {"redriven": 1}
    assert redrive(client).json == {"redriven": 0}
    assert redrive(client, body={"dry_run": True}).json == {"matched": 0, "sample": []}


def test_the_default_dlq_answers_zero_without_a_warning(make_client):
    client = make_client(headers("project-a"), default_dead_letter_queue="dead-letters")
    client.simulate_put("/v2/queues/dead-letters")
    assert redrive(client, queue="dead-letters").json == {"redriven": 0}


def test_another_project_cannot_redrive_these_dead_letters(client, project_b):
    dead_letter(client, 1)
    assert redrive(project_b).json == {"redriven": 0, "warning": not_a_dlq("dlq")}
    assert len(listed(client, "dlq")) == 1


QUEUE_NAME_RULE = "a queue name: ASCII letters, digits, _ - and ., 1 to 64 characters, not . or .."
KEYS = ("The request body may only have the keys destination, create_destination, limit, dry_run, "
        "async, max_per_second and filter")
BAD_SIGNATURE = ("filter.signature must be v2- and 12 lowercase hexadecimal digits "
                 "(or 12 alone: an id of the first scheme).")


@pytest.mark.parametrize("body, description", [
    ([1], "The request body must be a JSON object, got an array."),
    ("dlq", "The request body must be a JSON object, got a string."),
    ({"destiantion": "q"}, f"{KEYS}; destiantion is not one of them."),
    ({"destination": 7}, "destination must be a string, got 7."),
    ({"destination": "bad name!"}, f"destination must be {QUEUE_NAME_RULE} (got a string)."),
    ({"destination": ""}, f"destination must be {QUEUE_NAME_RULE} (got an empty string)."),
    ({"destination": "q" * 65}, f"destination must be {QUEUE_NAME_RULE} (got a string)."),
    ({"destination": "dlq"}, "destination cannot be the queue redriven from (dlq)."),
    ({"destination": "q", "create_destination": "yes"},
     "create_destination must be true or false, got a string."),
    ({"limit": 0}, "limit must be at least 1, got 0."),
    ({"limit": 1001}, "limit must be at most 1000, got 1001."),
    ({"limit": "5"}, "limit must be an integer, got a string."),
    ({"limit": True}, "limit must be an integer, got true."),
    ({"limit": 2.5}, "limit must be an integer, got 2.5."),
    ({"dry_run": "yes"}, "dry_run must be true or false, got a string."),
    ({"max_per_second": 0}, "max_per_second must be more than 0, got 0."),
    ({"max_per_second": -1}, "max_per_second must be more than 0, got -1."),
    ({"max_per_second": "fast"}, "max_per_second must be a number, got a string."),
    ({"max_per_second": False}, "max_per_second must be a number, got false."),
    ({"filter": "src"}, "filter must be a JSON object, got a string."),
    ({"filter": {"queue": "src"}},
     "filter may only have the keys source_queue, error_type, signature and ids; queue is not one of them."),
    ({"filter": {"source_queue": 5}}, "filter.source_queue must be a string, got 5."),
    ({"filter": {"source_queue": ""}}, "filter.source_queue may not be empty."),
    ({"filter": {"error_type": ["TimeoutError"]}}, "filter.error_type must be a string, got an array."),
    ({"filter": {"signature": "ABCDEF123456"}}, BAD_SIGNATURE),
    ({"filter": {"signature": "34ea5819c88"}}, BAD_SIGNATURE),
    ({"filter": {"signature": "v3-34ea5819c882"}}, BAD_SIGNATURE),
    ({"filter": {"signature": "v2-34ea5819c88"}}, BAD_SIGNATURE),
    ({"filter": {"ids": []}}, "filter.ids may not be empty."),
    ({"filter": {"ids": "a,b"}}, "filter.ids must be an array, got a string."),
    ({"filter": {"ids": [1]}}, "filter.ids[0] must be a string, got 1."),
    ({"filter": {"ids": [f"id-{n}" for n in range(1001)]}},
     "filter.ids may hold at most 1000 ids, got 1001."),
])
def test_each_bad_redrive_body_is_400_naming_the_field(client, body, description):
    dead_letter(client, 1)
    response = redrive(client, body=body)
    error = assert_error(response, 400)
    assert error["title"] in ("Invalid request body", "Invalid API request")
    assert error["description"] == description
    assert len(listed(client, "dlq")) == 1


def test_a_bad_include_dead_letter_is_refused_before_anything_moves(client):
    dead_letter(client, 1)
    response = redrive(client, params={"include_dead_letter": "maybe"})
    assert "include_dead_letter" in assert_error(response, 400)["description"]
    assert len(listed(client, "dlq")) == 1


def test_a_body_that_is_not_json_is_400(client):
    response = client.simulate_post("/v2/queues/dlq/redrive", body="{not json",
                                    headers={"Content-Type": "application/json"})
    assert_error(response, 400, "Invalid request body")


def test_a_bad_queue_name_in_the_path_is_400(client):
    assert_error(client.simulate_post("/v2/queues/bad%20name/redrive", json={}), 400, "Invalid API request")


def test_the_id_and_message_caps_are_configurable(make_client, settings):
    limits = dataclasses.replace(settings.limits, max_redrive_ids=2, max_redrive_messages=5)
    client = make_client(headers("project-a"), limits=limits)
    response = redrive(client, body={"filter": {"ids": ["a", "b", "c"]}})
    assert assert_error(response, 400)["description"] == "filter.ids may hold at most 2 ids, got 3."
    response = redrive(client, body={"limit": 6})
    assert assert_error(response, 400)["description"] == "limit must be at most 5, got 6."
    assert redrive(client, body={"limit": 5, "filter": {"ids": ["a", "b"]}}).json["redriven"] == 0


def test_the_report_and_the_redrive_filter_share_one_signature_implementation():
    from spark_jobs import signatures as report_signatures
    from zaqar_lite.claims import signatures

    assert report_signatures.failure_signature_id is signatures.failure_signature_id
    assert report_signatures.MASKS is signatures.MASKS
