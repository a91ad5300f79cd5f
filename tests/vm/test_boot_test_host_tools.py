"""``migbake boot-test`` checks every host tool it runs first, in one message, before any work.

Run with a stripped PATH: exit 2 at once, every missing tool named with the apt-get line of its package,
nothing built in the cache. ``--help`` names every tool of ``hostrun.HOST_TOOLS``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import needs_boottest  # noqa: F401 (skips this module where the boot test is not installed)
import pytest
from support import IMAGES, REPO, cli

from migbake.exits import EXIT_INVALID
from migbake.rules.validate import check_bytes
from migbake_boottest import host_tools, plan, session
from migbake_boottest.errors import BootTestError
from migbake_boottest.hostrun import HOST_TOOLS, require_tools

PROFILE = REPO / "images/a100-80gb-mixed/node-profile.yaml"


def _sbin(tool: str) -> bool:
    """Found anyway: the check also looks in /usr/sbin and /sbin (root's tools), or an absolute path exists."""
    return any(os.access(Path(d) / tool, os.X_OK) for d in ("/usr/sbin", "/sbin")) or (
        tool.startswith("/") and os.access(tool, os.X_OK))


def test_a_stripped_path_is_refused_before_any_work(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # nothing on PATH but a folder with python in it
    bin_dir.mkdir()
    cache = tmp_path / "cache"
    start = time.monotonic()
    ran = subprocess.run([sys.executable, "-m", "migbake", "boot-test", str(PROFILE), "--cache", str(cache)],
                         capture_output=True, text=True, env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
                         timeout=60, check=False)
    took = time.monotonic() - start
    assert ran.returncode == 2, ran.stderr
    assert ran.stdout == ""
    assert took < 30 and not cache.exists()  # no rootfs, no kernel, no work folder
    line = ran.stderr.strip()
    assert line.startswith("migbake: error: boot-test needs host tools this machine lacks: "), line
    wanted = HOST_TOOLS["every run"] + HOST_TOOLS["packer"] + HOST_TOOLS["cloud-init"]  # both paths by default
    missing = [t for t in wanted if not _sbin(t)]
    assert missing and f"lacks: {', '.join(missing)} (on Debian/Ubuntu: apt-get install -y " in line, line
    assert "qemu-system-x86" in line and "packer" in line
    assert "gcc" not in line  # only with --mig-parted
    assert line.endswith("migbake boot-test --help lists them all")


def test_the_tools_follow_the_options() -> None:
    checked = check_bytes(PROFILE.read_bytes(), "node-profile.yaml")
    assert checked.profile is not None
    cloud = host_tools(plan(checked.profile, paths="cloud-init"))
    assert "mcopy" in cloud and "packer" not in cloud and "gcc" not in cloud
    sim = host_tools(plan(checked.profile, paths="packer", mig_parted=PROFILE))
    assert "packer" in sim and "/usr/sbin/sshd" in sim and "gcc" in sim and "mcopy" not in sim


def test_help_names_every_host_tool() -> None:
    code, out, _ = cli("boot-test", "--help")
    assert code == 0
    text = " ".join(out.split())
    for tool in {t for tools in HOST_TOOLS.values() for t in tools}:
        assert f" {tool}," in text or f" {tool}." in text or f" {tool};" in text, tool
    assert "kubespray" in text


def test_a_boot_test_that_cannot_run_says_so_like_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(**_: object) -> None:
        raise BootTestError("qemu-system-x86_64 is not installed")

    monkeypatch.setattr(session, "prepare_assets", missing)
    code, _, err = cli("boot-test", str(IMAGES[0] / "node-profile.yaml"), "--scenario", "ok", "--path", "packer",
                       "--json")
    assert code == EXIT_INVALID
    assert err == "migbake: error: boot test could not run: qemu-system-x86_64 is not installed\n"


def test_missing_host_tools_say_which_package_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("migbake_boottest.hostrun.shutil.which", lambda name, path=None: None)
    with pytest.raises(BootTestError) as e:
        require_tools("debootstrap", "mkfs.ext4")
    assert str(e.value) == ("missing host tools: debootstrap, mkfs.ext4 (on Debian/Ubuntu: apt-get install -y "
                            "--no-install-recommends debootstrap e2fsprogs; `sudo bash .ci/run` installs every "
                            "tool the tests use)")
    assert "real-tool-recipes" not in str(e.value)
