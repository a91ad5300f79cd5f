"""One profile through the whole front of the pipeline: load -> schema -> rules -> typed model.

Also which files a ``migbake validate PROFILE...`` argument names (a file, or a directory searched).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from migbake.model import NodeProfile, build_profile
from migbake.problems import Problem, has_errors, sort_problems
from migbake.profile import LoadedProfile, load_profile_bytes, read_profile
from migbake.rules import rule_problems
from migbake.schema import schema_problems


@dataclass(frozen=True, slots=True)
class Checked:
    """A profile file after every check: its problems, and the model when it has no errors."""

    file: str
    problems: list[Problem]
    profile: NodeProfile | None

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return self.profile is not None


def _finish(loaded: LoadedProfile, problems: list[Problem]) -> Checked:
    if loaded.data is not None and not any(p.rule in ("empty-file", "multiple-documents") for p in problems):
        problems = problems + schema_problems(loaded)
        if isinstance(loaded.data, dict):
            problems += rule_problems(loaded)
    problems = sort_problems(problems)
    profile = None
    if not has_errors(problems):
        data: dict[str, Any] = loaded.data  # type: ignore[assignment]
        profile = build_profile(data, loaded.text)
    return Checked(loaded.file, problems, profile)


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


def profile_files(args: Sequence[str]) -> Iterator[Path]:
    """The profiles ``args`` name: a file as it is, ``-`` (standard input), or every profile below a directory.

    Raises ValueError (a usage error) for ``-`` given twice or a directory without profiles.
    """
    if sum(raw == "-" for raw in args) > 1:
        raise ValueError("`-` (standard input) can be given once")
    for raw in args:
        p = Path(raw)
        if raw != "-" and p.is_dir():
            found = _profiles_below(p)
            if not found:
                raise ValueError(f"{raw}: no node-profile.yaml or *.profile.yaml below this directory")
            yield from found
        else:
            yield p


def check_file(path: Path, display: str | None = None) -> Checked:
    """Load and check the profile at ``path``."""
    loaded, problems = read_profile(path, display)
    return _finish(loaded, problems)


def check_bytes(data: bytes, file: str) -> Checked:
    """Load and check a profile given as bytes (``file`` names it in problems)."""
    loaded, problems = load_profile_bytes(data, file)
    return _finish(loaded, problems)
