"""Hostile input: every bad profile under tests/cases/invalid/ is refused with exactly the expected problems.

A case is a folder: the profile, as ``node-profile.yaml``, or ``node-profile.bin`` when the exact bytes
matter (a byte-order mark, Latin-1, NUL), or ``node-profile.generated`` holding a recipe for a file too
big to commit (``pad-to-bytes N``); and ``expected.txt``, one line per problem::

    LINE:COL: severity: /pointer: a substring of the message [rule-id]

Lines starting with ``#`` are comments. Line, column, severity, pointer and rule must match exactly,
the message must contain the substring, and there must be no other problem. ``MIGBAKE_REGEN_CASES=1``
rewrites expected.txt from what migbake reports now; lines that still match are kept as written (so a
message trimmed by hand stays trimmed) and the comments stay. Review the diff like code.

Every case goes through the library (``check_file``) and through the CLI in-process (validate exits 1,
one FILE:LINE:COL line per problem; generate exits 1 and leaves nothing behind). A sample also runs
``python3 -m migbake`` in a subprocess, to see the real exit codes and that stderr has no traceback.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, TESTS, CliRunner

from migbake.cli.group import main
from migbake.document.loader import MAX_PROFILE_BYTES
from migbake.problems import Problem
from migbake.rules.validate import check_file

CASES_DIR = TESTS / "cases" / "invalid"
CASES = sorted(p for p in CASES_DIR.iterdir() if p.is_dir())
REGEN = os.environ.get("MIGBAKE_REGEN_CASES") == "1"

# one of each kind of failure, run through a real `python3 -m migbake` process
SUBPROCESS_SAMPLE = (
    "byte-order-mark-utf8",
    "not-utf8-latin1",
    "nul-byte",
    "file-too-large",
    "yaml-syntax-unclosed-flow",
    "yaml-too-deep-parser",
    "number-too-long-hex",
    "alias-list-item",
    "many-problems",
    "unit-leading-dash",
    "key-with-control-characters",
    "unit-is-a-list",
)

VALID_BASE = """\
version: 1
name: padded-profile
gpus:
  - model: h200-141gb
    mig:
      layout:
        1g.18gb: 7
"""

_EXPECTED = re.compile(r"^(\d+):(\d+): (error|warning): (/.*?): (.*) \[([A-Za-z0-9_.:-]+)\]$")


def matches(expected: Problem, p: Problem) -> bool:
    """Same place, pointer, severity and rule; the printed message contains the expected one."""
    m = _printed(p)
    return ((int(m[1]), int(m[2]), m[3], m[4], m[6])
            == (expected.line, expected.col, expected.severity, expected.pointer, expected.rule)
            and expected.message in m[5])


def _parse_expected(text: str) -> list[Problem]:
    """The lines of an expected.txt, as problems of no file."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.startswith("#"):
            continue
        m = _EXPECTED.match(raw)
        assert m, f"expected.txt line {n} is not LINE:COL: severity: /pointer: message [rule]: {raw!r}"
        out.append(Problem("", int(m[1]), int(m[2]), m[4], m[5], m[6], "warning" if m[3] == "warning" else "error"))
    return out


def _line_for(p: Problem) -> str:
    """The expected.txt line for a problem: its format() without the file name."""
    return p.format()[len(p.file) + 1 :]


def _printed(p: Problem) -> re.Match[str]:
    """The fields of a problem as the CLI prints it (control characters escaped)."""
    m = _EXPECTED.match(_line_for(p))
    assert m, f"a problem that does not print as one LINE:COL: ... [rule] line: {_line_for(p)!r}"
    return m


def _kept_message(p: Problem) -> str:
    """The part of a message worth pinning: without lists that grow when the schema or catalog does."""
    message = p.message
    for marker in (" (allowed here:", "; allowed: ", " (`migbake "):
        message = message.split(marker)[0]
    if p.rule == "schema-pattern":
        message = message.split("; expected ")[0]
    if p.rule == "schema-type":
        message = re.sub(r"(; expected \w+) \(.*\)$", r"\1", message)
    printed = _printed(p)[5]
    return message if message in printed else printed  # as printed (control characters escaped)


