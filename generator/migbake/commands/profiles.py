"""Commands on profiles and their output: validate, generate, images, show."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from migbake.commands.base import (
    PROFILE_PATH,
    check_profile,
    guard,
    is_stdin,
    main,
    plural,
    profile_name,
    valid_profile,
)
from migbake.exits import EXIT_INVALID, color_wanted

if TYPE_CHECKING:
    from migbake.model import NodeProfile
    from migbake.render import Artifact
    from migbake.write import Origin

# --- validate ----------------------------------------------------------------------------------

def _expand(paths: tuple[str, ...]) -> list[Path]:
    from migbake.validate import profile_files

    try:
        return list(profile_files(paths))
    except ValueError as e:
        raise click.UsageError(str(e)) from e


@main.command()
@click.argument("profiles", nargs=-1, required=True, metavar="PROFILE...")
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json", "github", "sarif", "junit"]),
              default="text", show_default=True,
              help="text: one line per problem; json; github: Actions annotations; sarif: SARIF 2.1.0; "
                   "junit: JUnit XML.")
@click.option("-q", "--quiet", is_flag=True, help="Text format: problems only, no summary line.")
@guard
def validate(profiles: tuple[str, ...], fmt: str, quiet: bool) -> None:
    """Check node profiles: schema, GPU models, MIG profile names, counts and placement.

    PROFILE is a file, a directory searched for node-profile.yaml and *.profile.yaml, or `-` for
    standard input (named <stdin> in messages). In text
    format every problem is printed as FILE:LINE:COL: error: /json/pointer: message [rule], then a
    count; colour only on a terminal and never with NO_COLOR. Exit 0 when all profiles are valid
    (warnings allowed), 1 when any is invalid.
    """
    from migbake.report import FileResult, render_report, summary

    files = _expand(profiles)
    if any(is_stdin(f) for f in files):
        results = [FileResult(profile_name(f), check_profile(f).problems) for f in files]
    else:  # files only: several CPUs may share the work
        from migbake.validate import file_problems

        results = [FileResult(profile_name(f), problems) for f, problems in zip(files, file_problems(files),
                                                                                  strict=True)]
    color = fmt == "text" and color_wanted()
    click.echo(render_report(fmt, results, color=color, with_summary=not quiet), nl=False, color=color)
    if fmt == "github" and not quiet:
        click.echo(summary(results), err=True)
    if any(r.errors for r in results):
        sys.exit(EXIT_INVALID)



# --- generate ----------------------------------------------------------------------------------

@main.command()
@click.argument("profile", type=PROFILE_PATH)
@click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output directory (created, or replaced as a whole if migbake made it).")
@click.option("--force", is_flag=True,
              help="Replace OUT even if it is not empty and migbake did not create it, or it was generated "
                   "from another profile.")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 and show a diff if OUT differs from what would be generated (with "
                   "the --user-data-* options OUT was generated with, unless given).")
@click.option("--user-data-gzip", is_flag=True,
              help="Also write cloud-init/user-data.gz (cloud-init inflates it; for EC2's 16 KB limit).")
@click.option("--user-data-mime", "mime_part", metavar="FILE[:TYPE]",
              help="Also write cloud-init/user-data.mime: a multi-part user-data with FILE (your own part, "
                   "e.g. a shell script or cloud-config; TYPE such as x-shellscript if its first line does "
                   "not tell) first, then migbake's cloud-config merged onto it.")
@guard
def generate(profile: Path, out: Path, force: bool, check: bool, user_data_gzip: bool,
             mime_part: str | None) -> None:
    """Generate the restore artifacts, cloud-init user-data and Packer templates for PROFILE.

    PROFILE may be `-` (standard input). Nothing is written when the profile is invalid (exit 1). The
    tree is built beside OUT and swapped in at once, so OUT is never half-written. OUT records the
    profile (path, name, sha256) and these options; generating another profile into it needs --force.
    """
    from migbake.write import Origin, read_origin

    prof = valid_profile(profile, "nothing written")
    origin = Origin.of(str(profile), out, prof.name, prof.source_sha256, user_data_gzip=user_data_gzip,
                       user_data_mime=mime_part or "")
    recorded = read_origin(out) if check and not (user_data_gzip or mime_part) else None
    if recorded is not None:
        origin = origin.same_options(recorded)  # compare with the options OUT was generated with
    artifacts = artifacts_for(prof, origin, out)
    if check:
        if _report_diff(artifacts, out, origin, f"migbake generate {_fix_args(profile, out, origin)}"):
            sys.exit(EXIT_INVALID)
        click.echo(f"{out}: up to date ({plural(len(artifacts), 'file')})")
        return
    _write(artifacts, out, origin, force=force)
    click.echo(f"wrote {plural(len(artifacts), 'file')} to {out} (profile {prof.name} from {profile_name(profile)})")


def artifacts_for(prof: NodeProfile, origin: Origin, out: Path) -> list[Artifact]:
    """Every file of OUT for ``prof``, with the user-data forms ``origin`` asks for."""
    from migbake.render import render

    artifacts = render(prof)
    return artifacts + _user_data_forms(artifacts, origin.user_data_gzip, origin.mime_argument(out) or None)


def _write(artifacts: list[Artifact], out: Path, origin: Origin, *, force: bool = False) -> None:
    from migbake.write import write_tree

    write_tree(artifacts, out, force=force, origin=origin)


def _report_diff(artifacts: list[Artifact], out: Path, origin: Origin, fix: str) -> bool:
    """Print the diff of a stale OUT (and how to fix it); whether OUT is stale."""
    from migbake.write import diff_tree

    diff = diff_tree(artifacts, out, origin)
    for line in diff:
        click.echo(line)
    if diff:
        click.echo(f"migbake: {out} is stale: run `{fix}`", err=True)
    return bool(diff)


def _fix_args(profile: Path | str, out: Path, origin: Origin) -> str:
    import shlex

    args = [str(profile), "-o", str(out)]
    if origin.user_data_gzip:
        args.append("--user-data-gzip")
    if origin.user_data_mime:
        args += ["--user-data-mime", origin.mime_argument(out)]
    return shlex.join(args)


def _user_data_forms(artifacts: list[Artifact], gzipped: bool, mime_part: str | None) -> list[Artifact]:
    from migbake import userdata
    from migbake.render import Artifact

    text = next(str(a.content) for a in artifacts if a.path == "cloud-init/user-data")
    extra = []
    if gzipped:
        extra.append(Artifact("cloud-init/user-data.gz", userdata.gzip_user_data(text), 0o644))
    if mime_part:
        src, kind = Path(mime_part), ""
        if not src.is_file() and ":" in mime_part:
            path, kind = mime_part.rsplit(":", 1)
            src = Path(path)
        try:
            theirs = src.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise click.BadParameter(f"cannot read {src}: {e}", param_hint="--user-data-mime") from e
        try:
            mime = userdata.mime_user_data(text, theirs, src.name, kind or None)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--user-data-mime") from e
        extra.append(Artifact("cloud-init/user-data.mime", mime, 0o644))
    for name, data in [("cloud-init/user-data", text.encode())] + [(a.path, a.data) for a in extra]:
        if userdata.too_big_for_ec2(data) and not (gzipped and name == "cloud-init/user-data"):
            click.echo(f"migbake: warning: {name} is {len(data)} bytes, above EC2's 16 KB user-data limit "
                       "(use --user-data-gzip)", err=True)
    return extra


# --- images ------------------------------------------------------------------------------------

@main.command()
@click.argument("images_dir", default="images", type=click.Path(file_okay=False, path_type=Path))
@click.option("--check", is_flag=True, help="Write nothing; exit 1 with a diff if any generated/ is stale.")
@guard
def images(images_dir: Path, check: bool) -> None:
    """Regenerate (or --check) every IMAGES_DIR/*/generated from its node-profile.yaml.

    For a repository of golden images laid out as images/<name>/node-profile.yaml: one command
    keeps every committed output tree up to date, and `--check` fails CI (or a pre-commit hook)
    when one is stale. Exit 1 if any profile is invalid or any tree is stale.
    """
    from migbake.validate import check_file
    from migbake.write import Origin, read_origin

    profiles = sorted(images_dir.glob("*/node-profile.yaml"))
    if not profiles:
        raise click.UsageError(f"{images_dir}: no */node-profile.yaml found")
    failed = 0
    for profile in profiles:
        out = profile.parent / "generated"
        checked = check_file(profile)
        for p in checked.problems:
            click.echo(p.format(), err=True)
        if checked.profile is None:
            failed += 1
            continue
        origin = Origin.of(str(profile), out, checked.profile.name, checked.profile.source_sha256)
        recorded = read_origin(out)
        if recorded is not None:
            origin = origin.same_options(recorded)  # keep the user-data forms it was generated with
        artifacts = artifacts_for(checked.profile, origin, out)
        if check:
            stale = _report_diff(artifacts, out, origin, f"migbake images {images_dir}")
            failed += stale
            if not stale:
                click.echo(f"{out}: up to date")
        else:
            _write(artifacts, out, origin)
            click.echo(f"wrote {plural(len(artifacts), 'file')} to {out}")
    if failed:
        what = "stale or invalid" if check else "invalid"
        click.echo(f"migbake: {plural(failed, 'image')} {what}; run `migbake images {images_dir}`", err=True)
        sys.exit(EXIT_INVALID)


