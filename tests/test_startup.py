"""Start-up stays light: a command loads only what it needs (measured in benchmarks/, guarded here)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import click
from support import IMAGES, REPO

from migbake.commands.base import COMMANDS, main

PROBE = """
import json, sys
from migbake.cli import main
try:
    main(sys.argv[1:], prog_name="migbake")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
HEAVY = ("jsonschema", "jinja2", "migbake.boottest", "migbake.packer", "migbake.render", "migbake.importer",
         "migbake.commands.bake", "migbake.commands.node")


def loaded_modules(*args: str) -> set[str]:
    """The modules a fresh ``migbake ARGS`` process has imported when it ends."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(REPO / "generator"), "PATH": "/usr/bin:/bin"}, cwd=REPO)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY
                  or any(m.startswith(h + ".") for h in HEAVY))


def test_validate_of_a_valid_profile_loads_neither_jsonschema_nor_jinja() -> None:
    assert heavy(loaded_modules("validate", str(IMAGES[0] / "node-profile.yaml"))) == []


def test_version_and_gpus_load_no_command_they_do_not_run() -> None:
    assert heavy(loaded_modules("--version")) == []
    assert heavy(loaded_modules("gpus")) == []


def test_an_invalid_profile_still_gets_jsonschema_messages(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\ngpus: []\nrestore: {timeout_seconds: 'soon'}\n")
    assert "jsonschema" in loaded_modules("validate", str(bad))


def test_every_command_is_listed_in_one_place() -> None:
    modules = {importlib.import_module(m) for m in set(COMMANDS.values())}
    defined = {c.name for mod in modules for c in vars(mod).values() if isinstance(c, click.Command)
               and c is not main}
    assert defined == set(COMMANDS)
    ctx = click.Context(main)
    assert all(main.get_command(ctx, name) is not None for name in COMMANDS)
