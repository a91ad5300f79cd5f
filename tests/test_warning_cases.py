"""Valid profiles that still get warnings: every case under tests/cases/warning/ reports exactly its expected lines.

A case is a folder with ``node-profile.yaml`` and ``expected.txt`` in the format of the invalid cases
(``LINE:COL: warning: /pointer: a substring of the message [rule-id]``). The profile must be accepted
(exit 0, output generated) and report only warnings.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from test_invalid_cases import _line_for, _parse_expected

from migbake.cli import main
from migbake.validate import check_file

CASES_DIR = Path(__file__).parent / "cases" / "warning"
CASES = sorted(p for p in CASES_DIR.iterdir() if p.is_dir())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_warning_case(case: Path, tmp_path: Path) -> None:
    profile = case / "node-profile.yaml"
    checked = check_file(profile)
    expected = _parse_expected((case / "expected.txt").read_text(encoding="utf-8"))
    shown = "\n".join(_line_for(p) for p in checked.problems)
    assert checked.ok, shown
    assert expected and all(e.severity == "warning" for e in expected)
    assert len(checked.problems) == len(expected), shown
    for e, p in zip(expected, checked.problems, strict=True):
        assert e.matches(p), f"expected\n  {e}\ngot\n  {_line_for(p)}"
    result = CliRunner().invoke(main, ["validate", str(profile)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["generate", str(profile), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
