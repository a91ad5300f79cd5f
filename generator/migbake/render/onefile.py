"""One file a command writes with ``-o`` (``export``, ``import``): what is at the path decides how.

Nothing there, or a regular file (replaced only where the command allows it): the text is written to a
temporary file beside it and renamed over the path, so the path is never half-written. A character
device or a FIFO (``/dev/null``, ``/dev/stdout`` on a terminal or a pipe, a named pipe), or a link to
one: opened and written into, so the device stays a device. Anything else is refused, as ``generate``
refuses an OUT it must not replace (``write``): a folder, a block device, a socket, a link to anything
else (migbake never replaces a link, nor creates or replaces a file through one). What is at the path
is judged again just before the rename.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from migbake.exits import printable
from migbake.problems import OutputError

_STREAMS = (stat.S_ISCHR, stat.S_ISFIFO)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISREG, "a regular file"))
_TAKES = ("-o takes a regular file (replaced as a whole), a character device or a FIFO (written into), or a "
          "new path")


def _kind(mode: int) -> str:
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


def _stream(mode: int) -> bool:
    return any(test(mode) for test in _STREAMS)


def _judge(path: Path, shown: str) -> os.stat_result | None:
    """What is at ``path``: None (nothing), a regular file's or a stream's stat; OutputError for the rest."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise OutputError(f"cannot write {shown}: {err.strerror or err}") from err
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.stat(path)
        except OSError:
            raise OutputError(f"{shown} is a symbolic link to nothing that exists; give a real path (migbake "
                              "never creates a file through a link)") from None
        if _stream(target.st_mode):
            return target
        raise OutputError(f"{shown} is a symbolic link to {_kind(target.st_mode)}; give the real path (migbake "
                          "never replaces a link, nor writes a file through one)")
    if stat.S_ISREG(st.st_mode) or _stream(st.st_mode):
        return st
    raise OutputError(f"{shown} is {_kind(st.st_mode)}; {_TAKES}")


def write_file(path: Path, text: str, *, replace: bool) -> None:
    """Write ``text`` (UTF-8) at ``path`` as the module says; an existing regular file only with ``replace``.

    OutputError (exit 2) for a path refused, an existing file without ``replace``, or a failure of the
    system; nothing is half-written and no temporary file is left.
    """
    shown = printable(str(path))
    data = text.encode("utf-8")
    st = _judge(path, shown)
    if st is not None and _stream(st.st_mode):
        _write_into(path, shown, data)
        return
    if st is not None and not replace:
        raise OutputError(f"{shown} exists; pass --force to replace it")
    _replace(path, shown, data, replace, None if st is None else stat.S_IMODE(st.st_mode))


def _write_into(path: Path, shown: str, data: bytes) -> None:
    """Open the device or FIFO at ``path`` (never creating, never truncating a file) and write ``data``."""
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise OutputError(f"cannot write {shown}: {err.strerror or err}") from err
    try:
        mode = os.fstat(fd).st_mode
        if not _stream(mode):  # the link was pointed elsewhere since it was judged
            raise OutputError(f"{shown} changed into {_kind(mode)} while it was written; nothing was written")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as err:
        raise OutputError(f"cannot write {shown}: {err.strerror or err}") from err
    finally:
        os.close(fd)


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def _replace(path: Path, shown: str, data: bytes, replace: bool, mode: int | None) -> None:
    """A temporary file beside ``path`` with ``data`` (the mode of the file it replaces), renamed over it."""
    name = path.name
    while len(os.fsencode(name)) > 200:  # the temporary name stays within the filesystem's 255 bytes
        name = name[:-1]
    import tempfile  # only when a file is written: a command's start-up does not pay for it

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.tmp-", dir=path.parent)
    except OSError as err:
        raise OutputError(f"cannot write {shown}: {err.strerror or err}") from err
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~_umask() if mode is None else mode)
            fh.write(data)
        now = _judge(path, shown)  # judged again: what is at the path now is what the rename replaces
        if now is not None and (_stream(now.st_mode) or not replace):
            raise OutputError(f"{shown} appeared while it was written; nothing was written")
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise OutputError(f"cannot write {shown}: {err.strerror or err}") from err
        raise
