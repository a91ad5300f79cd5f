"""``migbake boot-test``: boot a profile's artifacts in a throwaway VM and check every claim of the boot order."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Literal

import click

from migbake.boottest import prepare_assets, run_boot_test
from migbake.boottest.scenarios import reset as scenarios_reset
from migbake.boottest.scenarios.node import NODE_SCENARIOS, applies, boots_for, promises_of, variant
from migbake.boottest.scenarios.reset import SCENARIOS as RESET_SCENARIOS
from migbake.boottest.scenarios.scenario import IMITATION, Scenario
from migbake.boottest.simgpu.node import node_for_profile
from migbake.commands.common import PROFILE_PATH, valid_profile
from migbake.exits import EXIT_INVALID
from migbake.render.tree import render
from migbake.render.write import write_tree


@click.command("boot-test")
@click.argument("profile", type=PROFILE_PATH)
@click.option("--path", "paths", type=click.Choice(["packer", "cloud-init", "both"]), default="both",
              show_default=True, help="Deliver the artifacts with a real Packer build, a NoCloud seed, or both.")
@click.option("--scenario", type=click.Choice(["ok", "fail-apply", "fail-assert", *NODE_SCENARIOS, *RESET_SCENARIOS,
                                               "all"]), default="all", show_default=True,
              help="ok, a failing apply/assert, or a neighbour of the node (driver-late, driver-too-late, "
                   "gpu-client, manager-reenabled, cdi; ampere-pending[-stuck] on Ampere profiles: with "
                   "--mig-parted only).")
@click.option("--boots", type=click.IntRange(1, 5), default=2, show_default=True,
              help="Boots per ok run (faults boot once).")
@click.option("--keep", is_flag=True, help="Keep the disk images of every run (default: only of failing runs).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path),
              help="Where the Debian rootfs and kernel are cached (default: $MIGBAKE_CACHE or /var/cache/migbake).")
@click.option("--mig-parted", "mig_parted", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="NVIDIA's nvidia-mig-parted binary: it runs in the guest over simulated GPUs (without it, "
                   "a shell imitation does).")
def boot_test(profile: Path, paths: str, scenario: str, boots: int, keep: bool, as_json: bool,
              cache: Path | None, mig_parted: Path | None) -> int:
    """Boot PROFILE's artifacts in a throwaway VM (QEMU, systemd as PID 1) and check the boot order.

    Builds (and caches) a minimal Debian rootfs with systemd and cloud-init and a kernel, installs
    NVIDIA's nvidia-mig-parted (--mig-parted) over simulated GPUs (a fake NVML library and nvidia-smi
    built from the catalog; without --mig-parted a shell imitation of mig-parted) and a fake kubelet,
    delivers the generated files through the Packer provisioner or the cloud-init user-data, boots, and
    reads the results back from the disk.
    Claims, on every boot: nvidia-smi < apply < assert < kubelet; a failing apply or assert keeps kubelet
    down (unless on_failure: continue) and the console says why; the packaged manager never runs; the
    layout comes back after a reboot; a manual stop of the restore is refused; every consumer of the
    profile (kubelet, slurmd, ...) is treated like kubelet; the metrics file says 1 or 0. With --mig-parted
    also the node's neighbours: a late driver (driver-late; driver-too-late with a 5 s wait), a GPU client
    (gpu-client), a package upgrade that re-enables the packaged manager (manager-reenabled), a GPU reset
    that fails (ampere-pending: one reboot, then the layout; ampere-pending-stuck: no second reboot, fail
    closed) and CDI (cdi: the spec written last lists the MIG devices). Needs root.
    Exit 0 only if every claim holds.
    """
    if scenario in (*NODE_SCENARIOS, *RESET_SCENARIOS) and mig_parted is None:
        raise click.UsageError(f"--scenario {scenario} needs --mig-parted PATH (NVIDIA's nvidia-mig-parted, "
                               "which runs over the simulated GPU)")
    prof = valid_profile(profile)
    generation: Literal["hopper", "ampere"] = (
        "ampere" if all(m.mig_mode_persists for m in prof.models if m.has_mig) else "hopper")
    all_paths: list[Literal["packer", "cloud-init"]] = ["packer", "cloud-init"]
    chosen_paths = [p for p in all_paths if paths in (p, "both")]
    all_scenarios: list[Scenario] = ["ok", "fail-apply", "fail-assert"]
    if mig_parted is not None:  # the scenarios whose simulated world needs NVIDIA's binary
        all_scenarios += [s for s in NODE_SCENARIOS if applies(s, prof)]
        all_scenarios += [s for s in RESET_SCENARIOS if scenarios_reset.applies(s, generation == "ampere")]
    elif scenario == "all":
        click.echo(f"migbake: without --mig-parted only ok, fail-apply and fail-assert run "
                   f"({', '.join((*NODE_SCENARIOS, *RESET_SCENARIOS))} need NVIDIA's mig-parted)", err=True)
    scenarios = [s for s in all_scenarios if scenario in (s, "all")]
    if not scenarios:
        raise click.UsageError(f"--scenario {scenario} needs a profile with an Ampere GPU (MIG mode kept across "
                               f"reboots); {prof.name} has none")
    log = (lambda line: click.echo(line, err=True)) if not as_json else (lambda line: None)
    node = node_for_profile(prof)
    real = mig_parted.resolve() if mig_parted is not None else None
    actor = (IMITATION if real is None
             else f"NVIDIA nvidia-mig-parted {real} over {node.count} simulated {node.model.display_name} GPU(s)")
    if not as_json:
        click.echo(f"actor: {actor}")
    results = []
    with tempfile.TemporaryDirectory(prefix="migbake-boottest-") as tmp:
        generated: dict[str, Path] = {}
        outs: dict[str, Path] = {}
        for sc in scenarios:  # a scenario may boot the profile with an override (driver-too-late)
            booted = variant(prof, sc)
            if repr(booted) not in generated:
                generated[repr(booted)] = Path(tmp) / f"out-{len(generated)}"
                write_tree(render(booted), generated[repr(booted)])
            outs[sc] = generated[repr(booted)]
        assets = prepare_assets(cache_root=cache, log=log)
        for path in chosen_paths:
            for sc in scenarios:
                booted = variant(prof, sc)
                results.append(run_boot_test(
                    outs[sc], path=path, scenario=sc, boots=boots if sc == "cdi" else boots_for(sc, path, boots),
                    gpu_generation=generation,
                    on_failure="keep", assets=assets, cache_root=cache, log=log,
                    expect=booted.restore.on_failure, mig_parted=real, node=node, promises=promises_of(booted)))
    if not keep:
        for r in results:
            if r.passed:
                shutil.rmtree(r.work_dir, ignore_errors=True)
    ok = all(r.passed for r in results)
    if as_json:
        click.echo(json.dumps({"profile": prof.name, "actor": actor, "generation": generation, "passed": ok, "runs": [{
            "path": r.path, "scenario": r.scenario, "passed": r.passed, "work_dir": str(r.work_dir),
            "timings_s": {k: round(v, 1) for k, v in r.timings.items()},
            "boots": [{"boot": b.index, "passed": b.passed, "seconds": round(b.duration_s, 1),
                       "claims": [{"id": c.id, "passed": c.passed, "claim": c.description,
                                   "evidence": c.evidence} for c in b.claims]} for b in r.boots],
        } for r in results]}, indent=2))
    else:
        click.echo(f"{'PATH':<11}{'SCENARIO':<22}{'BOOT':<5}{'RESULT':<7}CLAIM")
        for r in results:
            for b in r.boots:
                for c in b.claims:
                    click.echo(f"{r.path:<11}{r.scenario:<22}{b.index:<5}{'pass' if c.passed else 'FAIL':<7}"
                               f"{c.id}: {c.description}" + ("" if c.passed else f"\n{'':<45}{c.evidence}"))
        times = ", ".join(f"{r.path}/{r.scenario} {sum(b.duration_s for b in r.boots):.0f} s" for r in results)
        click.echo(f"\n{'all claims hold' if ok else 'SOME CLAIMS FAILED'} ({times} of boots)")
    return 0 if ok else EXIT_INVALID
