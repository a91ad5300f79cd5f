"""The house keeps its shape: imports point one way (no cycles), and each floor imports only the floors below it.

Every ``import`` of a migbake module counts, at module level or inside a function (a lazy import is
still an arrow). Each subpackage is one floor (``LAYERS``, from the top); a module may import its own
subpackage and the floors below it, never one above or beside it. The foundation modules at the top
of the package (``problems``, ``wording``, ``exits``, ``resources``, ``report``) are the ground floor.
The library never reaches up into a command or click, and nothing of migbake imports the boot test (its own
distribution, ``migbake_boottest`` in generator/boottest, found through an entry point).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support import REPO

PACKAGE = REPO / "generator" / "migbake"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The migbake modules (and top-level packages such as click) ``path`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from migbake.render import plan` is an arrow to the module migbake.render.plan
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules
            found.update(submodules or {node.module})
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m if m.startswith("migbake") else m.split(".")[0] for m in imports_of(path, set(modules))
                   if m != name and (m in modules or not m.startswith("migbake"))}
            for name, path in modules.items()}


# The floors, from the top: what each subpackage owns is in its __init__ docstring.
LAYERS = (
    ("cli",),
    ("commands",),
    ("render", "bake"),
    ("node", "slurm"),
    ("rules",),
    ("kubernetes",),
    ("migparted",),
    ("profile",),
    ("gpu",),
    ("document",),
    ("",),
)
FOUNDATION = ("problems", "wording", "exits", "resources", "report")
FLOORS = {name: len(LAYERS) - 1 - i for i, names in enumerate(LAYERS) for name in names}


def room(module: str) -> str:
    """The subpackage (or foundation module) a migbake module lives in: its first name under ``migbake``."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else ""
    return {"__main__": "cli", **dict.fromkeys(FOUNDATION, "")}.get(name, name)


def floor(module: str) -> int:
    return FLOORS[room(module)]


def test_no_import_cycles() -> None:
    g = graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(module):], module]))
        if module in done or module not in g:
            return
        for target in sorted(g[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(g):
        visit(module, [])


def test_every_module_lives_on_a_floor() -> None:
    assert sorted(m for m in graph() if room(m) not in FLOORS) == []


def test_each_floor_imports_only_the_floors_below_it() -> None:
    # within one room anything goes (cycles aside); across rooms only downwards, never sideways
    upward = sorted(f"{m} -> {t}" for m, targets in graph().items() for t in targets
                    if t.startswith("migbake.") and room(t) != room(m) and floor(t) >= floor(m))
    assert upward == []


def test_each_subpackage_says_what_it_owns_and_may_import() -> None:
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if init.parent.name in ("data",):
            continue
        assert "May import" in " ".join(doc.split()), f"{init}: its docstring says nothing of its imports"


def test_only_the_command_line_knows_click() -> None:
    assert sorted(m for m, targets in graph().items() if "click" in targets and floor(m) < FLOORS["commands"]) == []


def test_the_graph_sees_the_arrows_it_checks() -> None:
    g = graph()  # guards the parser above: a few arrows that exist must be seen
    assert "migbake.rules.validate" in g["migbake.commands.common"]
    assert "migbake.render.plan" in g["migbake.render.tree"]
    assert "click" in g["migbake.cli.group"]
    assert floor("migbake.commands.validate") > floor("migbake.render.tree") > floor("migbake.rules.validate")


def test_nothing_of_migbake_imports_the_boot_test() -> None:
    # the boot test is a distribution of its own, which a user's migbake does not have
    found = sorted(f"{p.relative_to(PACKAGE)}: {m}" for p in PACKAGE.rglob("*.py") for m in imports_of(p, set())
                   if m.split(".")[0] == "migbake_boottest")
    assert found == []


# What a module of render/targets/ may import (tests/test_render_targets.py runs them on a plan that hides
# the profile's GPUs): the plan, the files written so far, quoting (Ansible's variables too) and guard, the
# template environment, its own folder, the foundation and the standard library. Everything else a target
# needs is a plan field.
TARGETS = "migbake.render.targets"
TARGET_MAY_IMPORT = ("migbake.render.plan", "migbake.render.artifact", "migbake.render.quoting",
                     "migbake.render.guard", "migbake.render.environment", TARGETS,
                     *(f"migbake.{m}" for m in FOUNDATION), "migbake")


def target_modules() -> list[str]:
    return sorted(m for m in graph() if m == TARGETS or m.startswith(TARGETS + "."))


def forbidden_imports(imported: set[str]) -> list[str]:
    """The imports a target may not have: any migbake module outside TARGET_MAY_IMPORT, and third parties
    other than the standard library (jinja2 belongs to the environment)."""
    import sys

    stdlib = getattr(sys, "stdlib_module_names", None) or {"collections", "dataclasses", "typing", "posixpath",
                                                            "__future__", "functools", "json", "re"}
    bad = []
    for t in sorted(imported):
        if t.startswith("migbake"):
            if not any(t == ok or t.startswith(ok + ".") for ok in TARGET_MAY_IMPORT if ok != "migbake") \
                    and t != "migbake":
                bad.append(t)
        elif t.split(".")[0] not in stdlib:
            bad.append(t)
    return bad


def test_every_output_target_reads_only_the_plan() -> None:
    g = graph()
    modules = target_modules()
    assert len(modules) >= 8, modules  # the folder and one module per target: the rule has something to hold
    assert {m: forbidden_imports(g[m]) for m in modules if forbidden_imports(g[m])} == {}


@pytest.mark.parametrize("source", [
    "from migbake.profile.nodeprofile import NodeProfile",
    "from migbake.gpu.catalog import load_catalog",
    "import migbake.kubernetes.resources",
    "from migbake.migparted import config",
    "from migbake.node.expectations import AFTER_RESET",
    "from migbake.slurm.gres import slurm_nodes",
    "from migbake.profile.firstboot import commands",
    "import jinja2",
], ids=["profile", "catalog", "kubernetes", "migparted", "node", "slurm", "a-derivation", "jinja2"])
def test_a_target_that_imports_the_profile_or_the_catalog_fails_the_rule(tmp_path: Path, source: str) -> None:
    module = tmp_path / "newtarget.py"
    module.write_text(f"from __future__ import annotations\n{source}\n", encoding="utf-8")
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    found = {m if m.startswith("migbake") else m.split(".")[0] for m in imports_of(module, modules)}
    assert forbidden_imports(found) != []
