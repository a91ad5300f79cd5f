"""The exact placement search, bounded: MIG instances placed on a GPU's memory slices in counted steps.

A catalog file may describe a GPU of up to 64 memory slices with many profiles, where an exact search
(placement is an exact-cover problem) can run longer than anyone waits. Every search spends the steps of
a ``Budget``, counted and never timed, so the same input gives the same answer on every machine, and
raises ``SearchCut`` when they are spent. Its callers say so: a layout migbake cannot show to fit is
refused, and a list that was cut says it is incomplete. The packaged catalog's GPUs (at most 8 memory
slices) need a few hundred steps at most.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from migbake.gpu.catalog import MigProfile

MAX_SEARCH_STEPS = 200_000  # a step is one look at one placement: well under a second of search

# The catalog's rule (MigProfile.media_extension): the GPU has one set of optical-flow/media engines to
# hand out, so at most one media-extension instance, even of different profiles. NVIDIA does not say
# whether e.g. A30 1g.6gb+me and 2g.12gb+me may coexist (mig-reference.md section 5, rule 5); we refuse.
MAX_MEDIA_EXTENSION_INSTANCES = 1


class SearchCut(Exception):
    """A search spent its budget's steps before it had an answer."""


class Budget:
    """The steps a search may take; shared by the searches that make one answer (one layout's suggestions)."""

    def __init__(self, steps: int = MAX_SEARCH_STEPS) -> None:
        self.steps = steps
        self.left = steps

    @property
    def spent(self) -> bool:
        """Whether a search stopped for want of steps."""
        return self.left < 0

    def take(self, steps: int = 1) -> None:
        """Spend ``steps``; SearchCut once more were spent than the budget has."""
        self.left -= steps
        if self.left < 0:
            raise SearchCut


def size_of(profile: MigProfile) -> int:
    """Memory slices one instance of ``profile`` occupies (its placement size)."""
    return profile.placements[0].size if profile.placements else profile.memory_slices


def place_all(profiles: Sequence[MigProfile], slices: int, budget: Budget) -> tuple[int, ...] | None:
    """A start for every instance of ``profiles`` (in the order given), no two sharing a memory slice and at
    most one media-extension instance; None when no placement holds them all. SearchCut when ``budget``
    runs out first.

    Depth first, lowest starts first, memoised on (instance, slices taken, media instances, lowest start):
    the first full placement found is the one an exhaustive search in the same order would choose. Dead
    branches are cut early, which changes no answer: equal profiles next to each other are interchangeable,
    so they take increasing starts only; a branch is left when its remaining instances need more slices
    than are free, or when one of them has no free placement left.
    """
    order = tuple(profiles)
    kinds: dict[int, int] = {}  # each distinct profile object -> a small number (hashing a profile is slow)
    kind = [kinds.setdefault(id(p), len(kinds)) for p in order]
    masks: list[tuple[int, ...]] = [()] * len(kinds)
    for p, k in zip(order, kind):
        masks[k] = tuple(((1 << pl.size) - 1) << pl.start for pl in p.placements)
    need = [0] * (len(order) + 1)
    later: list[tuple[int, ...]] = [()] * (len(order) + 1)  # the distinct profiles still to place
    for i in range(len(order) - 1, -1, -1):
        need[i] = need[i + 1] + size_of(order[i])
        later[i] = later[i + 1] if kind[i] in later[i + 1] else (kind[i], *later[i + 1])

    @cache
    def place(i: int, taken: int, media: int, floor: int) -> tuple[int, ...] | None:
        if i == len(order):
            return ()
        p = order[i]
        budget.take(len(p.placements) + len(later[i]))  # a look at each placement, and at each profile to come
        if (p.media_extension and media >= MAX_MEDIA_EXTENSION_INSTANCES) or need[i] > slices - bin(taken).count("1"):
            return None
        if not all(any(not taken & m for m in masks[k]) for k in later[i]):
            return None
        same_next = i + 1 < len(order) and kind[i + 1] == kind[i]
        for pl, mask in zip(p.placements, masks[kind[i]]):
            if pl.start >= floor and not taken & mask:
                rest = place(i + 1, taken | mask, media + p.media_extension, pl.start + 1 if same_next else 0)
                if rest is not None:
                    return (pl.start, *rest)
        return None

    return place(0, 0, 0, 0)
