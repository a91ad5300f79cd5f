"""Valid profiles: every case under tests/cases/warning/ reports exactly its expected lines (warnings only),
every case under tests/cases/valid/ reports nothing; and every rule id docs/validation.md names has a case.

A case is a folder with ``node-profile.yaml`` and ``expected.txt`` in the format of the invalid cases
(``LINE:COL: warning: /pointer: a substring of the message [rule-id]``). The profile must be accepted
(exit 0, output generated) and report only warnings. A warning of the render stage (``karpenter-user-data-size``:
known once the files are rendered) is pinned on what ``generate`` prints before writing, not on ``check_file``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import REPO, TESTS, CliRunner
from test_invalid_cases import _EXPECTED, _line_for, _parse_expected, matches

from migbake.cli.group import main
from migbake.problems import Problem
from migbake.rules.registry import RULES
from migbake.rules.validate import check_file

CASES_DIR = TESTS / "cases" / "warning"
CASES = sorted(p for p in CASES_DIR.iterdir() if p.is_dir())


def _printed_problems(output: str, profile: Path) -> list[Problem]:
    """The problems a command printed for ``profile`` (``FILE:LINE:COL: severity: /pointer: message [rule]``)."""
    found = []
    for line in output.splitlines():
        m = _EXPECTED.match(line[len(str(profile)) + 1:]) if line.startswith(f"{profile}:") else None
        if m:
            found.append(Problem(str(profile), int(m[1]), int(m[2]), m[4], m[5], m[6], m[3]))  # type: ignore[arg-type]
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_warning_case(case: Path, tmp_path: Path) -> None:
    """A rule of the render stage (found once the files are rendered, ``render.rendered_limits``) is pinned on what
    generate prints before it writes; every other on ``check_file`` and on what generate prints too."""
    profile = case / "node-profile.yaml"
    checked = check_file(profile)
    expected = _parse_expected((case / "expected.txt").read_text(encoding="utf-8"))
    rendered = [e for e in expected if RULES[e.rule].stage == "render"]
    expected = [e for e in expected if RULES[e.rule].stage != "render"]
    shown = "\n".join(_line_for(p) for p in checked.problems)
    assert checked.ok, shown
    assert expected + rendered and all(e.severity == "warning" for e in expected + rendered)
    assert len(checked.problems) == len(expected), shown
    for e, p in zip(expected, checked.problems):
        assert matches(e, p), f"expected\n  {_line_for(e)}\ngot\n  {_line_for(p)}"
    result = CliRunner().invoke(main, ["validate", str(profile)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["generate", str(profile), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    printed = _printed_problems(result.output, profile)
    assert len(printed) == len(expected + rendered), result.output
    for e in rendered:
        assert any(matches(e, p) for p in printed), f"expected\n  {_line_for(e)}\nin\n{result.output}"


VALID_DIR = TESTS / "cases" / "valid"
VALID = sorted(p for p in VALID_DIR.iterdir() if p.is_dir())


@pytest.mark.parametrize("case", VALID, ids=[c.name for c in VALID])
def test_valid_case(case: Path, tmp_path: Path) -> None:
    """Every case under tests/cases/valid/: accepted with no problem at all, and generated."""
    profile = case / "node-profile.yaml"
    assert not (case / "expected.txt").exists(), "a valid case reports nothing: it has no expected.txt"
    checked = check_file(profile)
    assert checked.ok and not checked.problems, "\n".join(_line_for(p) for p in checked.problems)
    result = CliRunner().invoke(main, ["generate", str(profile), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output


def _readme_rule_ids() -> list[str]:
    """The rule ids docs/validation.md's "Validation output" section names (``rule-id`` in backquotes)."""
    text = (REPO / "docs" / "validation.md").read_text(encoding="utf-8")
    section = text.split("Some rules in more words:", 1)[1].split("\n## ", 1)[0]
    return sorted(set(re.findall(r"`([a-z][a-z0-9.]*(?:-[a-z0-9.]+)+)`", section)))


def test_every_rule_the_docs_list_has_a_case() -> None:
    cases = TESTS / "cases"
    pinned = {m for f in cases.glob("*/*/expected.txt") for m in re.findall(r"\[([a-z0-9.-]+)\]\s*$",
                                                                              f.read_text(), re.M)}
    listed = _readme_rule_ids()
    assert len(listed) > 40, listed
    assert sorted(set(listed) - pinned) == [], "rule ids docs/validation.md names without a case in tests/cases"
    # every rule is documented in the generated reference (tests/unit/test_rule_registry.py), not in this list
