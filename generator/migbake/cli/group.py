"""The ``migbake`` command group: which commands there are, and the one place a command's end is decided.

Each command lives in its own module of ``migbake.commands`` (``COMMANDS`` below), imported only
when it runs (click's documented lazy-loading pattern); the top-level ``--help`` lists the commands
from ``SUMMARIES`` and ``--version`` needs none, so neither imports a command module. Other installed
distributions add commands through entry points of the group ``migbake.commands`` (``ENTRY_POINT_GROUP``),
read only for a command that is not one of ``COMMANDS`` and for ``--help``: ``boot-test`` comes so from
migbake-boottest (``generator/boottest``, test-only), and without it says how to install it (``OPTIONAL``).
A command returns its exit code (``None``: 0) and raises ``MigbakeError`` for anything that stops it;
``MigbakeGroup.invoke`` turns every error into its ``report()`` lines on stderr and its ``exit_code``
(tracebacks only with --debug; a ``UsageError`` about the command line is worded as click words its own
usage errors), and every unexpected exception into exit 3. One exit-code table (``exits.EXIT_CODES``)
ends every command's --help.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from migbake import __version__
from migbake.exits import (
    EXIT_CODES,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_PIPE_CLOSED,
    EXIT_USAGE,
    Terminated,
    catch_sigterm,
    die_of_sigterm,
    os_error_line,
    printable,
    silence_stdout,
    stdout_failure,
    write_stdout,
)
from migbake.problems import MigbakeError, UsageError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

# each command and the click command object that defines it, "module:attribute"
COMMANDS = {
    "bake": "migbake.commands.bake:bake",
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

# an entry point of this group names a click command that another distribution adds, "module:attribute"
ENTRY_POINT_GROUP = "migbake.commands"
# the commands of this repository's other distributions: listed by --help whether installed or not, and what
# installs each (from a checkout)
OPTIONAL = {"boot-test": ("migbake-boottest", "pip install ./generator/boottest")}

# the first paragraph of each command's help, which the top-level --help shortens as click would
# (tests/cli/test_help.py: the same table as click's own, from the imported commands)
SUMMARIES = {
    "bake": "Generate, then bake an image with Packer: [init], fmt -check, validate, build.",
    "boot-test": "Boot PROFILE's artifacts in a throwaway VM (QEMU, systemd as PID 1) and check the boot order.",
    "export": "Print PROFILE's layout for use outside the image: the mig-parted config, or (--gpu-operator) "
              "a ConfigMap; or (--ansible) write one Ansible role for several node types.",
    "generate": "Generate the restore artifacts, cloud-init user-data and Packer templates for PROFILE.",
    "gpus": "List the GPU models migbake knows: ids, names, what nvidia-smi prints, PCI ids, MIG profiles.",
    "images": "Regenerate (or --check) every IMAGES_DIR/*/generated from its node-profile.yaml.",
    "import": "Turn an nvidia-mig-parted config (e.g. `nvidia-mig-parted export` of a known-good node) into a "
              "node profile.",
    "layouts": "List every maximal MIG layout of MODEL (no further instance can be added); without MODEL, the models.",
    "preflight": "Check captured nvidia-smi output and/or the Kubernetes node of a node against PROFILE, offline.",
    "show": "Draw each GPU's memory slices with the profile's MIG instances placed on them (`-`: standard input).",
    "validate": "Check node profiles: schema, GPU models, MIG profile names, counts and placement.",
}


def exit_codes_text() -> str:
    """The exit-code table as --help prints it."""
    return "Exit codes:\n\n\b\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)


@functools.cache
def installed_commands() -> dict[str, EntryPoint]:
    """The commands that installed distributions add (entry points of ``ENTRY_POINT_GROUP``), by name."""
    from importlib.metadata import entry_points  # reading every distribution's metadata: only when needed

    return {e.name: e for e in entry_points(group=ENTRY_POINT_GROUP)}


def not_installed(name: str) -> click.Command:
    """A stand-in for ``name``, a command of a distribution that is not installed: whatever its arguments (``--help``
    too), it says what installs it (exit 2, as for any command line that cannot run as given)."""
    distribution, install = OPTIONAL[name]

    def refuse() -> NoReturn:
        raise UsageError(f"{name} is not installed: it comes with the {distribution} distribution; from a checkout "
                         f"of migbake: {install}")

    return click.Command(name, callback=refuse, help=SUMMARIES[name], add_help_option=False,
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


class _State:
    debug = False


def _end(lines: list[str], code: int, *, traceback: bool = True, multiline: bool = False) -> NoReturn:
    """Print the traceback (with --debug), then ``lines`` to stderr, then exit with ``code``.

    Each line is printed escaped (``exits.printable``): a value echoed in it (a file name, a key) cannot
    break it or drive the terminal; ``multiline`` keeps the line breaks of a message made of several.
    """
    if traceback and _State.debug:
        import traceback as tb  # only with --debug: start-up does not pay for it

        tb.print_exc()
    for line in lines:
        click.echo("\n".join(map(printable, line.split("\n"))) if multiline else printable(line), err=True)
    sys.exit(code)


class MigbakeGroup(click.Group):
    """Commands imported on first use; every error of every command ends here."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *OPTIONAL, *installed_commands()})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command table of --help, from ``SUMMARIES``: no command module of ours is imported for it (another
        distribution's command without a summary here is)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        # a stand-in command of the same help shortens it exactly as the real one would
        commands = [click.Command(name, help=SUMMARIES[name]) if name in SUMMARIES else self.get_command(ctx, name)
                    for name in names]
        rows = [(name, c.get_short_help_str(limit)) for name, c in zip(names, commands) if c is not None]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command: click.Command
        if cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name].split(":")
            command = getattr(importlib.import_module(module), attribute)
        elif cmd_name in installed_commands():
            command = installed_commands()[cmd_name].load()
        elif cmd_name in OPTIONAL:
            return not_installed(cmd_name)
        else:
            return None
        command.epilog = exit_codes_text()  # every command's --help ends with the one table
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                          list[str]]:
        """click's, with the nearest command named for an unknown one (``validat``: did you mean 'validate'?)."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)
            if close:
                ctx.fail(f"No such command {name!r}; did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

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
            _end([f"migbake: error: {e.format_message()}{_global_hint(e)}"], e.exit_code, traceback=False,
                 multiline=getattr(e, "multiline", False))  # commands.common.ListedUsageError: a list follows
        except click.ClickException as e:
            _end([f"migbake: error: {e.format_message()}"], e.exit_code, traceback=False)
        except click.Abort:
            _end(["migbake: interrupted"], EXIT_INTERRUPTED, traceback=False)
        sys.exit(code if isinstance(code, int) else 0)

    def _click_usage_error(self, ctx: click.Context, e: UsageError) -> click.UsageError:
        """A usage error the library raised, as click's own for the command that ran: after that command's usage
        line, and for a bad option value ``Invalid value for OPTION: ...`` (what ``click.BadParameter`` says)."""
        name = ctx.invoked_subcommand
        command = self.get_command(ctx, name) if name else None
        where = ctx if command is None else click.Context(command, info_name=name, parent=ctx)
        if e.option:
            return click.BadParameter(str(e), ctx=where, param_hint=e.option)
        return click.UsageError(str(e), ctx=where)

    def invoke(self, ctx: click.Context) -> Any:
        catch_sigterm()  # a cleanup (the writer's temporary folder) runs on SIGTERM too
        try:
            closed = stdout_failure()
            if closed:
                _end([closed], EXIT_USAGE, traceback=False)
            code = super().invoke(ctx)
            write_stdout("")  # a closed pipe or a full disk shows here, not at interpreter exit
        except BrokenPipeError:
            silence_stdout()
            sys.exit(EXIT_PIPE_CLOSED)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except MigbakeError as e:
            if isinstance(e, UsageError) and e.usage:
                raise self._click_usage_error(ctx, e) from e  # worded by main, as click's own
            _end(e.report(), e.exit_code, multiline=e.multiline)
        except KeyboardInterrupt:
            _end(["migbake: interrupted"], EXIT_INTERRUPTED, traceback=False)
        except Terminated:
            click.echo("migbake: terminated (SIGTERM)", err=True)
            die_of_sigterm()
        except OSError as e:  # the system refused a file, or standard output: what and why, in one line
            line = stdout_failure(e) or os_error_line(e)
            if line is None:
                _internal(e)
            _end([line], EXIT_USAGE)
        except Exception as e:
            _internal(e)
        if code:
            sys.exit(code)
        return code


# the options of migbake itself, which go before the command (click reads each option at its own level)
GLOBAL_OPTIONS = ("--debug", "--catalog", "--version")


def _global_hint(e: click.UsageError) -> str:
    """For an option of migbake itself given after the command (``migbake validate P --debug``): where it goes."""
    if not isinstance(e, click.NoSuchOption) or e.option_name not in GLOBAL_OPTIONS or e.ctx is None:
        return ""
    if e.ctx.parent is None:  # migbake's own level: not after a command
        return ""
    if e.option_name == "--version":
        return " --version is an option of migbake itself: `migbake --version`"
    value = " FILE" if e.option_name == "--catalog" else ""
    return (f" {e.option_name} is an option of migbake itself: put it before the command "
            f"(migbake {e.option_name}{value} {e.ctx.info_name} ...)")


def _internal(e: Exception) -> NoReturn:
    _end([f"migbake: internal error: {type(e).__name__}: {e} (run with --debug for a traceback)"], EXIT_INTERNAL)


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
    from migbake.gpu.catalog import CatalogChoice  # only once a command runs: --version and --help skip this

    # the catalog of this command line: a command takes it (ctx.ensure_object) and passes it down; it is read
    # at its first need
    click.get_current_context().obj = CatalogChoice(catalog_file)


if __name__ == "__main__":  # pragma: no cover
    main()
