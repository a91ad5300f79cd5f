"""What the tests share: the repository, the example images, and a helper that generates into a folder.

(Not in conftest.py: tests/vm has a conftest of its own, and `from conftest import` would be ambiguous.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
IMAGES = sorted(p.parent for p in (REPO / "images").glob("*/node-profile.yaml"))
H200_FIXTURES = REPO.parent / "shared" / "fixtures" / "h200"  # real nvidia-smi/NVML output of an H200


def shared_file(path: Path) -> Path:
    """``path`` under ../shared; skipped when absent locally, a failure in CI (CI=true)."""
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
