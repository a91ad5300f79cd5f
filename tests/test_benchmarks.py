"""The benchmarks run (a smoke test: nothing here is timed or compared with a threshold)."""

from __future__ import annotations

import sys

import pytest
from realtools import require, run
from support import REPO

pytestmark = pytest.mark.realtool


def test_bench_cli_smoke() -> None:
    require("check-jsonschema")
    require("cloud-init")
    ran = run([sys.executable, str(REPO / "benchmarks/bench_cli.py"), "--smoke"], timeout=600)
    assert ran.rc == 0, ran.text
    for heading in ("1. cold start", "python -c pass (floor)", "check-jsonschema (schema only)",
                    "cloud-init schema (user-data)", "migbake --version", "migbake gpus",
                    "2. validate + generate", "10 profiles", "2b. one profile in one process", "render one profile",
                    "3. migbake validate over a directory",
                    "4. maximal layouts"):
        assert heading in ran.out, ran.out


def test_bench_layouts_smoke() -> None:
    ran = run([sys.executable, str(REPO / "benchmarks/bench_layouts.py"), "--repeat", "1"], timeout=600)
    assert ran.rc == 0, ran.text
    assert "h200-141gb" in ran.out and "total" in ran.out
