"""Commands that build and boot images: bake (Packer), boot-test (QEMU)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Literal

import click

from migbake.commands.base import PROFILE_PATH, guard, main, valid_profile
from migbake.exits import EXIT_INVALID

# --- bake --------------------------------------------------------------------------------------

_PROFILE_SUFFIXES = (".profile.yaml", ".profile.yml", ".yaml", ".yml")


def _profile_and_out(target: Path, out: Path | None) -> tuple[Path, Path]:
    """The profile, and the output directory of this profile alone (unless ``-o`` says otherwise).

    A folder without node-profile.yaml, or a missing file, is reported by valid_profile like everywhere (exit 1).
    """
    if target.is_dir() and (target / "node-profile.yaml").is_file():
        return target / "node-profile.yaml", out or target / "generated"
    if target.is_dir() or target.name in ("node-profile.yaml", "node-profile.yml"):
        return target, out or target.parent / "generated"
    stem = next((target.name[: -len(x)] for x in _PROFILE_SUFFIXES if target.name.endswith(x)), target.name)
    return target, out or target.parent / f"{stem}.generated"


def _check_sources(only: tuple[str, ...], variables: tuple[str, ...], var_files: tuple[Path, ...]) -> None:
    from migbake import packer

    for s in only:
        if s not in packer.SOURCE_NAMES:
            raise click.BadParameter(f"{s!r} is not a source; the sources are:\n{packer.sources_text()}",
                                     param_hint="--only")
    if not only:
        raise click.UsageError("the templates have several sources; choose one or more with --only "
                               f"(nothing was written):\n{packer.sources_text()}")
    try:
        packer.check_vars(variables)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--var") from e
    missing = packer.missing_vars(only, variables, var_files)
    if missing:
        raise click.UsageError(f"{', '.join(only)} needs {', '.join(f'--var {v}=...' for v in missing)} "
                               "(no default: migbake never bakes the build machine itself or guesses an "
                               "account); nothing was written")


@main.command()
@click.argument("target", metavar="PROFILE|IMAGE_DIR", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(file_okay=False, path_type=Path),
              help="Where to generate (default: IMAGE_DIR/generated; for NAME.yaml or NAME.profile.yaml, "
                   "NAME.generated beside it; for node-profile.yaml, generated beside it).")
@click.option("--only", multiple=True, metavar="SOURCE",
              help="The source to build (repeatable; required): amazon-ebs.golden, null.ssh, qemu.image, "
                   "googlecompute.golden, azure-arm.golden.")
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="A Packer variable (repeatable).")
@click.option("--var-file", "var_files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="A Packer variables file (repeatable).")
@click.option("--packer", "packer_bin", metavar="PATH", help="The Packer binary (default: $MIGBAKE_PACKER or packer).")
@click.option("--force", is_flag=True, help="Replace the output directory even if migbake did not create it "
                                            "or another profile did.")
@click.option("--dry-run", is_flag=True,
              help="Write nothing; say what would be written where and print the Packer commands.")
@guard
def bake(target: Path, out: Path | None, only: tuple[str, ...], variables: tuple[str, ...],
         var_files: tuple[Path, ...], packer_bin: str | None, force: bool, dry_run: bool) -> None:
    """Generate, then bake an image with Packer: [init], fmt -check, validate, build.

    --only chooses the source; the variables a source needs have no default and must be given
    (null.ssh: ssh_host). The qemu source gets a throwaway SSH key and NoCloud seed unless
    qemu_seed_dir is given. Packer's output is streamed. If a step fails, migbake names the step and
    Packer's exit code and exits 1; if Packer is missing it says how to install it.
    """
    import tempfile

    from migbake import packer
    from migbake.commands.profiles import artifacts_for
    from migbake.problems import PackerError
    from migbake.write import Origin, check_out, read_origin, write_tree

    profile, out_dir = _profile_and_out(target, out)
    _check_sources(only, variables, var_files)
    prof = valid_profile(profile, "nothing baked")
    origin = Origin.of(str(profile), out_dir, prof.name, prof.source_sha256)
    recorded = read_origin(out_dir)
    if recorded is not None:
        origin = origin.same_options(recorded)  # keep the user-data forms OUT was generated with
    artifacts = artifacts_for(prof, origin, out_dir)
    wants_seed = "qemu.image" in only and not any(v.startswith("qemu_seed_dir=") for v in variables)
    if dry_run:
        check_out(out_dir, force=force, origin=origin)
        binary = packer_bin or os.environ.get("MIGBAKE_PACKER") or "packer"
        try:
            version = packer.packer_version(packer.find_packer(packer_bin))
        except PackerError:
            version = (1, 7, 0)  # not installed: show what a current Packer would run
        seed = ["qemu_seed_dir=<throwaway seed>", "qemu_ssh_private_key_file=<throwaway key>"] if wants_seed else []
        click.echo(f"dry run, nothing written: would write {len(artifacts)} files to {out_dir} (profile "
                   f"{prof.name} from {profile}), then run:")
        for step in packer.plan_bake(out_dir / "packer", binary=binary, version=version, only=only,
                                     variables=(*variables, *seed), var_files=var_files):
            click.echo(step.display())
        return
    binary = packer.find_packer(packer_bin)
    write_tree(artifacts, out_dir, force=force, origin=origin)
    click.echo(f"wrote {len(artifacts)} files to {out_dir} (profile {prof.name} from {profile})")
    with tempfile.TemporaryDirectory(prefix="migbake-bake-") as tmp:
        extra = packer.qemu_seed(Path(tmp) / "qemu-seed") if wants_seed else []
        steps = packer.plan_bake(out_dir / "packer", binary=binary, version=packer.packer_version(binary),
                                 only=only, variables=(*variables, *extra), var_files=var_files)
        packer.run_steps(steps, on_line=click.echo)
    click.echo(f"migbake: baked {prof.name} with {', '.join(only)} from {out_dir}")


# --- boot-test ---------------------------------------------------------------------------------
# boottest.scenarios_node.NODE_SCENARIOS (spelled out: the boot test loads only when it runs)
NODE_SCENARIOS = ("driver-late", "driver-too-late", "gpu-client", "manager-reenabled")
# boottest.scenarios_reset.SCENARIOS (likewise)
RESET_SCENARIOS = ("ampere-pending", "ampere-pending-stuck", "cdi")

@main.command("boot-test")
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
@guard
def boot_test(profile: Path, paths: str, scenario: str, boots: int, keep: bool, as_json: bool,
              cache: Path | None, mig_parted: Path | None) -> None:
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
    import tempfile

    from migbake.boottest import BootTestError, prepare_assets, run_boot_test, scenarios_reset
    from migbake.boottest.fixtures import IMITATION, Scenario
    from migbake.boottest.scenarios_node import NODE_SCENARIOS as node_scenarios
    from migbake.boottest.scenarios_node import applies, boots_for, promises_of, variant
    from migbake.boottest.simnode import node_for_profile
    from migbake.migconfig import group_models
    from migbake.render import render
    from migbake.write import write_tree

    if scenario in (*NODE_SCENARIOS, *RESET_SCENARIOS) and mig_parted is None:
        raise click.UsageError(f"--scenario {scenario} needs --mig-parted PATH (NVIDIA's nvidia-mig-parted, "
                               "which runs over the simulated GPU)")
    prof = valid_profile(profile)
    generation: Literal["hopper", "ampere"] = (
        "ampere" if all(m.mig_mode_persists for m in group_models(prof) if m.has_mig) else "hopper")
    all_paths: list[Literal["packer", "cloud-init"]] = ["packer", "cloud-init"]
    chosen_paths = [p for p in all_paths if paths in (p, "both")]
    all_scenarios: list[Scenario] = ["ok", "fail-apply", "fail-assert"]
    if mig_parted is not None:  # the scenarios whose simulated world needs NVIDIA's binary
        all_scenarios += [s for s in node_scenarios if applies(s, prof)]
        all_scenarios += [s for s in scenarios_reset.SCENARIOS if scenarios_reset.applies(s, generation == "ampere")]
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
        try:
            assets = prepare_assets(cache_root=cache, log=log)
            for path in chosen_paths:
                for sc in scenarios:
                    booted = variant(prof, sc)
                    results.append(run_boot_test(
                        outs[sc], path=path, scenario=sc, boots=boots if sc == "cdi" else boots_for(sc, path, boots),
                        gpu_generation=generation,
                        on_failure="keep", assets=assets, cache_root=cache, log=log,
                        expect=booted.restore.on_failure, mig_parted=real, node=node, promises=promises_of(booted)))
        except BootTestError as e:
            raise click.ClickException(f"boot test could not run: {e}") from e
    if not keep:
        for r in results:
            if r.passed:
                import shutil

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
    if not ok:
        sys.exit(EXIT_INVALID)
