"""The notifier beside the server (``serve --with-notifier``) counts into the server's ``/metrics``."""

from __future__ import annotations

import uuid

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.harness import ApiSession, start_server, stop_server
from tests.notify.conftest import wait_until
from tests.notify.streams import post_numbered

NO_RETRY_DELAYS = {"retries_with_no_delay": 2, "minimum_delay_retries": 0, "maximum_delay_retries": 0,
                   "minimum_delay": 0, "maximum_delay": 0}


def notifier_counts(api: ApiSession) -> dict[str, float]:
    """Return the notifier counters of the http scheme, by series name."""
    counts = {}
    for family in text_string_to_metric_families(api.get("/metrics").text):
        for sample in family.samples:
            if sample.name.startswith("zaqar_lite_notifier_") and sample.name.endswith("_total") \
                    and sample.labels == {"scheme": "http"}:
                counts[sample.name.removeprefix("zaqar_lite_notifier_")] = sample.value
    return counts


def test_deliveries_failures_and_suspensions_of_the_notifier_are_served_by_the_api(receiver, tmp_path):
    server = start_server(f"sqlite:///{tmp_path}/zaqar.db?synchronous=normal", tmp_path,
                          extra_args=["--with-notifier"])
    try:
        with ApiSession(server.url, project=f"n-{uuid.uuid4().hex[:10]}") as api:
            receiver.behave("down", always_fail=True)
            for queue, url, options in (("up", receiver.url("up"), {}),
                                        ("down", receiver.url("down"), {"_retry_policy": NO_RETRY_DELAYS})):
                answer = api.post(f"/v2/queues/{queue}/subscriptions",
                                  json={"subscriber": url, "options": options})
                assert answer.status_code == 201, answer.text
            post_numbered(api, "up", 2)
            post_numbered(api, "down", 1)
            expected = {"deliveries_total": 2.0, "delivery_failures_total": 3.0, "suspensions_total": 1.0}
            wait_until(lambda: notifier_counts(api) == expected, 30, f"the notifier counts {expected}")
            assert len(receiver.acknowledged("up")) == 2
            assert len(receiver.deliveries("down")) == 3
    finally:
        stop_server(server)
