"""``migbake layouts``: every maximal MIG layout of a GPU model, from an exact placement search."""

from __future__ import annotations

import json
from typing import Any

import click

from migbake.commands.common import GpuModelType
from migbake.commands.gpus import origin_note
from migbake.gpu.catalog import PROFILE_NAME_RE, CatalogChoice, GpuModel
from migbake.gpu.maximal import maximal_search
from migbake.gpu.placement import fit, memory_slices_of
from migbake.gpu.suggestions import flow
from migbake.wording import plural

SORTS = ("instances", "compute", "memory")


def _summary(m: GpuModel, lay: dict[str, int]) -> dict[str, Any]:
    """The added --json fields of one layout: instances, slices, memory, media extension."""
    profiles = {name: m.profile(name) for name in lay}
    slices = sum(memory_slices_of(p) * n for name, n in lay.items() if (p := profiles[name]))
    return {
        "instances": sum(lay.values()),
        "compute_slices": sum(p.compute_slices * n for name, n in lay.items() if (p := profiles[name])),
        "memory_slices": slices,
        "memory_gb": _memory_gb(m, lay, slices),
        "media_extension": any(p.media_extension for p in profiles.values() if p),
    }


def _memory_gb(m: GpuModel, lay: dict[str, int], slices: int) -> int:
    """The GPU's memory in the slices the layout uses (rounded half up), not the sum of the names' GB: the
    names round each instance (4g.71gb + 3g.71gb is 142 on a 141 GB H200). Names only for a model without
    a memory size."""
    if m.memory_gb and m.total_memory_slices:
        return (2 * slices * m.memory_gb + m.total_memory_slices) // (2 * m.total_memory_slices)
    return sum(int(match["gb"]) * n for name, n in lay.items() if (match := PROFILE_NAME_RE.match(name)))


@click.command()
@click.argument("model", type=GpuModelType(), required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--no-media", is_flag=True, help="Leave out media-extension (+me) profiles.")
@click.option("--sort", "sort_by", type=click.Choice(SORTS), default="instances", show_default=True,
              help="Order: fewest instances first; or most compute slices, or most memory, first.")
def layouts(model: GpuModel | None, as_json: bool, no_media: bool, sort_by: str) -> None:
    """List every maximal MIG layout of MODEL (no further instance can be added); without MODEL, the models.

    MODEL is a catalog id, name or alias (see `migbake gpus`). Each layout was found by an exact
    placement search over the model's profiles, counts, compute slices and placements, so each one
    validates: paste it into a profile's `mig.layout` as it is printed. The search is bounded (for a
    catalog file's GPU of many memory slices and profiles); when it stops at its bound, the list says it
    is incomplete (--json: "complete": false).
    """
    if model is None:
        click.echo("Give a model: migbake layouts MODEL (any id or name below; `migbake gpus` lists the names)")
        for m in click.get_current_context().ensure_object(CatalogChoice).load().models:
            click.echo(f"  {m.key:<30} {m.display_name}{origin_note(m)}")
        return
    m = model
    search = maximal_search(m, include_media=not no_media)
    found = search.layouts
    rows = [(lay, _summary(m, lay)) for lay in found]
    if as_json:
        click.echo(json.dumps({"model": m.key, "count": len(found), "layouts": [
            {"mig-devices": lay, "placements": [
                {"profile": p.profile, "start": p.start, "size": p.size} for p in fit(m, lay).placements],
             **summary}
            for lay, summary in rows], "complete": search.complete}, indent=2))
        return
    order = {"instances": lambda r: r[1]["instances"], "compute": lambda r: -r[1]["compute_slices"],
             "memory": lambda r: -r[1]["memory_gb"]}[sort_by]
    rows.sort(key=order)  # stable: ties keep the enumeration's order (most memory, then compute, first)
    if not search.complete:
        click.echo(f"{m.key} ({m.display_name}): the search stopped at its bound of {search.steps:,} steps; the "
                   f"{plural(len(found), 'maximal layout')} below are the ones it found, not all there are")
    click.echo(f"{m.key} ({m.display_name}): {plural(len(found), 'maximal layout')}; compute = compute slices "
               f"used of {m.total_compute_slices}, memory = memory slices used of {m.total_memory_slices}, GB = "
               "the GPU's memory in those slices, +me = has a media-extension instance")
    shown = [flow(lay) for lay, _ in rows]
    width = max((len(s) for s in shown), default=6)
    click.echo(f"  {'layout':<{width}}  instances  compute  memory     GB  +me")
    for text, (_, s) in zip(shown, rows):
        click.echo(f"  {text:<{width}}  {s['instances']:>9}  {s['compute_slices']:>3}/{m.total_compute_slices:<3}"
                   f"  {s['memory_slices']:>3}/{m.total_memory_slices:<3} {s['memory_gb']:>5}  "
                   f"{'yes' if s['media_extension'] else 'no'}")
