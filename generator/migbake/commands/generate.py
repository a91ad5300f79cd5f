"""``migbake generate``: one profile's output tree, written at once or compared (--check).

Also what ``images`` and ``bake`` share with it: the files of an output directory (with the
user-data forms it records) and the report of a stale one.
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import replace
from pathlib import Path

import click

from migbake.commands.common import PROFILE_PATH, NonEmptyPath, later_problems, profile_name, say, valid_checked
from migbake.document.files import read_bounded
from migbake.document.loader import LoadedProfile
from migbake.exits import EXIT_INVALID
from migbake.gpu.catalog import CatalogChoice
from migbake.problems import UsageError
from migbake.profile.nodeprofile import NodeProfile
from migbake.render import mime_parts
from migbake.render.artifact import Artifact
from migbake.render.plan import LAYOUT_FILE, MimePart, UserDataForms
from migbake.render.rendered_limits import ec2_user_data_problem, render_problems
from migbake.render.tree import OUTPUT_NAMES, in_order, only_outputs, render
from migbake.render.write import Origin, diff_tree, read_origin, write_tree
from migbake.rules.validate import ValidationResult
from migbake.wording import plural


def _outputs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """``--outputs a,b`` (or repeated): output folder names, in TARGETS' order; an unknown one is a usage error."""
    names = [n.strip() for v in values for n in v.split(",")]
    unknown = [n for n in names if n not in OUTPUT_NAMES]
    if unknown:
        allowed = ", ".join(OUTPUT_NAMES)
        close = difflib.get_close_matches(unknown[0], OUTPUT_NAMES, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close and len(unknown) == 1 else ""
        raise click.BadParameter(f"{', '.join(map(repr, unknown))}: no such output{hint}; allowed: {allowed}", ctx,
                                 param)
    return in_order(tuple(names))


@click.command()
@click.argument("profile", type=PROFILE_PATH)
@click.option("-o", "--output", "out", required=True, type=NonEmptyPath(file_okay=False, path_type=Path),
              help="Output directory (created, or replaced as a whole if migbake made it).")
@click.option("--force", is_flag=True,
              help="Replace OUT even if migbake generated it from another profile. Never a folder migbake did "
                   "not create, one holding files its marker does not list (they are named), or a system "
                   "directory: choose an empty one.")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 and show a diff if OUT differs from what would be generated (with "
                   "the --user-data-* options OUT was generated with, unless given).")
@click.option("--user-data-gzip", is_flag=True,
              help="Also write cloud-init/user-data.gz, and with --user-data-mime user-data.mime.gz (cloud-init "
                   "inflates them; for EC2's 16 KB limit).")
@click.option("--user-data-mime", "mime_part", metavar="FILE[:TYPE]",
              help="Also write cloud-init/user-data.mime: a multi-part user-data with FILE (your own part, "
                   "e.g. a shell script, cloud-config or an EKS NodeConfig; TYPE such as x-shellscript, or a "
                   "media type such as application/node.eks.aws, if its first line or content does not tell) "
                   "first, then (kubelet.layout eks-al2023) the node labels as a NodeConfig part, then "
                   "migbake's cloud-config merged onto it.")
@click.option("--strict", is_flag=True, help="Warnings count as errors: a profile with one is refused (exit 1), "
                                            "unless its validation.ignore sets it aside.")
@click.option("--layout", "layout", metavar="NAME",
              help="For a profile with mig.layouts whose restore.layout.from names file: the cloud-init "
                   "user-data (and its forms) and the Kickstart %post also write NAME to /etc/migbake/layout, "
                   "so a node they provision applies layout NAME from its first boot. OUT/cloud-init/layouts/"
                   "NAME/ and OUT/kickstart/layouts/NAME.ks hold such a seed for every name, with or without "
                   "this option: a PXE server hands each pool its own (its PXE entry's ds=nocloud-net;s=URL of the "
                   "folder, or "
                   "inst.ks= of a kickstart that %includes the .ks). A name the profile does not have is refused.")
@click.option("--outputs", "outputs", multiple=True, metavar="NAME[,NAME...]", callback=_outputs,
              help=f"Write only these output folders ({', '.join(OUTPUT_NAMES)}); default: the profile's "
                   "outputs:, else all. What a folder carries of another is rendered all the same. With --check: "
                   "the folders OUT was generated with, unless given.")
def generate(profile: Path, out: Path, force: bool, check: bool, user_data_gzip: bool,
             mime_part: str | None, strict: bool, layout: str | None, outputs: tuple[str, ...]) -> int:
    """Generate the restore artifacts, cloud-init user-data and Packer templates for PROFILE.

    PROFILE may be `-` (standard input). Nothing is written when the profile is invalid (exit 1). The
    tree is built beside OUT and swapped in at once, so OUT is never half-written. OUT records the
    profile (path, name, sha256), these options and the output folders written (--outputs, else the
    profile's outputs:, else all); generating another profile into it needs --force.
    """
    checked = valid_checked(profile, "nothing written", strict=strict)
    prof = checked.profile
    assert prof is not None and checked.loaded is not None  # valid_checked raises for an invalid profile
    if layout is not None:
        seed_layout(prof, checked.loaded, layout)
    origin = Origin.of(str(profile), out, prof.name, prof.source_sha256, user_data_gzip=user_data_gzip,
                       user_data_mime=mime_part or "", outputs=outputs or in_order(prof.outputs),
                       outputs_option=bool(outputs), layout=layout or "")
    recorded = read_origin(out) if check else None
    if recorded is not None and not (user_data_gzip or mime_part):
        origin = origin.same_options(recorded)  # compare with the options OUT was generated with
    if recorded is not None and layout is None and recorded.layout in prof.layout_names:
        origin = replace(origin, layout=recorded.layout)  # and the --layout it was generated with
    if recorded is not None and recorded.outputs_option and not outputs:
        origin = origin.same_outputs(recorded)  # and the folders --outputs chose then
    artifacts = artifacts_for(prof, origin, out)
    warn_rendered(profile, checked, artifacts, "nothing written", strict=strict)
    if check:
        if report_diff(artifacts, out, origin, f"migbake generate {_fix_args(profile, out, origin)}"):
            return EXIT_INVALID
        say(f"{out}: up to date ({plural(len(artifacts), 'file')})")
        return 0
    write_tree(artifacts, out, force=force, origin=origin)
    say(f"wrote {plural(len(artifacts), 'file')} to {out} (profile {prof.name} from {profile_name(profile)})")
    empty = [o for o in origin.outputs if not any(a.path.startswith(o + "/") for a in artifacts)]
    if empty:  # e.g. slurm for a profile without a slurm: section
        say(f"migbake: note: nothing to write in {', '.join(empty)} for this profile", err=True)
    warn_sizes(profile, checked, artifacts, origin)
    return 0


def artifacts_for(prof: NodeProfile, origin: Origin, out: Path) -> list[Artifact]:
    """Every file of OUT for ``prof``: the output folders ``origin`` names (all when none), with the user-data
    forms it asks for (which need cloud-init among them: a usage error otherwise)."""
    if origin.outputs and "cloud-init" not in origin.outputs and (origin.user_data_gzip or origin.user_data_mime):
        raise UsageError("--user-data-gzip and --user-data-mime write into cloud-init/, which the outputs leave out "
                         f"({', '.join(origin.outputs)}): add cloud-init to them", usage=True)
    forms = UserDataForms(origin.user_data_gzip, _mime_part(origin.mime_argument(out) or None))
    return only_outputs(render(prof, forms, origin.layout), origin.outputs)


def seed_layout(prof: NodeProfile, loaded: LoadedProfile, name: str) -> None:
    """A UsageError (``--layout``) unless ``name`` is one of the profile's layout names and its restore reads the
    file the seeds write; located in the profile, with the closest name."""
    names = prof.layout_names
    if not names:
        line, _ = loaded.where("/gpus/0/mig", key=True)
        raise UsageError(f"{name!r}: {loaded.file}:{line}: profile {prof.name} has one unnamed layout (mig.layout); "
                         "--layout chooses one of mig.layouts' names", option="--layout")
    if name not in names:
        at = next(f"/gpus/{i}/mig/layouts" for i, g in enumerate(prof.gpus) if g.layouts)
        line, _ = loaded.where(at, key=True)
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"{name!r}: {loaded.file}:{line}: {at} has no such layout (allowed: {', '.join(names)})"
                         f"{hint}", option="--layout")
    if "file" not in prof.restore.layout_from:
        line, _ = loaded.where("/restore/layout/from", key=True)
        raise UsageError(f"{name!r}: {loaded.file}:{line}: /restore/layout/from ({', '.join(prof.restore.layout_from)})"
                         f" does not name file, so the node would not read {LAYOUT_FILE}, which the seed writes: "
                         "add file to restore.layout.from", option="--layout")


