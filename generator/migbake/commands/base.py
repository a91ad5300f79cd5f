"""The command group, its error handling and the helpers every command shares.

Every command exits with a code of ``EXIT_CODES`` (printed by ``--help``); a closed standard output
(``migbake gpus | head -1``) ends the command quietly with 141, as a shell reports SIGPIPE.
Tracebacks only with --debug.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from migbake import __version__

if TYPE_CHECKING:
    from migbake.model import NodeProfile
    from migbake.validate import Checked

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130
EXIT_PIPE_CLOSED = 141
# one table for every command: the README's and `--help`'s, tested command by command
EXIT_CODES = (
    (0, "success: valid, written, up to date, node ready, image baked"),
    (1, "invalid profile or input, stale output (--check), node not ready, a failed Packer step"),
    (2, "usage: bad options, an unreadable file, an output directory migbake will not replace"),
    (3, "internal error (--debug shows the traceback)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_PIPE_CLOSED, "standard output closed early (piped into head): stops quietly"),
)
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
        from migbake.problems import MigbakeError, OutputError

        try:
            result = fn(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
            return result
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(EXIT_PIPE_CLOSED)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
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


def _debug_traceback() -> None:
    if _State.debug:
        traceback.print_exc()


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit does not complain about the pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (tests' captured output)
        pass


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=exit_codes_text())
@click.version_option(__version__, "--version", prog_name="migbake")
@click.option("--debug", is_flag=True, help="Show a traceback when something fails.")
def main(debug: bool) -> None:
    """Bake NVIDIA MIG layouts into golden images and first-boot user-data.

    A node profile (YAML) says which GPUs a node has and which MIG layout to restore. migbake
    validates it (schema, profile names, counts, exact placement) and generates the
    nvidia-mig-parted config, a oneshot restore unit ordered before kubelet, the kubelet drop-in,
    cloud-init user-data, Packer templates and provisioner scripts, and verify/uninstall/capture
    scripts. PROFILE may be `-` (standard input) wherever one profile is read.
    """
    _State.debug = debug or os.environ.get("MIGBAKE_DEBUG") == "1"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
