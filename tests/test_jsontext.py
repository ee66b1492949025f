"""The JSON texts written from encoders built once are json.dumps's, byte for byte, errors included."""

from __future__ import annotations

import json

import pytest

from zaqar_lite.jsontext import ascii_text, utf8_text

VALUES = [
    {"messages": [{"body": {"event": "BackupStarted", "n": 1}, "ttl": 300}]},
    {"resources": ["/v2/queues/q/messages/0f1e2d3c-aaaa-4bbb-8ccc-123456789abc"]},
    {"text": "é ü 漢字 \U0001f600 \u2028 \" \\ \n \t \x00"},
    [1, -0.0, 2.5, 1e300, 10**30, float("nan"), float("inf"), -float("inf"), True, False, None],
    {1: "int key", False: "bool key", None: "none key", 2.5: "float key"},
    (1, 2),
    "a string alone",
    12,
    [],
    {},
    [[[[{"deep": [{"deeper": {}}]}]]]],
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_texts_are_json_dumps_texts(value):
    assert ascii_text(value) == json.dumps(value)
    assert utf8_text(value) == json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize("value", [{"a": object()}, {(1, 2): 1}, [b"bytes"]],
                         ids=["object", "tuple-key", "bytes"])
def test_what_json_dumps_refuses_is_refused_with_its_words(value):
    with pytest.raises(TypeError) as expected:
        json.dumps(value)
    with pytest.raises(TypeError) as raised:
        ascii_text(value)
    assert str(raised.value) == str(expected.value)
    # a refused value leaves nothing behind: the next text is whole
    assert utf8_text({"after": [1]}) == '{"after": [1]}'
