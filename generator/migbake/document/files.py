"""Reading the files a user names: regular files only, bounded, read once; and standard input, bounded."""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from migbake.problems import MigbakeError, UsageError


def _limit_text(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


NOT_REGULAR = "not a regular file (a FIFO, a device, a socket, <(...)); give a file"


def open_regular(path: Path) -> int:
    """A read-only descriptor of ``path`` when it is a regular file; OSError otherwise (``NOT_REGULAR``).

    Opened without blocking (``open()`` of a FIFO waits for a writer forever; O_NOCTTY: a terminal never
    becomes ours), then checked on the open descriptor, so what is read is what was checked.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, NOT_REGULAR, str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most ``limit + 1`` (the caller says what more means), read once; OSError else."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return fh.read(limit + 1)


def read_bounded(path: Path, limit: int, error: type[MigbakeError]) -> bytes:
    """A user file's bytes, at most ``limit``; not a regular file, unreadable or larger raises ``error``.

    Every file a user names is read through here, ``read_regular`` or ``read_stdin``: none is read without
    a bound, none that is not a regular file (a FIFO or a terminal would block, /dev/zero never ends).
    """
    try:
        data = read_regular(path, limit)
    except OSError as err:
        raise error(f"{path}: {err.strerror or err}") from err
    if len(data) > limit:
        raise error(f"{path}: larger than {_limit_text(limit)}")
    return data


def read_stdin(limit: int) -> bytes:
    """Standard input's bytes, at most ``limit + 1`` (the caller says what more means); closed: UsageError."""
    stream = getattr(sys.stdin, "buffer", sys.stdin)
    if stream is None:
        raise UsageError("standard input is closed; give a file, or pipe the profile in")
    try:
        data = stream.read(limit + 1)
    except OSError as err:
        raise UsageError(f"cannot read standard input: {err.strerror or err}") from err
    return data if isinstance(data, bytes) else str(data).encode("utf-8")
