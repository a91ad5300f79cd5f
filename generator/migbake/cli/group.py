"""The ``migbake`` command group: which commands there are, and the one place a command's end is decided.

Each command lives in its own module of ``migbake.commands`` (``COMMANDS`` below), imported only
when it runs or when ``--help`` lists it: click's documented lazy-loading pattern. A command returns
its exit code (``None``: 0) and raises ``MigbakeError`` for anything that stops it; ``MigbakeGroup.invoke``
turns every error into its ``report()`` lines on stderr and its ``exit_code`` (tracebacks only with
--debug), and every unexpected exception into exit 3. One exit-code table (``exits.EXIT_CODES``) ends
every command's --help.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from migbake import __version__
from migbake.exits import (
    EXIT_CODES,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_PIPE_CLOSED,
    silence_stdout,
)
from migbake.problems import MigbakeError

# each command and the click command object that defines it, "module:attribute"
COMMANDS = {
    "bake": "migbake.commands.bake:bake",
    "boot-test": "migbake.commands.boot_test:boot_test",
    "export": "migbake.commands.export:export",
    "generate": "migbake.commands.generate:generate",
    "gpus": "migbake.commands.gpus:gpus",
    "images": "migbake.commands.images:images",
    "import": "migbake.commands.import_:import_",
    "layouts": "migbake.commands.layouts:layouts",
    "preflight": "migbake.commands.preflight:preflight",
    "show": "migbake.commands.show:show",
    "validate": "migbake.commands.validate:validate",
}


def exit_codes_text() -> str:
    """The exit-code table as --help prints it."""
    return "Exit codes:\n\n\b\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)


class _State:
    debug = False


def _end(lines: list[str], code: int, *, traceback: bool = True) -> NoReturn:
    """Print the traceback (with --debug), then ``lines`` to stderr, then exit with ``code``."""
    if traceback and _State.debug:
        import traceback as tb  # only with --debug: start-up does not pay for it

        tb.print_exc()
    for line in lines:
        click.echo(line, err=True)
    sys.exit(code)


class MigbakeGroup(click.Group):
    """Commands imported on first use; every error of every command ends here."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name].split(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        command.epilog = exit_codes_text()  # every command's --help ends with the one table
        return command

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """click's main, with its usage errors worded like every other error: ``migbake: error: ...`` (exit 2)."""
        run: Any = super().main  # click types main() by overloads on standalone_mode
        if not standalone_mode:
            return run(*args, standalone_mode=False, **kwargs)
        try:
            code = run(*args, standalone_mode=False, **kwargs)
        except click.UsageError as e:
            if e.ctx is not None:
                hint = ""
                if e.ctx.command.get_help_option(e.ctx) is not None:
                    hint = f"Try '{e.ctx.command_path} {e.ctx.help_option_names[0]}' for help.\n"
                click.echo(f"{e.ctx.get_usage()}\n{hint}", err=True)
            _end([f"migbake: error: {e.format_message()}"], e.exit_code, traceback=False)
        except click.ClickException as e:
            _end([f"migbake: error: {e.format_message()}"], e.exit_code, traceback=False)
        except click.Abort:
            _end(["migbake: interrupted"], EXIT_INTERRUPTED, traceback=False)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            code = super().invoke(ctx)
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        except BrokenPipeError:
            silence_stdout()
            sys.exit(EXIT_PIPE_CLOSED)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except MigbakeError as e:
            _end(e.report(), e.exit_code)
        except KeyboardInterrupt:
            _end(["migbake: interrupted"], EXIT_INTERRUPTED, traceback=False)
        except Exception as e:
            _end([f"migbake: internal error: {type(e).__name__}: {e} (run with --debug for a traceback)"],
                 EXIT_INTERNAL)
        if code:
            sys.exit(code)
        return code


@click.group(cls=MigbakeGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=exit_codes_text())
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
        from migbake.gpu.catalog import use_catalog_file

        use_catalog_file(catalog_file)
        click.get_current_context().call_on_close(lambda: use_catalog_file(None))


if __name__ == "__main__":  # pragma: no cover
    main()
