"""CI's sessions (https://nox.thea.codes): ``nox -l`` lists them, ``nox -s tests-3.12`` runs one.

- ``tests-3.X`` for each Python that pyproject's classifiers declare: on the main Python (CI's Debian 12
  ``python3``) the whole suite without the VM tier, on the others the fast tier (``FAST_TESTS``). Extra arguments
  go to pytest: ``nox -s tests-3.11 -- tests/cli/test_cli.py``.
- ``tests-3.14``: the fast tier on Debian sid's python3.14, in a chroot (``.ci/sid-chroot``; needs root).
- ``mindeps``: the fast tier on the oldest Python with exactly the lower bounds of ``dependencies``.
- ``lint`` (ruff, and import-linter for the layers), ``typing`` (mypy --strict, on the oldest Python),
  ``vm`` (``pytest -m vm``, two guests at once).
- ``lock``: writes .ci/constraints.txt again, from pyproject's dependencies and groups.

Every session installs the versions in .ci/constraints.txt. Interpreters come from pyenv (``~/.pyenv/versions``)
or ``python3.X`` on PATH; in CI (``CI=true``) a declared Python that is missing fails its session.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nox

REPO = Path(__file__).resolve().parent
LOCK = ".ci/constraints.txt"
PYPROJECT = nox.project.load_toml("pyproject.toml")
# sessions installed from Debian sid inside a chroot, not from the host's interpreters
CHROOT_PYTHONS = ("3.14",)
PYTHONS = [v for v in nox.project.python_versions(PYPROJECT) if v not in CHROOT_PYTHONS]
MAIN_PYTHON = "3.11"  # Debian 12's python3, where CI runs the whole suite
OLDEST_PYTHON = PYTHONS[0]
# load, schema (and its fast yes/no check), rules, render, write, the CLI and its exits, the real mig-parted parser
FAST_TESTS = ["tests/cli/test_cli.py", "tests/cli/test_invalid_cases.py", "tests/unit/test_fastschema.py",
              "tests/cli/test_warning_cases.py", "tests/cli/test_write.py", "tests/outputs/test_images.py",
              "tests/cli/test_error_path.py", "tests/unit/test_layout.py",
              "tests/cli/test_catalog_file.py", "tests/unit/test_gpu_names.py", "tests/outputs/test_mig_parted.py"]
PYTEST = ["pytest", "-q", "-p", "no:cacheprovider"]

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"  # a session's venv is made once; later runs only install what changed
nox.options.error_on_missing_interpreters = os.environ.get("CI") == "true"
nox.options.download_python = "never"
nox.options.sessions = [*(f"tests-{v}" for v in PYTHONS), *(f"tests-{v}" for v in CHROOT_PYTHONS), "mindeps", "lint",
                        "typing"]


def _pyenv_pythons() -> None:
    """Put pyenv's newest build of each declared Python on PATH as ``python3.X`` (nox looks interpreters up there).

    Links in .nox/pythons, not pyenv's bin folders, so that their ``python3`` and ``pip`` do not shadow the system's.
    """
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    links = REPO / ".nox" / "pythons"
    for version in PYTHONS:
        builds = sorted(root.glob(f"{version}.*/bin/python{version}"),
                        key=lambda p: [int(x) for x in re.findall(r"\d+", p.parents[1].name)])
        link = links / f"python{version}"
        if link.is_symlink():
            link.unlink()
        if builds:
            links.mkdir(parents=True, exist_ok=True)
            link.symlink_to(builds[-1])
    if links.is_dir():
        os.environ["PATH"] = f"{links}{os.pathsep}{os.environ.get('PATH', '')}"


_pyenv_pythons()


def install(session: nox.Session, *args: str, constraints: str = LOCK) -> None:
    """pip install ARGS with the locked versions; pip 25.1 is the first with ``--group``."""
    session.install("pip>=25.1")
    session.install("-c", constraints, *args)


def fast_tier(session: nox.Session) -> None:
    """``migbake`` on the examples (``images --check`` writes each again, byte for byte), then FAST_TESTS."""
    session.run("migbake", "--version")
    session.run("migbake", "validate", "images", "tests/cases/valid")
    session.run("migbake", "images", "--check", "images")
    session.run(*PYTEST, *(session.posargs or FAST_TESTS))


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The whole suite but the VM tier on the main Python, the fast tier on the others."""
    if session.python != MAIN_PYTHON:
        install(session, "-e", ".", "--group", "test")
        fast_tier(session)
        return
    # the judges, the dev tools that tests/test_lint.py and the hook tests run by name, and the boot test (its
    # tests outside the VM tier replay recorded evidence and build the simulated GPU)
    install(session, "-e", ".", "-e", "./generator/boottest", "--group", "test", "--group", "judges", "--group", "dev")
    session.run(*PYTEST, *(session.posargs or ["-m", "not vm", "--durations=50"]))


