"""`.ci/suite`: the VM tier runs beside the fast tier and the rest, and the run fails when any of them fails.

Runs the real script over a stand-in venv whose ``python`` records what it was asked to run and when, writes the
JUnit report pytest would, and exits as the test tells it; ``.ci/junit_total.py`` is the real one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

STAND_IN = r'''#!PYTHON
import json, os, runpy, sys, time
args = sys.argv[1:]
if args and args[0].endswith("junit_total.py"):
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
    sys.exit(0)
kind = "fast" if args and args[0].endswith("pythons.py") else "rest"
if "vm" in args and "not vm" not in args:
    kind = "vm"
start = time.time()
time.sleep(float(os.environ.get("STAND_IN_SLEEP_" + kind.upper(), "0")))
with open(os.environ["STAND_IN_LOG"], "a") as log:
    log.write(json.dumps({"kind": kind, "args": args, "start": start, "end": time.time()}) + "\n")
for arg in args:
    if arg.startswith("--junitxml="):
        failed = int(os.environ.get("STAND_IN_FAILED_" + kind.upper(), "0"))
        with open(arg.split("=", 1)[1], "w") as xml:
            xml.write('<testsuites><testsuite tests="%d" failures="%d" errors="0" skipped="1"/></testsuites>'
                      % (10 if kind == "rest" else 3, failed))
print(kind, "closing line")
sys.exit(int(os.environ.get("STAND_IN_RC_" + kind.upper(), "0")))
'''


def run_suite(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    python = venv / "bin" / "python"
    python.write_text(STAND_IN.replace("PYTHON", sys.executable, 1))
    python.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    log.unlink(missing_ok=True)
    ran = subprocess.run(["bash", str(REPO / ".ci/suite"), str(venv), "3.11", *args], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "STAND_IN_LOG": str(log), **env})
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return ran, calls


def test_the_vm_tier_runs_beside_the_fast_tier_and_the_rest(tmp_path: Path) -> None:
    ran, calls = run_suite(tmp_path, STAND_IN_SLEEP_VM="1.5", STAND_IN_SLEEP_FAST="0.5", STAND_IN_SLEEP_REST="0.5")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    by_kind = {c["kind"]: c for c in calls}
    assert set(by_kind) == {"fast", "rest", "vm"}
    assert by_kind["vm"]["start"] < by_kind["rest"]["end"] and by_kind["vm"]["start"] < by_kind["fast"]["end"]
    assert by_kind["fast"]["end"] <= by_kind["rest"]["start"]  # the fast tier, then the rest
    assert by_kind["vm"]["args"][by_kind["vm"]["args"].index("-m", 1) + 1] == "vm"
    assert "not vm" in by_kind["rest"]["args"]
    # the VM tier's output comes after the rest's, and one line counts both
    out = ran.stdout
    assert out.index("rest closing line") < out.index("=== the VM tier") < out.index("vm closing line")
    assert out.rstrip().splitlines()[-2] == "total: 11 passed, 0 failed, 2 skipped"


@pytest.mark.parametrize("failing", ["VM", "REST", "FAST"])
def test_the_run_fails_when_any_part_fails(tmp_path: Path, failing: str) -> None:
    env = {f"STAND_IN_RC_{failing}": "1"}
    if failing != "FAST":
        env[f"STAND_IN_FAILED_{failing}"] = "1"
    ran, calls = run_suite(tmp_path, **env)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert {c["kind"] for c in calls} == {"fast", "rest", "vm"}  # a failure stops nothing else


def test_serial_runs_the_vm_tier_first_and_alone(tmp_path: Path) -> None:
    ran, calls = run_suite(tmp_path, MIGBAKE_CI_SERIAL="1")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert [c["kind"] for c in calls] == ["vm", "fast", "rest"]


def test_arguments_run_one_pytest_with_them(tmp_path: Path) -> None:
    ran, calls = run_suite(tmp_path, "-m", "not vm", "tests/test_cli.py")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert len(calls) == 2 and calls[0]["kind"] == "fast"
    assert calls[1]["args"][-3:] == ["-m", "not vm", "tests/test_cli.py"]


def test_a_missing_report_counts_as_a_failure(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, str(REPO / ".ci/junit_total.py"), str(tmp_path / "none.xml")],
                         capture_output=True, text=True)
    assert ran.stdout.strip() == "total: 0 passed, 1 failed, 0 skipped"
