"""The topic rules: the namespace a project's topics live in, and the metadata a topic shows."""

from __future__ import annotations

from zaqar_lite.config import Limits
from zaqar_lite.rules import topics


def test_a_projects_topics_live_in_a_namespace_no_client_project_can_be():
    assert topics.namespace("project-a") == "project-a,topics"


def test_a_source_in_a_topic_namespace_is_called_a_topic_and_any_other_a_queue():
    assert topics.source_kind("project-a,topics") == "topic"
    assert topics.source_kind("project-a") == "queue"
    assert topics.source_kind("topics") == "queue"


def test_a_topic_shows_zaqars_three_reserved_keys_under_its_stored_ones():
    assert topics.with_defaults(None, Limits()) == {
        "_max_messages_post_size": 262144, "_default_message_ttl": 3600, "_default_message_delay": 0}
    assert topics.with_defaults({"_default_message_ttl": 300, "team": "x"}, Limits()) == {
        "_max_messages_post_size": 262144, "_default_message_ttl": 300, "_default_message_delay": 0,
        "team": "x"}


def test_the_claim_only_keys_are_the_dead_letter_claim_backoff_and_pause_ones():
    assert topics.CLAIM_ONLY_KEYS == ("_max_claim_count", "_dead_letter_queue",
                                      "_dead_letter_queue_messages_ttl", "_dead_letter_on_expiry",
                                      "_retry_backoff", "_paused", "_paused_by", "_dead_letter_breaker")
