"""``migbake bake``: generate, then build an image with Packer ([init], fmt -check, validate, build)."""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path

import click

from migbake.bake import packer
from migbake.commands.common import (
    ListedBadParameter,
    ListedUsageError,
    NonEmptyPath,
    generated_dir,
    say,
    valid_checked,
)
from migbake.commands.generate import FORCE_HELP, artifacts_for, mime_refusal, warn_rendered, warn_sizes
from migbake.kubernetes.kubelet import eks_family
from migbake.problems import PackerError, UsageError
from migbake.render.artifact import Artifact
from migbake.render.tree import in_order
from migbake.render.write import Origin, check_output_dir, read_origin, write_tree


def _profile_and_out(target: Path, out: Path | None) -> tuple[Path, Path]:
    """The profile, and the output directory of this profile alone (unless ``-o`` says otherwise).

    A folder without node-profile.yaml, or a missing file, is reported by valid_profile like everywhere (exit 1).
    """
    if target.is_dir() and (target / "node-profile.yaml").is_file():
        return target / "node-profile.yaml", out or target / "generated"
    return target, out or generated_dir(target)


def _check_sources(only: tuple[str, ...], variables: tuple[str, ...]) -> None:
    for s in only:
        if s not in packer.SOURCE_NAMES:
            near = [n for n in packer.SOURCE_NAMES if n.split(".")[0] == s] or difflib.get_close_matches(
                s, packer.SOURCE_NAMES, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ListedBadParameter(f"{s!r} is not a source{hint}; the sources are:\n{packer.sources_text()}",
                                     param_hint="--only")
    if not only:
        raise ListedUsageError("the templates have several sources; choose one or more with --only "
                               f"(nothing was written):\n{packer.sources_text()}")
    packer.check_vars(variables)


def _check_vars(artifacts: list[Artifact], only: tuple[str, ...], variables: tuple[str, ...],
                var_files: tuple[Path, ...]) -> None:
    """Every ``--var`` is declared (else the nearest declared name), then every variable the sources need is set."""
    declared = next(str(a.content) for a in artifacts if a.path == "packer/variables.pkr.hcl")
    unknown = packer.unknown_vars(variables, declared)  # first: `ssh_hots` gets its did-you-mean, not "needs"
    if unknown:
        raise click.BadParameter("; ".join(unknown) + " (Packer refuses an undeclared -var); nothing was written",
                                 param_hint="--var")
    missing = packer.missing_vars(only, variables, var_files)
    if missing:
        raise click.UsageError(f"{', '.join(only)} needs {', '.join(f'--var {v}=...' for v in missing)} "
                               f"(or PKR_VAR_{missing[0]}=... in the environment) "
                               "(no default: migbake never bakes the build machine itself or guesses an "
                               "account); nothing was written")


def _check_base_ami(only: tuple[str, ...], variables: tuple[str, ...], var_files: tuple[Path, ...], eks: str) -> None:
    missing = packer.missing_base_ami(only, variables, var_files, eks)
    if missing:
        why = (f"the EKS base AMI of kubelet.layout {eks} is the one of your cluster's Kubernetes version" if eks
               else "no AMI AWS publishes fits this profile's kubelet: name your GPU base AMI")
        raise click.UsageError(f"{packer.BASE_AMI_SOURCE} needs "
                               f"{' or '.join(f'--var {v}=...' for v in missing)} ({why}); nothing was written")


def _dry_validate(artifacts: list[Artifact], origin: Origin, packer_bin: str | None, only: tuple[str, ...],
                  variables: tuple[str, ...], var_files: tuple[Path, ...], wants_seed: bool) -> None:
    """``packer validate`` with the real run's arguments, on the templates written to a temporary folder."""
    try:
        binary = packer.find_packer(packer_bin)
    except PackerError:
        click.echo("Packer not found: checked the variable names and files only, not `packer validate`")
        return
    with tempfile.TemporaryDirectory(prefix="migbake-dry-run-") as tmp:
        write_tree(artifacts, Path(tmp) / "out", origin=origin)  # the marker: Packer reads the sha256 there
        extra = packer.qemu_seed(Path(tmp) / "qemu-seed") if wants_seed else []
        steps = packer.plan_bake(Path(tmp) / "out/packer", binary=binary, version=packer.packer_version(binary),
                                 only=only, variables=(*variables, *extra), var_files=var_files)
        click.echo("checking with packer validate (the templates in a temporary folder):")
        packer.run_steps([s for s in steps if s.name == "validate"], on_line=click.echo)
    click.echo("packer validate passed")


@click.command()
@click.argument("target", metavar="PROFILE|IMAGE_DIR", type=NonEmptyPath(path_type=Path))
@click.option("-o", "--output", "out", type=NonEmptyPath(file_okay=False, path_type=Path),
              help="Where to generate (default: IMAGE_DIR/generated; for NAME.yaml or NAME.profile.yaml, "
                   "NAME.generated beside it; for node-profile.yaml, generated beside it).")
@click.option("--only", multiple=True, metavar="SOURCE",
              help="The source to build (repeatable; required): amazon-ebs.golden, null.ssh, qemu.image, "
                   "googlecompute.golden, azure-arm.golden.")
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="A Packer variable (repeatable).")
@click.option("--var-file", "var_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, readable=True, path_type=Path),
              help="A Packer variables file (repeatable).")
