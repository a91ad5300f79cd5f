"""Exact MIG placement: whether a mix of instances fits one GPU, and which mixes are maximal.

A layout fits when every GPU instance gets one of its profile's allowed placement starts, no two
instances share a memory slice, no profile exceeds its ``max_count`` and the GPU holds at most one
media-extension (``+me``) instance. Compute-instance forms (``Cc.Gg.XXgb``) are packed into GPU
instances of ``Gg.XXgb`` the way mig-parted does it, then those GPU instances are placed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from itertools import product

from migbake.gpu.catalog import PROFILE_NAME_RE, GpuModel, MigProfile
from migbake.wording import either, slice_ranges, tally

# The catalog's rule (MigProfile.media_extension): the GPU has one set of optical-flow/media engines to
# hand out, so at most one media-extension instance, even of different profiles. NVIDIA does not say
# whether e.g. A30 1g.6gb+me and 2g.12gb+me may coexist (mig-reference.md section 5, rule 5); we refuse.
MAX_MEDIA_EXTENSION_INSTANCES = 1


@dataclass(frozen=True)
class PlacedInstance:
    """One GPU instance at a placement: profile name, first memory slice, number of memory slices.

    ``carries``: the layout's names it serves, one per MIG device (a compute-instance form packed into
    it gives one per compute instance); not part of its identity.
    """

    profile: str
    start: int
    size: int
    carries: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class FitResult:
    """Whether a layout fits one GPU; if not, the best partial placement and what is left over."""

    ok: bool
    placements: tuple[PlacedInstance, ...]
    unplaced: tuple[str, ...]
    reason: str
    compute_slices: int = 0  # what the whole layout asks for (compute-instance forms packed into GPU instances)
    memory_slices: int = 0


@dataclass(frozen=True)
class _Form:
    """``count`` compute instances of form ``name``: ``c`` compute slices, ``capacity`` per GPU instance."""

    name: str
    c: int
    capacity: int
    count: int
    gpu_instance: MigProfile


@dataclass(frozen=True)
class _Unit:
    """One GPU instance to place and the requested instances (names, with multiplicity) it serves."""

    profile: MigProfile
    carries: tuple[str, ...]


def fit(model: GpuModel, layout: Mapping[str, int]) -> FitResult:
    """Place ``layout`` (profile name -> count) on one GPU of ``model``, exactly and deterministically."""
    reasons: list[str] = []
    unplaced: list[str] = []
    units: list[_Unit] = []
    compute_forms: dict[MigProfile, list[_Form]] = {}
    for name, count in sorted(layout.items()):
        if count < 1:
            continue  # nothing to place; bad counts are the rules' business
        profile = model.profile(name)
        if profile is not None:
            units.extend(_Unit(profile, (name,)) for _ in range(count))
            continue
        form = _compute_form(model, name, count)
        if isinstance(form, str):
            reasons.append(form)
            unplaced.extend([name] * count)
        else:
            compute_forms.setdefault(form.gpu_instance, []).append(form)
    for gi_profile, forms in compute_forms.items():
        units.extend(_pack_compute_instances(gi_profile, forms))

    units.sort(key=_unit_order)
    asked_compute = sum(u.profile.compute_slices for u in units)
    asked_memory = sum(_size(u.profile) for u in units)
    units = _cap_max_count(units, reasons, unplaced)
    media = [u.profile.name for u in units if u.profile.media_extension]
    if len(media) > MAX_MEDIA_EXTENSION_INSTANCES:
        reasons.append(f"at most one media-extension (+me) instance per GPU, requested {tally(media)}")
    totals = _total_problems(model, units)
    reasons.extend(totals)

    starts = _search(tuple(units))
    placed = sorted(
        (PlacedInstance(u.profile.name, s, _size(u.profile), u.carries) for u, s in zip(units, starts)
         if s is not None),
        key=lambda p: p.start,
    )
    left = [u for u, s in zip(units, starts) if s is None]
    for u in left:
        unplaced.extend(u.carries)
    if left and not totals and len(media) <= MAX_MEDIA_EXTENSION_INSTANCES:
        reasons.append(_placement_problem(left, placed))
    return FitResult(
        ok=not reasons and not unplaced,
        placements=tuple(placed),
        unplaced=tuple(unplaced),
        reason="; ".join(reasons),
        compute_slices=asked_compute,
        memory_slices=asked_memory,
    )


def is_valid(model: GpuModel, layout: Mapping[str, int]) -> bool:
    """Whether ``layout`` fits one GPU of ``model`` (see :func:`fit`)."""
    return fit(model, layout).ok


def maximal_layouts(model: GpuModel, *, include_media: bool = True) -> list[dict[str, int]]:
    """Every layout of GPU-instance profiles that fits and to which no further instance can be added."""
    profiles = sorted(
        (p for p in model.profiles if include_media or not p.media_extension),
        key=lambda p: (-_size(p), -p.compute_slices, p.name),
    )
    valid = set(_packings(model, tuple(profiles)))
    maximal = [
        counts for counts in valid
        if not any(_bump(counts, i) in valid for i in range(len(counts)))
    ]

    def order(counts: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
        memory = sum(n * _size(p) for n, p in zip(counts, profiles))
        compute = sum(n * p.compute_slices for n, p in zip(counts, profiles))
        return (-memory, -compute, tuple(-n for n in counts))

    return [
        {p.name: n for p, n in zip(profiles, counts) if n}
        for counts in sorted(maximal, key=order)
    ]


def memory_slices_of(profile: MigProfile) -> int:
    """Memory slices one instance of ``profile`` occupies (its placement size)."""
    return _size(profile)


def _size(profile: MigProfile) -> int:
    return profile.placements[0].size if profile.placements else profile.memory_slices


def _compute_form(model: GpuModel, name: str, count: int) -> _Form | str:
    """``count`` x compute-instance form ``name`` (``Cc.Gg.XXgb``), or why it has no place on ``model``."""
    match = PROFILE_NAME_RE.match(name)
    gi_profile = None
    if match is not None and match["c"] is not None:
        gi_profile = model.profile(name[len(match["c"]) + 2:])
    if match is None or gi_profile is None:
        return f"{name} is not a MIG profile of {model.display_name}; known: {', '.join(model.profile_names)}"
    c, g = int(match["c"]), int(match["g"])
    capacity = model.ci_counts.get(f"{g}g", {}).get(f"{c}c", g // c if c > 0 else 0)
    if capacity < 1 or not 0 < c <= gi_profile.compute_slices:
        return f"{name}: a {gi_profile.name} GPU instance cannot hold a {c}c compute instance"
    return _Form(name, c, capacity, count, gi_profile)


def _pack_compute_instances(gi_profile: MigProfile, forms: list[_Form]) -> list[_Unit]:
    """The fewest GPU instances of ``gi_profile`` that hold all requested compute instances.

    mig-parted tries every ordering and puts a compute instance into the previous GPU instance while
    it has that GPU profile and creation succeeds, so any grouping is reachable. A GPU instance holds a
    group when each form stays within its per-GPU-instance count and the compute slices add up to at
    most the GPU instance's (so 1c + 2c + 3c share one 7g, as in NVIDIA's mig-device-names example).
    """
    wanted = tuple(f.count for f in forms)
    if sum(wanted) > gi_profile.max_count * gi_profile.compute_slices:
        # Hopeless anyway: keep the arithmetic simple (ceil per form) and the search small.
        return [
            _Unit(gi_profile, (f.name,) * min(f.capacity, f.count - first))
            for f in forms for first in range(0, f.count, f.capacity)
        ]
    room = gi_profile.compute_slices
    fills = sorted(
        (fill for fill in product(*(range(min(f.capacity, f.count) + 1) for f in forms))
         if any(fill) and sum(n * f.c for n, f in zip(fill, forms)) <= room),
        key=lambda fill: (-sum(fill), [-n for n in fill]),
    )

    @cache
    def fewest(left: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        if not any(left):
            return ()
        best: tuple[tuple[int, ...], ...] | None = None
        for fill in fills:
            if all(n <= m for n, m in zip(fill, left)):
                rest = fewest(tuple(m - n for n, m in zip(fill, left)))
                if best is None or len(rest) + 1 < len(best):
                    best = (fill, *rest)
        assert best is not None  # one compute instance alone always fits
        return best

    return [
        _Unit(gi_profile, tuple(f.name for n, f in zip(fill, forms) for _ in range(n)))
        for fill in fewest(wanted)
    ]


def _unit_order(u: _Unit) -> tuple[int, int, bool, str, int, tuple[str, ...]]:
    """Largest first, media extension before its plain twin, then the ones serving most requests."""
    p = u.profile
    return (-_size(p), -p.compute_slices, not p.media_extension, p.name, -len(u.carries), u.carries)


def _cap_max_count(units: list[_Unit], reasons: list[str], unplaced: list[str]) -> list[_Unit]:
    """Drop instances beyond each profile's ``max_count`` (recording why) and return the rest."""
    kept: list[_Unit] = []
    seen: Counter[str] = Counter()
    for u in units:
        seen[u.profile.name] += 1
        if seen[u.profile.name] <= u.profile.max_count:
            kept.append(u)
        else:
            unplaced.extend(u.carries)
    for name, n in seen.items():
        mine = [u for u in units if u.profile.name == name]
        if n > mine[0].profile.max_count:
            carried = [c for u in mine for c in u.carries]
            why = "" if set(carried) == {name} else f" (for {tally(carried)})"
            reasons.append(f"{name}: at most {mine[0].profile.max_count} per GPU, {n} needed{why}")
    return kept


