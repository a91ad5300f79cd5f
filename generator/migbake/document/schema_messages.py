"""Why a profile's shape is wrong: jsonschema's errors turned into problems a person can act on.

The exact key or value, what is allowed, and "did you mean" for unknown keys and for values outside an enum. For
``oneOf``/``anyOf`` the branch the author most likely meant (``jsonschema.exceptions.best_match``), not the whole tree.
Loaded only when the fast check of ``migbake.profile.schema`` has found the shape wrong: importing jsonschema's
validators costs more than everything else a cold ``migbake validate`` of a valid profile does (docs/speed.md).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match

from migbake.document.loader import LoadedProfile, join_pointer
from migbake.document.patterns import matches
from migbake.packagedata import load_catalog_schema, load_schema
from migbake.problems import Problem


def _is_integer(checker: object, instance: object) -> bool:
    # JSON Schema counts 8.0 as an integer; a YAML 8.0 is a float, and the rules (counts, indices)
    # would skip it as "not an int" and let e.g. `1g.18gb: 8.0` through unchecked
    return isinstance(instance, int) and not isinstance(instance, bool)


def _pattern(validator: Draft202012Validator, pattern: str, instance: object,
             schema: object) -> Iterator[ValidationError]:
    # python-jsonschema's own `pattern` calls re.search, where `$` matches before a final newline:
    # ECMA-262's `$` (JSON Schema's) is the end of the string (migbake.document.patterns)
    if isinstance(instance, str) and not matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, validators={"pattern": _pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    validator: Draft202012Validator = _Validator(load_schema())
    return validator


@lru_cache(maxsize=1)
def _catalog_validator() -> Draft202012Validator:
    validator: Draft202012Validator = _Validator(load_catalog_schema())
    return validator


def _pointer(path: Any) -> str:
    out = ""
    for token in path:
        out = join_pointer(out, token)
    return out


_TYPE_NAMES: tuple[tuple[type, str], ...] = (  # bool before int: True is an int to Python
    (bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"), (list, "a list"),
    (dict, "a mapping"))


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _TYPE_NAMES if isinstance(value, kind)), type(value).__name__)


def _short_repr(value: object) -> str:
    text = json.dumps(value) if isinstance(value, bool) or value is None else repr(value)  # as YAML writes them
    return text if len(text) <= 60 else text[:57] + "..."


def _allowed(schema: dict[str, Any]) -> str:
    if "x-allowed" in schema:
        return str(schema["x-allowed"])
    if "enum" in schema:
        return ", ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    return str(schema.get("description", ""))


# a MIG profile name with its dots, case or "gb" off: 1g10gb, 1G.10GB, 1g.10, 1c3g40gb
_LOOSE_PROFILE = re.compile(r"(?:(\d+)c\.?)?(\d+)g\.?(\d+)(?:gb?)?([+-].*)?", re.IGNORECASE)


def _did_you_mean(value: object, schema: dict[str, Any]) -> str:
    """``; did you mean 'kubelet.service'?`` (or ``'1g.10gb'``) when the obvious fix makes the value valid; for a
    value outside an enum, its nearest allowed value (``kubadm``: ``'kubeadm'``)."""
    enum = schema.get("enum")
    if isinstance(value, str) and isinstance(enum, list):
        allowed = {str(e).lower(): str(e) for e in enum if isinstance(e, str)}
        close = difflib.get_close_matches(value.strip().lower(), list(allowed), n=1, cutoff=0.6)
        return f"; did you mean {allowed[close[0]]!r}?" if close else ""
    pattern = schema.get("pattern")
    if not isinstance(value, str) or not isinstance(pattern, str):
        return ""
    if pattern.endswith(r"\.service$"):
        fixed = value.strip() + ".service"
    elif (m := _LOOSE_PROFILE.fullmatch(value.strip())) and "gb" in pattern:
        c, g, gb, rest = m.groups()
        fixed = f"{c + 'c.' if c else ''}{g}g.{gb}gb{(rest or '').lower()}"
    else:
        return ""
    return f"; did you mean {fixed!r}?" if fixed != value and _Validator(schema).is_valid(fixed) else ""


# NVIDIA's mig-parted config keys (format v1) that a node profile names otherwise
# (NVIDIA/mig-parted:api/spec/v1/spec.go@v0.15.0: mig-enabled, mig-devices)
_MIG_PARTED_KEYS = {"mig-devices": "layout", "mig-enabled": "enabled"}


@lru_cache(maxsize=1)
def _key_paths() -> dict[str, tuple[str, ...]]:
    """Every key of the profile schema and where it stands (``kubelet.layout``, ``gpus[].mig.layout``)."""
    found: dict[str, list[str]] = {}

    def walk(node: object, path: str) -> None:
        if not isinstance(node, dict):
            return
        for key, sub in node.get("properties", {}).items():
            here = f"{path}.{key}" if path else key
            found.setdefault(key, []).append(here)
            walk(sub, here)
        walk(node.get("items"), path + "[]")

    walk(load_schema(), "")
    return {k: tuple(v) for k, v in found.items()}


def _dotted(pointer: str) -> str:
    """``/gpus/0/mig`` as the schema paths write it: ``gpus[].mig``."""
    return ".".join("[]" if p.isdigit() else p for p in pointer.split("/")[1:]).replace(".[]", "[]")


def _unknown_key_hint(key: str, pointer: str, known: list[str]) -> str:
    """For an unknown key with no near name here: mig-parted's name of ours, or the section the key belongs to."""
    ours = _MIG_PARTED_KEYS.get(key)
    if ours in known:
        return f"; did you mean {ours!r}? (mig-parted's {key} is a profile's {ours})"
    here = _dotted(pointer)
    elsewhere = [p for p in _key_paths().get(key, ()) if p.rpartition(".")[0] != here]
    if not elsewhere:
        return ""
    section = here.split(".")[0].split("[")[0]
    # the path whose top-level section reads most like this one (kubernetes -> kubelet), then the shortest
    best = max(elsewhere, key=lambda p: (difflib.SequenceMatcher(None, section, p.split(".")[0]).ratio(), -len(p)))
    parent = best.rpartition(".")[0]
    if here and parent.startswith(here + "."):  # a level deeper: `layout` beside `mig` (gpus[].mig.layout)
        return f"; {key} belongs under {parent[len(here) + 1:]}: did you mean {best[len(here) + 1:]}?"
    return f"; {key} is a key of {parent}: did you mean {best}?"


