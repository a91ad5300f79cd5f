"""A yes/no JSON Schema check, compiled once from the schema into closures: the fast path for valid profiles.

Most profiles that ``migbake validate`` sees are valid, and importing jsonschema (referencing, rpds,
attrs) costs more than everything else that a cold ``validate`` does. This module answers only "is the
instance valid?" for the keywords our schemas use, with the semantics of jsonschema's Draft 2020-12
validator as ``migbake.profile.schema`` configures it (a float is never an integer; ``True`` is not ``1``; a
``pattern`` has ECMA-262's meaning, ``migbake.document.patterns``: ``$`` is the end of the string).
When the answer is no, ``migbake.profile.schema`` asks jsonschema for the exact errors, so every message
comes from one place. A schema keyword this module does not know is refused when compiling, never
skipped: a test compiles every schema that migbake ships and compares both paths over the corpora.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Any

from migbake.document.patterns import compile_pattern

ShapeCheck = Callable[[Any], bool]

# keywords that only annotate: they never change whether an instance is valid
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "default", "examples",
                          "deprecated", "readOnly", "writeOnly", "format", "$defs", "definitions"})
_TYPES: dict[str, Callable[[Any], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


class UnsupportedSchema(ValueError):
    """The schema uses a keyword (or a form of one) that this checker does not implement."""


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON Schema means it: booleans are not numbers, 1 equals 1.0, containers compare deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def compile_schema(schema: Any) -> ShapeCheck:
    """``schema`` (a parsed JSON Schema document) as a function instance -> valid?"""
    return _Compiler(schema).compile(schema)


class _Compiler:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.refs: dict[str, ShapeCheck] = {}

    def compile(self, schema: Any) -> ShapeCheck:
        if schema is True:
            return lambda _v: True
        if schema is False:
            return lambda _v: False
        if not isinstance(schema, dict):
            raise UnsupportedSchema(f"a schema must be an object or a boolean, not {schema!r}")
        checks = [self._keyword(key, value, schema) for key, value in schema.items()
                  if key not in _ANNOTATIONS and not key.startswith("x-")]
        return _all_of([c for c in checks if c is not None])

    def _ref(self, ref: str) -> ShapeCheck:
        if not ref.startswith("#/"):
            raise UnsupportedSchema(f"only local $ref is supported, not {ref!r}")
        if ref not in self.refs:
            target: Any = self.root
            for token in ref[2:].split("/"):
                target = target[token.replace("~1", "/").replace("~0", "~")]
            self.refs[ref] = lambda _v: True  # a placeholder while compiling a recursive reference
            compiled = self.compile(target)
            self.refs[ref] = compiled
        table = self.refs
        return lambda v: table[ref](v)

    def _keyword(self, key: str, value: Any, schema: dict[str, Any]) -> ShapeCheck | None:
        if key == "$ref":
            return self._ref(value)
        if key == "type":
            names = value if isinstance(value, list) else [value]
            tests = [_TYPES[n] for n in names]
            return tests[0] if len(tests) == 1 else lambda v: any(t(v) for t in tests)
        if key == "enum":
            if value and all(type(e) is str for e in value):  # json_equal with a string: the very same str
                strings = frozenset(value)
                return lambda v: type(v) is str and v in strings
            return lambda v: any(json_equal(v, e) for e in value)
        if key == "const":
            return lambda v: json_equal(v, value)
        if key == "pattern":
            search = compile_pattern(value).search
            return lambda v: not isinstance(v, str) or search(v) is not None
        if key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            return _bound(key, value)
        if key in ("minLength", "maxLength"):
            return _size(str, key == "minLength", value)
        if key in ("minItems", "maxItems"):
            return _size(list, key == "minItems", value)
        if key in ("minProperties", "maxProperties"):
            return _size(dict, key == "minProperties", value)
        if key == "uniqueItems":
            if not value:
                return None
            return lambda v: not isinstance(v, list) or all(
                not json_equal(v[i], v[j]) for i in range(len(v)) for j in range(i + 1, len(v)))
        if key == "required":
            return lambda v: not isinstance(v, dict) or all(k in v for k in value)
        if key == "properties":
            return _properties({name: self.compile(sub) for name, sub in value.items()})
        if key == "patternProperties":
            by_pattern = [(compile_pattern(p).search, self.compile(sub)) for p, sub in value.items()]
            return lambda v: not isinstance(v, dict) or all(
                c(item) for k, item in v.items() for s, c in by_pattern if s(k))
        if key == "additionalProperties":
            known = set(schema.get("properties", {}))
            pats = [compile_pattern(p).search for p in schema.get("patternProperties", {})]
            if value is False and not pats:  # the usual case: only the named properties
                return lambda v: not isinstance(v, dict) or known.issuperset(v)
            extra = self.compile(value)
            return lambda v: not isinstance(v, dict) or all(
                extra(item) for k, item in v.items() if k not in known and not any(s(k) for s in pats))
        if key == "propertyNames":
            name_ok = self.compile(value)
            return lambda v: not isinstance(v, dict) or all(name_ok(k) for k in v)
        if key == "items":
            if not isinstance(value, (dict, bool)):
                raise UnsupportedSchema("items must be a schema (Draft 2020-12)")
            each = self.compile(value)
            start = len(schema.get("prefixItems", []))
            if not start:
                return _every_item(each)
            return lambda v: not isinstance(v, list) or all(each(item) for item in v[start:])
        if key == "prefixItems":
            firsts = [self.compile(sub) for sub in value]
            return lambda v: not isinstance(v, list) or all(c(item) for c, item in zip(firsts, v))
        if key in ("allOf", "anyOf", "oneOf"):
            branches = [self.compile(sub) for sub in value]
            if key == "allOf":
                return lambda v: all(b(v) for b in branches)
            if key == "anyOf":
                return lambda v: any(b(v) for b in branches)
            return lambda v: sum(1 for b in branches if b(v)) == 1
        if key == "not":
            negated = self.compile(value)
            return lambda v: not negated(v)
        if key == "if":
            cond = self.compile(value)
            then = self.compile(schema.get("then", True))
            other = self.compile(schema.get("else", True))
            return lambda v: then(v) if cond(v) else other(v)
        if key in ("then", "else"):
            return None  # compiled with "if"
        raise UnsupportedSchema(f"schema keyword {key!r} is not supported by the fast check")


def _all_of(checks: list[ShapeCheck]) -> ShapeCheck:
    """Every one of ``checks`` (a loop: calling through ``all()`` and a generator costs more than most checks)."""
    if not checks:
        return lambda _v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)

    def check(v: Any) -> bool:
        for c in checks:  # noqa: SIM110 - a loop is quicker than all() over a generator
            if not c(v):
                return False
        return True

    return check


def _properties(props: dict[str, ShapeCheck]) -> ShapeCheck:
    def check(v: Any) -> bool:
        if isinstance(v, dict):
            for k, item in v.items():
                c = props.get(k)
                if c is not None and not c(item):
                    return False
        return True

    return check


def _every_item(each: ShapeCheck) -> ShapeCheck:
    def check(v: Any) -> bool:
        if isinstance(v, list):
            for item in v:
                if not each(item):
                    return False
        return True

    return check


def _bound(key: str, limit: float) -> ShapeCheck:
    def is_number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if key == "minimum":
        return lambda v: not is_number(v) or v >= limit
    if key == "maximum":
        return lambda v: not is_number(v) or v <= limit
    if key == "exclusiveMinimum":
        return lambda v: not is_number(v) or v > limit
    return lambda v: not is_number(v) or v < limit


def _size(kind: type[Sized], at_least: bool, limit: int) -> ShapeCheck:
    if at_least:
        return lambda v: not isinstance(v, kind) or len(v) >= limit
    return lambda v: not isinstance(v, kind) or len(v) <= limit
