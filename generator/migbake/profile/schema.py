"""The JSON Schema pass: a profile's shape, checked against schemas/node-profile.schema.json.

The schema is the single authority on shape. A valid profile is recognised by a check compiled from
the schema (``migbake.profile.fastschema``); only a profile whose shape is wrong loads jsonschema
(``migbake.document.schema_messages``) to say exactly what is wrong and what is allowed.
"""

from __future__ import annotations

from functools import lru_cache

from migbake.document.loader import LoadedProfile
from migbake.problems import Problem
from migbake.profile.fastschema import ShapeCheck, compile_schema
from migbake.resources import load_schema


@lru_cache(maxsize=1)
def _fast_check() -> ShapeCheck:
    return compile_schema(load_schema())


def schema_problems(loaded: LoadedProfile) -> list[Problem]:
    """Every shape problem of a loaded profile (empty list: the shape is right)."""
    if _fast_check()(loaded.data):
        return []
    from migbake.document.schema_messages import shape_problems  # jsonschema: only for a profile that needs it

    return shape_problems(loaded)
