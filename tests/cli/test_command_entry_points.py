"""Commands of other distributions: migbake's command group loads them from the entry points of the group
``migbake.commands``, lazily; a command of this repository's other distribution (``boot-test``, in
generator/boottest) that is not installed is still listed, and says how to install it (exit 2)."""

from __future__ import annotations

import sys
import types
from importlib.metadata import EntryPoint

import click
import pytest
from support import IMAGES, cli

from migbake.cli import group
from migbake.exits import EXIT_USAGE

NOT_INSTALLED = ("migbake: error: boot-test is not installed: it comes with the migbake-boottest distribution; "
                 "from a checkout of migbake: pip install ./generator/boottest\n")


def _entry_points(monkeypatch: pytest.MonkeyPatch, **commands: str) -> None:
    """Installed distributions that declare exactly ``commands`` (name: "module:attribute")."""
    found = {name.replace("_", "-"): EntryPoint(name.replace("_", "-"), value, group.ENTRY_POINT_GROUP)
             for name, value in commands.items()}
    monkeypatch.setattr(group, "installed_commands", lambda: found)


@pytest.fixture
def hello(monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution whose entry point adds ``migbake hello``."""

    @click.command("hello")
    @click.argument("name")
    def command(name: str) -> None:
        """Say hello to NAME."""
        click.echo(f"hello {name}")

    module = types.ModuleType("migbake_test_plugin")
    module.hello = command  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "migbake_test_plugin", module)
    _entry_points(monkeypatch, hello="migbake_test_plugin:hello", validate="migbake_test_plugin:hello")


def test_an_installed_command_is_listed_and_runs(hello: None) -> None:
    code, out, _ = cli("--help")
    assert code == 0 and "\n  hello      Say hello to NAME.\n" in out
    assert cli("hello", "you") == (0, "hello you\n", "")
    code, out, _ = cli("hello", "--help")
    assert code == 0 and "hello [OPTIONS] NAME" in out and "Exit codes:" in out


def test_a_command_of_migbake_wins_over_an_entry_point_of_the_same_name(hello: None) -> None:
    code, out, _ = cli("validate", str(IMAGES[0] / "node-profile.yaml"))
    assert code == 0 and "hello" not in out


def test_boot_test_without_its_distribution_is_listed_and_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _entry_points(monkeypatch)
    code, out, _ = cli("--help")
    assert code == 0 and "\n  boot-test  Boot PROFILE's artifacts in a throwaway VM" in out
    for args in (["--help"], [], [str(IMAGES[0] / "node-profile.yaml"), "--scenario", "ok"]):
        assert cli("boot-test", *args) == (EXIT_USAGE, "", NOT_INSTALLED), args


def test_the_boot_test_distribution_adds_boot_test_through_its_entry_point() -> None:
    import needs_boottest  # noqa: F401 (skips this test where the boot test is not installed)

    from migbake_boottest.command import boot_test

    assert group.installed_commands()["boot-test"].value == "migbake_boottest.command:boot_test"
    assert group.main.get_command(click.Context(group.main), "boot-test") is boot_test
