"""Profile names that differ between boards of one model (GB200 1g.23gb vs 1g.24gb, NVIDIA/mig-parted#227)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support import cli

from migbake.gpu.boardnames import twin_lines, twins
from migbake.gpu.catalog import Catalog, load_catalog
from migbake.node.nvidiasmi import Capture, Gpu
from migbake.node.preflight import check_capture
from migbake.rules.validate import check_bytes


def test_gb200_boards_name_the_same_profiles_two_ways() -> None:
    catalog = load_catalog()
    found = twins(catalog, catalog.by_key("gb200-186gb"))
    assert [(m.key, renamed) for m, renamed in found] == [("gb200-189gb", {
        "1g.23gb": "1g.24gb", "1g.23gb+me": "1g.24gb+me", "3g.93gb": "3g.95gb", "4g.93gb": "4g.95gb",
        "7g.186gb": "7g.189gb"})]
    # matched by profile id, attributes and memory slices: 1g.47gb and 2g.47gb are the same on both
    assert [m.key for m, _ in twins(catalog, catalog.by_key("gb200-189gb"))] == ["gb200-186gb"]


def test_models_without_a_twin() -> None:
    catalog = load_catalog()
    for key in ("h200-141gb", "b200-180gb", "rtx-pro-6000-blackwell-96gb"):
        assert twins(catalog, catalog.by_key(key)) == [], key


def test_a_profile_without_an_id_or_with_other_memory_is_no_twin() -> None:
    catalog = load_catalog()
    gb, pre = catalog.by_key("gb200-186gb"), catalog.by_key("gb200-189gb")
    no_id = dataclasses.replace(pre, profiles=tuple(dataclasses.replace(p, nvidia_smi_id=None) if p.name == "1g.24gb"
                                                    else p for p in pre.profiles))
    other_memory = dataclasses.replace(pre, profiles=tuple(dataclasses.replace(p, memory_slices=2)
                                                           if p.name == "1g.24gb" else p for p in pre.profiles))
    for other in (no_id, other_memory):
        assert twins(Catalog(models=(gb, other), source_snapshot=""), gb) == []


def test_show_says_which_names_a_node_reports(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("version: 1\nname: gb\ngpus:\n  - model: gb200-186gb\n    mig:\n      layout:\n"
                       "        3g.93gb: 1\n        1g.47gb: 1\n")
    rc, out, _ = cli("show", str(profile))
    assert rc == 0, out
    assert ("report these profiles under other names on some boards: 3g.95gb for 3g.93gb (gb200-189gb; "
            "NVIDIA/mig-parted#227)") in out
    assert twin_lines(load_catalog(), load_catalog().by_key("gb200-186gb"), {"1g.47gb": 1}) == []


GB200_PROFILE = "version: 1\nname: gb\ngpus:\n  - model: {model}\n    mig:\n      layout:\n{layout}"


@pytest.mark.parametrize(("model", "layout", "have", "status", "words"), [
    ("gb200-186gb", {"3g.93gb": 2}, ("3g.93gb", "3g.93gb"), "PASS", "every GPU already has"),
    ("gb200-186gb", {"3g.93gb": 2}, ("3g.95gb", "3g.95gb"), "FAIL",
     "GPU 0: MIG Enabled, 2x 3g.95gb, the profile's instances as gb200-189gb's boards name them (matched by "
     "GPU-instance profile id and memory, NVIDIA/mig-parted#227): mig-parted applies names literally, so the "
     "restore's apply fails with gb200-186gb's names here; write model: gb200-189gb"),
    ("gb200-186gb", {"3g.93gb": 1, "1g.47gb": 2}, ("3g.95gb", "1g.47gb", "1g.47gb"), "FAIL",
     "write model: gb200-189gb"),
    ("gb200-189gb", {"7g.189gb": 1}, ("7g.186gb",), "FAIL", "as gb200-186gb's boards name them"),
    # other instances (not the same ids and memory), or only the shared names: the restore replaces them
    ("gb200-186gb", {"3g.93gb": 2}, ("3g.95gb",), "NOTE", "the next boot's restore replaces this"),
    ("gb200-186gb", {"3g.93gb": 2}, ("1g.24gb",) * 7, "NOTE", "(profile: MIG Enabled, 2x 3g.93gb)"),
    ("gb200-186gb", {"1g.47gb": 4}, ("1g.47gb",) * 4, "PASS", "every GPU already has"),
], ids=["own-names", "other-board", "other-board-mixed", "pre-production-profile", "fewer", "other-instances",
        "names-shared"])
def test_preflight_matches_a_captures_names_by_profile_id_and_memory(model: str, layout: dict[str, int],
                                                                     have: tuple[str, ...], status: str,
                                                                     words: str) -> None:
    """mig-state: a capture naming the profile's instances as the other GB200 board does is that board (a FAIL:
    mig-parted would apply names the node does not know), not a state the restore replaces."""
    text = GB200_PROFILE.format(model=model, layout="".join(f"        {p}: {n}\n" for p, n in layout.items()))
    checked = check_bytes(text.encode(), "p.yaml")
    assert checked.profile is not None, [p.format() for p in checked.problems]
    capture = Capture("nvidia-smi-csv", "gb.csv", (Gpu(0, "NVIDIA GB200", "0x294110DE", "Enabled", have),))
    state = {c.name: c for c in check_capture(checked.profile, capture).checks}["mig-state"]
    assert (state.status, words in state.detail) == (status, True), state
