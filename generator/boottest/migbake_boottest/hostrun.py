"""Running host commands for the boot tests: logged, captured, failures raised as BootTestError."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from migbake_boottest.errors import BootTestError

Log = Callable[[str], None]


def no_log(_: str) -> None:
    """A ``log`` callback that drops every message."""


# the Debian package of each host tool the boot test runs
TOOL_PACKAGES = {"mkfs.ext4": "e2fsprogs", "debugfs": "e2fsprogs", "mkfs.vfat": "dosfstools", "mcopy": "mtools",
                 "debootstrap": "debootstrap", "qemu-system-x86_64": "qemu-system-x86", "sshd": "openssh-server",
                 "/usr/sbin/sshd": "openssh-server", "ssh-keygen": "openssh-client", "ssh": "openssh-client",
                 "packer": "packer", "gcc": "gcc", "depmod": "kmod", "modprobe": "kmod", "cpio": "cpio",
                 "mount": "util-linux", "umount": "util-linux", "gzip": "gzip", "/bin/busybox": "busybox",
                 "apt-get": "apt", "apt-cache": "apt", "dpkg-deb": "dpkg", "systemctl": "systemd", "cp": "coreutils",
                 "find": "findutils", "bash": "bash", "ldconfig": "libc-bin", "make": "make"}
# every host tool a boot test runs, by what needs it (vm.*, simgpu.build, simgpu.guest, scenarios):
# each run builds or reuses the cached rootfs (debootstrap) and kernel + initramfs (apt, dpkg-deb, kmod, cpio,
# gzip, busybox), enables fixture units (systemctl --root), writes and reads the disk (mkfs.ext4, debugfs) and
# boots it (QEMU); the Packer path chroots a real packer build through a private sshd; the cloud-init path
# writes a NoCloud seed (mkfs.vfat, mcopy); NVIDIA's mig-parted runs over the simulated GPU, built with gcc
HOST_TOOLS: dict[str, tuple[str, ...]] = {
    "every run": ("qemu-system-x86_64", "mkfs.ext4", "debugfs", "systemctl", "cp", "bash", "find", "debootstrap",
                  "apt-get", "apt-cache", "dpkg-deb", "depmod", "modprobe", "cpio", "gzip", "/bin/busybox"),
    "packer": ("packer", "/usr/sbin/sshd", "ssh-keygen", "ssh", "mount", "umount"),
    "cloud-init": ("mkfs.vfat", "mcopy"),
    "mig-parted": ("gcc", "ldconfig"),
    "driver-container": ("make",),  # drivercontainer.kmod: the dummy nvidia modules
}


def missing_tools(names: tuple[str, ...] | list[str]) -> list[str]:
    """The tools of ``names`` that are not on PATH (or in /usr/sbin, /sbin), in the order given."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [n for n in names if shutil.which(n, path=path) is None]


def install_hint(missing: list[str]) -> str:
    """How to get ``missing`` tools: the apt-get line of their Debian packages."""
    packages = sorted({TOOL_PACKAGES[n] for n in missing if n in TOOL_PACKAGES})
    how = f"on Debian/Ubuntu: apt-get install -y --no-install-recommends {' '.join(packages)}; " if packages else ""
    return f"{how}`sudo bash .ci/run` installs every tool the tests use"


def require_tools(*names: str) -> None:
    """Raise BootTestError naming every host tool of ``names`` that is not on PATH (or sbin), and its package."""
    missing = missing_tools(names)
    if missing:
        raise BootTestError(f"missing host tools: {', '.join(missing)} ({install_hint(missing)})")


def run(
    cmd: Sequence[str | Path],
    *,
    log: Log,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` with captured output; with ``check``, a non-zero exit raises BootTestError."""
    argv = [str(c) for c in cmd]
    shown = shlex.join(argv)
    log(f"$ {shown}")
    full_env = None if env is None else {**os.environ, **env}
    start = time.monotonic()
    try:
        proc = subprocess.run(
            argv, cwd=cwd, env=full_env, timeout=timeout_s, capture_output=True, text=True,
            errors="replace", stdin=subprocess.DEVNULL, check=False,
        )
    except FileNotFoundError as exc:
        raise BootTestError(f"cannot run {argv[0]!r}: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise BootTestError(f"timed out after {timeout_s} s: {shown}") from exc
    if check and proc.returncode != 0:
        raise BootTestError(
            f"command failed (exit {proc.returncode}, {time.monotonic() - start:.1f} s): {shown}\n"
            + tail(proc.stdout + proc.stderr)
        )
    return proc


def tail(text: str, lines: int = 25) -> str:
    """The last ``lines`` lines of ``text``, for error messages."""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])
