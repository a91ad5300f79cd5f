"""The JSON Schema pass: a profile's shape, checked against schemas/node-profile.schema.json.

The schema is the single authority on shape. A valid profile is recognised by a check compiled from
the schema (``migbake.fastschema``); only a profile whose shape is wrong loads jsonschema
(``migbake.schema_messages``) to say exactly what is wrong and what is allowed.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from migbake.fastschema import Check, compile_schema
from migbake.problems import Problem
from migbake.profile import LoadedProfile
from migbake.resources import catalog_schema_path, schema_path


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The node-profile JSON Schema, parsed."""
    data: dict[str, Any] = json.loads(schema_path().read_text(encoding="utf-8"))
    return data


@lru_cache(maxsize=1)
def load_catalog_schema() -> dict[str, Any]:
    """The GPU catalog JSON Schema, parsed."""
    data: dict[str, Any] = json.loads(catalog_schema_path().read_text(encoding="utf-8"))
    return data


@lru_cache(maxsize=1)
def _fast_check() -> Check:
    return compile_schema(load_schema())


def schema_problems(loaded: LoadedProfile) -> list[Problem]:
    """Every shape problem of a loaded profile (empty list: the shape is right)."""
    if _fast_check()(loaded.data):
        return []
    from migbake.schema_messages import shape_problems  # jsonschema: only for a profile that needs it

    return shape_problems(loaded)
