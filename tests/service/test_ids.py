"""Message and claim ids: the text of random version 4 UUIDs, as ``str(uuid.uuid4())`` writes them."""

from __future__ import annotations

import os
import uuid

import pytest

from zaqar_lite.service.core import new_id, uuid4_text

pytestmark = pytest.mark.store_independent


@pytest.mark.parametrize("random_bytes", [bytes(16), b"\xff" * 16, bytes(range(16)), bytes(range(240, 256)),
                                          *(os.urandom(16) for _ in range(200))])
def test_an_id_is_written_as_uuid_writes_a_version_4_uuid_of_the_same_bytes(random_bytes):
    assert uuid4_text(random_bytes) == str(uuid.UUID(bytes=random_bytes, version=4))


def test_fresh_ids_are_distinct_version_4_uuids():
    ids = [new_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
