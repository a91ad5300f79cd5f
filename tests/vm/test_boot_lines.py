"""One line per boot as it ends: its wording (``vm.qemu.boot_line``), and that the VM tier shows it live under
pytest-xdist (tests/vm/conftest.py), not only with the test's result."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from vm_support import live_line

from migbake_boottest.vm.qemu import TIMEOUT_EXIT, BootRun, RunningVm, boot_line

WORK = Path("/var/cache/migbake/work/cloud-init-ok-hopper-20261207-150000-x1")


@pytest.mark.parametrize(("run", "line"), [
    (BootRun(0, 63.4, WORK / "serial-2.log"), "cloud-init-ok-hopper-20261207-150000-x1 boot 2: powered off after 63 s"),
    (BootRun(TIMEOUT_EXIT, 300.0, WORK / "serial-1.log"),
     "cloud-init-ok-hopper-20261207-150000-x1 boot 1: killed at the timeout after 300 s"),
    (BootRun(1, 2.2, WORK / "serial.log"),
     "cloud-init-ok-hopper-20261207-150000-x1 serial.log: QEMU exited 1 after 2 s"),
], ids=["powered-off", "timeout", "qemu-failed"])
def test_boot_line(run: BootRun, line: str) -> None:
    assert boot_line(run) == line


def test_live_line_names_the_test() -> None:
    assert live_line("x boot 1: powered off after 5 s", "tests/vm/test_boot.py::test_a[b c] (call)") == (
        "\n[vm] tests/vm/test_boot.py::test_a[b c]: x boot 1: powered off after 5 s\n")


def test_every_ended_boot_logs_its_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Whatever ran the guest (``qemu.boot``, the fleet's ``qemu.start``), its end is one record."""
    caplog.set_level(logging.INFO, logger="migbake_boottest.boots")
    run = RunningVm(["true"], tmp_path / "serial-1.log", lambda _: None).wait(30)
    assert [r.getMessage() for r in caplog.records if r.name == "migbake_boottest.boots"] == [boot_line(run)]


CONFTEST = '''
import pytest
from vm_support import live_boot_lines_of

@pytest.fixture(scope="session", autouse=True)
def live(pytestconfig):
    with live_boot_lines_of(pytestconfig):
        yield
'''
SLOW_TEST = '''
import logging, time

def test_two_boots():
    for n in (1, 2):
        logging.getLogger("migbake_boottest.boots").info("run boot %d: powered off after 1 s", n)
        time.sleep(3)
'''


def test_the_vm_tier_shows_each_line_as_the_boot_ends(tmp_path: Path) -> None:
    """Under pytest-xdist (``nox -s vm`` runs ``-n 2``) the line reaches the terminal while the test still runs."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_slow.py").write_text(textwrap.dedent(SLOW_TEST))
    env = {"PYTHONPATH": str(Path(__file__).parent), "PATH": "/usr/bin:/bin"}
    seen: dict[str, float] = {}
    with subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "-W", "ignore", str(tmp_path)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("[vm] "):
                seen[line.strip()] = time.monotonic()
        ended = time.monotonic()
    assert proc.returncode == 0
    first = "[vm] test_slow.py::test_two_boots: run boot 1: powered off after 1 s"
    assert set(seen) == {first, first.replace("boot 1", "boot 2")}, seen
    assert ended - seen[first] > 4, "the first boot's line came only with the test's result"
