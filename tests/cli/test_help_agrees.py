"""What --help and the docs say a command does is what it does: --force's limits, an unreadable catalog's exit."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import click
import pytest
from support import REPO, cli

from migbake.cli.group import COMMANDS

PROFILE = REPO / "images/h200-inference/node-profile.yaml"
FAILURES = REPO / "docs/failures-and-output.md"


def _force_help(name: str) -> str:
    module, _, attr = COMMANDS[name].partition(":")
    command = getattr(importlib.import_module(module), attr)
    assert isinstance(command, click.Command)
    (option,) = [p for p in command.params if p.name == "force"]
    return str(option.help)


@pytest.mark.parametrize("command", [
    ("generate", str(PROFILE), "-o", "{out}", "--force"),
    ("bake", str(PROFILE), "-o", "{out}", "--force", "--only", "amazon-ebs.golden", "--dry-run",
     "--var", "kubernetes_version=1.35"),
], ids=["generate", "bake"])
def test_force_never_replaces_a_folder_migbake_did_not_create_and_help_says_so(tmp_path: Path,
                                                                                command: tuple[str, ...]) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    code, _, err = cli(*(a.format(out=out) for a in command))
    assert code == 2 and "was not created by migbake" in err, err
    assert (out / "notes.txt").read_text() == "mine\n"
    said = _force_help(command[0])
    assert "Never a folder migbake did not create" in said and "even if migbake did not create" not in said


@pytest.mark.parametrize("form", ["missing", "directory", "fifo"])
def test_an_unreadable_catalog_exits_as_the_docs_say(tmp_path: Path, form: str) -> None:
    path = tmp_path / "catalog.yaml"
    if form == "directory":
        path.mkdir()
    elif form == "fifo":
        os.mkfifo(path)
    code, _, err = cli("--catalog", str(path), "gpus")
    assert "[unreadable]" in err
    rows = [ln for ln in FAILURES.read_text().splitlines() if ln.startswith("|") and "--catalog" in ln]
    assert rows
    for row in rows:
        documented = [*re.findall(r"exit (\d)", row), row.split("|")[2].strip()]
        assert {int(c) for c in documented if c.isdigit()} == {code}, row
    assert code == 2
