"""Each derivation runs once per profile per render (issue 39): ``make_plan`` computes it and passes it on.

cProfile counts the calls of every public function of the deriving modules while ``render`` turns one
example image's profile into its output tree (a call through any alias or import counts: the profiler
sees the function's code). Each is declared below: once per profile (``PER_PROFILE``), or per layout name
(``PER_LAYOUT``: each name's placements, issue 40), once per ``gpus``
entry (``PER_ENTRY``, per layout name too where named layouts give another layout), or not a derivation
of its own (``NOT_COUNTED``, with why). A function of those modules that runs and is declared nowhere fails
the test too, so a new derivation has to say how often it may run.

Before issue 39, rendering the four example images called ``kubernetes.kubelet.node_labels_flag`` 5 times
(again through ``nodeconfig_labels``), ``kubernetes.managed.platform_models`` 8 (twice per verdict),
``kubernetes.resources.per_gpu`` 12 (twice per entry: the kinds' totals and verify's groups) and
``kubernetes.kubelet.kubeadm_command`` 4 (twice on a kubeadm node): now 3, 3, 6 and 2, one per profile or
entry that has them (``python tests/test_derivations_once.py`` prints every count).
"""

from __future__ import annotations

import cProfile
import importlib
import inspect
import pstats
from collections.abc import Iterator
from pathlib import Path
from types import CodeType

import pytest
from support import IMAGES

from migbake.profile.nodeprofile import NodeProfile
from migbake.render.tree import render
from migbake.rules.validate import check_file

MODULES = ("migparted.config", "kubernetes.resources", "kubernetes.dra", "kubernetes.kubelet", "kubernetes.managed",
           "kubernetes.labels", "slurm.gres", "node.expectations", "node.drivergates", "gpu.driverplacement",
           "gpu.presence", "profile.firstboot")

PER_PROFILE = frozenset({
    "migparted.config.uses_device_filter", "migparted.config.mig_parted_config", "migparted.config.config_yaml",
    "migparted.config.filter_notes",
    "kubernetes.resources.entry_resources", "kubernetes.resources.node_kinds", "kubernetes.resources.verify_groups",
    "kubernetes.dra.dra_expectations",
    "kubernetes.dra.claim_templates_yaml", "kubernetes.dra.advertised", "kubernetes.dra.naming",
    "kubernetes.dra.claim_templates", "kubernetes.dra.whole_gpu_models", "kubernetes.dra.whole_instance_profiles",
    "kubernetes.kubelet.node_labels_flag", "kubernetes.kubelet.kubelet_binary",
    "kubernetes.kubelet.unit_checked", "kubernetes.kubelet.kubeadm_command", "kubernetes.kubelet.kubeadm_exec_start",
    "kubernetes.kubelet.nodeconfig_labels", "kubernetes.kubelet.nodeadm_dropin", "kubernetes.kubelet.nodeconfig_part",
    "kubernetes.kubelet.eks_family", "kubernetes.kubelet.layout_variable",
    "kubernetes.managed.platform_models", "kubernetes.managed.verdicts", "kubernetes.managed.entries_of",
    "kubernetes.labels.unselectable_config", "kubernetes.labels.config_label_problem",
    "kubernetes.labels.label_value_problem",
    "slurm.gres.slurm_applies", "slurm.gres.slurm_plan",
    "node.expectations.expectations", "node.drivergates.driver_gate",
    "gpu.presence.gpu_presence", "gpu.presence.sysfs_device_ids",
    "profile.firstboot.commands", "profile.firstboot.held_units", "profile.firstboot.base_image_check",
})
# once per profile and layout name (issue 40: each name's placements, for Slurm and DRA per name)
PER_LAYOUT = frozenset({"kubernetes.dra.placements", "gpu.driverplacement.entry_placements",
                        "kubernetes.dra.dra_entries", "slurm.gres.slurm_nodes"})