# --- show --------------------------------------------------------------------------------------

@main.command()
@click.argument("profile", type=PROFILE_PATH)
@guard
def show(profile: Path) -> None:
    """Draw each GPU's memory slices with the profile's MIG instances placed on them (`-`: standard input)."""
    from migbake.layout import fit
    from migbake.migconfig import group_models
    from migbake.render import gpu_notes
    from migbake.slicemap import render_slice_map

    prof = valid_profile(profile)
    click.echo(f"{prof.name}: {prof.description}" if prof.description else prof.name)
    from migbake.catalog import load_catalog

    cat = load_catalog()
    for note in gpu_notes(prof, cat):
        click.echo(f"  {note}")
    closed = [c.unit for c in prof.all_consumers if c.fail_closed]
    opened = [c.unit for c in prof.all_consumers if not c.fail_closed]
    click.echo(f"  The restore runs before {prof.consumers_text() if prof.all_consumers else 'no consumer'}"
               + (f"; a failed restore keeps {', '.join(closed)} down" if closed else "")
               + (f"; {', '.join(opened)} start anyway" if opened else "") + ".")
    for i, (group, m) in enumerate(zip(prof.gpus, group_models(prof, cat))):
        devices = "all GPUs" if group.devices == "all" else "GPUs " + ", ".join(map(str, group.devices))
        click.echo(f"\n/gpus/{i}: {m.key}, {devices}")
        if not group.mig_enabled:
            click.echo("  MIG disabled: the whole GPU is one device")
            continue
        layout = group.layout_dict
        if not layout:
            click.echo("  MIG enabled, no instances")
            continue
        click.echo("  " + ", ".join(f"{n} x{c}" for n, c in layout.items()))
        click.echo(render_slice_map(m, fit(m, layout).placements))
    from migbake.kubernetes import resource_report

    for line in resource_report(prof, cat):
        click.echo(line)
