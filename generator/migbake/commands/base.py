"""The command group, its error handling and the helpers every command shares.

Every command exits with a code of ``EXIT_CODES`` (printed by ``--help``); a closed standard output
(``migbake gpus | head -1``) ends the command quietly with 141, as a shell reports SIGPIPE.
Tracebacks only with --debug.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from migbake import __version__
from migbake.exits import (
    EXIT_CODES,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_PIPE_CLOSED,
    EXIT_USAGE,
    silence_stdout,
)

if TYPE_CHECKING:
    from migbake.catalog import GpuModel
    from migbake.model import NodeProfile
    from migbake.problems import CatalogError
    from migbake.validate import Checked

F = TypeVar("F", bound=Callable[..., Any])

STDIN_NAME = "<stdin>"


def exit_codes_text() -> str:
    """The exit-code table as --help prints it."""
    return "Exit codes:\n\n\b\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)


class _State:
    debug = False


def guard(fn: F) -> F:
    """Turn migbake's errors into messages and exit codes; tracebacks only with --debug."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from migbake.problems import CatalogError, MigbakeError, OutputError

        try:
            result = fn(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
            return result
        except BrokenPipeError:
            silence_stdout()
            sys.exit(EXIT_PIPE_CLOSED)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except CatalogError as e:
            _catalog_failed(e)
        except OutputError as e:
            _debug_traceback()
            click.echo(f"migbake: error: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except MigbakeError as e:
            _debug_traceback()
            click.echo(f"migbake: error: {e}", err=True)
            sys.exit(EXIT_INVALID)
        except KeyboardInterrupt:
            click.echo("migbake: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Exception as e:
            _debug_traceback()
            click.echo(f"migbake: internal error: {type(e).__name__}: {e} (run with --debug for a traceback)",
                       err=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]


def _catalog_failed(e: CatalogError) -> NoReturn:
    """An invalid --catalog file: its problems, one line each, then exit 1."""
    _debug_traceback()
    for p in e.problems:
        click.echo(p.format(), err=True)
    click.echo(f"migbake: error: {e}", err=True)
    sys.exit(EXIT_INVALID)


def _debug_traceback() -> None:
    if _State.debug:
        import traceback  # only with --debug: start-up does not pay for it

        traceback.print_exc()


def is_stdin(profile: Path | str) -> bool:
    """Whether a PROFILE argument is ``-`` (standard input)."""
    return str(profile) == "-"


def profile_name(profile: Path | str) -> str:
    """How messages name a PROFILE argument."""
    return STDIN_NAME if is_stdin(profile) else str(profile)


def check_profile(profile: Path | str) -> Checked:
    """Check the profile at ``profile``, or read from standard input when it is ``-``."""
    from migbake.profile import MAX_PROFILE_BYTES
    from migbake.validate import check_bytes, check_file

    if is_stdin(profile):
        data: bytes = sys.stdin.buffer.read(MAX_PROFILE_BYTES + 1)
        return check_bytes(data, STDIN_NAME)
    return check_file(Path(profile))


def valid_profile(profile: Path, consequence: str = "") -> NodeProfile:
    """The checked profile at ``profile`` (``-``: stdin); its problems go to stderr, and an invalid one exits 1."""
    checked = check_profile(profile)
    for p in checked.problems:
        click.echo(p.format(), err=True)
    if checked.profile is None:
        click.echo(f"migbake: {profile_name(profile)}: invalid" + (f", {consequence}" if consequence else ""),
                   err=True)
        sys.exit(EXIT_INVALID)
    return checked.profile


# each command and the module that defines it: a command's module (and what it imports: Jinja2, the
# Packer wrapper, the boot test) loads only when that command runs, or when --help lists it
COMMANDS = {
    "bake": "migbake.commands.bake",
    "boot-test": "migbake.commands.bake",
    "export": "migbake.commands.node",
    "generate": "migbake.commands.profiles",
    "gpus": "migbake.commands.catalog",
    "images": "migbake.commands.profiles",
    "import": "migbake.commands.node",
    "layouts": "migbake.commands.catalog",
    "preflight": "migbake.commands.node",
    "show": "migbake.commands.profiles",
    "validate": "migbake.commands.profiles",
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use (click's documented lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            importlib.import_module(COMMANDS[cmd_name])  # its @main.command() adds it to this group
        command = self.commands.get(cmd_name)
        if command is not None:
            command.epilog = exit_codes_text()  # every command's --help ends with the one table
        return command


class GpuModelType(click.ParamType["GpuModel"]):
    """A GPU model argument: any name the catalog knows; otherwise the catalog's one explanation (exit 2)."""

    name = "model"

    def __init__(self, *, non_mig: bool = False) -> None:
        self.non_mig = non_mig  # a GPU without MIG is accepted too (import: a DGX Station's display GPU)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> GpuModel:
        """The catalog model ``value`` names."""
        from migbake.catalog import GpuModel, load_catalog
        from migbake.problems import CatalogError

        if isinstance(value, GpuModel):
            return value
        try:
            catalog = load_catalog()
        except CatalogError as e:  # parsing arguments happens before the command's guard
            _catalog_failed(e)
        found = catalog.find_gpu(str(value)) if self.non_mig else catalog.find(str(value))
        if found is None:
            self.fail(catalog.unknown_model(str(value))[0], param, ctx)
        return found


# A profile argument: a directory is accepted here so that it is reported like a missing file (exit 1,
# "cannot read the file: it is a directory"), the same way by every command.
PROFILE_PATH = click.Path(allow_dash=True, path_type=Path)  # "-": standard input


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=exit_codes_text())
@click.version_option(__version__, "--version", prog_name="migbake")
@click.option("--debug", is_flag=True, help="Show a traceback when something fails.")
@click.option("--catalog", "catalog_file", metavar="FILE", type=click.Path(path_type=Path), envvar="MIGBAKE_CATALOG",
              help="A GPU catalog file (the format of migbake's own, schemas/mig-catalog.schema.json) whose models "
                   "are added to the packaged ones, replacing those with the same id. Default: $MIGBAKE_CATALOG.")
def main(debug: bool, catalog_file: Path | None) -> None:
    """Bake NVIDIA MIG layouts into golden images and first-boot user-data.

    A node profile (YAML) says which GPUs a node has and which MIG layout to restore. migbake
    validates it (schema, profile names, counts, exact placement) and generates the
    nvidia-mig-parted config, a oneshot restore unit ordered before kubelet, the kubelet drop-in,
    cloud-init user-data, Packer templates and provisioner scripts, and verify/uninstall/capture
    scripts. PROFILE may be `-` (standard input) wherever one profile is read.
    """
    _State.debug = debug or os.environ.get("MIGBAKE_DEBUG") == "1"
    if catalog_file is not None:
        from migbake.catalog import use_catalog_file

        use_catalog_file(catalog_file)
        click.get_current_context().call_on_close(lambda: use_catalog_file(None))


def plural(n: int, word: str) -> str:
    """``1 file``, ``2 files``."""
    return f"{n} {word}{'' if n == 1 else 's'}"