def _total_problems(model: GpuModel, units: list[_Unit]) -> list[str]:
    memory = sum(_size(u.profile) for u in units)
    compute = sum(u.profile.compute_slices for u in units)
    out = []
    if memory > model.total_memory_slices:
        out.append(f"needs {memory} memory slices, the GPU has {model.total_memory_slices}")
    if compute > model.total_compute_slices:
        out.append(f"needs {compute} compute slices, the GPU has {model.total_compute_slices}")
    return out


def _search(units: tuple[_Unit, ...]) -> tuple[int | None, ...]:
    """A start per unit (None = left out) that places the most requested instances, exactly.

    Memoised backtracking over (next unit, taken memory slices, media instances used); units come
    largest first and starts are tried lowest first, so ties resolve the same way every time.
    """

    @cache
    def complete(i: int, taken: int, media: int) -> tuple[int, ...] | None:
        # the common case, a layout that fits: depth first, lowest starts first, stop at the first
        # full placement (the same one the exhaustive search below would choose)
        if i == len(units):
            return ()
        u = units[i]
        if u.profile.media_extension and media >= MAX_MEDIA_EXTENSION_INSTANCES:
            return None
        for p in u.profile.placements:
            mask = ((1 << p.size) - 1) << p.start
            if not taken & mask:
                rest = complete(i + 1, taken | mask, media + u.profile.media_extension)
                if rest is not None:
                    return (p.start, *rest)
        return None

    full = complete(0, 0, 0)
    if full is not None:
        return full

    @cache
    def best(i: int, taken: int, media: int) -> tuple[int, int, tuple[int | None, ...]]:
        if i == len(units):
            return (0, 0, ())
        u = units[i]
        found: tuple[int, int, tuple[int | None, ...]] | None = None
        if not u.profile.media_extension or media < MAX_MEDIA_EXTENSION_INSTANCES:
            for p in u.profile.placements:
                mask = ((1 << p.size) - 1) << p.start
                if taken & mask:
                    continue
                served, count, rest = best(i + 1, taken | mask, media + u.profile.media_extension)
                candidate = (served + len(u.carries), count + 1, (p.start, *rest))
                if found is None or candidate[:2] > found[:2]:
                    found = candidate
        served, count, rest = best(i + 1, taken, media)
        if found is None or (served, count) > found[:2]:
            found = (served, count, (None, *rest))
        return found

    return best(0, 0, 0)[2]


