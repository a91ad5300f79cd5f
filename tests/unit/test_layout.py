"""Tables of layouts that fit or not per GPU, and slice maps (maximal layouts: test_maximal_layouts.py)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from migbake.gpu.catalog import GpuModel, load_catalog
from migbake.gpu.placement import FitResult, PlacedInstance, fit, is_valid
from migbake.gpu.slicemap import render_slice_map
from migbake.packagedata import catalog_text

CATALOG = load_catalog()
RAW_GPUS: dict[str, dict[str, Any]] = {g["key"]: g for g in json.loads(catalog_text())["gpus"]}
ALL = [m.key for m in CATALOG.models]
SEVEN_EIGHT = [m.key for m in CATALOG.models if (m.total_compute_slices, m.total_memory_slices) == (7, 8)]
FOUR_SLOT = [m.key for m in CATALOG.models if (m.total_compute_slices, m.total_memory_slices) == (4, 4)]


def generic(model: GpuModel, label: str) -> str:
    """This model's name for a generic label: ``1g``, ``1g+me``, ``1g.2x`` (double memory), ``3g``..."""
    g, _, rest = label.partition("g")
    attributes = ("me",) if rest == "+me" else ()
    found = sorted(
        (p for p in model.profiles
         if p.g == int(g) and p.attributes == attributes and not p.negative_attributes),
        key=lambda p: p.memory_slices,
    )
    assert found, f"{model.key} has no {label}"
    return found[-1 if rest == ".2x" else 0].name


def named(model: GpuModel, layout: Mapping[str, int]) -> dict[str, int]:
    return {generic(model, label): n for label, n in layout.items()}


def assert_sound(model: GpuModel, result: FitResult) -> None:
    """Every placement is one the catalog allows, inside the GPU, and no two share a memory slice."""
    taken: set[int] = set()
    for p in result.placements:
        profile = model.profile(p.profile)
        assert profile is not None
        assert (p.start, p.size) in {(a.start, a.size) for a in profile.placements}
        span = set(range(p.start, p.start + p.size))
        assert not span & taken, f"{p} overlaps {sorted(taken)}"
        assert max(span) < model.total_memory_slices
        taken |= span
    assert list(result.placements) == sorted(result.placements, key=lambda p: p.start)


