"""``_enable_encrypt_messages``: bodies encrypted at rest, plaintext wherever a body leaves the API.

The store is read through a bare driver (``open_storage``, no encryption
layer): what it holds is what lies on disk or in the server. Encryption sits
above the drivers, so these run on SQLite only; what depends on the store (no
plaintext in it, moves and a pop's put-back on each) is
``tests/storage/conformance/test_encryption_at_rest.py``, on every store.
"""

from __future__ import annotations

import json

import falcon.testing
import pytest

from tests.api.helpers import assert_error, claim, headers, post
from tests.conftest import STORE_KIND
from zaqar_lite.storage import open_storage

K1 = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
K2 = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
SECRET = {"card": "4111-1111-1111-1111", "note": "ünïcødé"}

pytestmark = pytest.mark.skipif(STORE_KIND != "sqlite", reason="encryption sits above the store: see module")
ENCRYPTED = {"_enable_encrypt_messages": True}


@pytest.fixture
def keyed(make_client) -> falcon.testing.TestClient:
    """A client of project-a on a server whose keys are k2 (it encrypts) and k1."""
    return make_client(headers("project-a"), encryption_keys=(K2, K1))


@pytest.fixture
def raw(settings):
    """The store as it lies, read by a driver without the encryption layer."""
    driver = open_storage(settings.storage_uri)
    yield driver
    driver.close()


def stored_bodies(raw, queue: str, project: str = "project-a") -> list:
    found = raw.list_messages(project, queue, now=0.0, marker=None, limit=100, include_claimed=True,
                              include_delayed=True, exclude_client_id=None)
    return [m.body for m in found]


def assert_sealed(raw, queue: str, count: int, kid: str = "k2") -> None:
    bodies = stored_bodies(raw, queue)
    assert len(bodies) == count
    for body in bodies:
        assert list(body) == ["zaqar_lite:encrypted"]
        assert body["zaqar_lite:encrypted"]["kid"] == kid
        assert "4111" not in json.dumps(body)


def encrypted_queue(client, name: str = "vault", **metadata) -> None:
    assert client.simulate_put(f"/v2/queues/{name}", json={**ENCRYPTED, **metadata}).status_code == 201


def test_the_flag_is_accepted_and_shown_on_a_server_with_keys(keyed):
    encrypted_queue(keyed)
    assert keyed.simulate_get("/v2/queues/vault").json["_enable_encrypt_messages"] is True


def test_bodies_are_sealed_at_rest_and_plaintext_on_list_get_claim_and_pop(keyed, raw):
    encrypted_queue(keyed)
    ids = post(keyed, "vault", SECRET, "plain text", 42)
    assert_sealed(raw, "vault", 3)

    listed = keyed.simulate_get("/v2/queues/vault/messages", params={"echo": "true"}).json["messages"]
    assert [m["body"] for m in listed] == [SECRET, "plain text", 42]
    assert keyed.simulate_get(f"/v2/queues/vault/messages/{ids[0]}").json["body"] == SECRET
    by_ids = keyed.simulate_get("/v2/queues/vault/messages", params={"ids": ",".join(ids[:2])}).json
    assert [m["body"] for m in by_ids["messages"]] == [SECRET, "plain text"]

    claim_id, held = claim(keyed, "vault", limit=1)
    assert [m["body"] for m in held] == [SECRET]
    assert [m["body"] for m in keyed.simulate_get(f"/v2/queues/vault/claims/{claim_id}").json["messages"]] \
        == [SECRET]
    popped = keyed.simulate_delete("/v2/queues/vault/messages", params={"pop": "2"}).json["messages"]
    assert [m["body"] for m in popped] == ["plain text", 42]


def test_a_long_polling_claim_answers_plaintext(keyed):
    encrypted_queue(keyed)
    post(keyed, "vault", SECRET)
    result = keyed.simulate_post("/v2/queues/vault/claims", params={"wait": "1"})
    assert result.status_code == 201
    assert [m["body"] for m in result.json["messages"]] == [SECRET]


def test_an_edited_delayed_body_is_sealed_too(keyed, raw):
    encrypted_queue(keyed)
    [held] = post(keyed, "vault", "first", delay=60)
    result = keyed.simulate_patch(f"/v2/queues/vault/messages/{held}", json={"body": SECRET})
    assert result.status_code == 200, result.text
    assert result.json["body"] == SECRET
    assert_sealed(raw, "vault", 1)


def test_a_queue_without_the_flag_stores_plaintext_on_the_same_server(keyed, raw):
    post(keyed, "open", SECRET)
    assert stored_bodies(raw, "open") == [SECRET]


def test_a_body_of_the_envelope_shape_is_refused_on_every_queue(keyed, client):
    encrypted_queue(keyed)
    forged = {"zaqar_lite:encrypted": {"kid": "k2"}}
    for who, queue in ((keyed, "vault"), (client, "open")):
        messages = [{"body": 1}, {"body": forged}]
        result = who.simulate_post(f"/v2/queues/{queue}/messages", json={"messages": messages})
        assert "messages[1].body may not be an object whose only key is 'zaqar_lite:encrypted'" \
            in assert_error(result, 400, "Invalid request body")["description"]


