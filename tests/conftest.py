"""Shared fixtures: the repository, the example images, and a helper that generates into a folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
IMAGES = sorted(p.parent for p in (REPO / "images").glob("*/node-profile.yaml"))
sys.path.insert(0, str(Path(__file__).parent))  # tests/realtools.py
sys.path.insert(0, str(REPO / "generator"))  # always test this checkout's package


def generate(profile_text: str, out: Path, name: str = "node-profile.yaml") -> Path:
    """Validate and render ``profile_text`` into ``out`` (asserting it is valid); returns ``out``."""
    from migbake.render import render
    from migbake.validate import check_bytes
    from migbake.write import write_tree

    checked = check_bytes(profile_text.encode("utf-8"), name)
    assert checked.profile is not None, "\n".join(p.format() for p in checked.problems)
    write_tree(render(checked.profile), out)
    return out


@pytest.fixture(params=IMAGES, ids=[p.name for p in IMAGES])
def image_dir(request: pytest.FixtureRequest) -> Path:
    """Each folder of images/."""
    path: Path = request.param
    return path
