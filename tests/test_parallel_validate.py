"""validate over many files: a forked worker checks half of them, with the very same results."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support import REPO

from migbake.rules import validate
from migbake.rules.validate import PARALLEL_MIN_FILES, check_file, file_problems, profile_files

CASES = sorted((REPO / "images").glob("*/node-profile.yaml")) + sorted(
    (REPO / "tests" / "cases").glob("*/*/node-profile.yaml"))


@pytest.fixture
def many(tmp_path: Path) -> list[Path]:
    """More profiles than PARALLEL_MIN_FILES, valid and invalid ones mixed, each in its own folder."""
    for i in range(PARALLEL_MIN_FILES + 9):
        folder = tmp_path / f"p{i:03d}"
        folder.mkdir()
        shutil.copy(CASES[i % len(CASES)], folder / "node-profile.yaml")
    return list(profile_files([str(tmp_path)]))


def test_worker_results_equal_serial(many: list[Path]) -> None:
    expected = [check_file(p).problems for p in many]
    assert any(expected) and not all(expected)
    assert file_problems(many) == expected


def test_failed_worker_is_replaced(many: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    expected = [check_file(p).problems for p in many]

    def fail(pid: int, data: bytes) -> None:
        return None  # as for a worker that died or sent nothing readable

    monkeypatch.setattr(validate, "_worker_result", fail)
    assert file_problems(many) == expected


def test_few_files_need_no_worker(many: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validate, "_fork_worker", lambda paths: pytest.fail("forked for a few files"))
    few = many[: PARALLEL_MIN_FILES - 1]
    assert file_problems(few) == [check_file(p).problems for p in few]
