"""Shape limits of an untrusted JSON or YAML document, found before any parser builds it: depth and digits.

A parser that builds a document nested thousands deep recurses (RecursionError) or, in pure Python, takes
minutes; a number of thousands of digits costs quadratic time to convert (or a ValueError past Python's
limit). Both are refused first, by a scan that builds nothing: JSON's brackets outside strings, or
libyaml's (else PyYAML's) event stream, which stops at the first level too deep. Catalog files,
``--node-json`` and ``--cluster-policy`` go through here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import yaml

# a JSON string (escapes included) or one bracket: what the depth scan steps over or counts
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
# a plain YAML scalar that an int or float resolver (YAML 1.1: 0x.., 0o.., 1_000, 1:30, 1e3) would convert
_NUMBERISH = re.compile(r"[-+]?\.?[0-9][0-9a-fA-FxXoO_:.eE+-]*")

try:
    _EventLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _EventLoader = yaml.SafeLoader


@dataclass(frozen=True)
class ShapeLimit:
    """Where a document first breaks a limit: nesting deeper than allowed, or a number too long (``length``)."""

    kind: Literal["depth", "number"]
    line: int
    col: int
    length: int = 0


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _at(mark: Any) -> tuple[int, int]:
    """A PyYAML mark's line and column, from 1 (1:1 without one)."""
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def json_shape(text: str, *, max_depth: int, max_digits: int) -> ShapeLimit | None:
    """The first place JSON ``text`` nests deeper than ``max_depth`` or has a number longer than ``max_digits``."""
    depth = 0
    for m in _TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                return ShapeLimit("depth", *_position(text, m.start()))
        elif c in "]}":
            depth -= 1
    long_number = re.compile(rf'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]{{{max_digits},}}')
    for m in long_number.finditer(text):
        if not m.group().startswith('"'):
            return ShapeLimit("number", *_position(text, m.start()), length=len(m.group()))
    return None


def yaml_shape(text: str, *, max_depth: int, max_digits: int) -> ShapeLimit | None:
    """The same for YAML (JSON included), from the parser's events; None too when ``text`` is not YAML (the
    loader that reads it next says why)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_EventLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > max_depth:
                    return ShapeLimit("depth", *_at(event.start_mark))
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            elif (isinstance(event, yaml.ScalarEvent) and event.implicit[0] and len(event.value) > max_digits
                  and _NUMBERISH.fullmatch(event.value)):
                return ShapeLimit("number", *_at(event.start_mark), len(event.value))
    except yaml.MarkedYAMLError as err:  # libyaml stops at 1,000 flow levels itself, before any event is deeper
        if "nesting depth" in str(err.problem):
            return ShapeLimit("depth", *_at(err.problem_mark))
        return None
    except yaml.YAMLError:
        return None
    return None
