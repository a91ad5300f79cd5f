"""validate over many files: each file's own findings, in the order the files were named, as if checked alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support import REPO, cli

from migbake.report import FileResult, text_report
from migbake.rules.validate import check_file, file_findings, profile_files

CASES = sorted((REPO / "images").glob("*/node-profile.yaml")) + sorted(
    (REPO / "tests" / "cases").glob("*/*/node-profile.yaml"))


@pytest.fixture
def many(tmp_path: Path) -> list[Path]:
    """100 profiles, valid and invalid ones and ones with warnings mixed, each in its own folder."""
    for i in range(100):
        folder = tmp_path / f"p{i:03d}"
        folder.mkdir()
        shutil.copy(CASES[i % len(CASES)], folder / "node-profile.yaml")
    return list(profile_files([str(tmp_path)]))


def test_each_file_gets_the_findings_it_gets_alone(many: list[Path]) -> None:
    alone = [check_file(p) for p in many]
    assert any(r.problems for r in alone) and not all(r.problems for r in alone)
    assert file_findings(many) == [(r.problems, r.ignored) for r in alone]


def test_validate_dir_reports_every_file_in_order(many: list[Path], tmp_path: Path) -> None:
    code, out, _ = cli("validate", str(tmp_path))
    alone = [check_file(p) for p in many]
    assert code == 1
    assert out == text_report([FileResult(str(p), r.problems, r.ignored) for p, r in zip(many, alone)])
