"""Where apply really puts each GPU instance: mig-parted's creation order and a model of the driver's choice.

NVIDIA's mig-parted (v0.15.0) creates GPU instances with ``CreateGpuInstance`` and no placement
(NVIDIA/mig-parted:pkg/mig/config/config.go@v0.15.0, ``SetMigConfig``), in the order of
``MigConfig.Flatten()``: GPU slices (G) descending, then compute slices (C), then the attribute string
descending (NVIDIA/mig-parted:pkg/types/mig_config.go@v0.15.0 l.99-134); when one creation fails it clears
the GPU and tries the next ordering that ``iteratePermutationsUntilSuccess`` (config.go) yields: a
swap-based walk that never swaps two instances of one profile (``migparted_orderings`` follows it).
The driver chooses the placement; NVML documents no rule for it (``nvmlDeviceCreateGpuInstance``,
NVIDIA/go-nvml:pkg/nvml/nvml.h; the MIG User Guide: "the NVIDIA driver chooses the placement"). This
module's model of the driver: each instance takes the free placement that rules out the fewest placements
other instances could still take, the lowest start among equals. The public evidence it is checked
against lives in ``tests/fixtures/placements/`` (sources in its README; the score is in docs/dra.md):
NVIDIA/DCGM#138 (an A100 80GB under mig-parted: ``3g.40gb 4:4``, ``2g.20gb 0:2``, ``1g.10gb 2:1`` and
``3:1``) is reproduced, but "lowest free start" with mig-parted's retries ends there too; an H100 whose
seven 1g instances were created at 6, 4, 5, 0, 1, 2, 3 separates the two rules in the model's favour, and
an A100 40GB whose first 3g went to 0 is a case the model gets wrong (the set of placements is the same).
It is a model, not NVIDIA's word: the restore compares what ``nvidia-smi mig -lgi`` reports with it after
every apply (``restore.placements``), and the simulated GPU of the boot test
(``migbake_boottest/simgpu/nvml.c``, ``find_room``) places the same way.
A full layout (every memory slice used) has one answer whatever the driver does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from migbake.gpu.catalog import GpuModel, MigProfile
from migbake.gpu.placement import PlacedInstance, fit, per_model

MAX_ORDERINGS = 5040  # 7! : mig-parted's own search is over the orderings of at most 7 GPU instances
Chooser = Callable[[GpuModel, MigProfile, int], "int | None"]  # (model, profile, memory slices taken) -> start


def creation_order(model: GpuModel, names: list[str]) -> list[MigProfile]:
    """The GPU-instance profiles of ``names`` in mig-parted's Flatten order (G, C, attributes descending).

    Profiles that tie (e.g. H200 ``1g.18gb`` and ``1g.35gb``: G=1, C=1, no attribute) come from a Go map in
    random order and an unstable sort; here they keep the order given (the caller sorts by name)."""
    profiles = [p for p in (model.profile(n) for n in names) if p is not None]
    return sorted(profiles, key=lambda p: (-p.g, -p.compute_slices, _attrs_key(p)))


def _attrs_key(p: MigProfile) -> tuple[int, ...]:
    # descending string order of ",".join(attributes): negate each character's code point
    return (*(-ord(ch) for ch in ",".join(p.attributes)), 1)


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


def driver_choice(model: GpuModel, profile: MigProfile, taken: int) -> int | None:
    """The start the modelled driver gives a new ``profile`` instance with memory slices ``taken`` in use."""
    still_possible = [_mask(pl.start, pl.size) for p in model.profiles for pl in p.placements
                      if not taken & _mask(pl.start, pl.size)]
    best: tuple[int, int] | None = None
    for pl in profile.placements:
        mask = _mask(pl.start, pl.size)
        if taken & mask:
            continue
        blocked = sum(1 for other in still_possible if other & mask)
        if best is None or (blocked, pl.start) < best:
            best = (blocked, pl.start)
    return None if best is None else best[1]


def replay(model: GpuModel, order: Sequence[MigProfile],
           choose: Chooser = driver_choice) -> tuple[PlacedInstance, ...] | None:
    """Create ``order``'s instances one after the other, as ``nvidia-smi mig -cgi A,B,C`` does (no retry):
    where ``choose`` (the modelled driver by default) puts each; None when one finds no room."""
    taken, placed = 0, []
    for p in order:
        start = choose(model, p, taken)
        if start is None:
            return None
        size = p.placements[0].size
        taken |= _mask(start, size)
        placed.append(PlacedInstance(p.name, start, size))
    return tuple(placed)


def migparted_orderings(first: Sequence[MigProfile]) -> Iterator[tuple[MigProfile, ...]]:
    """Every ordering of ``first`` in the order mig-parted v0.15.0 tries them.

    ``iteratePermutationsUntilSuccess`` (NVIDIA/mig-parted:pkg/mig/config/config.go@v0.15.0): position i
    takes, in turn, each later element j >= i (swapped into place, swapped back after), unless an element
    between i and j is the same profile (``shouldSwap``: Flatten gives every instance of one profile the same
    pointer, so two of them are never swapped, and each distinct ordering comes once)."""
    mps = list(first)

    def walk(i: int) -> Iterator[tuple[MigProfile, ...]]:
        if i >= len(mps):
            yield tuple(mps)
            return
        for j in range(i, len(mps)):
            if any(mps[k].name == mps[j].name for k in range(i, j)):
                continue
            mps[i], mps[j] = mps[j], mps[i]
            yield from walk(i + 1)
            mps[i], mps[j] = mps[j], mps[i]

    return walk(0)


def predict(model: GpuModel, layout: Mapping[str, int]) -> tuple[PlacedInstance, ...] | None:
    """The instances of ``layout`` with the placement apply is predicted to give them, in creation order;
    None when the layout has compute-instance forms (their GPU instances are packed by ``fit``) or no
    ordering succeeds. The orderings are mig-parted's, in its order (``migparted_orderings``)."""
    names = [n for n, c in sorted(layout.items()) for _ in range(max(c, 0))]
    first = tuple(creation_order(model, names))
    if len(first) != len(names):
        return None  # a compute-instance form (Cc.Gg.XXgb) or an unknown profile
    for tried, order in enumerate(migparted_orderings(first)):
        if tried >= MAX_ORDERINGS:
            break
        placed = replay(model, order)
        if placed is not None:
            return placed
    return None


@per_model
def placements_of(model: GpuModel, layout: Mapping[str, int]) -> tuple[PlacedInstance, ...]:
    """The predicted placements, or ``fit``'s (sorted by start) where no prediction exists (remembered:
    ``per_model``)."""
    predicted = predict(model, layout)
    return predicted if predicted is not None else fit(model, layout).placements


# Per ``gpus`` entry, where apply puts its instances (empty with MIG off): predicted once per profile (the
# render plan's ``placements``, ``entry_placements``) and handed to every reader (DRA names, Slurm lines).
EntryPlacements = tuple[tuple[PlacedInstance, ...], ...]


def entry_placements(entries: Iterable[tuple[bool, GpuModel, Mapping[str, int]]]) -> EntryPlacements:
    """Per entry (MIG on, its model, its layout), the predicted placements: one prediction per entry."""
    return tuple(placements_of(model, layout) if mig else () for mig, model, layout in entries)