# mig-reference.md section 5.1 (H100 80GB names there); same verdicts on every 7/8 GPU.
SEVEN_EIGHT_VALID: list[tuple[str, dict[str, int]]] = [
    ("V1-7g", {"7g": 1}),
    ("V2-4g-3g", {"4g": 1, "3g": 1}),
    ("V3-3gx2", {"3g": 2}),
    ("V4-3g-2gx2", {"3g": 1, "2g": 2}),
    ("V5-all-balanced", {"3g": 1, "2g": 1, "1g": 2}),
    ("V6-4-2-1", {"4g": 1, "2g": 1, "1g": 1}),
    ("V7-4g-1gx3", {"4g": 1, "1g": 3}),
    ("V8-2gx3-1g", {"2g": 3, "1g": 1}),
    ("V9-1gx7", {"1g": 7}),
    ("V10-me-1gx6", {"1g+me": 1, "1g": 6}),
    ("V11-1g2x-x4", {"1g.2x": 4}),
    ("V12-2gx3-1g2x", {"2g": 3, "1g.2x": 1}),
    ("V13-3g-1g2x-x2", {"3g": 1, "1g.2x": 2}),
    ("V14-1gx6-1g2x", {"1g": 6, "1g.2x": 1}),
    ("3g-1gx4", {"3g": 1, "1g": 4}),
    ("1g2x-x3-1gx2", {"1g.2x": 3, "1g": 2}),
    ("4g-1g2x-me-1g", {"4g": 1, "1g.2x": 1, "1g+me": 1, "1g": 1}),
]
SEVEN_EIGHT_INVALID: list[tuple[str, dict[str, int], str]] = [
    ("I1-4gx2", {"4g": 2}, "at most 1 per GPU, 2 needed"),
    ("I2-3gx2-1g", {"3g": 2, "1g": 1}, "needs 9 memory slices, the GPU has 8"),
    ("I3-4g-3g-1g", {"4g": 1, "3g": 1, "1g": 1}, "needs 9 memory slices, the GPU has 8"),
    ("I4-4g-2gx2", {"4g": 1, "2g": 2}, "needs 8 compute slices, the GPU has 7"),
    ("I5-1gx8", {"1g": 8}, "at most 7 per GPU, 8 needed"),
    ("I6-1g2x-x4-1g", {"1g.2x": 4, "1g": 1}, "needs 9 memory slices, the GPU has 8"),
    ("I7-2gx4", {"2g": 4}, "at most 3 per GPU, 4 needed"),
    ("I8-mex2", {"1g+me": 2}, "at most 1 per GPU, 2 needed"),
    ("I9-7g-1g", {"7g": 1, "1g": 1}, "needs 9 memory slices, the GPU has 8"),
    ("I10-3g-2gx2-1g", {"3g": 1, "2g": 2, "1g": 1}, "needs 9 memory slices, the GPU has 8"),
    ("I11-2gx3-1gx2", {"2g": 3, "1g": 2}, "needs 8 compute slices, the GPU has 7"),
    ("I12-1g2x-x5", {"1g.2x": 5}, "at most 4 per GPU, 5 needed"),
    # The issue's case (A100-40GB 4 x 1g.10gb + 3 x 1g.5gb): compute adds up to 7, memory does not.
    ("issue-1g2x-x4-1gx3", {"1g.2x": 4, "1g": 3}, "needs 11 memory slices, the GPU has 8"),
    ("me-1gx7", {"1g+me": 1, "1g": 7}, "needs 8 compute slices, the GPU has 7"),
]
# mig-reference.md section 5.2 (A30 and RTX PRO 6000 names).
FOUR_SLOT_VALID: list[tuple[str, dict[str, int]]] = [
    ("4g", {"4g": 1}),
    ("2gx2", {"2g": 2}),
    ("all-balanced", {"2g": 1, "1g": 2}),
    ("1gx4", {"1g": 4}),
    ("me-1gx3", {"1g+me": 1, "1g": 3}),
]
FOUR_SLOT_INVALID: list[tuple[str, dict[str, int], str]] = [
    ("2gx2-1g", {"2g": 2, "1g": 1}, "needs 5 memory slices, the GPU has 4"),
    ("1gx5", {"1g": 5}, "at most 4 per GPU, 5 needed"),
    ("4g-1g", {"4g": 1, "1g": 1}, "needs 5 memory slices, the GPU has 4"),
    ("2gx3", {"2g": 3}, "at most 2 per GPU, 3 needed"),
    ("mex2", {"1g+me": 2}, "at most 1 per GPU, 2 needed"),
    ("2g-1gx3", {"2g": 1, "1g": 3}, "needs 5 memory slices, the GPU has 4"),
]


def cases(keys: list[str], table: list[tuple[str, dict[str, int]]]) -> Iterator[Any]:
    for key in keys:
        for case_id, layout in table:
            yield pytest.param(key, layout, id=f"{key}-{case_id}")


def bad_cases(keys: list[str], table: list[tuple[str, dict[str, int], str]]) -> Iterator[Any]:
    for key in keys:
        for case_id, layout, why in table:
            yield pytest.param(key, layout, why, id=f"{key}-{case_id}")


@pytest.mark.parametrize(
    ("key", "layout"), [*cases(SEVEN_EIGHT, SEVEN_EIGHT_VALID), *cases(FOUR_SLOT, FOUR_SLOT_VALID)]
)
def test_valid_layouts_fit(key: str, layout: dict[str, int]) -> None:
    model = CATALOG.by_key(key)
    wanted = named(model, layout)
    result = fit(model, wanted)
    assert result.ok, result.reason
    assert (result.unplaced, result.reason) == ((), "")
    assert Counter(p.profile for p in result.placements) == Counter(wanted)
    assert_sound(model, result)
    assert is_valid(model, wanted)


