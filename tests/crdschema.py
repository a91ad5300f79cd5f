"""A Kubernetes CRD version's openAPIV3Schema as a judge (tests/fixtures/crds/, see ORIGIN.md there).

jsonschema checks what JSON Schema can say (types, required, enums, patterns, lengths); the API server would
also prune fields the structural schema does not declare, silently, so ``unknown_fields`` names them. The
``x-kubernetes-validations`` CEL rules are not evaluated here (no CEL library in the test environment):
the tests check the rules that bear on migbake's output by hand, each named where it is checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

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
