"""GPU model names as users paste them: nvidia-smi names, product names, ambiguous names, GPUs without MIG.

Every name the catalog says nvidia-smi prints (each with its source) must resolve to its model, in any
case, with or without ``NVIDIA``, with runs of spaces, and with ``-`` and space swapped; a name shared
by models with different MIG profiles is refused with the candidates; "did you mean" ranks the model
the user meant first.
"""

from __future__ import annotations

import json
import re

import pytest
from support import CliRunner

from migbake.cli.group import main
from migbake.gpu.catalog import load_catalog
from migbake.packagedata import catalog_text
from migbake.rules.validate import check_bytes

CATALOG = load_catalog()
RAW = json.loads(catalog_text())
SMI_NAMES = [(g["key"], n["name"]) for g in RAW["gpus"] for n in g["nvidia_smi_names"]]

# the names the trial pasted (nvidia-smi --query-gpu=name on each GPU)
PASTED = {
    "NVIDIA A100-SXM4-40GB": "a100-40gb",
    "NVIDIA H100 PCIe": "h100-80gb",
    "NVIDIA A30": "a30-24gb",
    "NVIDIA B200": "b200-180gb",
    "NVIDIA H200": "h200-141gb",
    "NVIDIA H200 NVL": "h200-141gb",
    "NVIDIA GH200 480GB": "h100-96gb",
    # product names people write
    "A100 80GB": "a100-80gb",
    "a100 sxm4 40gb": "a100-40gb",
    "H100 SXM": "h100-80gb",
    "H100 NVL": "h100-94gb",
    "h200": "h200-141gb",
    "H20": "h100-96gb",
    "GH200 144GB": "gh200-144gb",
    "RTX PRO 6000": "rtx-pro-6000-blackwell-96gb",
    "Tesla A30": "a30-24gb",
    "0x233510DE": "h200-141gb",
}


def _variants(name: str) -> list[str]:
    bare = re.sub(r"^NVIDIA\s+", "", name)
    return [name, bare, name.upper(), name.lower(), "  " + name.replace(" ", "   ") + " ",
            name.replace("-", " "), bare.replace(" ", "-")]


@pytest.mark.parametrize(("key", "name"), SMI_NAMES, ids=[n for _, n in SMI_NAMES])
def test_every_nvidia_smi_name_resolves_to_its_model(key: str, name: str) -> None:
    for variant in _variants(name):
        found = CATALOG.resolve(variant)
        if found.candidates:  # 'NVIDIA H100' (the SXM5 94GB) is also what people call every H100
            assert key in [m.key for m in found.candidates], variant
            pci = next(n["pci_device_id"] for n in next(g for g in RAW["gpus"] if g["key"] == key)
                       ["nvidia_smi_names"] if n["name"] == name)
            assert pci in CATALOG.unknown_model(variant)[0]
            continue
        assert found.model is not None and found.model.key == key, (variant, CATALOG.unknown_model(variant))


# models that nvidia-smi cannot tell from another by name: gb200-189gb is a pre-production GB200 board
# (same PCI id, other profile names); its name would make "NVIDIA GB200" ambiguous for everyone
NAMED_BY_ANOTHER = {"gb200-189gb": "gb200-186gb"}


def test_every_catalog_gpu_has_sourced_nvidia_smi_names() -> None:
    for g in RAW["gpus"]:
        assert g["nvidia_smi_names"] or g["key"] in NAMED_BY_ANOTHER, g["key"]
        for n in g["nvidia_smi_names"]:
            assert n["source"] and n["status"] in ("confirmed", "inferred", "third-party"), n
            assert n["name"].startswith("NVIDIA "), n
            assert CATALOG.by_pci_id(n["pci_device_id"]) is not None, n


@pytest.mark.parametrize(("name", "key"), list(PASTED.items()), ids=list(PASTED))
def test_pasted_names(name: str, key: str) -> None:
    found = CATALOG.find(name)
    assert found is not None and found.key == key, CATALOG.unknown_model(name)


def test_names_are_names() -> None:
    """No annotation inside a name: notes live in alias_notes, keyed by an alias that exists."""
    for m in CATALOG.models:
        for name in m.all_names:
            assert "(" not in name and ")" not in name, (m.key, name)
        assert set(m.alias_notes) <= set(m.aliases), m.key


def test_every_name_resolves_or_is_reported_ambiguous() -> None:
    for m in CATALOG.models:
        for name in m.all_names:
            found = CATALOG.resolve(name)
            assert found.model == m or m in found.candidates, (m.key, name)
            if found.candidates:
                profiles = {c.profile_names for c in found.candidates}
                assert len(profiles) == len(found.candidates), f"{name!r}: candidates with the same profiles"