@pytest.mark.parametrize(
    ("key", "layout", "why"),
    [*bad_cases(SEVEN_EIGHT, SEVEN_EIGHT_INVALID), *bad_cases(FOUR_SLOT, FOUR_SLOT_INVALID)],
)
def test_invalid_layouts_do_not_fit(key: str, layout: dict[str, int], why: str) -> None:
    model = CATALOG.by_key(key)
    wanted = named(model, layout)
    result = fit(model, wanted)
    assert not result.ok
    assert not is_valid(model, wanted)
    assert why in result.reason
    assert_sound(model, result)
    # The partial placement and the left-overs add up to what was asked for.
    placed = Counter(p.profile for p in result.placements) + Counter(result.unplaced)
    assert placed == Counter(wanted)
    assert result.unplaced


def worked_examples(verdict: str) -> Iterator[Any]:
    for key, raw in RAW_GPUS.items():
        for i, example in enumerate(raw.get("worked_examples", {}).get(verdict, [])):
            case = "+".join(f"{n}x{name}" for name, n in example["mig-devices"].items())
            yield pytest.param(key, example, id=f"{key}-{i}-{case}")


@pytest.mark.parametrize(("key", "example"), list(worked_examples("valid")))
def test_catalog_worked_examples_valid(key: str, example: dict[str, Any]) -> None:
    model = CATALOG.by_key(key)
    result = fit(model, example["mig-devices"])
    assert result.ok, result.reason
    assert_sound(model, result)
    # Lowest starts first, largest instances first: the same placements the catalog's search found.
    assert set(result.placements) == {PlacedInstance(**p) for p in example["placements"]}


@pytest.mark.parametrize(("key", "example"), list(worked_examples("invalid")))
def test_catalog_worked_examples_invalid(key: str, example: dict[str, Any]) -> None:
    model = CATALOG.by_key(key)
    result = fit(model, example["mig-devices"])
    assert not result.ok
    if "exceeds max_count" in example["reason"]:
        assert "per GPU" in result.reason


def test_issue_a100_40gb_mixed_1g_profiles() -> None:
    model = CATALOG.by_key("a100-40gb")
    result = fit(model, {"1g.10gb": 4, "1g.5gb": 3})
    assert not result.ok
    assert result.reason == "needs 11 memory slices, the GPU has 8"
    assert len(result.placements) == 5  # the most that fit together (5 of the 7 instances)
    assert sorted(result.unplaced) == ["1g.10gb", "1g.5gb"]


