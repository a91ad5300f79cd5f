"""Exact MIG placement: whether a mix of instances fits one GPU (which mixes are maximal: ``maximal``).

A layout fits when every GPU instance gets one of its profile's allowed placement starts, no two
instances share a memory slice, no profile exceeds its ``max_count``, the compute and memory slices add
up within the GPU's and the GPU holds at most one media-extension (``+me``) instance. Compute-instance
forms (``Cc.Gg.XXgb``) are packed into GPU instances of ``Gg.XXgb`` the way mig-parted does it, then those
GPU instances are placed. The searches are exact within a bound of steps (``search``): a layout the
search could not decide within it does not fit (``FitResult.undecided`` says so).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, wraps
from itertools import product
from typing import TypeVar

from migbake.gpu.catalog import PROFILE_NAME_RE, GpuModel, MigProfile
from migbake.gpu.search import MAX_MEDIA_EXTENSION_INSTANCES, Budget, SearchCut, place_all, size_of
from migbake.wording import either, plural, slice_ranges, tally


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
    undecided: bool = False  # the search spent its budget before it could say whether the layout fits


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


_Answer = TypeVar("_Answer")
REMEMBER = True  # False: every ``per_model`` function computes each time (tests that count derivations)


def per_model(find: Callable[[GpuModel, Mapping[str, int]], _Answer]) -> Callable[[GpuModel, Mapping[str, int]],
                                                                                _Answer]:
    """``find(model, layout)``, each answer remembered for that model object and layout (the validation and the
    render of a profile, and every profile of one GPU and layout in a fleet, ask alike). ``find`` must be
    a function of its arguments alone and its answers immutable. A model is known by its identity, held
    while its answers are kept (its ``id`` cannot be another's then): a catalog file's model of the same key
    is another model."""
    kept: dict[tuple[int, tuple[tuple[str, int], ...]], tuple[GpuModel, _Answer]] = {}

    @wraps(find)
    def remembered(model: GpuModel, layout: Mapping[str, int]) -> _Answer:
        if not REMEMBER:
            return find(model, layout)
        try:
            key = (id(model), tuple(sorted(layout.items())))
            hash(key)
        except TypeError:  # a layout of other keys or values: the rules report it
            return find(model, layout)
        hit = kept.get(key)
        if hit is not None and hit[0] is model:
            return hit[1]
        answer = find(model, layout)
        if len(kept) >= 512:
            kept.clear()
        kept[key] = (model, answer)
        return answer

    return remembered


def fit(model: GpuModel, layout: Mapping[str, int], budget: Budget | None = None) -> FitResult:
    """Place ``layout`` (profile name -> count) on one GPU of ``model``, exactly and deterministically.

    ``budget``: the steps the search may take (a fresh ``Budget`` when not given: the answer is remembered,
    ``per_model``); when they run out before the answer, the result is not ok and ``undecided``.
    """
    return _fit_fresh(model, layout) if budget is None else _fit_within(model, layout, budget)


@per_model
def _fit_fresh(model: GpuModel, layout: Mapping[str, int]) -> FitResult:
    return _fit_within(model, layout, Budget())


def _fit_within(model: GpuModel, layout: Mapping[str, int], budget: Budget) -> FitResult:
    try:
        return _fit(model, layout, budget)
    except SearchCut:
        return FitResult(ok=False, placements=(), unplaced=(), reason=undecided_reason(model, budget),
                         undecided=True)


def undecided_reason(model: GpuModel, budget: Budget) -> str:
    """Why a layout of ``model`` is refused when the search could not decide it."""
    return (f"the exact placement search stopped at its bound of {budget.steps:,} steps before it could show "
            f"that the layout fits one {model.display_name} ({plural(model.total_memory_slices, 'memory slice')}, "
            f"{plural(len(model.profiles), 'profile')}); migbake refuses a layout it cannot show to fit")


def _fit(model: GpuModel, layout: Mapping[str, int], budget: Budget) -> FitResult:
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
        units.extend(_pack_compute_instances(gi_profile, forms, budget))

    units.sort(key=_unit_order)
    asked_compute = sum(u.profile.compute_slices for u in units)
    asked_memory = sum(_size(u.profile) for u in units)
    units = _cap_max_count(units, reasons, unplaced)
    media = [u.profile.name for u in units if u.profile.media_extension]
    if len(media) > MAX_MEDIA_EXTENSION_INSTANCES:
        reasons.append(f"at most one media-extension (+me) instance per GPU, requested {tally(media)}")
    totals = _total_problems(model, units)
    reasons.extend(totals)

    starts = _search(tuple(units), model.total_memory_slices, budget, decided=bool(reasons))
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


memory_slices_of = size_of  # memory slices one instance of a profile occupies (its placement size)
_size = size_of


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


def _pack_compute_instances(gi_profile: MigProfile, forms: list[_Form], budget: Budget) -> list[_Unit]:
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
        (fill for fill in product(*(range(min(f.capacity, f.count, room // f.c) + 1) for f in forms))
         if any(fill) and sum(n * f.c for n, f in zip(fill, forms)) <= room),
        key=lambda fill: (-sum(fill), [-n for n in fill]),
    )

    @cache
    def fewest(left: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        budget.take(len(fills))
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


def _search(units: tuple[_Unit, ...], slices: int, budget: Budget, *, decided: bool) -> tuple[int | None, ...]:
    """A start per unit (None = left out) that places the most requested instances, exactly.

    The common case, a layout that fits, is ``search.place_all`` (skipped when the units need more memory
    slices than the GPU has). Otherwise memoised backtracking over (next unit, taken memory slices, media
    instances used); units come largest first and starts are tried lowest first, so ties resolve the same
    way every time. When the steps run out, a greedy placement is shown instead (every unit at its lowest
    free start, in order), unless whether they all fit was still open (``decided`` false: no count or
    total ruled the layout out): then SearchCut goes to the caller.
    """
    if sum(_size(u.profile) for u in units) <= slices:
        try:
            full = place_all([u.profile for u in units], slices, budget)
        except SearchCut:
            if not decided:
                raise
            return _greedy(units)
        if full is not None:
            return full

    @cache
    def best(i: int, taken: int, media: int) -> tuple[int, int, tuple[int | None, ...]]:
        if i == len(units):
            return (0, 0, ())
        u = units[i]
        budget.take(len(u.profile.placements) + 1)
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

    try:
        return best(0, 0, 0)[2]
    except SearchCut:
        return _greedy(units)


def _greedy(units: tuple[_Unit, ...]) -> tuple[int | None, ...]:
    """Each unit at its lowest free start, in order (None: none is free): a partial placement, not the best."""
    taken = media = 0
    starts: list[int | None] = []
    for u in units:
        start = None
        if not u.profile.media_extension or media < MAX_MEDIA_EXTENSION_INSTANCES:
            for p in u.profile.placements:
                mask = ((1 << p.size) - 1) << p.start
                if not taken & mask:
                    start, taken, media = p.start, taken | mask, media + u.profile.media_extension
                    break
        starts.append(start)
    return tuple(starts)


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