# once per gpus entry (and per layout name, where mig.layouts names more layouts)
PER_ENTRY = frozenset({"kubernetes.resources.per_gpu", "node.expectations.layout_text"})
# once per entry with MIG on (and layout name): the placement predictor and its steps (tests/test_placements_once.py)
PER_MIG_ENTRY = frozenset({"gpu.driverplacement.predict", "gpu.driverplacement.placements_of",
                           "gpu.driverplacement.replay", "gpu.driverplacement.creation_order",
                           "gpu.driverplacement.migparted_orderings"})
NOT_COUNTED = {
    "migparted.config.entry_pci_ids": "reads one field: the entry's pci_device_ids, else its model's",
    "kubernetes.resources.resource_name": "per_gpu's step, once per MIG profile of a layout",
    "kubernetes.managed.managed_data": "the packaged table, read once per process (lru_cache)",
    "kubernetes.managed.Verdict.native": "a verdict's property (whether it has no reason)",
    "slurm.gres.SlurmNode.total": "a Slurm node's property (the sum of its counts)",
    "slurm.gres.SlurmNode.gres": "a Slurm node's Gres= words, once per node",
    "slurm.gres.SlurmPlan.folder": "a Slurm plan's property: where its files go (slurm/ or slurm/NAME/)",
    "slurm.gres.mig_type": "per MIG profile: Slurm's type name of it",
    "slurm.gres.nvml_gib": "per MIG profile: its memory as NVML rounds it",
    "gpu.driverplacement.driver_choice": "predict's step, per instance",
    "kubernetes.kubelet.labels_apply": "a predicate on two settings (node_labels, kubelet.present)",
    "kubernetes.dra.DraDevice.suffix": "a DRA device's name after gpu-<minor>-, per device and use",
    "kubernetes.dra.DraDevice.legacy_suffix": "the same in v25.8.1's naming, per device and use",
    "kubernetes.dra.canonical_profile": "suffix's step: the profile as a device name writes it",
    "kubernetes.dra.claim_name": "per claim template: its name",
    "kubernetes.dra.selector": "per claim template: its CEL expression",
    "slurm.gres.gi_id": "per explicit gres.conf line: the GPU instance id of a placement",
}


