"""One boot test end to end: rootfs copy + fixtures, the output under test installed, boots, claims."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from migbake_boottest import cache
from migbake_boottest.drivercontainer import claims as driver_claims
from migbake_boottest.drivercontainer import scenarios as driver_scenarios
from migbake_boottest.errors import BootTestError
from migbake_boottest.guestreport import parse_report
from migbake_boottest.hostrun import Log, no_log
from migbake_boottest.scenarios import kubelet as kubelet_fixtures
from migbake_boottest.scenarios import layouts as scenarios_layouts
from migbake_boottest.scenarios import node as scenarios_node
from migbake_boottest.scenarios import presence as scenarios_presence
from migbake_boottest.scenarios import reset as scenarios_reset
from migbake_boottest.scenarios import scenario as fixtures
from migbake_boottest.scenarios.claims import BootContext, BootPath, Claim, evaluate
from migbake_boottest.scenarios.dra_claims import dra_claims
from migbake_boottest.scenarios.kubelet import KubeletPackage
from migbake_boottest.scenarios.layouts import LayoutChoice
from migbake_boottest.scenarios.node import Promises
from migbake_boottest.scenarios.node_claims import node_claims
from migbake_boottest.scenarios.presence import presence_claims
from migbake_boottest.scenarios.scenario import Generation, Scenario
from migbake_boottest.simgpu import guest as simguest
from migbake_boottest.simgpu.build import compile_simgpu
from migbake_boottest.simgpu.node import SimulatedNode
from migbake_boottest.vm import image, packer_chroot, qemu
from migbake_boottest.vm.kernel import KernelAssets, ensure_kernel
from migbake_boottest.vm.rootfs import BaseRootfs, ensure_rootfs

WorkDirPolicy = Literal["keep", "clean"]
RESTORE_UNIT = "rootfs/etc/systemd/system/nvidia-mig-restore.service"
KUBELET_DROP_IN = "rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf"
REQUIRED: dict[BootPath, tuple[str, ...]] = {
    "packer": (RESTORE_UNIT, "packer/build.pkr.hcl", "packer/sources.pkr.hcl", "packer/variables.pkr.hcl"),
    "cloud-init": (RESTORE_UNIT, "cloud-init/user-data"),
}


@dataclass(frozen=True)
class BootAssets:
    """The cached inputs every boot test shares: build once per session."""

    rootfs: BaseRootfs
    kernel: KernelAssets


@dataclass(frozen=True)
class BootOutcome:
    """One boot of the image and the claims checked on what it left behind."""

    index: int
    exit_code: int
    duration_s: float
    serial_log: Path
    report_path: Path | None
    claims: tuple[Claim, ...]

    @property
    def passed(self) -> bool:
        return bool(self.claims) and all(c.passed for c in self.claims)


@dataclass(frozen=True)
class BootTestResult:
    """Everything one ``run_boot_test`` call found out."""

    out_dir: Path
    path: BootPath
    scenario: Scenario
    generation: Generation
    work_dir: Path
    boots: tuple[BootOutcome, ...]
    timings: dict[str, float] = field(default_factory=dict)
    actor: str = fixtures.IMITATION

    @property
    def passed(self) -> bool:
        return bool(self.boots) and all(b.passed for b in self.boots)

    def failed_claims(self) -> list[tuple[int, Claim]]:
        """(boot index, claim) for every claim that did not hold."""
        return [(b.index, c) for b in self.boots for c in b.claims if not c.passed]

    def summary(self) -> str:
        """A readable multi-line account: one line per claim, per boot."""
        lines = [f"actor: {self.actor}",
                 f"boot test {self.path}/{self.scenario}/{self.generation}: "
                 f"{'PASSED' if self.passed else 'FAILED'} (work dir {self.work_dir})"]
        for boot in self.boots:
            lines.append(f"boot {boot.index}: exit {boot.exit_code}, {boot.duration_s:.1f} s, "
                         f"console {boot.serial_log}")
            lines += [f"  [{'ok' if c.passed else 'FAIL'}] {c.id}: {c.description} -- {c.evidence}"
                      for c in boot.claims]
        lines.append("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.timings.items()))
        return "\n".join(lines)


def prepare_assets(*, cache_root: Path | None = None, force_rebuild: bool = False,
                   log: Log = no_log) -> BootAssets:
    """Build (or find in the cache) the rootfs and the kernel + initramfs."""
    return BootAssets(ensure_rootfs(cache_root=cache_root, force_rebuild=force_rebuild, log=log),
                      ensure_kernel(cache_root=cache_root, force_rebuild=force_rebuild, log=log))



DEFAULT_BOOT_TIMEOUT_S = 300.0


def boot_timeout(given: float | None) -> float:
    """How long one boot may take before QEMU is killed: ``given``, else $MIGBAKE_BOOT_TIMEOUT (seconds), else 300.

    A boot that passes takes 35-80 s under TCG; the bound only ends a guest that hangs. CI raises it where the
    VM tier shares the machine's cores with other tests (noxfile.py runs it beside the other sessions).
    """
    if given is not None:
        return given
    raw = os.environ.get("MIGBAKE_BOOT_TIMEOUT", "")
    if not raw:
        return DEFAULT_BOOT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= 86400:
        raise BootTestError(f"MIGBAKE_BOOT_TIMEOUT={raw!r}: expected seconds, a number above 0 and at most 86400")
    return value


def run_boot_test(
    out_dir: Path,
    *,
    path: BootPath,
    scenario: Scenario = "ok",
    boots: int = 1,
    gpu_generation: Generation = "hopper",
    on_failure: WorkDirPolicy = "keep",
    log: Log = no_log,
    assets: BootAssets | None = None,
    cache_root: Path | None = None,
    work_dir: Path | None = None,
    boot_timeout_s: float | None = None,
    expect: Literal["block-kubelet", "continue"] = "block-kubelet",
    mig_parted: Path | None = None,
    node: SimulatedNode | None = None,
    promises: Promises | None = None,
    kubeadm_package: KubeletPackage = "deb",
    layout: LayoutChoice | None = None,
) -> BootTestResult:
    """Install ``out_dir`` into a fresh image the ``path`` way, boot it ``boots`` times, check claims.

    ``packer``: a real ``packer build -only=null.ssh`` of OUT/packer into the rootfs (cloud-init disabled).
    ``cloud-init``: a plain GPU image (kubelet and mig-manager enabled, no restore files) with
    OUT/cloud-init/user-data on a NoCloud seed disk. Disk images are deleted when every claim holds,
    and kept for inspection on failure unless ``on_failure`` is ``"clean"``; logs and reports stay.
    ``expect`` is the profile's restore.on_failure: whether a failed restore must keep kubelet down.
    With ``mig_parted`` (NVIDIA's binary) it is the actor, over ``node``'s simulated GPUs (``simgpu.guest``);
    without it, the shell imitation runs. ``promises``: the profile's other consumers and metrics file
    (``scenarios.node.promises_of``); without it they are read from the output's drop-ins and restore.sh.
    The scenarios of ``scenarios.node.NODE_SCENARIOS`` need NVIDIA's mig-parted. The guest's kubelet is
    started as the profile's kubelet.layout has it (``scenarios.kubelet``; kubeadm: of ``kubeadm_package``).
    ``layout``: a profile with named layouts (restore.layout) boots as a node that says this name from this
    source (``scenarios.layouts``, claim ``layout-chosen``); without it, its default layout.
    """
    boot_timeout_s = boot_timeout(boot_timeout_s)
    out_dir = Path(out_dir).resolve()
    if boots < 1:
        raise BootTestError(f"boots must be at least 1, not {boots}")
    if scenario in driver_scenarios.SCENARIOS and mig_parted is None:
        raise BootTestError(f"scenario {scenario} runs only with NVIDIA's mig-parted over the simulated GPU")
    unit = driver_scenarios.watch_unit(out_dir) if scenario in driver_scenarios.SCENARIOS else RESTORE_UNIT
    missing = [name if name != RESTORE_UNIT else unit for name in REQUIRED[path]
               if not (out_dir / (name if name != RESTORE_UNIT else unit)).is_file()]
    if missing:
        raise BootTestError(f"{out_dir} is not a migbake output for the {path} path: "
                            f"missing {', '.join(missing)}")
    if scenario in scenarios_node.NODE_SCENARIOS and mig_parted is None:
        raise BootTestError(f"scenario {scenario} runs only with NVIDIA's mig-parted over the simulated GPU")
    if promises is None:
        promises = scenarios_node.discover_promises(out_dir)
    if mig_parted is not None and node is None:
        raise BootTestError("a boot test with NVIDIA's mig-parted needs the simulated node (simnode.node_for_profile)")
    scenarios_reset.check(scenario, mig_parted, node)
    actor = fixtures.IMITATION
    if mig_parted is not None and node is not None:
        actor = f"NVIDIA nvidia-mig-parted {mig_parted} over the simulated GPU ({node.count}x {node.model.key})"
        gpu_generation = "ampere" if node.model.mig_mode_persists else "hopper"
    timings: dict[str, float] = {}
    if assets is None:
        with _timed(timings, "assets"):
            assets = prepare_assets(cache_root=cache_root, log=log)
    if work_dir is None:
        parent = cache.cache_dir(cache_root) / "work"
        parent.mkdir(exist_ok=True)
        prefix = f"{path}-{scenario}-{gpu_generation}-{time.strftime('%Y%m%d-%H%M%S')}-"
        work = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    else:
        work = work_dir
        cache.remove_tree(work)
        work.mkdir(parents=True)
    log(f"boot test {path}/{scenario}/{gpu_generation} x{boots} of {out_dir} in {work}")

    # a profile without kubelet has no drop-in; a driver container's node has kubelet and holds it not
    kubelet = (out_dir / KUBELET_DROP_IN).is_file() or scenario in driver_scenarios.SCENARIOS
    # what the profile promises, never read from the artifacts under test
    requires = expect == "block-kubelet"
    sim = (mig_parted, node) if mig_parted is not None and node is not None else None
    consumers = tuple(unit for unit, _ in promises.consumers)
    fixture = kubelet_fixtures.fixture_for(promises.kubelet_layout, kubeadm_package) if kubelet else "plain"
    disk, seed = _build_image(out_dir, assets, work, path, scenario, gpu_generation, (kubelet, consumers),
                              timings, log, sim, fixture, layout)
    outcomes = []
    if scenario in scenarios_reset.SCENARIOS:
        ctx = BootContext(path, scenario, gpu_generation, 1, console="", kubelet=kubelet, kubelet_requires=requires,
                          expected=None if node is None else node.gpus, allocation=promises.allocation)
        with _timed(timings, "boots"):
            found = scenarios_reset.boot_all(ctx, disk=disk, seed=seed, kernel=assets.kernel, work=work, boots=boots,
                                             marker=scenarios_reset.reboot_marker(out_dir), timeout_s=boot_timeout_s,
                                             log=log)
        outcomes = [BootOutcome(i, *boot) for i, boot in enumerate(found, start=1)]
        boots = 0  # the scenario booted as often as it needed
    for index in range(1, boots + 1):
        ctx = BootContext(path, scenario, gpu_generation, index, console="", kubelet=kubelet,
                          kubelet_requires=requires, expected=None if node is None or sim is None else node.gpus,
                          consumers=promises.consumers, metrics_path=promises.metrics_textfile,
                          kubelet_fixture=fixture, node_labels=promises.node_labels, allocation=promises.allocation,
                          real_slurmd="slurmd.service" in consumers
                          and (assets.rootfs.path / fixtures.REAL_SLURMD_UNIT).is_file())
        with _timed(timings, f"boot-{index}"):
            outcomes.append(_boot_once(ctx, disk, seed, assets.kernel, work, boot_timeout_s, log, layout))
    result = BootTestResult(out_dir, path, scenario, gpu_generation, work, tuple(outcomes), timings, actor)
    if result.passed or on_failure == "clean":
        for leftover in (disk, seed):
            if leftover is not None:
                leftover.unlink(missing_ok=True)
    else:
        log(f"claims failed: disk image kept for inspection in {work}")
    return result


def _build_image(out_dir: Path, assets: BootAssets, work: Path, path: BootPath, scenario: Scenario,
                 generation: Generation, units: tuple[bool, tuple[str, ...]], timings: dict[str, float],
                 log: Log, sim: tuple[Path, SimulatedNode] | None,
                 fixture: kubelet_fixtures.KubeletFixture = "plain",
                 layout: LayoutChoice | None = None) -> tuple[Path, Path | None]:
    rootfs = work / "rootfs"
    kubelet, consumers = units
    with _timed(timings, "rootfs-copy"):
        assets.rootfs.fresh_copy(rootfs, log=log)
    try:
        with _timed(timings, "fixtures"):
            driver = scenario in driver_scenarios.SCENARIOS
            unit = driver_scenarios.watch_unit(out_dir) if driver else RESTORE_UNIT
            commands = fixtures.restore_commands(out_dir, unit)
            if layout is not None and scenario != fixtures.LAYOUT_UNKNOWN:  # the assert and the GPUs' expectation
                commands = replace(commands, config_name=layout.name)
            if not commands.config_name:
                raise BootTestError(f"{out_dir}: its restore chooses a named layout at boot and has no default: "
                                    "boot it with a layout (source and name)")
            config = out_dir / "rootfs" / commands.config_file.lstrip("/")
            gpu = fixtures.simulated_gpu_for_config(config.read_text() if config.is_file() else "",
                                                commands.config_name, generation)
            if sim is None:
                fixtures.install_fixtures(rootfs, gpu=gpu, commands=commands, kubelet=kubelet, log=log,
                                          consumers=consumers)
                fixtures.inject_fault(rootfs, scenario)
            else:
                mig_parted, node = sim
                fixtures.install_fixtures(rootfs, gpu=gpu, commands=commands, kubelet=kubelet, log=log,
                                          actor=f"NVIDIA nvidia-mig-parted over the simulated GPU ({node.model.key})",
                                          consumers=consumers)
                simguest.install_simgpu(rootfs, node=node, build=compile_simgpu(work / "simgpu", log=log),
                                        mig_parted=mig_parted, nvidia_smi=commands.nvidia_smi,
                                        nvidia_mig_parted=commands.nvidia_mig_parted, log=log)
                fixtures.simulated_pci_bus(rootfs, [node.model.pci_device_ids[0]] * node.count)
                if scenario in simguest.SCENARIO_KNOBS:
                    simguest.set_knob(rootfs, simguest.SCENARIO_KNOBS[scenario])
                if scenario in scenarios_reset.SCENARIOS:
                    scenarios_reset.prepare_image(rootfs, scenario, out_dir, log)
                scenarios_node.prepare_guest(rootfs, scenario, path, log=log)
                if scenario in driver_scenarios.SCENARIOS:
                    driver_scenarios.prepare_image(
                        rootfs, scenario, out_dir, kernel_package=assets.kernel.package,
                        kernel_cache=assets.kernel.vmlinuz.parents[1], nvidia_smi=commands.nvidia_smi,
                        watch_unit=Path(unit).name, log=log)
            kubelet_fixtures.install(rootfs, fixture, log)
            if layout is not None:
                scenarios_layouts.prepare_image(rootfs, layout, fixture)
            if scenario == fixtures.NO_GPU:
                scenarios_presence.prepare_image(rootfs)
            if scenario == fixtures.PROVIDED_LATER_MISSING:  # before the delivery, which must not check it
                (rootfs / commands.nvidia_mig_parted.lstrip("/")).unlink()
        seed = None
        if path == "packer":
            fixtures.disable_cloud_init(rootfs)
            with _timed(timings, "packer-build"):
                packer_chroot.build_into_rootfs(out_dir / "packer", rootfs, workdir=work / "sshd", log=log)
            scenarios_node.after_delivery(rootfs, scenario, path, log=log)
            driver_scenarios.after_delivery(rootfs, scenario)
        else:
            seed = image.make_seed(out_dir / "cloud-init/user-data", work / "seed.img",
                                   instance_id=f"iid-migbake-{work.name}", log=log)
        with _timed(timings, "mkfs"):
            disk = image.make_disk(rootfs, work / "disk.img", log=log)
    finally:
        cache.remove_tree(rootfs)  # the image holds it all; the copy is 200 MB
    return disk, seed


def _boot_once(ctx: BootContext, disk: Path, seed: Path | None, kernel: KernelAssets, work: Path,
               timeout_s: float, log: Log, layout: LayoutChoice | None = None) -> BootOutcome:
    index = ctx.boot
    if index > 1:  # each boot's evidence must come from that boot only
        for stale in (fixtures.STUB_LOG, fixtures.REPORT, kubelet_fixtures.ARGV_LOG,
                      *([ctx.metrics_path] if ctx.metrics_path else [])):
            image.remove_file(disk, stale, log=log)
    run = qemu.boot(kernel=kernel, disk=disk, seed=seed, serial_log=work / f"serial-{index}.log",
                    timeout_s=timeout_s, kernel_args=layout.kernel_args if layout else "", log=log)
    text = image.read_file(disk, fixtures.REPORT, log=log)
    report_path = None
    if text is not None:
        report_path = work / f"report-{index}.txt"
        report_path.write_text(text)
    console = run.serial_log.read_text(errors="replace") if run.serial_log.exists() else ""
    metrics = image.read_file(disk, ctx.metrics_path, log=log) if ctx.metrics_path else None
    if metrics is not None:
        (work / f"metrics-{index}.prom").write_text(metrics)
    report = None if text is None else parse_report(text)
    ctx = replace(ctx, console=console, metrics=metrics)
    if ctx.scenario in driver_scenarios.SCENARIOS:  # its own claims: the restore waits for the driver, not kubelet
        scenario_log = image.read_file(disk, driver_claims.SCENARIO_LOG, log=log)
        if scenario_log is not None:
            (work / f"driver-scenario-{index}.txt").write_text(scenario_log)
        found = driver_claims.boot_claims(scenario_log, ctx.scenario, ctx.expected or (), index)
        if run.exit_code != 0:
            found.insert(0, Claim("powered-off", "the guest powered off before the timeout", False,
                                  f"QEMU exited {run.exit_code}" + (" (killed)" if run.timed_out else "")))
        for claim in found:
            log(f"boot {index}: [{'ok' if claim.passed else 'FAIL'}] {claim.id}: {claim.evidence}")
        return BootOutcome(index, run.exit_code, run.duration_s, run.serial_log, report_path, tuple(found))
    argv = image.read_file(disk, kubelet_fixtures.ARGV_LOG, log=log) if ctx.kubelet_fixture != "plain" else None
    claims = evaluate(report, ctx) + node_claims(report, ctx) + dra_claims(report, ctx) + presence_claims(report, ctx)
    claims += scenarios_layouts.layout_claim(report, layout, ctx.scenario)
    if (report is not None and report.complete and ctx.scenario not in scenarios_node.FAILING
            and not scenarios_presence.fails(ctx)):
        claims += kubelet_fixtures.labels_claim(argv, ctx.kubelet_fixture, ctx.node_labels)  # type: ignore[arg-type]
        claims += scenarios_layouts.label_claim(argv, layout)
    if run.exit_code != 0:
        why = f"killed after {run.duration_s:.0f} s" if run.timed_out else f"QEMU exited {run.exit_code}"
        claims.insert(0, Claim("powered-off", "the guest powered off before the timeout", False, why))
    for claim in claims:
        log(f"boot {index}: [{'ok' if claim.passed else 'FAIL'}] {claim.id}: {claim.evidence}")
    return BootOutcome(index, run.exit_code, run.duration_s, run.serial_log, report_path, tuple(claims))


@contextmanager
def _timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    start = time.monotonic()
    try:
        yield
    finally:
        timings[stage] = round(time.monotonic() - start, 2)
