"""pip install . into a fresh venv outside the checkout: templates, schemas and data are in the wheel."""

from __future__ import annotations

import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from support import REPO

pytestmark = pytest.mark.realtool


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, timeout=600)


def test_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                  "-w", str(dist), str(REPO)], tmp_path)
    assert built.returncode == 0, built.stderr
    wheels = list(dist.glob("migbake-*.whl"))
    assert len(wheels) == 1
    import zipfile

    names = set(zipfile.ZipFile(wheels[0]).namelist())
    assert "migbake/schemas/node-profile.schema.json" in names
    assert "migbake/templates/cloud-init/user-data.j2" in names
    assert "migbake/gpu/data/mig-catalog.json" in names

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    installed = _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheels[0])],
                     tmp_path)
    assert installed.returncode == 0, installed.stderr
    where = _run([str(py), "-c", "import migbake.resources as r; print(r.templates_dir()); print(r.schema_path())"],
                 tmp_path)
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(env_dir)) for line in where.stdout.split()), where.stdout
    out = tmp_path / "out"
    gen = _run([str(env_dir / "bin" / "migbake"), "generate",
                str(REPO / "images/h200-inference/node-profile.yaml"), "-o", str(out)], tmp_path)
    assert gen.returncode == 0, gen.stderr
    committed = REPO / "images/h200-inference/generated"
    for f in committed.rglob("*"):
        if f.is_file() and f.name != ".migbake-output":  # it records the profile's path relative to OUT
            assert (out / f.relative_to(committed)).read_bytes() == f.read_bytes(), f


def test_every_subpackage_ships_in_the_wheel() -> None:
    # a new room (render/targets, slurm, ...) that pyproject's package list forgets imports from a checkout
    # and fails only where migbake is installed from a wheel
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    listed = set(re.findall(r'"(migbake(?:\.[a-z_]+)*)"', text.split("packages = [", 1)[1].split("]", 1)[0]))
    package = REPO / "generator" / "migbake"
    present = {".".join(("migbake", *p.parent.relative_to(package).parts)) for p in package.rglob("__init__.py")}
    assert sorted(present - listed) == []
