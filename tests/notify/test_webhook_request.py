"""What one webhook request carries (the retry policy is tested in ``tests/rules/test_delivery_retry.py``)."""

from __future__ import annotations

import json

from zaqar_lite.models import Message
from zaqar_lite.notify import webhook


def message() -> Message:
    return Message(id="m1", body={"event": "done"}, created=1000.0, expires=1300.0, claim_count=2)


def test_the_notification_has_exactly_zaqars_fields():
    assert webhook.notification(message(), "orders") == {
        "body": {"event": "done"}, "ttl": 300, "queue_name": "orders", "Message_Type": "Notification"}


def test_post_data_text_has_the_quoted_placeholder_replaced_by_the_notification():
    options = {"post_data": '{"workflow": "w1", "params": {"notification": "$zaqar_message$"}}'}
    body = json.loads(webhook.render_body({"id": "m1"}, options))
    assert body == {"workflow": "w1", "params": {"notification": {"id": "m1"}}}


def test_post_data_may_also_be_a_json_object():
    options = {"post_data": {"wrapped": "$zaqar_message$", "n": 1}}
    assert json.loads(webhook.render_body({"id": "m1"}, options)) == {"wrapped": {"id": "m1"}, "n": 1}


def test_headers_carry_post_headers_and_an_hmac_of_the_exact_body_when_a_secret_is_set():
    body = b'{"id": "m1"}'
    headers = webhook.request_headers(body, {"secret": "top-secret", "post_headers": {"X-Trace": "t1"}},
                                      "s1", "m1")
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Trace"] == "t1"
    assert headers["X-Zaqar-Lite-Message-Id"] == "m1"
    assert headers["X-Zaqar-Lite-Subscription-Id"] == "s1"
    assert headers["X-Zaqar-Lite-Signature"] == (
        "sha256=eab1b7eef385eeed20a9ed4035e5849526a720846058e899008eb644b25f7824")


def test_no_signature_without_a_secret():
    assert "X-Zaqar-Lite-Signature" not in webhook.request_headers(b"{}", {}, "s1", "m1")
