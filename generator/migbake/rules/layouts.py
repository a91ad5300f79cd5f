"""Rules on GPU models and their MIG layouts: the model is known, the profiles exist, the layout fits.

Also the readers of an entry's model and layout that the other rules (``rules``) use.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from migbake.document.loader import LoadedProfile, as_mapping, gpu_entries, join_pointer
from migbake.gpu.catalog import PROFILE_NAME_RE, Catalog, GpuModel
from migbake.gpu.placement import fit
from migbake.gpu.suggestions import flow, nearest_layouts
from migbake.problems import Problem
from migbake.rules.declare import rule
from migbake.wording import article


@dataclass(frozen=True)
class LayoutEntry:
    """One ``profile: count`` pair of a layout, parsed."""

    name: str
    count: object
    pointer: str
    gi_name: str  # the GPU-instance profile it consumes (itself, or Gg.. for a Cc.Gg.. form)
    c: int | None
    g: int


def model_of(group: dict[str, Any], catalog: Catalog) -> GpuModel | None:
    """The catalog GPU an entry names, if it names exactly one (a GPU without MIG too: ``has_mig``)."""
    model = group.get("model")
    return catalog.find_gpu(model) if isinstance(model, str) else None


def entry_layouts(group_ptr: str, group: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each layout of an entry with its pointer: ``mig.layout``, and every layout of ``mig.layouts`` by name."""
    mig = as_mapping(group.get("mig"))
    out = [(f"{group_ptr}/mig/layout", as_mapping(mig.get("layout")))]
    out += [(join_pointer(f"{group_ptr}/mig/layouts", name), as_mapping(layout))
            for name, layout in as_mapping(mig.get("layouts")).items()]
    return out


def _parsed(layout_ptr: str, layout: dict[str, Any]) -> list[LayoutEntry]:
    out = []
    for name, count in layout.items():
        m = PROFILE_NAME_RE.match(str(name))
        if not m:
            continue  # the schema reports bad names
        g = int(m["g"])
        c = int(m["c"]) if m["c"] else None
        suffix = f"{m['sign']}{m['attrs']}" if m["sign"] else ""
        out.append(LayoutEntry(str(name), count, join_pointer(layout_ptr, name),
                               f"{g}g.{int(m['gb'])}gb{suffix}", c, g))
    return out


def layout_entries(group_ptr: str, group: dict[str, Any]) -> list[LayoutEntry]:
    """The entry's layouts (``mig.layout``, then each of ``mig.layouts``), parsed (names the grammar rejects are
    left to the schema)."""
    return [e for ptr, layout in entry_layouts(group_ptr, group) for e in _parsed(ptr, layout)]


def _ci_allowed(c: int, g: int) -> bool:
    # go-nvlib VisitMigProfiles emits Cc.Gg only for C <= G and (C == G or 2C <= G + 1)
    return c <= g and (c == g or 2 * c <= g + 1)


