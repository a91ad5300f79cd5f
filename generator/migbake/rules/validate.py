"""One profile through the whole front of the pipeline: load -> schema -> rules -> typed model.

Also which files a ``migbake validate PROFILE...`` argument names (a file, or a directory searched).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from migbake.document.loader import LoadedProfile, load_profile_bytes, read_profile
from migbake.exits import printable
from migbake.gpu.catalog import PACKAGED, CatalogChoice
from migbake.problems import STDIN_NAME, Ignored, Problem, UsageError, has_errors, set_aside, sort_problems
from migbake.profile.schema import schema_problems
from migbake.rules.ignore import profile_suppressions
from migbake.rules.registry import rule_problems

if TYPE_CHECKING:
    from migbake.profile.nodeprofile import NodeProfile


@dataclass(frozen=True)
class ValidationResult:
    """A profile file after every check: its problems, and the model when it has no errors.

    ``ignored``: the warnings its ``validation.ignore`` sets aside (not in ``problems``; reports list them);
    ``loaded``: the file as loaded, with the positions of its keys (what is found later is located with them).
    """

    file: str
    problems: list[Problem]
    profile: NodeProfile | None
    ignored: list[Ignored] = field(default_factory=list)
    loaded: LoadedProfile | None = None

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return self.profile is not None


def _without_echoes(problems: list[Problem]) -> list[Problem]:
    """Without the empty-layout warning of an entry whose layout is under an unknown key (``mig-devices``,
    a ``layout`` beside ``mig``): the unknown key's error says what to fix, the warning would mislead."""
    unknown = [p.pointer for p in problems if p.rule == "unknown-key"]
    return [p for p in problems
            if not (p.rule == "empty-layout" and any(u.startswith(p.pointer + "/") for u in unknown))]


def _mig_parted_config(loaded: LoadedProfile) -> Problem | None:
    """The one problem of an nvidia-mig-parted config given as a profile (``version: v1`` and ``mig-configs``):
    what it is and the command that makes a profile of it, instead of the schema's four errors."""
    data = loaded.data
    if not (isinstance(data, dict) and data.get("version") == "v1" and "mig-configs" in data):
        return None
    source = "-" if loaded.file == STDIN_NAME else "FILE"  # the location names the file
    return loaded.problem("/mig-configs", "this is an nvidia-mig-parted config (version: v1, mig-configs), not a "
                          f"node profile: make a profile of it with `migbake import {source} -o node-profile.yaml` "
                          "(--config NAME chooses one of its configs)", "mig-parted-config", key=True)


def _finish(loaded: LoadedProfile, problems: list[Problem], catalog: CatalogChoice, *,
            model: bool = True) -> ValidationResult:
    """The profile's problems and model; ``catalog`` is read only for a mapping (the rules and the model need it)."""
    if (mig_parted := _mig_parted_config(loaded)) is not None:
        problems = [*problems, mig_parted]
    elif loaded.data is not None and not any(p.rule in ("empty-file", "multiple-documents") for p in problems):
        problems = problems + schema_problems(loaded, catalog)
        if isinstance(loaded.data, dict):
            problems += rule_problems(loaded, catalog.load())
    problems = sort_problems(_without_echoes(problems))
    ignored: list[Ignored] = []
    if isinstance(loaded.data, dict):
        problems, ignored = set_aside(problems, profile_suppressions(loaded, problems))
    profile = None
    if model and not has_errors(problems):
        from migbake.profile.nodeprofile import (
            build_profile,  # only generation needs the model: validate never loads it
        )

        data: dict[str, Any] = loaded.data  # type: ignore[assignment]
        profile = build_profile(data, loaded.text, catalog.load())
    return ValidationResult(loaded.file, problems, profile, ignored, loaded)


# the names of a profile in a folder: ``validate DIR``, ``images DIR`` (and pre-commit's hook) find these, at any
# depth below DIR (``profiles_in``, the one search both use)
PROFILE_GLOBS = ("node-profile.yaml", "node-profile.yml", "*.profile.yaml", "*.profile.yml")
_PROFILE_NAMES = frozenset(g for g in PROFILE_GLOBS if "*" not in g)
_PROFILE_SUFFIXES = tuple(g[1:] for g in PROFILE_GLOBS if g.startswith("*") and "*" not in g[1:])


