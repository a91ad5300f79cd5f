"""What several commands share: how a PROFILE argument is read and named, and the GPU model parameter.

The GPU catalog a command uses is the ``CatalogChoice`` the command group made from ``--catalog`` /
``MIGBAKE_CATALOG`` (click's context object: ``ctx.ensure_object(CatalogChoice)``, the packaged catalog when
none was made); a command passes it down to the library. Nothing here prints an error or exits: a failure
is a ``MigbakeError`` (or click's usage error), which the command group (``migbake.cli.group``) reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from migbake.document.files import read_stdin
from migbake.document.loader import MAX_PROFILE_BYTES
from migbake.exits import printable
from migbake.gpu.catalog import PACKAGED, CatalogChoice, GpuModel
from migbake.problems import STDIN_NAME, Problem, ProfileError, UnreadableProfile, set_aside, unreadable
from migbake.profile.nodeprofile import NodeProfile
from migbake.render.onefile import write_file
from migbake.rules.ignore import profile_suppressions
from migbake.rules.validate import ValidationResult, check_bytes, check_file


class ListedUsageError(click.UsageError):
    """A usage error whose message ends with a list migbake wrote, one item a line: the command group keeps
    its line breaks (a value echoed in it is quoted with ``repr``, so it cannot add one)."""

    multiline = True


class ListedBadParameter(click.BadParameter):
    """A bad option value whose message ends with a list migbake wrote (as ``ListedUsageError``)."""

    multiline = True


class NonEmptyPath(click.Path):
    """A path argument that is not the empty string (which names no file: the current folder, to the system)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The path, or a usage error for ``''``."""
        if isinstance(value, str) and value == "":
            self.fail("an empty path names no file", param, ctx)
        return super().convert(value, param, ctx)


# A profile argument: a directory is accepted here so that it is reported like a missing file (exit 2,
# "cannot read the file: it is a directory"), the same way by every command.
PROFILE_PATH = NonEmptyPath(allow_dash=True, path_type=Path)  # "-": standard input

# click 8.2 made ParamType generic; click 8.1 (the declared floor) cannot subscript it at run time
if TYPE_CHECKING:
    _ModelParamType = click.ParamType[GpuModel]  # type: ignore[type-arg, unused-ignore]  # (not generic in 8.1)
else:
    _ModelParamType = click.ParamType


def is_stdin(profile: Path | str) -> bool:
    """Whether a PROFILE argument is ``-`` (standard input)."""
    return str(profile) == "-"


def profile_name(profile: Path | str) -> str:
    """How messages name a PROFILE argument."""
    return STDIN_NAME if is_stdin(profile) else str(profile)


def check_profile(profile: Path | str) -> ValidationResult:
    """Check the profile at ``profile``, or read from standard input when it is ``-``, with this command line's
    catalog."""
    catalog = click.get_current_context().ensure_object(CatalogChoice)
    if is_stdin(profile):
        return check_bytes(read_stdin(MAX_PROFILE_BYTES), STDIN_NAME, catalog)
    return check_file(Path(profile), catalog=catalog)


def valid_profile(profile: Path, consequence: str = "", *, strict: bool = False) -> NodeProfile:
    """The checked profile at ``profile`` (``-``: stdin), its warnings printed; ProfileError when invalid.

    A profile that cannot be read at all is ``UnreadableProfile`` (exit 2, as the exit-code table says).
    ``strict``: a warning is an error too (``--strict``), unless the profile's ``validation.ignore`` sets it aside.
    """
    model = valid_checked(profile, consequence, strict=strict).profile
    assert model is not None  # valid_checked raises for a profile without one
    return model


def valid_checked(profile: Path, consequence: str = "", *, strict: bool = False) -> ValidationResult:
    """``valid_profile``'s check as a whole (the loaded file too: ``later_problems`` locates with it)."""
    checked = check_profile(profile)
    if checked.profile is None or (strict and checked.problems):
        error = UnreadableProfile if unreadable(checked.problems) else ProfileError
        raise error(profile_name(profile), checked.problems, consequence)
    for line in [p.format() for p in checked.problems] + [i.format() for i in checked.ignored]:
        click.echo(line, err=True)
    return checked


def later_problems(profile: Path, checked: ValidationResult, found: list[Problem], consequence: str, *,
                   strict: bool = False) -> None:
    """Print the warnings found after validation (``render.rendered_limits``: once rendered) as validation prints
    its own, less those the profile's ``validation.ignore`` sets aside; an error among them, or any with ``strict``,
    refuses the profile (ProfileError)."""
    assert checked.loaded is not None
    kept, ignored = set_aside(found, profile_suppressions(checked.loaded, checked.problems))
    if (strict and kept) or any(p.severity == "error" for p in kept):  # an error once rendered: nothing written
        raise ProfileError(profile_name(profile), [*checked.problems, *kept], consequence)
    for line in [p.format() for p in kept] + [i.format() for i in ignored]:
        click.echo(line, err=True)


_PROFILE_SUFFIXES = (".profile.yaml", ".profile.yml", ".yaml", ".yml")


def generated_dir(profile: Path) -> Path:
    """Where ``images`` and ``bake`` write a profile's output tree: ``generated/`` beside a node-profile.yaml (or a
    folder given as the profile), ``NAME.generated/`` beside a ``NAME.profile.yaml``."""
    if profile.is_dir() or profile.name in ("node-profile.yaml", "node-profile.yml"):
        return profile.parent / "generated"
    stem = next((profile.name[: -len(x)] for x in _PROFILE_SUFFIXES if profile.name.endswith(x)), profile.name)
    return profile.parent / f"{stem}.generated"


def say(text: str, *, err: bool = False) -> None:
    """One line of a command's own words to the terminal, escaped as a whole (``exits.printable``): a path or a
    name in it with a line break or a terminal control cannot start another line (a forged "wrote ...")."""
    click.echo(printable(text), err=err)


def write_or_print(text: str, output: Path | None, force: bool = True) -> None:
    """``text`` to standard output, or written to ``output`` (``render.onefile``: a regular file atomically, an
    existing one only with ``force``; a device or FIFO written into; anything else refused)."""
    if output is None:
        click.echo(text, nl=False)
        return
    write_file(output, text, replace=force)
    say(f"wrote {output}", err=True)


class GpuModelType(_ModelParamType):
    """A GPU model argument: any name the catalog knows; otherwise the catalog's one explanation (exit 2)."""

    name = "model"

    def __init__(self, *, non_mig: bool = False) -> None:
        self.non_mig = non_mig  # a GPU without MIG is accepted too (import: a DGX Station's display GPU)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> GpuModel:
        """The catalog model ``value`` names."""
        if isinstance(value, GpuModel):
            return value
        context = ctx or click.get_current_context(silent=True)
        catalog = (PACKAGED if context is None else context.ensure_object(CatalogChoice)).load()
        found = catalog.find_gpu(str(value)) if self.non_mig else catalog.find(str(value))
        if found is None:
            self.fail(catalog.unknown_model(str(value))[0], param, ctx)
        return found
