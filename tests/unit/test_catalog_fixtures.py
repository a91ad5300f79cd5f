"""The catalog against real hardware output (H200 nvidia-smi) and against the team's reference copy."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
from support import H200_FIXTURES, REPO, SHARED, TESTS, shared_file

from migbake.gpu.catalog import GpuModel, load_catalog

PACKAGED_CATALOG = REPO / "generator" / "migbake" / "gpu" / "data" / "mig-catalog.json"

# "GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1" (singular "Placement :" for a single start)
LGIPP_LINE = re.compile(r"GPU\s+(\d+)\s+Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,]+)\}:(\d+)")
# "|   0  MIG 1g.18gb         19     7/7        16.00      No     16     1     0   |"
LGIP_ROW = re.compile(
    r"\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s+(Yes|No)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|"
)


@dataclass(frozen=True)
class LgipRow:
    """One GPU-instance profile row of ``nvidia-smi mig -lgip``."""

    gpu: int
    name: str
    profile_id: int
    free: int
    total: int
    memory_gib: float


def parse_lgipp(text: str) -> dict[int, list[tuple[int, int]]]:
    """``nvidia-smi mig -lgipp`` -> {profile id: [(start, size), ...]} for GPU 0."""
    out: dict[int, list[tuple[int, int]]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        m = LGIPP_LINE.fullmatch(line.strip())
        assert m, f"unparsed -lgipp line: {line!r}"
        if int(m[1]) == 0:
            out[int(m[2])] = [(int(s), int(m[4])) for s in m[3].split(",")]
    return out


def parse_lgip(text: str) -> list[LgipRow]:
    """``nvidia-smi mig -lgip`` -> the first line of each profile row (name, id, instances, memory)."""
    rows = []
    for line in text.splitlines():
        m = LGIP_ROW.fullmatch(line.strip())
        if m:
            rows.append(LgipRow(int(m[1]), m[2], int(m[3]), int(m[4]), int(m[5]), float(m[6])))
    return rows


@pytest.fixture(scope="module")
def h200() -> GpuModel:
    return load_catalog().by_key("h200-141gb")


@pytest.fixture(scope="module")
def lgip() -> list[LgipRow]:
    return parse_lgip(H200_FIXTURES.joinpath("nvidia-smi-mig-lgip.txt").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def lgipp() -> dict[int, list[tuple[int, int]]]:
    return parse_lgipp(H200_FIXTURES.joinpath("nvidia-smi-mig-lgipp.txt").read_text(encoding="utf-8"))


def test_parsers_read_every_profile(lgip: list[LgipRow], lgipp: dict[int, list[tuple[int, int]]]) -> None:
    assert len(lgip) == 7
    assert sorted(lgipp) == [0, 5, 9, 14, 15, 19, 20]
    assert lgip[0] == LgipRow(0, "1g.18gb", 19, 7, 7, 16.0)
    assert lgipp[5] == [(0, 4)]


def test_h200_profile_names(h200: GpuModel, lgip: list[LgipRow]) -> None:
    assert sorted(h200.profile_names) == sorted(row.name for row in lgip)


@pytest.mark.parametrize(
    "name", ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]
)
def test_h200_profile_matches_nvidia_smi(
    h200: GpuModel, lgip: list[LgipRow], lgipp: dict[int, list[tuple[int, int]]], name: str
) -> None:
    profile = h200.profile(name)
    assert profile is not None
    (row,) = [r for r in lgip if r.name == name]
    assert profile.nvidia_smi_id == row.profile_id
    assert profile.max_count == row.total
    assert row.free == row.total  # MIG off, nothing created: the capture shows full capacity
    assert [(p.start, p.size) for p in profile.placements] == lgipp[row.profile_id]
    assert {p.size for p in profile.placements} == {profile.memory_slices}
    assert profile.g == int(name.split("g.")[0])


def test_h200_memory_slices_follow_gib(h200: GpuModel, lgip: list[LgipRow]) -> None:
    """More GiB never means fewer memory slices (1g.35gb really is a 2-slice profile: 32.50 GiB)."""
    sizes = {p.name: p.memory_slices for p in h200.profiles}
    ordered = sorted(lgip, key=lambda r: r.memory_gib)
    assert [sizes[r.name] for r in ordered] == sorted(sizes[r.name] for r in ordered)


# what migbake adds to the team's reference catalog, each with its sources in the data file
ADDED_MODELS = ["gb200-189gb"]  # GB200's pre-production profile names (3g.95gb, 4g.95gb, 7g.189gb)
# where the package corrects the reference, by model and field, and why (each with its source in the data file)
CORRECTED = {
    # a public -lgipp capture (driver 610.43.02): the driver's grid has 12 units ({0,3,6,9}:3, {0,6}:6, {0}:12)
    # and GI profile ids 0 / 32 for 4g.96gb / 4g.96gb+gfx; the reference had a 4-slot grid and no ids for 4g
    ("rtx-pro-6000-blackwell-96gb", "total_memory_slices"), ("rtx-pro-6000-blackwell-96gb", "profiles"),
    ("rtx-pro-6000-blackwell-96gb", "worked_examples"), ("rtx-pro-6000-blackwell-96gb", "profile_sources"),
    ("rtx-pro-6000-blackwell-96gb", "notes"), ("rtx-pro-6000-blackwell-96gb", "sources"),
}


def _alias_and_note(alias: str) -> tuple[str, str]:
    """``"H800 NVL (H800L 94GB)"`` -> ``("H800 NVL", "H800L 94GB")``: the reference wrote notes into names."""
    name, _, note = alias.partition(" (")
    return name, note.removesuffix(")")


def test_packaged_catalog_keeps_every_fact_of_the_reference() -> None:
    """The package's catalog grew from the team's reference copy: it may add and reword, never lose a fact."""
    reference = json.loads(shared_file(SHARED / "reference" / "mig-catalog.json").read_text(encoding="utf-8"))
    packaged = json.loads(PACKAGED_CATALOG.read_text(encoding="utf-8"))
    for key, value in reference.items():
        if key != "gpus":
            assert packaged[key] == value, key
    ours = {g["key"]: g for g in packaged["gpus"]}
    assert list(ours)[: len(reference["gpus"])] == [g["key"] for g in reference["gpus"]]
    assert list(ours)[len(reference["gpus"]):] == ADDED_MODELS
    for gpu in reference["gpus"]:
        mine = ours[gpu["key"]]
        for field, value in gpu.items():
            if field == "names":  # "H100 on GH200 (96GB)": a name without brackets, the same words
                assert [n.replace("(", "").replace(")", "") for n in value] == mine[field], gpu["key"]
            elif (gpu["key"], field) in CORRECTED:
                assert mine[field] != value, f"{gpu['key']}/{field} is the reference's again: drop it from CORRECTED"
            elif field != "aliases":
                assert mine[field] == value, (gpu["key"], field)
        for alias in gpu["aliases"]:
            name, note = _alias_and_note(alias)
            assert name in mine["aliases"] + mine["names"], (gpu["key"], alias)
            if note:
                where = f"{mine['alias_notes'].get(name, '')} {' '.join(mine['aliases'])}"
                assert note in where, (gpu["key"], alias)


def test_rtx_pro_6000_uses_the_drivers_placement_grid() -> None:
    """The public -lgipp capture of an RTX PRO 6000 Blackwell Server Edition (driver 610.43.02), in our words."""
    model = load_catalog().by_key("rtx-pro-6000-blackwell-96gb")
    lgipp = {14: "{0,3,6,9}:3", 21: "{0,3,6,9}:3", 47: "{0,3,6,9}:3", 65: "{0,3,6,9}:3", 67: "{0,3,6,9}:3",
             5: "{0,6}:6", 35: "{0,6}:6", 64: "{0,6}:6", 66: "{0,6}:6", 0: "{0}:12", 32: "{0}:12"}
    ours = {p.nvidia_smi_id: "{" + ",".join(str(pl.start) for pl in p.placements) + f"}}:{p.placements[0].size}"
            for p in model.profiles}
    assert ours == lgipp
    assert model.total_memory_slices == 12
    assert (model.profile("4g.96gb"), model.profile("4g.96gb+gfx")) != (None, None)
    assert [model.profile(n).nvidia_smi_id for n in ("4g.96gb", "4g.96gb+gfx")] == [0, 32]  # type: ignore[union-attr]


def test_added_gpus_carry_sources() -> None:
    packaged = json.loads(PACKAGED_CATALOG.read_text(encoding="utf-8"))
    added = [g for g in packaged["gpus"] if g["key"] in ADDED_MODELS] + packaged["non_mig_gpus"]["gpus"]
    for gpu in added:
        assert gpu["sources"] and gpu["pci_device_ids"], gpu["key"]
        assert all(p["pci_ids_name"] for p in gpu["pci_device_ids"]), gpu["key"]


def test_b300_profiles_are_those_of_nvidias_default_config() -> None:
    """NVIDIA/mig-parted config-default.yaml@v0.15.0 (tests/fixtures/nvidia-config-default): every all-<profile>
    config that names a B300 profile asks for its max count, and all-balanced's B300 entry (0x318210DE) fits."""
    import yaml

    from migbake.gpu.placement import fit

    config = yaml.safe_load((TESTS / "fixtures/nvidia-config-default/config-default.yaml").read_text())
    b300 = load_catalog().by_key("b300")
    counts = {}
    for entries in config["mig-configs"].values():
        for e in entries:
            for name, n in (e.get("mig-devices") or {}).items():
                if b300.profile(name) is not None and len(e.get("mig-devices")) == 1:
                    counts[name] = max(counts.get(name, 0), n)
    assert counts == {p.name: p.max_count for p in b300.profiles}
    balanced = next(e for e in config["mig-configs"]["all-balanced"] if e.get("device-filter") == ["0x318210DE"])
    assert balanced["mig-devices"] == {"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1}
    assert fit(b300, balanced["mig-devices"]).ok