def test_the_flag_without_keys_is_refused_naming_the_setting(client):
    result = client.simulate_put("/v2/queues/vault", json=ENCRYPTED)
    assert assert_error(result, 400)["description"].startswith(
        "_enable_encrypt_messages: true needs the setting [encryption] keys (ZAQAR_LITE_ENCRYPTION_KEYS)")


def test_a_post_to_an_encrypted_queue_after_the_keys_are_removed_is_refused_not_stored_in_plaintext(
        keyed, client, raw):
    encrypted_queue(keyed)
    result = client.simulate_post("/v2/queues/vault/messages", json={"messages": [{"body": SECRET}]})
    body = assert_error(result, 503, "Encryption is not configured")
    assert body["description"] == (
        "Queue vault keeps its message bodies encrypted (_enable_encrypt_messages) but this server has no "
        "[encryption] keys; messages are refused rather than stored in plaintext.")
    assert stored_bodies(raw, "vault") == []


# -- key rotation and lost keys ---------------------------------------------------------------


def test_a_rotated_server_reads_old_bodies_and_seals_new_ones_with_its_first_key(keyed, make_client, raw):
    encrypted_queue(keyed)
    post(keyed, "vault", "sealed by k2")
    rotated = make_client(headers("project-a"), encryption_keys=(K1, K2))
    post(rotated, "vault", "sealed by k1")
    assert [b["zaqar_lite:encrypted"]["kid"] for b in stored_bodies(raw, "vault")] == ["k2", "k1"]
    listed = rotated.simulate_get("/v2/queues/vault/messages", params={"echo": "true"}).json["messages"]
    assert [m["body"] for m in listed] == ["sealed by k2", "sealed by k1"]


@pytest.fixture
def lost_k2(keyed, make_client) -> tuple[falcon.testing.TestClient, str]:
    """A message sealed by k2, and a client of a server that holds only k1."""
    encrypted_queue(keyed)
    [message_id] = post(keyed, "vault", SECRET)
    return make_client(headers("project-a"), encryption_keys=(K1,)), message_id


def test_a_message_whose_key_is_gone_is_a_503_naming_the_message_and_the_key(lost_k2):
    only_k1, message_id = lost_k2
    result = only_k1.simulate_get(f"/v2/queues/vault/messages/{message_id}")
    body = assert_error(result, 503, "Message cannot be decrypted")
    assert body["description"] == (
        f"Message {message_id} of queue vault cannot be decrypted: it was encrypted with key k2, which "
        "[encryption] keys does not hold. An operator can add its key back to [encryption] keys; the "
        "message can also be deleted by its id.")
    assert_error(only_k1.simulate_get("/v2/queues/vault/messages", params={"echo": "true"}), 503,
                 "Message cannot be decrypted")
    assert_error(only_k1.simulate_post("/v2/queues/vault/claims"), 503, "Message cannot be decrypted")


def test_a_claim_that_meets_a_lost_key_leaves_the_queue_as_it_was(lost_k2, keyed):
    only_k1, message_id = lost_k2
    result = only_k1.simulate_post("/v2/queues/vault/claims", json={"ttl": 60, "grace": 60})
    assert "it was encrypted with key k2, which [encryption] keys does not hold" in \
        assert_error(result, 503, "Message cannot be decrypted")["description"]
    stats = keyed.simulate_get("/v2/queues/vault/stats").json["messages"]
    assert (stats["free"], stats["claimed"]) == (1, 0)
    assert [m["id"] for m in claim(keyed, "vault")[1]] == [message_id]


def test_a_pop_that_meets_a_lost_key_puts_what_it_took_back(lost_k2, keyed):
    only_k1, message_id = lost_k2
    post(keyed, "vault", "readable")
    result = only_k1.simulate_delete("/v2/queues/vault/messages", params={"pop": "5"})
    assert_error(result, 503, "Message cannot be decrypted")
    listed = keyed.simulate_get("/v2/queues/vault/messages", params={"echo": "true"}).json["messages"]
    assert [(m["id"], m["body"]) for m in listed][0] == (message_id, SECRET)
    assert [m["body"] for m in listed] == [SECRET, "readable"]


def test_a_message_whose_key_is_gone_can_still_be_deleted(lost_k2):
    only_k1, message_id = lost_k2
    assert only_k1.simulate_delete(f"/v2/queues/vault/messages/{message_id}").status_code == 204
    assert only_k1.simulate_get("/v2/queues/vault/messages", params={"echo": "true"}).status_code == 200


# -- dead letters and redrive -----------------------------------------------------------------


