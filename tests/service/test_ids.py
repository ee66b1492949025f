"""Message and claim ids: the text of random version 4 UUIDs, as ``str(uuid.uuid4())`` writes them."""

from __future__ import annotations

import os
import uuid

import pytest

from zaqar_lite.service.core import new_id, uuid4_text

pytestmark = pytest.mark.store_independent


@pytest.mark.parametrize("edge_bytes", [bytes(16), b"\xff" * 16, bytes(range(16)), bytes(range(240, 256))])
def test_an_id_is_written_as_uuid_writes_a_version_4_uuid_of_the_same_bytes(edge_bytes):
    assert uuid4_text(edge_bytes) == str(uuid.UUID(bytes=edge_bytes, version=4))


def test_ids_of_random_bytes_are_written_as_uuid_writes_them():
    # drawn inside the test: pytest-xdist's processes must collect the same test ids
    for random_bytes in (os.urandom(16) for _ in range(2000)):
        assert uuid4_text(random_bytes) == str(uuid.UUID(bytes=random_bytes, version=4)), random_bytes


def test_fresh_ids_are_distinct_version_4_uuids():
    ids = [new_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
