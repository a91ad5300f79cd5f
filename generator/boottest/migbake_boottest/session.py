"""A boot-test session: what a boot test of a profile will do (``plan``) and doing it (``run``).

The API behind ``migbake boot-test``. ``plan`` decides from the profile and the options which paths
and scenarios run, on which simulated node, with which actor (NVIDIA's mig-parted or the shell
imitation); ``run`` renders each profile a scenario boots, prepares the cached rootfs and kernel once
and boots every (path, scenario) pair.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from migbake.problems import UsageError
from migbake.profile.nodeprofile import NodeProfile
from migbake.render.tree import render
from migbake.render.write import Origin, write_tree
from migbake_boottest.drivercontainer import scenarios as driver_scenarios
from migbake_boottest.errors import BootTestError
from migbake_boottest.hostrun import HOST_TOOLS, Log, install_hint, missing_tools, no_log
from migbake_boottest.run import BootTestResult, prepare_assets, run_boot_test
from migbake_boottest.scenarios import reset as scenarios_reset
from migbake_boottest.scenarios.kubelet import KubeletPackage
from migbake_boottest.scenarios.layouts import LayoutChoice
from migbake_boottest.scenarios.node import NODE_SCENARIOS, applies, boots_for, promises_of, variant
from migbake_boottest.scenarios.reset import SCENARIOS as RESET_SCENARIOS
from migbake_boottest.scenarios.scenario import (
    IMITATION,
    LAYOUT_MISSING,
    LAYOUT_UNKNOWN,
    NO_GPU,
    PROVIDED_LATER_MISSING,
    Scenario,
)
from migbake_boottest.simgpu.node import SimulatedNode, node_for_profile

BootPath = Literal["packer", "cloud-init"]
BASE_SCENARIOS: tuple[Scenario, ...] = ("ok", "fail-apply", "fail-assert")
DRIVER_SCENARIOS: tuple[Scenario, ...] = driver_scenarios.SCENARIOS  # by name only, driver: container
NEEDS_MIG_PARTED = (*NODE_SCENARIOS, *RESET_SCENARIOS, *DRIVER_SCENARIOS)
LAYOUT_SCENARIOS: tuple[Scenario, ...] = (LAYOUT_UNKNOWN, LAYOUT_MISSING)  # by name only, named layouts
SCENARIO_CHOICES = (*BASE_SCENARIOS, PROVIDED_LATER_MISSING, NO_GPU, *LAYOUT_SCENARIOS, *NEEDS_MIG_PARTED, "all")


@dataclass(frozen=True)
class BootPlan:
    """The runs of one boot test: every path x scenario, on one simulated node."""

    profile: NodeProfile
    generation: Literal["hopper", "ampere"]
    paths: tuple[BootPath, ...]
    scenarios: tuple[Scenario, ...]
    boots: int
    node: SimulatedNode
    mig_parted: Path | None  # NVIDIA's binary (resolved), or None: the shell imitation acts
    note: str  # what the plan left out and why ("" when nothing)
    kubeadm_package: KubeletPackage = "deb"  # kubelet.layout kubeadm: whose kubelet the guest gets
    layout: LayoutChoice | None = None  # named layouts: the name the node says, and where (None: the default)

    @property
    def actor(self) -> str:
        """Who applies and asserts the layout in the guest."""
        if self.mig_parted is None:
            return IMITATION
        return (f"NVIDIA nvidia-mig-parted {self.mig_parted} over {self.node.count} simulated "
                f"{self.node.model.display_name} GPU(s)")


def plan(profile: NodeProfile, *, paths: str = "both", scenario: str = "all", boots: int = 2,
         mig_parted: Path | None = None, kubeadm_package: KubeletPackage = "deb",
         layout: tuple[str, str] | None = None) -> BootPlan:
    """The boot test ``migbake boot-test`` runs for these options; UsageError when it cannot run as asked.

    ``layout``: (source, name) of --layout-source and --layout.
    """
    choice = _layout_choice(profile, scenario, layout)
    if scenario in NEEDS_MIG_PARTED and mig_parted is None:
        raise UsageError(f"--scenario {scenario} needs --mig-parted PATH (NVIDIA's nvidia-mig-parted, "
                         "which runs over the simulated GPU)")
    generation: Literal["hopper", "ampere"] = (
        "ampere" if all(m.mig_mode_persists for m in profile.models if m.has_mig) else "hopper")
    candidates: list[Scenario] = list(BASE_SCENARIOS)
    note = ""
    if "nvidia-mig-parted" in profile.image.provided_later:  # baked into an image without it
        candidates.append(PROVIDED_LATER_MISSING)
    elif scenario == PROVIDED_LATER_MISSING:
        raise UsageError(f"--scenario {scenario} needs a profile whose image.provided_later lists "
                         f"nvidia-mig-parted; {profile.name}'s does not")
    candidates += [s for s in (NO_GPU, *LAYOUT_SCENARIOS) if s == scenario]  # asked for by name only (not in all)
    if scenario in DRIVER_SCENARIOS:  # by name only; a driver container's node (restore.hold: gpu-plugins)
        if profile.driver != "container":
            raise UsageError(f"--scenario {scenario} boots a profile with driver: container; {profile.name}'s "
                             f"driver is {profile.driver}")
        if paths == "cloud-init":
            raise UsageError(f"--scenario {scenario} boots the Packer path only (--path packer or both)")
        paths = "packer"
        candidates = [scenario]  # with mig_parted: checked above
    if mig_parted is not None and scenario not in DRIVER_SCENARIOS:  # the scenarios that need NVIDIA's binary
        candidates += [s for s in NODE_SCENARIOS if applies(s, profile)]
        candidates += [s for s in RESET_SCENARIOS if scenarios_reset.applies(s, generation == "ampere")]
    elif scenario == "all":
        note = (f"without --mig-parted only ok, fail-apply and fail-assert run "
                f"({', '.join(NEEDS_MIG_PARTED)} need NVIDIA's mig-parted)")
    chosen = tuple(s for s in candidates if scenario in (s, "all"))
    if not chosen:
        raise UsageError(f"--scenario {scenario} needs a profile with an Ampere GPU (MIG mode kept across "
                         f"reboots); {profile.name} has none")
    all_paths: tuple[BootPath, ...] = ("packer", "cloud-init")
    # the simulated GPUs end up as the layout the node says, else the default, else (fail closed) the first
    names = profile.layout_names
    name = (choice.name if choice is not None and scenario != LAYOUT_UNKNOWN
            else profile.restore.layout_default or (names[0] if names else ""))
    return BootPlan(profile, generation, tuple(p for p in all_paths if paths in (p, "both")), chosen, boots,
                    node_for_profile(profile.named(name) if name else profile),
                    mig_parted.resolve() if mig_parted is not None else None, note, kubeadm_package, choice)


def _layout_choice(profile: NodeProfile, scenario: str, layout: tuple[str, str] | None) -> LayoutChoice | None:
    """--layout-source and --layout as the boot's LayoutChoice; UsageError where the profile cannot take them."""
    names, sources = profile.layout_names, profile.restore.layout_from
    if not names and (layout is not None or scenario in LAYOUT_SCENARIOS):
        raise UsageError(f"--layout-source, --layout and --scenario {'/'.join(LAYOUT_SCENARIOS)} boot a profile "
                         f"with named layouts (mig.layouts); {profile.name} has one unnamed layout")
    if scenario == LAYOUT_MISSING and layout is not None:
        raise UsageError("--scenario layout-missing boots a node that says no layout name: "
                         "no --layout-source or --layout with it")
    if scenario == LAYOUT_UNKNOWN and layout is None:
        raise UsageError("--scenario layout-unknown needs --layout-source and --layout "
                         "(a name the image does not have)")
    if layout is None:
        return None
    source, name = layout
    if source not in sources:
        raise UsageError(f"--layout-source {source}: {profile.name}'s restore.layout.from does not read it "
                         f"(it reads: {', '.join(sources)})")
    try:
        choice = LayoutChoice(source, name)  # type: ignore[arg-type]
    except BootTestError as exc:
        raise UsageError(f"--layout: {exc}") from None
    if scenario == LAYOUT_UNKNOWN and name in names:
        raise UsageError(f"--scenario layout-unknown: {name} is a layout of {profile.name} ({', '.join(names)}); "
                         "give a name it does not have")
    if scenario != LAYOUT_UNKNOWN and name not in names:
        raise UsageError(f"--layout {name}: {profile.name} has the layouts {', '.join(names)} (a name it does not "
                         "have: --scenario layout-unknown)")
    return choice


