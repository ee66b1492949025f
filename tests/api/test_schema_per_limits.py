"""A body's schema is built once per ``Limits`` value and found again by identity, never by hashing."""

from __future__ import annotations

import dataclasses

import pytest

from zaqar_lite.api.schemas.schema import Schema, per_limits
from zaqar_lite.config import Limits
from zaqar_lite.errors import InvalidBody

pytestmark = pytest.mark.store_independent


class CountedHash(Limits):
    """``Limits`` that counts how often it is hashed."""

    hashed = 0

    def __hash__(self) -> int:
        CountedHash.hashed += 1
        return super().__hash__()


def test_a_schema_is_built_once_per_limits_and_found_without_hashing_them():
    built: list[Limits] = []

    @per_limits
    def post_schema(limits: Limits) -> Schema:
        built.append(limits)
        return Schema({"type": "array", "maxItems": limits.max_messages_per_page})

    limits = CountedHash()
    first = post_schema(limits)
    hashed = CountedHash.hashed
    for _ in range(5):
        assert post_schema(limits) is first
    assert CountedHash.hashed == hashed
    assert built == [limits]
    # an equal value under another identity gets the same schema; another value its own
    assert post_schema(CountedHash()) is first
    other = post_schema(dataclasses.replace(limits, max_messages_per_page=2))
    assert other is not first and len(built) == 2
    with pytest.raises(InvalidBody, match="at most 2"):
        other.check([1, 2, 3])
    first.check([1, 2, 3])
