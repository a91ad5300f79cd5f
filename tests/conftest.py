"""Shared fixtures; the shared helpers live in tests/support.py and tests/realtools.py."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/support.py, tests/realtools.py
# tests/unit (a module at a time), tests/outputs (each target judged by its real tool), tests/cli (commands as a user
# runs them), tests/vm (the boot test): a test module may import another's helpers (a simulated node, a judge)
sys.path.insert(1, str(Path(__file__).parent / "unit"))
sys.path.insert(1, str(Path(__file__).parent / "outputs"))
sys.path.insert(1, str(Path(__file__).parent / "cli"))
sys.path.insert(1, str(Path(__file__).parent / "vm"))

from support import IMAGES, REPO

sys.path.insert(0, str(REPO / "generator"))  # always test this checkout's package



@pytest.fixture(params=IMAGES, ids=[p.name for p in IMAGES])
def image_dir(request: pytest.FixtureRequest) -> Path:
    """Each folder of images/."""
    path: Path = request.param
    return path


@pytest.fixture(autouse=True)
def _machine_with_a_gpu() -> Iterator[None]:
    """The test copies of the generated scripts find an NVIDIA GPU on the PCI bus (a fake sysfs), as on a GPU
    node, and an empty root: ``support.WORLD``'s defaults, again for every test.

    This machine has none: without it every script run here would take the no-GPU path. A test of that
    path (tests/outputs/test_gpu_presence.py) points the scripts at a sysfs tree of its own.
    """
    from support import WORLD

    yield
    WORLD.reset()


def _registered_problems_only() -> None:
    """Every Problem any test makes carries a rule id of the registry (rules/registry.py): a new rule id
    without a declaration fails the test that first reports it (tests/unit/test_rule_registry.py shows this).

    And its declared severity: a check gives its problems theirs (``rules.declare.Check``; until then a problem is
    made an error), so a warning of an error rule, or any other severity than the declared one for a rule found
    outside a check (the loader, the schema, catalog files, import, captures), fails the test that makes it."""
    from migbake.problems import Problem
    from migbake.rules.registry import RULES

    made = Problem.__init__

    def checked(self: Problem, *args: object, **kwargs: object) -> None:
        made(self, *args, **kwargs)  # type: ignore[arg-type]
        declared = RULES.get(self.rule)
        if declared is None and not self.rule.startswith("schema-"):
            raise AssertionError(f"rule id {self.rule!r} is not in generator/migbake/rules/registry.py")
        if declared is not None and self.severity != declared.severity and (
                declared.stage != "rules" or self.severity == "warning"):
            raise AssertionError(f"a problem of {self.rule!r} made as {self.severity}: it is declared "
                                 f"{declared.severity} (a raise site does not restate a severity)")

    Problem.__init__ = checked  # type: ignore[method-assign]


_registered_problems_only()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say how many configs NVIDIA's own parser judged in this run (tests/realtools.mig_parted_valid)."""
    from realtools import MIG_PARTED_CHECKS

    if MIG_PARTED_CHECKS:
        terminalreporter.write_line(f"nvidia-mig-parted assert --valid-config: {len(MIG_PARTED_CHECKS)} configs "
                                    "checked by NVIDIA's parser")
