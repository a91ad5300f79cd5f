"""The ``migbake`` console command: the most frequent call answered without loading click.

``migbake validate FILE...`` (no options; pre-commit, editors and CI run it on every change) is
answered here with the same library calls, the same report and the same exit code as the click
command in ``migbake.commands.validate``; a test compares both paths byte for byte. Anything else,
and anything unusual on the way (an option, standard input, a directory without profiles,
``--catalog`` / ``MIGBAKE_CATALOG``, an unexpected error), goes to the click group
(``migbake.cli.group.main``) before anything has been printed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from migbake.exits import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_PIPE_CLOSED, color_wanted, silence_stdout


def quick_validate(args: Sequence[str]) -> int | None:
    """The exit code of ``migbake ARGS`` when it is a plain ``validate FILE...``, else None (nothing printed)."""
    if len(args) < 2 or args[0] != "validate" or any(a.startswith("-") for a in args[1:]):
        return None
    if os.environ.get("MIGBAKE_CATALOG"):
        return None
    from migbake.report import FileResult, text_report
    from migbake.rules.validate import file_problems, profile_files

    try:
        files = list(profile_files(args[1:]))
        results = [FileResult(str(f), problems) for f, problems in zip(files, file_problems(files))]
    except KeyboardInterrupt:
        print("migbake: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:  # the click command says it: a usage error, or an internal error with --debug
        return None
    try:
        sys.stdout.write(text_report(results, color=color_wanted()))
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        return EXIT_PIPE_CLOSED
    return EXIT_INVALID if any(r.errors for r in results) else 0


def run(prog_name: str | None = None) -> None:
    """Console entry point."""
    code = quick_validate(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from migbake.cli.group import main  # click and the command group: everything but a plain validate

    main(prog_name=prog_name)
