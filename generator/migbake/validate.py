"""One profile through the whole front of the pipeline: load -> schema -> rules -> typed model."""

from __future__ import annotations

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


def check_file(path: Path, display: str | None = None) -> Checked:
    """Load and check the profile at ``path``."""
    loaded, problems = read_profile(path, display)
    return _finish(loaded, problems)


def check_bytes(data: bytes, file: str) -> Checked:
    """Load and check a profile given as bytes (``file`` names it in problems)."""
    loaded, problems = load_profile_bytes(data, file)
    return _finish(loaded, problems)