def _quote_it(loaded: LoadedProfile, pointer: str, value: object, want: str) -> str:
    """``: YAML reads the unquoted 0x20B210DE as an integer; quote it: "0x20B210DE"`` where a string was wanted."""
    text = loaded.plain.get(pointer)
    if want != "string" or not text or isinstance(value, (dict, list)) or len(text) > 60:
        return ""
    return f": YAML reads the unquoted {text} as {_type_name(value)}; quote it: {json.dumps(text)}"


def _problems_for(error: ValidationError, loaded: LoadedProfile) -> Iterator[Problem]:
    pointer = _pointer(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    kind = str(error.validator)
    value = error.instance
    if kind in ("oneOf", "anyOf") and error.context:
        # the branch whose error goes deepest is the one the author most likely meant
        # (a branch that failed only on type or const is a branch the author did not mean)
        meant = [e for e in error.context if e.validator not in ("type", "const")]
        best = best_match(meant or error.context)
        # every error of that branch, not only the first (devices: [64, -1] has two)
        branch = list(best.relative_schema_path)[:1]
        for e in [e for e in error.context if list(e.relative_schema_path)[:1] == branch] or [best]:
            yield from _problems_for(e, loaded)
        return
    if kind == "additionalProperties" and isinstance(value, dict):
        known = sorted(schema.get("properties", {}))
        for key in value:
            if key in known:
                continue
            child = join_pointer(pointer, key)
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else _unknown_key_hint(str(key), pointer, known)
            allowed = ", ".join(known) if known else "none"
            yield loaded.problem(child, f"unknown key {key!r}{hint} (allowed here: {allowed})",
                                 "unknown-key", key=True)
        return
    if kind == "propertyNames":
        sub = error.validator_value if isinstance(error.validator_value, dict) else {}
        bad = [k for k in (value if isinstance(value, dict) else {}) if not _Validator(sub).is_valid(k)]
        for key in bad:
            yield loaded.problem(join_pointer(pointer, key), f"{key!r} is not a valid name here: expected "
                                 f"{_allowed(sub)}", "schema-name", key=True)
        return
    if kind == "required":
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = [k for k in required if isinstance(value, dict) and k not in value]
        for key in missing:
            yield loaded.problem(pointer, f"missing required key {key!r}", "missing-key")
        return
    if kind == "type":
        expected = error.validator_value
        want = " or ".join(expected) if isinstance(expected, list) else str(expected)
        want = {"object": "mapping", "array": "list"}.get(want, want)
        yield loaded.problem(pointer, f"{_short_repr(value)} is {_type_name(value)}; expected {want}"
                             + (f" ({schema['description'].rstrip('.')})" if schema.get("description")
                                and isinstance(value, (dict, list)) else "")
                             + _quote_it(loaded, pointer, value, want), "schema-type")
        return
    if kind in ("pattern", "enum", "const"):
        yield loaded.problem(pointer, f"{_short_repr(value)} is not allowed here; expected {_allowed(schema)}"
                             f"{_did_you_mean(value, schema)}", f"schema-{kind}")
        return
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        bound = error.validator_value
        word = "at least" if "inimum" in kind else "at most"
        yield loaded.problem(pointer, f"{_short_repr(value)} is out of range; must be {word} {bound}",
                             "schema-range")
        return
    if kind in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
        word = "at least" if kind.startswith("min") else "at most"
        unit = "characters" if "Length" in kind else ("items" if "Items" in kind else "entries")
        yield loaded.problem(pointer, f"must have {word} {error.validator_value} {unit}", "schema-size")
        return
    if kind == "uniqueItems":
        yield loaded.problem(pointer, f"{_short_repr(value)} repeats an item; each may appear once",
                             "schema-unique")
        return
    yield loaded.problem(pointer, error.message, f"schema-{kind}")


def catalog_schema_problems(loaded: LoadedProfile) -> list[Problem]:
    """Every shape problem of a loaded GPU catalog file, in the same words as a profile's."""
    return [p for e in _catalog_validator().iter_errors(loaded.data) for p in _problems_for(e, loaded)]


def shape_problems(loaded: LoadedProfile) -> list[Problem]:
    """Every shape problem of a loaded profile (empty list: the shape is right)."""
    errors = _validator().iter_errors(loaded.data)
    return [p for e in errors for p in _problems_for(e, loaded)
            if not any(p.pointer == u or p.pointer.startswith(u + "/") for u in loaded.unreadable)]