@nox.session(name="tests-3.14", python=False)
def tests_chroot(session: nox.Session) -> None:
    """The fast tier on Debian sid's python3.14, in a chroot with this checkout bind-mounted at the same path."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            session.error("needs root (a debootstrapped chroot)")
        session.skip("needs root (a debootstrapped chroot)")
    venv = ".nox/tests-3-14-sid"
    script = (f"set -e; [ -x {venv}/bin/python ] || python3.14 -m venv {venv}; . {venv}/bin/activate;"
              f" pip install -q 'pip>=25.1'; pip install -q -c {LOCK} -e . --group test;"
              " migbake --version; migbake validate images tests/cases/valid; migbake images --check images;"
              f" exec {' '.join(PYTEST)} \"$@\"")
    # the chroot has none of boot-test's host tools (qemu, debootstrap, ...), which this test takes as given
    no_host_tools = "tests/cli/test_error_path.py::test_a_boot_test_that_cannot_run_says_so_like_every_command"
    session.run("bash", ".ci/sid-chroot", "bash", "-c", script, "fast-tier",
                *(session.posargs or [*FAST_TESTS, f"--deselect={no_host_tools}"]), external=True)


@nox.session(python=OLDEST_PYTHON)
def mindeps(session: nox.Session) -> None:
    """The fast tier with exactly the lower bounds of ``dependencies`` (``click>=8.1`` -> ``click==8.1``)."""
    floors = []
    for dep in PYPROJECT["project"]["dependencies"]:
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*>=\s*([0-9][0-9.]*)", dep)
        if not m:
            session.error(f"dependency {dep!r} has no plain lower bound (name>=X) to test")
        floors.append((m.group(1), m.group(2)))
    names = {name.lower() for name, _ in floors}
    # the rest of the lock stays: the floors replace only their own pins
    kept = [line for line in (REPO / LOCK).read_text(encoding="utf-8").splitlines()
            if not re.match(r"[A-Za-z0-9]", line) or re.split(r"[=<>!~; ]", line, maxsplit=1)[0].lower() not in names]
    constraints = Path(session.create_tmp()) / "floors.txt"
    constraints.write_text("\n".join([*kept, *(f"{n}=={v}" for n, v in floors)]) + "\n", encoding="utf-8")
    install(session, "-e", ".", "--group", "test", constraints=str(constraints))
    session.run("python", "-c", "import importlib.metadata as m; print(*(f'{d} {m.version(d)}' for d in "
                f"{[n for n, _ in floors]!r}), sep=', ')")
    fast_tier(session)


@nox.session(python=MAIN_PYTHON)
def lint(session: nox.Session) -> None:
    """ruff over the whole checkout, and the layers of the package (import-linter: pyproject's [tool.importlinter])."""
    install(session, "-e", ".", "-e", "./generator/boottest", "ruff", "import-linter")
    session.run("ruff", "check", *session.posargs)
    session.run("lint-imports")


@nox.session(python=OLDEST_PYTHON)
def typing(session: nox.Session) -> None:
    """mypy --strict (pyproject's [tool.mypy]) with the stubs and dependency versions the oldest Python gets."""
    install(session, "-e", ".", "--group", "dev")
    session.run("mypy", *session.posargs)


@nox.session(python=MAIN_PYTHON)
def vm(session: nox.Session) -> None:
    """The VM tier: two guests at once, each test file on one of them (``--dist loadfile``)."""
    install(session, "-e", ".", "-e", "./generator/boottest", "--group", "vm")
    session.run(*PYTEST, "-m", "vm", "-n", "2", "--dist", "loadfile", "--durations=15", *session.posargs)


@nox.session(python=MAIN_PYTHON)
def lock(session: nox.Session) -> None:
    """Write .ci/constraints.txt again: every group, for every declared Python (uv's universal resolution)."""
    session.install("uv")
    groups = [arg for name in PYPROJECT["dependency-groups"] for arg in ("--group", name)]
    session.run("uv", "pip", "compile", "pyproject.toml", "--universal", "--python-version", OLDEST_PYTHON, *groups,
                "--custom-compile-command", "nox -s lock", "-o", LOCK, *session.posargs)
