"""The package stays strictly typed (mypy --strict) and lint-clean (ruff)."""

from __future__ import annotations

import pytest
from realtools import require, run
from support import REPO

pytestmark = pytest.mark.realtool


def test_mypy_strict() -> None:
    ran = run([require("mypy")], cwd=REPO, timeout=600)
    assert ran.rc == 0, ran.text


def test_ruff() -> None:
    ran = run([require("ruff"), "check", "generator", "tests", "benchmarks", "docs", ".ci"], cwd=REPO)
    assert ran.rc == 0, ran.text