def _profiles_below(top: Path) -> list[Path]:
    """Every file below ``top`` that PROFILE_GLOBS match, sorted: ``rglob`` of each glob, in one walk.

    As ``rglob`` does: hidden folders are searched, a symlinked folder is not entered, a folder that
    cannot be read is passed over; a match counts when it is a file (a symlink to one too).
    """
    found: set[Path] = set()
    folders = [str(top)]
    while folders:
        try:
            with os.scandir(folders.pop()) as scan:
                entries = list(scan)
        except PermissionError:
            continue
        for entry in entries:
            name = entry.name
            if name in _PROFILE_NAMES or name.endswith(_PROFILE_SUFFIXES):
                path = Path(entry.path)  # a regular file needs no stat(); a symlink is followed as is_file() does
                if entry.is_file(follow_symlinks=False) or (entry.is_symlink() and path.is_file()):
                    found.add(path)
            try:
                inside = entry.is_dir() and not entry.is_symlink()
            except OSError:
                inside = False
            if inside:
                folders.append(entry.path)
    return sorted(found)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a folder above it may not be searched: then it is a file that cannot be read
        return False


def profiles_in(folder: Path, shown: str | None = None) -> list[Path]:
    """Every profile below ``folder`` (PROFILE_GLOBS, at any depth), sorted: what ``validate DIR`` and
    ``images DIR`` both check. UsageError (after the command's usage line) when it cannot be read or holds none;
    ``shown``: how messages name the folder (as the user typed it)."""
    name = printable(shown if shown is not None else str(folder))
    try:
        os.scandir(folder).close()
    except OSError as err:
        raise UsageError(f"{name}: cannot read this directory: {err.strerror or err}", usage=True) from err
    found = _profiles_below(folder)
    if not found:
        raise UsageError(f"{name}: no {', '.join(PROFILE_GLOBS)} below this directory", usage=True)
    return found


def profile_files(args: Sequence[str]) -> Iterator[Path]:
    """The profiles ``args`` name: a file as it is, ``-`` (standard input), or every profile below a directory.

    Raises UsageError (reported after the command's usage line) for ``-`` given twice, an empty argument (which
    is no file: the system would read it as the current folder), a directory that cannot be read or holds no
    profiles.
    """
    if sum(raw == "-" for raw in args) > 1:
        raise UsageError("`-` (standard input) can be given once", usage=True)
    if "" in args:
        raise UsageError("an empty PROFILE argument names no file (give `.` for the current folder)", usage=True)
    for raw in args:
        p = Path(raw)
        if raw != "-" and _is_dir(p):
            yield from profiles_in(p, raw)
        else:
            yield p


def check_file(path: Path, display: str | None = None, catalog: CatalogChoice = PACKAGED) -> ValidationResult:
    """Load and check the profile at ``path``, its GPU models looked up in ``catalog``."""
    loaded, problems = read_profile(path, display)
    return _finish(loaded, problems, catalog)


Findings = tuple[list[Problem], list[Ignored]]  # a file's problems, and the warnings its profile ignores


def _problems(path: Path, catalog: CatalogChoice) -> Findings:
    """``check_file(path)``'s problems and ignored warnings, without building the model only generation needs."""
    loaded, problems = read_profile(path)
    checked = _finish(loaded, problems, catalog, model=False)
    return checked.problems, checked.ignored


def check_bytes(data: bytes, file: str, catalog: CatalogChoice = PACKAGED) -> ValidationResult:
    """Load and check a profile given as bytes (``file`` names it in problems), its GPU models in ``catalog``."""
    loaded, problems = load_profile_bytes(data, file)
    return _finish(loaded, problems, catalog)


def file_findings(paths: Sequence[Path], catalog: CatalogChoice = PACKAGED) -> list[Findings]:
    """Each profile file's problems and ignored warnings, in order: ``check_file(path, catalog=catalog)``'s."""
    return [_problems(p, catalog) for p in paths]
