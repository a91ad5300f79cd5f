"""Placements are predicted once per ``gpus`` entry per render (issue 39): the render plan keeps them
(``RenderPlan.expect.placements``) and every reader — the DRA device names and expectations, Slurm's explicit
device lines, restore.sh's ``-lgi`` comparison — takes them from there, never predicting again."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import IMAGES, REPO

from migbake.gpu import driverplacement
from migbake.render.tree import render
from migbake.rules.validate import check_file

PROFILES = [*(image / "node-profile.yaml" for image in IMAGES),
            REPO / "tests/cases/valid/allocation-dra/node-profile.yaml",
            REPO / "tests/cases/valid/slurm-two-models-explicit/node-profile.yaml"]


def _predictions(profile_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """How often the render predicted placements, and how many entries have MIG on."""
    checked = check_file(profile_path)
    assert checked.profile is not None
    calls = []
    real = driverplacement.predict

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(driverplacement, "predict", counting)
    render(checked.profile)
    return len(calls), sum(g.mig_enabled for g in checked.profile.gpus)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.parent.name)
def test_each_entry_is_predicted_once_per_render(profile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls, entries = _predictions(profile, monkeypatch)
    assert calls == entries


def test_a_reader_that_predicts_again_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The count sees a second prediction: what the test above would catch if a reader stopped taking the plan's."""
    from migbake.kubernetes import dra
    profile = REPO / "tests/cases/valid/allocation-dra/node-profile.yaml"
    original = dra.dra_expectations
    monkeypatch.setattr(dra, "dra_expectations", lambda p, entries=None: original(p))
    import migbake.render.plan as plan
    monkeypatch.setattr(plan, "dra_expectations", lambda p, entries=None: original(p))
    calls, entries = _predictions(profile, monkeypatch)
    assert calls > entries