@pytest.mark.parametrize(("name", "first"), [
    ("GH200", ["gh200-144gb", "h100-96gb"]),
    ("gh200", ["gh200-144gb", "h100-96gb"]),
    ("H20", ["h100-96gb"]),
    ("h100", ["h100-80gb", "h100-94gb", "h100-96gb"]),
    ("NVIDIA H100", ["h100-80gb", "h100-94gb", "h100-96gb"]),
    ("h200-141g", ["h200-141gb"]),
    ("b20", ["b200-180gb"]),
], ids=["GH200", "gh200", "H20", "h100", "NVIDIA-H100", "typo", "prefix"])
def test_did_you_mean_ranks_the_meant_model_first(name: str, first: list[str]) -> None:
    assert CATALOG.close_matches(name, n=len(first)) == first


@pytest.mark.parametrize(("name", "candidates", "shown"), [
    ("GH200", ["gh200-144gb", "h100-96gb"], ["144 GB", "96 GB", "0x234810DE", "NVIDIA GH200 480GB"]),
    ("H100", ["h100-80gb", "h100-94gb", "h100-96gb"], ["80 GB", "94 GB", "0x233910DE", "'NVIDIA H100'"]),
    ("A100", ["a100-40gb", "a100-80gb"], ["40 GB", "80 GB"]),
], ids=["GH200", "H100", "A100"])
def test_ambiguous_names_list_what_tells_the_candidates_apart(name: str, candidates: list[str],
                                                              shown: list[str]) -> None:
    assert [m.key for m in CATALOG.resolve(name).candidates] == candidates
    message, rule = CATALOG.unknown_model(name)
    assert rule == "ambiguous-model"
    for text in shown:
        assert text in message, (text, message)
    h200 = "version: 1\nname: t\ngpus:\n  - model: {}\n    mig: {{layout: {{1g.18gb: 7}}}}\n"
    (problem,) = check_bytes(h200.format(name).encode(), "p.yaml").problems
    assert (problem.rule, problem.pointer) == ("ambiguous-model", "/gpus/0/model")


@pytest.mark.parametrize(("name", "shown"), [
    ("L40S", "L40S"), ("NVIDIA L40S", "L40S"), ("l4", "L4"), ("NVIDIA A10", "A10"), ("Tesla T4", "T4"),
    ("0x26B910DE", "L40S"),
])
def test_gpus_without_mig_say_so(name: str, shown: str) -> None:
    assert CATALOG.find(name) is None
    message, rule = CATALOG.unknown_model(name)
    assert rule == "no-mig" and message.startswith(f"{shown} has no MIG"), message
    code = CliRunner().invoke(main, ["layouts", name])
    assert code.exit_code == 2 and f"{shown} has no MIG" in code.output


def test_gpus_without_mig_are_found_by_name_and_pci_id() -> None:
    for g in RAW["non_mig_gpus"]["gpus"]:
        assert all(re.fullmatch(r"0x[0-9A-F]{8}", p["id"]) for p in g["pci_device_ids"]), g
    names = {n for g in RAW["non_mig_gpus"]["gpus"] for n in g["names"]}
    assert names >= {"L40S", "L4", "A10", "T4"}
    found = CATALOG.non_mig_gpu("nvidia l40s")
    assert found is not None and found.short_name == "L40S" and not found.has_mig
    assert CATALOG.non_mig_gpu("H200") is None


def test_unknown_names_point_at_the_catalog_option() -> None:
    message, rule = CATALOG.unknown_model("rtx-4090")
    assert rule == "unknown-model" and "--catalog FILE" in message


def test_gpus_shows_notes_apart_from_names() -> None:
    out = CliRunner().invoke(main, ["gpus"]).stdout
    block = out.split("\nh100-94gb", 1)[1].split("\nh100-96gb", 1)[0]
    names = next(line for line in block.splitlines() if "names:" in line)
    notes = next(line for line in block.splitlines() if "notes:" in line)
    assert "H800 NVL" in names and "pci.ids" not in names
    assert "H800 NVL: pci.ids calls it H800L 94GB" in notes
    assert "nvidia-smi prints: NVIDIA H100 NVL" in block
    rows = json.loads(CliRunner().invoke(main, ["gpus", "--json"]).stdout)
    h200 = next(r for r in rows if r["id"] == "h200-141gb")
    assert "NVIDIA H200" in h200["nvidia_smi_names"] and h200["from_catalog_file"] is None
