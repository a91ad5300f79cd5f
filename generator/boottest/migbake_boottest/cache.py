"""Where build caches live, and building a cached directory once, atomically, under a lock."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_CACHE = Path("/var/cache/migbake")


def cache_dir(override: Path | None = None) -> Path:
    """The cache root: ``override``, else ``$MIGBAKE_CACHE``, else /var/cache/migbake (created).

    Not under /tmp: sshd refuses a ChrootDirectory below a world-writable directory.
    """
    root = override or Path(os.environ.get("MIGBAKE_CACHE") or DEFAULT_CACHE)
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a lock file), so parallel runs build a cache entry once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def unmount_below(path: Path) -> None:
    """Lazily unmount every mount at or below ``path`` (left by an interrupted debootstrap)."""
    prefix = str(path.resolve())
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        points = [line.split()[1].replace("\\040", " ") for line in mounts]
    for point in sorted((p for p in points if p == prefix or p.startswith(prefix + "/")), reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


def remove_tree(path: Path) -> None:
    """Remove ``path`` (a directory tree or a file) if it exists, unmounting anything below it first."""
    if path.is_dir() and not path.is_symlink():
        unmount_below(path)
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def build_once(final: Path, build: Callable[[Path], None], *, force: bool = False) -> Path:
    """Return ``final``, first building it with ``build(final.tmp)`` and renaming, unless it exists.

    A crashed earlier build leaves only ``final.tmp``, which is thrown away: ``final`` exists only complete.
    """
    with locked(final.with_name(final.name + ".lock")):
        if force:
            remove_tree(final)
        if final.exists():
            return final
        tmp = final.with_name(final.name + ".tmp")
        remove_tree(tmp)
        build(tmp)
        tmp.rename(final)
    return final
