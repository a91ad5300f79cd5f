"""CONTRIBUTING's figures are the repository's: the case corpus counts are the folders' (a case is a folder)."""

from __future__ import annotations

import re

import pytest
from support import CASES_ROOT, REPO

TEXT = " ".join((REPO / "CONTRIBUTING.md").read_text(encoding="utf-8").split())


@pytest.mark.parametrize("kind", ["invalid", "warning", "valid"])
def test_contributing_counts_the_cases_there_are(kind: str) -> None:
    said = re.findall(rf"\b(\d+) {kind} (?:profiles|ones)\b", TEXT)
    there = sum(1 for p in (CASES_ROOT / kind).iterdir() if p.is_dir())
    assert said, f"CONTRIBUTING.md gives no count of {kind} cases"
    assert {int(n) for n in said} == {there}, (kind, said, there)