@rule("unknown-model", "error", "a GPU model the catalog does not know (with 'did you mean')")
@rule("ambiguous-model", "error", "a name that covers catalog models with different MIG profiles (H100, GH200, ...)")
def rule_known_model(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Every GPU model names one catalog model: not several, not a GPU without MIG, not an unknown one."""
    for ptr, group in gpu_entries(data):
        model = group.get("model")
        if isinstance(model, str) and catalog.find_gpu(model) is None:
            message, rule = catalog.unknown_model(model)
            yield loaded.problem(f"{ptr}/model", message, rule)


def _owners(catalog: Catalog, name: str, model: GpuModel) -> str:
    others = [m.display_name for m in catalog.owners_of_profile(name) if m.key != model.key]
    return f"; {name!r} is a profile of {', '.join(others)}" if others else ""


@rule("unknown-profile", "error", "a MIG profile the GPU model does not have")
@rule("non-canonical-profile", "error", "a profile name mig-parted would not match literally (7c.7g.40gb)")
@rule("count-not-positive", "error", "a layout count of zero or less")
@rule("count-above-max", "error", "more instances of a profile than the GPU model allows")
def rule_layout_profiles(loaded: LoadedProfile, data: object, catalog: Catalog) -> Iterator[Problem]:
    """Each layout entry names a canonical profile of its GPU model, with a count from 1 to its maximum."""
    for ptr, group in gpu_entries(data):
        model = model_of(group, catalog)
        if model is not None and not model.has_mig:
            continue  # rule_no_mig
        for e in layout_entries(ptr, group):
            if isinstance(e.count, int) and not isinstance(e.count, bool) and e.count < 1:
                yield loaded.problem(e.pointer, f"count {e.count} for {e.name!r}: must be at least 1; remove "
                                     "the key instead (mig-parted never finds a 0 equal to the GPU's state and "
                                     "re-creates every instance at each boot)", "count-not-positive")
            if model is None:
                continue
            if e.c is not None and e.c == e.g:
                yield loaded.problem(e.pointer, f"{e.name!r} is not the canonical spelling; write "
                                     f"{e.gi_name!r} (mig-parted compares names literally: assert would never "
                                     "match and apply would run at every boot)", "non-canonical-profile",
                                     key=True)
                continue
            gi = model.profile(e.gi_name)
            if gi is None:
                allowed = ", ".join(model.profile_names)
                yield loaded.problem(e.pointer, f"{e.name!r} is not a MIG profile of {model.display_name} "
                                     f"({model.key}); allowed: {allowed}{_owners(catalog, e.gi_name, model)}",
                                     "unknown-profile", key=True)
                continue
            if e.c is not None and not _ci_allowed(e.c, e.g):
                yield loaded.problem(e.pointer, f"{e.name!r}: a {e.g}g GPU instance has no {e.c}c compute-"
                                     "instance profile", "unknown-profile", key=True)
                continue
            if (e.c is None and isinstance(e.count, int) and not isinstance(e.count, bool)
                    and e.count > gi.max_count):
                yield loaded.problem(e.pointer, f"{e.count} x {e.name} requested; at most {gi.max_count} fit on "
                                     f"one {model.display_name}", "count-above-max")


def _layout_ok(layout_ptr: str, raw: dict[str, Any], problems_so_far: Sequence[Problem]) -> dict[str, int] | None:
    if any(p.pointer == layout_ptr or p.pointer.startswith(layout_ptr + "/") for p in problems_so_far):
        return None
    entries = _parsed(layout_ptr, raw)
    layout = {e.name: e.count for e in entries}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in layout.values()):
        return None
    if len(entries) != len(raw):
        return None
    return {k: int(str(v)) for k, v in layout.items()}


@rule("media-extension", "error", "more than one +me instance on a GPU")
@rule("compute-slices", "error", "the layout needs more compute slices than the GPU has")
@rule("placement", "error", "the instances cannot be placed on the GPU's memory slices without overlap", late=True)
def rule_layout_fits(loaded: LoadedProfile, data: object, catalog: Catalog,
                     earlier: Sequence[Problem]) -> Iterator[Problem]:
    """A layout fits its GPU: one media-extension instance at most, compute and memory slices, exact placement."""
    for ptr, group in gpu_entries(data):
        model = model_of(group, catalog)
        if model is None or not model.has_mig:
            continue
        for layout_ptr, raw in entry_layouts(ptr, group):
            yield from _fits(loaded, model, layout_ptr, raw, earlier)


def _fits(loaded: LoadedProfile, model: GpuModel, layout_ptr: str, raw: dict[str, Any],
          earlier: Sequence[Problem]) -> Iterator[Problem]:
    layout = _layout_ok(layout_ptr, raw, earlier)
    if not layout:
        return
    entries = _parsed(layout_ptr, raw)
    media = [e for e in entries if (p := model.profile(e.gi_name)) is not None and p.media_extension]
    if sum(layout[e.name] for e in media) > 1:
        names = ", ".join(f"{layout[e.name]} x {e.name}" for e in media)
        yield loaded.problem(layout_ptr, f"{names}: a GPU has one set of media engines, so at most one "
                             f"media-extension (+me) instance{_instead(model, layout)}", "media-extension")
        return
    result = fit(model, layout)
    if result.ok:
        return
    compute, memory = result.compute_slices, result.memory_slices
    if result.undecided:
        text, rule = f"cannot tell whether the instances can all be placed: {result.reason}", "placement"
    elif compute > model.total_compute_slices or memory > model.total_memory_slices:
        text = (f"the layout needs {compute} compute slices and {memory} memory slices; "
                f"{article(model.display_name)} {model.display_name} has {model.total_compute_slices} and "
                f"{model.total_memory_slices}")
        rule = "compute-slices" if compute > model.total_compute_slices else "placement"
    else:
        unplaced = ", ".join(result.unplaced)
        text = (f"the instances cannot all be placed on one {model.display_name}: {result.reason}"
                + (f" (left over: {unplaced})" if unplaced else ""))
        rule = "placement"
    yield loaded.problem(layout_ptr, text + _instead(model, layout), rule)


def _instead(model: GpuModel, layout: dict[str, int]) -> str:
    """``; layouts that fit: {...}, {...}`` (each validates when pasted back) and where to see them all; when a
    search behind them stopped at its bound, the words say the list is not all there is."""
    nearest = nearest_layouts(model, layout)
    fits = f"; layouts that fit: {', '.join(flow(n) for n in nearest.layouts)}" if nearest.layouts else ""
    if nearest.cut:
        return (f"{fits} (the search for layouts stopped at its bound of {nearest.steps:,} steps: nearer ones may "
                f"exist; `migbake layouts {model.key}` lists the maximal layouts it finds)")
    return f"{fits} (`migbake layouts {model.key}` lists every maximal layout)"