def _placement_problem(left: list[_Unit], placed: list[PlacedInstance]) -> str:
    """An actionable sentence for units that no placement could hold."""
    wanted = tally(_label(u) for u in left)
    taken = sorted(s for p in placed for s in range(p.start, p.start + p.size))
    text = f"no placement fits {wanted}"
    if placed:
        text += f" together with {tally(p.profile for p in placed)}"
        text += f": memory slices {slice_ranges(taken)} are taken"
    starts = []
    for profile in dict.fromkeys(u.profile for u in left):
        where = [str(p.start) for p in profile.placements]
        plural = "s" if len(where) > 1 else ""
        starts.append(f"{profile.name} can only start at memory slice{plural} {either(where)}")
    return "; ".join([text, *starts])


def _label(u: _Unit) -> str:
    if u.carries == (u.profile.name,):
        return u.profile.name
    return f"{u.profile.name} (for {tally(u.carries)})"


def _packings(model: GpuModel, profiles: tuple[MigProfile, ...]) -> Iterator[tuple[int, ...]]:
    """Counts per profile of every packing (each yielded once; equal counts may repeat)."""
    n = model.total_memory_slices
    limits = [p.max_count for p in profiles]
    by_start: dict[int, list[tuple[int, int]]] = {}
    for i, p in enumerate(profiles):
        for pl in p.placements:
            by_start.setdefault(pl.start, []).append((i, ((1 << pl.size) - 1) << pl.start))

    def walk(s: int, taken: int, counts: tuple[int, ...], media: int) -> Iterator[tuple[int, ...]]:
        while s < n and taken >> s & 1:
            s += 1
        if s >= n:
            yield counts
            return
        yield from walk(s + 1, taken, counts, media)  # leave slice s free
        for i, mask in by_start.get(s, ()):
            extra = profiles[i].media_extension
            if taken & mask or counts[i] >= limits[i] or media + extra > MAX_MEDIA_EXTENSION_INSTANCES:
                continue
            yield from walk(s + 1, taken | mask, _bump(counts, i), media + extra)

    return walk(0, 0, (0,) * len(profiles), 0)


def _bump(counts: tuple[int, ...], i: int) -> tuple[int, ...]:
    return (*counts[:i], counts[i] + 1, *counts[i + 1:])
