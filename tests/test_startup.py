"""Start-up stays light: a command loads only what it needs (measured in benchmarks/, guarded here)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from support import IMAGES, REPO, CliRunner

from migbake.cli.group import COMMANDS, OPTIONAL, SUMMARIES, MigbakeGroup, main

PROBE = """
import json, sys
from migbake.cli.entry import run
sys.argv[0] = "migbake"
try:
    run(prog_name="migbake")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
CLICK_PATH = "import sys; from migbake.cli.group import main; sys.argv[0] = 'migbake'; main(prog_name='migbake')"
ENTRY_PATH = "import sys; from migbake.cli.entry import run; sys.argv[0] = 'migbake'; run(prog_name='migbake')"
ENV = {"PYTHONPATH": str(REPO / "generator"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
HEAVY = ("jsonschema", "jinja2", "migbake_boottest", "migbake.bake.packer", "migbake.render.tree",
         "migbake.node.importer",
         "migbake.commands.bake", "migbake.commands.import_",
         "migbake.commands.export", "migbake.commands.generate", "migbake.commands.preflight",
         "importlib.metadata")  # the last: reading every installed distribution for its entry points


def loaded_modules(*args: str) -> set[str]:
    """The modules a fresh ``migbake ARGS`` process has imported when it ends."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=False,
                          env=ENV, cwd=REPO)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY
                  or any(m.startswith(h + ".") for h in HEAVY))


def test_validate_of_a_valid_profile_loads_neither_jsonschema_nor_jinja_nor_click() -> None:
    modules = loaded_modules("validate", str(IMAGES[0] / "node-profile.yaml"))
    assert heavy(modules) == [] and "click" not in modules


def test_version_and_gpus_load_no_command_they_do_not_run() -> None:
    assert heavy(loaded_modules("--version")) == []
    assert heavy(loaded_modules("gpus")) == []


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["-h"]])
def test_top_level_version_and_help_import_no_command_module(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=False,
                          env=ENV, cwd=REPO)
    modules = set(json.loads(proc.stderr.strip().splitlines()[-1]))
    assert "click" in modules and "migbake.cli.group" in modules  # the probe ran the click group
    assert ("migbake, version" if args == ["--version"] else "validate   Check node profiles") in proc.stdout
    assert sorted(m for m in modules if m == "migbake.commands" or m.startswith("migbake.commands.")) == []
    assert "jinja2" not in modules and "jsonschema" not in modules


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


def test_an_invalid_profile_still_gets_jsonschema_messages(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\ngpus: []\nrestore: {timeout_seconds: 'soon'}\n")
    assert "jsonschema" in loaded_modules("validate", str(bad))


def test_every_command_is_listed_in_one_place_and_has_a_module_of_its_own() -> None:
    commands_dir = REPO / "generator" / "migbake" / "commands"
    helpers = {"__init__", "common"}
    assert {p.stem for p in commands_dir.glob("*.py")} - helpers == {
        target.split(":")[0].rsplit(".", 1)[1] for target in COMMANDS.values()}
    for name, target in COMMANDS.items():
        module = importlib.import_module(target.split(":")[0])
        defined = [c for c in vars(module).values() if isinstance(c, click.Command)
                   and getattr(c.callback, "__module__", "") == module.__name__]
        assert [c.name for c in defined] == [name], target
    ctx = click.Context(main)
    assert all(main.get_command(ctx, name) is not None for name in COMMANDS)


def both_paths(*args: str) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    """``migbake ARGS`` through the console entry (quick path) and through the click group."""
    return tuple(subprocess.run([sys.executable, "-c", code, *args], capture_output=True, check=False, env=ENV,
                                cwd=REPO) for code in (ENTRY_PATH, CLICK_PATH))  # type: ignore[return-value]


CASES = sorted((REPO / "tests" / "cases").glob("*/*/node-profile.yaml"))


@pytest.mark.parametrize("args", [
    [str(p / "node-profile.yaml") for p in IMAGES],  # valid
    [str(p.relative_to(REPO)) for p in CASES],  # every invalid and warning case, one run
    ["images"],  # a directory
    ["tests/cases/invalid/alias-bomb/node-profile.yaml", "no-such-file.yaml"],
    ["tests/fixtures"],  # a directory without profiles: a usage error, said by click
    ["validate"],  # a file called validate (missing)
], ids=["valid", "corpus", "directory", "missing-file", "directory-without-profiles", "odd-name"])
def test_quick_validate_says_exactly_what_the_click_command_says(args: list[str]) -> None:
    quick, full = both_paths("validate", *args)
    assert (quick.returncode, quick.stdout, quick.stderr) == (full.returncode, full.stdout, full.stderr)


def test_quick_validate_takes_only_plain_validate_calls() -> None:
    from migbake.cli.entry import quick_validate

    profile = str(IMAGES[0] / "node-profile.yaml")
    for args in (["validate"], ["validate", "-q", profile], ["validate", profile, "--format", "json"],
                 ["validate", "-"], ["generate", profile], ["--debug", "validate", profile]):
        assert quick_validate(args) is None, args
