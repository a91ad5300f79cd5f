"""Every output target reads only the render plan: run on a plan whose profile hides its GPUs and derivations.

tests/test_architecture.py holds the targets' imports; this holds what they read at run time. The plan
is made as usual, then its ``profile`` is replaced by a view that answers only the profile's own settings
(name, paths, units, timeouts, labels, consumers): a target that reaches for the GPUs, their catalog
models or one of the profile's derivations raises, and the rendered bytes must equal a normal render.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from support import CASES_ROOT, IMAGES

from migbake.render.plan import make_plan
from migbake.render.tree import TARGETS, render_plan
from migbake.rules.validate import check_file

# what the NodeProfile offers that only make_plan may use: the GPUs and the catalog behind them, and
# the derivations of the profile (the plan has each as a field)
HIDDEN = frozenset({"gpus", "models", "source_sha256", "all_consumers", "held_units", "base_pieces",
                    "base_pieces_at", "consumers_text", "device_filter", "driver"})

PROFILES = [*(p / "node-profile.yaml" for p in IMAGES),
            *sorted((CASES_ROOT / "valid").glob("*/node-profile.yaml"))]


class SettingsOnly:
    """A NodeProfile that answers its settings and refuses what only the plan may derive."""

    def __init__(self, profile: Any) -> None:
        self._profile = profile

    def __getattr__(self, name: str) -> Any:
        if name in HIDDEN:
            raise AssertionError(f"a target read profile.{name}: make it a field of the render plan")
        return getattr(self._profile, name)


def _plan(path: Path) -> Any:
    checked = check_file(path)
    assert checked.profile is not None, [p.format() for p in checked.problems]
    return make_plan(checked.profile)


@pytest.mark.parametrize("path", PROFILES, ids=[p.parent.name for p in PROFILES])
def test_the_targets_render_from_the_plan_alone(path: Path) -> None:
    plan = _plan(path)
    hidden = dataclasses.replace(plan, profile=SettingsOnly(plan.profile))
    assert [(a.path, a.data, a.mode) for a in render_plan(hidden)] == \
        [(a.path, a.data, a.mode) for a in render_plan(plan)]


def test_a_target_that_reads_the_gpus_is_caught() -> None:
    plan = _plan(PROFILES[0])
    hidden = dataclasses.replace(plan, profile=SettingsOnly(plan.profile))
    with pytest.raises(AssertionError, match=r"profile\.models"):
        _ = hidden.profile.models[0].key  # what the old Slurm writer did


def test_each_target_is_listed_once_and_writes_its_own_folder() -> None:
    names = [name for name, _ in TARGETS]
    assert len(names) == len(set(names))
    plan = _plan(IMAGES[0] / "node-profile.yaml")
    folders = {a.path.split("/")[0] for a in render_plan(plan)}
    assert folders == {"rootfs", "cloud-init", "packer", "scripts", "ansible", "kickstart", "butane"} | (
        {"slurm"} if plan.slurm else set()) | ({"bottlerocket"} if plan.bottlerocket else set()) | (
        {"karpenter"} if plan.eks == "eks-al2023" else set()) | (  # Karpenter for eks-al2023, Cluster API for kubeadm
        {"cluster-api"} if plan.profile.kubelet.layout == "kubeadm" and plan.profile.kubelet.present else set())


def test_the_plan_places_every_instance_once() -> None:
    # the placements the DRA names and the explicit Slurm lines read: one per instance of the layout
    for path in PROFILES:
        plan = _plan(path)
        for placed in plan.placements:
            group = dict(plan.config["mig-configs"][plan.profile.restore.config_name][placed.entry].get(
                "mig-devices") or {})
            assert sorted(i.profile for i in placed.instances) == sorted(
                name for name, n in group.items() for _ in range(n)), (path, placed)
            assert all(0 <= i.start < placed.memory_slices for i in placed.instances)
