"""The cached minimal Debian root filesystem (with cloud-init) that every boot test copies."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from migbake_boottest import cache
from migbake_boottest.errors import BootTestError
from migbake_boottest.hostrun import Log, no_log, require_tools, run

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# python3-cffi-backend: debootstrap does not resolve the virtual package python3-cryptography needs.
# slurmd: Debian's own Slurm node daemon (and munge), the real consumer of images/h100-slurm's boots; on
# other boots its unit stays down (ConditionPathExists=/etc/slurm/slurm.conf, which only that fixture writes).
# openssh-server and dbus: the sshd Ansible reaches a running node through, and the bus of systemd-logind,
# which schedules the reboot `shutdown -r 0` asks for (tests/vm/test_fleet_vm.py); both masked on every
# other boot (scenarios.scenario.install_fixtures).
INCLUDE = ("systemd-sysv", "cloud-init", "python3-cffi-backend", "slurmd", "openssh-server", "dbus")
# Bump when the build or the trim changes: the cache entry's name changes with it.
RECIPE = 3


@dataclass(frozen=True)
class BaseRootfs:
    """A finished, trimmed rootfs in the cache. Never modify it: boot tests work on ``fresh_copy``."""

    path: Path

    def fresh_copy(self, dest: Path, *, log: Log = no_log) -> Path:
        """Copy the rootfs to ``dest`` (which must not exist) with ``cp -a``; return ``dest``."""
        if dest.exists():
            raise BootTestError(f"refusing to copy the rootfs over an existing path: {dest}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        run(["cp", "-a", "--", self.path, dest], log=log)
        return dest


def rootfs_path(cache_root: Path) -> Path:
    """Where the cached rootfs lives under ``cache_root``."""
    return cache_root / "rootfs" / f"{SUITE}-cloud-init-r{RECIPE}"


def ensure_rootfs(
    *, cache_root: Path | None = None, force_rebuild: bool = False, mirror: str = MIRROR, log: Log = no_log
) -> BaseRootfs:
    """Return the cached rootfs, building it first (debootstrap, ~60 s) if missing or ``force_rebuild``."""
    final = rootfs_path(cache.cache_dir(cache_root))

    def build(tmp: Path) -> None:
        require_tools("debootstrap")
        start = time.monotonic()
        log(f"debootstrap {SUITE} with {', '.join(INCLUDE)} into {tmp}")
        run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(INCLUDE)}", SUITE, tmp, mirror],
            log=log, timeout_s=1200,
        )
        trim(tmp)
        log(f"rootfs built in {time.monotonic() - start:.1f} s")

    path = cache.build_once(final, build, force=force_rebuild)
    return BaseRootfs(path)


def trim(root: Path) -> None:
    """Drop package caches, apt lists, docs and translations (about half the size, faster mkfs)."""
    for folder in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                   "usr/share/info"):
        for child in (root / folder).glob("*"):
            if child.name not in ("partial", "lock"):
                cache.remove_tree(child)
    for child in (root / "usr/share/locale").glob("*"):
        if child.name != "locale.alias":
            cache.remove_tree(child)
