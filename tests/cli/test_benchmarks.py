"""The benchmarks run (a smoke test: nothing here is timed or compared with a threshold)."""

from __future__ import annotations

import sys

import pytest
from realtools import require, run
from support import REPO

pytestmark = pytest.mark.realtool


def test_bench_cli_smoke() -> None:
    require("check-jsonschema")
    ran = run([sys.executable, str(REPO / "benchmarks/bench_cli.py"), "--smoke"], timeout=600)
    assert ran.rc == 0, ran.text
    for row in ("cold migbake generate PROFILE -o DIR", "cold migbake validate PROFILE", "check-jsonschema",
                "migbake --version", "render one profile (in process)", "validate+render 10 profiles"):
        assert row in ran.out, ran.out


def test_bench_layouts_smoke() -> None:
    ran = run([sys.executable, str(REPO / "benchmarks/bench_layouts.py"), "--repeat", "1"], timeout=600)
    assert ran.rc == 0, ran.text
    assert "h200-141gb" in ran.out and "total" in ran.out
