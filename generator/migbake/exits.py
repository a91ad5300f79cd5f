"""How every migbake command ends: its exit codes, the quiet end of a closed pipe, and the failures of the
process's own streams and signals, said in one line each.

The click command group (``migbake.cli.group``) ends every command through these.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType

EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130
EXIT_PIPE_CLOSED = 141
# one table for every command: the README's and `--help`'s, tested command by command
EXIT_CODES = (
    (0, "success: valid, written, up to date, node ready, image baked"),
    (1, "invalid profile or input, stale output (--check), node not ready, a failed Packer step"),
    (2, "usage: bad options, an unreadable file, an output directory migbake will not replace"),
    (3, "internal error (--debug shows the traceback)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_PIPE_CLOSED, "standard output closed early (piped into head): stops quietly"),
)

# what a terminal must not be given raw from an echoed value: C0 (a line break too: one problem, one line),
# DEL, C1, the Unicode line/paragraph separators, and the bidirectional controls that reorder what is shown
# (U+200E/F marks, U+202A-202E embeddings and overrides, U+2066-2069 isolates, U+061C)
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\u061c]")


def printable(text: str) -> str:
    r"""``text`` with every character a terminal would act on written as its escape (``\n``, ``\u202e``)."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit does not complain about the pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (tests' captured output), or closed
        pass


def write_stdout(text: str) -> None:
    """Write and flush ``text`` on standard output (its errors are told apart by ``stdout_failure``)."""
    stream = sys.stdout
    stream.write(text)
    stream.flush()


def _raised_writing_stdout(err: BaseException) -> bool:
    """Whether ``err`` was raised where a stream on file descriptor 1 was being written (click.echo's ``file``)."""
    tb, frame = err.__traceback__, None
    while tb is not None:
        frame, tb = tb.tb_frame, tb.tb_next
    for value in frame.f_locals.values() if frame is not None else ():
        try:
            if callable(getattr(value, "fileno", None)) and value.fileno() == 1:
                return True
        except (OSError, ValueError, AttributeError, TypeError):
            continue
    return False


def stdout_failure(err: BaseException | None = None) -> str | None:
    """The one line saying that standard output cannot take what a command prints; None when it can.

    Without ``err``: whether it is closed (``>&-``). With an error a command raised: whether that error
    came from writing standard output (``>/dev/full``, an I/O error). A broken pipe is not a failure (the
    reader stopped: EXIT_PIPE_CLOSED).
    """
    if sys.stdout is None:
        return "migbake: error: standard output is closed; nothing was printed"
    if not isinstance(err, OSError) or isinstance(err, BrokenPipeError) or err.filename is not None:
        return None
    if not _raised_writing_stdout(err):
        return None
    silence_stdout()  # Python's own flush at exit would fail again, with a traceback and exit 120
    return f"migbake: error: cannot write to standard output: {err.strerror or err}"


def os_error_line(err: OSError) -> str | None:
    """``migbake: error: FILE: reason`` for an error the system gave about a named file (None: none named)."""
    if err.filename is None:
        return None
    name = os.fsdecode(err.filename) if isinstance(err.filename, bytes) else str(err.filename)
    why = err.strerror or str(err)
    if err.filename2 is not None:
        name += f" -> {err.filename2}"
    return f"migbake: error: {printable(name)}: {why}"


class Terminated(BaseException):
    """SIGTERM arrived: raised where the program stands, so that cleanups run (no temporary folder is left)."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def catch_sigterm() -> None:
    """Turn SIGTERM into ``Terminated`` (in the main thread; elsewhere the default stays)."""
    import contextlib
    import signal  # only for commands that go through click: a plain validate's start-up does not pay for it

    with contextlib.suppress(ValueError, OSError):  # not the main thread
        signal.signal(signal.SIGTERM, _raise_terminated)


def die_of_sigterm() -> None:
    """After the cleanups: end as SIGTERM's default would, so that the caller sees the signal (exit 143)."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    silence_stdout()
    os.kill(os.getpid(), signal.SIGTERM)
    sys.exit(128 + signal.SIGTERM)  # pragma: no cover - only if the signal is blocked


def color_wanted() -> bool:
    """Colour in text output: only on a terminal, and never with NO_COLOR set to a non-empty value."""
    return sys.stdout is not None and sys.stdout.isatty() and not os.environ.get("NO_COLOR")  # no-color.org
