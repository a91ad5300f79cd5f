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
    kind = "vm1" if "tests/vm/test_boot_real.py" in args else "vm2"
start = time.time()
time.sleep(float(os.environ.get("STAND_IN_SLEEP_" + kind.upper().rstrip("12"), "0")))
with open(os.environ["STAND_IN_LOG"], "a") as log:
    log.write(json.dumps({"kind": kind, "args": args, "start": start, "end": time.time()}) + "\n")
for arg in args:
    if arg.startswith("--junitxml="):
        failed = int(os.environ.get("STAND_IN_FAILED_" + kind.upper(), "0"))
        with open(arg.split("=", 1)[1], "w") as xml:
            xml.write('<testsuites><testsuite tests="%d" failures="%d" errors="0" skipped="1"/></testsuites>'
                      % (10 if kind == "rest" else 3, failed))
print(kind, "closing line", " ".join(args))
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


def test_the_vm_tier_runs_in_two_shards_beside_the_fast_tier_and_the_rest(tmp_path: Path) -> None:
    ran, calls = run_suite(tmp_path, STAND_IN_SLEEP_VM="1.5", STAND_IN_SLEEP_FAST="0.5", STAND_IN_SLEEP_REST="0.5")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    by_kind = {c["kind"]: c for c in calls}
    assert set(by_kind) == {"fast", "rest", "vm1", "vm2"}
    for shard in ("vm1", "vm2"):
        assert by_kind[shard]["start"] < by_kind["rest"]["end"] and by_kind[shard]["start"] < by_kind["fast"]["end"]
        args = by_kind[shard]["args"]
        assert args[args.index("-m", 1) + 1] == "vm"
    assert by_kind["vm1"]["start"] < by_kind["vm2"]["end"] and by_kind["vm2"]["start"] < by_kind["vm1"]["end"]
    assert by_kind["fast"]["end"] <= by_kind["rest"]["start"]  # the fast tier, then the rest
    assert "not vm" in by_kind["rest"]["args"]
    # shard 1 names its files; shard 2 is the rest of tests/vm, without them: every VM test is in one shard
    shard1 = [a for a in by_kind["vm1"]["args"] if a.startswith("tests/vm/")]
    assert shard1 and "tests/vm" in by_kind["vm2"]["args"]
    # a file leaves shard 2 by --ignore, one test (FILE::NAME) by --deselect
    assert [a for a in by_kind["vm2"]["args"] if a.startswith(("--ignore=", "--deselect="))] == [
        f"--deselect={f}" if "::" in f else f"--ignore={f}" for f in shard1]
    assert any("::" in f for f in shard1) and any("::" not in f for f in shard1)
    # the shards' output comes after the rest's, and one line counts all three reports
    out = ran.stdout
    assert out.index("rest closing line") < out.index("=== the VM tier, shard 1") < out.index("vm1 closing line")
    assert out.index("vm1 closing line") < out.index("=== the VM tier, shard 2") < out.index("vm2 closing line")
    assert out.rstrip().splitlines()[-2] == "total: 13 passed, 0 failed, 3 skipped"


@pytest.mark.parametrize("failing", ["VM1", "VM2", "REST", "FAST"])
def test_the_run_fails_when_any_part_fails(tmp_path: Path, failing: str) -> None:
    env = {f"STAND_IN_RC_{failing}": "1"}
    if failing != "FAST":
        env[f"STAND_IN_FAILED_{failing}"] = "1"
    ran, calls = run_suite(tmp_path, **env)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert {c["kind"] for c in calls} == {"fast", "rest", "vm1", "vm2"}  # a failure stops nothing else
    if failing != "FAST":
        assert "total: 12 passed, 1 failed, 3 skipped" in ran.stdout


def test_serial_runs_the_vm_shards_first_and_alone(tmp_path: Path) -> None:
    ran, calls = run_suite(tmp_path, MIGBAKE_CI_SERIAL="1")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert [c["kind"] for c in calls] == ["vm1", "vm2", "fast", "rest"]
    for before, after in zip(calls, calls[1:]):
        assert before["end"] <= after["start"]


def test_arguments_run_one_pytest_with_them(tmp_path: Path) -> None:
    ran, calls = run_suite(tmp_path, "-m", "not vm", "tests/test_cli.py")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert len(calls) == 2 and calls[0]["kind"] == "fast"
    assert calls[1]["args"][-3:] == ["-m", "not vm", "tests/test_cli.py"]


def test_a_missing_report_counts_as_a_failure(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, str(REPO / ".ci/junit_total.py"), str(tmp_path / "none.xml")],
                         capture_output=True, text=True)
    assert ran.stdout.strip() == "total: 0 passed, 1 failed, 0 skipped"
