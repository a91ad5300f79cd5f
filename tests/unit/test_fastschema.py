"""The fast yes/no schema check agrees with jsonschema (as migbake configures it) on every corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import IMAGES, REPO

from migbake.document.loader import load_profile_bytes
from migbake.document.schema_messages import _Validator, _validator
from migbake.packagedata import load_schema
from migbake.profile.fastschema import UnsupportedSchema, compile_schema
from migbake.profile.schema import _fast_check

CASES = sorted((REPO / "tests" / "cases").glob("*/*/node-profile.yaml"))
PROFILES = [p / "node-profile.yaml" for p in IMAGES] + CASES


def agree(data: Any) -> None:
    """Both paths give the same verdict on ``data`` (a loaded profile)."""
    assert _fast_check()(data) == _validator().is_valid(data), data


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_agrees_on_every_corpus_profile(path: Path) -> None:
    loaded, _ = load_profile_bytes(path.read_bytes(), str(path))
    agree(loaded.data)


def test_the_corpus_has_both_verdicts() -> None:
    verdicts = {_fast_check()(load_profile_bytes(p.read_bytes(), str(p))[0].data) for p in PROFILES}
    assert verdicts == {True, False}


KEYWORD_CASES: list[tuple[dict[str, Any], list[Any]]] = [
    ({"type": "integer"}, [1, 1.0, True, "1", None]),
    ({"type": ["string", "null"]}, ["a", None, 0]),
    ({"enum": [1, "a", None]}, [1, True, 1.0, "a", None, False]),
    ({"const": False}, [False, 0, None]),
    ({"const": [1, {"a": True}]}, [[1, {"a": True}], [True, {"a": 1}], [1.0, {"a": True}]]),
    ({"pattern": "^0x[0-9A-F]{8}$"}, ["0x233010DE", "0x233010de", " 0x233010DE", 5]),
    ({"pattern": "b"}, ["abc", "xyz"]),
    ({"minimum": 1, "maximum": 3}, [0, 1, 3, 4, 2.5, True, "9"]),
    ({"exclusiveMinimum": 0, "exclusiveMaximum": 2}, [0, 1, 2]),
    ({"minLength": 2, "maxLength": 3}, ["a", "ab", "abcd", "ää", 12]),
    ({"minItems": 1, "maxItems": 2, "uniqueItems": True}, [[], [1], [1, 1], [1, True], [1, 2, 3], "x"]),
    ({"minProperties": 1, "maxProperties": 1}, [{}, {"a": 1}, {"a": 1, "b": 2}]),
    ({"required": ["a"], "properties": {"a": {"type": "string"}}, "additionalProperties": False},
     [{"a": "x"}, {"a": 1}, {}, {"a": "x", "b": 1}, []]),
    ({"patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
     [{"x-a": 1, "b": "s"}, {"x-a": "s"}, {"b": 2}]),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, [{"ab": 1}, {"Ab": 1}]),
    ({"items": {"type": "integer"}}, [[1, 2], [1, "2"], []]),
    ({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}, [["a", 1], [1, 1], ["a", "b"]]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, [1, -1, 1.5, "x"]),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, [1, "a", None]),
    ({"allOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 2]),
    ({"not": {"type": "null"}}, [None, 0]),
    ({"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"type": "string"}}, [4, 6, "a", None]),
    ({"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}, [{"a": 1}, {"a": "1"}]),
]


@pytest.mark.parametrize(("schema", "instances"), KEYWORD_CASES, ids=lambda v: str(v)[:40])
def test_each_keyword_agrees_with_jsonschema(schema: dict[str, Any], instances: list[Any]) -> None:
    fast = compile_schema(schema)
    slow = _Validator(schema)
    verdicts = [(fast(i), slow.is_valid(i)) for i in instances]
    assert all(f == s for f, s in verdicts), list(zip(instances, verdicts))
    assert {s for _, s in verdicts} == {True, False}, "each case must show both verdicts"


def test_an_unknown_keyword_is_refused_not_skipped() -> None:
    with pytest.raises(UnsupportedSchema, match="dependentRequired"):
        compile_schema({"dependentRequired": {"a": ["b"]}})
    with pytest.raises(UnsupportedSchema, match="only local"):
        compile_schema({"$ref": "https://example.com/s.json"})


def test_the_shipped_schema_compiles() -> None:
    assert compile_schema(load_schema())({"version": 1}) is False