def warn_rendered(profile: Path, checked: ValidationResult, artifacts: list[Artifact], consequence: str, *,
                  strict: bool = False) -> None:
    """The warnings only the rendered files show (``render.rendered_limits``), printed before anything is written,
    located in the profile as validation's; ``strict``: they refuse it (ProfileError ending with ``consequence``)."""
    assert checked.loaded is not None  # a checked profile that has a model was loaded
    catalog = click.get_current_context().ensure_object(CatalogChoice).load()
    later_problems(profile, checked, render_problems(checked.loaded, catalog, artifacts), consequence, strict=strict)


def report_diff(artifacts: list[Artifact], out: Path, origin: Origin, fix: str) -> bool:
    """Print the diff of a stale OUT (and how to fix it); whether OUT is stale."""
    diff = diff_tree(artifacts, out, origin)
    for line in diff:
        say(line)  # a file on disk may have any name and any bytes: each line is escaped
    if diff:
        say(f"migbake: {out} is stale: run `{fix}`", err=True)
    return bool(diff)


def _fix_args(profile: Path | str, out: Path, origin: Origin) -> str:
    args = [str(profile), "-o", str(out)]
    if origin.user_data_gzip:
        args.append("--user-data-gzip")
    if origin.user_data_mime:
        args += ["--user-data-mime", origin.mime_argument(out)]
    if origin.outputs_option:
        args += ["--outputs", ",".join(origin.outputs)]
    if origin.layout:
        args += ["--layout", origin.layout]
    return shlex.join(args)


