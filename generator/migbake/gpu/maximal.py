"""Maximal MIG layouts: every mix of GPU instances that fits one GPU and to which no instance can be added.

The search walks mixes (a count per profile), not placements: from a mix that fits it adds one more
instance of a profile while the result still fits, so it never looks at a mix beyond one that does not
(whatever holds a mix that does not fit does not fit either). "Fits" is ``placement.fit``'s verdict,
compute slices included: every layout listed here validates. The walk and the placements it checks
spend one ``search.Budget``; when it runs out, the layouts proven maximal so far are returned and
``complete`` is false (a catalog file's GPU of 32 or 64 memory slices; the packaged GPUs need a few
thousand steps at most).
"""

from __future__ import annotations

from dataclasses import dataclass

from migbake.gpu.catalog import GpuModel, MigProfile
from migbake.gpu.search import MAX_MEDIA_EXTENSION_INSTANCES, Budget, SearchCut, place_all, size_of


@dataclass(frozen=True)
class MaximalLayouts:
    """The maximal layouts found, and whether the search saw every mix (``complete``) or stopped at its bound."""

    layouts: list[dict[str, int]]
    complete: bool
    steps: int  # the bound the search had


def maximal_search(model: GpuModel, *, include_media: bool = True, budget: Budget | None = None) -> MaximalLayouts:
    """Every layout of GPU-instance profiles that fits and to which no further instance can be added.

    Ordered by memory slices used, then compute slices, most first; then by the counts of the profiles
    (largest profiles first). ``budget``: a fresh ``Budget`` when not given.
    """
    budget = Budget() if budget is None else budget
    profiles = tuple(sorted(
        (p for p in model.profiles if include_media or not p.media_extension),
        key=lambda p: (-size_of(p), -p.compute_slices, p.name),
    ))
    verdicts: dict[tuple[int, ...], bool] = {}

    def fits(counts: tuple[int, ...]) -> bool:
        if counts not in verdicts:
            verdicts[counts] = _fits(model, profiles, counts, budget)
        return verdicts[counts]

    found: list[tuple[int, ...]] = []

    def walk(i: int, counts: tuple[int, ...]) -> None:
        if i == len(profiles):
            if any(counts) and not any(fits(_bump(counts, j)) for j in range(len(profiles))):
                found.append(counts)
            return
        while True:
            walk(i + 1, counts)
            counts = _bump(counts, i)
            if not fits(counts):
                return

    try:
        walk(0, (0,) * len(profiles))
        complete = True
    except SearchCut:
        complete = False

    def order(counts: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
        memory = sum(n * size_of(p) for n, p in zip(counts, profiles))
        compute = sum(n * p.compute_slices for n, p in zip(counts, profiles))
        return (-memory, -compute, tuple(-n for n in counts))

    layouts = [{p.name: n for p, n in zip(profiles, counts) if n} for counts in sorted(found, key=order)]
    return MaximalLayouts(layouts, complete, budget.steps)


def maximal_layouts(model: GpuModel, *, include_media: bool = True) -> list[dict[str, int]]:
    """The layouts of ``maximal_search`` (complete for every GPU of the packaged catalog)."""
    return maximal_search(model, include_media=include_media).layouts


def _fits(model: GpuModel, profiles: tuple[MigProfile, ...], counts: tuple[int, ...], budget: Budget) -> bool:
    """``placement.fit``'s verdict on a mix of GPU instances: counts, slices, media extension, then placement."""
    budget.take()
    if any(n > p.max_count for n, p in zip(counts, profiles)):
        return False
    if sum(n for n, p in zip(counts, profiles) if p.media_extension) > MAX_MEDIA_EXTENSION_INSTANCES:
        return False
    if sum(n * p.compute_slices for n, p in zip(counts, profiles)) > model.total_compute_slices:
        return False
    if sum(n * size_of(p) for n, p in zip(counts, profiles)) > model.total_memory_slices:
        return False
    instances = [p for n, p in zip(counts, profiles) for _ in range(n)]
    return place_all(instances, model.total_memory_slices, budget) is not None


def _bump(counts: tuple[int, ...], i: int) -> tuple[int, ...]:
    return (*counts[:i], counts[i] + 1, *counts[i + 1:])