def profile_file(case: Path, tmp_path: Path) -> Path:
    """The profile file of a case (built in ``tmp_path`` when the case holds a recipe)."""
    for name in ("node-profile.yaml", "node-profile.bin"):
        if (case / name).is_file():
            return case / name
    recipe = (case / "node-profile.generated").read_text(encoding="utf-8").split()
    assert recipe[0] == "pad-to-bytes", recipe
    size = int(recipe[1])
    filler = b"# padding so that the file is over the size limit\n"
    data = VALID_BASE.encode()
    data += filler * ((size - len(data)) // len(filler) + 1)
    path = tmp_path / "node-profile.yaml"
    path.write_bytes(data[: size - 1] + b"\n")
    assert path.stat().st_size == size
    return path


def _regenerate(case: Path, problems: list[Problem]) -> None:
    path = case / "expected.txt"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    comments = [line for line in old.splitlines() if line.startswith("#")]
    kept = _parse_expected(old)
    lines = []
    for p in problems:
        same = [e for e in kept if matches(e, p)]
        if same:
            e = same[0]
            lines.append(f"{e.line}:{e.col}: {e.severity}: {e.pointer}: {e.message} [{e.rule}]")
        else:
            pointer = _printed(p)[4]
            lines.append(f"{p.line}:{p.col}: {p.severity}: {pointer}: {_kept_message(p)} [{p.rule}]")
    path.write_text("\n".join([*comments, *lines]) + "\n", encoding="utf-8")


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40, len(CASES)
    for case in CASES:
        kinds = [p.name for p in case.glob("node-profile.*")]
        assert len(kinds) == 1, (case.name, kinds)
        assert (case / "expected.txt").is_file(), case.name


def test_generated_case_is_over_the_limit(tmp_path: Path) -> None:
    path = profile_file(CASES_DIR / "file-too-large", tmp_path)
    assert path.stat().st_size == MAX_PROFILE_BYTES + 1
    # one byte less is read as an ordinary (valid) profile: the limit is exact
    smaller = tmp_path / "smaller.yaml"
    smaller.write_bytes(path.read_bytes()[: MAX_PROFILE_BYTES - 1] + b"\n")
    assert check_file(smaller).ok


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_library_reports_exactly_the_expected_problems(case: Path, tmp_path: Path) -> None:
    checked = check_file(profile_file(case, tmp_path))
    problems = checked.problems
    if REGEN:
        _regenerate(case, problems)
    expected = _parse_expected((case / "expected.txt").read_text(encoding="utf-8"))
    shown = "\n".join(_line_for(p) for p in problems)
    assert checked.profile is None, f"{case.name} was accepted:\n{shown}"
    assert expected, f"{case.name}: expected.txt lists no problem"
    assert len(problems) == len(expected), f"{case.name}: got\n{shown}"
    for e, p in zip(expected, problems):
        assert matches(e, p), f"{case.name}: expected\n  {_line_for(e)}\ngot\n  {_line_for(p)}\nall:\n{shown}"
    for p in problems:
        assert "\n" not in p.format() and "\r" not in p.format(), p


def _problem_lines(output: str, file: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(f"{file}:")]


def _assert_validate_output(output: str, file: str, n_expected: int) -> None:
    assert "Traceback" not in output, output
    lines = output.splitlines()
    problems = _problem_lines(output, file)
    assert len(problems) == n_expected, output
    for line in problems:
        assert re.match(rf"^{re.escape(file)}:\d+:\d+: (error|warning): /", line), line
    # nothing else but the summary
    assert len(lines) == n_expected + 1 and "problem" in lines[-1], output


def _assert_nothing_written(parent: Path) -> None:
    left = sorted(p.name for p in parent.iterdir())
    assert left == [], f"generate left {left} behind"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cli_refuses_and_writes_nothing(case: Path, tmp_path: Path) -> None:
    profile = profile_file(case, tmp_path)
    n_expected = len(_parse_expected((case / "expected.txt").read_text(encoding="utf-8")))
    runner = CliRunner()
    result = runner.invoke(main, ["validate", str(profile)])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    _assert_validate_output(result.stdout, str(profile), n_expected)

    parent = tmp_path / "gen"
    parent.mkdir()
    out = parent / "out"
    result = runner.invoke(main, ["generate", str(profile), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert len(_problem_lines(result.stderr, str(profile))) == n_expected, result.stderr
    assert "nothing written" in result.stderr
    _assert_nothing_written(parent)


@pytest.mark.parametrize("name", SUBPROCESS_SAMPLE)
def test_real_process_refuses_without_traceback(name: str, tmp_path: Path) -> None:
    case = CASES_DIR / name
    profile = profile_file(case, tmp_path)
    n_expected = len(_parse_expected((case / "expected.txt").read_text(encoding="utf-8")))
    env = {**os.environ, "PYTHONPATH": str(REPO / "generator")}
    env.pop("MIGBAKE_DEBUG", None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "migbake", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )

    ran = run("validate", str(profile))
    assert ran.returncode == 1, ran
    assert "Traceback" not in ran.stderr and ran.stderr == "", ran.stderr
    _assert_validate_output(ran.stdout, str(profile), n_expected)

    parent = tmp_path / "gen"
    parent.mkdir()
    ran = run("generate", str(profile), "-o", str(parent / "out"))
    assert ran.returncode == 1, ran
    assert "Traceback" not in ran.stderr and ran.stdout == "", ran
    assert len(_problem_lines(ran.stderr, str(profile))) == n_expected, ran.stderr
    _assert_nothing_written(parent)
