"""How every migbake command ends: its exit codes, and the quiet end of a closed pipe.

No click here: the console entry (``migbake.cli.entry``) answers ``migbake validate FILE...`` without
click and must end exactly as the click command group (``migbake.cli.group``) does.
"""

from __future__ import annotations

import os
import sys

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


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit does not complain about the pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (tests' captured output)
        pass


def color_wanted() -> bool:
    """Colour in text output: only on a terminal, and never with NO_COLOR set to a non-empty value."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")  # no-color.org: only a non-empty value
