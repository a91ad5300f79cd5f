"""The Pythons and dependency floors pyproject declares are the ones CI runs (.ci/pythons.py, .ci/run)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support import REPO

if sys.version_info < (3, 11):
    pytest.skip("tomllib: .ci/pythons.py runs on CI's main interpreter", allow_module_level=True)
import tomllib


def pythons() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_pythons", REPO / ".ci/pythons.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_declared_pythons_run_from_the_floor_of_requires_python_to_3_13() -> None:
    declared = pythons().declared_pythons(PYPROJECT["project"])
    floor = re.fullmatch(r">=\s*(3\.\d+)", PYPROJECT["project"]["requires-python"])
    assert floor is not None
    assert declared == [f"3.{n}" for n in range(int(floor.group(1).split(".")[1]), 14)]
    assert PYPROJECT["tool"]["mypy"]["python_version"] == floor.group(1) == declared[0]


def test_the_floors_are_exactly_the_lower_bounds_of_the_dependencies() -> None:
    pins = pythons().floor_constraints(PYPROJECT["project"])
    assert pins == [re.sub(r">=", "==", dep) for dep in PYPROJECT["project"]["dependencies"]]
    assert "click==8.1" in pins and len(pins) == 4


def test_a_dependency_without_a_lower_bound_is_refused() -> None:
    with pytest.raises(SystemExit, match="no plain lower bound"):
        pythons().floor_constraints({"dependencies": ["click"]})


def test_an_interpreter_is_found_for_its_version_only() -> None:
    module = pythons()
    assert module.find_python("3.99") is None
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    found = module.find_python(here)
    if found is None and os.environ.get("CI") != "true":
        pytest.skip(f"no python{here} outside a virtual environment (pyenv, PATH)")
    assert found is not None


def test_ci_runs_the_fast_tier_on_every_other_python_before_the_full_suite() -> None:
    # .ci/run hands the test runs to .ci/suite (tests/test_ci_suite.py runs it: the fast tier, then the rest,
    # the VM tier beside them)
    assert 'exec bash .ci/suite "$VENV" "$main_python"' in (REPO / ".ci/run").read_text(encoding="utf-8")
    text = (REPO / ".ci/suite").read_text(encoding="utf-8")
    tier = text.index('"$VENV/bin/python" .ci/pythons.py --skip "$main_python"')
    assert tier < text.index('"$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"')
    tier = text.index('"$VENV/bin/python" .ci/pythons.py --skip "$main_python"', tier + 1)
    assert tier < text.index('"$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not vm"')
    module = pythons()
    assert all((REPO / f).is_file() for f in module.FAST_TESTS)


def test_the_fast_tier_passes_the_callers_ci_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # CI=true forced on the tier made every judge test fail on a clone without ../shared/tools
    module = pythons()
    seen: list[str | None] = []

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        env = kwargs["env"]
        assert isinstance(env, dict)
        seen.append(env.get("CI"))
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(module.subprocess, "run", fake_run)
    monkeypatch.setattr(module, "versions", lambda python: "")
    for i, ci in enumerate((None, "true", "false")):
        if ci is None:
            monkeypatch.delenv("CI", raising=False)
        else:
            monkeypatch.setenv("CI", ci)
        seen.clear()
        ok, _ = module.fast_tier(sys.executable, tmp_path / "x.whl", tmp_path / str(i), None, tmp_path / f"{i}.log")
        assert ok and seen and set(seen) == {ci}, (ci, seen)
