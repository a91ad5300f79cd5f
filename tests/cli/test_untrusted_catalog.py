"""A catalog file (--catalog, MIGBAKE_CATALOG) is untrusted input, checked like a profile.

Its strings get whole-string patterns (a name with a newline would add a [Service] section to the unit
or a command to restore.sh, where the names are printed as comments), a size, depth and digit limit,
and a bounded read that refuses /dev/zero and a FIFO without blocking. Every refusal is exit 1 with
FILE:LINE:COL, never exit 3, a traceback or a hang; a real ``python3 -m migbake`` process shows it.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from migbake.cli.group import main
from migbake.gpu.catalogfile import MAX_CATALOG_DEPTH, MAX_NUMBER_DIGITS, catalog_problems
from migbake.packagedata import catalog_text

RAW = json.loads(catalog_text())
COUNTS: Counter[str] = Counter()
PROFILE = "version: 1\nname: new-sku\ngpu_count: 1\ngpus:\n  - model: h300-200gb\n    mig: {layout: {1g.18gb: 7}}\n"
LINE_ENDS = ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029"]
CONTROLS = [*LINE_ENDS, "\x00", "\x1b", "\x7f", "\x9b", "\t", "\ufeff"]


def _sku() -> dict[str, Any]:
    gpu = copy.deepcopy(next(g for g in RAW["gpus"] if g["key"] == "h200-141gb"))
    gpu.update(key="h300-200gb", names=["H300"], aliases=["H300 SXM"], alias_notes={},
               nvidia_smi_names=[{"name": "NVIDIA H300", "pci_device_id": "0x2FFF10DE", "source": "test"}],
               pci_device_ids=[{"id": "0x2FFF10DE", "pci_ids_name": None}])
    return gpu


# (where in the model, a valid value): every string the generated files or messages print
FIELDS: list[tuple[tuple[Any, ...], str]] = [
    (("names", 0), "H300"), (("aliases", 0), "H300 SXM"), (("generation",), "hopper"), (("chip",), "GH100"),
    (("key",), "h300-200gb"), (("nvidia_smi_names", 0, "name"), "NVIDIA H300"),
    (("nvidia_smi_names", 0, "source"), "test"), (("pci_device_ids", 0, "id"), "0x2FFF10DE"),
    (("profiles", 0, "name"), "1g.18gb"), (("compute_capability",), "9.0"), (("min_driver",), "R550"),
]


def _set(gpu: dict[str, Any], where: tuple[Any, ...], value: str) -> None:
    target: Any = gpu
    for k in where[:-1]:
        target = target[k]
    target[where[-1]] = value


def _problems(gpu: dict[str, Any]) -> list[str]:
    _, problems = catalog_problems(json.dumps({"gpus": [gpu]}, indent=1).encode(), "extra.json")
    return [p.format() for p in problems]


def test_the_valid_file_is_accepted() -> None:
    assert _problems(_sku()) == []


@pytest.mark.parametrize(("where", "valid"), FIELDS, ids=["/".join(map(str, w)) for w, _ in FIELDS])
def test_a_catalog_string_with_a_line_end_or_control_is_refused_where_it_is(where: tuple[Any, ...],
                                                                            valid: str) -> None:
    pointer = "/gpus/0/" + "/".join(map(str, where))
    for bad in [valid + e for e in LINE_ENDS] + [valid[:2] + c + valid[2:] for c in CONTROLS]:
        COUNTS["class2-strings"] += 1
        gpu = _sku()
        _set(gpu, where, bad)
        got = _problems(gpu)
        assert any(f": error: {pointer}:" in line for line in got), (bad, got)


@pytest.mark.parametrize("generation", ["", " ", "Hopper\n[Service]", "hopper ", "\u2028"], ids=repr)
def test_a_blank_or_odd_generation_is_refused(generation: str) -> None:
    COUNTS["class2-strings"] += 1
    gpu = _sku()
    gpu["generation"] = generation
    assert any("/gpus/0/generation" in line for line in _problems(gpu))


def test_a_control_character_in_a_key_the_schema_leaves_free_is_refused() -> None:
    data = {"gpus": [_sku()], "snapshots": {"a\nb": "x"}}
    COUNTS["class2-strings"] += 1
    _, problems = catalog_problems(json.dumps(data).encode(), "extra.json")
    assert [(p.pointer, p.rule) for p in problems] == [("/snapshots/a\nb", "catalog-text")], problems
    assert problems[0].format().endswith("holds a control character [catalog-text]")


def _nested(depth: int) -> str:
    return '{"gpus": [' + "[" * depth + "]" * depth + "]}"


@pytest.mark.parametrize(("text", "rule", "line"), [
    (_nested(MAX_CATALOG_DEPTH + 1), "catalog-too-deep", 1),
    (_nested(100_000), "catalog-too-deep", 1),
    ('{"gpus": [],\n "x": ' + "9" * 5000 + "}", "number-too-large", 2),
    ('{"gpus": [],\n "x": -' + "1" * (MAX_NUMBER_DIGITS + 1) + "}", "number-too-large", 2),
    ('{"gpus": [],\n "x": 1' + "0" * MAX_NUMBER_DIGITS + "e5}", "number-too-large", 2),
], ids=["depth-33", "depth-100000", "digits-5000", "digits-65", "exponent"])
def test_deep_nesting_and_long_numbers_are_refused_before_parsing(text: str, rule: str, line: int) -> None:
    COUNTS["class2-limits"] += 1
    parsed, problems = catalog_problems(text.encode(), "extra.json")
    assert parsed is None and [(p.rule, p.line) for p in problems] == [(rule, line)], problems
    assert problems[0].format().endswith(f"[{rule}]")  # e.g. "... nesting deeper than 32 levels [catalog-too-deep]"


def test_a_number_inside_a_string_and_the_packaged_catalog_are_within_the_limits() -> None:
    assert catalog_problems(json.dumps({"gpus": [], "description": "9" * 500}).encode(), "x.json")[1] == []
    assert catalog_problems(catalog_text().encode(), "packaged.json")[1] == []


def _migbake(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migbake", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=False)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "too-big", "deep", "digits", "name-newline"])
def test_a_real_process_refuses_with_exit_1_and_a_located_line_without_hanging(kind: str, tmp_path: Path) -> None:
    """A catalog file that cannot be read as one (not a regular file: /dev/zero, a FIFO) is a usage error, 2,
    like a missing one; one that reads but is not a catalog is invalid input, 1."""
    COUNTS["class2-files"] += 1
    path = tmp_path / "extra.json"
    if kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)  # nobody ever writes: open() without O_NONBLOCK would wait forever
    elif kind == "too-big":
        path.write_bytes(b" " * (16 * 1024 * 1024 + 1))
    elif kind == "deep":
        path.write_text(_nested(100_000))
    elif kind == "digits":
        path.write_text('{"gpus": [],\n "x": ' + "7" * 5000 + "}")
    else:
        gpu = _sku()
        gpu["names"] = ["H300\n[Service]\nExecStartPre=/bin/sh -c reboot"]
        path.write_text(json.dumps({"gpus": [gpu]}, indent=1))
    profile = tmp_path / "p.yaml"
    profile.write_text(PROFILE)
    for args, env in ((["--catalog", str(path), "validate", str(profile)], None),
                      (["gpus"], {"MIGBAKE_CATALOG": str(path)})):
        ran = _migbake(*args, env=env)
        assert ran.returncode == (2 if kind in ("dev-zero", "fifo") else 1), (kind, ran.returncode, ran.stderr)
        assert "Traceback" not in ran.stderr and str(path) + ":" in ran.stderr, ran.stderr


def test_generate_writes_nothing_for_a_catalog_name_with_a_newline(tmp_path: Path) -> None:
    gpu = _sku()
    gpu["names"] = ["H300\n[Service]"]
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"gpus": [gpu]}))
    profile = tmp_path / "p.yaml"
    profile.write_text(PROFILE)
    COUNTS["class2-files"] += 1
    result = CliRunner().invoke(main, ["--catalog", str(extra), "generate", str(profile), "-o", str(tmp_path / "o")])
    assert result.exit_code == 1 and not (tmp_path / "o").exists(), result.output


def test_report_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """How many hostile inputs this module tried."""
    with capsys.disabled():
        print("\nclass 2 (catalog files):", dict(COUNTS))
