"""A catalog file cannot make `validate` or `layouts` run without bound, and suggests only what validates.

A schema-valid catalog file may describe a GPU of 32 or 64 memory slices, or one with dozens of
profiles. The maximal-layout search behind `layouts` and the suggestions walked every placement (2^64
of them) and ignored compute slices (it suggested layouts that `validate` then rejected); the exact
placement search of `fit` had no bound either. Each test here runs the real command on such a file
within a wall-clock limit far above what the bounded search needs, and pastes every suggestion back.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import REPO

from migbake.gpu.catalog import CatalogChoice, GpuModel
from migbake.gpu.maximal import maximal_search
from migbake.gpu.placement import fit
from migbake.gpu.search import MAX_SEARCH_STEPS
from migbake.packagedata import catalog_text

PROFILE = "version: 1\nname: t\ngpu_count: 1\ngpus:\n  - model: {model}\n    mig: {{layout: {layout}}}\n"
# far above what the bounded searches take (about a second on a shared core), far below "without bound"
WALL_S = 30


def _gpu(key: str, slices: int, profiles: list[dict[str, Any]]) -> dict[str, Any]:
    gpu = copy.deepcopy(next(g for g in json.loads(catalog_text())["gpus"] if g["key"] == "h200-141gb"))
    gpu.update(key=key, names=[key.upper()], aliases=[], alias_notes={}, nvidia_smi_names=[],
               pci_device_ids=[{"id": "0x2FF010DE", "pci_ids_name": None}], memory_gb_nominal=slices,
               total_memory_slices=slices, total_compute_slices=8, max_gpu_instances=slices, profiles=profiles)
    gpu.pop("worked_examples", None)
    return gpu


def _profile(name: str, compute: int, size: int, starts: list[int], max_count: int) -> dict[str, Any]:
    return {"name": name, "gi_slices_g": compute, "compute_slices": compute, "memory_slices": size,
            "max_count": max_count, "placements": [{"start": s, "size": size} for s in starts]}


def wide(slices: int) -> dict[str, Any]:
    """A GPU of ``slices`` memory slices and 8 compute slices: Cg.Cgb for C = 1, 2, 4, 8, anywhere aligned."""
    return _gpu(f"x{slices}", slices, [_profile(f"{c}g.{c}gb", c, c, list(range(0, slices, c)), slices // c)
                                       for c in (1, 2, 4, 8)])


def many() -> dict[str, Any]:
    """64 memory slices and 40 one-slice profiles: more mixes of 8 instances than any search should walk."""
    return _gpu("many", 64, [_profile(f"1g.{n}gb", 1, 1, list(range(64)), 64) for n in range(1, 41)])


def pinned() -> dict[str, Any]:
    """Six free one-slice profiles and two that only start at slice 0: one layout of all eight is an exact-cover
    puzzle no placement solves, with C(64, 6) ways to place the free ones first."""
    free = [_profile(f"1g.{n}gb", 1, 1, list(range(64)), 1) for n in range(1, 7)]
    return _gpu("pinned", 64, [*free, _profile("1g.98gb", 1, 1, [0], 1), _profile("1g.99gb", 1, 1, [0], 1)])


def _write(tmp_path: Path, *gpus: dict[str, Any]) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"gpus": list(gpus)}, indent=1))
    return path


def _migbake(*args: str, cwd: Path) -> tuple[int, str, str]:
    """``migbake ARGS`` in a process that is killed (a failure) past WALL_S."""
    ran = subprocess.run([sys.executable, "-m", "migbake", *args], cwd=cwd, capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO / "generator"), "NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
                         timeout=WALL_S, check=False)
    return ran.returncode, ran.stdout, ran.stderr


def _model(catalog: Path, key: str) -> GpuModel:
    found = CatalogChoice(catalog).load().find(key)
    assert found is not None
    return found


def _validates(tmp_path: Path, catalog: Path, model: str, layout: str) -> tuple[int, str]:
    profile = tmp_path / "p.yaml"
    profile.write_text(PROFILE.format(model=model, layout=layout))
    code, out, err = _migbake("--catalog", str(catalog), "validate", str(profile), cwd=tmp_path)
    return code, out + err


@pytest.mark.parametrize("slices", [32, 64])
def test_a_wide_gpu_validates_quickly_and_every_suggestion_validates(slices: int, tmp_path: Path) -> None:
    catalog = _write(tmp_path, wide(slices))
    for layout in ("{1g.1gb: 9}", "{4g.4gb: 2, 1g.1gb: 1}", f"{{1g.1gb: {slices - 1}, 2g.2gb: 1}}"):
        code, said = _validates(tmp_path, catalog, f"x{slices}", layout)
        assert code == 1 and "[compute-slices]" in said, said
        offered = re.search(r"layouts that fit: (.*?) \(`migbake layouts", said)
        assert offered and "lists every maximal layout" in said, said
        for suggestion in re.findall(r"\{[^{}]*\}", offered.group(1)):
            assert _validates(tmp_path, catalog, f"x{slices}", suggestion)[0] == 0, (layout, suggestion)


@pytest.mark.parametrize("slices", [32, 64])
def test_layouts_of_a_wide_gpu_are_complete_and_each_one_validates(slices: int, tmp_path: Path) -> None:
    catalog = _write(tmp_path, wide(slices))
    code, out, err = _migbake("--catalog", str(catalog), "layouts", f"x{slices}", "--json", cwd=tmp_path)
    assert code == 0, err
    data = json.loads(out)
    assert data["complete"] is True and data["count"] == 10  # the partitions of 8 compute slices into 1, 2, 4, 8
    model = _model(catalog, f"x{slices}")
    for entry in data["layouts"]:
        assert entry["compute_slices"] <= 8 and fit(model, entry["mig-devices"]).ok, entry


def test_a_gpu_with_too_many_mixes_says_the_list_is_cut(tmp_path: Path) -> None:
    catalog = _write(tmp_path, many())
    code, out, err = _migbake("--catalog", str(catalog), "layouts", "many", cwd=tmp_path)
    assert code == 0, err
    assert f"the search stopped at its bound of {MAX_SEARCH_STEPS:,} steps" in out and "not all there are" in out
    code, said = _validates(tmp_path, catalog, "many", "{1g.1gb: 5, 1g.2gb: 5}")
    assert code == 1 and "[compute-slices]" in said, said
    assert f"the search for layouts stopped at its bound of {MAX_SEARCH_STEPS:,} steps: nearer ones may exist" in said
    for suggestion in re.findall(r"\{[^{}]*\}", said.split("layouts that fit: ", 1)[1].split(" (the search", 1)[0]):
        assert _validates(tmp_path, catalog, "many", suggestion)[0] == 0, suggestion
    search = maximal_search(_model(catalog, "many"))
    assert not search.complete and search.layouts  # what it found, each proven maximal
    assert search == maximal_search(_model(catalog, "many"))  # counted steps: the same cut every time


def test_a_layout_the_search_cannot_decide_is_refused_with_the_reason(tmp_path: Path) -> None:
    catalog = _write(tmp_path, pinned())
    layout = "{1g.1gb: 1, 1g.2gb: 1, 1g.3gb: 1, 1g.4gb: 1, 1g.5gb: 1, 1g.6gb: 1, 1g.98gb: 1, 1g.99gb: 1}"
    code, said = _validates(tmp_path, catalog, "pinned", layout)
    assert code == 1 and "[placement]" in said, said
    assert ("cannot tell whether the instances can all be placed: the exact placement search stopped at its "
            f"bound of {MAX_SEARCH_STEPS:,} steps") in said
    assert fit(_model(catalog, "pinned"), json.loads(re.sub(r"([\w.]+):", r'"\1":', layout))).undecided
    # one pinned profile less: decided at once, and it fits
    assert _validates(tmp_path, catalog, "pinned", layout.replace(", 1g.99gb: 1", ""))[0] == 0


def test_the_packaged_catalog_is_never_cut() -> None:
    from migbake.gpu.catalog import load_catalog
    from migbake.gpu.search import Budget

    for model in load_catalog().models:
        budget = Budget()
        assert maximal_search(model, budget=budget).complete
        assert budget.steps - budget.left < MAX_SEARCH_STEPS // 20, model.key  # a wide margin
