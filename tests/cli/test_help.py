"""The top-level --help lists every command with the summary click would give it, without importing the commands."""

from __future__ import annotations

import click
import pytest
from support import CliRunner

from migbake.cli.group import COMMANDS, OPTIONAL, SUMMARIES, MigbakeGroup, main


@pytest.mark.parametrize("width", [50, 80, 120])
def test_the_command_table_of_help_is_the_one_click_makes_from_the_commands(
        width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    lazy = CliRunner().invoke(main, ["--help"], terminal_width=width)
    monkeypatch.setattr(MigbakeGroup, "format_commands", click.Group.format_commands)  # imports every command
    eager = CliRunner().invoke(main, ["--help"], terminal_width=width)
    assert lazy.exit_code == eager.exit_code == 0
    assert "Commands:" in lazy.stdout and lazy.stdout == eager.stdout


def test_each_summary_is_the_first_paragraph_of_its_commands_help() -> None:
    assert sorted(SUMMARIES) == sorted({*COMMANDS, *OPTIONAL})
    ctx = click.Context(main)
    for name, summary in SUMMARIES.items():
        command = main.get_command(ctx, name)
        assert command is not None and command.help is not None and command.short_help is None, name
        assert summary == " ".join(command.help.split("\n\n")[0].split()), name
