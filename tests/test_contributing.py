"""CONTRIBUTING's figures are the repository's: a count of corpus cases it gives is the folders' (a case is a
folder). It need give none: a new rule brings a case, and a figure to keep by hand would be one more place."""

from __future__ import annotations

import re

import pytest
from support import CASES_ROOT, REPO

TEXT = " ".join((REPO / "CONTRIBUTING.md").read_text(encoding="utf-8").split())


def stated(text: str, kind: str) -> set[int]:
    """The counts of ``kind`` cases ``text`` gives (``186 invalid profiles``, ``17 valid ones``)."""
    return {int(n) for n in re.findall(rf"\b(\d+) {kind} (?:profiles|ones)\b", text)}


@pytest.mark.parametrize("kind", ["invalid", "warning", "valid"])
def test_contributing_counts_only_the_cases_there_are(kind: str) -> None:
    there = sum(1 for p in (CASES_ROOT / kind).iterdir() if p.is_dir())
    assert stated(TEXT, kind) <= {there}, (kind, stated(TEXT, kind), there)


def test_a_count_that_is_not_the_folders_is_noticed() -> None:
    assert stated("the corpus (186 invalid profiles with their problems, 17 valid ones)", "invalid") == {186}
    assert stated("the corpus (186 invalid profiles with their problems, 17 valid ones)", "valid") == {17}
