"""Commands on the GPU catalog: gpus, layouts."""

from __future__ import annotations

import json

import click

from migbake.commands.base import guard, main, plural

# --- gpus --------------------------------------------------------------------------------------

@main.command()
@click.option("--profiles", "show_profiles", is_flag=True, help="Also list each model's MIG profiles.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--markdown", is_flag=True, help="Print a Markdown table (the one in the README).")
@guard
def gpus(show_profiles: bool, as_json: bool, markdown: bool) -> None:
    """List the GPU models migbake knows: ids, names, aliases, PCI ids, MIG profiles."""
    from migbake.catalog import load_catalog

    cat = load_catalog()
    if markdown:
        click.echo("| id | generation | MIG mode after reboot | names and aliases | PCI device ids |")
        click.echo("|---|---|---|---|---|")
        for m in cat.models:
            click.echo(f"| `{m.key}` | {m.generation} | {'kept' if m.mig_mode_persists else 'lost'} | "
                       f"{', '.join(m.names + m.aliases)} | {', '.join(m.pci_device_ids)} |")
        return
    if as_json:
        rows = [{
            "id": m.key, "names": list(m.names), "aliases": list(m.aliases), "generation": m.generation,
            "pci_device_ids": list(m.pci_device_ids), "mig_mode_persists_across_reboot": m.mig_mode_persists,
            "compute_slices": m.total_compute_slices, "memory_slices": m.total_memory_slices,
            "profiles": [{"name": p.name, "max_count": p.max_count, "memory_slices": p.memory_slices,
                          "compute_slices": p.compute_slices} for p in m.profiles],
        } for m in cat.models]
        click.echo(json.dumps(rows, indent=2))
        return
    for m in cat.models:
        persist = "mode survives reboot" if m.mig_mode_persists else "mode lost at reboot"
        click.echo(f"{m.key:<30} {m.generation:<10} {persist:<22} {', '.join(m.pci_device_ids)}")
        click.echo(f"{'':<30} names: {', '.join(m.names + m.aliases)}")
        if show_profiles:
            for p in m.profiles:
                click.echo(f"{'':<30} {p.name:<16} max {p.max_count}  memory slices {p.memory_slices}/"
                           f"{m.total_memory_slices}  compute slices {p.compute_slices}/"
                           f"{m.total_compute_slices}")


# --- layouts -----------------------------------------------------------------------------------

@main.command()
@click.argument("model")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--no-media", is_flag=True, help="Leave out media-extension (+me) profiles.")
@guard
def layouts(model: str, as_json: bool, no_media: bool) -> None:
    """List every maximal MIG layout of MODEL (no further instance can be added).

    MODEL is a catalog id, name or alias (see `migbake gpus`). Each layout was found by an exact
    placement search over the model's profiles, counts and placements.
    """
    from migbake.catalog import load_catalog
    from migbake.layout import fit, maximal_layouts

    cat = load_catalog()
    m = cat.find(model)
    if m is None:
        close = cat.close_matches(model)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise click.BadParameter(f"unknown GPU model {model!r}.{hint}", param_hint="MODEL")
    found = maximal_layouts(m, include_media=not no_media)
    if as_json:
        click.echo(json.dumps({"model": m.key, "count": len(found), "layouts": [
            {"mig-devices": lay, "placements": [
                {"profile": p.profile, "start": p.start, "size": p.size} for p in fit(m, lay).placements]}
            for lay in found]}, indent=2))
        return
    click.echo(f"{m.key} ({m.display_name}): {plural(len(found), 'maximal layout')}")
    for lay in found:
        click.echo("  " + ", ".join(f"{n} x{c}" for n, c in lay.items()))
