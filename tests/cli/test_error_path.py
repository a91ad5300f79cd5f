"""One error path: a command raises, the command group (``migbake.cli.group``) says it and picks the exit code.

A new command gets this without doing anything: the commands below are added to ``COMMANDS`` for the
test only and have no handler of their own.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from support import cli

from migbake.cli import group
from migbake.exits import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_INVALID, EXIT_USAGE
from migbake.kubernetes.labels import NodeJsonError
from migbake.node.importer import ImportRefused
from migbake.node.nvidiasmi import CaptureError
from migbake.problems import CatalogError, MigbakeError, OutputError, PackerError, Problem, ProfileError

PROBLEM = Problem("p.yaml", 3, 5, "/gpus/0/model", "unknown GPU model 'x'", "unknown-model")


def _command(action: Callable[[], object]) -> click.Command:
    @click.command("boom")
    def boom() -> object:
        return action()

    return boom


@pytest.fixture
def add_command(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[], object]], None]:
    def add(action: Callable[[], object]) -> None:
        module = types.ModuleType("migbake_test_boom")
        module.boom = _command(action)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "migbake_test_boom", module)
        monkeypatch.setitem(group.COMMANDS, "boom", "migbake_test_boom:boom")

    return add


def _raise(e: BaseException) -> Callable[[], object]:
    def action() -> object:
        raise e

    return action


@pytest.mark.parametrize(("error", "code", "stderr"), [
    (MigbakeError("something"), EXIT_INVALID, "migbake: error: something\n"),
    (OutputError("out: not empty"), EXIT_USAGE, "migbake: error: out: not empty\n"),
    (CaptureError("x.xml: not well-formed XML"), EXIT_USAGE, "migbake: error: x.xml: not well-formed XML\n"),
    (NodeJsonError("n.json: not JSON"), EXIT_USAGE, "migbake: error: n.json: not JSON\n"),
    (PackerError("packer build failed"), EXIT_INVALID, "migbake: error: packer build failed\n"),
    (ProfileError("p.yaml", [PROBLEM], "nothing written"), EXIT_INVALID,
     f"{PROBLEM.format()}\nmigbake: p.yaml: invalid, nothing written\n"),
    (CatalogError("c.yaml", [PROBLEM]), EXIT_INVALID,
     f"{PROBLEM.format()}\nmigbake: error: c.yaml: invalid GPU catalog (1 problem)\n"),
    (ImportRefused("c.yaml", [PROBLEM, PROBLEM]), EXIT_INVALID,
     f"{PROBLEM.format()}\nmigbake: c.yaml: cannot import (1 problem), nothing written\n"),
    (ValueError("a bug"), EXIT_INTERNAL,
     "migbake: internal error: ValueError: a bug (run with --debug for a traceback)\n"),
    (KeyboardInterrupt(), EXIT_INTERRUPTED, "migbake: interrupted\n"),
], ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None)
def test_any_error_of_any_command_is_said_once_with_its_exit_code(
        add_command: Callable[[Callable[[], object]], None], error: BaseException, code: int, stderr: str) -> None:
    add_command(_raise(error))
    assert cli("boom")[::2] == (code, stderr)


def test_debug_adds_the_traceback_before_the_message(add_command: Callable[[Callable[[], object]], None]) -> None:
    add_command(_raise(OutputError("out: not empty")))
    code, _, err = cli("--debug", "boom")
    assert code == EXIT_USAGE
    assert err.startswith("Traceback (most recent call last):") and err.endswith("migbake: error: out: not empty\n")


@pytest.mark.parametrize(("returned", "code"), [(None, 0), (0, 0), (EXIT_INVALID, EXIT_INVALID)])
def test_a_command_ends_with_the_code_it_returns(add_command: Callable[[Callable[[], object]], None],
                                                 returned: int | None, code: int) -> None:
    add_command(lambda: returned)
    assert cli("boom") == (code, "", "")


def test_click_usage_errors_are_worded_like_every_other_error(
        add_command: Callable[[Callable[[], object]], None]) -> None:
    add_command(_raise(click.UsageError("give one of --a or --b")))
    code, _, err = cli("boom")
    assert code == EXIT_USAGE and err.endswith("\nmigbake: error: give one of --a or --b\n")
    assert "Error:" not in err and "Usage: " in err


def test_a_bad_option_is_a_usage_error_worded_like_every_other_error() -> None:
    code, out, err = cli("validate", "--no-such-option", "x.yaml")
    assert (code, out) == (EXIT_USAGE, "")
    assert "\nmigbake: error: No such option" in err and "validate -h' for help" in err


def test_every_error_class_has_an_exit_code_of_the_table() -> None:
    def subclasses(c: type[MigbakeError]) -> set[type[MigbakeError]]:
        return {c} | {s for sub in c.__subclasses__() for s in subclasses(sub)}

    classes = subclasses(MigbakeError)
    assert {CaptureError, NodeJsonError, ImportRefused, ProfileError, OutputError} <= classes
    assert {c.exit_code for c in classes} <= {EXIT_INVALID, EXIT_USAGE}


def test_commands_have_no_error_handlers_of_their_own() -> None:
    commands = Path(group.__file__).parent / "commands"
    for source in commands.glob("*.py"):
        text = source.read_text(encoding="utf-8")
        assert "sys.exit" not in text and "except MigbakeError" not in text and "Error as e:\n        click.echo" \
            not in text, source.name
