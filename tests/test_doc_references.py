"""Docstrings and doc pages name modules that exist (issue 39): a moved or renamed module leaves no
stale name behind.

Two kinds of reference are checked, wherever they stand in backticks in a docstring of the package, of
a test or benchmark module, or on a doc page (README, CONTRIBUTING, docs/):
- a path ending in ``.py`` (``render/plan.py``, ``tests/test_docs.py``, a bare ``wording.py``): some file
  of the repository ends with exactly those path components;
- a dotted name that starts with one of the package's own modules (``render.quoting.yaml_block``,
  ``migbake.gpu.driverplacement.placements_of``) and goes on with a module of it or a Python-cased name
  (``rules.registry.RULES``): the longest importable prefix is a module of the package and the rest are
  attributes of it. A profile key (``kubernetes.allocation``, by the schema), a domain or a file name
  that happens to start with a module's name (``gpu.nvidia.com``, ``slurm.conf``) is not a reference.
A reference to another project's file carries its repository (``repo:path@tag``) and is not ours.
"""

from __future__ import annotations

import ast
import importlib
import re
from functools import lru_cache
from pathlib import Path

import pytest
from support import REPO

from migbake.resources import load_schema

PACKAGE = REPO / "generator" / "migbake"
TOP = sorted({p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("__")} |
             {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()})
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
SOURCES = [*sorted(PACKAGE.rglob("*.py")), *sorted((REPO / "tests").rglob("*.py")),
           *sorted((REPO / "benchmarks").glob("*.py")), *sorted((REPO / "docs").rglob("*.py"))]

# `` or ` around the reference; not preceded by ':' (repo:path) and with no '@' (a tag of another repo)
PATH_REF = re.compile(r"(?<![:\w/.])`{1,2}([A-Za-z0-9_./-]+\.py)`{1,2}")
DOTTED_REF = re.compile(r"`{1,2}((?:migbake\.[A-Za-z_][A-Za-z0-9_]*|" + "|".join(TOP) + r")"
                        r"(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?<!\.py)`{1,2}")


def _docstrings(path: Path) -> str:
    """Every docstring of a Python file, joined."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *(n for n in ast.walk(tree)
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return "\n".join(filter(None, (ast.get_docstring(n, clean=False) for n in nodes)))


@lru_cache(maxsize=1)
def _repo_files() -> frozenset[tuple[str, ...]]:
    """Every file of the checkout as its path components (the virtual environment and caches left out)."""
    skip = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", "build", "dist"}
    return frozenset(p.relative_to(REPO).parts for p in REPO.rglob("*.py")
                     if not skip.intersection(p.relative_to(REPO).parts))


@lru_cache(maxsize=1)
def _profile_keys() -> frozenset[str]:
    """Every key path of the node profile's schema, dotted (``kubernetes.allocation``)."""
    schema = load_schema()
    defs = schema.get("$defs", {})
    found: set[str] = set()

    def walk(node: dict[str, object], prefix: str, depth: int) -> None:
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 8:
            walk(defs[ref.rsplit("/", 1)[1]], prefix, depth + 1)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                walk(node[key], prefix, depth + 1)  # type: ignore[arg-type]
        for key in ("oneOf", "anyOf", "allOf"):
            for sub in node.get(key, []) or []:  # type: ignore[union-attr]
                walk(sub, prefix, depth + 1)
        for name, sub in (node.get("properties") or {}).items():  # type: ignore[union-attr]
            found.add(prefix + name)
            walk(sub, prefix + name + ".", depth + 1)

    walk(schema, "", 0)
    return frozenset(found)


def _is_module_reference(ref: str) -> bool:
    """Whether a dotted name that starts like a module of ours names one (not a key, domain or file)."""
    names = ref.removeprefix("migbake.").split(".")
    if ref.removeprefix("migbake.") in _profile_keys():
        return False
    top = PACKAGE / names[0]
    if not top.is_dir() or len(names) < 2:
        return True  # a module file of the package (report, wording, ...): anything after it is an attribute
    return (top / f"{names[1]}.py").exists() or (top / names[1]).is_dir() or names[1][:1].isupper()


def _path_exists(ref: str) -> bool:
    parts = tuple(part for part in ref.split("/") if part not in ("", "."))
    return any(f[-len(parts):] == parts for f in _repo_files())


def _dotted_exists(ref: str) -> bool:
    names = ref.split(".")
    if names[0] != "migbake":
        names = ["migbake", *names]
    for cut in range(len(names), 1, -1):
        if names[cut - 1] == "__main__":
            return False
        try:
            obj: object = importlib.import_module(".".join(names[:cut]))
        except ImportError:
            continue
        for attr in names[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def stale_references(text: str) -> list[str]:
    """The references of ``text`` that name no module, file or attribute of this repository."""
    stale = [ref for ref in PATH_REF.findall(text) if "@" not in ref and not _path_exists(ref)]
    stale += [ref for ref in DOTTED_REF.findall(text) if _is_module_reference(ref) and not _dotted_exists(ref)]
    return stale


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_docstrings_name_modules_that_exist(source: Path) -> None:
    assert stale_references(_docstrings(source)) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_doc_pages_name_modules_that_exist(page: Path) -> None:
    assert stale_references(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("text", [
    "Like ``rules.py`` these read the raw data",            # the module that became rules/
    "see `render/renderguard.py`",
    "the filter ``render.fleet.no_such_function``",
    "``migbake.layoutrules.check``",
    "``gpu.driverplacement.placements_of_nothing``",
    "``rules.NO_SUCH_TABLE``",
])
def test_a_stale_reference_is_found(text: str) -> None:
    assert stale_references(text) != []


@pytest.mark.parametrize("text", [
    "``render/plan.py``", "`tests/test_docs.py`", "``wording.py``", "``render.quoting``",
    "``migbake.gpu.driverplacement``", "NVIDIA/mig-parted:`pkg/foo.py`@v0.15.0",
    "``kubernetes.allocation``", "``slurm.node_name``", "``gpu.nvidia.com``", "``slurm.conf``",
])
def test_a_live_reference_passes(text: str) -> None:
    assert stale_references(text) == []
