"""The fast tier on every Python that pyproject declares, and on the declared dependency floors.

    python .ci/pythons.py [--only 3.9,3.13] [--skip 3.11] [--no-floors]

For each ``Programming Language :: Python :: 3.X`` classifier of pyproject.toml, the interpreter is
looked up (pyenv's versions, then ``python3.X`` on PATH); in CI (``CI=true``) a declared one that is
missing fails, elsewhere it is skipped with a note. Each gets a fresh virtual environment with a
non-editable install of the wheel built once from this checkout (plus pytest), then the fast tier:
``migbake --version``, ``validate`` of the examples and valid cases, ``images --check`` (every example
generated again and compared byte for byte with the committed tree), ``FAST_TESTS`` under pytest, and
on the oldest one mypy.
Then the same tier once more on the oldest declared Python with exactly the lower bounds of
``dependencies`` installed (a constraints file made from pyproject: ``click>=8.1`` -> ``click==8.1``).
Prints one line per run (interpreter, dependency versions, seconds) and exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tomllib  # Python 3.11: this script runs on CI's main interpreter

REPO = Path(__file__).resolve().parents[1]
# load, schema (and the fast schema), rules, render, write, the CLI and its exits, the real mig-parted parser
FAST_TESTS = ["tests/test_cli.py", "tests/test_fastschema.py", "tests/test_invalid_cases.py",
              "tests/test_warning_cases.py", "tests/test_write.py", "tests/test_images.py",
              "tests/test_startup.py", "tests/test_error_path.py", "tests/test_layout.py",
              "tests/test_catalog_file.py", "tests/test_gpu_names.py", "tests/test_mig_parted.py"]
# what the clean copy the wheel is built from leaves out: build outputs, caches, venvs, git
CLEAN_COPY_IGNORES = ("build", "dist", "*.egg-info", "__pycache__", ".venv", ".git", ".*_cache", ".hypothesis",
                      "out")
SHOWN = ("click", "Jinja2", "PyYAML", "jsonschema", "MarkupSafe", "referencing")


def project() -> dict[str, object]:
    """pyproject.toml's [project] table."""
    with open(REPO / "pyproject.toml", "rb") as fh:
        table: dict[str, object] = tomllib.load(fh)["project"]
    return table


def declared_pythons(meta: dict[str, object]) -> list[str]:
    """The ``3.X`` versions the classifiers declare, oldest first."""
    found = {m.group(1) for c in meta.get("classifiers", []) if isinstance(c, str)  # type: ignore[attr-defined]
             for m in [re.fullmatch(r"Programming Language :: Python :: (3\.\d+)", c)] if m}
    return sorted(found, key=lambda v: int(v.split(".")[1]))


def floor_constraints(meta: dict[str, object]) -> list[str]:
    """``name==X`` for each ``name>=X`` of ``dependencies``; a dependency without a lower bound is an error."""
    pins = []
    for dep in meta["dependencies"]:  # type: ignore[attr-defined]
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*>=\s*([0-9][0-9.]*)(\s*,\s*<[^,;]+)?", dep)
        if not m:
            raise SystemExit(f"pythons: dependency {dep!r} has no plain lower bound (name>=X) to test")
        pins.append(f"{m.group(1)}=={m.group(2)}")
    return pins


def find_python(version: str) -> str | None:
    """An interpreter of ``version`` (3.X): pyenv's newest patch release of it, else ``python3.X`` on PATH."""
    roots = [os.environ.get("PYENV_ROOT", ""), os.path.expanduser("~/.pyenv")]
    for root in filter(None, roots):
        builds = glob.glob(f"{root}/versions/{version}.*/bin/python{version}")
        builds.sort(key=lambda p: [int(x) for x in re.findall(r"\d+", Path(p).parents[1].name)])
        for candidate in reversed(builds):
            if _is_python(candidate, version):
                return candidate
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(folder, f"python{version}")
        if "/shims" not in folder and os.access(candidate, os.X_OK) and _is_python(candidate, version):
            return candidate
    return None


