"""Problems found in a node profile, their locations, and migbake's small exception tree."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

from migbake.exits import EXIT_INVALID, EXIT_USAGE, printable
from migbake.wording import plural

Severity = Literal["error", "warning"]

UNREADABLE = "unreadable"  # the rule of a profile that cannot be read at all: exit 2, as an unreadable file


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

    def location(self) -> str:
        """``FILE:LINE:COL``, the file name escaped (a newline in it cannot start another line)."""
        return f"{printable(self.file)}:{self.line}:{self.col}"

    def format(self) -> str:
        """``FILE:LINE:COL: error: /pointer: message [rule]``: one line, as compilers print.

        Every echoed value is escaped (``exits.printable``): control, C1 and bidirectional characters.
        """
        pointer = printable(self.pointer or "/")
        return f"{self.location()}: {self.severity}: {pointer}: {printable(self.message)} [{self.rule}]"


IgnoredBy = Literal["profile", "flag"]


@dataclass(frozen=True)
class Suppression:
    """Why a rule's warnings are set aside: the profile's ``validation.ignore`` (``by`` profile: its reason, and
    where the profile says so) or ``validate --ignore`` (``by`` flag)."""

    rule: str
    by: IgnoredBy
    reason: str = ""
    line: int = 0
    col: int = 0
    pointer: str = ""

    def why(self) -> str:
        """``validation.ignore: REASON`` or ``--ignore``: what a report says of an ignored warning."""
        return f"validation.ignore: {self.reason}" if self.by == "profile" else "--ignore"


@dataclass(frozen=True)
class Ignored:
    """A warning set aside by a ``Suppression``: counted and listed in every report, never dropped."""

    problem: Problem
    suppression: Suppression

    def format(self) -> str:
        """``FILE:LINE:COL: ignored: /pointer: message [rule] (validation.ignore: REASON)``, escaped as ``format``."""
        p = self.problem
        return (f"{p.location()}: ignored: {printable(p.pointer or '/')}: {printable(p.message)} [{p.rule}] "
                f"({printable(self.suppression.why())})")


def set_aside(problems: Iterable[Problem], suppressions: Iterable[Suppression]) -> tuple[list[Problem], list[Ignored]]:
    """``problems`` split into those kept and the warnings ``suppressions`` ignore (the first suppression of a
    rule wins: the profile's, with its reason, before the flag's). An error is never set aside."""
    by_rule: dict[str, Suppression] = {}
    for s in suppressions:
        by_rule.setdefault(s.rule, s)
    kept: list[Problem] = []
    ignored: list[Ignored] = []
    for p in problems:
        why = by_rule.get(p.rule) if p.severity == "warning" else None
        if why is None:
            kept.append(p)
        else:
            ignored.append(Ignored(p, why))
    return kept, ignored


def sort_problems(problems: Iterable[Problem]) -> list[Problem]:
    """Problems sorted by location, without exact duplicates."""
    return sorted(set(problems), key=Problem.sort_key)


def has_errors(problems: Iterable[Problem]) -> bool:
    """Whether any problem is an error (warnings alone do not make a profile invalid)."""
    return any(p.severity == "error" for p in problems)


def unreadable(problems: Iterable[Problem]) -> bool:
    """Whether the file could not be read at all (missing, a directory, no permission): exit 2."""
    return any(p.rule == UNREADABLE for p in problems)


class MigbakeError(Exception):
    """Base of every error migbake raises on purpose: what stderr says, and the exit code.

    The command group (``migbake.cli.group``) is the one place that turns any of them into its ``report()``
    lines and ``exit_code`` (as click does with ``ClickException.exit_code``); commands never catch them.
    """

    exit_code: ClassVar[int] = EXIT_INVALID
    multiline: ClassVar[bool] = False  # a message of several lines (a tool's log): its line breaks are kept

    def report(self) -> list[str]:
        """The lines printed to stderr, last the one that says what failed."""
        return [f"migbake: error: {self}"]


STDIN_NAME = "<stdin>"  # how every message names a profile or config read from standard input (`-`)


class ProfileError(MigbakeError):
    """A command's profile is invalid: every problem, then what was not done (``consequence``)."""

    def __init__(self, file: str, problems: list[Problem], consequence: str = "") -> None:
        self.file = file
        self.problems = problems
        super().__init__(f"{file}: invalid" + (f", {consequence}" if consequence else ""))

    def report(self) -> list[str]:
        return [p.format() for p in self.problems] + [f"migbake: {self}"]


class UnreadableProfile(ProfileError):
    """The profile cannot be read at all (missing, a directory, no permission): exit 2, an unreadable file."""

    exit_code = EXIT_USAGE


class CatalogError(MigbakeError):
    """A catalog file (--catalog) is invalid; ``problems`` says every reason."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.file = file
        self.problems = problems
        super().__init__(f"{file}: invalid GPU catalog ({plural(len(problems), 'problem')})")

    def report(self) -> list[str]:
        return [p.format() for p in self.problems] + [f"migbake: error: {self}"]


class UnreadableCatalog(CatalogError):
    """The catalog file cannot be read at all (missing, a directory, not a regular file): exit 2, an unreadable
    file, as a profile that cannot be read."""

    exit_code = EXIT_USAGE


class UsageError(MigbakeError):
    """The command was asked for something it cannot do as asked (exit 2, like a bad option), or an input it
    was given (standard input, a file an option names) cannot be read.

    ``option``: the option whose value is wrong (``--var``); the command group reports it as click reports a
    bad option value (the command's usage line, then ``Invalid value for --var: ...``). ``usage``: the
    arguments as a whole are wrong (after the usage line too). Neither: one line, as every other error.
    """

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, option: str = "", usage: bool = False) -> None:
        self.option = option
        self.usage = usage or bool(option)
        super().__init__(message)


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
