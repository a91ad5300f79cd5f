"""Commands on the GPU catalog: gpus, layouts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from migbake.commands.base import GpuModelType, guard, main, plural

if TYPE_CHECKING:
    from migbake.catalog import Catalog, GpuModel

# --- gpus --------------------------------------------------------------------------------------


def _notes(m: GpuModel) -> str:
    return "; ".join(f"{alias}: {note}" for alias, note in m.alias_notes.items())


def _origin(m: GpuModel) -> str:
    return f" (from {m.origin})" if m.origin else ""


def _markdown(cat: Catalog) -> None:
    click.echo("| id | generation | MIG mode after reboot | names and aliases | nvidia-smi prints | notes "
               "| PCI device ids |")
    click.echo("|---|---|---|---|---|---|---|")
    for m in cat.models:
        click.echo(f"| `{m.key}`{_origin(m)} | {m.generation} | {'kept' if m.mig_mode_persists else 'lost'} | "
                   f"{', '.join(m.names + m.aliases)} | {', '.join(m.nvidia_smi_names)} | {_notes(m)} | "
                   f"{', '.join(m.pci_device_ids)} |")
    if cat.non_mig_gpus:
        click.echo(f"\nGPUs without MIG (a profile lists one only with `mig: {{enabled: false}}`, `no-mig`): "
                   f"{', '.join(g.short_name for g in cat.non_mig_gpus)}.")


def _json_rows(cat: Catalog) -> list[dict[str, Any]]:
    return [{
        "id": m.key, "names": list(m.names), "aliases": list(m.aliases), "generation": m.generation,
        "pci_device_ids": list(m.pci_device_ids), "mig_mode_persists_across_reboot": m.mig_mode_persists,
        "compute_slices": m.total_compute_slices, "memory_slices": m.total_memory_slices,
        "profiles": [{"name": p.name, "max_count": p.max_count, "memory_slices": p.memory_slices,
                      "compute_slices": p.compute_slices} for p in m.profiles],
        "nvidia_smi_names": list(m.nvidia_smi_names), "alias_notes": dict(m.alias_notes),
        "memory_gb": m.memory_gb, "from_catalog_file": m.origin or None,
    } for m in cat.models]


@main.command()
@click.option("--profiles", "show_profiles", is_flag=True, help="Also list each model's MIG profiles.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--markdown", is_flag=True, help="Print a Markdown table (the one in the README).")
@guard
def gpus(show_profiles: bool, as_json: bool, markdown: bool) -> None:
    """List the GPU models migbake knows: ids, names, what nvidia-smi prints, PCI ids, MIG profiles.

    A profile's `model` may be the id or any of the names (any case, with or without `NVIDIA`).
    Models from a --catalog file are marked with it.
    """
    from migbake.catalog import load_catalog

    cat = load_catalog()
    if markdown:
        _markdown(cat)
        return
    if as_json:
        click.echo(json.dumps(_json_rows(cat), indent=2))
        return
    for m in cat.models:
        persist = "mode survives reboot" if m.mig_mode_persists else "mode lost at reboot"
        click.echo(f"{m.key:<30} {m.generation:<10} {persist:<22} {', '.join(m.pci_device_ids)}{_origin(m)}")
        click.echo(f"{'':<30} names: {', '.join(m.names + m.aliases)}")
        if m.nvidia_smi_names:
            click.echo(f"{'':<30} nvidia-smi prints: {', '.join(m.nvidia_smi_names)}")
        if m.alias_notes:
            click.echo(f"{'':<30} notes: {_notes(m)}")
        if show_profiles:
            for p in m.profiles:
                click.echo(f"{'':<30} {p.name:<16} max {p.max_count}  memory slices {p.memory_slices}/"
                           f"{m.total_memory_slices}  compute slices {p.compute_slices}/"
                           f"{m.total_compute_slices}")
    if cat.non_mig_gpus:
        click.echo(f"\nwithout MIG (refused in a profile): {', '.join(g.short_name for g in cat.non_mig_gpus)}")


# --- layouts -----------------------------------------------------------------------------------

SORTS = ("instances", "compute", "memory")


def _summary(m: GpuModel, lay: dict[str, int]) -> dict[str, Any]:
    """The added --json fields of one layout: instances, slices, memory, media extension."""
    from migbake.catalog import PROFILE_NAME_RE
    from migbake.layout import memory_slices_of

    profiles = {name: m.profile(name) for name in lay}
    return {
        "instances": sum(lay.values()),
        "compute_slices": sum(p.compute_slices * n for name, n in lay.items() if (p := profiles[name])),
        "memory_slices": sum(memory_slices_of(p) * n for name, n in lay.items() if (p := profiles[name])),
        "memory_gb": sum(int(match["gb"]) * n for name, n in lay.items() if (match := PROFILE_NAME_RE.match(name))),
        "media_extension": any(p.media_extension for p in profiles.values() if p),
    }


@main.command()
@click.argument("model", type=GpuModelType(), required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--no-media", is_flag=True, help="Leave out media-extension (+me) profiles.")
@click.option("--sort", "sort_by", type=click.Choice(SORTS), default="instances", show_default=True,
              help="Order: fewest instances first; or most compute slices, or most memory, first.")
@guard
def layouts(model: GpuModel | None, as_json: bool, no_media: bool, sort_by: str) -> None:
    """List every maximal MIG layout of MODEL (no further instance can be added); without MODEL, the models.

    MODEL is a catalog id, name or alias (see `migbake gpus`). Each layout was found by an exact
    placement search over the model's profiles, counts and placements. Paste a layout into a
    profile's `mig.layout` as it is printed.
    """
    from migbake.catalog import load_catalog
    from migbake.layout import fit, maximal_layouts
    from migbake.suggestions import flow

    if model is None:
        click.echo("Give a model: migbake layouts MODEL (any id or name below; `migbake gpus` lists the names)")
        for m in load_catalog().models:
            click.echo(f"  {m.key:<30} {m.display_name}{_origin(m)}")
        return
    m = model
    found = maximal_layouts(m, include_media=not no_media)
    rows = [(lay, _summary(m, lay)) for lay in found]
    if as_json:
        click.echo(json.dumps({"model": m.key, "count": len(found), "layouts": [
            {"mig-devices": lay, "placements": [
                {"profile": p.profile, "start": p.start, "size": p.size} for p in fit(m, lay).placements],
             **summary}
            for lay, summary in rows]}, indent=2))
        return
    order = {"instances": lambda r: r[1]["instances"], "compute": lambda r: -r[1]["compute_slices"],
             "memory": lambda r: -r[1]["memory_gb"]}[sort_by]
    rows.sort(key=order)  # stable: ties keep the enumeration's order (most memory, then compute, first)
    click.echo(f"{m.key} ({m.display_name}): {plural(len(found), 'maximal layout')}; compute = compute slices "
               f"used of {m.total_compute_slices}, memory = memory slices used of {m.total_memory_slices}, GB = "
               "memory of the instances, +me = has a media-extension instance")
    shown = [flow(lay) for lay, _ in rows]
    width = max((len(s) for s in shown), default=6)
    click.echo(f"  {'layout':<{width}}  instances  compute  memory     GB  +me")
    for text, (_, s) in zip(shown, rows, strict=True):
        click.echo(f"  {text:<{width}}  {s['instances']:>9}  {s['compute_slices']:>3}/{m.total_compute_slices:<3}"
                   f"  {s['memory_slices']:>3}/{m.total_memory_slices:<3} {s['memory_gb']:>5}  "
                   f"{'yes' if s['media_extension'] else 'no'}")
