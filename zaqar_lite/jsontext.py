"""JSON texts written by json's C encoder, built once per process.

``json.dumps`` and ``JSONEncoder.encode`` build a new C encoder for every value
they write (``JSONEncoder.iterencode``: about 100 Python instructions, more than
json spends in C on a small document). These write the same text from encoders
built at import: :func:`ascii_text` is ``json.dumps(value)``, :func:`utf8_text`
``json.dumps(value, ensure_ascii=False)``; :func:`stored_json` reads such a text
back as ``json.loads`` does, in one call of json's C scanner. The writers make no circular-reference check:
the values written are built from parsed JSON and stored values, which hold no
cycle (a cycle would still fail, by recursion).
"""

from __future__ import annotations

import json
import json.encoder
import json.scanner
from collections.abc import Callable
from typing import Any


def _writer(ensure_ascii: bool) -> Callable[[Any], str]:
    """Return a function writing ``json.dumps(value, ensure_ascii=ensure_ascii)``'s text."""
    encoder = json.JSONEncoder(ensure_ascii=ensure_ascii)
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without json's C accelerator
        return encoder.encode
    write = make(None, encoder.default,
                 json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring,
                 None, encoder.key_separator, encoder.item_separator, False, False, True)
    join = "".join

    def text(value: Any) -> str:
        return join(write(value, 0))

    return text


#: ``json.dumps(value)``: the stores' texts
ascii_text = _writer(ensure_ascii=True)
#: ``json.dumps(value, ensure_ascii=False)``: the API's answers (falcon's default text)
utf8_text = _writer(ensure_ascii=False)


#: json's C scanner of one value, called directly by :func:`stored_json`
_scan_value: Any = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # a decoder is its context


def stored_json(text: str) -> Any:
    """Return the value of a JSON text a store holds, as ``json.loads`` returns it.

    ``json.loads`` runs three Python functions around json's C scanner for every
    text (about 100 bytecode instructions: a claim of 10 decodes at least 10
    bodies); the texts the drivers store are ``json.dumps``'s, one value with
    nothing around it, which the scanner reads in one call. Anything else
    (whitespace around the value, a text that is not JSON) is left to
    ``json.loads``, which decides as it always did.
    """
    try:
        value, end = _scan_value(text, 0)
    except StopIteration:
        return json.loads(text)  # not a JSON value where it starts: json.loads says why
    return value if end == len(text) else json.loads(text)
