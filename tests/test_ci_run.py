"""`.ci/run`: works as root and through sudo (its own venv), apt-get update only when needed."""

from __future__ import annotations

import re

import pytest
from realtools import require, run
from support import REPO

CI_RUN = REPO / ".ci/run"


@pytest.mark.realtool
def test_ci_run_is_shellcheck_clean() -> None:
    ran = run([require("shellcheck"), str(CI_RUN)])
    assert ran.rc == 0, ran.text


def test_ci_run_uses_its_own_venv_and_the_system_python() -> None:
    text = CI_RUN.read_text()
    # sudo resets PATH and an activated venv is lost: never `python3 -m pip` of whatever python3 is first
    assert "/usr/bin/python3 -m venv" in text
    assert re.search(r'"\$VENV/bin/python" -m pip install .* -e', text)
    assert re.search(r'"\$VENV/bin/python" -m pytest', text)
    assert "python3 -m pip" not in text.replace('"$VENV/bin/python" -m pip', "")
    for package in ("python3-venv", "python3-pip", "packer", "openssh-client"):
        assert re.search(rf"\b{re.escape(package)}\b", text.split("APT_PACKAGES=(")[1].split(")")[0]), package


def test_ci_run_updates_apt_lists_only_when_needed() -> None:
    text = CI_RUN.read_text()
    update = [line for line in text.splitlines() if "apt-get update" in line and not line.lstrip().startswith("#")]
    assert update == ["  apt-get update -qq"], update  # only inside the condition
    condition = text.split("apt-get update -qq")[0].rsplit("if ", 1)[1]
    assert '"${#missing[@]}" -gt 0' in condition and "apt-cache show linux-image-amd64" in condition
