"""The ``migbake`` command line: parse options, call the library, report. Nothing else lives here.

The group and its error handling are in ``migbake.commands.base``; each module of
``migbake.commands`` adds its commands to it. Every command shares one exit-code table
(``base.EXIT_CODES``), which each command's ``--help`` ends with. Tracebacks only with --debug.
"""

from __future__ import annotations

from migbake.commands import bake, catalog, node, profiles
from migbake.commands.base import exit_codes_text, main

__all__ = ["bake", "catalog", "main", "node", "profiles"]  # the modules register their commands on import

for _command in main.commands.values():
    _command.epilog = exit_codes_text()

if __name__ == "__main__":  # pragma: no cover
    main()