def _functions() -> dict[tuple[str, int, str], str]:
    """Every public function (and method, property) of ``MODULES``, keyed as cProfile keys them."""
    def codes(owner: object, prefix: str) -> Iterator[tuple[str, CodeType]]:
        for name, obj in vars(owner).items():
            fn = inspect.unwrap(obj.fget if isinstance(obj, property) else obj)  # lru_cache: the function it calls
            if name.startswith("_") or getattr(fn, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(fn):
                yield prefix + name, fn.__code__
            elif inspect.isclass(fn) and owner is module:
                yield from codes(fn, f"{prefix}{name}.")

    found = {}
    for short in MODULES:
        module = importlib.import_module(f"migbake.{short}")
        for name, code in codes(module, f"{short}."):
            found[(code.co_filename, code.co_firstlineno, code.co_name)] = name
    return found


FUNCTIONS = _functions()


def counts(profile: NodeProfile) -> dict[str, int]:
    """How often ``render(profile)`` called each public function of ``MODULES`` (those it called), with nothing
    answered from memory (``gpu.placement.per_model`` off: each asking computes, and is counted)."""
    from migbake.gpu import placement

    profiler = cProfile.Profile()
    placement.REMEMBER = False
    try:
        profiler.enable()
        render(profile)
        profiler.disable()
    finally:
        placement.REMEMBER = True
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    return {FUNCTIONS[key]: calls for key, (_, calls, *_rest) in stats.items() if key in FUNCTIONS}


def too_often(called: dict[str, int], profile: NodeProfile) -> list[str]:
    """What ran more often than declared, or is declared nowhere."""
    entries = len(profile.gpus) * (1 + len(profile.layout_names))
    layouts = max(1, len(profile.layout_names))
    mig_entries = sum(g.mig_enabled for g in profile.gpus) * layouts
    bad = []
    for name, n in sorted(called.items()):
        most = (1 if name in PER_PROFILE else layouts if name in PER_LAYOUT else entries if name in PER_ENTRY
                else mig_entries if name in PER_MIG_ENTRY else None)
        if most is None and name not in NOT_COUNTED:
            bad.append(f"{name}: {n} calls, declared nowhere")
        elif most is not None and n > most:
            bad.append(f"{name}: {n} calls (at most {most})")
    return bad


def _profile(path: Path) -> NodeProfile:
    checked = check_file(path)
    assert checked.profile is not None, [p.format() for p in checked.problems]
    return checked.profile


@pytest.mark.parametrize("image", IMAGES, ids=lambda p: p.name)
def test_each_derivation_runs_once_per_profile(image: Path) -> None:
    profile = _profile(image / "node-profile.yaml")
    called = counts(profile)
    assert too_often(called, profile) == []
    assert called["kubernetes.dra.placements"] == max(1, len(profile.layout_names))  # it counts
    assert called["node.expectations.expectations"] == 1


# named layouts under DRA with Slurm files (issue 40): each name's placements, DRA devices and Slurm nodes
NAMED = """\
version: 1
name: named
kubernetes: {allocation: dra}
gpu_count: 2
device_filter: auto
gpus:
  - model: h100-80gb
    mig: {layouts: {small: {1g.10gb: 7}, big: {3g.40gb: 1, 1g.10gb: 1}}}
  - model: h200-141gb
    mig: {layouts: {small: {1g.18gb: 7}, big: {7g.141gb: 1}}}
restore:
  layout: {from: [file], default: small}
slurm: {autodetect: false}
"""


def test_named_layouts_derive_once_per_name(tmp_path: Path) -> None:
    path = tmp_path / "node-profile.yaml"
    path.write_text(NAMED)
    profile = _profile(path)
    called = counts(profile)
    assert too_often(called, profile) == []
    assert called["kubernetes.dra.dra_entries"] == called["slurm.gres.slurm_nodes"] == 2
    assert called["gpu.driverplacement.predict"] == 4  # two entries, two names


def test_the_declarations_name_functions_that_exist() -> None:
    declared = PER_PROFILE | PER_LAYOUT | PER_ENTRY | PER_MIG_ENTRY | set(NOT_COUNTED)
    assert sorted(declared - set(FUNCTIONS.values())) == []


def test_a_second_call_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the test above reports when a reader derives again instead of taking what make_plan passed."""
    import migbake.render.plan as plan
    profile = _profile(IMAGES[0] / "node-profile.yaml")
    real = plan.expectations

    def twice(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plan, "expectations", twice)
    entries = len(profile.gpus)
    assert too_often(counts(profile), profile) == ["node.expectations.expectations: 2 calls (at most 1)",
                                                   f"node.expectations.layout_text: {2 * entries} calls "
                                                   f"(at most {entries})"]
    assert too_often({"kubernetes.kubelet.new_derivation": 1}, profile) == [
        "kubernetes.kubelet.new_derivation: 1 calls, declared nowhere"]


def test_a_reader_that_derives_again_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """verify's groups computing each entry's resources again, as before issue 39, is a second per_gpu call."""
    import migbake.render.plan as plan
    profile = _profile(IMAGES[0] / "node-profile.yaml")
    real = plan.verify_groups
    monkeypatch.setattr(plan, "verify_groups", lambda p, with_filter=None, resources=None: real(p, with_filter))
    entries = len(profile.gpus)
    assert too_often(counts(profile), profile) == ["kubernetes.resources.entry_resources: 2 calls (at most 1)",
                                                   f"kubernetes.resources.per_gpu: {2 * entries} calls "
                                                   f"(at most {entries})"]


if __name__ == "__main__":  # python tests/test_derivations_once.py: the calls over rendering every example image
    total: dict[str, int] = {}
    for image in IMAGES:
        for name, n in counts(_profile(image / "node-profile.yaml")).items():
            total[name] = total.get(name, 0) + n
    print(f"{len(IMAGES)} profiles")
    for name, n in sorted(total.items()):
        print(f"{n:4d}  {name}")
