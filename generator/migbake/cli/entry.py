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

from migbake.exits import (
    EXIT_INTERRUPTED,
    EXIT_PIPE_CLOSED,
    EXIT_USAGE,
    color_wanted,
    silence_stdout,
    stdout_failure,
    write_stdout,
)


def quick_validate(args: Sequence[str]) -> int | None:
    """The exit code of ``migbake ARGS`` when it is a plain ``validate FILE...``, else None (nothing printed)."""
    if len(args) < 2 or args[0] != "validate" or any(a.startswith("-") for a in args[1:]):
        return None
    if os.environ.get("MIGBAKE_CATALOG") or sys.stdout is None:  # the click group says what is wrong
        return None
    from migbake.report import FileResult, exit_code, text_report
    from migbake.rules.validate import file_findings, profile_files

    try:
        files = list(profile_files(args[1:]))
        results = [FileResult(str(f), problems, ignored)
                   for f, (problems, ignored) in zip(files, file_findings(files))]
    except KeyboardInterrupt:
        print("migbake: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:  # the click command says it: a usage error, or an internal error with --debug
        return None
    try:
        write_stdout(text_report(results, color=color_wanted()))
    except BrokenPipeError:
        silence_stdout()
        return EXIT_PIPE_CLOSED
    except OSError as err:  # a full disk, an I/O error: said as the click group says it
        line = stdout_failure(err)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return EXIT_USAGE
    return exit_code(results)


def run(prog_name: str | None = None) -> None:
    """Console entry point."""
    code = quick_validate(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from migbake.cli.group import main  # click and the command group: everything but a plain validate

    main(prog_name=prog_name)
