"""The JSON Schema pass: a profile's shape, checked against schemas/node-profile.schema.json.

The schema is the single authority on shape. A valid profile is recognised by a check compiled from
the schema (``migbake.profile.fastschema``); only a profile whose shape is wrong loads jsonschema
(``migbake.document.schema_messages``) to say exactly what is wrong and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from functools import lru_cache

from migbake.document.loader import LoadedProfile
from migbake.gpu.catalog import PACKAGED, CatalogChoice
from migbake.packagedata import load_schema
from migbake.problems import Problem
from migbake.profile.fastschema import ShapeCheck, compile_schema


@lru_cache(maxsize=1)
def _fast_check() -> ShapeCheck:
    return compile_schema(load_schema())


def shape_ok(data: object) -> bool:
    """Whether ``data`` has the schema's shape (the yes/no fast path: no message)."""
    return _fast_check()(data)


def schema_problems(loaded: LoadedProfile, catalog: CatalogChoice = PACKAGED) -> list[Problem]:
    """Every shape problem of a loaded profile (empty list: the shape is right).

    ``catalog`` names the profiles of an entry's GPU model where the schema refuses a layout name.
    """
    if _fast_check()(loaded.data):
        return []
    from migbake.document.schema_messages import shape_problems  # jsonschema: only for a profile that needs it

    return [_with_model_names(p, loaded, catalog) for p in shape_problems(loaded)]


_LAYOUT = re.compile(r"/gpus/(\d+)/mig/layout")
_REFUSED = re.compile(r"'([^'\\]{1,40})' is not .*", re.S)  # the name the schema refused starts its message
_GENERIC_NAMES = "a MIG profile name such as 1g.18gb, 1g.18gb+me or 1c.3g.71gb"  # the schema's x-allowed


def _with_model_names(problem: Problem, loaded: LoadedProfile, catalog: CatalogChoice) -> Problem:
    """A layout name the schema refuses: the names of that entry's own GPU model instead of the schema's examples."""
    m = _LAYOUT.fullmatch(problem.pointer)
    gpus = loaded.data.get("gpus") if isinstance(loaded.data, dict) else None
    if m is None or _GENERIC_NAMES not in problem.message or not isinstance(gpus, list) or int(m[1]) >= len(gpus):
        return problem
    entry = gpus[int(m[1])]
    name = entry.get("model") if isinstance(entry, dict) else None
    model = catalog.load().find(name) if isinstance(name, str) else None  # read only for a refused layout name
    if model is None or not model.profiles:
        return problem
    names = f"a MIG profile name of {model.display_name} ({model.key}): {', '.join(model.profile_names)}"
    message = problem.message.replace(_GENERIC_NAMES, names)
    refused = _REFUSED.fullmatch(message)
    if refused and "; did you mean" not in message:  # a typo the loose form does not undo: 4g.40gbb
        close = difflib.get_close_matches(refused[1], model.profile_names, n=1, cutoff=0.8)
        if close:
            message = f"{message}; did you mean {close[0]!r}?"
    return dataclasses.replace(problem, message=message)
