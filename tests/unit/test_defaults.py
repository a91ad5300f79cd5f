"""Defaults live in one place: a profile that writes out every default the schema declares builds the same
typed node profile as one that leaves them all out, so the schema's ``default``s and the model's agree."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from support import REPO

from migbake.profile.nodeprofile import build_profile

SCHEMA = json.loads((REPO / "schemas" / "node-profile.schema.json").read_text(encoding="utf-8"))
MINIMAL: dict[str, Any] = {"version": 1, "name": "defaults", "gpus": [{"model": "h200-141gb"}]}


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        resolved: dict[str, Any] = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
        return resolved
    return node


def _defaults(node: dict[str, Any], path: tuple[str, ...]) -> list[tuple[tuple[str, ...], object]]:
    """(key path, default) of every property below ``node`` that declares a default."""
    found = []
    for key, child in _resolve(node).get("properties", {}).items():
        child = _resolve(child)
        if "default" in child:
            found.append(((*path, key), child["default"]))
        if "properties" in child:
            found += _defaults(child, (*path, key))
    return found


TOP = _defaults(SCHEMA, ())
GPU = _defaults(SCHEMA["properties"]["gpus"]["items"], ())
CONSUMER = _defaults(SCHEMA["properties"]["consumers"]["items"], ()) if "consumers" in SCHEMA["properties"] else []


# a section whose schema requires a key is written out with it (restore.layout needs ``from``)
SECTIONS: dict[tuple[str, ...], dict[str, Any]] = {("restore", "layout"): {"from": ["file"]}}


def _set(data: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    for key in path[:-1]:
        data = data.setdefault(key, {})
    data[path[-1]] = copy.deepcopy(value)


def test_the_schema_declares_defaults() -> None:
    assert len(TOP) > 15 and GPU


@pytest.mark.parametrize(("path", "default"), TOP, ids=[".".join(p) for p, _ in TOP])
def test_a_written_out_default_changes_nothing(path: tuple[str, ...], default: object) -> None:
    # a key of a section is compared with the section written out empty (a section's presence may matter:
    # ``slurm: {}`` asks for the Slurm files)
    bare = copy.deepcopy(MINIMAL)
    for i in range(1, len(path)):
        _set(bare, path[:i], copy.deepcopy(SECTIONS.get(path[:i], {})))
    data = copy.deepcopy(bare)
    _set(data, path, default)
    assert build_profile(data) == build_profile(bare)


@pytest.mark.parametrize(("path", "default"), GPU, ids=[".".join(p) for p, _ in GPU])
def test_a_written_out_gpu_default_changes_nothing(path: tuple[str, ...], default: object) -> None:
    data = copy.deepcopy(MINIMAL)
    _set(data["gpus"][0], path, default)
    assert build_profile(data) == build_profile(MINIMAL)


@pytest.mark.parametrize(("path", "default"), CONSUMER, ids=[".".join(p) for p, _ in CONSUMER])
def test_a_written_out_consumer_default_changes_nothing(path: tuple[str, ...], default: object) -> None:
    bare = dict(copy.deepcopy(MINIMAL), consumers=[{"unit": "slurmd.service"}])
    data = copy.deepcopy(bare)
    _set(data["consumers"][0], path, default)
    assert build_profile(data) == build_profile(bare)


def test_the_check_notices_a_default_that_disagrees() -> None:
    data = copy.deepcopy(MINIMAL)
    _set(data, ("restore", "timeout_seconds"), 481)
    assert build_profile(data) != build_profile(MINIMAL)
