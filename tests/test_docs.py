"""The docs stay true to the tree: a short README, links that resolve, the module map of CONTRIBUTING.md,
and the two generated references (every profile key, every rule id) up to date."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

PACKAGE = REPO / "generator" / "migbake"
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]


def test_readme_is_a_front_door() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for heading in ("## Two commands", "## Usage", "## A first profile", "## Documentation"):
        assert heading in text, heading


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return [m for m in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", m)]


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    heads = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in _links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists() or (anchor and target.suffix == ".md" and anchor not in _anchors(target)):
            broken.append(link)
    assert broken == []


def test_contributing_module_map_lists_exactly_the_modules_in_the_tree() -> None:
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([\w/]+\.py)` \|", text, re.M))
    present = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    assert sorted(present - listed) == [], "modules missing from CONTRIBUTING.md's module map"
    assert sorted(listed - present) == [], "CONTRIBUTING.md's module map lists modules that are gone"


def test_generated_references_are_up_to_date() -> None:
    run = subprocess.run([sys.executable, str(REPO / "docs" / "reference" / "generate.py"), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_the_reference_check_notices_a_stale_page(tmp_path: Path) -> None:
    page = REPO / "docs" / "reference" / "rules.md"
    saved = page.read_bytes()
    try:
        page.write_text(saved.decode() + "stale\n")
        run = subprocess.run([sys.executable, str(REPO / "docs" / "reference" / "generate.py"), "--check"],
                             capture_output=True, text=True)
        assert run.returncode == 1 and "rules.md is stale" in run.stderr
    finally:
        page.write_bytes(saved)
