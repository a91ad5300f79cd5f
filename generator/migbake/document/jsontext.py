"""JSON text as Python's ``json`` writes it (``ensure_ascii=False``), faster for long strings: Ignition configs and
the long strings of YAML flow scalars (a gzipped file's base64, a ``data:`` URL).

``json``'s string encoder (C, ``encode_basestring``) looks at every character alone: some 15 us a KiB, most
of the time of an Ignition config, whose files are ``data:`` URLs. An ASCII string with no character to
escape is found by ``bytes.translate`` (in C, over the whole string) and written between quotes as it is.
``pretty`` writes ``json.dumps(data, indent=2, ensure_ascii=False)``'s text without its pure-Python
generators. tests/test_jsontext.py compares both with ``json`` on generated data.
"""

from __future__ import annotations

import json
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Any

from migbake.document.patterns import ascii_beyond

# what a JSON string holds as it is: printable ASCII but the quote and the backslash
_AS_IS = bytes(b for b in range(0x20, 0x7F) if b not in b'"\\')
_SHORT = 64  # below this, json's encoder is as fast as looking first


def string(text: str) -> str:
    """``text`` as a JSON string: ``json.dumps(text, ensure_ascii=False)``."""
    return _long(text) if len(text) >= _SHORT else encode_basestring(text)


@lru_cache(maxsize=128)  # a file's data: URL is written in two Ignition configs of a render
def _long(text: str) -> str:
    if ascii_beyond(text, _AS_IS) is False:
        return f'"{text}"'
    return encode_basestring(text)


def pretty(data: Any) -> str:
    """``json.dumps(data, indent=2, ensure_ascii=False)`` (dicts with string keys, lists, strings, ints, bools and
    None; other data, floats among them, by ``json`` itself)."""
    out: list[str] = []
    try:
        _value(data, "\n", out)
    except _Other:
        return json.dumps(data, indent=2, ensure_ascii=False)
    return "".join(out)


class _Other(Exception):
    """A value ``pretty`` leaves to ``json``."""


def _value(value: Any, newline: str, out: list[str]) -> None:
    """``value`` appended to ``out``; ``newline``: a line break and the indentation of ``value``'s own line."""
    if isinstance(value, str):
        out.append(string(value))
    elif value is None or value is True or value is False:
        out.append("null" if value is None else "true" if value else "false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, (dict, list, tuple)):
        if not value:
            out.append("{}" if isinstance(value, dict) else "[]")
            return
        inner = newline + "  "
        if isinstance(value, dict):
            sep = "{" + inner
            for key, item in value.items():
                if not isinstance(key, str):
                    raise _Other
                out.append(sep + string(key) + ": ")
                _value(item, inner, out)
                sep = "," + inner
            out.append(newline + "}")
        else:
            sep = "[" + inner
            for item in value:
                out.append(sep)
                _value(item, inner, out)
                sep = "," + inner
            out.append(newline + "]")
    else:
        raise _Other
