"""A Kubernetes CRD version's openAPIV3Schema as a judge (tests/fixtures/crds/, see ORIGIN.md there).

jsonschema checks what JSON Schema can say (types, required, enums, patterns, lengths); the API server would
also prune fields the structural schema does not declare, silently, so ``unknown_fields`` names them. The
``x-kubernetes-validations`` CEL rules are evaluated by ``cel_errors`` with cel-python where a test asks for
it (the NodePool's); elsewhere the tests check the rules that bear on migbake's output by hand, each named where it
is checked.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

CRDS = Path(__file__).parent / "fixtures" / "crds"


def crd_schema(name: str) -> dict[str, Any]:
    """The fixture ``name`` (without .openapi.json)."""
    schema: dict[str, Any] = json.loads((CRDS / f"{name}.openapi.json").read_text(encoding="utf-8"))
    return schema


def schema_errors(doc: object, schema: dict[str, Any]) -> list[str]:
    """Every JSON-Schema error of ``doc``, as ``/path: message``."""
    validator = jsonschema.Draft7Validator(schema)
    return sorted("/" + "/".join(map(str, e.absolute_path)) + ": " + e.message for e in validator.iter_errors(doc))


def unknown_fields(doc: object, schema: dict[str, Any], path: str = "") -> list[str]:
    """Keys of ``doc`` the structural schema does not declare (the API server would drop them)."""
    found: list[str] = []
    if isinstance(doc, dict) and "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        for key, value in doc.items():
            sub = schema["properties"].get(key)
            if sub is None:
                found.append(f"{path}/{key}")
            else:
                found += unknown_fields(value, sub, f"{path}/{key}")
    elif isinstance(doc, dict) and isinstance(schema.get("additionalProperties"), dict):
        for key, value in doc.items():
            found += unknown_fields(value, schema["additionalProperties"], f"{path}/{key}")
    elif isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for i, value in enumerate(doc):
            found += unknown_fields(value, schema["items"], f"{path}/{i}")
    return found


def judge(doc: dict[str, Any], name: str) -> list[str]:
    """What the CRD's schema says against ``doc``: schema errors, then fields it would prune."""
    schema = crd_schema(name)
    return schema_errors(doc, schema) + [f"{p}: not a field of the schema" for p in unknown_fields(doc, schema)]


def _find(text: Any, pattern: Any) -> Any:
    """Kubernetes' CEL ``STRING.find(REGEX)``: the first match, or "" (kubernetes/kubernetes:staging/src/k8s.io/
    apiserver/pkg/cel/library/regex.go, ``find``: Go's ``regexp.FindString``; the CRDs' patterns read the same
    in Python's re)."""
    import celpy  # cel_errors has checked that it is there

    found = re.search(str(pattern), str(text))
    return celpy.celtypes.StringType(found.group(0) if found else "")


def _split(text: Any, separator: Any) -> Any:
    """Kubernetes' CEL ``STRING.split(SEPARATOR)``: the parts, as Go's ``strings.Split`` (cel-go's strings
    extension, which the API server enables: k8s.io/apiserver/pkg/cel/environment/base.go ``ext.Strings``)."""
    import celpy

    return celpy.celtypes.ListType([celpy.celtypes.StringType(p) for p in str(text).split(str(separator))])


def _rules(doc: object, schema: dict[str, Any], path: str = "") -> list[tuple[str, object, dict[str, str]]]:
    """Every (path, value, rule) of the schema's ``x-kubernetes-validations`` that applies to a value of ``doc``."""
    found = [(path or "/", doc, r) for r in schema.get("x-kubernetes-validations", ())]
    if isinstance(doc, dict) and "properties" in schema:
        for key, value in doc.items():
            if key in schema["properties"]:
                found += _rules(value, schema["properties"][key], f"{path}/{key}")
    elif isinstance(doc, dict) and isinstance(schema.get("additionalProperties"), dict):
        for key, value in doc.items():
            found += _rules(value, schema["additionalProperties"], f"{path}/{key}")
    elif isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for i, value in enumerate(doc):
            found += _rules(value, schema["items"], f"{path}/{i}")
    return found


def cel_errors(doc: dict[str, Any], name: str) -> tuple[list[str], int]:
    """The CRD's CEL rules ``doc`` breaks, as ``/path: message``, and how many rules were evaluated. A rule on
    ``oldSelf`` is a transition rule (an update's), not evaluated on a create; every other rule on a value
    present in ``doc`` is, and one cel-python cannot evaluate fails the test rather than pass unjudged."""
    try:
        import celpy
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("celpy (cel-python) is required in CI (pip install --group judges)")
        pytest.skip("celpy (cel-python) is not installed: the CRD's CEL rules cannot be judged")
    env = celpy.Environment()
    errors, evaluated = [], 0
    for path, value, rule in _rules(doc, crd_schema(name)):
        if "oldSelf" in rule["rule"]:
            continue
        program = env.program(env.compile(rule["rule"]), functions={"find": _find, "split": _split})
        result = program.evaluate({"self": celpy.json_to_cel(value)})
        if isinstance(result, Exception):
            raise AssertionError(f"{path}: cel-python could not evaluate {rule['rule']!r}: {result}")
        evaluated += 1
        if not bool(result):
            errors.append(f"{path}: {rule.get('message', rule['rule'])}")
    return errors, evaluated
