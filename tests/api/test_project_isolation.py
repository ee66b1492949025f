"""One project's queues, messages and claims are invisible to every other project.

docs/api.rst, "Project isolation".
"""

from __future__ import annotations

import pytest

from tests.api.helpers import JSON_PATCH, assert_error, claim, post

QUEUE = "/v2/queues/shared-name"


@pytest.fixture
def project_a_state(client):
    """project-a owns queue shared-name with metadata, two messages and a claim on the first."""
    client.simulate_put(QUEUE, json={"owner": "a"})
    first, second = post(client, "shared-name", "a-1", "a-2")
    claim_id, _ = claim(client, "shared-name", limit=1)
    return {"first": first, "second": second, "claim": claim_id}


def assert_project_a_untouched(client, state):
    assert client.simulate_get(QUEUE).json["owner"] == "a"
    stats = client.simulate_get(f"{QUEUE}/stats").json["messages"]
    assert (stats["claimed"], stats["free"]) == (1, 1)
    held = client.simulate_get(f"{QUEUE}/claims/{state['claim']}")
    assert held.status_code == 200
    assert [m["id"] for m in held.json["messages"]] == [state["first"]]


def test_another_project_does_not_list_the_queue(client, project_b, project_a_state):
    assert project_b.simulate_get("/v2/queues").json == {"queues": [], "links": []}
    assert project_b.simulate_get("/v2/queues", params={"with_count": "true"}).json["count"] == 0


def test_another_project_sees_defaults_not_the_metadata(client, project_b, project_a_state):
    metadata = project_b.simulate_get(QUEUE).json
    assert "owner" not in metadata


def test_another_project_cannot_patch_the_queue(client, project_b, project_a_state):
    operations = '[{"op": "replace", "path": "/metadata/owner", "value": "b"}]'
    result = project_b.simulate_patch(QUEUE, body=operations, content_type=JSON_PATCH)
    assert_error(result, 404)
    assert_project_a_untouched(client, project_a_state)


def test_another_project_sees_no_messages_or_stats(client, project_b, project_a_state):
    listing = project_b.simulate_get(f"{QUEUE}/messages",
                                     params={"echo": "true", "include_claimed": "true"})
    assert listing.json["messages"] == []
    assert project_b.simulate_get(f"{QUEUE}/stats").json == \
        {"messages": {"claimed": 0, "free": 0, "delayed": 0, "total": 0}}


def test_another_project_cannot_get_the_messages(client, project_b, project_a_state):
    ids = f"{project_a_state['first']},{project_a_state['second']}"
    assert_error(project_b.simulate_get(f"{QUEUE}/messages", params={"ids": ids}), 404)
    assert_error(project_b.simulate_get(f"{QUEUE}/messages/{project_a_state['second']}"), 404)


def test_another_project_cannot_claim_the_messages(client, project_b, project_a_state):
    assert project_b.simulate_post(f"{QUEUE}/claims").status_code == 204
    assert_project_a_untouched(client, project_a_state)


def test_another_project_cannot_see_renew_or_release_the_claim(client, project_b, project_a_state, clock):
    claim_path = f"{QUEUE}/claims/{project_a_state['claim']}"
    assert_error(project_b.simulate_get(claim_path), 404)
    assert_error(project_b.simulate_patch(claim_path, json={"ttl": 60}), 404)
    project_b.simulate_delete(claim_path)
    assert_project_a_untouched(client, project_a_state)


def test_another_project_cannot_delete_the_messages(client, project_b, project_a_state):
    project_b.simulate_delete(f"{QUEUE}/messages/{project_a_state['second']}")
    project_b.simulate_delete(f"{QUEUE}/messages/{project_a_state['first']}",
                              params={"claim_id": project_a_state["claim"]})
    project_b.simulate_delete(f"{QUEUE}/messages",
                              params={"ids": f"{project_a_state['first']},{project_a_state['second']}"})
    assert project_b.simulate_delete(f"{QUEUE}/messages", params={"pop": 5}).json["messages"] == []
    assert_project_a_untouched(client, project_a_state)


def test_another_project_cannot_purge_or_delete_the_queue(client, project_b, project_a_state):
    assert project_b.simulate_post(f"{QUEUE}/purge").status_code < 500
    assert project_b.simulate_delete(QUEUE).status_code == 204
    assert_project_a_untouched(client, project_a_state)


def test_the_same_queue_name_in_two_projects_is_two_queues(client, project_b, project_a_state):
    assert project_b.simulate_put(QUEUE, json={"owner": "b"}).status_code == 201
    post(project_b, "shared-name", "b-1")
    _, messages = claim(project_b, "shared-name")
    assert [m["body"] for m in messages] == ["b-1"]
    assert project_b.simulate_get(QUEUE).json["owner"] == "b"
    assert_project_a_untouched(client, project_a_state)
