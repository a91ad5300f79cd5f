"""`.ci/run`: works as root and through sudo (its own venv), apt-get update only when needed, waits for apt's locks."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from realtools import require, run
from support import REPO

CI_RUN = REPO / ".ci/run"


@pytest.mark.realtool
def test_ci_run_is_shellcheck_clean() -> None:
    ran = run([require("shellcheck"), str(CI_RUN), str(REPO / ".ci/suite")])
    assert ran.rc == 0, ran.text


def test_ci_run_uses_its_own_venv_and_the_system_python() -> None:
    text = CI_RUN.read_text()
    # sudo resets PATH and an activated venv is lost: never `python3 -m pip` of whatever python3 is first
    assert "/usr/bin/python3 -m venv" in text
    assert re.search(r'"\$VENV/bin/python" -m pip install .* -e', text)
    assert re.search(r'"\$VENV/bin/python" -m pytest', (REPO / ".ci/suite").read_text())
    assert 'exec bash .ci/suite "$VENV"' in text
    assert "python3 -m pip" not in text.replace('"$VENV/bin/python" -m pip', "")
    # curl: the generated restore's network layout sources (tests/test_layout_network.py runs them)
    for package in ("python3-venv", "python3-pip", "packer", "openssh-client", "curl"):
        assert re.search(rf"\b{re.escape(package)}\b", text.split("APT_PACKAGES=(")[1].split(")")[0]), package


def test_ci_run_updates_apt_lists_only_when_needed() -> None:
    text = CI_RUN.read_text()
    update = [line for line in text.splitlines() if re.search(r"apt[-_]get update", line) and "#" not in line]
    assert update == ["  apt_get update -qq"], update  # only inside the condition
    condition = text.split("apt_get update -qq")[0].rsplit("if ", 1)[1]
    assert '"${#missing[@]}" -gt 0' in condition and "apt-cache show linux-image-amd64" in condition


def test_every_apt_get_waits_for_the_locks() -> None:
    text = CI_RUN.read_text()
    calls = [line.strip() for line in text.splitlines() if re.match(r"\s*apt[-_]get ", line)]
    inside = 'apt-get -o DPkg::Lock::Timeout="$((deadline - SECONDS > 0 ? deadline - SECONDS : 0))" "$@"'
    assert [c for c in calls if not c.startswith("apt_get ")] == [f'{inside} 2>"$err" || rc=$?'], calls


LOCKED = "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)"


def _apt_get_with(tmp_path: Path, fails: int, wait: int,
                  says: str = LOCKED) -> tuple[subprocess.CompletedProcess[str], float, str]:
    """.ci/run's apt_get over a fake apt-get that reports the lock held ``fails`` times, then succeeds."""
    text = CI_RUN.read_text()
    function = text[text.index("APT_LOCK_WAIT="):text.index("\n}\n", text.index("apt_get() {")) + 3]
    fake = tmp_path / "bin/apt-get"
    fake.parent.mkdir()
    fake.write_text(f"""#!/bin/sh
n=$(cat {tmp_path}/count 2>/dev/null || echo 0); echo $((n + 1)) >{tmp_path}/count; echo "$@" >>{tmp_path}/args
[ "$n" -ge {fails} ] && {{ echo updated; exit 0; }}
echo '{says}' >&2; exit 100
""")
    fake.chmod(0o755)
    start = time.monotonic()
    ran = subprocess.run(["bash", "-c", f"set -euo pipefail\n{function}\napt_get update -qq"], capture_output=True,
                         text=True, timeout=60, check=False,
                         env={"PATH": f"{fake.parent}:/usr/bin:/bin", "MIGBAKE_APT_LOCK_WAIT": str(wait)})
    return ran, time.monotonic() - start, (tmp_path / "args").read_text()


def test_apt_get_waits_while_another_apt_holds_the_lock(tmp_path: Path) -> None:
    ran, _, args = _apt_get_with(tmp_path, fails=2, wait=60)
    assert ran.returncode == 0 and ran.stdout == "updated\n", ran
    assert ran.stderr.count("waiting up to 60s") == 1 and "held by process 4242" in ran.stderr, ran.stderr
    assert args.count("-o DPkg::Lock::Timeout=") == 3 and args.count("update -qq") == 3, args


def test_apt_get_gives_up_when_the_wait_is_over(tmp_path: Path) -> None:
    ran, took, _ = _apt_get_with(tmp_path, fails=1000, wait=3)
    assert ran.returncode == 100 and LOCKED in ran.stderr, ran
    assert took < 15, took  # bounded


def test_apt_get_does_not_retry_another_failure(tmp_path: Path) -> None:
    ran, _, args = _apt_get_with(tmp_path, fails=1, wait=60, says="E: Unable to locate package packer")
    assert ran.returncode == 100 and "Unable to locate package packer" in ran.stderr, ran
    assert "waiting" not in ran.stderr and args.count("update") == 1, args