def _mime_part(mime_part: str | None) -> MimePart | None:
    """The user's own part ``--user-data-mime FILE[:TYPE]`` names, read and typed (the ``user-data`` target makes
    the forms)."""
    if not mime_part:
        return None
    if any(c < " " or c == "\x7f" for c in mime_part):  # CR/LF would end a MIME header: refused, not cleaned
        raise click.BadParameter(f"{mime_part!r} holds a control character (CR, LF, ...)",
                                 param_hint="--user-data-mime")
    src, kind = Path(mime_part), ""
    if not src.is_file() and ":" in mime_part:
        path, kind = mime_part.rsplit(":", 1)
        src = Path(path)
    data = read_bounded(src, mime_parts.MAX_PART_BYTES, UsageError)  # /dev/zero too: never unbounded
    try:
        theirs = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise click.BadParameter(f"cannot read {src}: {e}", param_hint="--user-data-mime") from e
    return mime_parts.user_part(theirs, src.name, kind or None)


def warn_sizes(profile: Path, checked: ValidationResult, artifacts: list[Artifact], origin: Origin) -> None:
    """``ec2-user-data-size`` when the user-data that would be sent is above EC2's limit and the profile or the
    options say EC2 (``render.rendered_limits``): only once the files are written (never under --check), less what
    the profile's validation.ignore sets aside."""
    assert checked.loaded is not None  # a checked profile that has a model was loaded
    problem = ec2_user_data_problem(checked.loaded, artifacts, gzipped=origin.user_data_gzip,
                                    outputs_option=origin.outputs if origin.outputs_option else ())
    if problem is not None:
        later_problems(profile, checked, [problem], "")
