"""Reading the files a user names: regular files only, bounded, read once; and standard input, bounded."""

from __future__ import annotations

import errno
import os
import select
import stat
import sys
import time
from pathlib import Path

from migbake.problems import MigbakeError, UsageError


def _limit_text(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


NOT_REGULAR = "not a regular file (a FIFO, a device, a socket, <(...)); give a file"


def _open_nonblocking(path: Path) -> tuple[int, int]:
    """A read-only descriptor of ``path`` and its mode, opened without blocking (``open()`` of a FIFO waits for a
    writer forever; O_NOCTTY: a terminal never becomes ours), so that what is read is what the mode says."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        return fd, os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: Path) -> int:
    """A read-only descriptor of ``path`` when it is a regular file; OSError otherwise (``NOT_REGULAR``).
    Checked on the open descriptor (``_open_nonblocking``), so what is read is what was checked."""
    fd, mode = _open_nonblocking(path)
    try:
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


# how long a pipe (``<(kubectl get ... -o json)``, a FIFO) is waited on for the rest of its output: kubectl against a
# slow API server answers within its own 30 s default request timeout plus the time to print
PIPE_SECONDS = 120.0
NOT_READABLE_KIND = "not a regular file or a pipe (a device, a socket); give a file, or <(kubectl ...)"


def read_file_or_pipe(path: Path, limit: int, error: type[MigbakeError]) -> bytes:
    """A user file's bytes, or a pipe's (process substitution ``<(kubectl get ... -o json)``, a FIFO), at most
    ``limit``: a pipe is read until its writer closes it, for at most ``PIPE_SECONDS``; a bound hit (size or time),
    an unreadable file, a device or a socket raises ``error`` saying which. Read once, as ``read_bounded``."""
    try:
        fd, mode = _open_nonblocking(path)
    except OSError as err:
        raise error(f"{path}: {err.strerror or err}") from err
    try:
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read(limit + 1)
        elif stat.S_ISFIFO(mode):
            data = _read_pipe(fd, path, limit, error)
        else:
            raise error(f"{path}: {os.strerror(errno.EISDIR) if stat.S_ISDIR(mode) else NOT_READABLE_KIND}")
    except OSError as err:
        raise error(f"{path}: {err.strerror or err}") from err
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error(f"{path}: larger than {_limit_text(limit)}" + (" (read from a pipe: stopped there)"
                                                                   if stat.S_ISFIFO(mode) else ""))
    return data


def _read_pipe(fd: int, path: Path, limit: int, error: type[MigbakeError]) -> bytes:
    """At most ``limit + 1`` bytes of the pipe ``fd`` (opened without blocking), until its writer closes it.

    poll() of a FIFO opened for reading reports no hang-up before a writer first opens it (Linux: pipe_poll
    compares the writer count seen at open), so a named FIFO whose writer starts later is waited for, within the
    same time bound."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    deadline = time.monotonic() + PIPE_SECONDS
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        left = deadline - time.monotonic()
        if left <= 0:
            raise error(f"{path}: the pipe did not end within {PIPE_SECONDS:g} seconds ({size} bytes read); "
                        "save the command's output to a file and give that")
        if not poller.poll(max(1, int(left * 1000))):
            continue
        try:
            chunk = os.read(fd, min(65536, limit + 1 - size))
        except BlockingIOError:
            continue
        if not chunk:  # the writer closed it: the end
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