@click.option("--packer", "packer_bin", metavar="PATH", help="The Packer binary (default: $MIGBAKE_PACKER or packer).")
@click.option("--force", is_flag=True, help=FORCE_HELP)
@click.option("--dry-run", is_flag=True,
              help="Write nothing; say what would be written where, print the Packer commands and run "
                   "`packer validate` with them (on the templates in a temporary folder).")
def bake(target: Path, out: Path | None, only: tuple[str, ...], variables: tuple[str, ...],
         var_files: tuple[Path, ...], packer_bin: str | None, force: bool, dry_run: bool) -> None:
    """Generate, then bake an image with Packer: [init], fmt -check, validate, build.

    --only chooses the source; the variables a source needs have no default and must be given
    (--var, --var-file or PKR_VAR_NAME; null.ssh: ssh_host; qemu.image: qemu_base_image and its
    checksum; amazon-ebs.golden: kubernetes_version for an EKS kubelet.layout, whose base AMI is the EKS
    AMI of that version, else source_ami_name_filter, your base AMI). --dry-run runs `packer validate`
    with the same arguments. The qemu source gets a throwaway SSH key and NoCloud seed unless
    qemu_seed_dir is given. Packer's output is streamed. If a step fails, migbake names the step and
    Packer's exit code and exits 1; if Packer is missing it says how to install it.
    """
    profile, out_dir = _profile_and_out(target, out)
    _check_sources(only, variables)
    checked = valid_checked(profile, "nothing baked")
    prof = checked.profile
    assert prof is not None  # valid_checked raises for an invalid profile
    _check_base_ami(only, variables, var_files, eks_family(prof))
    if prof.outputs and "packer" not in prof.outputs:
        raise UsageError(f"{profile}: outputs: ({', '.join(prof.outputs)}) leaves out packer, which bake builds "
                         "from: add packer to the profile's outputs", usage=True)
    origin = Origin.of(str(profile), out_dir, prof.name, prof.source_sha256, outputs=in_order(prof.outputs))
    recorded = read_origin(out_dir)
    if recorded is not None and recorded.user_data_mime:
        raise UsageError(mime_refusal(out_dir, "bake"), usage=True)
    if recorded is not None:
        origin = origin.same_options(recorded)  # keep the user-data gzip form OUT was generated with
    artifacts = artifacts_for(prof, origin, out_dir)
    warn_rendered(profile, checked, artifacts, "nothing baked")
    _check_vars(artifacts, only, variables, var_files)
    wants_seed = "qemu.image" in only and not any(v.startswith("qemu_seed_dir=") for v in variables)
    if dry_run:
        check_output_dir(out_dir, force=force, origin=origin)
        binary = packer_bin or os.environ.get("MIGBAKE_PACKER") or "packer"
        try:
            version = packer.packer_version(packer.find_packer(packer_bin))
        except PackerError:
            version = (1, 7, 0)  # not installed: show what a current Packer would run
        seed = ["qemu_seed_dir=<throwaway seed>", "qemu_ssh_private_key_file=<throwaway key>"] if wants_seed else []
        say(f"dry run, nothing written: would write {len(artifacts)} files to {out_dir} (profile "
            f"{prof.name} from {profile}), then run:")
        for step in packer.plan_bake(out_dir / "packer", binary=binary, version=version, only=only,
                                     variables=(*variables, *seed), var_files=var_files):
            say(step.display())
        _dry_validate(artifacts, origin, packer_bin, only, variables, var_files, wants_seed)
        return
    binary = packer.find_packer(packer_bin)
    write_tree(artifacts, out_dir, force=force, origin=origin)
    warn_sizes(profile, checked, artifacts, origin)
    say(f"wrote {len(artifacts)} files to {out_dir} (profile {prof.name} from {profile})")
    with tempfile.TemporaryDirectory(prefix="migbake-bake-") as tmp:
        extra = packer.qemu_seed(Path(tmp) / "qemu-seed") if wants_seed else []
        steps = packer.plan_bake(out_dir / "packer", binary=binary, version=packer.packer_version(binary),
                                 only=only, variables=(*variables, *extra), var_files=var_files)
        packer.run_steps(steps, on_line=click.echo)
    say(f"migbake: baked {prof.name} with {', '.join(only)} from {out_dir}")
