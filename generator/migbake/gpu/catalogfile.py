"""A GPU catalog file given with --catalog / MIGBAKE_CATALOG: read it, check it, say where it is wrong.

The file has the packaged catalog's own format (``data/mig-catalog.json``): an object whose ``gpus``
list holds models shaped like the packaged ones (and optionally ``non_mig_gpus``). It is checked
against ``schemas/mig-catalog.schema.json`` and a few rules the schema cannot say, and every problem
is reported as FILE:LINE:COL, like a profile's. JSON is a subset of YAML, so PyYAML's composer gives
the position of every key and value; ``json`` itself stays the authority on what is valid JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from migbake.document.files import read_regular
from migbake.document.loader import LoadedProfile, join_pointer
from migbake.document.patterns import CONTROL
from migbake.document.schema_messages import catalog_schema_problems
from migbake.document.shape_limits import json_shape
from migbake.problems import CatalogError, Problem, UnreadableCatalog

MAX_CATALOG_BYTES = 16 * 1024 * 1024
MAX_CATALOG_DEPTH = 32  # the packaged catalog nests 7 deep
MAX_NUMBER_DIGITS = 64  # slice counts and memory sizes; Python's int() refuses 4,300 digits with a ValueError

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader


class _Duplicate(ValueError):
    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(key)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


def _positions(node: yaml.Node, pointer: str, loaded: LoadedProfile) -> None:
    loaded.value_pos[pointer] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            child = join_pointer(pointer, str(key_node.value))
            loaded.key_pos.setdefault(child, (key_node.start_mark.line + 1, key_node.start_mark.column + 1))
            _positions(value_node, child, loaded)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _positions(item, join_pointer(pointer, i), loaded)


def _located(text: str, file: str, data: object) -> LoadedProfile:
    loaded = LoadedProfile(file=file, text=text, data=data)
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:  # valid JSON that PyYAML reads differently (tabs, ...): problems fall back to 1:1
        return loaded
    if root is not None:
        _positions(root, "", loaded)
    return loaded


def _rule_problems(loaded: LoadedProfile) -> Iterator[Problem]:
    """Ids are unique within the file; every placement lies inside the GPU's memory slices."""
    data = loaded.data if isinstance(loaded.data, dict) else {}
    seen: dict[str, int] = {}
    for i, gpu in enumerate(data.get("gpus", [])):
        ptr = f"/gpus/{i}"
        key = gpu.get("key")
        if key in seen:
            yield loaded.problem(f"{ptr}/key", f"id {key!r} is also /gpus/{seen[key]}: each model once",
                                 "catalog-duplicate-id")
        seen.setdefault(key, i)
        total = gpu.get("total_memory_slices", 0)
        for j, profile in enumerate(gpu.get("profiles", [])):
            for k, p in enumerate(profile.get("placements", [])):
                if p["start"] + p["size"] > total:
                    yield loaded.problem(f"{ptr}/profiles/{j}/placements/{k}", f"memory slices {p['start']} to "
                                         f"{p['start'] + p['size'] - 1} are beyond the GPU's {total} "
                                         "(total_memory_slices)", "catalog-placement")


def _shape_limits(text: str, file: str) -> list[Problem]:
    """Nesting deeper than MAX_CATALOG_DEPTH or a number longer than MAX_NUMBER_DIGITS, found before parsing."""
    limit = json_shape(text, max_depth=MAX_CATALOG_DEPTH, max_digits=MAX_NUMBER_DIGITS)
    if limit is None:
        return []
    if limit.kind == "depth":
        return [Problem(file, limit.line, limit.col, "", f"nesting deeper than {MAX_CATALOG_DEPTH} levels",
                        "catalog-too-deep")]
    return [Problem(file, limit.line, limit.col, "", f"a number of {limit.length} characters; a catalog number has "
                    f"at most {MAX_NUMBER_DIGITS}", "number-too-large")]


def _control_problems(loaded: LoadedProfile, value: object, pointer: str = "") -> Iterator[Problem]:
    """Every key or string with a control character, wherever the schema leaves strings free."""
    if isinstance(value, dict):
        for k, v in value.items():
            child = join_pointer(pointer, k)
            if CONTROL.search(k):
                yield loaded.problem(child, f"the key {k!r} holds a control character", "catalog-text", key=True)
            yield from _control_problems(loaded, v, child)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _control_problems(loaded, v, join_pointer(pointer, i))
    elif isinstance(value, str) and CONTROL.search(value):
        yield loaded.problem(pointer, f"{value[:60]!r} holds a control character: catalog text is printed into "
                             "comments of the generated unit and scripts", "catalog-text")


def catalog_problems(data: bytes, file: str) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The catalog data in ``data`` (the bytes of ``file``) when valid, and every problem found."""
    if len(data) > MAX_CATALOG_BYTES:
        return None, [Problem(file, 1, 1, "", f"the file is more than {MAX_CATALOG_BYTES} bytes, the most a catalog "
                              "file may have", "file-too-large")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, [Problem(file, 1, 1, "", f"byte {e.start} is not UTF-8; save the file as UTF-8", "not-utf8")]
    limits = _shape_limits(text, file)
    if limits:
        return None, limits
    try:
        parsed = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        return None, [Problem(file, e.lineno, e.colno, "", f"not valid JSON: {e.msg}", "catalog-json")]
    except _Duplicate as e:
        loaded = _located(text, file, None)
        where = [p for p in loaded.key_pos if p.rsplit("/", 1)[-1] == e.key]
        line, col = loaded.key_pos[where[0]] if where else (1, 1)
        return None, [Problem(file, line, col, where[0] if where else "", f"duplicate key {e.key!r}",
                              "duplicate-key")]
    loaded = _located(text, file, parsed)
    problems = catalog_schema_problems(loaded)
    found = {(p.pointer, p.rule) for p in problems}
    problems += [p for p in _control_problems(loaded, parsed) if not any(f[0] == p.pointer for f in found)]
    if not problems:
        problems = list(_rule_problems(loaded))
    problems.sort(key=Problem.sort_key)
    return (parsed if not problems else None), problems


def read_catalog_file(path: Path) -> dict[str, Any]:
    """The data of the catalog file at ``path``; CatalogError with every problem when it is not valid."""
    try:
        data = read_regular(path, MAX_CATALOG_BYTES)
    except OSError as e:
        what = "it is a directory" if path.is_dir() else (e.strerror or str(e))
        raise UnreadableCatalog(str(path), [Problem(str(path), 1, 1, "", f"cannot read the catalog file: {what}",
                                                    "unreadable")]) from e
    parsed, problems = catalog_problems(data, str(path))
    if parsed is None:
        raise CatalogError(str(path), problems)
    return parsed
