"""Problems found in a node profile, their locations, and migbake's small exception tree."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from migbake.exits import EXIT_INVALID, EXIT_USAGE
from migbake.wording import plural

Severity = Literal["error", "warning"]

# a key of the profile can hold any of these; printed raw they would break the line (or drive the terminal)
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _printable(text: str) -> str:
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or suspicious) in one file, at one place, with the rule that found it."""

    file: str
    line: int
    col: int
    pointer: str
    message: str
    rule: str
    severity: Severity = "error"

    def sort_key(self) -> tuple[str, int, int, str, str]:
        """Order by file, position, then pointer and message (stable, deterministic)."""
        return (self.file, self.line, self.col, self.pointer, self.message)

    def format(self) -> str:
        """``FILE:LINE:COL: error: /pointer: message [rule]``: one line, as compilers print."""
        pointer = _printable(self.pointer or "/")
        return (f"{self.file}:{self.line}:{self.col}: {self.severity}: {pointer}: {_printable(self.message)} "
                f"[{self.rule}]")


def sort_problems(problems: Iterable[Problem]) -> list[Problem]:
    """Problems sorted by location, without exact duplicates."""
    return sorted(set(problems), key=Problem.sort_key)


def has_errors(problems: Iterable[Problem]) -> bool:
    """Whether any problem is an error (warnings alone do not make a profile invalid)."""
    return any(p.severity == "error" for p in problems)


class MigbakeError(Exception):
    """Base of every error migbake raises on purpose: what stderr says, and the exit code.

    The command group (``migbake.cli.group``) is the one place that turns any of them into its ``report()``
    lines and ``exit_code`` (as click does with ``ClickException.exit_code``); commands never catch them.
    """

    exit_code: ClassVar[int] = EXIT_INVALID

    def report(self) -> list[str]:
        """The lines printed to stderr, last the one that says what failed."""
        return [f"migbake: error: {self}"]


def read_bounded(path: Path, limit: int, error: type[MigbakeError]) -> bytes:
    """A captured input file's bytes, at most ``limit``; unreadable or larger raises ``error``."""
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as err:
        raise error(f"{path}: {err.strerror or err}") from err
    if len(data) > limit:
        raise error(f"{path}: larger than {limit // (1024 * 1024)} MiB")
    return data


class ProfileError(MigbakeError):
    """A command's profile is invalid: every problem, then what was not done (``consequence``)."""

    def __init__(self, file: str, problems: list[Problem], consequence: str = "") -> None:
        self.file = file
        self.problems = problems
        super().__init__(f"{file}: invalid" + (f", {consequence}" if consequence else ""))

    def report(self) -> list[str]:
        return [p.format() for p in self.problems] + [f"migbake: {self}"]


class CatalogError(MigbakeError):
    """A catalog file (--catalog) is invalid; ``problems`` says every reason."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.file = file
        self.problems = problems
        super().__init__(f"{file}: invalid GPU catalog ({plural(len(problems), 'problem')})")

    def report(self) -> list[str]:
        return [p.format() for p in self.problems] + [f"migbake: error: {self}"]


class UsageError(MigbakeError):
    """The command was asked for something it cannot do as asked (exit 2, like a bad option)."""

    exit_code = EXIT_USAGE


class RenderError(MigbakeError):
    """Generation failed after validation (a bug or an unexpected value)."""


class OutputError(MigbakeError):
    """The output directory cannot be written as asked (not empty, a symlink, ...)."""

    exit_code = EXIT_USAGE


class PackerError(MigbakeError):
    """Packer is missing or one of its steps failed."""

    def __init__(self, message: str, *, step: str = "", returncode: int | None = None) -> None:
        self.step = step
        self.returncode = returncode
        super().__init__(message)
