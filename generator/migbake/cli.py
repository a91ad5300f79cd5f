"""The ``migbake`` command line: parse options, call the library, report. Nothing else lives here.

The group and its error handling are in ``migbake.commands.base``, which lists every command and the
module of ``migbake.commands`` that defines it; a command's module is imported only when it runs.
Every command shares one exit-code table (``base.EXIT_CODES``), which each command's ``--help`` ends
with. Tracebacks only with --debug.
"""

from __future__ import annotations

from migbake.commands.base import main

__all__ = ["main"]

if __name__ == "__main__":  # pragma: no cover
    main()
