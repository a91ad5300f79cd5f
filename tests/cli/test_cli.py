"""The command line contract: commands, output format, exit codes, no tracebacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import IMAGES, REPO, cli

from migbake import __version__
from migbake.gpu.catalog import load_catalog
from migbake.gpu.placement import is_valid

LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (error|warning): (?P<ptr>/\S*): .+ \[[a-z0-9.-]+\]$")


def test_validate_valid_profiles_exit_0() -> None:
    code, out, _ = cli("validate", *(str(p / "node-profile.yaml") for p in IMAGES))
    assert code == 0
    assert out.strip().endswith(f"{len(IMAGES)} files valid")


def test_validate_directory_finds_profiles() -> None:
    code, out, _ = cli("validate", str(REPO / "images"))
    assert code == 0 and f"{len(IMAGES)} files valid" in out


def test_validate_reports_every_problem_one_per_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\ngpus:\n  - model: h200\n    mig: {layout: {1g.10gb: 8}}\n"
                   "kubelet: {presnt: true}\n")
    good = IMAGES[0] / "node-profile.yaml"
    code, out, _ = cli("validate", str(good), str(bad))
    assert code == 1
    lines = out.strip().splitlines()
    problems, summary = lines[:-1], lines[-1]
    assert len(problems) == 2
    for line in problems:
        m = LINE.match(line)
        assert m and m["file"] == str(bad), line
    assert problems[0].startswith(f"{bad}:5:20: error: /gpus/0/mig/layout/1g.10gb: ")
    assert problems[1].startswith(f"{bad}:6:11: error: /kubelet/presnt: unknown key 'presnt'; did you mean 'present'?")
    assert summary == "2 problems in 1 file (2 checked)"


def test_strict_says_the_warning_fails_the_file() -> None:
    warned = REPO / "tests/cases/warning/devices-without-gpu-count/node-profile.yaml"
    code, out, _ = cli("validate", str(warned))
    assert code == 0 and out.endswith("\n1 file valid, 1 warning\n"), out
    code, out, _ = cli("validate", "--strict", str(warned), str(IMAGES[0] / "node-profile.yaml"))
    summary = out.splitlines()[-1]
    assert code == 1 and "valid" not in summary, out  # the words match the verdict (exit 1)
    assert summary == "1 problem in 1 file (2 checked): 1 warning counted as an error (--strict)", summary
    code, _, err = cli("validate", "--strict", "--format", "github", str(warned))
    assert code == 1 and err == "1 problem in 1 file (1 checked): 1 warning counted as an error (--strict)\n"
    code, out, _ = cli("validate", "--strict", str(IMAGES[0] / "node-profile.yaml"))
    assert code == 0 and out == "1 file valid\n"


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert cli("validate")[0] == 2
    assert cli("generate", str(IMAGES[0] / "node-profile.yaml"))[0] == 2  # no -o
    assert cli("no-such-command")[0] == 2
    assert cli("layouts", "no-such-gpu")[0] == 2


def test_generate_invalid_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\ngpus: []\n")
    out = tmp_path / "out"
    code, _, err = cli("generate", str(bad), "-o", str(out))
    assert code == 1
    assert "/gpus: must have at least 1 items" in err and "nothing written" in err
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [bad]


def test_generate_then_check(tmp_path: Path) -> None:
    out = tmp_path / "out"
    profile = str(IMAGES[0] / "node-profile.yaml")
    assert cli("generate", profile, "-o", str(out))[0] == 0
    code, stdout, _ = cli("generate", profile, "-o", str(out), "--check")
    assert code == 0 and "up to date" in stdout
    (out / "rootfs/etc/nvidia-mig/config.yaml").write_text("edited\n")
    code, stdout, _ = cli("generate", profile, "-o", str(out), "--check")
    assert code == 1 and "-edited" in stdout


def test_version_and_python_m() -> None:
    assert cli("--version")[1].strip() == f"migbake, version {__version__}"
    p = subprocess.run([sys.executable, "-m", "migbake", "--version"], capture_output=True, text=True,
                       check=False)
    assert p.returncode == 0 and p.stdout.strip() == f"migbake, version {__version__}"


def test_gpus_lists_every_catalog_model() -> None:
    code, out, _ = cli("gpus", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["id"] for r in rows] == list(load_catalog().keys)
    code, out, _ = cli("gpus", "--profiles")
    assert code == 0 and "1g.18gb" in out and "h200-141gb" in out


@pytest.mark.parametrize("model", load_catalog().keys, ids=load_catalog().keys)
def test_layouts_agree_with_the_placement_check(model: str) -> None:
    code, out, _ = cli("layouts", model, "--json")
    assert code == 0
    data = json.loads(out)
    m = load_catalog().by_key(model)
    assert data["count"] == len(data["layouts"]) > 0
    for lay in data["layouts"]:
        assert is_valid(m, lay["mig-devices"])
        used = sum(p["size"] for p in lay["placements"])
        assert used <= m.total_memory_slices


def test_show_draws_the_slices() -> None:
    code, out, _ = cli("show", str(REPO / "images/a100-80gb-mixed/node-profile.yaml"))
    assert code == 0
    assert "|2g.20gb            |1g.10gb  |1g.10gb  |3g.40gb" in out
    assert "MIG mode survives a reboot" in out


def test_no_traceback_without_debug(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff\xfe garbage")
    p = subprocess.run([sys.executable, "-m", "migbake", "validate", str(bad)], capture_output=True, text=True,
                       check=False)
    assert p.returncode == 1
    assert "Traceback" not in p.stdout + p.stderr
    assert "byte-order-mark" in p.stdout
