"""Helpers of the VM tier: which generated output it boots, and failing (not skipping) in CI."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# the committed output of a real example image (tests/outputs/test_images.py keeps it equal to `generate`)
SAMPLE_OUT = REPO / "images" / "h200-inference" / "generated"
MIG_PARTED = REPO.parent / "shared" / "tools" / "nvidia-mig-parted" / "nvidia-mig-parted"
# the claims every passing `ok` boot makes, whichever mig-parted runs (test_boot.py, test_boot_real.py)
OK_CLAIMS = frozenset({"report-complete", "mig-manager-never-ran", "restore-enabled", "files-installed", "call-order",
                       "restore-before-kubelet", "restore-active", "kubelet-active", "kubelet-started-once",
                       "layout-applied", "manual-stop-refused", "metrics-success"})


def booted_with_the_real_tool() -> None:
    """Skip a boot with the stand-in mig-parted that tests/vm/test_boot_real.py makes with NVIDIA's binary.

    That test boots every example image by both paths (ok twice, the faults) with every claim of the stand-in's
    boot and the binary's own, so with the binary at hand the stand-in's boot of the same output, path and scenario
    adds nothing but minutes. It runs where the binary is absent (a fresh clone) or where the tier is pointed at
    other output ($MIGBAKE_BOOTTEST_OUT).
    """
    if MIG_PARTED.exists() and not os.environ.get("MIGBAKE_BOOTTEST_OUT"):
        pytest.skip("booted with NVIDIA's nvidia-mig-parted by tests/vm/test_boot_real.py (same claims and more)")
HOST_TOOLS = ("debootstrap", "qemu-system-x86_64", "packer", "mkfs.ext4", "debugfs", "mkfs.vfat", "mcopy",
              "sshd", "ssh", "ssh-keygen", "cpio", "apt-get", "apt-cache", "dpkg-deb", "depmod", "modprobe",
              "systemctl", "mount", "shellcheck", "gcc", "ldconfig")


def unavailable(reason: str) -> None:
    """Skip on a developer machine; in CI (CI=true) a missing tool or privilege fails the run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"required in CI (CI=true): {reason}")
    pytest.skip(reason)


def require_vm_host() -> None:
    """Root and every host tool the VM tier uses."""
    if os.geteuid() != 0:
        unavailable("the VM tier needs root (debootstrap, mount --bind, sshd chroot)")
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = [tool for tool in HOST_TOOLS if shutil.which(tool, path=path) is None]
    if missing:
        unavailable(f"missing host tools: {', '.join(missing)}")


# the fleet tests (test_fleet_chroot.py, test_fleet_vm.py): a fake kubectl of the control host that
# records each call, in order, to $KUBECTL_LOG, and the drain call activate.yml makes with its defaults
FAKE_KUBECTL = """#!/bin/sh
# fake kubectl of the control host: records each call, in order
printf '%s\\n' "$*" >>"$KUBECTL_LOG"
echo "node/$2 done"
"""
DRAIN_NODE1 = "drain node1 --ignore-daemonsets --delete-emptydir-data --timeout=900s"


def fake_kubectl(work: Path) -> Path:
    """FAKE_KUBECTL as the executable ``work``/kubectl."""
    kubectl = work / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    return kubectl


def ansible_env(work: Path, **extra: str) -> dict[str, str]:
    """The environment of an ansible-playbook run whose state stays in ``work`` (no colour), plus ``extra``."""
    return {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_HOME": str(work / "ansible-home"),
            "ANSIBLE_LOCAL_TEMP": str(work / "ansible-tmp"), **extra}


class LiveBootLines(logging.Handler):
    """Writes each boot's line (logger ``migbake_boottest.boots``) to the terminal as the boot ends, named for the test.

    pytest captures a test's output, and pytest-xdist's workers report theirs only with the test's result: a tier of
    long boots would print nothing for many minutes. ``uncaptured`` (the capture manager's
    ``global_and_fixture_disabled``, what ``capsys.disabled()`` uses) lets the line through to the process's own
    standard error, which an xdist worker shares with the controller, so ``nox -s vm`` shows it at once.
    """

    def __init__(self, uncaptured: Callable[[], AbstractContextManager[None]]) -> None:
        super().__init__(logging.INFO)
        self._uncaptured = uncaptured

    def emit(self, record: logging.LogRecord) -> None:
        line = live_line(record.getMessage(), os.environ.get("PYTEST_CURRENT_TEST", ""))
        with self._uncaptured():
            sys.stderr.write(line)
            sys.stderr.flush()


def live_line(message: str, current_test: str) -> str:
    """``[vm] TEST: MESSAGE`` on a line of its own; TEST from $PYTEST_CURRENT_TEST (``path::name (call)``)."""
    test = current_test.rsplit(" (", 1)[0] or "?"
    return f"\n[vm] {test}: {message}\n"


@contextmanager
def live_boot_lines_of(config: pytest.Config) -> Iterator[None]:
    """``LiveBootLines`` on the logger ``migbake_boottest.boots`` while the block runs (a session of ``config``)."""
    capture = config.pluginmanager.getplugin("capturemanager")  # None with -p no:capture: nothing to get past
    boots = logging.getLogger("migbake_boottest.boots")
    handler = LiveBootLines(capture.global_and_fixture_disabled if capture is not None else nullcontext)
    boots.addHandler(handler)
    boots.setLevel(logging.INFO)
    try:
        yield
    finally:
        boots.removeHandler(handler)
