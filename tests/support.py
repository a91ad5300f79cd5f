"""What the tests share: the repository, the example images, and a helper that generates into a folder.

(Not in conftest.py: tests/vm has a conftest of its own, and `from conftest import` would be ambiguous.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
IMAGES = sorted(p.parent for p in (REPO / "images").glob("*/node-profile.yaml"))
# real nvidia-smi/NVML output of an H200, recorded on the machine (see its README.md)
H200_FIXTURES = REPO / "tests" / "fixtures" / "h200"
H200_EXPORT = REPO / "tests/fixtures/mig-parted-export-h200-7x1g.yaml"  # an export's shape: 7x 1g.18gb
CASES_ROOT = REPO / "tests/cases"  # invalid/, warning/, valid/: one folder per profile
SHARED = REPO.parent / "shared"  # the team's shared folder beside the checkout (reference copies only)


def shared_file(path: Path) -> Path:
    """``path`` under ../shared; skipped when absent locally, a failure in CI (CI=true).

    Only for what a user's checkout cannot have; the H200 fixtures are in tests/fixtures/.
    """
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} is missing: CI must check out shared/ beside the repository")
        pytest.skip(f"{path} not found (shared/ is not beside this checkout)")
    return path


def generate(profile_text: str, out: Path, name: str = "node-profile.yaml") -> Path:
    """Validate and render ``profile_text`` into ``out`` (asserting it is valid); returns ``out``."""
    from migbake.render import render
    from migbake.validate import check_bytes
    from migbake.write import write_tree

    checked = check_bytes(profile_text.encode("utf-8"), name)
    assert checked.profile is not None, "\n".join(p.format() for p in checked.problems)
    write_tree(render(checked.profile), out)
    return out


def cli(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``migbake ARGS`` in-process (click's runner): exit code, stdout, stderr."""
    from click.testing import CliRunner

    from migbake.cli import main

    r = CliRunner().invoke(main, list(args), input=stdin, env=env)
    return r.exit_code, r.stdout, r.stderr
