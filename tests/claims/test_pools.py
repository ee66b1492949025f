"""The pool rules: names, where a new queue goes, the same-pool rule, fan-out targets, capabilities."""

from __future__ import annotations

import pytest

from zaqar_lite.claims import pools
from zaqar_lite.errors import ValidationFailed
from zaqar_lite.models import Pool

EAST = Pool("east", "redis://127.0.0.1:6379/0", 30)
WEST = Pool("west", "sqlite:///west.db", 10)
DARK = Pool("dark", "sqlite:///dark.db", 0)
COLD = Pool("cold", "swift://u:k@127.0.0.1:8080/auth/v1.0", 5, flavor="archive")


@pytest.mark.parametrize(("draw", "chosen"),
                         [(0.0, "east"), (0.7499, "east"), (0.75, "west"), (0.9999, "west")])
def test_a_draw_lands_on_a_pool_by_its_share_of_the_weights(draw, chosen):
    found = pools.weighted([EAST, DARK, WEST], draw)
    assert found is not None and found.name == chosen


def test_no_pool_with_weight_places_nothing():
    assert pools.weighted([DARK], 0.5) is None
    assert pools.weighted([], 0.5) is None


def test_a_queue_of_no_flavor_stays_in_the_default_store_while_no_pool_of_no_flavor_has_weight():
    assert pools.place("q", None, [DARK, COLD], None, 0.5) is None
    assert pools.place("q", None, [], None, 0.5) is None


def test_a_queue_of_no_flavor_goes_to_the_pools_of_no_flavor():
    assert pools.place("q", None, [COLD, EAST], None, 0.99) == EAST
    assert pools.place("q", "archive", [COLD, EAST], None, 0.0) == COLD


def test_a_queue_goes_beside_its_dead_letter_queue_whatever_the_weights():
    assert pools.place("q", None, [EAST, DARK], DARK, 0.0) == DARK
    assert pools.place("q", None, [EAST, COLD], COLD, 0.0) == COLD


def test_a_flavor_without_weight_or_a_linked_pool_of_another_flavor_is_refused():
    with pytest.raises(ValidationFailed) as raised:
        pools.place("q", "archive", [EAST, DARK], None, 0.1)
    assert str(raised.value) == "Queue q cannot be placed: flavor archive has no pool with a weight above 0."
    with pytest.raises(ValidationFailed) as raised:
        pools.place("q", "archive", [EAST, COLD], EAST, 0.1)
    assert str(raised.value).startswith(
        "Queue q requests flavor archive, but its dead-letter queue is in pool east")


def test_linked_queues_of_two_pools_are_refused_naming_both():
    pools.check_same_pool("orders", "east", "dlq", "east", "dead-letter queue")
    with pytest.raises(ValidationFailed) as raised:
        pools.check_same_pool("orders", "east", "dlq", "west", "dead-letter queue")
    assert str(raised.value).startswith(
        "The dead-letter queue dlq is in pool west, but queue orders is in pool east")


@pytest.mark.parametrize(("subscriber", "queue"), [
    ("trust+http://127.0.0.1:8888/v2/queues/copies/messages", "copies"),
    ("trust+https://mq.example.com/v2/queues/a-b.c/messages/", "a-b.c"),
    ("http://127.0.0.1:8888/v2/queues/copies/messages", None),
    ("trust+http://127.0.0.1:8888/v2/queues/copies/claims", None),
    ("mailto:ops@example.com", None),
])
def test_a_fan_out_subscriber_names_the_queue_it_posts_to(subscriber, queue):
    assert pools.fan_out_queue(subscriber) == queue


@pytest.mark.parametrize("name", ["", "a.b", "x" * 65, "a b", "storage", "catalog_reachable"])
def test_bad_pool_names_are_refused(name):
    with pytest.raises(ValidationFailed):
        pools.check_name("pool", name)


def test_a_flavor_can_what_all_its_pools_can():
    assert pools.capabilities([EAST]) == ["AOD", "CLAIMS", "FIFO", "HIGH_THROUGHPUT"]
    assert pools.capabilities([EAST, WEST]) == ["AOD", "CLAIMS", "FIFO"]
    assert pools.capabilities([WEST, COLD]) == ["AOD", "CLAIMS", "DURABILITY"]
    assert pools.capabilities([]) == []


def test_the_flavor_a_queue_requests_is_a_flavor_name():
    assert pools.requested_flavor({"_flavor": "archive"}) == "archive"
    assert pools.requested_flavor({"_flavor": None}) is None
    assert pools.requested_flavor(None) is None
    with pytest.raises(ValidationFailed):
        pools.requested_flavor({"_flavor": "no way"})