def _is_python(path: str, version: str) -> bool:
    ran = subprocess.run([path, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=False)
    return ran.returncode == 0 and ran.stdout.strip() == version


def fast_tier(python: str, wheel: Path, work: Path, constraints: Path | None, log: Path,
              *, typecheck: bool = False) -> tuple[bool, str]:
    """Install ``wheel`` into a fresh venv of ``python`` and run the fast tier; (passed, dependency versions).

    With ``typecheck``, mypy (the newest release that runs there) checks the package with the stubs and
    dependencies this Python gets: pyproject's ``python_version`` is the floor, which the main
    interpreter's newer mypy may no longer target.
    """
    work.mkdir(parents=True)
    env_dir = work / "venv"
    bin_dir = env_dir / "bin"
    # the caller's CI passes through: in CI (CI=true) a missing judge fails the tier's tests; in a fresh
    # clone without ../shared/tools they skip, naming the judge (README: the real tools)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "VIRTUAL_ENV": str(env_dir), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q"]
    migbake = str(bin_dir / "migbake")
    steps = [([python, "-m", "venv", str(env_dir)], work),
             ([*pip, *(["-c", str(constraints)] if constraints else []), str(wheel), "pytest>=7"], work),
             ([migbake, "--version"], work),
             ([migbake, "validate", str(REPO / "images"), str(REPO / "tests/cases/valid")], work),
             ([migbake, "images", "--check", str(REPO / "images")], work),
             ([str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", *FAST_TESTS], REPO)]
    if typecheck:
        steps += [([*pip, "mypy>=1.8", "types-PyYAML", "types-jsonschema"], work),
                  ([str(bin_dir / "mypy"), "--cache-dir", str(work / "mypy-cache")], REPO)]
    with open(log, "w", encoding="utf-8") as out:
        for i, (argv, cwd) in enumerate(steps):
            out.write(f"$ {' '.join(argv)}\n")
            out.flush()
            if subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode:
                return False, versions(bin_dir / "python") if i > 1 else "(not installed)"
    return True, versions(bin_dir / "python")


def versions(python: Path) -> str:
    """The versions of the ``SHOWN`` distributions that ``python`` has."""
    code = (f"import importlib.metadata as m\nfor d in {SHOWN!r}:\n    try: print(d + ' ' + m.version(d))\n"
            "    except m.PackageNotFoundError: pass\n")
    ran = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return ", ".join(ran.stdout.split("\n")[:-1])


def main(argv: list[str] | None = None) -> int:
    """Run the tiers; print the matrix; 1 if a tier failed or (in CI) a declared Python is missing."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated 3.X versions to run (default: every declared one)")
    parser.add_argument("--skip", default="", help="comma-separated 3.X versions not to run (the main one)")
    parser.add_argument("--no-floors", action="store_true", help="do not run the dependency-floor tier")
    args = parser.parse_args(argv)
    meta = project()
    declared = declared_pythons(meta)
    wanted = args.only.split(",") if args.only else declared
    skipped = set(filter(None, args.skip.split(",")))
    in_ci = os.environ.get("CI") == "true"
    failed = 0
    with tempfile.TemporaryDirectory(prefix="migbake-pythons-") as tmp:
        work = Path(tmp)
        # from a clean copy: setuptools reuses an earlier build's build/lib, whose files the wheel would keep
        source = work / "source"
        shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*CLEAN_COPY_IGNORES))
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                                "-w", str(work / "dist"), str(source)], check=False)
        if built.returncode:
            return 1
        wheel = next((work / "dist").glob("migbake-*.whl"))
        runs: list[tuple[str, str, Path | None]] = [(v, "latest", None) for v in wanted if v not in skipped]
        if not args.no_floors:
            floors = work / "floors.txt"
            floors.write_text("\n".join(floor_constraints(meta)) + "\n", encoding="utf-8")
            runs.append((declared[0], "floors", floors))
        print(f"pythons: fast tier ({len(FAST_TESTS)} test files) on {', '.join(v for v, _, _ in runs)}"
              + (f"; {', '.join(sorted(skipped))} runs the full suite instead" if skipped else ""), flush=True)
        for version, deps, constraints in runs:
            python = find_python(version)
            if python is None:
                print(f"  python {version:<5} {deps:<7} MISSING (declared in pyproject's classifiers)"
                      + ("" if in_ci else ": skipped outside CI"), flush=True)
                failed += in_ci
                continue
            log = work / f"{version}-{deps}.log"
            start = time.perf_counter()
            ok, have = fast_tier(python, wheel, work / f"{version}-{deps}", constraints, log,
                                 typecheck=version == declared[0] and constraints is None)
            took = time.perf_counter() - start
            print(f"  python {version:<5} {deps:<7} {'passed' if ok else 'FAILED'} in {took:5.1f} s  "
                  f"{python}  [{have}]", flush=True)
            if not ok:
                failed += 1
                sys.stdout.write(log.read_text(encoding="utf-8")[-6000:])
            shutil.rmtree(work / f"{version}-{deps}", ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
