"""A plain-text picture of one GPU's memory slices with its MIG instances placed on them."""

from __future__ import annotations

from collections.abc import Sequence

from migbake.gpu.catalog import GpuModel
from migbake.gpu.placement import PlacedInstance
from migbake.wording import slice_ranges


def render_slice_map(
    model: GpuModel, placements: Sequence[PlacedInstance], *, width_per_slice: int = 10
) -> str:
    """Draw a ruler, one box per instance (free slices dotted) and a used/total legend, ASCII only.

    Raises ValueError for placements that overlap, leave the GPU or name an unknown profile.
    """
    n = model.total_memory_slices
    w = width_per_slice
    if w < len(str(max(n - 1, 0))) + 1:
        raise ValueError(f"width_per_slice {w} is too narrow for {n} memory slices")
    owner: list[PlacedInstance | None] = [None] * n
    compute = 0
    for p in placements:
        profile = model.profile(p.profile)
        if profile is None:
            raise ValueError(f"{p.profile} is not a MIG profile of {model.display_name}")
        if p.start < 0 or p.size < 1 or p.start + p.size > n:
            raise ValueError(f"{p.profile} at {p.start} (size {p.size}) is outside memory slices 0-{n - 1}")
        for s in range(p.start, p.start + p.size):
            if owner[s] is not None:
                raise ValueError(f"{p.profile} at {p.start} overlaps another instance on memory slice {s}")
            owner[s] = p
        compute += profile.compute_slices

    edge, middle = "", ""
    start = 0
    while start < n:
        who = owner[start]
        end = start + 1
        while end < n and owner[end] is who:
            end += 1
        inner = (end - start) * w - 1
        edge += "+" + ("-" if who else ".") * inner
        middle += "|" + _clip(who.profile if who else "free", inner).ljust(inner)
        start = end
    edge += "+"
    middle += "|"

    ruler = " " + "".join(str(s).ljust(w) for s in range(n))
    used = n - owner.count(None)
    free = [s for s in range(n) if owner[s] is None]
    legend = (
        f"{model.display_name}: {len(placements)} instance{'' if len(placements) == 1 else 's'}, "
        f"memory slices {used}/{n} used, "
        f"compute slices {compute}/{model.total_compute_slices} used"
        + (f", memory slice{'s' if len(free) > 1 else ''} {slice_ranges(free)} free" if free else "")
    )
    return "\n".join(line.rstrip() for line in (ruler, edge, middle, edge, legend)) + "\n"


def _clip(label: str, width: int) -> str:
    """``label`` cut to ``width`` characters, a trailing ``~`` marking a cut."""
    return label if len(label) <= width else label[: width - 1] + "~"
