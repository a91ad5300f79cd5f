"""The wheel is what we test: built once, installed (not editable) into a fresh venv, every command run from a
folder outside the checkout and compared with the same command run from the checkout.

A template or schema that pyproject's package data leaves out (a dotfile such as ansible/.ansible-lint.j2: glob's
``*`` skips names that start with a dot) works from a checkout and fails only where migbake is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import H200_EXPORT, H200_FIXTURES, REPO, cli

pytestmark = pytest.mark.realtool

P1 = str(REPO / "images/h200-inference/node-profile.yaml")
P2 = str(REPO / "images/h100-h200-inference/node-profile.yaml")  # named layouts: exported to the GPU Operator alone
P3 = str(REPO / "images/a100-80gb-mixed/node-profile.yaml")
XML = str(H200_FIXTURES / "nvidia-smi-q.xml")
ALL = [str(p) for p in sorted((REPO / "images").glob("*/node-profile.yaml"))]
# every command on the example images: (id, argv, exit code). "out" and "images" are relative to the folder the
# command runs in; `images` there is a copy of the checkout's images/
COMMANDS = [
    ("validate", ["validate", *ALL], 0),
    ("generate", ["generate", P1, "-o", "out"], 0),
    ("export", ["export", P1], 0),
    ("export-gpu-operator", ["export", "--gpu-operator", P1, P3], 0),
    ("export-gpu-operator-named", ["export", "--gpu-operator", P2], 0),
    ("export-ansible", ["export", "--ansible", P1, P2, "-o", "out"], 0),
    ("import", ["import", str(H200_EXPORT), "--nvidia-smi-xml", XML], 0),
    ("show", ["show", P1], 0),
    ("layouts", ["layouts", "h200"], 0),
    ("gpus", ["gpus"], 0),
    ("preflight", ["preflight", P1, "--nvidia-smi-xml", XML], 1),  # the captured H200 has MIG off: NOT READY
    ("images-check", ["images", "--check", "images"], 0),
    ("bake-dry-run", ["bake", P1, "-o", "out", "--only", "null.ssh", "--var", "ssh_host=192.0.2.1", "--dry-run"], 0),
]


# what a clean copy of the checkout leaves out: build outputs, caches, venvs, git
CLEAN_COPY_IGNORES = ("build", "dist", "*.egg-info", "__pycache__", ".venv", ".nox", ".git", ".*_cache",
                      ".hypothesis", "out")


@dataclass(frozen=True)
class Installed:
    """The wheel and the venv it is installed in."""

    wheel: Path
    env: Path

    @property
    def migbake(self) -> str:
        """The installed console script."""
        return str(self.env / "bin" / "migbake")


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=600,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout, built once (``pip wheel --no-deps``).

    From a clean copy: setuptools reuses an earlier build's ``build/lib``, and a file that an earlier package
    list shipped would still be in the wheel.
    """
    dist, source = tmp_path_factory.mktemp("dist"), tmp_path_factory.mktemp("source") / "migbake"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*CLEAN_COPY_IGNORES))
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                  "--disable-pip-version-check", "-w", str(dist), str(source)], dist)
    assert built.returncode == 0, built.stderr
    wheels = list(dist.glob("migbake-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """``wheel`` installed, not editable, into a fresh venv (its dependencies from the configured index)."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    ran = _run([str(env_dir / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                str(wheel)], env_dir)
    assert ran.returncode == 0, ran.stderr
    return Installed(wheel, env_dir)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_every_module_of_the_checkout_imports_from_the_wheel(installed: Installed, tmp_path: Path) -> None:
    # a subpackage that pyproject's package list forgets imports from a checkout and fails only where migbake is
    # installed from a wheel
    package = REPO / "generator" / "migbake"
    modules = sorted(".".join(("migbake", *p.relative_to(package).with_suffix("").parts)).removesuffix(".__init__")
                     for p in package.rglob("*.py") if p.name != "__main__.py")
    ran = _run([str(installed.env / "bin/python"), "-c", "import importlib, sys\n"
                "for name in sys.argv[1:]: importlib.import_module(name)", *modules], tmp_path)
    assert ran.returncode == 0, ran.stderr


def test_the_installed_migbake_reads_its_own_templates_and_schemas(installed: Installed, tmp_path: Path) -> None:
    where = _run([str(installed.env / "bin/python"), "-c",
                  "from migbake.render.environment import environment; from migbake.packagedata import load_schema; "
                  "print(environment().get_template('scripts/verify-mig-restore.sh.j2').filename); "
                  "print(load_schema()['$id'])"], tmp_path)
    assert where.returncode == 0, where.stderr
    template, schema_id = where.stdout.split()
    assert template.startswith(str(installed.env)) and schema_id.startswith("https://"), where.stdout
    version = _run([installed.migbake, "--version"], tmp_path)
    assert version.returncode == 0 and "0.1.0" in version.stdout, version


def test_generate_from_the_wheel_writes_the_committed_tree(installed: Installed, tmp_path: Path) -> None:
    ran = _run([installed.migbake, "generate", P1, "-o", "out"], tmp_path)
    assert ran.returncode == 0, ran.stderr
    committed = _tree(REPO / "images/h200-inference/generated")
    written = _tree(tmp_path / "out")
    committed.pop(".migbake-output")  # it records the profile's path relative to OUT
    written.pop(".migbake-output")
    assert written == committed


@pytest.mark.parametrize(("argv", "code"), [c[1:] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_every_command_from_the_wheel_does_what_the_checkout_does(
        installed: Installed, argv: list[str], code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel_dir, checkout_dir = tmp_path / "wheel", tmp_path / "checkout"
    for d in (wheel_dir, checkout_dir):
        d.mkdir()
        if "images" in argv:
            shutil.copytree(REPO / "images", d / "images")
    ran = _run([installed.migbake, *argv], wheel_dir)
    assert "Traceback" not in ran.stderr and "not found" not in ran.stderr, ran.stderr
    assert ran.returncode == code, (ran.stdout[-2000:], ran.stderr)
    monkeypatch.chdir(checkout_dir)
    expected = cli(*argv, env={"NO_COLOR": "1"})
    # bake's dry run validates in a temporary folder of its own
    same = [re.sub(r"/migbake-dry-run-[^/]+/", "/TMP/", text) for text in (ran.stdout, ran.stderr, *expected[1:])]
    assert (ran.returncode, *same[:2]) == (expected[0], *same[2:])
    assert _tree(wheel_dir) == _tree(checkout_dir)


def test_export_ansible_from_the_wheel_writes_the_lint_config(installed: Installed, tmp_path: Path) -> None:
    ran = _run([installed.migbake, "export", "--ansible", P1, P2, "-o", "role"], tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "role/.ansible-lint").is_file()


# --- the boot test: a distribution of its own (generator/boottest), not in migbake's wheel -----------------------

BOOTTEST = REPO / "generator" / "boottest"


def test_the_wheel_carries_no_boot_test(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert [n for n in names if n.endswith((".c", ".h")) or "/guest/" in n or "boottest" in n] == []
    assert [n for n in names if n.endswith(".py") and "qemu" in n] == []


def test_boot_test_without_its_distribution_says_how_to_install_it(installed: Installed, tmp_path: Path) -> None:
    listed = _run([installed.migbake, "--help"], tmp_path)
    assert listed.returncode == 0 and "\n  boot-test  Boot PROFILE's artifacts" in listed.stdout, listed
    for argv in (["boot-test", "--help"], ["boot-test", P1]):
        ran = _run([installed.migbake, *argv], tmp_path)
        assert (ran.returncode, ran.stdout) == (2, ""), ran
        assert ran.stderr == ("migbake: error: boot-test is not installed: it comes with the migbake-boottest "
                              "distribution; from a checkout of migbake: pip install ./generator/boottest\n")


@pytest.fixture(scope="module")
def with_boottest(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh venv with migbake's wheel and ``pip install ./generator/boottest`` (not editable), from a clean copy."""
    env_dir, source = tmp_path_factory.mktemp("venv-boottest"), tmp_path_factory.mktemp("boottest") / "boottest"
    shutil.copytree(BOOTTEST, source, ignore=shutil.ignore_patterns(*CLEAN_COPY_IGNORES))
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    ran = _run([str(env_dir / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                str(wheel), str(source)], env_dir)
    assert ran.returncode == 0, ran.stderr
    return Installed(wheel, env_dir)


def test_boot_test_from_its_own_distribution(with_boottest: Installed, tmp_path: Path) -> None:
    ran = _run([with_boottest.migbake, "boot-test", "--help"], tmp_path)
    assert ran.returncode == 0 and ran.stdout.startswith("Usage: migbake boot-test [OPTIONS] PROFILE"), ran
    assert "Exit codes:" in ran.stdout  # the command group's epilog: loaded through the group
    where = _run([str(with_boottest.env / "bin/python"), "-c",
                  "import migbake_boottest, pathlib; print(pathlib.Path(migbake_boottest.__file__).parent)"], tmp_path)
    package = Path(where.stdout.strip())
    assert package.is_relative_to(with_boottest.env), where
    # its data files (the guest's scripts and units, the simulated GPU's C sources) ship in its wheel
    data = {k for k in _tree(BOOTTEST / "migbake_boottest") if "__pycache__" not in k and not k.endswith(".py")}
    assert {"guest/initramfs-init", "simgpu/nvml.c", "simgpu/simgpu.h", "simgpu/README.md"} <= data
    assert sorted(data - set(_tree(package))) == []
