"""Maximal layouts against a brute force, for every catalog GPU, with and without +me profiles.

An oracle independent of migbake.gpu.placement (plain backtracking over the catalog's placements) enumerates
every valid layout: the maximal ones must be exactly those `maximal_layouts` finds, `fit` must agree
with it on every candidate, the 7/8-slice GPUs must give mig-reference.md's counts, and the catalog
facts the search relies on must hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
from test_layout import ALL, CATALOG, SEVEN_EIGHT, assert_sound, generic

from migbake.gpu.catalog import GpuModel, MigProfile
from migbake.gpu.maximal import maximal_layouts
from migbake.gpu.placement import fit, is_valid


def oracle_fits(model: GpuModel, layout: Mapping[str, int]) -> bool:
    """Plain backtracking, independent of migbake.gpu.placement: max counts, one +me, disjoint placements."""
    profiles = [p for p in model.profiles for _ in range(layout.get(p.name, 0))]
    if any(n > p.max_count for p in model.profiles if (n := layout.get(p.name, 0))):
        return False
    if sum(p.media_extension for p in profiles) > 1:
        return False

    def place(i: int, taken: frozenset[int], floor: int) -> bool:
        if i == len(profiles):
            return True
        for pl in profiles[i].placements:
            span = frozenset(range(pl.start, pl.start + pl.size))
            if pl.start >= floor and not span & taken:
                # Equal profiles are interchangeable: try their starts in increasing order only.
                same = i + 1 < len(profiles) and profiles[i + 1] == profiles[i]
                if place(i + 1, taken | span, pl.start + 1 if same else 0):
                    return True
        return False

    return place(0, frozenset(), 0)


def candidates(model: GpuModel, profiles: list[MigProfile]) -> Iterator[dict[str, int]]:
    """Every count vector within max counts whose memory could fit (others fail trivially)."""

    def walk(i: int, memory: int, chosen: dict[str, int]) -> Iterator[dict[str, int]]:
        if i == len(profiles):
            yield dict(chosen)
            return
        p = profiles[i]
        for n in range(p.max_count + 1):
            if memory + n * p.memory_slices > model.total_memory_slices:
                break
            yield from walk(i + 1, memory + n * p.memory_slices, {**chosen, p.name: n} if n else chosen)

    return walk(0, 0, {})


def brute_force(model: GpuModel, include_media: bool) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """(every valid non-empty layout, the maximal ones), by the oracle."""
    profiles = [p for p in model.profiles if include_media or not p.media_extension]
    valid = [c for c in candidates(model, profiles) if c and oracle_fits(model, c)]
    keys = {frozenset(c.items()) for c in valid}
    maximal = [
        c for c in valid
        if not any(frozenset({**c, p.name: c.get(p.name, 0) + 1}.items()) in keys for p in profiles)
    ]
    return valid, maximal


def contains(big: Mapping[str, int], small: Mapping[str, int]) -> bool:
    return all(big.get(name, 0) >= n for name, n in small.items())


@pytest.mark.parametrize("include_media", [True, False], ids=["with-media", "base"])
@pytest.mark.parametrize("key", ALL)
def test_maximal_layouts_match_brute_force(key: str, include_media: bool) -> None:
    model = CATALOG.by_key(key)
    found = maximal_layouts(model, include_media=include_media)
    profiles = [p for p in model.profiles if include_media or not p.media_extension]

    assert len({frozenset(m.items()) for m in found}) == len(found), "duplicates"
    for m in found:
        assert all(n >= 1 for n in m.values())
        assert is_valid(model, m), m
        for p in profiles:
            assert not is_valid(model, {**m, p.name: m.get(p.name, 0) + 1}), f"{m} + {p.name}"
        assert include_media or not any(p.media_extension for p in model.profiles if p.name in m)

    valid, maximal = brute_force(model, include_media)
    for layout in valid:
        assert any(contains(m, layout) for m in found), f"{layout} is in no maximal layout"
    assert {frozenset(m.items()) for m in found} == {frozenset(m.items()) for m in maximal}
    assert maximal_layouts(model, include_media=include_media) == found  # deterministic


@pytest.mark.parametrize("key", ALL)
def test_fit_agrees_with_brute_force(key: str) -> None:
    model = CATALOG.by_key(key)
    for layout in candidates(model, list(model.profiles)):
        result = fit(model, layout)
        assert result.ok == oracle_fits(model, layout), (layout, result.reason)
        assert_sound(model, result)


@pytest.mark.parametrize("key", SEVEN_EIGHT)
def test_seven_eight_counts_match_reference(key: str) -> None:
    """mig-reference.md section 5.1: over base profiles (no +me), 77 valid multisets, 28 maximal.

    With +me there are 44: each of the 16 base maximal layouts holding a 1g instance also exists with
    one 1g swapped for 1g+me (same placements, max 1). Nothing else changes: +me fits where 1g fits.
    """
    model = CATALOG.by_key(key)
    valid, _ = brute_force(model, include_media=False)
    base = maximal_layouts(model, include_media=False)
    assert (len(valid), len(base)) == (77, 28)
    one_g = generic(model, "1g")
    with_one_g = [m for m in base if one_g in m]
    assert len(with_one_g) == 16
    assert len(maximal_layouts(model)) == len(base) + len(with_one_g) == 44


def test_maximal_layouts_order_and_examples() -> None:
    model = CATALOG.by_key("h100-80gb")
    found = maximal_layouts(model, include_media=False)
    assert found[:3] == [
        {"7g.80gb": 1}, {"4g.40gb": 1, "3g.40gb": 1}, {"4g.40gb": 1, "2g.20gb": 1, "1g.20gb": 1}
    ]
    assert found[-1] == {"1g.10gb": 7}
    a30 = maximal_layouts(CATALOG.by_key("a30-24gb"), include_media=False)
    # nebuly-ai/nos known_geometries.go lists exactly these four A30 geometries.
    assert a30 == [{"4g.24gb": 1}, {"2g.12gb": 2}, {"2g.12gb": 1, "1g.6gb": 2}, {"1g.6gb": 4}]


@pytest.mark.parametrize("key", ALL)
def test_catalog_facts_the_search_relies_on(key: str) -> None:
    """Placements lie inside the GPU, match the profile's size, and never allow too many instances."""
    model = CATALOG.by_key(key)
    for p in model.profiles:
        assert p.placements
        for pl in p.placements:
            assert pl.size == p.memory_slices
            assert pl.start >= 0
            assert pl.start + pl.size <= model.total_memory_slices
    most = max(sum(m.values()) for m in maximal_layouts(model))
    assert most <= model.max_gpu_instances
