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

from migbake.document.loader import LoadedProfile, join_pointer
from migbake.document.schema_messages import catalog_schema_problems
from migbake.problems import CatalogError, Problem

MAX_CATALOG_BYTES = 16 * 1024 * 1024

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


def catalog_problems(data: bytes, file: str) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The catalog data in ``data`` (the bytes of ``file``) when valid, and every problem found."""
    if len(data) > MAX_CATALOG_BYTES:
        return None, [Problem(file, 1, 1, "", f"the file is {len(data)} bytes; a catalog file may be at most "
                              f"{MAX_CATALOG_BYTES}", "file-too-large")]
    try:
        text = data.decode("utf-8")
        parsed = json.loads(text, object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError as e:
        return None, [Problem(file, 1, 1, "", f"byte {e.start} is not UTF-8; save the file as UTF-8", "not-utf8")]
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
    if not problems:
        problems = list(_rule_problems(loaded))
    problems.sort(key=Problem.sort_key)
    return (parsed if not problems else None), problems


def read_catalog_file(path: Path) -> dict[str, Any]:
    """The data of the catalog file at ``path``; CatalogError with every problem when it is not valid."""
    try:
        data = path.read_bytes()
    except OSError as e:
        what = "it is a directory" if path.is_dir() else (e.strerror or str(e))
        raise CatalogError(str(path), [Problem(str(path), 1, 1, "", f"cannot read the catalog file: {what}",
                                               "unreadable")]) from e
    parsed, problems = catalog_problems(data, str(path))
    if parsed is None:
        raise CatalogError(str(path), problems)
    return parsed
