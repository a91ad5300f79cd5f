"""The house keeps its shape: imports point one way (no cycles), and each floor imports only the floors below it.

Every ``import`` of a migbake module counts, at module level or inside a function (a lazy import is
still an arrow). Floors, from the top: the console entry and the command group (``entry``, ``cli``),
the commands (``commands/``), the boot test (``boottest/``), the library. The library never reaches up
into a command, click or the boot test.
"""

from __future__ import annotations

import ast
from pathlib import Path

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
            # `from migbake.boottest import fixtures` is an arrow to the module migbake.boottest.fixtures
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules
            found.update(submodules or {node.module})
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m if m.startswith("migbake") else m.split(".")[0] for m in imports_of(path, set(modules))
                   if m != name and (m in modules or not m.startswith("migbake"))}
            for name, path in modules.items()}


def floor(module: str) -> int:
    if module in ("migbake.entry", "migbake.cli", "migbake.__main__"):
        return 3
    if module.startswith("migbake.commands"):
        return 2
    if module.startswith("migbake.boottest"):
        return 1
    return 0


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


def test_each_floor_imports_only_the_floors_below_it() -> None:
    upward = sorted(f"{m} -> {t}" for m, targets in graph().items() for t in targets
                    if t.startswith("migbake.") and floor(t) > floor(m))
    assert upward == []


def test_only_the_command_line_knows_click() -> None:
    assert sorted(m for m, targets in graph().items() if "click" in targets and floor(m) < 2) == []


def test_the_graph_sees_the_arrows_it_checks() -> None:
    g = graph()  # guards the parser above: a few arrows that exist must be seen
    assert "migbake.validate" in g["migbake.commands.common"]
    assert "migbake.boottest.fixtures" in g["migbake.boottest.run"]
    assert "click" in g["migbake.cli"]
    assert floor("migbake.commands.validate") > floor("migbake.boottest.run") > floor("migbake.validate")
