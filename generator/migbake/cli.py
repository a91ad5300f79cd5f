"""The ``migbake`` command line: parse options, call the library, report. Nothing else lives here.

The group and its error handling are in ``migbake.commands.base``; each module of
``migbake.commands`` adds its commands to it. Exit codes: 0 success; 1 invalid input (a profile with
errors), stale output (--check) or a failed step; 2 usage (bad options, an output directory migbake
will not replace); 3 an internal error. Tracebacks only with --debug.
"""

from __future__ import annotations

from migbake.commands import bake, catalog, node, profiles
from migbake.commands.base import main

__all__ = ["bake", "catalog", "main", "node", "profiles"]  # the modules register their commands on import

if __name__ == "__main__":  # pragma: no cover
    main()