def dead_letter_of_vault(keyed, clock, *bodies) -> list[str]:
    """Dead-letter messages of the encrypted queue vault into dlq (no flag) through the API."""
    assert keyed.simulate_put("/v2/queues/dlq").status_code == 201
    encrypted_queue(keyed, _max_claim_count=1, _dead_letter_queue="dlq")
    ids = post(keyed, "vault", *bodies)
    claim(keyed, "vault", limit=len(ids), ttl=60, grace=60)
    clock.advance(61)
    assert keyed.simulate_post("/v2/queues/vault/claims").status_code == 204
    return ids


def test_a_dead_letter_stays_sealed_in_a_dlq_without_the_flag_and_reads_in_plaintext(keyed, clock, raw):
    ids = dead_letter_of_vault(keyed, clock, SECRET)
    assert_sealed(raw, "dlq", 1)
    listed = keyed.simulate_get("/v2/queues/dlq/messages",
                                params={"echo": "true", "include_claimed": "true"}).json["messages"]
    assert [(m["id"], m["body"]) for m in listed] == [(ids[0], SECRET)]


def test_a_redrive_answers_plaintext_samples_and_moves_bodies_as_stored(keyed, clock, raw):
    ids = dead_letter_of_vault(keyed, clock, SECRET, "second")
    dry = keyed.simulate_post("/v2/queues/dlq/redrive", json={"dry_run": True})
    assert [m["body"] for m in dry.json["sample"]] == [SECRET, "second"]
    moved = keyed.simulate_post("/v2/queues/dlq/redrive", json={"filter": {"ids": ids[:1]}})
    assert moved.json == {"redriven": 1}
    assert_sealed(raw, "vault", 1)
    to_plain_queue = keyed.simulate_post("/v2/queues/dlq/redrive",
                                         json={"destination": "replay", "create_destination": True})
    assert to_plain_queue.json == {"redriven": 1}
    assert_sealed(raw, "replay", 1)  # a move never decrypts: it stays sealed as stored
    replayed = keyed.simulate_get("/v2/queues/replay/messages", params={"echo": "true"}).json["messages"]
    assert [m["body"] for m in replayed] == ["second"]


def test_the_console_shows_a_sealed_dead_letter_in_plaintext(make_client, clock):
    console = make_client(None, console_enabled=True, encryption_keys=(K2,))
    api = falcon.testing.TestClient(console.app, headers=headers("project-a"))
    dead_letter_of_vault(api, clock, {"n": 1})
    page = console.simulate_get("/console/projects/project-a/queues/dlq")
    assert page.status_code == 200
    assert '<pre class="body">{\n  &#34;n&#34;: 1\n}</pre>' in page.text


def test_a_release_reason_of_the_sealed_shape_is_refused_on_every_queue(keyed):
    assert keyed.simulate_put("/v2/queues/open").status_code == 201
    [message_id] = post(keyed, "open", "plain")
    claim_id, _ = claim(keyed, "open")
    result = keyed.simulate_post(f"/v2/queues/open/messages/{message_id}/release",
                                 params={"claim_id": claim_id},
                                 json={"error": "zaqar_lite:encrypted:v1:k2:a:b"})
    assert "error may not start with 'zaqar_lite:encrypted:'" in \
        assert_error(result, 400, "Invalid request body")["description"]


def test_a_release_reason_is_sealed_at_rest_and_shown_in_plaintext(keyed, raw):
    encrypted_queue(keyed)
    [message_id] = post(keyed, "vault", SECRET)
    claim_id, _ = claim(keyed, "vault")
    result = keyed.simulate_post(f"/v2/queues/vault/messages/{message_id}/release",
                                 params={"claim_id": claim_id},
                                 json={"error_type": "CardError", "error": "declined 4111-1111"})
    assert result.status_code == 204, result.text
    [stored] = raw.get_messages("project-a", "vault", [message_id], 0.0)
    assert [f["error_type"] for f in stored.failures] == ["CardError"]
    assert stored.failures[0]["error"].startswith("zaqar_lite:encrypted:v1:k2:")
    assert "4111" not in json.dumps(stored.failures)


def test_bodies_near_the_envelope_shape_and_plain_reasons_read_as_posted_on_a_server_without_keys(client):
    near = [{"zaqar_lite:encrypted": {"kid": "k2"}, "other": 1}, {"other": "zaqar_lite:encrypted"},
            ["zaqar_lite:encrypted"], "zaqar_lite:encrypted", {}]
    ids = post(client, "open", *near)
    claim_id, held = claim(client, "open", limit=10)
    assert [m["body"] for m in held] == near
    result = client.simulate_post(f"/v2/queues/open/messages/{ids[0]}/release", params={"claim_id": claim_id},
                                  json={"error_type": "CardError", "error": "declined"})
    assert result.status_code == 204, result.text
    result = client.simulate_get(f"/v2/queues/open/messages/{ids[0]}")
    assert result.status_code == 200, result.text
    assert result.json["body"] == near[0]
