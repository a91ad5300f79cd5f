"""Placements are predicted once per ``gpus`` entry (and layout name, issue 40) per render (issue 39): the render
plan keeps them (``RenderPlan.expect.placements``, ``named_placements``) and every reader — the DRA device names
and expectations, Slurm's explicit device lines, restore.sh's ``-lgi`` comparison — takes them from there, never
predicting again. The count is of ``placements_of``, the one way to a prediction, which remembers its answers
(``gpu.placement.per_model``): a second asking is counted whether or not it is answered from memory."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from pathlib import Path

import pytest
from support import IMAGES, REPO, cli

from migbake.gpu import driverplacement
from migbake.render.tree import render
from migbake.rules.validate import check_file

PROFILES = [*(image / "node-profile.yaml" for image in IMAGES),
            REPO / "tests/cases/valid/allocation-dra/node-profile.yaml",
            REPO / "tests/cases/valid/slurm-two-models-explicit/node-profile.yaml"]


def _predictions(profile_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """How often the render predicted placements, and how many entries have MIG on (times the layout names)."""
    checked = check_file(profile_path)
    assert checked.profile is not None
    calls = []
    real = driverplacement.placements_of

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(driverplacement, "placements_of", counting)
    render(checked.profile)
    return len(calls), sum(g.mig_enabled for g in checked.profile.gpus) * max(1, len(checked.profile.layout_names))


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.parent.name)
def test_each_entry_is_predicted_once_per_render(profile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls, entries = _predictions(profile, monkeypatch)
    assert calls == entries


def test_a_reader_that_predicts_again_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The count sees a second prediction: what the test above would catch if a reader stopped taking the plan's."""
    from migbake.kubernetes import dra
    profile = REPO / "tests/cases/valid/allocation-dra/node-profile.yaml"
    original = dra.dra_expectations
    import migbake.render.plan as plan
    monkeypatch.setattr(plan, "dra_expectations",
                        lambda p, entries: original(p, dra.dra_entries(p, dra.placements(p))))
    calls, entries = _predictions(profile, monkeypatch)
    assert calls == 2 * entries


# Every reader outside the plan takes the plan's placements as a required argument: none predicts again
# when it is left out (issue 39: show's DRA names and Slurm lines, preflight --resource-slices' verdict)
READERS = [("migbake.kubernetes.dra", "dra_entries", "placed"),
           ("migbake.kubernetes.dra", "dra_expectations", "entries"),
           ("migbake.kubernetes.dra", "dra_report", "entries"),
           ("migbake.slurm.gres", "slurm_nodes", "placed"),
           ("migbake.slurm.gres", "slurm_plan", "placed"),
           ("migbake.slurm.gres", "show_lines", "nodes"),
           ("migbake.node.draverdict", "slice_checks", "expected")]


def _optional(function: Callable[..., object], parameter: str) -> bool:
    """Whether ``function`` can be called without ``parameter`` (and would then have to predict itself)."""
    return inspect.signature(function).parameters[parameter].default is not inspect.Parameter.empty


@pytest.mark.parametrize(("module", "name", "parameter"), READERS, ids=[r[1] for r in READERS])
def test_the_readers_require_the_plans_placements(module: str, name: str, parameter: str) -> None:
    assert not _optional(getattr(importlib.import_module(module), name), parameter)


def test_an_optional_placement_argument_is_caught() -> None:
    def old_dra_entries(profile: object, placed: object = None) -> object:  # the signature before issue 39
        return profile, placed
    assert _optional(old_dra_entries, "placed")


def _counted(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    """``migbake ARGS``: how often it predicted placements, and what it printed."""
    calls = []
    real = driverplacement.placements_of

    def counting(*a: object, **kw: object) -> object:
        calls.append(a)
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(driverplacement, "placements_of", counting)
    rc, out, err = cli(*args)
    assert rc in (0, 1), (out, err)
    return len(calls), out


@pytest.mark.parametrize("case", ["allocation-dra", "slurm-two-models-explicit"])
def test_show_predicts_each_entry_once(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = REPO / "tests/cases/valid" / case / "node-profile.yaml"
    checked = check_file(path)
    assert checked.profile is not None
    calls, out = _counted(monkeypatch, "show", str(path))
    assert calls == sum(g.mig_enabled for g in checked.profile.gpus)
    assert ("Kubernetes DRA" in out) if case == "allocation-dra" else ("Slurm GRES" in out)


def test_preflight_resource_slices_predicts_each_entry_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("version: 1\nname: h200-dra\nkubernetes: {allocation: dra}\ngpu_count: 2\ngpus:\n"
                       "  - model: NVIDIA H200\n    mig: {layout: {3g.71gb: 1, 1g.18gb: 2}}\n")
    calls, out = _counted(monkeypatch, "preflight", str(profile), "--resource-slices",
                          str(REPO / "tests/fixtures/dra/h200-ready.json"), "--node", "h200-node", "--json")
    assert calls == 1
    assert "publishes exactly the plan's devices on 2 GPU(s)" in out
