"""Whole-string patterns: the one helper behind every pattern migbake applies to untrusted text.

JSON Schema patterns are ECMA-262 regular expressions, where ``$`` means the end of the input and
``.`` matches no line terminator. Python's ``re`` (and python-jsonschema's ``pattern``, which calls
``re.search``) lets ``^x$`` match ``"x\\n"``: a trailing newline passes. ``compile_pattern`` turns a
pattern into a Python one with ECMA's meaning (``$`` -> ``\\Z``, ``.`` without line terminators,
``\\d``/``\\w`` ASCII only), so that the schema (through jsonschema and through the fast check), the
importer, catalog files, flags and the rules all read a pattern the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

# C0, DEL, C1 (with U+0085), the Unicode line and paragraph separators, BOM and non-characters:
# what ends a line, or is read as one, in at least one of the languages and tools we feed
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
# the same with a line feed allowed (a block of lines)
CONTROL_BUT_LF = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
# ECMA-262's LineTerminator: what "." does not match and what ends a line
_DOT = "[^\\n\\r\\u2028\\u2029]"
# a release version as NVIDIA's Kubernetes components tag theirs (v0.20.0, v25.12.0; the v optional): the device
# plugin's and the DRA driver's versions in a profile; groups: major, minor, patch
RELEASE_VERSION = re.compile(r"v?(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})")


def _translated(pattern: str) -> Iterator[str]:
    """The pieces of ``pattern`` with ECMA's ``$`` and ``.`` spelled for Python (classes and escapes kept)."""
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            yield pattern[i:i + 2]
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            yield c
        elif c == "[":
            in_class = True
            yield c
            if pattern.startswith("^]", i + 1) or pattern.startswith("]", i + 1):  # a literal ] first
                n = 2 if pattern[i + 1] == "^" else 1
                yield pattern[i + 1:i + 1 + n]
                i += n
        elif c == "$":
            yield "\\Z"
        elif c == ".":
            yield _DOT
        else:
            yield c
        i += 1


@cache
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` (ECMA-262 as JSON Schema means it, or a ``^...$`` of ours) compiled with ECMA's meaning.

    ``search`` then answers JSON Schema's "does the string match"; for an anchored pattern that is
    the whole string, never a prefix followed by a newline.
    """
    return re.compile("".join(_translated(pattern)), re.ASCII)


def matcher(pattern: str) -> Callable[[str], bool]:
    """A function text -> whether ``pattern`` matches it (ECMA semantics, see ``compile_pattern``)."""
    search = compile_pattern(pattern).search
    return lambda text: search(text) is not None


def matches(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches ``text`` (ECMA semantics, see ``compile_pattern``)."""
    return compile_pattern(pattern).search(text) is not None


def whole(pattern: str) -> re.Pattern[str]:
    """A pattern of ours (``^...$``) for ``.match``/``.search`` on untrusted text: it can only match it whole."""
    if not (pattern.startswith("^") and pattern.endswith("$")):
        raise ValueError(f"{pattern!r}: a whole-string pattern starts with ^ and ends with $")
    return compile_pattern(pattern)


def schema_patterns(schema: Any, where: str = "#") -> Iterator[tuple[str, str]]:
    """Every ``pattern`` of a JSON Schema document (and every patternProperties key): (location, pattern)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "pattern" and isinstance(value, str):
                yield where, value
            elif key == "patternProperties" and isinstance(value, dict):
                for p, sub in value.items():
                    yield f"{where}/patternProperties", p
                    yield from schema_patterns(sub, f"{where}/patternProperties/{p}")
            elif key not in ("enum", "const", "examples", "default"):
                yield from schema_patterns(value, f"{where}/{key}")
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            yield from schema_patterns(item, f"{where}/{i}")