CI_CASES: list[tuple[str, str, dict[str, int], list[tuple[str, int]] | str]] = [
    ("3x1c.3g", "h100-80gb", {"1c.3g.40gb": 3}, [("3g.40gb", 0)]),
    ("4x1c.3g", "h100-80gb", {"1c.3g.40gb": 4}, [("3g.40gb", 0), ("3g.40gb", 4)]),
    ("7x1c.7g", "h100-80gb", {"1c.7g.80gb": 7}, [("7g.80gb", 0)]),
    ("3x2c.7g", "h100-80gb", {"2c.7g.80gb": 3}, [("7g.80gb", 0)]),
    ("non-canonical-7c.7g", "h100-80gb", {"7c.7g.80gb": 1}, [("7g.80gb", 0)]),
    ("docs-6x1c.3g", "a100-40gb", {"1c.3g.20gb": 6}, [("3g.20gb", 0), ("3g.20gb", 4)]),
    # NVIDIA mig-device-names: 1c + 2c + 3c compute instances share one 7g GPU instance.
    ("docs-1c-2c-3c.7g", "a100-40gb", {"1c.7g.40gb": 1, "2c.7g.40gb": 1, "3c.7g.40gb": 1}, [("7g.40gb", 0)]),
    ("2c-1c-share-3g", "h100-80gb", {"2c.3g.40gb": 1, "1c.3g.40gb": 1}, [("3g.40gb", 0)]),
    ("ci-with-gi-forms", "h100-80gb", {"1c.2g.20gb": 2, "2g.20gb": 1, "3g.40gb": 1},
     [("2g.20gb", 0), ("2g.20gb", 2), ("3g.40gb", 4)]),
    ("2x2c.4g-3g-h200", "h200-141gb", {"2c.4g.71gb": 2, "3g.71gb": 1}, [("4g.71gb", 0), ("3g.71gb", 4)]),
    # b300 has no compute-instance table: capacity falls back to floor(G / C).
    ("fallback-3x2c.7g", "b300", {"2c.7g.269gb": 3}, [("7g.269gb", 0)]),
    ("fallback-4x2c.7g", "b300", {"2c.7g.269gb": 4},
     "7g.269gb: at most 1 per GPU, 2 needed (for 2c.7g.269gb x4)"),
    ("7x1c.3g", "h100-80gb", {"1c.3g.40gb": 7}, "3g.40gb: at most 2 per GPU, 3 needed (for 1c.3g.40gb x7)"),
    ("2c+2c+1c.7g-too-many", "h100-80gb", {"2c.7g.80gb": 3, "1c.7g.80gb": 2}, "7g.80gb: at most 1 per GPU"),
    ("4c.3g", "h100-80gb", {"4c.3g.40gb": 1}, "a 3g.40gb GPU instance cannot hold a 4c compute instance"),
    ("3x1c.3g-3g-1g", "h100-80gb", {"1c.3g.40gb": 3, "3g.40gb": 1, "1g.10gb": 1},
     "needs 9 memory slices, the GPU has 8"),
    ("unknown-gi", "h100-80gb", {"1c.3g.20gb": 1}, "1c.3g.20gb is not a MIG profile of"),
]


@pytest.mark.parametrize(("key", "layout", "expected"), [pytest.param(*c[1:], id=c[0]) for c in CI_CASES])
def test_compute_instance_forms(
    key: str, layout: dict[str, int], expected: list[tuple[str, int]] | str
) -> None:
    model = CATALOG.by_key(key)
    result = fit(model, layout)
    assert_sound(model, result)
    if isinstance(expected, str):
        assert not result.ok
        assert expected in result.reason
    else:
        assert result.ok, result.reason
        assert [(p.profile, p.start) for p in result.placements] == expected


def test_compute_instance_partial_names_the_requested_form() -> None:
    result = fit(CATALOG.by_key("h100-80gb"), {"1c.3g.40gb": 7})
    # Two 3g GPU instances hold six of the seven compute instances.
    assert [(p.profile, p.start) for p in result.placements] == [("3g.40gb", 0), ("3g.40gb", 4)]
    assert result.unplaced == ("1c.3g.40gb",)


def test_unknown_profile_and_zero_counts() -> None:
    model = CATALOG.by_key("h100-80gb")
    result = fit(model, {"9g.99gb": 2, "7g.80gb": 1})
    assert not result.ok
    assert result.unplaced == ("9g.99gb", "9g.99gb")
    assert result.reason.startswith("9g.99gb is not a MIG profile of H100")
    assert [p.profile for p in result.placements] == ["7g.80gb"]
    assert fit(model, {"7g.80gb": 1, "1g.10gb": 0}).ok
    assert fit(model, {}) == FitResult(ok=True, placements=(), unplaced=(), reason="")


def test_media_extension_instances_are_exclusive() -> None:
    """A conservative rule (catalog: one media-extension instance per GPU), unconfirmed by NVIDIA."""
    model = CATALOG.by_key("a30-24gb")
    assert fit(model, {"2g.12gb+me": 1, "2g.12gb": 1}).ok
    result = fit(model, {"2g.12gb+me": 1, "1g.6gb+me": 1})
    assert not result.ok
    assert "at most one media-extension (+me) instance per GPU" in result.reason
    assert len(result.unplaced) == 1


