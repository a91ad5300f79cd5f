"""Every output target reads only the render plan: run on a plan whose profile hides its GPUs and derivations.

import-linter (pyproject's [tool.importlinter]) holds the targets' imports; this holds what they read at run time,
and the declarations of ``render.tree.TARGETS``: the folders each writes, when it applies, what it reads, their order.
The plan
is made as usual, then its ``profile`` is replaced by a view that answers only the profile's own settings
(name, paths, units, timeouts, labels, consumers): a target that reaches for the GPUs, their catalog
models or one of the profile's derivations raises, and the rendered bytes must equal a normal render.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path
from typing import Any

import pytest
from support import CASES_ROOT, IMAGES, REPO

from migbake.problems import RenderError
from migbake.profile.nodeprofile import NodeProfile
from migbake.render import tree
from migbake.render.artifact import Artifact
from migbake.render.plan import MimePart, RenderPlan, UserDataForms, make_plan
from migbake.render.tree import OUTPUT_NAMES, TARGETS, Target, check_order, render_plan
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
    plan = dataclasses.replace(_plan(path), user_data=FORMS)  # every target that can apply, user-data too
    hidden = dataclasses.replace(plan, profile=SettingsOnly(plan.profile))
    assert [(a.path, a.data, a.mode) for a in render_plan(hidden)] == \
        [(a.path, a.data, a.mode) for a in render_plan(plan)]


def test_a_target_that_reads_the_gpus_is_caught() -> None:
    plan = _plan(PROFILES[0])
    hidden = dataclasses.replace(plan, profile=SettingsOnly(plan.profile))
    with pytest.raises(AssertionError, match=r"profile\.models"):
        _ = hidden.profile.models[0].key  # what the old Slurm writer did


FORMS = UserDataForms(gzip=True, mime=MimePart("#!/bin/sh\necho hi\n", "part.sh", "text/x-shellscript"))


def _recorded(plan: Any, targets: tuple[Target, ...] = TARGETS) -> dict[str, list[str]]:
    """The paths each target wrote when ``plan`` is rendered (a target that does not apply is absent)."""
    wrote: dict[str, list[str]] = {}

    def record(t: Target) -> Target:
        def run(*args: Any) -> list[Artifact]:
            files = t.render(*args)
            wrote[t.name] = [a.path for a in files]
            return files
        return dataclasses.replace(t, render=run)

    render_plan(plan, tuple(record(t) for t in targets))
    return wrote


@pytest.mark.parametrize("path", PROFILES, ids=[p.parent.name for p in PROFILES])
def test_each_target_writes_its_declared_folders_when_it_applies(path: Path) -> None:
    # the folders a profile gets are the declared folders of the targets that apply to its plan, and
    # each target that applies writes into every folder it declares
    plan = dataclasses.replace(_plan(path), user_data=FORMS)
    wrote = _recorded(plan)
    assert sorted(wrote) == sorted(t.name for t in TARGETS if t.applies(plan))
    for t in TARGETS:
        if t.name in wrote:
            assert {p.split("/")[0] for p in wrote[t.name]} == set(t.folders), t.name
    assert {a.path.split("/")[0] for a in render_plan(plan)} == {f for t in TARGETS if t.applies(plan)
                                                                   for f in t.folders}


def test_the_targets_are_declared_once_each_and_in_an_order_that_runs() -> None:
    names = [t.name for t in TARGETS]
    assert len(names) == len(set(names))
    check_order(TARGETS)
    # importing migbake.render.tree runs the same check, at module level, right after the declarations
    source = inspect.getsource(tree)
    assert source.index("\ncheck_order(TARGETS)\n") > source.index("\nTARGETS: tuple[Target, ...] = (")
    assert tuple(dict.fromkeys(f for t in TARGETS for f in t.folders)) == OUTPUT_NAMES


def _declared(name: str) -> Target:
    return next(t for t in TARGETS if t.name == name)


@pytest.mark.parametrize(("targets", "message"), [
    (("rootfs", "ansible", "scripts"), r"'ansible' reads the files of 'scripts', which comes after it in TARGETS"),
    (("cloud-init", "rootfs"), r"'cloud-init' reads the files of 'rootfs', which comes after it"),
    (("rootfs", "cloud-init", "rootfs"), r"'rootfs' is declared twice"),
    (("rootfs", "kickstart"), r"'kickstart' reads the files of 'packer', which is no declared target"),
], ids=["reader-before-read", "rootfs-after-its-reader", "twice", "undeclared"])
def test_a_misordered_declaration_is_refused(targets: tuple[str, ...], message: str) -> None:
    with pytest.raises(RenderError, match=message):
        check_order(tuple(_declared(n) for n in targets))


def test_a_folder_is_one_targets_and_its_readers() -> None:
    rootfs, cloud_init, user_data = (_declared(n) for n in ("rootfs", "cloud-init", "user-data"))
    check_order((rootfs, cloud_init, user_data))  # user-data adds to cloud-init/, whose files it reads
    with pytest.raises(RenderError, match=r"'cloud-init' and 'user-data' both write cloud-init/"):
        check_order((rootfs, cloud_init, dataclasses.replace(user_data, reads=("rootfs",))))
    with pytest.raises(RenderError, match=r"its doc must be one line"):
        check_order((dataclasses.replace(rootfs, doc=""),))
    with pytest.raises(RenderError, match=r"folders \('Rootfs/',\)"):
        check_order((dataclasses.replace(rootfs, folders=("Rootfs/",)),))
    with pytest.raises(RenderError, match=r"its doc page \(docs/NAME.md\)"):
        check_order((dataclasses.replace(rootfs, page="README.md"),))
    with pytest.raises(RenderError, match=r"its own test module \(tests/outputs/test_NAME.py\)"):
        check_order((dataclasses.replace(rootfs, tests=""),))


def untested(targets: tuple[Target, ...]) -> list[str]:
    """The targets whose declared test module (``tests``) is missing or never names them: no string of its
    source holds the target's name as a word of its own (``"cloud-init/user-data.gz"`` names ``user-data``)."""
    import ast
    import re

    found = []
    for t in targets:
        module = REPO / t.tests
        if not module.is_file():
            found.append(f"{t.name}: {t.tests} does not exist")
            continue
        word = re.compile(rf"(?<![\w-]){re.escape(t.name)}(?![\w-])")
        strings = [n.value for n in ast.walk(ast.parse(module.read_text(encoding="utf-8")))
                   if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        if not any(word.search(s) for s in strings):
            found.append(f"{t.name}: {t.tests} never names it")
    return found


def test_every_target_has_its_own_test_module_that_names_it() -> None:
    assert untested(TARGETS) == []
    packer = _declared("packer")
    assert untested((dataclasses.replace(packer, tests="tests/unit/test_gpu_names.py"),
                     dataclasses.replace(packer, tests="tests/test_nowhere.py"))) == [
        "packer: tests/unit/test_gpu_names.py never names it", "packer: tests/test_nowhere.py does not exist"]
    # a longer name that only contains the target's is no mention of it
    assert untested((dataclasses.replace(packer, name="cloud", tests="tests/outputs/test_ec2_user_data.py"),)) == [
        "cloud: tests/outputs/test_ec2_user_data.py never names it"]


def test_a_target_sees_only_the_files_of_the_targets_it_reads() -> None:
    plan = _plan(PROFILES[0])
    normal = {a.path: a.text for a in render_plan(plan)}
    assert "/etc/nvidia-mig/restore.sh" in normal["cloud-init/user-data"]
    blind = tuple(dataclasses.replace(t, reads=()) if t.name == "cloud-init" else t for t in TARGETS)
    alone = {a.path: a.text for a in render_plan(plan, blind)}
    assert "/etc/nvidia-mig/restore.sh" not in alone["cloud-init/user-data"]
    with pytest.raises(KeyError):  # Ansible's role carries two scripts: without reading scripts it has none
        render_plan(plan, tuple(dataclasses.replace(t, reads=("rootfs",)) if t.name == "ansible" else t
                                for t in TARGETS))


def test_a_target_writing_outside_its_folders_is_refused() -> None:
    plan = _plan(PROFILES[0])
    stray = tuple(dataclasses.replace(t, folders=("slurm-extra",)) if t.name == "scripts" else t for t in TARGETS)
    with pytest.raises(RenderError, match=r"target 'scripts' wrote 'scripts/verify-mig-restore.sh', outside its "
                                          r"folders \(slurm-extra\)"):
        render_plan(plan, stray)


def test_the_user_data_target_applies_only_when_a_form_is_asked_for() -> None:
    plan = _plan(PROFILES[0])
    assert "user-data" not in _recorded(plan)
    gz = _recorded(dataclasses.replace(plan, user_data=UserDataForms(gzip=True)))["user-data"]
    assert gz == ["cloud-init/user-data.gz"]
    assert _recorded(dataclasses.replace(plan, user_data=FORMS))["user-data"] == [
        "cloud-init/user-data.gz", "cloud-init/user-data.mime", "cloud-init/user-data.mime.gz"]


def test_the_plan_places_every_instance_once() -> None:
    # the placements the DRA names and the explicit Slurm lines read: one per instance of the layout
    for path in PROFILES:
        plan = _plan(path)
        # with named layouts (mig.layouts) the placements are the first name's
        config = plan.mig.layout_names[0] if plan.mig.layout_names else plan.profile.restore.config_name
        for placed in plan.expect.placements:
            group = dict(plan.mig.config["mig-configs"][config][placed.entry].get("mig-devices") or {})
            assert sorted(i.profile for i in placed.instances) == sorted(
                name for name, n in group.items() for _ in range(n)), (path, placed)
            assert all(0 <= i.start < placed.memory_slices for i in placed.instances)


# The plan in parts: a few top-level fields, each part a frozen dataclass of one concern
MAX_TOP_LEVEL, MAX_PART = 20, 15


def _oversized(cls: type, limit: int = MAX_TOP_LEVEL, part_limit: int = MAX_PART) -> list[str]:
    """What of ``cls`` (a plan) is too big: itself (over ``limit`` fields), or a part (over ``part_limit``),
    or a part that is not a frozen dataclass with a docstring."""
    hints = typing.get_type_hints(cls)
    found = [f"{cls.__name__}: {len(dataclasses.fields(cls))} fields"] if len(dataclasses.fields(cls)) > limit else []
    for f in dataclasses.fields(cls):
        kinds = [t for t in typing.get_args(hints[f.name]) or (hints[f.name],) if dataclasses.is_dataclass(t)]
        for part in kinds:
            if part is NodeProfile:
                continue
            if len(dataclasses.fields(part)) > part_limit:
                found.append(f"{cls.__name__}.{f.name}: {len(dataclasses.fields(part))} fields")
            if not part.__dataclass_params__.frozen or not (part.__doc__ or "").strip():  # type: ignore[attr-defined]
                found.append(f"{cls.__name__}.{f.name}: not a frozen dataclass with a docstring")
    return found


def test_the_plan_is_a_few_parts_each_small_and_frozen() -> None:
    assert _oversized(RenderPlan) == []
    parts = [f.name for f in dataclasses.fields(RenderPlan)
             if dataclasses.is_dataclass(typing.get_type_hints(RenderPlan)[f.name])]
    assert {"mig", "expect", "kubelet", "dra", "platforms", "restore", "consumers", "first_boot"} <= set(parts)


def test_an_oversized_plan_or_part_is_caught() -> None:
    # a plan that had 55 fields at the top level: the bound refuses it
    flat = dataclasses.make_dataclass("Flat", [(f"f{i}", int) for i in range(55)], frozen=True)
    assert _oversized(flat) == ["Flat: 55 fields"]
    assert _oversized(RenderPlan, part_limit=10) == ["RenderPlan.kubelet: 14 fields", "RenderPlan.dra: 12 fields",
                                                     "RenderPlan.restore: 14 fields"]
    loose = dataclasses.make_dataclass("Loose", [("x", int)])  # not frozen
    holder = dataclasses.make_dataclass("Holder", [("part", loose)], frozen=True)
    assert _oversized(holder) == ["Holder.part: not a frozen dataclass with a docstring"]