def host_tools(boot_plan: BootPlan) -> tuple[str, ...]:
    """Every host tool ``boot_plan`` runs (``hostrun.HOST_TOOLS``): each run's, its paths', NVIDIA's binary's."""
    needs = ("every run", *boot_plan.paths, *(("mig-parted",) if boot_plan.mig_parted is not None else ()),
             *(("driver-container",) if set(boot_plan.scenarios) & set(DRIVER_SCENARIOS) else ()))
    return tuple(dict.fromkeys(tool for need in needs for tool in HOST_TOOLS[need]))


def check_host(boot_plan: BootPlan) -> None:
    """UsageError naming every host tool ``boot_plan`` needs and this host lacks, before any work."""
    missing = missing_tools(host_tools(boot_plan))
    if missing:
        raise UsageError(f"boot-test needs host tools this machine lacks: {', '.join(missing)} "
                         f"({install_hint(missing)}); migbake boot-test --help lists them all")


def run(boot_plan: BootPlan, *, cache: Path | None = None, keep: bool = False,
        log: Log = no_log) -> list[BootTestResult]:
    """Boot every run of ``boot_plan``; the work folders of passing runs are removed unless ``keep``."""
    results = []
    # a scenario may boot the profile with an override (driver-too-late): each one's profile, derived once
    booted_as = {sc: variant(boot_plan.profile, sc) for sc in boot_plan.scenarios}
    with tempfile.TemporaryDirectory(prefix="migbake-boottest-") as tmp:
        generated: dict[str, Path] = {}
        outs: dict[str, Path] = {}
        for sc, booted in booted_as.items():
            if repr(booted) not in generated:
                generated[repr(booted)] = Path(tmp) / f"out-{len(generated)}"
                out = generated[repr(booted)]  # the marker records the sha256 Packer tags the image with
                write_tree(render(booted), out, origin=Origin.of("-", out, booted.name, booted.source_sha256))
            outs[sc] = generated[repr(booted)]
        assets = prepare_assets(cache_root=cache, log=log)
        for path in boot_plan.paths:
            for sc, booted in booted_as.items():
                boots = (boot_plan.boots if sc == "cdi" else driver_scenarios.boots_for(sc)
                         if sc in DRIVER_SCENARIOS else boots_for(sc, path, boot_plan.boots))
                results.append(run_boot_test(
                    outs[sc], path=path, scenario=sc, boots=boots, gpu_generation=boot_plan.generation,
                    on_failure="keep", assets=assets, cache_root=cache, log=log,
                    expect=booted.restore.on_failure, mig_parted=boot_plan.mig_parted, node=boot_plan.node,
                    promises=promises_of(booted), kubeadm_package=boot_plan.kubeadm_package,
                    layout=boot_plan.layout))
    if not keep:
        for r in results:
            if r.passed:
                shutil.rmtree(r.work_dir, ignore_errors=True)
    return results