def test_fit_is_deterministic_and_ignores_mapping_order() -> None:
    model = CATALOG.by_key("h200-141gb")
    layout = {"1g.18gb": 3, "2g.35gb": 1, "1g.35gb": 1, "1c.2g.35gb": 2}
    reordered = dict(reversed(list(layout.items())))
    assert fit(model, layout) == fit(model, reordered) == fit(model, dict(layout))


def test_placement_problem_sentence() -> None:
    """No catalog GPU fails on placement alone, so use a made-up one with an 8th compute slice."""
    h100 = CATALOG.by_key("h100-80gb")
    one_g = h100.profile("1g.10gb")
    assert one_g is not None
    model = dataclasses.replace(
        h100, total_compute_slices=8, profiles=(dataclasses.replace(one_g, max_count=8),)
    )
    result = fit(model, {"1g.10gb": 8})
    assert result.reason == (
        "no placement fits 1g.10gb together with 1g.10gb x7: memory slices 0-6 are taken; "
        "1g.10gb can only start at memory slices 0, 1, 2, 3, 4, 5 or 6"
    )


# ---- slice maps ------------------------------------------------------------------------------------

V5_MAP = """\
 0         1         2         3         4         5         6         7
+-------------------+---------+---------+---------------------------------------+
|2g.20gb            |1g.10gb  |1g.10gb  |3g.40gb                                |
+-------------------+---------+---------+---------------------------------------+
H100-SXM5-80GB: 4 instances, memory slices 8/8 used, compute slices 7/7 used
"""

A30_MAP = """\
 0   1   2   3
+-------+---+...+
|2g.12gb|1g~|fr~|
+-------+---+...+
A30-24GB: 2 instances, memory slices 3/4 used, compute slices 3/4 used, memory slice 3 free
"""


def test_slice_map_exact() -> None:
    model = CATALOG.by_key("h100-80gb")
    placements = fit(model, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}).placements
    assert render_slice_map(model, placements) == V5_MAP
    a30 = CATALOG.by_key("a30-24gb")
    placed = fit(a30, {"2g.12gb": 1, "1g.6gb+me": 1}).placements
    assert render_slice_map(a30, placed, width_per_slice=4) == A30_MAP


@pytest.mark.parametrize(
    ("key", "layout"),
    [
        pytest.param("h200-141gb", {"2g.35gb": 3}, id="h200-free-tail"),
        pytest.param("a100-40gb", {"1g.5gb+me": 1, "1g.10gb": 1}, id="a100-truncated-label"),
        pytest.param("rtx-pro-6000-blackwell-96gb", {}, id="rtx-empty"),
        pytest.param("b200-180gb", {"7g.180gb": 1}, id="b200-whole"),
    ],
)
def test_slice_map_shape(key: str, layout: dict[str, int]) -> None:
    model = CATALOG.by_key(key)
    result = fit(model, layout)
    text = render_slice_map(model, result.placements)
    lines = text.splitlines()
    assert text.isascii() and text.endswith("\n")
    assert all(line == line.rstrip() for line in lines)
    width = model.total_memory_slices * 10 + 1
    assert [len(line) for line in lines[1:4]] == [width] * 3
    assert lines[1] == lines[3]
    used = sum(p.size for p in result.placements)
    assert f"memory slices {used}/{model.total_memory_slices} used" in lines[4]
    assert ("free" in lines[2]) == (used < model.total_memory_slices)


@pytest.mark.parametrize(
    ("placements", "width", "message"),
    [
        pytest.param([PlacedInstance("3g.40gb", 0, 4), PlacedInstance("2g.20gb", 2, 2)], 10, "overlaps",
                     id="overlap"),
        pytest.param([PlacedInstance("9g.99gb", 0, 1)], 10, "not a MIG profile", id="unknown"),
        pytest.param([PlacedInstance("1g.10gb", 8, 1)], 10, "outside memory slices 0-7", id="outside"),
        pytest.param([], 1, "too narrow", id="narrow"),
    ],
)
def test_slice_map_rejects_bad_input(placements: list[PlacedInstance], width: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_slice_map(CATALOG.by_key("h100-80gb"), placements, width_per_slice=width)
