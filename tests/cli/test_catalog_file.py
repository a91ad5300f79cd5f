"""--catalog FILE / MIGBAKE_CATALOG: a GPU the packaged catalog does not know yet, and files that are wrong.

The file has the catalog's own format and is checked against schemas/mig-catalog.schema.json; its
problems are FILE:LINE:COL lines like a profile's, and every command that reads the catalog uses it.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from support import REPO, CliRunner

from migbake.cli.group import main
from migbake.gpu.catalog import CatalogChoice, load_catalog
from migbake.gpu.catalogfile import catalog_problems
from migbake.node.importer import import_config
from migbake.packagedata import catalog_text
from migbake.rules.validate import check_bytes

RAW = json.loads(catalog_text())
PROFILE = "version: 1\nname: new-sku\ngpu_count: 1\ngpus:\n  - model: {model}\n    mig: {{layout: {layout}}}\n"


def _new_sku() -> dict[str, Any]:
    """A made-up H300: the H200 entry under another id, names and PCI id."""
    gpu = copy.deepcopy(next(g for g in RAW["gpus"] if g["key"] == "h200-141gb"))
    gpu.update(key="h300-200gb", names=["H300"], aliases=["H300 SXM"], alias_notes={},
               nvidia_smi_names=[{"name": "NVIDIA H300", "pci_device_id": "0x2FFF10DE", "source": "test"}],
               pci_device_ids=[{"id": "0x2FFF10DE", "pci_ids_name": None}])
    return gpu


def _write(tmp_path: Path, data: object, name: str = "extra.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=1) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def test_the_packaged_catalog_follows_its_schema() -> None:
    data, problems = catalog_problems(catalog_text().encode(), "mig-catalog.json")
    assert problems == [] and data is not None


def test_a_new_model_from_a_file_is_used_by_every_command(tmp_path: Path) -> None:
    extra = _write(tmp_path, {"gpus": [_new_sku()]})
    profile = tmp_path / "node-profile.yaml"
    profile.write_text(PROFILE.format(model="NVIDIA H300", layout="{1g.18gb: 7}"))
    assert _run("validate", str(profile)).exit_code == 1  # not known without the file
    how = ("--catalog", str(extra))
    assert _run(*how, "validate", str(profile)).exit_code == 0
    out = _run(*how, "gpus").stdout
    assert "h300-200gb" in out and f"(from {extra})" in out
    assert "(from" not in out.split("h300-200gb", 1)[1].split("\n", 2)[2]  # packaged ones are not marked
    assert _run(*how, "layouts", "H300 SXM").exit_code == 0
    gen = _run(*how, "generate", str(profile), "-o", str(tmp_path / "out"))
    assert gen.exit_code == 0, gen.output
    config = (tmp_path / "out/rootfs/etc/nvidia-mig/config.yaml").read_text()
    assert "1g.18gb: 7" in config
    assert _run(*how, "show", str(profile)).exit_code == 0
    assert _run(*how, "export", str(profile)).exit_code == 0
    env = {"MIGBAKE_CATALOG": str(extra)}
    assert _run("validate", str(profile), env=env).exit_code == 0
    rows = json.loads(_run("gpus", "--json", env=env).stdout)
    assert [r["from_catalog_file"] for r in rows if r["id"] == "h300-200gb"] == [str(extra)]
    assert _run("validate", str(profile)).exit_code == 1  # the option lasts one command
    assert load_catalog().find("H300") is None


def test_the_library_uses_the_catalog_it_is_given(tmp_path: Path) -> None:
    extra = _write(tmp_path, {"gpus": [_new_sku()]})
    text = PROFILE.format(model="NVIDIA H300", layout="{1g.18gb: 7}").encode()
    checked = check_bytes(text, "p.yaml", CatalogChoice(extra))
    assert checked.profile is not None and checked.profile.gpus[0].gpu.origin == str(extra)
    assert not check_bytes(text, "p.yaml").ok  # by default the packaged catalog: no choice outlives its caller
    config = ("version: v1\nmig-configs:\n  c:\n    - devices: all\n      mig-enabled: true\n"
              "      mig-devices: {1g.18gb: 7}\n      device-filter: [\"0x2FFF10DE\"]\n")
    imported = import_config(config.encode(), "c.yaml", catalog=CatalogChoice(extra))
    assert "model: h300-200gb" in imported.text
    assert load_catalog().find("H300") is None


def test_a_catalog_file_is_read_only_where_a_profile_needs_the_catalog(tmp_path: Path) -> None:
    extra = _write(tmp_path, {"gpus": [_bad_gpu()]})
    profile = tmp_path / "p.yaml"
    profile.write_text("")
    result = _run("--catalog", str(extra), "validate", str(profile))  # an empty file needs no catalog
    assert result.exit_code == 1 and "[empty-file]" in result.stdout and result.stderr == "", result.output
    profile.write_text(PROFILE.format(model="h200", layout="{1g.18gb: 7}"))
    result = _run("--catalog", str(extra), "validate", str(profile))
    assert result.exit_code == 1 and "invalid GPU catalog" in result.stderr, result.output


def test_a_file_replaces_the_model_with_the_same_id(tmp_path: Path) -> None:
    h200 = next(g for g in RAW["gpus"] if g["key"] == "h200-141gb")
    changed = copy.deepcopy(h200)
    changed["profiles"] = [p for p in changed["profiles"] if p["name"] != "1g.18gb+me"]
    extra = _write(tmp_path, {"schema_version": 1, "gpus": [changed]})
    profile = tmp_path / "p.yaml"
    profile.write_text(PROFILE.format(model="h200", layout="{1g.18gb+me: 1, 1g.18gb: 6}"))
    assert _run("validate", str(profile)).exit_code == 0
    result = _run("--catalog", str(extra), "validate", str(profile))
    assert result.exit_code == 1 and "[unknown-profile]" in result.stdout


def _bad_gpu() -> dict[str, Any]:
    gpu = _new_sku()
    del gpu["total_memory_slices"]
    gpu["colour"] = "green"
    gpu["profiles"][0]["placements"][0]["start"] = "zero"
    return gpu


BAD_FILES: dict[str, tuple[object, list[str]]] = {
    # (a missing colon: Python 3.13 words a trailing comma differently from 3.9-3.12, at another column)
    "not-json": ('{"gpus": [\n  {"key" "x"}\n]}\n',
                 [r"extra.json:2:10: error: /: not valid JSON: Expecting ':' delimiter.* \[catalog-json\]"]),
    "schema": ({"gpus": [_bad_gpu()]}, [
        r"extra.json:\d+:\d+: error: /gpus/0: missing required key 'total_memory_slices' \[missing-key\]",
        r"extra.json:\d+:\d+: error: /gpus/0/colour: unknown key 'colour'.* \[unknown-key\]",
        r"extra.json:\d+:\d+: error: /gpus/0/profiles/0/placements/0/start: 'zero' is a string; expected integer",
    ]),
    "placement": ({"gpus": [dict(_new_sku(), total_memory_slices=4)]},
                  [r"extra.json:\d+:\d+: error: /gpus/0/profiles/\d+/placements/\d+: memory slices .* beyond the "
                   r"GPU's 4 .*\[catalog-placement\]"]),
    "duplicate-id": ({"gpus": [_new_sku(), _new_sku()]},
                     [r"extra.json:\d+:\d+: error: /gpus/1/key: id 'h300-200gb' is also /gpus/0.*"
                      r"\[catalog-duplicate-id\]"]),
    "not-an-object": ("[]", [r"extra.json:1:1: error: /: \[\] is a list; expected mapping"]),
    "duplicate-key": ('{"gpus": [], "gpus": []}', [r"extra.json:1:\d+: error: .*duplicate key 'gpus'"]),
}


@pytest.mark.parametrize("case", list(BAD_FILES), ids=list(BAD_FILES))
def test_an_invalid_catalog_file_is_refused_with_positions(case: str, tmp_path: Path) -> None:
    data, expected = BAD_FILES[case]
    extra = _write(tmp_path, data)
    profile = tmp_path / "p.yaml"
    profile.write_text(PROFILE.format(model="h200", layout="{1g.18gb: 7}"))
    for args in (("validate", str(profile)), ("gpus",), ("layouts", "h200"), ("show", str(profile))):
        result = _run("--catalog", str(extra), *args)
        assert result.exit_code == 1, (args, result.output)
        lines = [line.replace(str(tmp_path) + "/", "") for line in result.stderr.splitlines()]
        assert "Traceback" not in result.output
        for pattern in expected:
            assert any(re.match(pattern, line) for line in lines), (pattern, lines)
        assert lines[-1].startswith("migbake: error: ") and "invalid GPU catalog" in lines[-1]


def test_a_missing_or_directory_catalog_file(tmp_path: Path) -> None:
    """An unreadable catalog file is exit 2, as the README's exit-code table says of an unreadable file;
    a catalog file that is read but invalid stays 1 (the test above)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (tmp_path / "missing.json", tmp_path, fifo):
        for args in (("gpus",), ("validate", str(REPO / "images/h200-inference/node-profile.yaml"))):
            result = _run("--catalog", str(path), *args)
            assert result.exit_code == 2 and "cannot read the catalog file" in result.stderr, result.output
            assert "[unreadable]" in result.stderr, result.stderr
