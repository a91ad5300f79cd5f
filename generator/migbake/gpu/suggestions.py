"""Layouts to offer instead of one that does not fit: each one fits, and each is close to what was asked.

Two kinds, nearest first: the requested instances with the fewest removed (keeping the most compute,
then memory, among equals), and the maximal layouts that keep most of the requested instances (with
the fewest added). Every suggestion passes ``placement.fit`` (compute slices included), so it validates
when pasted back. The searches behind them are bounded (``search.Budget``): when one stops at its bound,
``Nearest.cut`` says the list may miss nearer layouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product

from migbake.gpu.catalog import GpuModel
from migbake.gpu.maximal import MaximalLayouts, maximal_search
from migbake.gpu.placement import fit, memory_slices_of
from migbake.gpu.search import Budget

# enumerating the sub-layouts of a request is a product of (count + 1) per profile; past this, skip it
MAX_SUBLAYOUTS = 20_000
_MAXIMAL: dict[tuple[int, bool], tuple[GpuModel, MaximalLayouts]] = {}


@dataclass(frozen=True)
class Nearest:
    """The layouts to offer, and whether a search stopped at its bound (``cut``: nearer ones may exist)."""

    layouts: list[dict[str, int]]
    cut: bool
    steps: int  # the bound of each search


def flow(layout: Mapping[str, int]) -> str:
    """``{4g.71gb: 1, 3g.71gb: 1}``: a layout as a YAML flow mapping, ready to paste into a profile."""
    return "{" + ", ".join(f"{name}: {n}" for name, n in layout.items()) + "}"


def _maximal(model: GpuModel, include_media: bool) -> MaximalLayouts:
    cached = _MAXIMAL.get((id(model), include_media))
    if cached is None or cached[0] is not model:
        cached = (model, maximal_search(model, include_media=include_media))
        _MAXIMAL[(id(model), include_media)] = cached
    return cached[1]


def _may_fit(model: GpuModel, layout: Mapping[str, int]) -> bool:
    """False when the slices alone rule ``layout`` out (cheap; the exact search decides the rest)."""
    profiles = [(model.profile(name), n) for name, n in layout.items()]
    if any(p is None for p, _ in profiles):
        return True  # compute-instance forms: only fit() knows how they pack
    compute = sum(p.compute_slices * n for p, n in profiles if p)
    memory = sum(memory_slices_of(p) * n for p, n in profiles if p)
    return compute <= model.total_compute_slices and memory <= model.total_memory_slices


def fewest_removed(model: GpuModel, layout: Mapping[str, int], limit: int = 2,
                   budget: Budget | None = None) -> list[dict[str, int]]:
    """Sub-layouts of ``layout`` that fit and drop the fewest instances (most compute, then memory, first).

    The fits share ``budget`` (a fresh one when not given); once it is spent, no further one is tried.
    """
    budget = Budget() if budget is None else budget
    names = list(layout)
    caps = []
    for name in names:
        profile = model.profile(name)
        caps.append(min(layout[name], profile.max_count if profile else 8))
    total = 1
    for c in caps:
        total *= c + 1
    if total > MAX_SUBLAYOUTS:
        return []
    by_size: dict[int, list[dict[str, int]]] = {}
    for counts in product(*(range(c + 1) for c in caps)):
        kept = {name: n for name, n in zip(names, counts) if n}
        if kept and sum(counts) < sum(layout.values()):
            by_size.setdefault(sum(counts), []).append(kept)
    for size in sorted(by_size, reverse=True):
        fitting = [(r, candidate) for candidate in by_size[size]
                   if not budget.spent and _may_fit(model, candidate) and (r := fit(model, candidate, budget)).ok]
        if fitting:
            fitting.sort(key=lambda t: (-t[0].compute_slices, -t[0].memory_slices))
            return [candidate for _, candidate in fitting[:limit]]
    return []


def closest_maximal(model: GpuModel, layout: Mapping[str, int], limit: int = 2) -> MaximalLayouts:
    """Maximal layouts keeping most of ``layout``'s instances, with the fewest other instances added (and
    whether the maximal layouts they come from are all of them)."""
    if any(model.profile(name) is None for name in layout):
        return MaximalLayouts([], True, 0)  # compute-instance forms: maximal layouts are of GPU instances only
    media = any(p.media_extension for name in layout if (p := model.profile(name)) is not None)

    def score(candidate: dict[str, int]) -> tuple[int, int]:
        kept = sum(min(n, candidate.get(name, 0)) for name, n in layout.items())
        return -kept, sum(candidate.values()) - kept

    maximal = _maximal(model, media)
    ranked = sorted(maximal.layouts, key=score)
    return MaximalLayouts([c for c in ranked if score(c)[0] < 0][:limit], maximal.complete, maximal.steps)


def nearest_layouts(model: GpuModel, layout: Mapping[str, int], limit: int = 3) -> Nearest:
    """Layouts that fit ``model`` and are nearest to ``layout``: fewest removed first, then maximal ones."""
    budget = Budget()
    removed = fewest_removed(model, layout, budget=budget)
    maximal = closest_maximal(model, layout)
    out: list[dict[str, int]] = []
    for candidate in [*removed, *maximal.layouts]:
        if candidate not in out and candidate != dict(layout):
            out.append(candidate)
    return Nearest(out[:limit], budget.spent or not maximal.complete, budget.steps)
